// Detector::update: window handling, decisions, fail-safe answers.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "planar_arm.hpp"
#include "test_data.hpp"
#include "warpguard/detector.hpp"

using namespace warpguard;
using warpguard::test::planar_profile;
using warpguard::test::reference_recording;

namespace {

Decision feed(Detector& d, double t, std::vector<double> tau, std::vector<double> q) {
    return d.update(Sample{t, 0, 0, 0, tau, q});
}

}  // namespace

TEST_CASE("the first sample fills the whole window, then samples enter first-in first-out", "[detector]") {
    Detector d(planar_profile());
    const std::size_t m = d.window_length();
    feed(d, 0.0, {1.0, 2.0, 3.0}, {0, 0, 0});
    for (std::size_t k = 0; k < m; ++k) CHECK(d.window(1)[k] == 2.0);
    feed(d, 0.01, {1.5, 2.5, 3.5}, {0, 0, 0});
    feed(d, 0.02, {1.7, 2.7, 3.7}, {0, 0, 0});
    CHECK(d.window(0)[m - 1] == 1.7);
    CHECK(d.window(0)[m - 2] == 1.5);
    CHECK(d.window(0)[m - 3] == 1.0);
    CHECK(d.window(0)[0] == 1.0);
    // m more samples push the first value out entirely.
    for (std::size_t k = 0; k < m; ++k) feed(d, 0.03 + 0.01 * static_cast<double>(k), {static_cast<double>(k), 0, 0}, {0, 0, 0});
    for (std::size_t k = 0; k < m; ++k) CHECK(d.window(0)[k] == static_cast<double>(k));
    // reset(): the next sample fills the window again.
    d.reset();
    feed(d, 1.0, {9.0, 0, 0}, {0, 0, 0});
    for (std::size_t k = 0; k < m; ++k) CHECK(d.window(0)[k] == 9.0);
}

TEST_CASE("replaying the reference itself matches it exactly and never stops", "[detector]") {
    const Profile& p = planar_profile();
    Detector d(p);
    std::vector<double> tau(p.joints), q(p.joints);
    for (std::size_t k = 0; k < p.reference.size(); ++k) {
        for (std::size_t j = 0; j < p.joints; ++j) {
            tau[j] = p.reference.tau[j][k];
            q[j] = p.reference.q[j][k];
        }
        const Decision dec = d.update(Sample{p.reference.t[k], 0, 0, 0, tau, q});
        CHECK_FALSE(dec.stop());
        if (k >= p.window) {
            for (std::size_t j = 0; j < p.joints; ++j) REQUIRE(d.evaluations()[j].rule1.magnitude() == 0.0);
        }
    }
}

TEST_CASE("a step on one joint stops with that joint, rule 1, and the value over the threshold", "[detector]") {
    const Profile& p = planar_profile();
    Detector d(p);
    std::vector<double> tau(p.joints), q(p.joints);
    const std::size_t hit = 400;
    const double step = 10.0 * p.thresholds[1].rule1.value;
    for (std::size_t k = 0; k <= hit; ++k) {
        for (std::size_t j = 0; j < p.joints; ++j) {
            tau[j] = p.reference.tau[j][k];
            q[j] = p.reference.q[j][k];
        }
        if (k == hit) tau[1] += step;
        const Decision dec = d.update(Sample{p.reference.t[k], 0, 0, 0, tau, q});
        if (k < hit) {
            REQUIRE_FALSE(dec.stop());
        } else {
            CHECK(dec.stop());
            CHECK(dec.joint == 2);
            CHECK(dec.rule == Rule::AbsoluteDifference);
            CHECK(dec.value > p.thresholds[1].rule1.value);
            CHECK(dec.threshold == p.thresholds[1].rule1.value);
            CHECK(dec.value == Approx(d.evaluations()[1].rule1.magnitude()));
            CHECK(dec.ref_end == d.evaluations()[1].ref_end);
        }
    }
}

TEST_CASE("after a reset no rule is applied until the window holds real samples only", "[detector]") {
    // A window padded with copies of its first sample is not a measurement: the published rules on
    // it stopped a robot one sample after a mode change (a flat evidence window).
    const Profile& p = planar_profile();
    Detector d(p);
    const std::size_t m = p.window;
    std::vector<double> tau(p.joints), q(p.joints);
    // Far off the reference from the start: above its whole range, so no warping can explain it.
    const auto [lo, hi] = std::minmax_element(p.reference.tau[0].begin(), p.reference.tau[0].end());
    const double offset = (*hi - *lo) + 20.0 * p.thresholds[0].rule1.value;
    std::size_t first_stop = 0;
    for (std::size_t k = 0; k < 3 * m && first_stop == 0; ++k) {
        const std::size_t at = 300 + k;
        for (std::size_t j = 0; j < p.joints; ++j) {
            tau[j] = p.reference.tau[j][at];
            q[j] = p.reference.q[j][at];
        }
        tau[0] += offset;
        CHECK(d.warming_up() == (k < m));
        const Decision dec = d.update(Sample{p.reference.t[at], 0, 0, 0, tau, q});
        if (dec.stop()) first_stop = k + 1;
    }
    // The (m - 1) first decisions are CONTINUE; with the m-th sample the window is all real and the
    // offset stops the robot at once.
    CHECK(first_stop == m);
    d.reset();
    CHECK(d.warming_up());
    CHECK(d.updates() == 0);
}

