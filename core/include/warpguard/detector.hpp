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
// All storage is allocated in the constructor; update() does not allocate.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "warpguard/decision.hpp"
#include "warpguard/decision_rules.hpp"
#include "warpguard/mdtw.hpp"
#include "warpguard/profile.hpp"
#include "warpguard/recording.hpp"

namespace warpguard {

struct JointEvaluation {
    double cost = 0.0;  // mDTW cost d(m, end)
    std::size_t ref_start = 0;
    std::size_t ref_end = 0;
    AbsoluteDifference rule1;
    double rule2 = 0.0;
};

class Detector {
public:
    // Validates the profile (std::invalid_argument); for KA-mDTW also refuses a reference with a
    // near-zero lever length (NearZeroLeverError).
    explicit Detector(Profile profile);

    Decision update(const Sample& sample);
    // Starts a new stream: the next sample refills the whole window.
    void reset();

    const Profile& profile() const { return profile_; }
    std::size_t joints() const { return profile_.joints; }
    std::size_t window_length() const { return profile_.window; }
    std::size_t updates() const { return updates_; }
    // Measurement samples whose lever length was below the minimum and was clamped (KA-mDTW only).
    std::size_t clamped_levers() const { return clamped_levers_; }

    // State after the last update, per joint (0-based index).
    std::span<const JointEvaluation> evaluations() const { return evaluations_; }
    // The measurement window in time order, as matched (lever-scaled for KA-mDTW).
    std::span<const double> window(std::size_t joint) const { return windows_[joint]; }
    // The reference as matched (lever-scaled for KA-mDTW).
    std::span<const double> reference(std::size_t joint) const { return references_[joint]; }
    std::span<const PathStep> path(std::size_t joint) const { return paths_[joint]; }

private:
    Decision fault(const Sample& sample) const;

    Profile profile_;
    PublishedMdtw matcher_;
    std::vector<std::vector<double>> references_;  // per joint, scaled once for KA-mDTW
    std::vector<std::vector<double>> rings_;       // per joint FIFO storage
    std::vector<std::vector<double>> windows_;     // per joint, time-ordered copy for the matcher
    std::vector<std::vector<PathStep>> paths_;
    std::vector<JointEvaluation> evaluations_;
    std::vector<double> levers_;                   // scratch for KA-mDTW
    std::size_t head_ = 0;                         // ring index of the oldest sample
    std::size_t updates_ = 0;
    std::size_t clamped_levers_ = 0;
};

}  // namespace warpguard
