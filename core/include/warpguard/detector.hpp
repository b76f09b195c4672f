// The per-robot detector: one sample in, one decision out.
//
//   Detector detector(profile);
//   Decision d = detector.update(sample);   // every robot cycle
//
// For every joint the newest sample enters the measurement window (FIFO of m samples; the first
// sample of a stream fills all m places, as the thesis does, §3.2.2), the window is matched against
// the reference with mDTW (or KA-mDTW on lever-scaled signals), and rules 1 and 2 are applied.
// Any joint over any threshold means STOP; the decision names the joint and rule whose value is
// furthest over its threshold. A sample that cannot be judged (wrong joint count, a value that is
// not finite) is answered with STOP and Rule::Fault.
//
// Matching uses the streaming matcher by default (exactly the published result, much faster); the
// published O(m n) implementation can be chosen for comparison and stays the test oracle.
//
// All storage is allocated in the constructor; update() does not allocate.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <Eigen/Geometry>

#include "warpguard/decision.hpp"
#include "warpguard/decision_rules.hpp"
#include "warpguard/mdtw.hpp"
#include "warpguard/profile.hpp"
#include "warpguard/recording.hpp"
#include "warpguard/streaming_mdtw.hpp"

namespace warpguard {

struct JointEvaluation {
    double cost = 0.0;  // mDTW cost d(m, end)
    std::size_t ref_start = 0;
    std::size_t ref_end = 0;
    AbsoluteDifference rule1;
    double rule2 = 0.0;
    // The newest sample against the partner shared by all joints (every detector computes it).
    AbsoluteDifference shared;
    double cusum = 0.0;  // phase-aware: accumulated ratio over the CUSUM reference
    // Phase-aware detector only: the friction drift taken off the newest sample (for a rebuilt
    // current sign, the magnitude's terms too, as the sample is signed), the threshold at
    // the matched phase, and |deviation| / threshold (> 1 is over).
    double drift = 0.0;
    // The part of |deviation| forgiven as dry friction: while the speed is not the recorded one
    // (or the joint has not moved since the stream began, or its friction has changed:
    // friction_band_open) and the joint (nearly) stands still, the torque its friction holds
    // depends on how it came to rest or breaks away, anywhere within +- the fitted Coulomb
    // friction (so up to twice that from the reference's value), scaled by how still the joint
    // is. Once the joint rests in the reference, the offset it came to rest with is held and
    // changes from it are judged instead. 0 where the band is shut.
    double friction_band = 0.0;
    // The part of |deviation| forgiven as the payload model's uncertainty: its relative error
    // (calibrated) times the torque of the difference between the payload this sample declares and
    // the reference's at the partner. 0 at the reference's payload (the same model error on both
    // sides cancels).
    double payload_band = 0.0;
    // The share of the deviation explained by the speed ratio still converging since the stream
    // began (with a speed model): the signed deviation is first moved toward the interval of
    // values the reference would read at any speed between the running estimate and that estimate
    // freed of its start value (Detector::speed_interval). Forgiven amount, >= 0; about 0 once
    // the estimate has settled.
    double speed_band = 0.0;
    // The part of the deviation then forgiven as a speed that changes (the override turned): s'
    // (Detector::speed_change_explained) times the torque of an acceleration along the reference's
    // velocity (SpeedModel::speed_change), on that torque's side only. Forgiven amount, >= 0.
    double speed_change_band = 0.0;
    // With an arm model, while a reported turn is followed: the part of the deviation then forgiven
    // as the arm model's causal acceleration lagging the controller's ramp (Detector::arm_lag_band:
    // either sign). Forgiven amount, >= 0.
    double arm_lag_band = 0.0;
    // The part of the deviation forgiven as what the speed model leaves unexplained of the
    // reference, u (SpeedModel::unexplained): at speed ratio s it may read anywhere between u and
    // s^2 u, so up to (s^2 - 1) u of the deviation, on u's side only; and where the split itself
    // is uncertain (SpeedModel::uncertain_split), anything between the model's value and the
    // recorded one. Forgiven amount, >= 0; 0 at the recorded speed.
    double model_band = 0.0;
    double phase_threshold = 0.0;
    double ratio = 0.0;
    // Phase-aware: where the ratio rule's limit lies for the newest sample, as the least and
    // largest raw deviation (signal less the learned drift, less the reference at the shared
    // partner) the rules leave under the threshold given this sample's partner range, speed
    // interval, friction, payload and rest bands: |deviation| - bands > threshold below / above
    // them. The accumulated rule (CUSUM) can stop a sustained deviation inside them. (Other
    // detectors: the partner range alone.)
    double limit_low = 0.0;
    double limit_high = 0.0;
};

enum class MatcherKind { Streaming, Published };

// The friction-drift model's bounded fit: the (Coulomb, viscous) pair minimising
// x' R x - 2 b' x, R = [[r00, r01], [r01, r11]] positive definite, within |Coulomb| <= coulomb_limit and
// |viscous| <= viscous_limit (infinite limits: the unbounded minimum R^-1 b).
std::array<double, 2> bounded_friction(double r00, double r01, double r11, double b0, double b1, double coulomb_limit,
                                       double viscous_limit);

// The same for the four terms of an unsigned current's drift model (signed Coulomb and viscous
// terms, then the magnitude's): the x minimising x' R x - 2 b' x, R symmetric positive definite,
// within |x_i| <= limit[i] (infinite: unbounded in that term). Exact: the least of the minima on
// the box's faces (3^4 of them) that lie inside the box.
std::array<double, 4> bounded_fit(const std::array<std::array<double, 4>, 4>& r, const std::array<double, 4>& b,
                                  const std::array<double, 4>& limit);

class Detector {
public:
    // Validates the profile (std::invalid_argument); for KA-mDTW also refuses a reference with a
    // near-zero lever length (NearZeroLeverError).
    explicit Detector(Profile profile, MatcherKind matcher = MatcherKind::Streaming);

