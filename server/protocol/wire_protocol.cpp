#include "wire_protocol.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace warpguard::protocol {

namespace {

constexpr double kDegToRad = 3.14159265358979323846 / 180.0;

std::vector<std::string_view> split(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= line.size(); ++i) {
        if (i == line.size() || line[i] == ';') {
            out.push_back(line.substr(start, i - start));
            start = i + 1;
        }
    }
    return out;
}

std::string shown(std::string_view v) {
    std::string s(v.substr(0, 40));
    for (char& c : s) {
        if (static_cast<unsigned char>(c) < 32 || static_cast<unsigned char>(c) > 126) c = '?';
    }
    return s;
}

[[noreturn]] void refuse(const std::string& field, std::string_view got, const std::string& expected) {
    throw ProtocolError("handshake field " + field + " is '" + shown(got) + "'; expected " + expected);
}

// The value of a field that must be one of a few names.
template <typename E>
E one_of(const std::string& field, std::string_view got, std::initializer_list<std::pair<std::string_view, E>> names,
         const std::string& expected) {
    for (const auto& [name, value] : names) {
        if (got == name) return value;
    }
    refuse(field, got, expected);
}

template <typename T>
bool number(std::string_view text, T& value) {
    if (text.empty()) return false;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && p == text.data() + text.size();
}

DecodeResult failure(std::size_t consumed, const char* format, std::string_view field, std::string_view value) {
    DecodeResult r;
    r.status = Status::Error;
    r.consumed = consumed;
    char shown_value[48];
    const std::size_t n = std::min<std::size_t>(value.size(), 40);
    for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(value[i]);
        shown_value[i] = c < 32 || c > 126 ? '?' : static_cast<char>(c);
    }
    shown_value[n] = '\0';
    std::snprintf(r.error.data(), r.error.size(), format, static_cast<int>(field.size()), field.data(), shown_value);
    return r;
}

std::uint32_t be32(const char* p) {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) | std::uint32_t{u[3]};
}

void put_be32(std::string& out, std::uint32_t v) {
    out.push_back(static_cast<char>(v >> 24));
    out.push_back(static_cast<char>(v >> 16));
    out.push_back(static_cast<char>(v >> 8));
    out.push_back(static_cast<char>(v));
}

}  // namespace

std::string to_string(Vendor v) { return v == Vendor::UR ? "ur" : v == Vendor::ABB ? "abb" : "denso"; }

double PositionUnits::to_si(std::size_t joint) const {
    if (angles == AngleUnit::Rad) return 1.0;
    return is_linear(joint) ? 1e-3 : kDegToRad;
}

std::vector<std::size_t> linear_joints(std::uint32_t linear) {
    std::vector<std::size_t> out;
    for (std::size_t j = 0; j < 32; ++j) {
        if ((linear >> j) & 1U) out.push_back(j + 1);
    }
    return out;
}

std::string linear_joints_text(std::uint32_t linear) { return fmt::format("{}", fmt::join(linear_joints(linear), ",")); }

namespace {

// `linear=J[,J…]` of a handshake with `joints` joints: distinct joints 1..joints.
std::uint32_t parse_linear_option(std::string_view option, std::size_t joints) {
    const std::string_view list = option.substr(std::string_view("linear=").size());
    const std::string expected = fmt::format("linear=J[,J...] with distinct joints from 1 to {}", joints);
    std::uint32_t mask = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= list.size(); ++i) {
        if (i < list.size() && list[i] != ',') continue;
        std::size_t joint = 0;
        if (!number(list.substr(start, i - start), joint) || joint < 1 || joint > joints || ((mask >> (joint - 1)) & 1U)) {
            refuse("option", option, expected.c_str());
        }
        mask |= 1U << (joint - 1);
        start = i + 1;
    }
    return mask;
}

}  // namespace

