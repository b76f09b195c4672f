#include "warpguard/reference_cycles.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "warpguard/dynamics.hpp"
#include "warpguard/mdtw.hpp"

#include "alignment_costs.hpp"

namespace warpguard {

// The reference's cycles aligned pairwise by DTW over their joint angles and torques: the cost of
// pairing two samples is the sum over joints of |dq| / tolerance + |dtau| / (the joint's reference
// torque range). The angles place the pose; the torques place a step within a standstill (a part
// released, a screwdriver stopping), where the angles do not change. A pair is a twin only where
// every joint's angle is within `tolerance` (the coverage tolerance: farther, it is another pose)
// and no joint passes it the other way (below).
CycleTwins align_reference_cycles(const Reference& ref, const std::vector<std::size_t>& bounds, double tolerance) {
    if (!(tolerance > 0)) throw std::invalid_argument(fmt::format("the alignment's pose tolerance must be > 0 rad, got {}", tolerance));
    for (std::size_t c = 1; c < bounds.size(); ++c) {
        if (bounds[c] <= bounds[c - 1] || bounds[c] > ref.size()) {
            throw std::invalid_argument(fmt::format("reference cycle bounds must rise within the reference's {} samples; bound {} is {} after {}",
                                                    ref.size(), c, bounds[c], bounds[c - 1]));
        }
    }
    CycleTwins out;
    if (bounds.size() < 3) return out;
    const std::size_t cycles = bounds.size() - 1;
    out.cycles = cycles;
    const std::size_t n = ref.size();
    const std::size_t joints = ref.q.size();
    out.lo.assign(n * cycles, 1);
    out.hi.assign(n * cycles, 0);
    for (std::size_t c = 0; c < cycles; ++c) {  // each sample is its own twin in its own cycle
        for (std::size_t p = bounds[c]; p < bounds[c + 1]; ++p) out.lo[p * cycles + c] = out.hi[p * cycles + c] = static_cast<std::uint32_t>(p);
    }
    std::vector<double> range(joints, 0.0);
    for (std::size_t j = 0; j < joints; ++j) {
        const auto [mn, mx] = std::minmax_element(ref.tau[j].begin(), ref.tau[j].end());
        range[j] = std::max(*mx - *mn, 1e-9);
    }
    // Each sample's joint velocities (local quadratic fits over +- kDerivativeHalfWidth samples
    // within its cycle, as the detector takes the reference's): a twin is the same phase of the
    // task, so it passes the pose the same way. A pose passed out and back (a machine tended from
    // the same approach) differs on the way back by the friction's sign, twice the dry friction,
    // which pooled would widen the phase's range by as much. Opposite only where both velocities
    // exceed the Coulomb term's smoothing velocity (each friction then at least half its size, so
    // the two differ by at least one dry friction).
    std::vector<std::vector<double>> velocity(joints, std::vector<double>(n, 0.0));
    std::vector<double> acceleration(n);
    for (std::size_t c = 0; c < cycles; ++c) {
        const std::size_t first = bounds[c], length = bounds[c + 1] - bounds[c];
        const std::span<const double> t(ref.t.data() + first, length);
        for (std::size_t j = 0; j < joints; ++j) {
            smooth_derivatives(t, std::span<const double>(ref.q[j].data() + first, length), kDerivativeHalfWidth,
                               std::span<double>(velocity[j].data() + first, length), std::span<double>(acceleration.data(), length));
        }
    }
    const auto opposite = [&](std::size_t a, std::size_t b) {
        for (std::size_t j = 0; j < joints; ++j) {
            const double va = velocity[j][a], vb = velocity[j][b];
            if (va * vb < 0 && std::abs(va) > kCoulombSmoothing && std::abs(vb) > kCoulombSmoothing) return true;
        }
        return false;
    };
    // The pairing costs of one sample of cycle a with every (stride-th) sample of cycle b, a row at
    // a time in vector lanes (alignment_costs.cpp; the DTW asks for them row by row): per pair the
    // same operations in the same order as the sum over joints of |dq| / tolerance + |dtau| /
    // range, so the same bits as one pair at a time. Every detector built from a profile aligns its
    // reference's cycles, so this is part of activating a profile and of the daemon's start.
    std::vector<double> row_q, row_tau, row, qa(joints), tau_a(joints);  // cycle b's samples [j * width + k]; the costs
    for (std::size_t ca = 0; ca < cycles; ++ca) {
        for (std::size_t cb = ca + 1; cb < cycles; ++cb) {
            const std::size_t a0 = bounds[ca], b0 = bounds[cb];
            // Long cycles are aligned on every stride-th sample, so that the pairs stay within
            // 16 M (16 MB of steps and a fraction of a second; two cycles of 4,000 samples); each
            // of a sample's stride neighbours then takes its twins.
            constexpr double kAlignPairs = 16.0e6;
            const std::size_t full_a = bounds[ca + 1] - a0, full_b = bounds[cb + 1] - b0;
            const std::size_t stride = std::max<std::size_t>(
                1, static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(full_a) * static_cast<double>(full_b) / kAlignPairs))));
            const std::size_t la = (full_a + stride - 1) / stride, lb = (full_b + stride - 1) / stride;
            const std::size_t width = (lb + detail::kAlignmentLanes - 1) / detail::kAlignmentLanes * detail::kAlignmentLanes;
            row_q.assign(joints * width, 0.0);
            row_tau.assign(joints * width, 0.0);
            row.resize(width);
            for (std::size_t j = 0; j < joints; ++j) {
                for (std::size_t k = 0; k < lb; ++k) {
                    row_q[j * width + k] = ref.q[j][b0 + k * stride];
                    row_tau[j * width + k] = ref.tau[j][b0 + k * stride];
                }
            }
            // DTW, both ends anchored (every cycle starts and ends where the task does); it asks
            // for the costs row by row, each row's from k = 0.
            std::size_t row_of = la;
            const DtwResult aligned = dtw_path(la, lb, [&](std::size_t i, std::size_t k) {
                if (i != row_of) {
                    const std::size_t a = a0 + i * stride;
                    for (std::size_t j = 0; j < joints; ++j) qa[j] = ref.q[j][a], tau_a[j] = ref.tau[j][a];
                    detail::alignment_cost_row(row_q.data(), row_tau.data(), width, joints, qa.data(), tau_a.data(), range.data(), tolerance,
                                               row.data());
                    row_of = i;
                }
                return row[k];
            });
            for (const PathStep& pair : aligned.path) {
                const std::size_t a = a0 + pair.i * stride, b = b0 + pair.j * stride;
                double far = 0;
                for (std::size_t j = 0; j < joints; ++j) far = std::max(far, std::abs(ref.q[j][a] - ref.q[j][b]));
                out.largest_pose_distance = std::max(out.largest_pose_distance, far);
                if (far > tolerance) continue;
                if (opposite(a, b)) {
                    ++out.opposite;
                    continue;
                }
                // Samples [p, p + stride) of one cycle (within it) take [twin, twin + stride) of cycle c.
                const auto widen = [&](std::size_t p, std::size_t p_end, std::size_t c, std::size_t twin, std::size_t twin_end) {
                    const auto first = static_cast<std::uint32_t>(twin);
                    const auto last = static_cast<std::uint32_t>(std::min(twin + stride, twin_end) - 1);
                    for (std::size_t x = p; x < std::min(p + stride, p_end); ++x) {
                        auto& lo = out.lo[x * cycles + c];
                        auto& hi = out.hi[x * cycles + c];
                        if (lo > hi) lo = first, hi = last;
                        lo = std::min(lo, first);
                        hi = std::max(hi, last);
                    }
                };
                widen(a, a0 + full_a, cb, b, b0 + full_b);
                widen(b, b0 + full_b, ca, a, a0 + full_a);
            }
        }
    }
    for (std::size_t p = 0; p < n; ++p) {
        bool all = true;
        for (std::size_t c = 0; c < cycles; ++c) all = all && out.lo[p * cycles + c] <= out.hi[p * cycles + c];
        out.aligned += all;
    }
    return out;
}

}  // namespace warpguard
