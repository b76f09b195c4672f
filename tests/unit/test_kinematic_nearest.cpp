// The detector's vectorised search for the kinematically nearest reference sample against the
// scalar loop it replaced: the same index on random data, on reference lengths around the vector
// width and the block size, and the earliest of exact ties.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "../../core/src/kinematic_nearest.hpp"

namespace {

// The loop of Detector::update before 2026-11-28: per joint over the whole reference, then the
// first least distance.
std::size_t scalar_nearest(const std::vector<std::vector<double>>& qr, const std::vector<std::vector<double>>& vr,
                           const std::vector<double>& q, const std::vector<double>& v, const std::vector<double>& inv,
                           double vs) {
    std::vector<double> dist(qr[0].size(), 0.0);
    for (std::size_t j = 0; j < qr.size(); ++j) {
        for (std::size_t k = 0; k < dist.size(); ++k) dist[k] += (std::abs(q[j] - qr[j][k]) + std::abs(v[j] - vs * vr[j][k])) * inv[j];
    }
    return static_cast<std::size_t>(std::min_element(dist.begin(), dist.end()) - dist.begin());
}

std::size_t vector_nearest(const std::vector<std::vector<double>>& qr, const std::vector<std::vector<double>>& vr,
                           const std::vector<double>& q, const std::vector<double>& v, const std::vector<double>& inv,
                           double vs) {
    std::vector<const double*> qp, vp;
    for (const auto& r : qr) qp.push_back(r.data());
    for (const auto& r : vr) vp.push_back(r.data());
    return warpguard::detail::kinematic_nearest(qr.size(), qr[0].size(), qp.data(), vp.data(), q.data(), v.data(),
                                                inv.data(), vs);
}

}  // namespace

TEST_CASE("the vectorised kinematic nearest search picks what the scalar loop picks", "[detector]") {
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::size_t cases = 0, away_from_start = 0;
    for (const std::size_t n : {1u, 3u, 4u, 5u, 255u, 256u, 257u, 1000u, 8158u}) {
        for (const std::size_t joints : {1u, 2u, 6u, 7u}) {
            for (int trial = 0; trial < 20; ++trial) {
                std::vector<std::vector<double>> qr(joints, std::vector<double>(n)), vr(joints, std::vector<double>(n));
                std::vector<double> q(joints), v(joints), inv(joints);
                for (std::size_t j = 0; j < joints; ++j) {
                    // Angles on a coarse grid half of the time, so that distances tie exactly.
                    for (std::size_t k = 0; k < n; ++k) {
                        qr[j][k] = trial % 2 ? std::round(u(rng) * 4.0) / 4.0 : u(rng);
                        vr[j][k] = trial % 2 ? 0.0 : 0.1 * u(rng);
                    }
                    q[j] = trial % 2 ? std::round(u(rng) * 4.0) / 4.0 : u(rng);
                    v[j] = trial % 2 ? 0.0 : 0.1 * u(rng);
                    inv[j] = 1.0 / (0.01 + 0.1 * std::abs(u(rng)));
                }
                const double vs = 0.5 + std::abs(u(rng));
                const std::size_t expected = scalar_nearest(qr, vr, q, v, inv, vs);
                INFO("n " << n << " joints " << joints << " trial " << trial);
                REQUIRE(vector_nearest(qr, vr, q, v, inv, vs) == expected);
                ++cases;
                away_from_start += expected >= 4;
            }
        }
    }
    CHECK(cases == 9 * 4 * 20);
    CHECK(away_from_start > 300);  // the answers lie all over the references, not only in the first lanes
    // Two exact copies of the nearest sample: the earlier one, in another block than the later.
    std::vector<std::vector<double>> qr{std::vector<double>(600, 5.0)}, vr{std::vector<double>(600, 0.0)};
    qr[0][300] = qr[0][599] = 1.0;
    CHECK(vector_nearest(qr, vr, {1.0}, {0.0}, {1.0}, 1.0) == 300);
}