Handshake parse_handshake(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto f = split(line);
    if (f.size() < 10 || f.size() > 13) {
        throw ProtocolError("handshake has " + std::to_string(f.size()) +
                            " fields; expected 10 to 13: WG1;id;vendor;signal;unit;joints;angles;period_ms;timeout_ms;framing"
                            "[;payload][;override][;linear=J,...]");
    }
    if (f[0] != "WG1") refuse("version", f[0], "WG1");
    Handshake h;
    if (f[1].empty() || f[1].size() > 32 ||
        !std::all_of(f[1].begin(), f[1].end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; })) {
        refuse("robot id", f[1], "1-32 characters A-Z a-z 0-9 - _ .");
    }
    h.robot_id = std::string(f[1]);
    h.vendor = one_of<Vendor>("vendor", f[2], {{"ur", Vendor::UR}, {"abb", Vendor::ABB}, {"denso", Vendor::Denso}},
                              "ur, abb or denso");
    try {
        h.signal = parse_signal_kind(std::string(f[3]));
    } catch (const std::invalid_argument&) {
        refuse("signal", f[3], "torque or current");
    }
    try {
        h.unit = parse_signal_unit(std::string(f[4]));
    } catch (const std::invalid_argument&) {
        refuse("unit", f[4], "Nm, A or percent");
    }
    if ((h.signal == SignalKind::Torque && h.unit == SignalUnit::A) || (h.signal == SignalKind::Current && h.unit == SignalUnit::Nm)) {
        refuse("unit", f[4], h.signal == SignalKind::Torque ? "Nm or percent for torque" : "A or percent for current");
    }
    std::size_t joints = 0;
    if (!number(f[5], joints) || joints < 1 || joints > kMaxJoints) refuse("joints", f[5], "an integer from 1 to 16");
    h.joints = joints;
    h.angles = one_of<AngleUnit>("angles", f[6], {{"rad", AngleUnit::Rad}, {"deg", AngleUnit::Deg}}, "rad or deg");
    int period = 0, timeout = 0;
    if (!number(f[7], period) || period < 1 || period > 1000) refuse("period", f[7], "milliseconds from 1 to 1000");
    if (!number(f[8], timeout) || timeout < 1 || timeout > 1000) refuse("timeout", f[8], "milliseconds from 1 to 1000");
    h.period = period / 1000.0;
    h.timeout = timeout / 1000.0;
    h.framing = one_of<Framing>("framing", f[9], {{"ascii", Framing::Ascii}, {"binary", Framing::Binary}, {"ident", Framing::Ident}},
                                "ascii, binary or ident");
    bool linear_given = false;
    for (std::size_t k = 10; k < f.size(); ++k) {
        if (f[k] == "payload" && !h.payload) {
            h.payload = true;
        } else if (f[k] == "override" && !h.speed_override) {
            h.speed_override = true;
        } else if (f[k].substr(0, 7) == "linear=" && !linear_given) {
            h.linear = parse_linear_option(f[k], h.joints);
            linear_given = true;
        } else {
            refuse("option", f[k],
                   "payload (every sample ends with the declared payload in kg), override (then the speed override in "
                   "percent) or linear=J[,J...] (joints whose positions are mm with deg, m with rad), each at most once");
        }
    }
    return h;
}

std::string encode_handshake(const Handshake& h) {
    return "WG1;" + h.robot_id + ";" + to_string(h.vendor) + ";" + to_string(h.signal) + ";" + to_string(h.unit) + ";" +
           std::to_string(h.joints) + ";" + (h.angles == AngleUnit::Rad ? "rad" : "deg") + ";" +
           std::to_string(std::lround(h.period * 1000.0)) + ";" + std::to_string(std::lround(h.timeout * 1000.0)) + ";" +
           (h.framing == Framing::Ascii ? "ascii" : h.framing == Framing::Binary ? "binary" : "ident") + (h.payload ? ";payload" : "") +
           (h.speed_override ? ";override" : "") + (h.linear != 0 ? ";linear=" + linear_joints_text(h.linear) : "") + "\n";
}

SampleDecoder::SampleDecoder(const Handshake& h)
    : joints_(h.joints), payload_(h.payload), override_(h.speed_override), framing_(h.framing) {
    if (joints_ < 1 || joints_ > kMaxJoints) throw ProtocolError("a sample decoder needs 1 to 16 joints");
    for (std::size_t j = 0; j < joints_; ++j) position_scale_[j] = h.positions().to_si(j);
}

