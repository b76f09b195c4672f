// Samples and recordings: the one data model every part of WarpGuard reads and writes.
//
// SI units inside: angles in rad, time in s. The joint signal `tau` keeps the robot's own unit
// (Nm, A or percent of rated torque) because the detection is purely statistical on that signal;
// the unit is carried in the metadata and in every profile built from it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace warpguard {

enum class SignalKind { Torque, Current };
enum class SignalUnit { Nm, A, Percent };

std::string to_string(SignalKind kind);
std::string to_string(SignalUnit unit);
// Both throw std::invalid_argument naming the text and the accepted values.
SignalKind parse_signal_kind(const std::string& text);
SignalUnit parse_signal_unit(const std::string& text);

// One sample as the robot's background task sends it. `tau` and `q` point into caller-owned
// storage of `joints` values each (no allocation on the per-sample path).
struct Sample {
    double t = 0.0;               // robot clock, s
    std::int64_t seq = 0;         // sequence number from the robot (gaps are detectable)
    std::int64_t cycle = 0;       // cycle counter, incremented by the main program at cycle start
    std::uint32_t mode = 0;       // mode bits from the robot task
    std::span<const double> tau;  // joint signal, one value per joint
    std::span<const double> q;    // joint angles, rad
    // The payload the robot program has declared (kg; e.g. URScript set_payload, RAPID GripLoad),
    // carried by the tool at its tool centre point; NaN when the robot does not send it.
    double payload = std::numeric_limits<double>::quiet_NaN();
    // The speed override the controller applies, as its robot task reads it (1 = the programmed
    // speed: the teach pendant's slider, e.g. URScript's target speed fraction, RAPID
    // CSpeedOverride / 100); NaN when the robot does not send it. It tells the detector when the
    // operator turns the override and by how much, also while the arm stands (docs/detection.md).
    double speed_override = std::numeric_limits<double>::quiet_NaN();
};

// Ground truth written by the simulator: which samples belong to an unscripted contact.
struct GroundTruth {
    std::vector<std::uint8_t> contact;     // 0/1
    std::vector<double> contact_force;     // N, magnitude of the contact force
    std::vector<std::int32_t> contact_link;  // 1-based link index, 0 = none
    // How long the contact this sample carries had already lasted when the sample was taken (s; 0
    // without contact). A contact begins between two samples: the first sample that carries it is up
    // to one sample period late, and its age says by how much. Empty in recordings made before it was
    // written (2026-11-27): their contacts are taken to begin at their first sample.
    std::vector<double> contact_age;
};

// A run of consecutive samples with the same cycle counter value.
struct CycleSpan {
    std::int64_t counter = 0;
    std::size_t begin = 0;     // first sample index
    std::size_t end = 0;       // one past the last sample index
    bool complete = false;     // bounded by counter changes on both sides
    std::size_t size() const { return end - begin; }
};

// Mode bits a robot task sends with each sample (robot_scripts/PROTOCOL.md §2.1).
inline constexpr std::uint32_t kModeHeld = 1;      // the robot stands, stopped by a STOP or by its own timeout
inline constexpr std::uint32_t kModeSelfStop = 2;  // ... and the hold began because no reply came in time

// Where a recording stops being one unbroken run of the robot's task: samples sent while the robot
// stood held (mode bit 0; bit 1 says the hold was the robot's own timeout), or a break between two
// samples — sequence numbers that do not follow on (samples lost, a restarted counter) or a robot
// clock that goes back.
struct Interruption {
    std::size_t begin = 0;  // first row affected: the first held row, or the row after the break
    std::size_t end = 0;    // one past the last held row; == begin for a break between rows
    std::string what;       // e.g. "robot held for 312 samples (0.624 s)", "sequence 1200 -> 1212: 11 samples missing"
};

// A recording's unbroken runs: rows [begin, end) with no held row and no break inside. Held rows
// belong to no run. One run over every row when nothing interrupts it.
struct UnbrokenRuns {
    std::vector<std::pair<std::size_t, std::size_t>> runs;
    std::vector<Interruption> interruptions;
};

struct RecordingInfo {
    std::string robot = "unknown";
    SignalKind signal = SignalKind::Torque;
    SignalUnit unit = SignalUnit::Nm;
    std::string source = "unknown";
    std::map<std::string, std::string> extra;  // every other `# key: value` line, kept verbatim
};

// Columnar recording of N joints.
class Recording {
public:
    Recording() = default;
    Recording(std::size_t joints, RecordingInfo info);

    std::size_t joints() const { return joints_; }
    std::size_t size() const { return t.size(); }
    bool empty() const { return t.empty(); }
    const RecordingInfo& info() const { return info_; }
    RecordingInfo& info() { return info_; }
    bool has_ground_truth() const { return ground_truth.has_value(); }
    // Every sample carries the payload the robot program declared (column `payload`).
    bool declares_payload() const { return !payload.empty(); }
    // Every sample carries the speed override the controller reported (column `override`).
    bool reports_override() const { return !speed_override.empty(); }

    // Appends one sample; tau and q must have joints() values each (std::invalid_argument otherwise).
    // A recording declares the payload from its first sample on or not at all: a sample that
    // breaks that (a finite payload after samples without, or none after samples with) is refused.
    // The same holds for the reported speed override, which must lie in [0, 1].
    void append(const Sample& s);
    // Sample view of row i; the spans point into `scratch_tau` / `scratch_q` (each joints() long).
    Sample sample(std::size_t i, std::span<double> scratch_tau, std::span<double> scratch_q) const;

    // Maximal runs of equal cycle counter, in order.
    std::vector<CycleSpan> cycles() const;
    std::vector<CycleSpan> complete_cycles() const;

    // Copy of rows [begin, end).
    Recording slice(std::size_t begin, std::size_t end) const;

    // Where the task's run is interrupted (above). Sequence numbers may wrap where the protocol's
    // counters do (after 2^31 - 1 or 2^32 - 1 back to 0).
    UnbrokenRuns unbroken_runs() const;
    // The complete cycles no interruption touches: no held row inside, no break before any of
    // their rows or right after the last (the samples lost there may have been the cycle's own).
    std::vector<CycleSpan> unbroken_cycles() const;

    std::vector<double> t;
    std::vector<std::int64_t> seq;
    std::vector<std::int64_t> cycle;
    std::vector<std::uint32_t> mode;
    std::vector<std::vector<double>> tau;  // tau[joint][row]
    std::vector<std::vector<double>> q;    // q[joint][row]
    std::vector<double> payload;           // declared payload per row, kg (empty: not declared)
    std::vector<double> speed_override;    // reported speed override per row, 1 = 100 % (empty: not reported)
    std::optional<GroundTruth> ground_truth;

private:
    std::size_t joints_ = 0;
    RecordingInfo info_;
};

}  // namespace warpguard
