#include "warpguard/recording_csv.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <istream>
#include <ostream>
#include <string_view>

#include <fmt/format.h>

namespace warpguard {

namespace {

std::string shorten(std::string_view text) {
    constexpr std::size_t kMax = 40;
    if (text.size() <= kMax) return std::string(text);
    return std::string(text.substr(0, kMax)) + "...";
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= line.size(); ++i) {
        if (i == line.size() || line[i] == ',') {
            fields.push_back(trim(line.substr(start, i - start)));
            start = i + 1;
        }
    }
    return fields;
}

std::vector<std::string> expected_header(std::size_t joints) {
    std::vector<std::string> names{"t", "seq", "cycle", "mode"};
    for (std::size_t j = 1; j <= joints; ++j) names.push_back(fmt::format("tau{}", j));
    for (std::size_t j = 1; j <= joints; ++j) names.push_back(fmt::format("q{}", j));
    return names;
}

const std::vector<std::string> kGroundTruthColumns{"contact", "contact_force", "contact_link"};

class Parser {
public:
    Parser(std::istream& in, std::string name) : in_(in), name_(std::move(name)) {}

    Recording parse() {
        std::string line;
        RecordingInfo info;
        std::optional<std::size_t> joints;
        std::optional<SignalKind> signal;
        std::optional<SignalUnit> unit;
        std::size_t unit_line = 0;

        // Metadata block, then the header row.
        bool have_header = false;
        while (next_line(line)) {
            std::string_view view = trim(line);
            if (view.empty()) continue;
            if (view.front() != '#') {
                have_header = true;
                break;
            }
            view.remove_prefix(1);
            const auto colon = view.find(':');
            if (colon == std::string_view::npos) {
                fail(1, fmt::format("metadata line must be '# key: value' (got '{}')", shorten(trim(line))));
            }
            const std::string key(trim(view.substr(0, colon)));
            const std::string value(trim(view.substr(colon + 1)));
            std::size_t value_start = line.find(':') + 1;
            while (value_start < line.size() && (line[value_start] == ' ' || line[value_start] == '\t')) ++value_start;
            const std::size_t value_column = value_start + 1;  // 1-based
            try {
                if (key == "joints") {
                    std::size_t n = 0;
                    const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
                    if (ec != std::errc() || p != value.data() + value.size() || n == 0 || n > 64) {
                        fail(value_column, fmt::format("joints must be an integer from 1 to 64 (got '{}')", value));
                    }
                    joints = n;
                } else if (key == "signal") {
                    signal = parse_signal_kind(value);
                } else if (key == "unit") {
                    unit = parse_signal_unit(value);
                    unit_line = line_no_;
                } else if (key == "robot") {
                    info.robot = value;
                } else if (key == "source") {
                    info.source = value;
                } else {
                    info.extra[key] = value;
                }
            } catch (const std::invalid_argument& e) {
                fail(value_column, e.what());
            }
        }
        if (!joints) fail_file("metadata '# joints: N' is missing");
        if (!signal) fail_file("metadata '# signal: torque|current' is missing");
        if (!unit) fail_file("metadata '# unit: Nm|A|percent' is missing");
        const bool unit_fits = (*signal == SignalKind::Torque && *unit != SignalUnit::A) ||
                               (*signal == SignalKind::Current && *unit != SignalUnit::Nm);
        if (!unit_fits) {
            line_no_ = unit_line;
            fail(0, fmt::format("unit '{}' does not fit signal '{}'; torque is in Nm or percent, current in A or percent",
                                to_string(*unit), to_string(*signal)));
        }
        info.signal = *signal;
        info.unit = *unit;
        if (!have_header) fail_file("header row 't,seq,cycle,mode,tau1..,q1..' is missing");

        // Header.
        const auto header = split_fields(line);
        const auto expected = expected_header(*joints);
        for (std::size_t c = 0; c < expected.size(); ++c) {
            if (c >= header.size()) {
                fail(c + 1, fmt::format("header ends after {} columns; expected column '{}' for {} joints",
                                        header.size(), expected[c], *joints));
            }
            if (header[c] != expected[c]) {
                fail(c + 1, fmt::format("expected column '{}' for {} joints (got '{}')", expected[c], *joints,
                                        shorten(header[c])));
            }
        }
        // Optional: the declared payload, the reported speed override, then the simulator's ground truth.
        const bool payload = header.size() > expected.size() && header[expected.size()] == "payload";
        const std::size_t override_column = expected.size() + (payload ? 1 : 0);
        const bool reported_override = header.size() > override_column && header[override_column] == "override";
        const std::size_t base = override_column + (reported_override ? 1 : 0);
        bool ground_truth = false;
        bool age = false;  // the optional contact_age after contact_link (written since 2026-11-27)
        if (header.size() > base) {
            for (std::size_t k = 0; k < kGroundTruthColumns.size(); ++k) {
                const std::size_t c = base + k;
                const std::string_view got = c < header.size() ? header[c] : std::string_view("<nothing>");
                if (got != kGroundTruthColumns[k]) {
                    const std::string before = k != 0 || reported_override ? ""
                                               : payload                     ? "'override' or "
                                                                             : "'payload', 'override' or ";
                    fail(c + 1, fmt::format("expected {}ground-truth column '{}' (got '{}'); after the angles come "
                                            "an optional 'payload', an optional 'override' and the optional ground truth "
                                            "contact,contact_force,contact_link[,contact_age]",
                                            before, kGroundTruthColumns[k], shorten(got)));
                }
            }
            const std::size_t after = base + kGroundTruthColumns.size();
            age = header.size() > after && header[after] == "contact_age";
            if (header.size() > after + (age ? 1 : 0)) {
                const std::size_t extra = after + (age ? 1 : 0);
                fail(extra + 1, fmt::format("unexpected column '{}' after {}", shorten(header[extra]),
                                            age ? "contact_age" : "contact_link (only 'contact_age' may follow it)"));
            }
            ground_truth = true;
        }
        const std::size_t columns = base + (ground_truth ? kGroundTruthColumns.size() : 0) + (age ? 1 : 0);
        names_.assign(expected.begin(), expected.end());
        if (payload) names_.push_back("payload");
        if (reported_override) names_.push_back("override");
        if (ground_truth) names_.insert(names_.end(), kGroundTruthColumns.begin(), kGroundTruthColumns.end());
        if (age) names_.push_back("contact_age");

        // Rows.
        const std::size_t n = *joints;
        Recording rec(n, info);
        if (ground_truth) rec.ground_truth = GroundTruth{};
        std::vector<double> tau(n), q(n);
        while (next_line(line)) {
            const std::string_view view = trim(line);
            if (view.empty() || view.front() == '#') continue;
            const auto fields = split_fields(line);
            if (fields.size() != columns) {
                fail(std::min(fields.size(), columns) + 1,
                     fmt::format("row has {} values; expected {} (one per header column)", fields.size(), columns));
            }
            Sample s;
            s.t = real(fields, 0);
            if (!rec.t.empty() && s.t < rec.t.back()) {
                fail(1, fmt::format("time goes backwards: t = {} after t = {} (got '{}')", s.t, rec.t.back(),
                                    fields[0]));
            }
            s.seq = integer<std::int64_t>(fields, 1);
            s.cycle = integer<std::int64_t>(fields, 2);
            s.mode = integer<std::uint32_t>(fields, 3);
            for (std::size_t j = 0; j < n; ++j) {
                tau[j] = real(fields, 4 + j);
                q[j] = real(fields, 4 + n + j);
            }
            s.tau = tau;
            s.q = q;
            if (payload) {
                s.payload = real(fields, 4 + 2 * n);
                if (s.payload < 0) {
                    fail(5 + 2 * n, fmt::format("payload must be >= 0 kg (got '{}')", fields[4 + 2 * n]));
                }
            }
            if (reported_override) {
                s.speed_override = real(fields, override_column);
                if (!(s.speed_override >= 0.0 && s.speed_override <= 1.0)) {
                    fail(override_column + 1, fmt::format("override must lie in [0, 1] (1 = 100 %; got '{}')", fields[override_column]));
                }
            }
            rec.append(s);
            if (ground_truth) {
                const std::size_t c = base;
                const auto contact = integer<std::uint8_t>(fields, c);
                if (contact > 1) fail(c + 1, fmt::format("contact must be 0 or 1 (got '{}')", fields[c]));
                const double force = real(fields, c + 1);
                if (force < 0) fail(c + 2, fmt::format("contact_force must be >= 0 N (got '{}')", fields[c + 1]));
                const auto link = integer<std::int32_t>(fields, c + 2);
                if (link < 0) fail(c + 3, fmt::format("contact_link must be >= 0 (got '{}')", fields[c + 2]));
                rec.ground_truth->contact.push_back(contact);
                rec.ground_truth->contact_force.push_back(force);
                rec.ground_truth->contact_link.push_back(link);
                if (age) {
                    const double a = real(fields, c + 3);
                    if (!(a >= 0)) fail(c + 4, fmt::format("contact_age must be >= 0 s (got '{}')", fields[c + 3]));
                    if (contact == 0 && a != 0) {
                        fail(c + 4, fmt::format("contact_age must be 0 where contact is 0 (got '{}')", fields[c + 3]));
                    }
                    rec.ground_truth->contact_age.push_back(a);
                }
            }
        }
        return rec;
    }

private:
    bool next_line(std::string& line) {
        if (!std::getline(in_, line)) return false;
        ++line_no_;
        return true;
    }

