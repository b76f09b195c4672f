#include "alignment_costs.hpp"

#include <cstring>

namespace warpguard::detail {

namespace {

// Eight doubles: one AVX-512 register, two AVX2 or four SSE2 ones, whichever the build has.
using V8 = double __attribute__((vector_size(kAlignmentLanes * sizeof(double))));
using M8 = long long __attribute__((vector_size(kAlignmentLanes * sizeof(long long))));

inline V8 load8(const double* p) {
    V8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline V8 abs8(V8 x) {  // clears the sign bits: exactly |x|
    M8 bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits &= 0x7fffffffffffffffLL;
    std::memcpy(&x, &bits, sizeof x);
    return x;
}

}  // namespace

void alignment_cost_row(const double* q, const double* tau, std::size_t width, std::size_t joints, const double* qa, const double* tau_a,
                        const double* range, double tolerance, double* row) {
    for (std::size_t k = 0; k < width; k += kAlignmentLanes) {
        V8 sum = {};
        for (std::size_t j = 0; j < joints; ++j) {
            const V8 dq = abs8(load8(q + j * width + k) - qa[j]) / tolerance;
            const V8 dt = abs8(load8(tau + j * width + k) - tau_a[j]) / range[j];
            sum += dq + dt;
        }
        std::memcpy(row + k, &sum, sizeof sum);
    }
}

}  // namespace warpguard::detail
