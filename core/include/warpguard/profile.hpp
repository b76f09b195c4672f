// A robot's detection profile: the reference, the window length, the per-joint thresholds and
// how each threshold was derived, and (for KA-mDTW) the kinematics. Stored as JSON.
#pragma once

#include <algorithm>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpguard/dynamics.hpp"
#include "warpguard/kinematics.hpp"
#include "warpguard/lever_length.hpp"
#include "warpguard/recording.hpp"

namespace warpguard {

enum class MatchingMethod { Mdtw, KaMdtw };
std::string to_string(MatchingMethod method);
MatchingMethod parse_matching_method(const std::string& text);

// Which decision rules run on the matched signals:
//   published    thesis §3.2.3: rule 1 (|a(m) - b| > k sigma, one threshold per joint) and rule 2.
//   phase-aware  the default: rule 1 against a threshold per reference sample (the largest nominal
//                deviation near that phase of the task, times a margin fitted to the per-cycle
//                maxima of held-out calibration cycles), one partner shared by all joints, a CUSUM for
//                slow pushes, a friction-drift model per joint learned in operation from samples well
//                inside the thresholds only, and a few samples of persistence.
enum class DetectorKind { Published, PhaseAware };
std::string to_string(DetectorKind kind);
DetectorKind parse_detector_kind(const std::string& text);

struct PhaseAwareSettings {
    std::size_t neighbourhood = 0;  // +- reference samples pooled into a phase's statistics
    std::size_t persistence = 2;    // consecutive samples over the threshold before STOP
    double margin = 1.0;            // threshold = margin x pooled nominal maximum
    double drift_rate = 0.0;        // per-sample forgetting of the friction-drift model (0: no drift tracking)
    double cusum_reference = 0.5;   // ratio (deviation / pooled maximum) that starts to accumulate
    double cusum_limit = 0.0;       // accumulated ratio that means STOP (0: no CUSUM rule)
    std::vector<std::vector<double>> rule1;  // [joint][reference sample] threshold on |deviation - drift|
    // [joint] the largest |Coulomb change| the friction-drift model learned on the calibration
    // recordings (nominal operation); one over twice it in operation means the friction has changed.
    // Empty: not measured (a profile from before it was kept, or no drift tracking).
    std::vector<double> drift_coulomb_nominal;
    nlohmann::json derivation = nlohmann::json::object();  // how margin and thresholds were obtained
};

// theta1 = k * sigma of the signed rule-1 deviations of nominal windows (thesis: k = 3, rounded up
// to the next integer of the signal unit).
struct Rule1Threshold {
    double value = 0.0;
    double k = 3.0;
    bool rounded_up = false;
    double sigma = 0.0;      // sample standard deviation of the signed deviations
    double mean = 0.0;       // their mean (kept to show a bias, not used in the rule)
    double max_abs = 0.0;    // largest |deviation| seen in nominal operation
    std::size_t samples = 0;
};

// theta2 = margin * largest second eigenvalue seen in nominal operation (thesis: margin 1.2).
struct Rule2Threshold {
    double value = 0.0;
    double margin = 1.2;
    double max = 0.0;
    double mean = 0.0;
    std::size_t windows = 0;
};

struct JointThresholds {
    Rule1Threshold rule1;
    Rule2Threshold rule2;
};

struct Reference {
    std::string source;                  // file the reference was cut from
    std::vector<std::int64_t> cycles;    // cycle counter values it spans
    // Where each of those cycles begins (reference sample index, the first 0; one per cycle). Empty
    // in profiles written before it was recorded: the detector then does not use the robot's cycle
    // counter.
    std::vector<std::size_t> cycle_begins;
    std::size_t first_sample = 0;        // index in that file
    std::vector<double> t;
    std::vector<std::vector<double>> tau;  // tau[joint][k]
    std::vector<std::vector<double>> q;    // q[joint][k]
    std::vector<double> payload;           // payload declared at each sample, kg (empty: not declared)
    // The speed override the robot reported while the reference was recorded (1 = 100 %): NaN when
    // it reported none, or when it changed within the reference's cycles. A stream's first report
    // then gives the detector its speed at once: the reported override over this one.
    double speed_override = std::numeric_limits<double>::quiet_NaN();
    std::size_t size() const { return t.size(); }
};

struct KinematicsSettings {
    DhModel model;
    ForceDirection force;
    double min_lever = kDefaultMinLever;
    // Joints (0-based) whose signals are divided by their lever length; the others are matched
    // unscaled. Empty = every joint. A joint about whose axis the force direction has no lever
    // (joint 1 of an arm with a vertical first axis under a vertical force) cannot be scaled (§4.5).
    std::vector<std::size_t> scaled_joints;
    bool scales(std::size_t joint) const {
        return scaled_joints.empty() || std::find(scaled_joints.begin(), scaled_joints.end(), joint) != scaled_joints.end();
    }
};

struct Profile {
    std::string robot = "unknown";
    std::size_t joints = 0;
    SignalKind signal = SignalKind::Torque;
    SignalUnit unit = SignalUnit::Nm;
    std::size_t window = 0;  // m, measurement window length in samples
    MatchingMethod method = MatchingMethod::Mdtw;
    Reference reference;
    std::vector<JointThresholds> thresholds;  // one per joint
    std::optional<KinematicsSettings> kinematics;  // required for KA-mDTW
    DetectorKind detector = DetectorKind::Published;
    std::optional<PhaseAwareSettings> phase;  // required for the phase-aware detector
    // Speed-override model (dynamics.hpp): what of the reference scales with the speed ratio.
    // Optional; calibration adds it when the robot's kinematic model is known.
    std::optional<SpeedModel> speed;
    // An unsigned motor current's sign per joint and reference sample, where calibration rebuilt it
    // from the kinematics (dynamics.hpp, rebuild_current_sign): the reference and the speed model
    // are then in sign * |signal|, and the detector signs each live sample with its partner's sign.
    // Empty: the signal is matched as recorded.
    std::vector<std::vector<std::int8_t>> current_sign;
    // Declared-payload model (dynamics.hpp): what a heavier or lighter part than the reference's
    // adds. Calibration adds it when the kinematic model is known and the reference declares its
    // payload; the detector uses it for samples that declare theirs.
    std::optional<PayloadModel> payload;
    // The arm's own dynamics (dynamics.hpp, fitted on a dry run of the task). When present the
    // detector matches the deviation from it - what the task's force adds (thesis §4.5.1) - rather
    // than the signal: every incoming sample less the arm's expected torque (ArmDeviationFilter),
    // and the reference, thresholds, speed and payload models are all in that form already (the
    // calibration transformed its recordings the same way before it measured them).
    std::optional<ArmDynamics> arm;
    // Record of how the profile was made: nominal files, window counts, options.
    nlohmann::json calibration = nlohmann::json::object();

    // Throws std::invalid_argument describing the first inconsistency found.
    void validate() const;
};

// What the profile's detector matches, in words for a display: the signal as recorded or less the
// arm model (and where that was fitted), less the declared payload's torque, divided by the lever
// lengths for KA-mDTW.
std::string describe_matched_signal(const Profile& profile);

nlohmann::json to_json(const Profile& profile);
Profile profile_from_json(const nlohmann::json& j);  // validates; throws std::invalid_argument
void save_profile(const Profile& profile, const std::string& path);
Profile load_profile(const std::string& path);  // throws std::runtime_error with the path

}  // namespace warpguard