    Decision update(const Sample& sample);
    // Starts a new stream: the next sample fills the whole window with copies of itself, and no
    // rule is applied until `window` real samples have come in (warming_up()). What the detector
    // learned of the robot, the friction drift (friction_drift()), is kept: the same robot after a
    // reconnect, a hold or a resume. Another robot or an unrelated recording needs a new Detector.
    void reset();
    bool warming_up() const { return updates_ < profile_.window; }

    const Profile& profile() const { return profile_; }
    std::size_t joints() const { return profile_.joints; }
    std::size_t window_length() const { return profile_.window; }
    std::size_t updates() const { return updates_; }
    // Measurement samples whose lever length was below the minimum and was clamped (KA-mDTW only).
    std::size_t clamped_levers() const { return clamped_levers_; }
    // A joint's noise level estimated from the reference (signal units).
    double noise_scale(std::size_t joint) const { return noise_scale_[joint]; }
    // Phase-aware detector: the friction drift learned so far per joint (the visible record of
    // adaptation): {Coulomb term in signal units, viscous term in signal units per rad/s}.
    std::array<double, 2> friction_drift(std::size_t joint) const { return friction_[joint]; }
    // A rebuilt current sign (Profile::current_sign): the drift the model learned in the current's
    // magnitude, {Coulomb term, viscous term per rad/s}, taken off |signal| (0 for a torque). The
    // sign rebuilt from the kinematics is not right everywhere (a joint the model does not explain:
    // a wrist near its noise, a screwdriver's process torque), and where it is wrong more friction
    // shows as more current in either direction of motion, which a signed term cannot follow.
    std::array<double, 2> magnitude_drift(std::size_t joint) const { return magnitude_[joint]; }
    // The Coulomb change learned on `joint`, signed or in the magnitude, whichever is larger.
    double coulomb_change(std::size_t joint) const {
        return std::max(std::abs(friction_[joint][0]), std::abs(magnitude_[joint][0]));
    }
    // With a speed model in the profile: the speed ratio of the task now against the reference
    // (1 = as recorded; 0.7 at 70 % override), estimated from the joint velocities; else 1.
    double speed_ratio() const { return speed_ratio_; }
    // With a speed model: how fast the speed ratio changes now (s', 1/s), from the joints'
    // measured acceleration along the reference's direction of motion less what the running speed
    // explains, averaged over the latest kRateSamples samples (0 where the robot is not clearly
    // moving or the joint angles do not confirm the partner).
    double speed_change_rate() const { return speed_change_rate_; }
    // The s' the latest sample's speed band explained torques with (phase-aware, with a speed
    // model): speed_change_rate() while the speed clearly changes, before that the s' both the
    // joint angles and the torques witness (witnessed_speed_change), else 0.
    double speed_change_explained() const { return speed_change_explained_; }
    // With an arm model while a reported turn is followed: how far either side of 0 the newest
    // sample's deviation of `joint` may lie from the arm model's causal acceleration alone:
    // kink_response() x (the range of s' over the fit's span x |M(q) qd_ref| + the range of s^2
    // x |M(q) qdd_ref|), docs/detection.md; 0 otherwise.
    double arm_lag_band(std::size_t joint) const;
    bool has_speed_model() const { return !speed_inertial_.empty(); }
    // The profile models a declared payload; the last sample declared one; what its payload's
    // torque took off each joint's newest sample (matched units).
    bool has_payload_model() const { return profile_.payload.has_value(); }
    bool payload_declared() const { return payload_active_; }
    double payload_taken_off(std::size_t joint) const { return payload_applied_[joint]; }

