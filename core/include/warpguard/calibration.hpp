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
// the largest |deviation| within +- neighbourhood samples. The margin comes from split halves
// (calibration_half): thresholds from one half of the calibration cycles judge the other; the largest
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

#include <nlohmann/json.hpp>

#include "warpguard/profile.hpp"
#include "warpguard/recording.hpp"
#include "warpguard/reference_cycles.hpp"

namespace warpguard {

// Documented default window: 30 samples, the measurement vector length of the thesis's Figure 14.
inline constexpr std::size_t kDefaultWindow = 30;

// With reference_cycles = 0 (automatic) the reference has at least this many cycles: thesis §3.2.1,
// more than one cycle, so that the transition from one cycle to the next is part of it.
inline constexpr std::size_t kMinReferenceCycles = 2;

struct CalibrationOptions {
    std::size_t window = kDefaultWindow;
    // Complete cycles cut into the reference. 0 = automatic: the fewest, from kMinReferenceCycles
    // up, whose joint path covers every nominal cycle's (choose_reference_cycles); a task that
    // cycles through several variants (places, poses) needs each of them in the reference for
    // mDTW. KA-mDTW matches other variants by their lever lengths: automatic = kMinReferenceCycles.
    std::size_t reference_cycles = 0;
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
    // The arm's own dynamics, fitted on a dry run of the task (warpguard identify dynamics). With it
    // the profile matches the deviation from the arm model, what the task's force adds (thesis
    // §4.5.1): the reference and nominal recordings are transformed exactly as the detector will
    // transform the samples it receives (causal_arm_deviation) before anything is measured on them,
    // and the profile carries the arm model for the detector.
    std::optional<ArmDynamics> arm;
    // Fit the arm model on the nominal recordings themselves instead (no `arm` given; needs
    // `dynamics_model` and a signed torque): each less its declared payload's torque (the payload
    // model fitted on the same recordings' jumps), then fit_arm_dynamics over all of them. A task's
    // own forces stay in the fit's data, but a rigid-body model of the arm can take up only what is
    // a function of the angles and their derivatives; and a task that jolts one joint alone (a
    // snap-fit) shows the fit that joint's inertia, which a dry run of the same program does not.
    // Only where every load is known: recordings that do not declare the payload, or whose declared
    // payload changes without a usable payload model, are calibrated as recorded, and the profile's
    // calibration["arm_model"]["not_fitted"] says why.
    bool arm_from_nominal = false;
    // Match the declared payload's torque as part of the signal instead of taking it off with a
    // payload model. KA-mDTW always does: the load's force is what its lever lengths scale, so it
    // matches the deviation from the arm without the load, the load's torque left in (thesis §4.5.1:
    // the run without the load is the arm's model, the difference is the task's force). A part of
    // another mass than the reference's is then taken off by its difference from the reference's
    // part (PayloadModel::beyond_reference_part), where the payload model can be fitted.
    bool keep_payload = false;
    // Dry friction per joint the recordings already have taken off, signal units (empty: none).
    // Calibrating with `arm` sets it to the arm model's Coulomb terms (arm_coulomb) for the
    // calibration of the transformed recordings: the speed model fitted on the deviation finds
    // little dry friction left, yet a still joint's friction may still hold anything within +- the
    // whole of it, so the still-joint band (SpeedModel::coulomb) is the speed model's term plus this.
    std::vector<double> removed_coulomb;
};

struct NamedRecording {
    std::string name;
    const Recording* recording = nullptr;
};

// Whether the default of `warpguard calibrate` and of the daemon's calibrate, an arm model fitted on
// the nominal recordings (CalibrationOptions::arm_from_nominal), is open to these options and this
// reference: the phase-aware detector (mDTW or KA-mDTW) with the robot's kinematic model and a
// signed torque.
// Whether it is then fitted also depends on the declared payload (see arm_from_nominal).
bool arm_from_nominal_applies(const CalibrationOptions& options, const Recording& reference);

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

// The halves of the split-halves calibration (each half's thresholds judge the other half's
// cycles), for `cycles` calibration cycles in recorded order: 0 or 1 per cycle. A task may cycle
// through variants (a place, a pose) in turn, and each half must hold cycles of every variant:
// split by even and odd cycles, a task with 4 places had 2 of them in each half only, their phases
// were judged by thresholds that had never seen them, and the margin came out 2.8 where 1.6 fits
// (held-out machine-tending task, docs/detection.md). So each cycle in turn goes to the half that
// keeps the two halves most even over every class of cycles c mod p, p = 2..8 (a documented
// default: tasks with up to 8 variants in turn), and over all cycles (ties: half 0).
std::vector<std::uint8_t> calibration_halves(std::size_t cycles);

// Cuts the reference out of a recording; throws std::invalid_argument naming `source` when it has
// too few complete cycles.
Reference cut_reference(const Recording& recording, const std::string& source, std::size_t cycles);

// Whether the reference's joint path covers the nominal cycles': a nominal cycle is covered when
// every pose along it lies within `tolerance` (rad, largest joint) of some pose of the reference
// (both paths taken at points tolerance / 4 apart). A cycle that is not covered went somewhere the
// reference never does: another variant of the task, whose torques the reference cannot match.
struct ReferenceCoverage {
    std::size_t reference_cycles = 0;
    bool automatic = false;               // chosen by choose_reference_cycles, not given
    std::size_t available_cycles = 0;     // complete cycles the reference recording offered
    double tolerance = kCoverageTolerance;
    std::size_t cycles = 0;               // nominal cycles checked
    std::size_t uncovered = 0;            // of them, not covered
    double worst_distance = 0;            // rad: the farthest nominal pose from the reference's path
    std::size_t worst_joint = 0;          // 1-based: the joint of that distance
    std::string worst_cycle;              // "FILE, cycle N" (the robot's cycle counter)
    std::string note;                     // one line for a person: what it means, what to do
    nlohmann::json to_json() const;
};

// The reference cycles: `given` > 0 takes that many and only reports their coverage; 0 takes the
// fewest from kMinReferenceCycles up to every complete cycle of `reference` that covers every
// complete cycle of the nominal recordings (or, if none does, the fewest that leave the fewest
// uncovered). With `same_recording`, the reference recording's cycles after the reference are
// nominal ones too, besides those of `nominal` (the daemon's single recording, with its other
// unbroken runs as `nominal` when it was interrupted; at most all but `min_nominal_cycles` of its
// own become the reference). Throws std::invalid_argument when the reference
// recording has too few complete cycles.
ReferenceCoverage choose_reference_cycles(const NamedRecording& reference, std::span<const NamedRecording> nominal,
                                          std::size_t given, bool same_recording = false, std::size_t min_nominal_cycles = 0,
                                          double tolerance = kCoverageTolerance);

// Recordings interrupted by a hold or a break (Recording::unbroken_runs): the reference is cut from
// one unbroken run and every run is nominal data on its own, the detector starting afresh at each
// as the daemon's does after a hold or a reconnect.
//
// The run of `reference` to cut the reference from: for `cycles` > 0 the first run with at least
// `cycles` + `extra` complete cycles, for 0 (automatic) the run with the most complete cycles
// (which must be at least kMinReferenceCycles + `extra`). Throws std::invalid_argument naming the
// interruptions when no run has enough.
std::pair<std::size_t, std::size_t> reference_run(const NamedRecording& reference, const UnbrokenRuns& runs, std::size_t cycles,
                                                  std::size_t extra = 0);
// The interruptions of one recording as the profile's calibration record lists them.
nlohmann::json interruptions_to_json(const std::string& name, const UnbrokenRuns& runs);
// The profile's `calibration.interruptions`: the list (interruptions_to_json of every recording),
// the rows [begin, end) of `reference_name` the reference's unbroken run spans (`reference_run`),
// and a note for a person.
nlohmann::json interruptions_record(const nlohmann::json& list, const std::string& reference_name, std::size_t reference_begin,
                                    std::size_t reference_end, std::size_t nominal_runs);

// Builds a complete profile. Throws std::invalid_argument naming the file and value at fault.
// Recordings with interruptions are calibrated on their unbroken runs (above), listed under
// `calibration.interruptions`.
Profile calibrate(const NamedRecording& reference, std::span<const NamedRecording> nominal,
                  const CalibrationOptions& options);

}  // namespace warpguard
