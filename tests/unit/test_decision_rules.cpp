// Rule 1 (absolute difference) and rule 2 (second eigenvalue), thesis §3.2.3.
#include <random>
#include <vector>

#include <Eigen/Eigenvalues>
#include <catch2/catch.hpp>

#include "warpguard/decision_rules.hpp"

using namespace warpguard;

TEST_CASE("rule 1 takes the closest of all partners of the newest sample", "[rules]") {
    const std::vector<double> a{0, 5, 7};
    const std::vector<double> b{0, 5, 6, 7.5, 9};
    // The newest sample a(3) = 7 is paired with b(2..4) = 6, 7.5, 9: closest is 7.5 -> deviation -0.5.
    const std::vector<PathStep> path{{0, 0}, {1, 1}, {2, 2}, {2, 3}, {2, 4}};
    const auto r1 = absolute_difference(a, b, path);
    CHECK(r1.deviation == Approx(-0.5));
    CHECK(r1.magnitude() == Approx(0.5));
    CHECK(r1.partner == 3);
}

TEST_CASE("rule 1 ignores partners of older samples", "[rules]") {
    const std::vector<double> a{7, 1};
    const std::vector<double> b{7, 3};
    const std::vector<PathStep> path{{0, 0}, {1, 1}};  // a(1) = 7 pairs perfectly, a(2) = 1 does not
    CHECK(absolute_difference(a, b, path).deviation == Approx(-2.0));
}

TEST_CASE("rule 2 is zero for pairs on a line and known for a symmetric cloud", "[rules]") {
    const std::vector<double> a{1, 2, 3, 4};
    const std::vector<double> b{3, 5, 7, 9};  // b = 2a + 1
    const std::vector<PathStep> diag{{0, 0}, {1, 1}, {2, 2}, {3, 3}};
    CHECK(second_eigenvalue(a, b, diag) == Approx(0.0).margin(1e-12));

    // Pairs (1,0), (-1,0), (0,1), (0,-1): covariance (N-1 normalised) = diag(2/3, 2/3).
    const std::vector<double> x{1, -1, 0, 0};
    const std::vector<double> y{0, 0, 1, -1};
    CHECK(second_eigenvalue(x, y, diag) == Approx(2.0 / 3.0));
    // A single pair has no scatter.
    const std::vector<PathStep> one{{0, 0}};
    CHECK(second_eigenvalue(x, y, one) == 0.0);
}

TEST_CASE("rule 2 agrees with Eigen's general eigen-solver on random matched pairs", "[rules]") {
    std::mt19937_64 rng(42);
    std::normal_distribution<double> noise(0.0, 1.0);
    for (int trial = 0; trial < 200; ++trial) {
        const std::size_t m = 5 + static_cast<std::size_t>(trial % 40);
        std::vector<double> a(m), b(m + 10);
        for (auto& v : a) v = 100.0 + 3.0 * noise(rng);  // an offset stresses the centring
        for (auto& v : b) v = 100.0 + 3.0 * noise(rng);
        // A monotone path with repeated rows and columns.
        std::vector<PathStep> path;
        std::uint32_t i = 0, j = 3;
        path.push_back({i, j});
        while (i + 1 < m) {
            const int step = static_cast<int>(rng() % 3);
            if (step != 1) ++i;
            if (step != 0 && j + 1 < b.size()) ++j;
            path.push_back({i, j});
        }
        Eigen::MatrixXd pairs(path.size(), 2);
        for (std::size_t k = 0; k < path.size(); ++k) pairs.row(k) << a[path[k].i], b[path[k].j];
        const Eigen::MatrixXd centred = pairs.rowwise() - pairs.colwise().mean();
        const Eigen::MatrixXd cov = centred.transpose() * centred / static_cast<double>(path.size() - 1);
        const Eigen::EigenSolver<Eigen::MatrixXd> solver(cov);
        const double expected = solver.eigenvalues().real().minCoeff();
        CHECK(second_eigenvalue(a, b, path) == Approx(expected).epsilon(1e-9).margin(1e-12));
    }
}