    // The newest sample's place against the reference, for a display in the units the robot sent
    // (before the arm model, the declared payload and KA-mDTW's lever scaling were taken off): how
    // far the newest matched sample lies from the reference value it was judged against (the
    // shared partner's expected value and the learned drift for the phase-aware detector, the
    // joint's own partner for the published one), and the offsets from that reference value at
    // which a rule would call the sample over its threshold (low <= 0 <= high: the phase-aware
    // ratio rule's limits, JointEvaluation::limit_low/high; rule 1's +- theta1), all times the
    // joint's lever length for KA-mDTW. The measured value less `offset` is what the robot would
    // have sent had it matched the reference exactly.
    struct Judged {
        double offset = 0.0;
        double low = 0.0;
        double high = 0.0;
    };
    Judged judged(std::size_t joint) const;
    // The speed ratio has enough evidence behind it since the stream began to be believed.
    bool speed_settled() const { return speed_inertial_.empty() || speed_evidence_ * kSpeedGain >= kSpeedSettled; }
    // The speed is known: settled, or given by the stream's first reported override over the
    // reference's (follow_reported_override) while the evidence for settling still grows.
    bool speed_known() const { return speed_settled() || speed_prior_weight_ == 0.0; }
    // Phase-aware, with a speed model: the running speed is not the recorded one (beyond the
    // calibrated tolerance), so joints standing still get their dry-friction band (JointEvaluation).
    // Settled: the estimate says so. While it converges: every speed it may still settle at
    // (speed_interval) does (IRB120-like stream starting at 70 % override: joint 3 broke away at
    // its first motion with the estimate at 0.78 and the interval 0.70-0.78, judged without the
    // band; its CUSUM reached 2.84 against a limit of 2.83).
    bool off_recorded_speed() const;
    // Whether joint `joint`'s dry-friction band is open, and its width at reference sample
    // `partner` (0 where shut): the torque the joint may hold anywhere within, unjudged.
    bool friction_band_open(std::size_t joint, bool off_speed) const;
    // The friction-drift model has learned a Coulomb change on `joint` more than twice the largest
    // it learned on the calibration recordings (PhaseAwareSettings::drift_coulomb_nominal): the
    // friction changed.
    bool friction_changed(std::size_t joint) const;
    double friction_band(std::size_t joint, std::size_t partner, bool off_speed) const;
    // Without a friction band (no speed model: an unsigned current, or no kinematic model), the
    // level of a joint that has not moved since the stream began is unknown.
    bool resting_level_unknown(std::size_t joint) const;