DecodeResult SampleDecoder::next(std::span<const char> buffer, SampleFrame& out) const {
    return framing_ == Framing::Ascii ? next_ascii(buffer, out) : next_binary(buffer, out);
}

DecodeResult SampleDecoder::next_ascii(std::span<const char> buffer, SampleFrame& out) const {
    const auto end = std::find(buffer.begin(), buffer.end(), '\n');
    if (end == buffer.end()) {
        if (buffer.size() > kMaxLine) return failure(buffer.size(), "%.*s longer than 1024 bytes without a line end (starts '%s')", "line", std::string_view(buffer.data(), buffer.size()));
        return DecodeResult{};
    }
    const std::size_t length = static_cast<std::size_t>(end - buffer.begin());
    const std::size_t consumed = length + 1;
    std::string_view line(buffer.data(), length);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // Fields without allocating: walk the separators.
    const std::size_t expected = 4 + 2 * joints_ + (payload_ ? 1 : 0) + (override_ ? 1 : 0);
    std::size_t field = 0, start = 0;
    std::array<std::string_view, 6 + 2 * kMaxJoints> fields;
    for (std::size_t i = 0; i <= line.size(); ++i) {
        if (i == line.size() || line[i] == ';') {
            if (field < fields.size()) fields[field] = line.substr(start, i - start);
            ++field;
            start = i + 1;
        }
    }
    if (field != expected) {
        char count[32];
        std::snprintf(count, sizeof count, "%zu fields, expected %zu", field, expected);
        return failure(consumed, "%.*s in sample line '%s'", count, line);
    }
    static constexpr const char* kNames[] = {"seq", "cycle", "mode", "t"};
    std::int64_t seq = 0, cycle = 0;
    std::uint32_t mode = 0;
    double t = 0;
    if (!number(fields[0], seq)) return failure(consumed, "field %.*s is '%s'; expected an integer", kNames[0], fields[0]);
    if (!number(fields[1], cycle)) return failure(consumed, "field %.*s is '%s'; expected an integer", kNames[1], fields[1]);
    if (!number(fields[2], mode)) return failure(consumed, "field %.*s is '%s'; expected an unsigned integer", kNames[2], fields[2]);
    if (!number(fields[3], t) || !std::isfinite(t)) return failure(consumed, "field %.*s is '%s'; expected a number of seconds", kNames[3], fields[3]);
    out.seq = seq;
    out.cycle = cycle;
    out.mode = mode;
    out.t = t;
    out.joints = joints_;
    for (std::size_t j = 0; j < 2 * joints_; ++j) {
        double v = 0;
        const std::string_view text = fields[4 + j];
        if (!number(text, v) || !std::isfinite(v)) {
            char name[16];
            std::snprintf(name, sizeof name, "%s%zu", j < joints_ ? "signal" : "angle", (j % joints_) + 1);
            return failure(consumed, "field %.*s is '%s'; expected a finite number", name, text);
        }
        if (j < joints_) {
            out.signal[j] = v;
        } else {
            out.angle[j - joints_] = v * position_scale_[j - joints_];
        }
    }
    out.payload = std::numeric_limits<double>::quiet_NaN();
    if (payload_) {
        const std::string_view text = fields[4 + 2 * joints_];
        double v = 0;
        if (!number(text, v) || !std::isfinite(v) || v < 0) {
            return failure(consumed, "field %.*s is '%s'; expected a mass >= 0 kg", "payload", text);
        }
        out.payload = v;
    }
    out.speed_override = std::numeric_limits<double>::quiet_NaN();
    if (override_) {
        const std::string_view text = fields[4 + 2 * joints_ + (payload_ ? 1 : 0)];
        double v = 0;
        if (!number(text, v) || !(v >= 0 && v <= 100)) {
            return failure(consumed, "field %.*s is '%s'; expected a speed override from 0 to 100 percent", "override", text);
        }
        out.speed_override = v / 100.0;
    }
    DecodeResult r;
    r.status = Status::Ok;
    r.consumed = consumed;
    return r;
}

