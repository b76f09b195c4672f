// The pairing costs of the reference cycles' alignment (reference_cycles.cpp), a row at a time in
// vector lanes. Compiled for AVX2/AVX-512 where the build host has them, as the matcher's sweeps.
#pragma once

#include <cstddef>

namespace warpguard::detail {

// Samples per vector step of alignment_cost_row(): rows are computed in blocks of this many, so the
// arrays it reads and writes hold a multiple of it.
inline constexpr std::size_t kAlignmentLanes = 8;

// row[k] = sum over joints j < `joints`, in that order, of |q[j * width + k] - qa[j]| / tolerance +
// |tau[j * width + k] - tau_a[j]| / range[j], for every k < width (a multiple of kAlignmentLanes):
// per k the same operations in the same order as the scalar sum, so the same bits.
void alignment_cost_row(const double* q, const double* tau, std::size_t width, std::size_t joints, const double* qa, const double* tau_a,
                        const double* range, double tolerance, double* row);

}  // namespace warpguard::detail
