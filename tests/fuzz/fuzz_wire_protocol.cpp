// libFuzzer harness for the wire-protocol codec: any bytes a robot (or anything else) may send.
// The first byte picks what is fuzzed: the handshake parser, or the sample decoder in ASCII or
// binary framing fed the rest as a byte stream, possibly in pieces. Checked: no crash, no
// sanitizer finding, every decode consumes within the buffer and makes progress, decoded values
// are finite and the joint count is the handshake's.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "wire_protocol.hpp"

using namespace warpguard::protocol;

namespace {
void require(bool ok) {
    if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::uint8_t mode = data[0];
    const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
    if (mode % 3 == 0) {
        try {
            const Handshake h = parse_handshake(bytes);
            require(h.joints >= 1 && h.joints <= kMaxJoints);
            const Handshake back = parse_handshake(std::string_view(encode_handshake(h)).substr(0, encode_handshake(h).size() - 1));
            require(back.joints == h.joints && back.linear == h.linear && back.payload == h.payload);
            require(h.joints >= 32 || (h.linear >> h.joints) == 0);  // only the robot's own joints are linear
        } catch (const ProtocolError&) {
        }
        return 0;
    }
    if (mode == 0xff || mode == 0xfe) {
        // Identification lines (PROTOCOL.md §5): parsed or refused, never anything else.
        try {
            const IdentLine l = parse_ident_line(bytes, 6, mode == 0xff ? AngleUnit::Deg : AngleUnit::Rad);
            if (l.kind == IdentLine::Kind::Angles) {
                require(l.joint >= 1 && l.joint <= 6);
                for (std::size_t j = 0; j < 6; ++j) require(std::isfinite(l.q[j]));
            }
            if (l.kind == IdentLine::Kind::Point) require(std::isfinite(l.p[0]) && std::isfinite(l.p[1]) && std::isfinite(l.p[2]));
        } catch (const ProtocolError& e) {
            require(std::string_view(e.what()).size() > 0);
        }
        return 0;
    }
    Handshake h;
    h.joints = 1 + (mode / 3) % kMaxJoints;
    h.framing = mode % 3 == 1 ? Framing::Ascii : Framing::Binary;
    h.angles = (mode & 0x80) ? AngleUnit::Deg : AngleUnit::Rad;
    h.linear = (mode & 0x40) ? 1U : 0U;  // joint 1 linear: mm with degrees
    const SampleDecoder decoder(h);
    SampleFrame frame;
    std::size_t at = 0;
    while (at < bytes.size()) {
        const std::string_view rest = bytes.substr(at);
        const DecodeResult r = decoder.next(rest, frame);
        require(r.consumed <= rest.size());
        if (r.status == Status::Incomplete) {
            require(r.consumed == 0);
            break;
        }
        require(r.consumed > 0);  // progress on every Ok and every error
        if (r.status == Status::Ok) {
            require(frame.joints == h.joints);
            require(std::isfinite(frame.t));
            for (std::size_t j = 0; j < frame.joints; ++j) require(std::isfinite(frame.signal[j]) && std::isfinite(frame.angle[j]));
        } else {
            require(r.message().size() > 0);
        }
        at += r.consumed;
    }
    return 0;
}