    [[noreturn]] void fail(std::size_t column, const std::string& message) const {
        throw CsvError(name_, line_no_, column, message);
    }
    [[noreturn]] void fail_file(const std::string& message) const { throw CsvError(name_, 0, 0, message); }

    double real(const std::vector<std::string_view>& fields, std::size_t c) const {
        const std::string_view text = fields[c];
        double value = 0;
        const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || p != text.data() + text.size() || !std::isfinite(value)) {
            fail(c + 1, fmt::format("column '{}' expects a finite number (got '{}')", names_[c], shorten(text)));
        }
        return value;
    }

    template <typename Int>
    Int integer(const std::vector<std::string_view>& fields, std::size_t c) const {
        const std::string_view text = fields[c];
        Int value{};
        const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
            fail(c + 1, fmt::format("column '{}' expects an integer (got '{}')", names_[c], shorten(text)));
        }
        return value;
    }

    std::istream& in_;
    std::string name_;
    std::size_t line_no_ = 0;
    std::vector<std::string> names_;
};

std::string location(const std::string& file, std::size_t line, std::size_t column) {
    if (line == 0) return file;
    if (column == 0) return fmt::format("{}:{}", file, line);
    return fmt::format("{}:{}:{}", file, line, column);
}

}  // namespace

CsvError::CsvError(std::string file, std::size_t line, std::size_t column, const std::string& message)
    : std::runtime_error(fmt::format("{}: {}", location(file, line, column), message)),
      file_(std::move(file)),
      line_(line),
      column_(column) {}

