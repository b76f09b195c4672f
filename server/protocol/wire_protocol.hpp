// The robot wire protocol, version 1 (robot_scripts/PROTOCOL.md): a pure codec. No sockets, no
// threads; decoding a sample does not allocate. The Asio session only moves bytes through it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "warpguard/recording.hpp"

namespace warpguard::protocol {

inline constexpr int kVersion = 1;
inline constexpr std::size_t kMaxJoints = 16;
inline constexpr std::size_t kMaxLine = 1024;

enum class Vendor { UR, ABB, Denso };
// Ident: a link of the kinematic identification procedure (PROTOCOL.md §5), not a sample stream.
enum class Framing { Ascii, Binary, Ident };
enum class AngleUnit { Rad, Deg };
enum class Reply { Continue, Stop };

// How a robot sends its joint positions (PROTOCOL.md §1): a revolute joint's angle in `angles`; a
// linear joint (bit j of `linear` is joint j + 1: a SCARA's quill, a track) in mm with `deg` and in
// m with `rad`, as controllers that report degrees report linear axes in millimetres.
struct PositionUnits {
    AngleUnit angles = AngleUnit::Rad;
    std::uint32_t linear = 0;
    PositionUnits(AngleUnit a = AngleUnit::Rad, std::uint32_t l = 0) : angles(a), linear(l) {}  // NOLINT: AngleUnit converts
    bool is_linear(std::size_t joint) const { return joint < 32 && ((linear >> joint) & 1U) != 0; }
    // The factor that takes joint `joint`'s (0-based) value as sent to rad or m.
    double to_si(std::size_t joint) const;
};
// The 1-based joints of a linear mask: {3} or {3, 7}; as text "3" or "3,7", as the handshake option
// `linear=` lists them.
std::vector<std::size_t> linear_joints(std::uint32_t linear);
std::string linear_joints_text(std::uint32_t linear);

std::string to_string(Vendor v);

struct Handshake {
    std::string robot_id;
    Vendor vendor = Vendor::UR;
    SignalKind signal = SignalKind::Torque;
    SignalUnit unit = SignalUnit::Nm;
    std::size_t joints = 6;
    AngleUnit angles = AngleUnit::Rad;
    double period = 0.002;   // s
    double timeout = 0.020;  // s, the robot's own reply timeout
    Framing framing = Framing::Ascii;
    // Option `payload`: every sample ends with the payload the robot program has declared, kg
    // (PROTOCOL.md §2).
    bool payload = false;
    // Option `override`: every sample ends (after the payload) with the speed override the
    // controller applies, percent of the programmed speed (PROTOCOL.md §2).
    bool speed_override = false;
    // Option `linear=J[,J…]`: these joints (bit j is joint j + 1) are linear, their positions in mm
    // (deg) or m (rad).
    std::uint32_t linear = 0;
    PositionUnits positions() const { return {angles, linear}; }
};

class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// One handshake line without its line end; throws ProtocolError naming the field and value.
Handshake parse_handshake(std::string_view line);
std::string encode_handshake(const Handshake& h);  // with the trailing '\n'

// A decoded sample; values in SI (angles in rad, linear joints in m).
struct SampleFrame {
    std::int64_t seq = 0;
    std::int64_t cycle = 0;
    std::uint32_t mode = 0;
    double t = 0.0;
    std::size_t joints = 0;
    std::array<double, kMaxJoints> signal{};
    std::array<double, kMaxJoints> angle{};
    double payload = std::numeric_limits<double>::quiet_NaN();  // kg; NaN unless the handshake declared it
    // The reported speed override, 1 = 100 % (the wire carries percent); NaN unless the handshake declared it.
    double speed_override = std::numeric_limits<double>::quiet_NaN();
    Sample view() const {
        Sample s{t, seq, cycle, mode, std::span<const double>(signal.data(), joints), std::span<const double>(angle.data(), joints)};
        s.payload = payload;
        s.speed_override = speed_override;
        return s;
    }
};

enum class Status { Ok, Incomplete, Error };

struct DecodeResult {
    Status status = Status::Incomplete;
    std::size_t consumed = 0;  // bytes to drop from the front of the buffer (also after an error)
    std::array<char, 192> error{};  // Status::Error: what was wrong, with the offending value
    std::string_view message() const { return error.data(); }
};

// Decodes the samples of one connection in its framing. Allocation-free.
class SampleDecoder {
public:
    explicit SampleDecoder(const Handshake& h);
    // Decodes the first frame in `buffer`. Incomplete: wait for more bytes (nothing consumed).
    DecodeResult next(std::span<const char> buffer, SampleFrame& out) const;
    std::size_t binary_frame_size() const { return 20 + 8 * joints_ + (payload_ ? 4 : 0) + (override_ ? 4 : 0); }

private:
    DecodeResult next_ascii(std::span<const char> buffer, SampleFrame& out) const;
    DecodeResult next_binary(std::span<const char> buffer, SampleFrame& out) const;

    std::size_t joints_;
    bool payload_;
    bool override_;
    Framing framing_;
    std::array<double, kMaxJoints> position_scale_{};  // rad or m per unit sent, per joint
};

// The reply bytes for the vendor's script; returns how many bytes of `out` were written.
std::size_t encode_reply(Vendor vendor, Reply reply, std::span<char, 4> out);

// Encodes a sample the way the robot's task does (used by the simulated robot and the tests).
std::string encode_sample_ascii(const SampleFrame& s, PositionUnits units);
std::string encode_sample_binary(const SampleFrame& s);  // float32 fields, as RAPID sends them

// Identification procedure lines (PROTOCOL.md §5), each answered with one reply:
//   IQ;joint;q1;...;qN   the moving joint (1-based) and every joint's value (the handshake's units)
//   IP;x;y;z             the tracked point in the base frame, m (follows its IQ line)
//   IE                   the procedure is complete
struct IdentLine {
    enum class Kind { Angles, Point, End } kind = Kind::End;
    std::size_t joint = 0;
    std::array<double, kMaxJoints> q{};  // rad (m for a linear joint)
    std::array<double, 3> p{};
};
// One line without its line end; throws ProtocolError naming the field and value.
IdentLine parse_ident_line(std::string_view line, std::size_t joints, PositionUnits units);
std::string encode_ident_angles(std::size_t joint, std::span<const double> q_si, PositionUnits units);
std::string encode_ident_point(double x, double y, double z);

}  // namespace warpguard::protocol