DecodeResult SampleDecoder::next_binary(std::span<const char> buffer, SampleFrame& out) const {
    const std::size_t size = binary_frame_size();
    if (buffer.size() < 4) return DecodeResult{};
    if (buffer[0] != 'W' || buffer[1] != 'G') {
        // Resynchronise on the next magic: drop what cannot start a frame.
        std::size_t skip = 1;
        while (skip + 1 < buffer.size() && !(buffer[skip] == 'W' && buffer[skip + 1] == 'G')) ++skip;
        return failure(skip, "%.*s is '%s'; expected 'WG'", "frame magic", std::string_view(buffer.data(), 2));
    }
    if (buffer[2] != kVersion) {
        char v[8];
        std::snprintf(v, sizeof v, "%d", static_cast<unsigned char>(buffer[2]));
        return failure(size <= buffer.size() ? size : buffer.size(), "%.*s is %s; expected 1", "frame version", v);
    }
    if (static_cast<unsigned char>(buffer[3]) != joints_) {
        char got[8];
        std::snprintf(got, sizeof got, "%d", static_cast<unsigned char>(buffer[3]));
        return failure(size <= buffer.size() ? size : buffer.size(), "%.*s is %s; the handshake said otherwise", "frame joint count", got);
    }
    if (buffer.size() < size) return DecodeResult{};
    const char* p = buffer.data();
    auto f32 = [](const char* q) { return static_cast<double>(std::bit_cast<float>(be32(q))); };
    out.seq = be32(p + 4);
    out.cycle = static_cast<std::int32_t>(be32(p + 8));
    out.mode = be32(p + 12);
    out.t = f32(p + 16);
    out.joints = joints_;
    for (std::size_t j = 0; j < joints_; ++j) {
        out.signal[j] = f32(p + 20 + 4 * j);
        out.angle[j] = f32(p + 20 + 4 * (joints_ + j)) * position_scale_[j];
    }
    for (std::size_t j = 0; j < joints_; ++j) {
        if (!std::isfinite(out.signal[j]) || !std::isfinite(out.angle[j]) || !std::isfinite(out.t)) {
            return failure(size, "%.*s %s is not a finite number", "binary frame", "field");
        }
    }
    out.payload = std::numeric_limits<double>::quiet_NaN();
    if (payload_) {
        out.payload = f32(p + 20 + 8 * joints_);
        if (!std::isfinite(out.payload) || out.payload < 0) {
            char got[32];
            std::snprintf(got, sizeof got, "%g", out.payload);
            return failure(size, "%.*s is %s; expected a mass >= 0 kg", "binary frame payload", got);
        }
    }
    out.speed_override = std::numeric_limits<double>::quiet_NaN();
    if (override_) {
        const double v = f32(p + 20 + 8 * joints_ + (payload_ ? 4 : 0));
        if (!(v >= 0 && v <= 100)) {
            char got[32];
            std::snprintf(got, sizeof got, "%g", v);
            return failure(size, "%.*s is %s; expected a speed override from 0 to 100 percent", "binary frame override", got);
        }
        out.speed_override = v / 100.0;
    }
    DecodeResult r;
    r.status = Status::Ok;
    r.consumed = size;
    return r;
}

std::size_t encode_reply(Vendor vendor, Reply reply, std::span<char, 4> out) {
    const bool stop = reply == Reply::Stop;
    if (vendor == Vendor::Denso) {
        out[0] = stop ? '1' : '0';
        out[1] = '\n';
        return 2;
    }
    out[0] = out[1] = out[2] = 0;  // int32, network byte order
    out[3] = stop ? 1 : 0;
    return 4;
}

