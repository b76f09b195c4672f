// The phase-aware detector (issue 8), WarpGuard's default, on the planar arm.
#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include "test_data.hpp"
#include "warpguard/detector.hpp"

using namespace warpguard;
using namespace warpguard::planar_arm;

namespace {

std::vector<Decision> run(const Profile& profile, const Recording& rec, Detector* keep = nullptr) {
    Detector local(profile);
    Detector& d = keep ? *keep : local;
    std::vector<double> tau(rec.joints()), q(rec.joints());
    std::vector<Decision> out;
    for (std::size_t i = 0; i < rec.size(); ++i) out.push_back(d.update(rec.sample(i, tau, q)));
    return out;
}

std::size_t stop_events(const std::vector<Decision>& d) {
    std::size_t events = 0;
    for (std::size_t i = 0; i < d.size(); ++i) events += d[i].stop() && (i == 0 || !d[i - 1].stop());
    return events;
}

}  // namespace

TEST_CASE("calibration: one threshold per reference sample, margin from held-out cycle maxima", "[phase-aware]") {
    const Profile& p = test::phase_profile();
    REQUIRE(p.detector == DetectorKind::PhaseAware);
    REQUIRE(p.phase);
    const auto& ph = *p.phase;
    CHECK(ph.rule1.size() == p.joints);
    CHECK(ph.rule1[0].size() == p.reference.size());
    CHECK(ph.neighbourhood == p.window);
    // The margin is never below the largest per-cycle maximum seen on held-out halves, nor below 1.
    CHECK(ph.margin >= ph.derivation.at("cycle_max_largest").get<double>());
    CHECK(ph.margin >= 1.0);
    CHECK(ph.cusum_limit >= ph.derivation.at("cusum_cycle_max_largest").get<double>());
    CHECK(ph.derivation.at("cycles").get<int>() == static_cast<int>(test::long_nominal_recording().complete_cycles().size()));
    // The per-cycle maxima the fits were made from are kept, one per cycle, and agree with them.
    for (const char* key : {"cycle_maxima", "cusum_cycle_maxima"}) {
        const auto maxima = ph.derivation.at(key).get<std::vector<double>>();
        CHECK(maxima.size() == ph.derivation.at("cycles").get<std::size_t>());
        const double largest = *std::max_element(maxima.begin(), maxima.end());
        CHECK(largest == ph.derivation.at(std::string(key) == "cycle_maxima" ? "cycle_max_largest" : "cusum_cycle_max_largest").get<double>());
    }
    // The thresholds vary along the cycle (that is the point).
    for (std::size_t j = 0; j < p.joints; ++j) {
        const auto [lo, hi] = std::minmax_element(ph.rule1[j].begin(), ph.rule1[j].end());
        CHECK(*hi > *lo);
    }
    // JSON round trip keeps every setting.
    const Profile back = profile_from_json(to_json(p));
    REQUIRE(back.phase);
    CHECK(back.detector == DetectorKind::PhaseAware);
    CHECK(back.phase->margin == ph.margin);
    CHECK(back.phase->cusum_limit == ph.cusum_limit);
    CHECK(back.phase->rule1[1][100] == Approx(ph.rule1[1][100]).epsilon(1e-5));
}

TEST_CASE("too few nominal cycles for the phase-aware margin are refused", "[phase-aware]") {
    CalibrationOptions opt;
    opt.window = 20;
    const NamedRecording nominal[] = {{"nominal6.csv", &test::nominal_recording()}};
    REQUIRE_THROWS_WITH(calibrate({"reference.csv", &test::reference_recording()}, nominal, opt),
                        Catch::Contains(">= 10 complete nominal cycles") && Catch::Contains("got"));
}

TEST_CASE("held-out nominal cycles: the published rules stop, the phase-aware detector does not", "[phase-aware]") {
    RunOptions opt;
    opt.cycles = 20;
    opt.seed = 77;  // not a calibration seed
    const Recording rec = simulate(default_arm(), default_task(), opt);
    const std::size_t published = stop_events(run(test::planar_profile(), rec));
    const std::size_t phase = stop_events(run(test::phase_profile(), rec));
    INFO("stop events in 20 held-out nominal cycles: published " << published << ", phase-aware " << phase);
    CHECK(phase == 0);
    CHECK(published > 0);
}

TEST_CASE("the phase-aware detector stops every collision of 150 N and more", "[phase-aware]") {
    RunOptions opt;
    opt.cycles = 6;
    opt.seed = 21;
    for (std::size_t c = 1; c < 6; ++c) {
        opt.collisions.push_back(Collision{c, 0.15 + 0.14 * static_cast<double>(c), 1 + c % 3,
                                           c % 2 ? ContactProfile::Impact : ContactProfile::Push,
                                           150.0 + 30.0 * static_cast<double>(c), c % 2 ? 0.03 : 0.4, 1.0});
    }
    const Recording rec = simulate(default_arm(), default_task(), opt);
    const auto decisions = run(test::phase_profile(), rec);
    std::size_t collisions = 0, detected = 0;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        if (!rec.ground_truth->contact[i] || (i > 0 && rec.ground_truth->contact[i - 1])) continue;
        ++collisions;
        for (std::size_t k = i; k < rec.size() && k < i + 200 && (k == i || rec.ground_truth->contact[k - 1] || k < i + 20); ++k) {
            if (decisions[k].stop()) {
                ++detected;
                break;
            }
        }
    }
    CHECK(collisions == 5);
    CHECK(detected == 5);
}

TEST_CASE("friction drift is learned from clean samples and hardly ever stops the robot", "[phase-aware]") {
    // Friction rising by 15 % and by 30 % over 60 cycles (0.25 and 0.5 % per cycle: a cold robot
    // warming up quickly).
    for (const double drift : {0.15, 0.3}) {
        RunOptions opt;
        opt.cycles = 60;
        opt.seed = 78;
        opt.friction_drift = drift;
        const Recording rec = simulate(default_arm(), default_task(), opt);
        Detector d(test::phase_profile());
        const std::size_t phase = stop_events(run(test::phase_profile(), rec, &d));
        const std::size_t published = stop_events(run(test::planar_profile(), rec));
        double coulomb = 0;
        for (std::size_t j = 0; j < d.joints(); ++j) coulomb = std::max(coulomb, d.friction_drift(j)[0]);
        INFO("drift " << drift << ": stop events phase-aware " << phase << ", published " << published
                      << "; largest learned Coulomb term " << coulomb);
        CHECK(phase <= (drift < 0.2 ? 0u : 2u));
        CHECK(published > 10 * std::max<std::size_t>(phase, 1));
        // The record of adaptation: a Coulomb term that grew with the friction.
        CHECK(coulomb > 0.01);
    }
}
