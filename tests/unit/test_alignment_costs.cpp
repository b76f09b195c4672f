// The reference cycles' alignment, made faster on 2026-12-04 (pairing costs a row at a time in
// vector lanes, the DTW recursion without branches), against the arithmetic it replaced: the same
// bits for every cost and the same path, ties included. Twins decide which reference values pool
// into a phase's range, so calibration and the detector must keep finding the same ones.
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "../../core/src/alignment_costs.hpp"
#include "warpguard/mdtw.hpp"

using namespace warpguard;

namespace {

// The DTW of dtw_path before 2026-12-04: every cell through back_step, with its branches.
std::vector<PathStep> dtw_with_back_step(const std::vector<std::vector<double>>& cost) {
    const std::size_t rows = cost.size(), cols = cost[0].size();
    std::vector<std::vector<double>> d(rows, std::vector<double>(cols));
    std::vector<std::vector<BackStep>> step(rows, std::vector<BackStep>(cols, BackStep::Diagonal));
    for (std::size_t i = 0; i < rows; ++i) {
        for (std::size_t j = 0; j < cols; ++j) {
            if (i == 0 && j == 0) {
                d[i][j] = cost[i][j];
            } else if (i == 0) {
                d[i][j] = cost[i][j] + d[i][j - 1], step[i][j] = BackStep::Horizontal;
            } else if (j == 0) {
                d[i][j] = cost[i][j] + d[i - 1][j], step[i][j] = BackStep::Vertical;
            } else {
                const BackStep b = back_step(d[i - 1][j - 1], d[i - 1][j], d[i][j - 1]);
                d[i][j] = cost[i][j] + (b == BackStep::Diagonal ? d[i - 1][j - 1] : b == BackStep::Vertical ? d[i - 1][j] : d[i][j - 1]);
                step[i][j] = b;
            }
        }
    }
    std::vector<PathStep> path{{static_cast<std::uint32_t>(rows - 1), static_cast<std::uint32_t>(cols - 1)}};
    std::size_t i = rows - 1, j = cols - 1;
    while (i > 0 || j > 0) {
        const BackStep b = step[i][j];
        if (b != BackStep::Horizontal) --i;
        if (b != BackStep::Vertical) --j;
        path.insert(path.begin(), PathStep{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    }
    return path;
}

}  // namespace

TEST_CASE("the alignment's pairing costs in vector lanes have the bits of the scalar sum", "[alignment]") {
    std::mt19937 rng(20261204);
    std::uniform_real_distribution<double> angle(-3.0, 3.0), torque(-150.0, 150.0), spread(0.1, 300.0);
    std::size_t compared = 0;
    for (std::size_t joints = 1; joints <= 8; ++joints) {
        for (const std::size_t width : {std::size_t{8}, std::size_t{16}, std::size_t{64}}) {
            std::vector<double> q(joints * width), tau(joints * width), qa(joints), tau_a(joints), range(joints), row(width);
            for (auto& x : q) x = angle(rng);
            for (auto& x : tau) x = torque(rng);
            for (std::size_t j = 0; j < joints; ++j) qa[j] = angle(rng), tau_a[j] = torque(rng), range[j] = spread(rng);
            q[0] = qa[0];  // an exact zero difference, and one in the torques
            tau[width - 1] = tau_a[0];
            detail::alignment_cost_row(q.data(), tau.data(), width, joints, qa.data(), tau_a.data(), range.data(), 0.05, row.data());
            for (std::size_t k = 0; k < width; ++k) {
                double sum = 0;  // the loop of align_reference_cycles before 2026-12-04
                for (std::size_t j = 0; j < joints; ++j) sum += std::abs(qa[j] - q[j * width + k]) / 0.05 + std::abs(tau_a[j] - tau[j * width + k]) / range[j];
                CHECK(std::bit_cast<std::uint64_t>(row[k]) == std::bit_cast<std::uint64_t>(sum));
                ++compared;
            }
        }
    }
    CHECK(compared == 8 * (8 + 16 + 64));
}

TEST_CASE("the branch-free DTW recursion takes the path back_step takes, ties included", "[alignment]") {
    std::mt19937 rng(4122026);
    std::size_t paths = 0;
    for (std::size_t trial = 0; trial < 200; ++trial) {
        const std::size_t rows = 1 + rng() % 40, cols = 1 + rng() % 40;
        // Half the trials on costs of a few levels: sums tie often, and the tie order decides.
        const bool coarse = trial % 2 == 0;
        std::vector<std::vector<double>> cost(rows, std::vector<double>(cols));
        for (auto& r : cost) {
            for (auto& c : r) c = coarse ? static_cast<double>(rng() % 3) : std::uniform_real_distribution<double>(0.0, 5.0)(rng);
        }
        const DtwResult fast = dtw_path(rows, cols, [&](std::size_t i, std::size_t j) { return cost[i][j]; });
        const std::vector<PathStep> expected = dtw_with_back_step(cost);
        REQUIRE(fast.path.size() == expected.size());
        bool same = true;
        for (std::size_t s = 0; s < expected.size(); ++s) same = same && fast.path[s].i == expected[s].i && fast.path[s].j == expected[s].j;
        CHECK(same);
        paths += same;
    }
    CHECK(paths == 200);
}
