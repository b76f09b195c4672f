// Rigid-body dynamics in regressor form, and the speed model the phase-aware detector uses when the
// operator changes the speed override.
//
// Joint torques are linear in the inertial parameters (the standard result used for identification,
// e.g. seed 000 of ../shared/research/model-based-methods.md):
//
//   tau = Y(q, qd, qdd) pi
//
// with, per link k (DH frame k), pi_k = [m, m c_x, m c_y, m c_z, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]
// (first moments and the inertia tensor about the frame origin, in frame k), and per joint
// [armature, viscous, Coulomb, offset] (armature: reflected rotor inertia times qdd; Coulomb:
// qd / (|qd| + 0.01 rad/s), a smooth sign).
//
// Speed override scales the task in time: q(t) -> q_ref(s t), so qd -> s qd and qdd -> s^2 qdd.
// Gravity and Coulomb friction stay, the viscous term scales with s, the inertial, centripetal and
// Coriolis terms with s^2. The speed model is that split of the reference's signal, per joint and
// reference sample: inertial(k) (the part that scales with s^2) and viscous(k) (with s), from
// parameters fitted by least squares to the robot's own nominal recordings. At speed ratio s the
// reference is expected to read
//
//   b_s(k) = b(k) + (s^2 - 1) inertial(k) + (s - 1) viscous(k).
//
// Torques in Nm are fitted with one parameter set for all joints (the coupling between joints is
// what separates the terms); a signal in percent of each joint's rated torque is torque times an
// unknown factor per joint, fitted with the parameters. Directions of parameter space that the task
// hardly excites are left out (truncated eigen-decomposition of the scaled normal equations), so
// the split is only made where the recordings support it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "warpguard/kinematics.hpp"
#include "warpguard/recording.hpp"
#include "warpguard/robot_description.hpp"

namespace warpguard {

struct Reference;  // profile.hpp

inline constexpr std::size_t kLinkParameters = 10;
inline constexpr std::size_t kJointParameters = 4;
// Smooth sign of the Coulomb column: qd / (|qd| + this), rad/s (about an encoder's velocity floor).
inline constexpr double kCoulombSmoothing = 0.01;

// Column of joint j's (0-based) parameter p (0 armature, 1 viscous, 2 Coulomb, 3 offset) in the
// regressor of a `dof`-joint arm: after the links' parameters.
constexpr std::size_t joint_parameter_column(std::size_t dof, std::size_t j, std::size_t p) {
    return kLinkParameters * dof + kJointParameters * j + p;
}

class DynamicsRegressor {
public:
    // `gravity` in the model's base frame: the default assumes an upright robot (base z up).
    explicit DynamicsRegressor(DhModel model, Eigen::Vector3d gravity = Eigen::Vector3d(0, 0, -9.81));

    std::size_t dof() const { return model_.dof(); }
    std::size_t columns() const { return (kLinkParameters + kJointParameters) * dof(); }
    // Column of link k's (0-based) parameter p, and of joint j's parameter p (0 armature,
    // 1 viscous, 2 Coulomb, 3 offset).
    std::size_t link_column(std::size_t k, std::size_t p) const { return kLinkParameters * k + p; }
    std::size_t joint_column(std::size_t j, std::size_t p) const { return joint_parameter_column(dof(), j, p); }
    // Column c's parameter for a person ("link 3 mass", "joint 2 Coulomb friction"); c < columns().
    std::string column_name(std::size_t c) const;

    // y (dof x columns) = Y(q, qd, qdd); with `gravity` false the gravity columns are left out (the
    // motion-dependent part alone). Does not allocate.
    void compute(std::span<const double> q, std::span<const double> qd, std::span<const double> qdd, bool gravity,
                 Eigen::Ref<Eigen::MatrixXd> y) const;