    // State after the last update, per joint (0-based index).
    std::span<const JointEvaluation> evaluations() const { return evaluations_; }
    // The measurement window in time order, as matched (lever-scaled for KA-mDTW).
    std::span<const double> window(std::size_t joint) const {
        return std::span<const double>(windows_).subspan(joint * profile_.window, profile_.window);
    }
    // The reference as matched (lever-scaled for KA-mDTW).
    std::span<const double> reference(std::size_t joint) const { return references_[joint]; }
    // A rebuilt current sign: whether it is uncertain at reference sample k, where the joint moves
    // and reads less than its fitted dry friction (always false for a torque, and on a joint with
    // its own copy of the speed model's parameters).
    bool sign_uncertain(std::size_t joint, std::size_t k) const { return !sign_uncertain_.empty() && sign_uncertain_[joint][k] != 0; }
    std::span<const PathStep> path(std::size_t joint) const {
        return streaming_ ? std::span<const PathStep>(streaming_->result(joint).path) : std::span<const PathStep>(paths_[joint]);
    }
    MatcherKind matcher() const { return streaming_ ? MatcherKind::Streaming : MatcherKind::Published; }
    // Joint groups the streaming matcher handed to the published algorithm (first sample, overflow).
    // Cells the streaming matcher's sweeps computed so far (per lane group of up to 8 joints).
    std::uint64_t matcher_cells() const { return streaming_ ? streaming_->cells() : 0; }

private:
    Decision fault(const Sample& sample) const;
    // Which reference cycles' values a partner range spans: all (the twins pooled, for judging a
    // sample) or the partner's own cycle only (for choosing the partner: see score_of in update()).
    enum class Copies { All, Own };
    AbsoluteDifference near_deviation(std::size_t joint, std::size_t partner, Copies copies = Copies::All) const;
    AbsoluteDifference near_deviation(std::size_t joint, std::size_t partner, double a, Copies copies) const;
    // The least and largest reference value within +- kPartnerSlack samples of `partner` and, for
    // mDTW with several reference cycles and Copies::All, of its twins in the other cycles
    // (twin_low_/high_).
    std::pair<double, double> partner_range(std::size_t joint, std::size_t partner, Copies copies = Copies::All) const;
    // How far `a` lies beyond [low, high] (signed; 0 inside).
    static double beyond_range(double a, double low, double high) { return a > high ? a - high : (a < low ? a - low : 0.0); }
    // The reference value of `joint` at reference sample k, as expected at the current speed ratio.
    double expected(std::size_t joint, std::size_t k) const {
        const double b = references_[joint][k];
        if (speed_inertial_.empty()) return b;
        const double at_speed = b + speed_c2_ * speed_inertial_[joint][k] + speed_c1_ * speed_viscous_[joint][k];
        // With a payload model the reference is matched unloaded: its payload's inertial torque,
        // taken off at the recorded speed, scales with the square of the speed ratio too.
        return payload_inertial_.empty() ? at_speed : at_speed - speed_c2_ * payload_inertial_[joint][k];
    }
    void update_speed(std::size_t partner, std::span<const double> q);
    // What the speed model says the running speed changes joint `joint`'s reference at sample k by.
    double split_change(std::size_t joint, std::size_t k) const { return expected(joint, k) - references_[joint][k]; }
    // JointEvaluation::payload_band of joint `joint` at reference sample `partner` (a declared
    // payload, with a payload model): the model's relative error times the torque of the
    // difference between the declared payload and the reference's, plus what the centre of mass's
    // uncertainty (PayloadModel::centre_uncertainty) does to that difference's torque.
    // `force_difference`: payload_force_difference(partner).
    double payload_band(std::size_t joint, std::size_t partner, bool scaled, const Eigen::Vector3d& force_difference) const;
    // The declared payload's force less the reference's at `partner`, m (s^2 a - g) each (zero
    // without the centre's uncertainty, which alone needs it).
    Eigen::Vector3d payload_force_difference(std::size_t partner) const;
    // The speeds the task may run at, given the estimate so far: between speed_ratio_ and the same
    // average without its start value, (speed_ratio_ - w) / (1 - w) with w = speed_prior_weight_
    // (the whole range kSpeedMin..kSpeedMax while w is near 1).
    std::pair<double, double> speed_interval() const;
    // The speed clearly changes: each of the latest kRateSamples estimates of s' lies beyond the
    // calibrated floor, all of one sign (a turned override reads so for tens of samples; what the
    // estimate reads at one speed beyond the floor are single samples where the task's
    // acceleration changes fastest).
    bool speed_changing() const;
    // Before speed_changing() can tell (the first 10-30 ms of a turned override's ramp, while s'
    // is still under what the angles read at one speed): the s' the joint angles (witness_rate_,
    // or the sample's before it where both read one side and that one read more) and the torques
    // (the shared deviations fitted to s' x the speed-change torques, each joint in units of its
    // phase threshold) both read, the smaller of the two when they agree on the side, else 0.
    // Needs this sample's shared deviations.
    double witnessed_speed_change() const;
    // The two witnesses: the joint angles' s' (witness_rate_, or the sample's before it where both
    // read one side and that one read more; 0: not measured) and the torques' (the fit above; 0
    // where it explains less than kWitnessShare, and with an unsigned current).
    double angles_speed_change() const;
    double torques_speed_change() const;
    // The share of the deviations' weighted sum of squares the torques' s' must explain to count
    // as a witness: more than anything else does (a majority), a rule of thumb, not fitted.
    static constexpr double kWitnessShare = 0.5;
    // A speed override the robot reports (Sample::speed_override): when it turns while the arm
    // stands, the estimate is scaled by the same factor at once (no velocity can tell, and the
    // controller's ramp runs unseen); when it turns while the arm moves, the estimate follows the
    // ramp sample by sample (measured_ratio_). For the controller's ramp the speed interval spans
    // the speeds before and after while either witness's s' on the turn's side is taken
    // (reported_turn_open()).
    void follow_reported_override(const Sample& sample);
    // The estimate set to `to`, the ratios its outlier test remembers scaled alike.
    void scale_speed_estimate(double to);
    bool reported_turn_open() const { return turn_side_ != 0; }
    // The speed-change band explains a deviation of either sign: an unsigned current (its sign
    // rebuilt) while a reported turn is followed. Otherwise one-sided (a collision that slows the
    // arm reads s' < 0 but pushes the torque the other way).
    bool two_sided_speed_change() const { return reported_turn_open() && !profile_.current_sign.empty(); }

