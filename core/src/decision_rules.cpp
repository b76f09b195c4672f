#include "warpguard/decision_rules.hpp"

#include <cmath>
#include <stdexcept>

#include <Eigen/Eigenvalues>

namespace warpguard {

AbsoluteDifference absolute_difference(std::span<const double> a, std::span<const double> b,
                                       std::span<const PathStep> path) {
    if (path.empty()) throw std::invalid_argument("rule 1 needs a warping path, got an empty one");
    const std::uint32_t newest = static_cast<std::uint32_t>(a.size() - 1);
    AbsoluteDifference best;
    double best_abs = INFINITY;
    // The path ends in the last row; walk back over every cell of that row.
    for (auto it = path.rbegin(); it != path.rend() && it->i == newest; ++it) {
        const double dev = a[newest] - b[it->j];
        if (std::abs(dev) < best_abs) {
            best_abs = std::abs(dev);
            best.deviation = dev;
            best.partner = it->j;
        }
    }
    return best;
}

double second_eigenvalue(std::span<const double> a, std::span<const double> b, std::span<const PathStep> path) {
    const std::size_t count = path.size();
    if (count < 2) return 0.0;
    // Two passes (mean, then centred sums) keep the covariance accurate for large signal offsets.
    double mean_a = 0.0, mean_b = 0.0;
    for (const auto& s : path) {
        mean_a += a[s.i];
        mean_b += b[s.j];
    }
    mean_a /= static_cast<double>(count);
    mean_b /= static_cast<double>(count);
    double saa = 0.0, sbb = 0.0, sab = 0.0;
    for (const auto& s : path) {
        const double da = a[s.i] - mean_a;
        const double db = b[s.j] - mean_b;
        saa += da * da;
        sbb += db * db;
        sab += da * db;
    }
    const double norm = 1.0 / static_cast<double>(count - 1);
    Eigen::Matrix2d cov;
    cov << saa * norm, sab * norm, sab * norm, sbb * norm;
    Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d> solver;
    solver.computeDirect(cov, Eigen::EigenvaluesOnly);
    // Eigenvalues come sorted ascending; clamp the rounding noise of a singular matrix.
    return std::max(0.0, solver.eigenvalues()(0));
}

}  // namespace warpguard
