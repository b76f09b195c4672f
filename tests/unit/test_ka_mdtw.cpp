// KA-mDTW, thesis (51)-(56): the mDTW rules on lever-scaled signals.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "warpguard/detector.hpp"
#include "warpguard/lever_length.hpp"
#include "warpguard/mdtw.hpp"

using namespace warpguard;

namespace {

// Planar two-link arm (0.6 m + 0.6 m) with the contact force along -y of the base (weight-like):
// joint 1's lever length is |x_tip| = 1.2 cos(q1) for q2 = 0.
DhModel arm() { return DhModel({{JointType::Revolute, 0.6, 0, 0, 0}, {JointType::Revolute, 0.6, 0, 0, 0}}); }
const ForceDirection kWeight = ForceDirection::make(ForceDirection::Frame::Base, {0, -1, 0});

double q1_for_lever(double lever) { return std::acos(lever / 1.2); }

struct Phase {
    double lever;  // m, joint 1
    bool triangle;  // force shape: triangle or sin^2 bump
    double peak;    // N
    std::size_t samples;
};

// Torque of joint 1 = lever x force for a sequence of phases separated by force-free gaps.
struct Stream {
    std::vector<double> tau1, tau2, q1, q2;
    std::vector<std::size_t> phase_start;

    void add(const Phase& p, std::size_t gap) {
        const double q = q1_for_lever(p.lever);
        for (std::size_t k = 0; k < gap; ++k) push(q, 0.0);
        phase_start.push_back(tau1.size());
        for (std::size_t k = 0; k < p.samples; ++k) {
            const double x = static_cast<double>(k) / static_cast<double>(p.samples - 1);
            const double shape = p.triangle ? 1.0 - std::abs(2.0 * x - 1.0) : std::pow(std::sin(M_PI * x), 2);
            push(q, p.peak * shape);
        }
    }
    void push(double q, double force) {
        q1.push_back(q);
        q2.push_back(0.0);
        tau1.push_back(1.2 * std::cos(q) * force);
        tau2.push_back(0.6 * std::cos(q) * force);
    }
};

}  // namespace

TEST_CASE("KA-mDTW matches the right phase where plain mDTW picks a wrong one", "[ka-mdtw]") {
    // Reference: phase A (20 N sin^2 bump at lever 0.25 m -> 5 Nm), phase B (4 N triangle at 0.5 m -> 2 Nm).
    Stream ref;
    ref.add({0.25, false, 20.0, 40}, 10);
    ref.add({0.50, true, 4.0, 40}, 10);
    for (int k = 0; k < 10; ++k) ref.push(q1_for_lever(0.5), 0.0);
    // Measurement: phase B again, but at a pose with lever 1.15 m: 4.6 Nm peak, raw-closest to phase A.
    Stream meas;
    meas.add({1.15, true, 4.0, 40}, 4);
    meas.push(q1_for_lever(1.15), 0.0);
    meas.push(q1_for_lever(1.15), 0.0);

    const auto plain = mdtw_match(meas.tau1, ref.tau1);
    const std::size_t phase_a = ref.phase_start[0], phase_b = ref.phase_start[1];
    INFO("plain mDTW span " << plain.start << ".." << plain.end);
    CHECK(plain.end < phase_b);  // plain mDTW lands in phase A: wrong
    CHECK(plain.start >= phase_a - 10);

    // (51)-(54): divide every sample by its own lever length; the reference once, up front.
    std::vector<double> la(2), a_scaled, b_scaled;
    for (std::size_t i = 0; i < meas.tau1.size(); ++i) {
        equivalent_lever_lengths(arm(), std::vector<double>{meas.q1[i], meas.q2[i]}, kWeight, la);
        a_scaled.push_back(meas.tau1[i] / la[0]);
    }
    for (std::size_t j = 0; j < ref.tau1.size(); ++j) {
        equivalent_lever_lengths(arm(), std::vector<double>{ref.q1[j], ref.q2[j]}, kWeight, la);
        b_scaled.push_back(ref.tau1[j] / la[0]);
    }
    const auto ka = mdtw_match(a_scaled, b_scaled);
    INFO("KA-mDTW span " << ka.start << ".." << ka.end << ", phase B at " << phase_b);
    CHECK(ka.start >= phase_b - 4);       // begins in the gap just before phase B
    CHECK(ka.end >= phase_b + 39);        // and covers phase B to its end
    CHECK(ka.cost < 1e-9);  // in force units the measured phase is exactly phase B
    CHECK(plain.cost > 1.0);  // while no raw span fits it

    // The realistic error (§4.5): classic DTW of the raw window against the KA-chosen span is large,
    // because the same force acts on a different lever.
    const auto realistic = dtw_match(meas.tau1, std::span<const double>(ref.tau1).subspan(ka.start, ka.end - ka.start + 1));
    CHECK(realistic.cost > ka.cost);
}

