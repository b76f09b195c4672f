// The reference's cycles aligned with each other: which samples of each reference cycle pass
// through the same phase of the task (twins). Calibration pools each phase's largest nominal
// deviation over them; the detector pools the reference's values over them (Detector::partner_range).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "warpguard/profile.hpp"

namespace warpguard {

// How close a nominal cycle's joint path must come to the reference's, rad (largest joint): a pose
// 0.05 rad away changes a gravity torque by at most 5 % of its size (|d cos q| <= |dq|), so the
// reference still has that phase; farther, it is another variant of the task.
inline constexpr double kCoverageTolerance = 0.05;

// Where the reference's cycles pass through the same phase of the task. The nominal windows are
// matched to one reference cycle or another, so each cycle's samples see only some of them; a
// phase's largest nominal deviation is the largest over all the cycles that pass through it.
// For reference sample p and cycle c: the samples of cycle c aligned with p, [lo, hi] (lo > hi:
// none within the pose tolerance).
struct CycleTwins {
    std::size_t cycles = 0;
    std::vector<std::uint32_t> lo, hi;  // [p * cycles + c]
    std::size_t aligned = 0;            // reference samples with a twin in every other cycle
    double largest_pose_distance = 0;   // on the alignments, rad (largest joint)
    std::size_t opposite = 0;           // aligned pairs within the pose tolerance left out: a joint moves the other way
    bool empty() const { return cycles < 2; }
};

// The reference's cycles [bounds[c], bounds[c + 1]) aligned pairwise by DTW over their joint
// angles and torques; twins within `tolerance` rad on every joint, none of them moving the other
// way (both faster than kCoulombSmoothing; reference_cycles.cpp).
CycleTwins align_reference_cycles(const Reference& ref, const std::vector<std::size_t>& bounds, double tolerance = kCoverageTolerance);

}  // namespace warpguard