    // The parameter vector of a described robot (for tests and the simulator's own model): link
    // inertias shifted to the frame origins, friction and armature per joint, no offset.
    Eigen::VectorXd parameters(const std::vector<LinkDynamics>& links) const;

private:
    DhModel model_;
    Eigen::Vector3d gravity_;
};

// Joint velocities and accelerations of a sampled trajectory, by a local quadratic least-squares
// fit over +- half_width samples (real time stamps, so jitter is handled); the ends use the
// nearest full neighbourhood. qd and qdd must have q.size() entries.
void smooth_derivatives(std::span<const double> t, std::span<const double> q, std::size_t half_width,
                        std::span<double> qd, std::span<double> qdd);
inline constexpr std::size_t kDerivativeHalfWidth = 3;

struct SpeedModel {
    std::vector<std::vector<double>> inertial;  // [joint][reference sample], signal units at s = 1
    std::vector<std::vector<double>> viscous;   // [joint][reference sample]
    // What the fitted rigid-body model leaves unexplained of the reference (reference less the
    // model, smoothed over the derivative window), [joint][reference sample], signal units. How it
    // changes with the speed is not known: anywhere between not at all (a static effect) and with
    // s^2 (an inertial one), so at speed ratio s the reference may read anywhere between its
    // recorded value and (s^2 - 1) times this more (Detector: model-error band). Empty in profiles
    // from before it was kept: no band.
    std::vector<std::vector<double>> unexplained;
    // Fitted Coulomb (dry) friction per joint, signal units, >= 0 (0 where the joint does not move
    // in the task or its split was dropped). While a joint stands still its dry friction can hold
    // any torque within +- this value, depending on how the joint came to rest: at the recorded
    // speed that history repeats, at another speed it does not (Detector: still-joint band).
    std::vector<double> coulomb;
    // Per joint: the split itself is uncertain (every joint of an unsigned current, whose split is
    // fitted to a rebuilt sign): at another speed the reference may read anywhere between its
    // recorded value and the model's (Detector: model-error band; the friction-drift learning
    // forgives it too). Empty (a torque; profiles from before 2026-12-02): every split trusted.
    std::vector<bool> uncertain_split;
    // A speed that changes (the operator turning the override): with q(t) = q_ref(phi(t)) and
    // phi' = s, the acceleration is s^2 qdd_ref + s' qd_ref, and the torque gains s' times the
    // inertial torque of an acceleration qd_ref (velocity and gravity 0) - this table, per joint and
    // reference sample, signal units per unit of s' (1/s), from the same fitted parameters as
    // `inertial`. Empty in profiles from before it was kept (or without a fit): no speed-change band.
    std::vector<std::vector<double>> speed_change;
    // The 99th percentile of |s'| the detector estimated on the nominal calibration recordings,
    // which run at one speed: what its estimate reads without any change
    // (Detector::speed_change_rate). Only estimates beyond it, three in a row of one sign, count as
    // a changing speed (Detector::speed_changing). Infinite until calibrated: no band.
    double speed_change_floor = std::numeric_limits<double>::infinity();
    // The largest |speed ratio - 1| the detector estimated on the nominal calibration recordings
    // once its estimate had settled: a ratio within this is "the recorded speed". Infinite until
    // calibrated (and in profiles from before it was kept): the still-joint band never opens.
    double same_speed_tolerance = std::numeric_limits<double>::infinity();
    nlohmann::json derivation = nlohmann::json::object();
    // Expected reference value of joint j at reference sample k at speed ratio s.
    double expected(std::size_t j, std::size_t k, double reference_value, double s) const {
        return reference_value + (s * s - 1.0) * inertial[j][k] + (s - 1.0) * viscous[j][k];
    }
};

struct SpeedModelSource {
    std::string name;
    const Recording* recording = nullptr;
    // Per sample: the reference sample it was matched to (the calibration pass's shared partner).
    // It tells which part of the task a sample belongs to: a part carried between grasp and
    // release changes the load at the flange, so each stretch of the reference between changes of
    // motion gets its own load at the last link (mass and first moments). Empty: one load for all.
    std::vector<std::uint32_t> partners;
};

// How the robot's parameters are shared between the joints' signals: by the signal's unit (one
// set for Nm; one set and a fitted factor per joint for percent of each joint's rated torque and
// for a motor current in A, a current's joints that the model explains poorly keeping their own
// copy - or, where that copy's split exceeds the signal's range, the shared set's physics times
// their own factor with their own friction; a copy per joint otherwise), or a copy per joint
// whatever the unit (for comparison).
enum class ParameterSharing { ByUnit, PerJoint };

// Which samples the speed model (and the arm model fitted on the calibration's nominal cycles,
// below) is fitted on. LeaveOut: only those where the robot moves (summed squared joint velocity
// over 10^-3 of its 95th percentile on the reference): at rest the split is 0 whatever the
// parameters, and a task may press there, which bent the fit (a contact task at another override
// stopped every cycle; docs/detection.md). Keep: every sample, for a
// motor current whose sign was rebuilt by a fit over every reference sample (rebuild_current_sign):
// fitted on the moving samples alone, the held-out LR Mate-like's screwdriver joint got a wrong
// split and its 80 % run stopped in 60 of 100 cycles (1 event with Keep).
enum class RestSamples { Keep, LeaveOut };

// Fits the per-joint dynamics to the nominal recordings (at most `max_rows` samples, evenly spread,
// `rest` says which) and evaluates the split on the reference. Throws std::invalid_argument when
// the model does not fit the robot (joint count), the signal is unsigned (motor-current magnitude)
// or there are too few samples.
// `gravity` in the model's base frame (default: an upright robot, base z up).
SpeedModel fit_speed_model(const DhModel& model, const Reference& reference, SignalKind signal, SignalUnit unit,
                           std::span<const SpeedModelSource> nominal, const Eigen::Vector3d& gravity = Eigen::Vector3d(0, 0, -9.81),
                           std::size_t max_rows = 60000, ParameterSharing sharing = ParameterSharing::ByUnit,
                           RestSamples rest = RestSamples::LeaveOut);

// The sign of the torque behind an unsigned motor current (a magnitude), per joint and reference
// sample, rebuilt with the robot's kinematics: per joint the rigid-body regressor is fitted to
// sign * |signal| on the reference, each sample's sign set to the fit's wherever the fit is clear
// of 5 % of the joint's peak (kept elsewhere), fit and signs alternated until no sign changes; from
// several starting guesses (all +1, the sign of the joint velocity, of its acceleration plus a
// Coulomb step of several sizes, and of those plus a viscous share of the velocity), the one with
// the least residual kept. A last fit leaves out the samples within the 5 % band (their signs were
// the start's guess) and gives every sample its sign. Then the segments between the dips of |I|
// into the 5 % band (a sign changes only through zero) are flipped one at a time, the one that
// lowers the joint's residual most, until none does. One sign per joint is free (the fit absorbs
// it): it is set to the orientation whose fit with viscous and Coulomb friction held >= 0 leaves
// less unexplained, so that the speed model's fitted friction comes out positive. Then the joints
// together: runs of equal sign are flipped where one parameter set for all joints with a factor per
// joint explains the currents better (joints the model explains poorly left out), and a joint with
// a flipped run gets its free sign again. Last, where the reference declares the part the robot
// carries (Reference::payload), a joint left out of that set that moves is fitted again with the
// part as a load on the last link (mass and first moments times the declared kg), and takes those
// signs where the load explains at least a quarter of what its fit left (a wrist swinging a box).
// Measured against torque twins of simulated arms
// (docs/detection.md): reliable where the model explains the current (shoulder and elbow, and
// through the shared fit the VP-6242-like's elbow), not on joints it cannot (a wrist near its
// noise, a process torque). Throws std::invalid_argument when the reference does not fit the model
// or is too short to fit.
struct CurrentSign {
    std::vector<std::vector<std::int8_t>> sign;  // [joint][reference sample]: +1 or -1
    nlohmann::json derivation = nlohmann::json::object();
};
CurrentSign rebuild_current_sign(const DhModel& model, const Reference& reference,
                                 const Eigen::Vector3d& gravity = Eigen::Vector3d(0, 0, -9.81));

// A payload the robot program declares (Sample::payload, kg), carried at the kinematic model's tool
// point: a point mass there needs the joint torques J_p(q)^T m (a_p - g) (J_p the tool point's
// translational Jacobian, a_p its acceleration). The part's own rotational inertia is left out (a
// gripped part of a few kg at a few centimetres' radius: under 1 % of its gravity torque). The
// reference is recorded with its own declared payload; a sample that declares another is compared
// with the reference plus the difference's torques, the tool point's acceleration taken from the
// reference at the matched sample (times the square of the speed ratio).
struct PayloadModel {
    DhModel model;                                          // its tool: where the payload is carried
    Eigen::Vector3d gravity = Eigen::Vector3d(0, 0, -9.81);  // base frame, m/s^2
    // Per joint: signal units per Nm. 1 for a signal in Nm; for percent of rated torque measured
    // from the jumps at the declared payload changes of the recordings (0: not measurable, that
    // joint is compared as recorded).
    std::vector<double> signal_per_nm;
    // Per joint: how far the model's payload torque may be off, relative (from the jump fit: in Nm
    // the joint's own jump ratio's distance from 1 plus two standard errors; in percent two
    // relative standard errors of its scale; at most 1). A payload that differs from the
    // reference's is forgiven this share of the difference's torque (Detector: payload band).
    std::vector<double> relative_error;
    // How far the part's centre of mass may lie from the model's tool point, in the last DH frame: up
    // to three orthogonal directions, each scaled by how far along it (m). A direction the
    // standstill changes excite: two standard errors of the fit; one they cannot see (moving the
    // mass along the line of its weight changes no torque at a standstill): the last link's
    // length. The payload band adds, per joint, what moving the centre that far does to the
    // difference's torque: |(dF x z_j) . R_n u_k| for each direction u_k, dF the difference of
    // the payload forces. Empty (a profile from before 2026-11-29, or made by hand): the relative
    // error alone.
    std::vector<Eigen::Vector3d> centre_uncertainty;
    // Only the declared payload beyond the reference's part is taken off (KA-mDTW, whose lever
    // lengths scale the part's force, and --keep-payload): the reference and the matched signal
    // keep the part the reference carried (the largest mass it declares), and a sample carrying
    // another mass is matched as if it carried that part; one carrying none is matched as it is.
    bool beyond_reference_part = false;
    nlohmann::json derivation = nlohmann::json::object();
};

// Columns of the tool point's translational Jacobian at q, in the model's base frame (revolute:
// z_{i-1} x (p - o_{i-1}); prismatic: z_{i-1}). `frames` holds dof()+2 entries of scratch,
// `columns` dof(). Does not allocate.
void tool_point_jacobian(const DhModel& model, std::span<const double> q, std::span<Eigen::Isometry3d> frames,
                         std::span<Eigen::Vector3d> columns);
// The tool point's acceleration (base frame) along a recorded joint trajectory: a local quadratic
// fit of its position over +- kDerivativeHalfWidth samples with the real time stamps.
std::vector<Eigen::Vector3d> tool_point_acceleration(const DhModel& model, std::span<const double> t,
                                                     const std::vector<std::vector<double>>& q);

// The robot's own dynamics without the task's force. Thesis §4.5.1 feeds KA-mDTW "the deviation
// caused by the contact task force, which was not included in the nominal dynamic model of the
// robot" (there: the current of the same motion without the load, standing for an optimal model),
// and §4.6 names a model as its source in operation. Fitted on a dry run of the task - the same
// program with no part to carry and nothing to press - with the speed model's regressor and solve
// (one parameter set for torques in Nm, a scale per joint for percent of rated torque), but with no
// load per stretch: everything the dry run does is the arm's. Only a signed torque signal.
struct ArmDynamics {
    DhModel model;
    Eigen::Vector3d gravity = Eigen::Vector3d(0, 0, -9.81);  // base frame, m/s^2
    SignalUnit unit = SignalUnit::Nm;
    std::vector<Eigen::VectorXd> parameters;  // per joint, regressor columns, in that joint's signal units
    // How the detector estimates a sample's joint velocities and accelerations, which it cannot look
    // ahead for (ArmDeviationFilter): a polynomial of this order fitted to the newest this many
    // samples. fit_arm_dynamics chooses it on the dry runs: the candidate whose causal deviation
    // comes closest to the offline one (a smooth path wants few samples and a cubic; encoder
    // quantisation wants more). Defaults: a cubic over 7 samples.
    std::size_t causal_samples = 7;
    std::size_t causal_order = 3;
    nlohmann::json derivation = nlohmann::json::object();
};

// The arm model's fitted Coulomb (dry) friction of `joint`, in its signal units, >= 0 (a negative
// fit, which is not physical, counts as none). The arm deviation has it taken off already, smoothly
// (kCoulombSmoothing): while the joint stands still its friction may hold anything within +- this.
double arm_coulomb(const ArmDynamics& arm, std::size_t joint);

// The summed squared joint velocity (local quadratic fits) at or below which a sample of `runs`
// is at rest: 10^-3 of its 95th percentile over all of them (-1 when they hold no sample);
// `motion`, when given, receives each run's per-sample sums.
double rest_motion_bound(std::span<const Recording* const> runs, std::vector<std::vector<double>>* motion = nullptr);

// Fits the arm model to dry runs of the task (`rest` says which samples: a dry run holds nothing but
// the arm, so Keep; the calibration's own nominal cycles may press or screw while the robot stands:
// calibration fits those with LeaveOut and keeps the rest only where the arm explains it as well
// as the moves (calibrate_with_arm_from_nominal) — fitted along, the presses bent the contact
// tasks' inertial parameters and every cycle at 70 % override stopped; docs/detection.md).
// Throws std::invalid_argument when a run does not fit the model (joint count), its signal is not a
// signed torque, the runs' units differ, or there are fewer samples than parameters.
ArmDynamics fit_arm_dynamics(const DhModel& model, std::span<const Recording* const> dry_runs,
                             const Eigen::Vector3d& gravity = Eigen::Vector3d(0, 0, -9.81), std::size_t max_rows = 60000,
                             RestSamples rest = RestSamples::Keep);

// The recording with every joint's signal replaced by the signal less what the arm model expects at
// its joint angles, velocities and accelerations (local quadratic fits, +- kDerivativeHalfWidth
// samples: an offline transform, it looks 3 samples ahead). Throws std::invalid_argument when the
// recording's joint count, signal or unit differ from the model's.
Recording arm_deviation(const ArmDynamics& arm, const Recording& recording);

// The same deviation sample by sample, as the detector computes it in operation: it cannot look
// ahead, so each sample's joint velocities and accelerations come from a polynomial least-squares
// fit (ArmDynamics::causal_order, real time stamps) of the newest ArmDynamics::causal_samples
// angles, evaluated at the newest one. A stream's first samples use what there is (one sample: at
// rest; two: a constant velocity; then up to the full order). Time that runs backwards or a gap of
// more than kCausalGapFactor times the previous spacing starts the estimate afresh. Does not
// allocate after construction.
inline constexpr std::size_t kMaxCausalSamples = 15;
inline constexpr std::size_t kMaxCausalOrder = 3;
inline constexpr double kCausalGapFactor = 5.0;
// The causal estimator's largest acceleration error (over where in its span it happens) when the
// true acceleration begins to change at a constant rate (a kink), as a share of what it changes
// by over the estimator's span, at evenly spaced samples: 0.21 for a cubic over 5-15 samples (it
// follows an acceleration that changes linearly exactly), 0.5 for a quadratic. Throws as
// ArmDeviationFilter's constructor.
double causal_kink_response(std::size_t samples, std::size_t order);

class ArmDeviationFilter {
public:
    // Throws std::invalid_argument when the parameters do not fit the model or the estimator is
    // outside 2..kMaxCausalOrder, order + 1..kMaxCausalSamples.
    explicit ArmDeviationFilter(ArmDynamics arm);
    const ArmDynamics& arm() const { return arm_; }
    void reset() { count_ = 0; }
    // Takes the sample into the history and estimates its velocities and accelerations.
    void differentiate(double t, std::span<const double> q);
    // differentiate(), then out[j] = tau[j] - the arm's expected signal. Spans of the model's joint count.
    void apply(double t, std::span<const double> q, std::span<const double> tau, std::span<double> out);
    // The samples the newest estimate rests on (up to causal_samples; 1 after a reset, a gap or time
    // running backwards).
    std::size_t samples() const { return count_; }
    // The velocity and acceleration of the newest sample, per joint.
    std::span<const double> velocity() const { return qd_; }
    std::span<const double> acceleration() const { return qdd_; }
    // out = M(q) a: the arm model's torque for the joint accelerations `a` alone (no velocity, no
    // gravity, no offset), in its signal units. Spans of the model's joint count; no allocation.
    void inertial_torque(std::span<const double> q, std::span<const double> a, std::span<double> out);
    // causal_kink_response() of this filter's estimator.
    double kink_response() const { return kink_response_; }

private:
    ArmDynamics arm_;
    DynamicsRegressor regressor_;
    Eigen::MatrixXd y_;
    std::vector<double> still_;  // zero velocities, for inertial_torque
    double kink_response_ = 0.0;
    std::vector<double> t_;   // ring of the newest times, causal_samples
    std::vector<double> q_;   // ring of the newest angles, sample after sample
    std::vector<double> qd_, qdd_;
    std::size_t count_ = 0;   // samples in the ring (saturates at its size)
    std::size_t head_ = 0;    // slot of the next sample
};

// arm_deviation() with the causal derivatives of ArmDeviationFilter: exactly what a detector with
// this arm model matches when the recording is streamed to it from its first sample.
Recording causal_arm_deviation(const ArmDynamics& arm, const Recording& recording);

nlohmann::json to_json(const ArmDynamics& arm);
ArmDynamics arm_dynamics_from_json(const nlohmann::json& j);

nlohmann::json to_json(const PayloadModel& model);
PayloadModel payload_model_from_json(const nlohmann::json& j, std::size_t joints);

// The recording with every joint's signal less the torque the payload model expects of the payload
// each sample declares: signal_per_nm x J_p^T m (a - g), the tool point's Jacobian at the recorded
// angles and its acceleration from local quadratic fits (+- kDerivativeHalfWidth samples, an
// offline transform). What is left is the arm's own, as far as the payload model is right. Samples
// that declare no payload (0) are unchanged. Throws std::invalid_argument when the recording
// declares no payload or its joint count differs from the model's.
Recording unload_payload(const PayloadModel& payload, const Recording& recording);

nlohmann::json to_json(const SpeedModel& model);
SpeedModel speed_model_from_json(const nlohmann::json& j, std::size_t joints, std::size_t reference_size);

}  // namespace warpguard
