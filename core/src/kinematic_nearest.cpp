#include "kinematic_nearest.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace warpguard::detail {

namespace {

// Four doubles: one AVX register where the build has AVX2, two SSE2 pairs otherwise.
using V4 = double __attribute__((vector_size(4 * sizeof(double))));
using M4 = long long __attribute__((vector_size(4 * sizeof(long long))));

inline V4 abs4(V4 x) {
    M4 bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits &= 0x7fffffffffffffffLL;
    std::memcpy(&x, &bits, sizeof x);
    return x;
}

inline V4 load4(const double* p) {
    V4 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

constexpr std::size_t kBlock = 256;  // reference samples per pass over the joints (2 KB of sums)

}  // namespace

std::size_t kinematic_nearest(std::size_t joints, std::size_t n, const double* const* qr, const double* const* vr,
                              const double* q, const double* v, const double* inv, double vs) {
    alignas(32) double sum[kBlock];
    std::size_t best = 0;
    double best_distance = 0;
    for (std::size_t k0 = 0; k0 < n; k0 += kBlock) {
        const std::size_t count = std::min(kBlock, n - k0);
        const std::size_t whole = count / 4 * 4;
        std::fill(sum, sum + count, 0.0);
        for (std::size_t j = 0; j < joints; ++j) {
            const double* qj = qr[j] + k0;
            const double* vj = vr[j] + k0;
            const V4 qv = {q[j], q[j], q[j], q[j]}, vv = {v[j], v[j], v[j], v[j]};
            const V4 sv = {vs, vs, vs, vs}, iv = {inv[j], inv[j], inv[j], inv[j]};
            std::size_t k = 0;
            for (; k < whole; k += 4) {
                const V4 term = (abs4(qv - load4(qj + k)) + abs4(vv - sv * load4(vj + k))) * iv;
                V4 s = load4(sum + k);
                s += term;
                std::memcpy(sum + k, &s, sizeof s);
            }
            for (; k < count; ++k) sum[k] += (std::abs(q[j] - qj[k]) + std::abs(v[j] - vs * vj[k])) * inv[j];
        }
        // The earliest least, as std::min_element over the whole reference.
        for (std::size_t k = 0; k < count; ++k) {
            if ((k0 == 0 && k == 0) || sum[k] < best_distance) {
                best_distance = sum[k];
                best = k0 + k;
            }
        }
    }
    return best;
}

}  // namespace warpguard::detail
