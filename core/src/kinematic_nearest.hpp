// The detector's search for the kinematically nearest reference sample, in vector lanes (compiled
// with the sweeps' vector flags, core/CMakeLists.txt); internal to core.
#pragma once

#include <cstddef>

namespace warpguard::detail {

// The reference sample k (of n) with the least distance
//   sum over joints j, in order, of (|q[j] - qr[j][k]| + |v[j] - vs * vr[j][k]|) * inv[j],
// the earliest of equals: exactly what a scalar loop over k and then j computes and picks (each
// lane does the same IEEE operations in the same order).
std::size_t kinematic_nearest(std::size_t joints, std::size_t n, const double* const* qr, const double* const* vr,
                              const double* q, const double* v, const double* inv, double vs);

}  // namespace warpguard::detail
