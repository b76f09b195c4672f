// The model-based residual as a reference method (issue 8 compares it with the default detector):
// the signal less what the identified arm model expects, compared with a static band per joint, as
// the model-based collision detectors of the literature do it (research/model-based-methods.md:
// Mamedov & Mikhel 2020, a band of the collision-free residual's max/min widened by 5-10 %; the
// Sapienza report, a detection when the residual stays over its threshold for 2 samples).
//
// Residual of a sample: its signal less the arm model's expected signal at its angles and at the
// velocities and accelerations the detector estimates from past samples only (ArmDeviationFilter,
// exactly as in operation), less the declared payload's torque J_p(q)^T m (a - g), a the tool
// point's acceleration from the same estimates (J q'' + J' q', J' q' by a difference of the
// Jacobian along q'). No matching, no phase: the band is the same at every moment of the cycle.
//
// Band per joint: the least and largest residual over the calibration recording, widened about
// their centre by `widening` of their half-width on each side (default 10 %, the top of the
// literature's 5-10 %). A joint outside its band for `persistence` samples in a row (default 2)
// answers STOP. A stream's first samples are not judged until the estimator has its full span
// (ArmDynamics::causal_samples): before that it assumes rest, and after a reset the arm may move;
// nor are the first samples after a gap in time, where the estimator starts afresh.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Geometry>
#include <nlohmann/json.hpp>

#include "warpguard/decision.hpp"
#include "warpguard/dynamics.hpp"
#include "warpguard/recording.hpp"

namespace warpguard {

struct ResidualBand {
    double least = 0.0, largest = 0.0;  // over the calibration recording
    double lower = 0.0, upper = 0.0;     // the band judged against (widened)
};

struct ResidualLimits {
    std::string robot = "unknown";
    std::string source;  // the calibration recording
    SignalUnit unit = SignalUnit::Nm;
    ArmDynamics arm;
    std::optional<PayloadModel> payload;  // the declared payload's torque is taken off with it
    double widening = 0.1;
    std::size_t persistence = 2;
    std::size_t samples = 0;  // calibration samples judged
    std::vector<ResidualBand> joints;
};

// The band from a collision-free recording. Throws std::invalid_argument naming `source` when the
// recording does not fit the arm model (joints, signal, unit), declares no payload though a payload
// model is given, has no sample past the estimator's span, when widening is negative or persistence
// is 0, or when the payload model takes off only the part beyond the reference's (a KA-mDTW or
// --keep-payload profile: its arm model keeps the reference's part, which this method cannot know).
ResidualLimits derive_residual_limits(const ArmDynamics& arm, const std::optional<PayloadModel>& payload,
                                      const Recording& calibration, const std::string& source, double widening = 0.1,
                                      std::size_t persistence = 2);

nlohmann::json to_json(const ResidualLimits& limits);
ResidualLimits residual_limits_from_json(const nlohmann::json& j);

// Streams samples and judges each against the band. Does not allocate after construction.
class ResidualChecker {
public:
    // Throws as ArmDeviationFilter's constructor, and std::invalid_argument when the bands do not
    // fit the arm model's joints.
    explicit ResidualChecker(ResidualLimits limits);
    Decision update(const Sample& sample);
    void reset();
    const ResidualLimits& limits() const { return limits_; }
    // Throws std::invalid_argument naming `source` when a recording cannot be judged by these limits
    // (as derive_residual_limits refuses it).
    void check_recording(const Recording& recording, const std::string& source) const;
    // The newest sample's residual per joint (valid after update()).
    std::span<const double> residual() const { return residual_; }
    // update()'s residual without judging it: false while the estimator is short of its span (a
    // stream's first samples, those after a reset or a gap in time).
    bool compute(const Sample& sample);

private:
    ResidualLimits limits_;
    ArmDeviationFilter filter_;
    std::vector<double> residual_;
    std::vector<std::size_t> outside_;  // samples in a row outside the band, per joint
    std::vector<Eigen::Isometry3d> frames_;
    std::vector<Eigen::Vector3d> columns_, moved_columns_;
    std::vector<double> moved_q_;
};

}  // namespace warpguard