std::string encode_sample_ascii(const SampleFrame& s, PositionUnits units) {
    char buf[64];
    std::string line;
    std::snprintf(buf, sizeof buf, "%lld;%lld;%u;%.6f", static_cast<long long>(s.seq), static_cast<long long>(s.cycle), s.mode, s.t);
    line += buf;
    for (std::size_t j = 0; j < s.joints; ++j) {
        std::snprintf(buf, sizeof buf, ";%.6g", s.signal[j]);
        line += buf;
    }
    for (std::size_t j = 0; j < s.joints; ++j) {
        std::snprintf(buf, sizeof buf, ";%.9g", s.angle[j] / units.to_si(j));
        line += buf;
    }
    if (std::isfinite(s.payload)) {
        std::snprintf(buf, sizeof buf, ";%.6g", s.payload);
        line += buf;
    }
    if (std::isfinite(s.speed_override)) {
        std::snprintf(buf, sizeof buf, ";%.6g", s.speed_override * 100.0);
        line += buf;
    }
    return line + "\n";
}

std::string encode_sample_binary(const SampleFrame& s) {
    std::string out = "WG";
    out.push_back(static_cast<char>(kVersion));
    out.push_back(static_cast<char>(s.joints));
    put_be32(out, static_cast<std::uint32_t>(s.seq));
    put_be32(out, static_cast<std::uint32_t>(static_cast<std::int32_t>(s.cycle)));
    put_be32(out, s.mode);
    put_be32(out, std::bit_cast<std::uint32_t>(static_cast<float>(s.t)));
    for (std::size_t j = 0; j < s.joints; ++j) put_be32(out, std::bit_cast<std::uint32_t>(static_cast<float>(s.signal[j])));
    for (std::size_t j = 0; j < s.joints; ++j) put_be32(out, std::bit_cast<std::uint32_t>(static_cast<float>(s.angle[j])));
    if (std::isfinite(s.payload)) put_be32(out, std::bit_cast<std::uint32_t>(static_cast<float>(s.payload)));
    if (std::isfinite(s.speed_override)) put_be32(out, std::bit_cast<std::uint32_t>(static_cast<float>(s.speed_override * 100.0)));
    return out;
}

IdentLine parse_ident_line(std::string_view line, std::size_t joints, PositionUnits units) {
    std::vector<std::string_view> f;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= line.size(); ++i) {
        if (i == line.size() || line[i] == ';') {
            f.push_back(line.substr(start, i - start));
            start = i + 1;
        }
    }
    const auto bad = [&](const std::string& field, std::string_view got, const char* expected) {
        throw ProtocolError(fmt::format("identification line: {} is '{}'; expected {}", field, std::string(got.substr(0, 40)), expected));
    };
    const auto real = [&](const std::string& field, std::string_view text) {
        double v = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) bad(field, text, "a finite number");
        return v;
    };
    IdentLine out;
    if (f[0] == "IE") {
        if (f.size() != 1) bad("IE", line, "IE alone");
        out.kind = IdentLine::Kind::End;
    } else if (f[0] == "IQ") {
        if (f.size() != joints + 2) {
            bad("the field count", std::to_string(f.size()), fmt::format("{}: IQ;joint;q1..q{}", joints + 2, joints).c_str());
        }
        std::size_t joint = 0;
        if (!number(f[1], joint) || joint < 1 || joint > joints) bad("joint", f[1], fmt::format("1 to {}", joints).c_str());
        out.kind = IdentLine::Kind::Angles;
        out.joint = joint;
        for (std::size_t j = 0; j < joints; ++j) out.q[j] = real(fmt::format("q{}", j + 1), f[j + 2]) * units.to_si(j);
    } else if (f[0] == "IP") {
        if (f.size() != 4) bad("the field count", std::to_string(f.size()), "4: IP;x;y;z");
        out.kind = IdentLine::Kind::Point;
        for (std::size_t k = 0; k < 3; ++k) out.p[k] = real(std::string(1, "xyz"[k]), f[k + 1]);
    } else {
        bad("the line type", f[0], "IQ, IP or IE");
    }
    return out;
}

std::string encode_ident_angles(std::size_t joint, std::span<const double> q_si, PositionUnits units) {
    std::string out = fmt::format("IQ;{}", joint);
    for (std::size_t j = 0; j < q_si.size(); ++j) out += fmt::format(";{:.6f}", q_si[j] / units.to_si(j));
    return out + "\n";
}

std::string encode_ident_point(double x, double y, double z) { return fmt::format("IP;{:.6f};{:.6f};{:.6f}\n", x, y, z); }

}  // namespace warpguard::protocol