TEST_CASE("the detector's KA-mDTW divides the newest sample and the pre-divided reference (51)-(56)", "[ka-mdtw]") {
    Stream ref;
    ref.add({0.25, false, 20.0, 30}, 5);
    ref.add({0.50, true, 4.0, 30}, 5);
    Profile p;
    p.robot = "planar-2";
    p.joints = 2;
    p.window = 12;
    p.method = MatchingMethod::KaMdtw;
    p.kinematics = KinematicsSettings{arm(), kWeight, kDefaultMinLever, {}};
    p.reference.t.resize(ref.tau1.size());
    p.reference.tau = {ref.tau1, ref.tau2};
    p.reference.q = {ref.q1, ref.q2};
    p.thresholds.assign(2, JointThresholds{});
    p.thresholds[0].rule1.value = p.thresholds[1].rule1.value = 1e9;
    p.thresholds[0].rule2.value = p.thresholds[1].rule2.value = 1e9;
    Detector detector(p);

    // Reference is divided once: b(j) / l_b(j).
    std::vector<double> lever(2);
    for (std::size_t j = 0; j < ref.tau1.size(); ++j) {
        equivalent_lever_lengths(arm(), std::vector<double>{ref.q1[j], ref.q2[j]}, kWeight, lever);
        REQUIRE(detector.reference(0)[j] == Approx(ref.tau1[j] / lever[0]));
        REQUIRE(detector.reference(1)[j] == Approx(ref.tau2[j] / lever[1]));
    }
    Stream meas;
    meas.add({0.9, true, 4.0, 30}, 3);
    for (std::size_t i = 0; i < meas.tau1.size(); ++i) {
        const double tau[2] = {meas.tau1[i], meas.tau2[i]};
        const double q[2] = {meas.q1[i], meas.q2[i]};
        detector.update(Sample{0.0, 0, 0, 0, tau, q});
    }
    // The window holds a(i) / l_a(i) of the last 12 samples; the match equals mDTW on scaled signals.
    std::vector<double> expected;
    for (std::size_t i = meas.tau1.size() - 12; i < meas.tau1.size(); ++i) {
        equivalent_lever_lengths(arm(), std::vector<double>{meas.q1[i], meas.q2[i]}, kWeight, lever);
        expected.push_back(meas.tau1[i] / lever[0]);
    }
    for (std::size_t k = 0; k < 12; ++k) CHECK(detector.window(0)[k] == Approx(expected[k]));
    const auto oracle = mdtw_match(expected, detector.reference(0));
    CHECK(detector.evaluations()[0].cost == oracle.cost);
    CHECK(detector.evaluations()[0].ref_end == oracle.end);
    CHECK(detector.evaluations()[0].ref_start == oracle.start);
    // The measured phase B lies in the second half of the reference.
    CHECK(detector.evaluations()[0].ref_start >= 35);
}

TEST_CASE("a KA-mDTW reference with a near-zero lever length is refused with joint and sample", "[ka-mdtw]") {
    Stream ref;
    ref.add({0.3, true, 4.0, 10}, 2);
    ref.q1[7] = M_PI / 2;  // arm straight up: x_tip = 0, joint 1 lever 0
    ref.tau1[7] = 0.0;
    Profile p;
    p.joints = 2;
    p.window = 4;
    p.method = MatchingMethod::KaMdtw;
    p.kinematics = KinematicsSettings{arm(), kWeight, kDefaultMinLever, {}};
    p.reference.t.resize(ref.tau1.size());
    p.reference.tau = {ref.tau1, ref.tau2};
    p.reference.q = {ref.q1, ref.q2};
    p.thresholds.assign(2, JointThresholds{});
    CHECK_THROWS_MATCHES(Detector(p), NearZeroLeverError,
                         Catch::Matchers::Predicate<NearZeroLeverError>(
                             [](const NearZeroLeverError& e) { return e.joint() == 1 && e.sample() == 7; }));
    CHECK_THROWS_WITH(Detector(p), Catch::Contains("joint 1") && Catch::Contains("reference sample 7"));
}

TEST_CASE("only the listed joints are divided by their lever — a near-zero lever elsewhere is no longer fatal", "[ka-mdtw]") {
    Stream ref;
    ref.add({0.3, true, 4.0, 10}, 2);
    ref.q1[7] = 0.0;  // link 1 level, link 2 straight up: joint 2 has no lever at sample 7
    ref.q2[7] = M_PI / 2;
    ref.tau2[7] = 0.0;
    Profile p;
    p.joints = 2;
    p.window = 4;
    p.method = MatchingMethod::KaMdtw;
    p.kinematics = KinematicsSettings{arm(), kWeight, kDefaultMinLever, {}};
    p.kinematics->scaled_joints = {0};  // joint 1 only (0-based)
    p.reference.t.resize(ref.tau1.size());
    p.reference.tau = {ref.tau1, ref.tau2};
    p.reference.q = {ref.q1, ref.q2};
    p.thresholds.assign(2, JointThresholds{});
    for (auto& th : p.thresholds) th.rule1.value = th.rule2.value = 1e9;
    Detector detector(p);
    std::vector<double> lever(2);
    for (std::size_t s = 0; s < ref.tau1.size(); ++s) {
        CHECK(detector.reference(1)[s] == ref.tau2[s]);  // unscaled
        equivalent_lever_lengths(arm(), std::vector<double>{ref.q1[s], ref.q2[s]}, kWeight, lever);
        CHECK(detector.reference(0)[s] == Approx(ref.tau1[s] / lever[0]));
    }
    // The selection survives the profile file.
    p.thresholds[0].rule1.sigma = p.thresholds[1].rule1.sigma = 1.0;
    const Profile back = profile_from_json(to_json(p));
    REQUIRE(back.kinematics);
    CHECK(back.kinematics->scaled_joints == std::vector<std::size_t>{0});
    CHECK(to_json(p)["kinematics"]["scaled_joints"] == nlohmann::json::array({1}));
    // Scaling joint 2 as well is refused at its zero lever, naming it.
    p.kinematics->scaled_joints = {0, 1};
    CHECK_THROWS_WITH(Detector(p), Catch::Contains("joint 2") && Catch::Contains("reference sample 7"));
    nlohmann::json bad = to_json(p);
    bad["kinematics"]["scaled_joints"] = {3};
    CHECK_THROWS_WITH(profile_from_json(bad), Catch::Contains("joint 3 is not a joint of this profile (1..2)"));
}
