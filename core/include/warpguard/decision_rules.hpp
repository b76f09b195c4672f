// Decision rules of thesis §3.2.3, evaluated on one joint's matched signals.
//
// Rule 1 (absolute difference): the newest measurement a(m) is paired with one or more reference
//   samples (the path cells in the last row); the smallest |a(m) - b(j)| among them is compared
//   with theta1.
// Rule 2 (eigenvalue): the 2x2 covariance matrix of all matched pairs (a(i), b(j)) on the warping
//   path; its second (smaller) eigenvalue measures how far the pairs scatter from a line and is
//   compared with theta2. The covariance uses the unbiased 1/(N-1) normalisation (MATLAB's cov,
//   which the thesis's analysis used); with a single pair it is 0.
#pragma once

#include <cstddef>
#include <span>

#include "warpguard/mdtw.hpp"

namespace warpguard {

struct AbsoluteDifference {
    double deviation = 0.0;    // signed a(m) - b(partner)
    std::size_t partner = 0;   // reference index of the closest partner of a(m)
    double magnitude() const { return deviation < 0 ? -deviation : deviation; }
};

// `path` as returned by the matcher: ordered, ending in row a.size()-1.
AbsoluteDifference absolute_difference(std::span<const double> a, std::span<const double> b,
                                       std::span<const PathStep> path);

// Second (smallest) eigenvalue of the covariance of the matched pairs. Does not allocate.
double second_eigenvalue(std::span<const double> a, std::span<const double> b, std::span<const PathStep> path);

}  // namespace warpguard
