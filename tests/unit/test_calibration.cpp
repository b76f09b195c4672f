// Calibration of the thresholds, thesis §3.2.3, and the profile file.
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "test_data.hpp"
#include "warpguard/calibration.hpp"
#include "warpguard/detector.hpp"
#include "warpguard/profile.hpp"

using namespace warpguard;
using warpguard::test::nominal_recording;
using warpguard::test::planar_profile;
using warpguard::test::reference_recording;

TEST_CASE("the reference is cut from the first cycle start over the requested complete cycles", "[calibration]") {
    const Recording& rec = reference_recording();
    const auto cycles = rec.complete_cycles();
    REQUIRE(cycles.size() == 4);
    const Reference ref = cut_reference(rec, "ref.csv", 2);
    CHECK(ref.first_sample == cycles[0].begin);
    CHECK(ref.size() == cycles[0].size() + cycles[1].size());
    CHECK(ref.cycles == std::vector<std::int64_t>{cycles[0].counter, cycles[1].counter});
    CHECK(ref.tau[1][0] == rec.tau[1][cycles[0].begin]);
    CHECK(rec.cycle[ref.first_sample - 1] != rec.cycle[ref.first_sample]);  // begins exactly at a counter change

    CHECK_THROWS_WITH(cut_reference(rec, "ref.csv", 5),
                      Catch::Contains("ref.csv") && Catch::Contains("needs 5 complete cycles") && Catch::Contains("found 4"));
}

TEST_CASE("theta1 = 3 sigma and theta2 = 1.2 x max of the nominal rule values", "[calibration]") {
    const Profile& p = planar_profile();
    // Recompute the statistics independently: replay the nominal recording through a detector with
    // open thresholds and collect what the rules see.
    Profile open = p;
    for (auto& th : open.thresholds) th.rule1.value = th.rule2.value = std::numeric_limits<double>::infinity();
    Detector detector(open);
    const Recording& rec = nominal_recording();
    std::vector<std::vector<double>> dev(p.joints), eig(p.joints);
    std::vector<double> tau(p.joints), q(p.joints);
    for (std::size_t i = 0; i < rec.size(); ++i) {
        detector.update(rec.sample(i, tau, q));
        for (std::size_t j = 0; j < p.joints; ++j) {
            dev[j].push_back(detector.evaluations()[j].rule1.deviation);
            eig[j].push_back(detector.evaluations()[j].rule2);
        }
    }
    for (std::size_t j = 0; j < p.joints; ++j) {
        double mean = 0;
        for (double d : dev[j]) mean += d;
        mean /= static_cast<double>(dev[j].size());
        double ss = 0;
        for (double d : dev[j]) ss += (d - mean) * (d - mean);
        const double sigma = std::sqrt(ss / static_cast<double>(dev[j].size() - 1));
        const double max_eig = *std::max_element(eig[j].begin(), eig[j].end());
        INFO("joint " << j + 1);
        CHECK(p.thresholds[j].rule1.samples == rec.size());
        CHECK(p.thresholds[j].rule1.sigma == Approx(sigma).epsilon(1e-9));
        CHECK(p.thresholds[j].rule1.value == Approx(3.0 * sigma).epsilon(1e-9));
        CHECK(p.thresholds[j].rule2.max == max_eig);
        CHECK(p.thresholds[j].rule2.value == Approx(1.2 * max_eig));
        CHECK(sigma > 0.0);
        CHECK(max_eig > 0.0);
    }
}

TEST_CASE("with the thesis's round-up theta1 is the first integer above 3 sigma", "[calibration]") {
    CalibrationOptions opt;
    opt.window = 20;
    opt.detector = DetectorKind::Published;
    opt.round_up = true;
    const NamedRecording nominal[] = {{"nominal.csv", &nominal_recording()}};
    const Profile p = calibrate({"reference.csv", &reference_recording()}, nominal, opt);
    for (std::size_t j = 0; j < p.joints; ++j) {
        const double raw = 3.0 * p.thresholds[j].rule1.sigma;
        CHECK(p.thresholds[j].rule1.value == std::floor(raw) + 1.0);
        CHECK(p.thresholds[j].rule1.value > raw);
        CHECK(p.thresholds[j].rule1.rounded_up);
    }
}

TEST_CASE("rule 2 never fires on the nominal windows it was calibrated on", "[calibration]") {
    Detector detector(planar_profile());
    const Recording& rec = nominal_recording();
    std::vector<double> tau(rec.joints()), q(rec.joints());
    std::size_t rule2_stops = 0;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        const Decision d = detector.update(rec.sample(i, tau, q));
        for (std::size_t j = 0; j < rec.joints(); ++j) {
            if (detector.evaluations()[j].rule2 > planar_profile().thresholds[j].rule2.value) ++rule2_stops;
        }
        CHECK(d.rule != Rule::Fault);
    }
    CHECK(rule2_stops == 0);
}

TEST_CASE("calibration refuses recordings that do not fit the reference, naming the file", "[calibration]") {
    Recording other(2, RecordingInfo{});
    const NamedRecording nominal[] = {{"two-joints.csv", &other}};
    CHECK_THROWS_WITH(calibrate({"reference.csv", &reference_recording()}, nominal, {}),
                      Catch::Contains("two-joints.csv") && Catch::Contains("2 joints"));
    CHECK_THROWS_WITH(calibrate({"reference.csv", &reference_recording()}, {}, {}),
                      Catch::Contains("at least one held-out nominal recording"));
    Recording amps = nominal_recording();
    amps.info().signal = SignalKind::Current;
    amps.info().unit = SignalUnit::A;
    const NamedRecording wrong_unit[] = {{"amps.csv", &amps}};
    CHECK_THROWS_WITH(calibrate({"reference.csv", &reference_recording()}, wrong_unit, {}),
                      Catch::Contains("amps.csv") && Catch::Contains("current in A"));
}

TEST_CASE("a profile round-trips through its JSON file", "[calibration][profile]") {
    const Profile& p = planar_profile();
    const std::string path = "profile_roundtrip_test.json";
    save_profile(p, path);
    const Profile back = load_profile(path);
    std::remove(path.c_str());
    CHECK(back.window == p.window);
    CHECK(back.joints == p.joints);
    CHECK(back.method == p.method);
    CHECK(back.reference.tau == p.reference.tau);
    CHECK(back.reference.q == p.reference.q);
    for (std::size_t j = 0; j < p.joints; ++j) {
        CHECK(back.thresholds[j].rule1.value == p.thresholds[j].rule1.value);
        CHECK(back.thresholds[j].rule2.value == p.thresholds[j].rule2.value);
        CHECK(back.thresholds[j].rule1.sigma == p.thresholds[j].rule1.sigma);
    }
    CHECK(back.calibration.at("windows") == p.calibration.at("windows"));
}

TEST_CASE("a broken profile file is refused with the path and the field", "[profile]") {
    nlohmann::json j = to_json(planar_profile());
    j["window"] = 1;
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("window is 1 samples"));
    j = to_json(planar_profile());
    j["thresholds"].erase(1);
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("thresholds for 2 joints; expected 3"));
    j = to_json(planar_profile());
    j["method"] = "ka-mdtw";
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("KA-mDTW profile has no kinematics"));
    CHECK_THROWS_WITH(load_profile("/nonexistent/profile.json"), Catch::Contains("/nonexistent/profile.json"));
}