TEST_CASE("a sample that cannot be judged answers STOP with a fault", "[detector]") {
    Detector d(planar_profile());
    const auto nan = std::numeric_limits<double>::quiet_NaN();
    Decision dec = feed(d, 0.0, {1.0, nan, 3.0}, {0, 0, 0});
    CHECK(dec.stop());
    CHECK(dec.rule == Rule::Fault);
    CHECK(dec.joint == 2);
    dec = feed(d, 0.0, {1.0, 2.0}, {0, 0});
    CHECK(dec.stop());
    CHECK(dec.rule == Rule::Fault);
    CHECK(dec.value == 2.0);
    CHECK(dec.threshold == 3.0);
    dec = feed(d, 0.0, {1.0, 2.0, 3.0}, {0, std::numeric_limits<double>::infinity(), 0});
    CHECK(dec.rule == Rule::Fault);
}

TEST_CASE("collisions of 150 N and more on the planar arm are detected by the published rules", "[detector]") {
    using namespace warpguard::planar_arm;
    RunOptions opt;
    opt.cycles = 6;
    opt.seed = 21;
    for (std::size_t c = 1; c < 6; ++c) {
        opt.collisions.push_back(Collision{c, 0.15 + 0.14 * static_cast<double>(c), 1 + c % 3,
                                           c % 2 ? ContactProfile::Impact : ContactProfile::Push,
                                           150.0 + 30.0 * static_cast<double>(c), c % 2 ? 0.03 : 0.4, 1.0});
    }
    const Recording rec = simulate(default_arm(), default_task(), opt);
    Detector d(planar_profile());
    std::vector<double> tau(rec.joints()), q(rec.joints());
    std::vector<Decision> decisions;
    for (std::size_t i = 0; i < rec.size(); ++i) decisions.push_back(d.update(rec.sample(i, tau, q)));
    // Every collision: some STOP between onset and the end of contact.
    std::size_t collisions = 0, detected = 0;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        if (!rec.ground_truth->contact[i] || (i > 0 && rec.ground_truth->contact[i - 1])) continue;
        ++collisions;
        for (std::size_t k = i; k < rec.size() && rec.ground_truth->contact[k]; ++k) {
            if (decisions[k].stop()) {
                ++detected;
                break;
            }
        }
    }
    CHECK(collisions == 5);
    CHECK(detected == 5);
}

TEST_CASE("the default streaming detector decides exactly as the published one", "[detector][streaming]") {
    using namespace warpguard::planar_arm;
    RunOptions opt;
    opt.cycles = 3;
    opt.seed = 23;
    opt.collisions = {Collision{1, 0.4, 2, ContactProfile::Impact, 120.0, 0.03, 1.0},
                      Collision{2, 0.6, 3, ContactProfile::Push, 80.0, 0.5, -1.0}};
    const Recording rec = simulate(default_arm(), default_task(), opt);
    Detector fast(planar_profile());
    Detector published(planar_profile(), MatcherKind::Published);
    CHECK(fast.matcher() == MatcherKind::Streaming);
    std::vector<double> tau(rec.joints()), q(rec.joints());
    std::size_t stops = 0;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        const Sample s = rec.sample(i, tau, q);
        const Decision a = fast.update(s);
        const Decision b = published.update(s);
        INFO("sample " << i);
        REQUIRE(a.verdict == b.verdict);
        REQUIRE(a.joint == b.joint);
        REQUIRE(a.rule == b.rule);
        REQUIRE(a.value == b.value);
        for (std::size_t j = 0; j < rec.joints(); ++j) {
            REQUIRE(fast.evaluations()[j].cost == published.evaluations()[j].cost);
            REQUIRE(fast.evaluations()[j].rule2 == published.evaluations()[j].rule2);
            REQUIRE(fast.evaluations()[j].ref_start == published.evaluations()[j].ref_start);
        }
        stops += a.stop();
    }
    CHECK(stops > 0);
    // ... and got there by pruning: the sweeps computed well under the full matrices of the published
    // one (one m x n matrix per joint and sample; the matcher counts every lane of its steps).
    const double full = static_cast<double>(rec.size()) * static_cast<double>(fast.window_length()) *
                        static_cast<double>(fast.profile().reference.size()) * static_cast<double>(rec.joints());
    INFO("cells " << fast.matcher_cells() << " of " << full);
    CHECK(static_cast<double>(fast.matcher_cells()) < 0.5 * full);
}
