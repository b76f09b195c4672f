// The envelope method of thesis §3.1: limits simple enough to check on the robot controller.
//
// Setup (from a recording of complete cycles, split by the cycle counter):
//   - samples per period N = the integer closest to the mean complete-cycle length (§3.1.3);
//   - one representative period: the complete cycle whose length is closest to N, linearly
//     resampled to N samples;
//   - shift s: every other cycle is aligned to the representative with classic DTW (1)-(7); its time
//     shift is the largest |i - j| on the path where the representative changes fast (|Δr| above its
//     median: §3.1.2 measures the shift at the falling edges). s = ceil(mean + 3 sigma) of the
//     per-cycle shifts and never less than the largest one seen (the thesis: 8 seen, 3 sigma -> 10);
//   - upper/lower envelope = max/min of the representative shifted by -s..+s (periodic);
//   - tolerance = margin x the largest excursion of any recorded cycle beyond the envelope (the
//     thesis saw 3 %, used 5 %), never below 3 x the sample noise (robust estimate from third
//     differences), so a noise-free recording does not give a zero band;
//   - neighbour-difference limit D = max(3 sigma of x(k)-x(k-1), 1.2 x largest difference seen)
//     (§3.1.2: 22 % seen, 3 sigma rounded up -> 25 %). The margin matters: on a steep edge the step
//     depends on where the samples happen to fall, so the largest step of a few cycles is exceeded
//     by later ones.
// Operation: the index into the period restarts at every cycle-counter change (the main program's
// trigger, §3.1.3) and wraps if a cycle runs longer than N. Rule 1: x outside
// [lower - tolerance, upper + tolerance]; rule 2: |x(k) - x(k-1)| > D. Checking begins at the first
// cycle start seen, as on the robot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpguard/decision.hpp"
#include "warpguard/recording.hpp"

namespace warpguard {

struct EnvelopeOptions {
    std::optional<std::size_t> period;  // N; default from the cycle lengths
    std::optional<std::size_t> shift;   // s; default from DTW-aligned cycles
    double shift_sigma = 3.0;
    double tolerance_margin = 1.2;
    double noise_sigma = 3.0;
    double step_sigma = 3.0;
    double step_margin = 1.2;
    bool round_up = false;               // round tolerance and D up to the next integer (percent units)
    std::size_t max_shift_cycles = 30;   // cycles aligned to measure the shift (thesis Figure 9: 30)
};

struct JointEnvelope {
    std::vector<double> upper;  // N values
    std::vector<double> lower;
    double tolerance = 0.0;
    double max_excursion = 0.0;  // largest recorded excursion beyond the envelope
    double noise = 0.0;          // robust noise sigma
    double max_step = 0.0;       // D
    double step_sigma = 0.0;
    double step_max_seen = 0.0;
};

struct EnvelopeLimits {
    std::string robot;
    std::string source;
    SignalUnit unit = SignalUnit::Nm;
    std::size_t period = 0;  // N
    std::size_t shift = 0;   // s
    std::vector<std::size_t> cycle_shifts;  // measured shift of each aligned cycle
    std::size_t cycles = 0;                 // complete cycles used
    std::size_t representative_cycle = 0;   // index among the complete cycles
    std::vector<JointEnvelope> joints;
};

// Throws std::invalid_argument naming `source` if there are fewer than 2 complete cycles.
EnvelopeLimits derive_envelope(const Recording& recording, const std::string& source, const EnvelopeOptions& options);

nlohmann::json to_json(const EnvelopeLimits& limits);
EnvelopeLimits envelope_from_json(const nlohmann::json& j);

class EnvelopeChecker {
public:
    explicit EnvelopeChecker(EnvelopeLimits limits);
    Decision update(const Sample& sample);
    void reset();
    bool armed() const { return armed_; }
    std::size_t phase() const { return phase_; }
    const EnvelopeLimits& limits() const { return limits_; }

private:
    EnvelopeLimits limits_;
    std::vector<double> previous_;
    bool armed_ = false;
    bool have_previous_ = false;
    std::int64_t cycle_ = 0;
    bool have_cycle_ = false;
    std::size_t phase_ = 0;
};

}  // namespace warpguard