    Profile profile_;
    std::vector<std::vector<double>> references_;  // per joint, scaled once for KA-mDTW
    std::unique_ptr<StreamingMdtw> streaming_;     // default matcher
    std::unique_ptr<PublishedMdtw> published_;     // or the published one
    std::vector<std::vector<double>> rings_;       // per joint FIFO storage
    std::vector<double> windows_;                  // joint after joint, time-ordered, for the matcher
    std::vector<std::vector<PathStep>> paths_;     // published matcher only
    std::vector<JointEvaluation> evaluations_;
    std::vector<double> levers_;                   // scratch for KA-mDTW
    // With an arm model (profile.arm): the newest sample less the arm's expected torque, and the
    // filter that computes it (causal derivatives, no allocation).
    std::unique_ptr<ArmDeviationFilter> arm_;
    std::vector<double> arm_deviation_;
    // While a reported turn is followed with an arm model (arm_lag_band): the arm's inertial
    // torque of an acceleration along this sample's velocity over the speed (M(q) qd / s =
    // M(q) qd_ref) and along the reference's acceleration at the partner (M(q) qdd_ref), per joint
    // in its signal units (scratch: arm_turn_accel_); and the speed estimate's s' and s^2 of the
    // latest samples (rings of the arm filter's span: 0 and the speed before the turn, filled when
    // a turn opens, turn_rates_fresh_). The true acceleration s^2 qdd_ref + s' qd_ref is not
    // followed by the causal fit while it changes other than linearly: it misses up to
    // kink_response() of what it changed by over the span (a controller's ramp changes s'
    // smoothly; a s' that jumped could be missed by all of its jump). The deviation may hold
    // that much of either sign.
    std::vector<double> arm_turn_inertial_, arm_turn_accel_, arm_turn_path_inertial_;
    std::array<double, kMaxCausalSamples> turn_rates_{}, turn_squares_{};
    std::size_t turn_rate_next_ = 0;
    bool turn_rates_fresh_ = true;
    double turn_rate_range_ = 0.0, turn_square_range_ = 0.0;  // the rings' ranges, once per sample
    // A rebuilt current sign (Profile::current_sign): the newest magnitudes signed.
    std::vector<double> signed_sample_;
    // With a rebuilt current sign: whether the newest sample of `joint`, read with the other sign,
    // lies nearer the reference's range at `partner` (the sign it has there; with an uncertain
    // split, nearer the modelled or the recorded reading). False otherwise.
    bool reads_flipped(std::size_t joint, std::size_t partner, Copies copies = Copies::All) const;
    // The newest sample's deviation from the reference's range at `partner`, as it is and with the
    // other sign, and whether the other sign reads nearer the reference (with an uncertain split:
    // nearer either the modelled or the recorded reading).
    struct Readings {
        double as_is = 0, flipped = 0;
        bool flip = false;
    };
    Readings both_readings(std::size_t joint, std::size_t partner, Copies copies) const;
    // The reference sample nearest the sample's joint angles and the velocities `v` (in vector lanes).
    std::size_t kinematic_nearest(std::span<const double> q, std::span<const double> v);
    std::vector<std::size_t> over_;                // phase-aware: consecutive samples over, per joint
    std::vector<double> cusum_;                    // phase-aware: CUSUM per joint
    std::vector<double> noise_scale_;              // per joint, from the reference: scores the shared partner
    std::vector<double> angle_scale_;              // per joint, from the reference's angles
    std::size_t shared_ = 0;                       // the last shared partner
    // Friction drift model (phase-aware), per joint: deviation = c * qd / (|qd| + v0) + v * qd.
    static constexpr double kCoulombVelocity = 0.01;  // rad/s: v0, about the encoder noise's velocity floor
    // Weight of the prior "no drift", as a fraction of the model's memory (1 / drift_rate samples):
    // a new stream's first samples must not decide the model (a speed ratio still converging
    // there taught it 2 Nm of "friction" on the IRB120-like joint 2 at 70 % override).
    static constexpr double kFrictionPrior = 0.1;
    // The friction has changed (friction_changed) once the learned Coulomb term passes this many
    // times the largest the calibration recordings taught: that largest is a sample maximum, and
    // another run of the same nominal task passes it (KR6-like: 0.085 Nm on 200 held-out cycles
    // against 0.068 on 100 calibration cycles; from only 12 calibration cycles the VP-6242-like's
    // sim test opened the band on 11 % of its joint-samples at the recorded speed).
    static constexpr double kFrictionChangeFactor = 2.0;
    std::vector<double> previous_q_, velocity_, correction_;
    // The velocity before velocity_ (from the two samples before), for the acceleration; valid
    // once has_previous_velocity_.
    std::vector<double> previous_velocity_;
    bool has_previous_velocity_ = false;
    bool velocity_valid_ = false;  // velocity_ is from two samples (not a stream's first)
    double last_dt_ = 0.0;         // the newest sample's spacing (s), when velocity_valid_
    double previous_t_ = 0.0;
    bool has_previous_ = false;
    std::vector<std::array<double, 2>> friction_;
    std::vector<std::array<double, 5>> friction_normal_;  // EW sums: x0x0, x0x1, x1x1, x0y, x1y
    // A rebuilt current sign: the magnitude's terms (magnitude_drift), what they take off the newest
    // sample's magnitude, and the EW sums of their features x2 = s |x0|, x3 = s |x1| (s the sign
    // the newest sample is matched with) not already among friction_normal_'s: x0x2, x0x3 (= x1x2),
    // x1x3, x2y, x3y.
    std::vector<std::array<double, 2>> magnitude_;
    std::vector<double> magnitude_correction_;
    std::vector<std::array<double, 5>> magnitude_normal_;
    // The newest sample as matched, its magnitude less magnitude_correction_ (the sample itself
    // for a torque): what correction_ and the reference are taken off.
    double newest(std::size_t joint) const {
        const double v = windows_[joint * profile_.window + profile_.window - 1];
        return v < 0 ? v + magnitude_correction_[joint] : v - magnitude_correction_[joint];
    }
    std::vector<double> velocity_scale_;  // the friction model's ridge: median speed, rests included
    std::vector<double> viscous_speed_;   // the viscous term's bound: median speed while moving
    // The most the friction-drift model may learn per joint, in matched units: its Coulomb term
    // within +- the joint's fitted dry friction (SpeedModel::coulomb: the friction may at most
    // double, or vanish), its viscous term within +- that much at the joint's typical speed
    // (viscous_speed_: the reference's median speed while the joint moves). Infinite (no bound) without a speed model or
    // where the fitted dry friction is 0. Without it, a
    // task that presses steadily (the UR5e-like's screwing on the arm deviation) taught joint 6 a
    // Coulomb term of 58 and a viscous term of -79 that cancel at the screwing speed and are
    // 40-50 Nm off at any other.
    std::vector<double> friction_limit_;
    bool has_shared_ = false;
    // Speed model (profile.speed, scaled like the reference for KA-mDTW), the reference's joint
    // velocities, and the running speed-ratio estimate: an average of the ratio of the observed to
    // the reference velocity, each sample weighted by how fast the reference moves there (a
    // standstill says nothing about the override).
    std::vector<std::vector<double>> speed_inertial_, speed_viscous_, speed_unexplained_, reference_velocity_;
    std::vector<std::uint8_t> speed_uncertain_;  // per joint: SpeedModel::uncertain_split
    std::vector<std::vector<std::uint8_t>> sign_uncertain_;  // per joint and reference sample; empty: none
    // [joint][reference sample]: twice the joint's fitted Coulomb friction in matched units (per
    // sample for KA-mDTW's lever scaling); times how still the joint is, it is the band
    // JointEvaluation::friction_band forgives off the recorded speed.
    std::vector<std::vector<double>> friction_band_;
    // A joint rests where the reference moves it at most a ninth of the Coulomb smoothing velocity
    // (the smooth Coulomb term is then under a tenth of its full value: the model says nothing about
    // the friction there). Its held offset is the mean of the first kRestSamples samples of the
    // rest: a few, so that one noisy sample does not set it, and a collision that starts within
    // them is still judged beyond the band.
    static constexpr double kRestVelocity = kCoulombSmoothing / 9.0;
    static constexpr std::size_t kRestSamples = 5;
    // [joint][reference sample]: the sample's twins in the reference's other cycles (+- kPartnerSlack)
    // whose recorded values are least and largest (the sample itself where none is beyond it).
    // Empty without the reference's cycle begins, or for KA-mDTW.
    std::vector<std::vector<std::uint32_t>> twin_low_, twin_high_;
    std::vector<std::vector<std::uint8_t>> reference_rest_;  // [joint][reference sample]: rests there (and just after)
    std::vector<std::size_t> rest_samples_;  // samples of the current rest seen so far (saturates)
    std::vector<double> rest_offset_;        // accumulated, then held offset of the current rest
    // How far a resting joint's value `x` lies beyond the dead zone [low, high] as it is or less its
    // held rest offset, whichever is nearer: what the rules judge once the offset is set, and (for
    // a level found at the stream's start) what scores the shared partner. The offset shifts the
    // value, not the deviation left after the dead zone: where the zone is wide (the partner range
    // at the start of a move) a value inside the shifted zone is no change (planar arm, a level
    // 1.6 F found at rest: as the torque ramped for the move, the deviation 0.85 from the range
    // less the held 1.27 read as a change of 0.42, a CUSUM stop; the value less 1.27 lay inside).
    double change_from_rest_offset(std::size_t joint, double x, double low, double high) const {
        return std::min(std::abs(beyond_range(x, low, high)), std::abs(beyond_range(x - rest_offset_[joint], low, high)));
    }
    // Whether each joint has clearly moved (kMovingVelocity) since the stream began. Until it has,
    // the torque its dry friction holds is whatever it held when it came to rest before the stream
    // began, which no sample showed: the band is open for it at any speed.
    std::vector<std::uint8_t> moved_;
    double speed_ratio_ = 1.0, speed_c2_ = 0.0, speed_c1_ = 0.0;
    // The speed estimate and the factors derived from it (s^2 - 1 and s - 1), set together.
    void set_speed_ratio(double s) { speed_ratio_ = s, speed_c2_ = s * s - 1.0, speed_c1_ = s - 1.0; }
    double speed_motion_ = 1.0;  // sum of squared reference velocities that counts as clearly moving
    // Evidence behind the speed ratio since the stream began, in clearly moving samples. Until it
    // reaches kSpeedSettled time constants of the estimate (kSpeedSettled / kSpeedGain samples) the
    // ratio may still be converging, and the friction-drift model learns nothing (it would learn
    // the speed error as friction).
    double speed_evidence_ = 0.0;
    // The weight the start value 1 still has in speed_ratio_ (the product of (1 - gain x weight)
    // over its updates): 1 at the start of a stream, falling as the estimate converges; 0 from a
    // stream's first reported override when the profile knows its reference's (follow_reported_override).
    double speed_prior_weight_ = 1.0;
    // The latest clearly moving samples' speed ratios (a ring): a sample whose ratio lies far off
    // their median is not learned (update_speed). Fixed size: no allocation per sample.
    std::array<double, 32> speed_recent_{};
    std::size_t speed_recent_count_ = 0, speed_recent_next_ = 0;
    // A new speed the outlier test holds back (update_speed): the latest consecutive moving samples
    // whose ratios lie beyond it on one side (jump_side_), agree with each other, and are borne by at
    // least two joints. kJumpRun of them in a row replace the estimate (their median) at once: 8,
    // 16-32 ms at 500-250 Hz, and a median that 3 odd samples do not move.
    static constexpr std::size_t kJumpRun = 8;
    std::array<double, kJumpRun> jump_run_{};
    std::size_t jump_count_ = 0;
    int jump_side_ = 0;
    // The speed-change band (SpeedModel::speed_change, scaled like the reference for KA-mDTW), the
    // reference's joint accelerations, the floor the calibration found (infinite: no band), and the
    // latest samples' estimates of s' (a ring) with their mean.
    std::vector<std::vector<double>> speed_change_, reference_acceleration_;
    double speed_change_floor_ = std::numeric_limits<double>::infinity();
    static constexpr std::size_t kRateSamples = 3;
    std::array<double, kRateSamples> rate_recent_{};
    std::size_t rate_next_ = 0;
    double speed_change_rate_ = 0.0;
    // The latest sample's s' as the angles read it from kJumpWeight on and at any ratio (0: not
    // read; update_speed), the sample's before it, and the s' its speed band took
    // (speed_change_explained()).
    double witness_rate_ = 0.0, previous_witness_rate_ = 0.0, speed_change_explained_ = 0.0;
    // The latest positive speed override the robot reported (NaN: none since the stream began),
    // and a reported turn being followed: the speeds it spans, its side (0: none open) and the
    // robot time until which it is followed. How long a controller takes to follow a turn is not
    // in any recording the calibration sees, nor in a vendor's documentation found: the simulator
    // assumes 0.5 s per 100 % of change (docs/simulator.md); a turn is followed for twice that,
    // plus 0.1 s for the controller to begin (kTurnSecondsPer100, kTurnLead: documented defaults,
    // not fitted). Overrides under kOverrideMin (a controller that pauses by its override) leave
    // the estimate alone: the arm stands, and the next positive value is compared with the last.
    double reported_override_ = std::numeric_limits<double>::quiet_NaN();
    double turn_lo_ = 0.0, turn_hi_ = 0.0, turn_until_ = 0.0;
    int turn_side_ = 0;
    // The speed the latest sample measured on its own (its ratio where it moved clearly, weight >=
    // 0.5, at a partner the angles confirm; 0 where it measured none: update_speed). A reported
    // turn that comes while it is > 0, or while the arm moves at all (moving_weight_: the latest
    // sample's weight, >= kJumpWeight), is followed by measurement (turn_measured_): the arm still
    // runs at the old speed, and the controller's ramp from it shows in every moving sample's
    // ratio. turn_target_: the speed the turn leads to (the old estimate times the reports' ratio).
    double measured_ratio_ = 0.0, turn_target_ = 0.0, moving_weight_ = 0.0;
    bool turn_measured_ = false;
    static constexpr double kTurnSecondsPer100 = 1.0, kTurnLead = 0.1, kOverrideMin = 0.05;
    // The reference's median sample spacing (s), and per joint the inputs of the search for the
    // kinematically nearest reference sample (scratch of update(): the whole-reference partner
    // candidate; reference angles and velocities, the sample's, the angle scale's inverse).
    double reference_dt_ = 1.0;
    std::vector<const double*> nearest_qr_, nearest_vr_;
    std::vector<double> nearest_q_, nearest_v_, nearest_inv_;
    static constexpr double kSpeedSettled = 3.0;
    static constexpr double kSpeedGain = 1.0 / 25.0;  // per clearly moving sample: about 25 samples to follow a change
    static constexpr double kSpeedMin = 0.2, kSpeedMax = 2.0;
    // A sample counts towards a new speed (kJumpRun) from a tenth of "clearly moving" on (about a
    // third of the clearly moving joint speed): below it the ratios of samples at one speed scatter
    // by tens of percent. A joint bears it when it moves by the reference at a quarter or more of
    // the fastest joint's speed there. The same share of the fastest joint's step is what any
    // joint may stand off the reference's angle (three samples' worth) and still confirm a partner.
    static constexpr double kJumpWeight = 0.1, kJumpJointShare = 0.25;
    static constexpr std::size_t kPartnerSlack = 2;
    // How far ahead of the shared partner the joint angles are searched for a nearer partner.
    static constexpr std::size_t kAngleLookahead = 32;
    // How far (in noise levels) the shared partner must leave a joint off, robot and reference at
    // rest, before a later sample of the same standstill is searched for a signal step: 3, the
    // calibration's floor under every phase threshold (no smaller deviation can stop the robot).
    static constexpr double kStepSearchNoise = 3.0;
    // Declared payload (profile.payload). Both sides are matched unloaded: the reference less its
    // own declared payload's torques (computed once, at its angles and accelerations), the newest
    // sample less the payload it declares (at its angles, with the tool point's acceleration of the
    // reference at the previous shared partner, times the square of the speed ratio). A stream that
    // declares nothing is taken to carry the reference's payload at that partner.
    // Per reference sample: the declared payload and the tool point's acceleration; per joint and
    // reference sample: the inertial part of the reference's payload torque (matched units).
    std::vector<double> reference_payload_;
    std::vector<Eigen::Vector3d> payload_acceleration_;
    std::vector<std::vector<double>> payload_inertial_;
    std::vector<std::vector<double>> payload_total_;  // the reference's payload torque (inertial + gravity)
    std::vector<double> payload_error_;               // per joint: the model's relative error
    // For the payload band's centre term (PayloadModel::centre_uncertainty): at the newest sample,
    // each joint's axis (zero for a prismatic one: its payload torque does not depend on the
    // centre), the centre's uncertainty directions in the base frame, and the payload force it
    // declares, mass x (s^2 a - g).
    std::vector<Eigen::Vector3d> payload_axes_;
    std::vector<Eigen::Vector3d> payload_spread_;
    Eigen::Vector3d payload_force_ = Eigen::Vector3d::Zero();
    double reference_part_ = 0.0;                     // the largest mass the reference declares
    // Per reference sample: the first later sample whose carrying state (payload > 0) differs, and
    // the first sample of its own run of that state (they mark phases for the shared partner).
    std::vector<std::size_t> payload_next_, payload_previous_;
    // Per reference sample: whether the reference moves there (some joint faster than
    // kMovingVelocity), and the first sample from there on where it does (a standstill's end).
    // kMovingVelocity: ten times the rest velocity (a joint at rest in the reference moves at most
    // v0/9; the start of a minimum-jerk move passes 0.01 rad/s within a few samples).
    static constexpr double kMovingVelocity = 10.0 * kCoulombSmoothing / 9.0;
    std::vector<std::uint8_t> reference_moving_;
    std::vector<std::size_t> standstill_end_;
    // The reference's holds: stretches where every joint moves slower than kHoldCreep of its own
    // fastest speed in the reference (or than kMovingVelocity, if that is more) — the robot holds
    // its pose and a joint creeps only as its servo gives way to a force, a screwdriver's torque, a
    // press. Per reference sample the hold it lies in (0: none), whether it stands there
    // (hold_standing_), and per joint the least and largest angle the reference reads over the
    // hold's standing samples. A hold's edges take in the first and last samples of the moves
    // around it (some joint over kMovingVelocity), and those must keep telling where the move is:
    // they do not stand. A joint creeping over kMovingVelocity between standing samples gives way
    // to the force, and those samples stand (since 2026-12-06: the LR Mate-like's joint 6 creeps
    // at up to 0.033 rad/s for 70 samples in the middle of its screwing's hold, and there the
    // partner was held back as below). How far a joint gives way depends on the
    // pace of the force against the servo's integral action, so off the recorded speed (a turned
    // override that slows the press too) the angle within a hold does not tell its moments apart;
    // the partner's score then measures a joint's angle from the hold's range for standing
    // candidates later in the hold the partner is in (held-out LR Mate-like, screwing at 70 %:
    // joint 6 gave way 5.5 mrad where the reference gave way 7.9, and the partner lagged the
    // screwdriver's current ramp by 30 samples, 0.1 mrad of angle scale against 2.4 mrad of
    // difference).
    // kHoldCreep: a minimum-jerk move is slower than 5 % of its peak speed only in its first and
    // last 6 % of time, over 0.2 % of its distance.
    static constexpr double kHoldCreep = 0.05;
    std::vector<std::size_t> hold_;
    std::vector<std::uint8_t> hold_standing_;  // in a hold and not a move's tail at its edges
    std::vector<std::pair<double, double>> hold_range_;  // hold h's, joint j's at (h - 1) * joints + j
    // The robot's cycle counter (Sample::cycle) with the reference's cycle begins
    // (Reference::cycle_begins): for the first m samples after the counter changed, the program
    // has just begun a cycle, and each reference cycle's begin plus the samples since the change
    // is a shared-partner candidate (the score decides; a program that waits after counting keeps
    // its partner in the standstill it stands in).
    std::int64_t cycle_counter_ = 0;  // the counter of the last sample (has_previous_: there was one)
    std::size_t cycle_age_ = std::numeric_limits<std::size_t>::max();  // samples since the counter changed
    std::vector<Eigen::Isometry3d> payload_frames_;
    std::vector<Eigen::Vector3d> payload_columns_;
    std::vector<double> payload_applied_;  // per joint: what was taken off the newest sample
    bool payload_active_ = false;          // the newest sample declared its payload
    std::size_t head_ = 0;                         // ring index of the oldest sample
    std::size_t updates_ = 0;
    std::size_t clamped_levers_ = 0;
};

}  // namespace warpguard