Recording read_recording(std::istream& in, const std::string& name) { return Parser(in, name).parse(); }

Recording read_recording(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw CsvError(path, 0, 0, "cannot open the file for reading");
    return read_recording(in, path);
}

void write_recording(const Recording& rec, std::ostream& out) {
    const auto& info = rec.info();
    out << "# robot: " << info.robot << '\n'
        << "# joints: " << rec.joints() << '\n'
        << "# signal: " << to_string(info.signal) << '\n'
        << "# unit: " << to_string(info.unit) << '\n'
        << "# source: " << info.source << '\n';
    for (const auto& [key, value] : info.extra) out << "# " << key << ": " << value << '\n';

    const auto header = expected_header(rec.joints());
    std::string line;
    for (std::size_t c = 0; c < header.size(); ++c) line += (c ? "," : "") + header[c];
    if (rec.declares_payload()) line += ",payload";
    if (rec.reports_override()) line += ",override";
    const bool age = rec.has_ground_truth() && !rec.ground_truth->contact_age.empty();
    if (rec.has_ground_truth()) line += ",contact,contact_force,contact_link";
    if (age) line += ",contact_age";
    out << line << '\n';

    fmt::memory_buffer buf;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        buf.clear();
        // "{}" prints the shortest text that reads back to the same double.
        fmt::format_to(std::back_inserter(buf), "{},{},{},{}", rec.t[i], rec.seq[i], rec.cycle[i], rec.mode[i]);
        for (std::size_t j = 0; j < rec.joints(); ++j) fmt::format_to(std::back_inserter(buf), ",{}", rec.tau[j][i]);
        for (std::size_t j = 0; j < rec.joints(); ++j) fmt::format_to(std::back_inserter(buf), ",{}", rec.q[j][i]);
        if (rec.declares_payload()) fmt::format_to(std::back_inserter(buf), ",{}", rec.payload[i]);
        if (rec.reports_override()) fmt::format_to(std::back_inserter(buf), ",{}", rec.speed_override[i]);
        if (rec.has_ground_truth()) {
            const auto& gt = *rec.ground_truth;
            fmt::format_to(std::back_inserter(buf), ",{},{},{}", gt.contact[i], gt.contact_force[i], gt.contact_link[i]);
            if (age) fmt::format_to(std::back_inserter(buf), ",{}", gt.contact_age[i]);
        }
        buf.push_back('\n');
        out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    }
}

void write_recording(const Recording& rec, const std::string& path) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error(fmt::format("{}: cannot open the file for writing", path));
    write_recording(rec, out);
    if (!out) throw std::runtime_error(fmt::format("{}: write failed", path));
}

}  // namespace warpguard
