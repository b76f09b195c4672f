// Threshold calibration, thesis §3.2.3.
//
// The reference is cut from a recording of the robot's task: `reference_cycles` complete cycles
// (bounded by cycle-counter changes) starting at the first cycle start, so the cycle transition is
// part of it (§3.2.1). Every sample of the held-out nominal recordings is then run through the
// detector exactly as in operation (the window starts as m copies of the first sample), and per
// joint the signed rule-1 deviations and the rule-2 eigenvalues are collected:
//   theta1 = k * sigma(deviations)        (k = 3; the thesis rounds up to the next integer)
//   theta2 = margin * max(eigenvalues)    (margin = 1.2)
// For the phase-aware detector (the default) the same pass also records, per joint, the matched
// reference sample of each newest sample and its deviation. Thresholds per reference sample are
// the largest |deviation| within +- neighbourhood samples. The margin comes from split halves:
// thresholds from the even calibration cycles judge the odd ones and vice versa; the largest
// persistent ratio of every cycle is an extreme value, a Gumbel distribution fitted to those
// per-cycle maxima gives the margin exceeded once in `target_cycles_per_false_stop` cycles, and so
// does an exponential tail fitted to the largest of them (peaks over threshold); the larger wins.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

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
    // Required for KA-mDTW. With scaled_joints empty, calibration scales every joint whose lever
    // length stays above min_lever over the whole reference and matches the others unscaled (the
    // profile records which); explicitly listed joints with a near-zero lever are refused.
    std::optional<KinematicsSettings> kinematics;
    // The decision rules (profile.hpp). Phase-aware parameters, all documented defaults:
    DetectorKind detector = DetectorKind::PhaseAware;
    // Pooled phase neighbourhood, +- reference samples; 0 = the window m (the matched partner of the
    // newest sample is uncertain by about the warping a window allows).
    std::size_t neighbourhood = 0;
    // Samples over the threshold in a row before STOP: a single-sample spike is the commonest
    // nominal outlier (heavy tails), while a collision lasts many samples.
    std::size_t persistence = 2;
    // False stops per this many nominal cycles the margin is fitted for (issue 8's target: 1 / 1000).
    double target_cycles_per_false_stop = 1000.0;
    // Friction drift: time constant in cycles of the friction model learned in operation (a Coulomb
    // and a viscous term per joint, from every sample well inside its threshold). Three cycles
    // follow a robot warming up by 0.5 % of its friction per cycle (10: 149 false stops in 60 such
    // cycles of the planar arm, 3: 2); two parameters per joint cannot take the shape of a single
    // contact. 0 switches drift tracking off.
    double drift_cycles = 3.0;
    // CUSUM reference: ratios (deviation / the phase's largest nominal deviation) above it accumulate.
    // Half the nominal maximum: nominal deviations rarely stay there, a slow push does. 0 = no CUSUM.
    double cusum_reference = 0.5;
    // The robot's kinematic model (warpguard identify dh, or KA-mDTW's). With it the phase-aware
    // detector also gets a speed model (dynamics.hpp): what of the reference scales with the speed
    // override, fitted to the nominal recordings, so a task run at another override is compared
    // with what the reference would read at that speed. Without it, recalibrate per override.
    std::optional<DhModel> dynamics_model;
    // Gravity in the model's base frame, m/s^2: an upright robot (base z up) unless mounted otherwise.
    Eigen::Vector3d gravity = Eigen::Vector3d(0, 0, -9.81);
};

struct NamedRecording {
    std::string name;
    const Recording* recording = nullptr;
};

// Extreme-value fits to per-cycle maxima (the phase-aware margin and CUSUM limit). Each gives the
// value exceeded once in `cycles_per_exceedance` cycles, with its scale at the one-sided 95 % upper
// confidence bound (large-sample spread of the scale estimate), so a short recording widens it.
struct ExtremeFit {
    double mean = 0, sd = 0, largest = 0;
    // Gumbel, method of moments over all maxima.
    double gumbel_mu = 0, gumbel_beta = 0, gumbel_scale_factor = 1, gumbel_quantile = 0;
    // Peaks over threshold: the `tail_exceedances` largest maxima above `tail_threshold` (the next
    // one), their excesses fitted by an exponential of mean `tail_scale` (times `tail_scale_factor`).
    double tail_threshold = 0, tail_scale = 0, tail_scale_factor = 1, tail_quantile = 0;
    std::size_t tail_exceedances = 0;
    // The limit: the larger quantile, never below the largest maximum seen nor below `floor`.
    double limit(double floor) const { return std::max({gumbel_quantile, tail_quantile, largest, floor}); }
};
// Throws std::invalid_argument for fewer than 2 maxima or cycles_per_exceedance <= 1.
ExtremeFit fit_cycle_maxima(const std::vector<double>& maxima, double cycles_per_exceedance);

// Cuts the reference out of a recording; throws std::invalid_argument naming `source` when it has
// too few complete cycles.
Reference cut_reference(const Recording& recording, const std::string& source, std::size_t cycles);

// Builds a complete profile. Throws std::invalid_argument naming the file and value at fault.
Profile calibrate(const NamedRecording& reference, std::span<const NamedRecording> nominal,
                  const CalibrationOptions& options);

}  // namespace warpguard
