// Threshold calibration, thesis §3.2.3.
//
// The reference is cut from a recording of the robot's task: `reference_cycles` complete cycles
// (bounded by cycle-counter changes) starting at the first cycle start, so the cycle transition is
// part of it (§3.2.1). Every sample of the held-out nominal recordings is then run through the
// detector exactly as in operation (the window starts as m copies of the first sample), and per
// joint the signed rule-1 deviations and the rule-2 eigenvalues are collected:
//   theta1 = k * sigma(deviations)        (k = 3; the thesis rounds up to the next integer)
//   theta2 = margin * max(eigenvalues)    (margin = 1.2)
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "warpguard/profile.hpp"
#include "warpguard/recording.hpp"

namespace warpguard {

// Documented default window: 30 samples, the measurement vector length of the thesis's Figure 14.
inline constexpr std::size_t kDefaultWindow = 30;

struct CalibrationOptions {
    std::size_t window = kDefaultWindow;
    std::size_t reference_cycles = 2;  // thesis: more than one cycle, so the transition is included
    double k_sigma = 3.0;
    bool round_up = false;             // thesis: "first integer value higher than 3 sigma"
    double rule2_margin = 1.2;
    MatchingMethod method = MatchingMethod::Mdtw;
    std::optional<KinematicsSettings> kinematics;  // required for KA-mDTW
};

struct NamedRecording {
    std::string name;
    const Recording* recording = nullptr;
};

// Cuts the reference out of a recording; throws std::invalid_argument naming `source` when it has
// too few complete cycles.
Reference cut_reference(const Recording& recording, const std::string& source, std::size_t cycles);

// Builds a complete profile. Throws std::invalid_argument naming the file and value at fault.
Profile calibrate(const NamedRecording& reference, std::span<const NamedRecording> nominal,
                  const CalibrationOptions& options);

}  // namespace warpguard
