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
    // The cycles that set the limits are named: the three largest CUSUM maxima first, largest first,
    // then any of the three largest ratio maxima not among them, each with the robot's cycle counter.
    const auto& widest = ph.derivation.at("widest_cycles");
    REQUIRE(widest.size() >= 3);
    CHECK(widest.size() <= 6);
    CHECK(widest[0].at("cusum").get<double>() == ph.derivation.at("cusum_cycle_max_largest").get<double>());
    CHECK(widest[0].at("cusum").get<double>() >= widest[1].at("cusum").get<double>());
    CHECK(widest[1].at("cusum").get<double>() >= widest[2].at("cusum").get<double>());
    bool has_largest_ratio = false;
    std::vector<std::int64_t> counters;
    for (const auto& c : test::long_nominal_recording().complete_cycles()) counters.push_back(c.counter);
    for (const auto& c : widest) {
        has_largest_ratio |= c.at("ratio").get<double>() == ph.derivation.at("cycle_max_largest").get<double>();
        CHECK(std::find(counters.begin(), counters.end(), c.at("cycle").get<std::int64_t>()) != counters.end());
    }
    CHECK(has_largest_ratio);
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

TEST_CASE("a stream that starts in the standstill ending a cycle follows the next cycle's move from its start",
          "[phase-aware]") {
    // The planar task ends each cycle at rest (the retreat's dwell) and begins the next one with a
    // move, as the reference does. A stream that joins during that dwell puts the shared partner in
    // the reference's last standstill; when the move begins, the torque changes a few samples before
    // the joints leave rest, and the partner must go to the reference's first move with it.
    const Profile& p = test::phase_profile();
    RunOptions opt;
    opt.cycles = 4;
    opt.seed = 93;  // not a calibration seed
    const Recording full = simulate(default_arm(), default_task(), opt);
    const auto cycles = full.complete_cycles();
    REQUIRE(cycles.size() >= 2);
    const std::size_t boundary = cycles[1].begin;  // the first sample of a cycle's move
    Recording rec = full.slice(boundary - 15, full.size());
    // The angles lag the torque at a move's start (the acceleration's torque is there at once; an
    // encoder shows the motion a few samples later): the first 3 samples of the move keep the
    // rest pose's angles.
    for (std::size_t j = 0; j < rec.joints(); ++j) {
        for (std::size_t i = 15; i < 18; ++i) rec.q[j][i] = rec.q[j][14];
    }
    // Where the reference's cycles begin (it holds several).
    const Recording& reference = test::reference_recording();
    const std::size_t n_ref = p.reference.size();
    std::vector<std::size_t> starts;
    for (const auto& c : reference.cycles()) {
        if (c.begin >= p.reference.first_sample && c.begin < p.reference.first_sample + n_ref) starts.push_back(c.begin - p.reference.first_sample);
    }
    REQUIRE(starts.size() >= 2);
    const auto at_a_start = [&](std::size_t partner) {
        return std::any_of(starts.begin(), starts.end(), [&](std::size_t s) { return partner >= s && partner < s + 10; });
    };
    Detector d(p);
    std::vector<double> tau(rec.joints()), q(rec.joints());
    std::size_t before = 0;
    double largest_ratio = 0;
    for (std::size_t i = 0; i <= 15 + 4; ++i) {
        const Decision decision = d.update(rec.sample(i, tau, q));
        CHECK_FALSE(decision.stop());
        const std::size_t partner = d.evaluations()[0].shared.partner;
        if (i == 14) before = partner;
        // (The stream's very first sample is matched with nothing before it; from the second on.)
        if (i >= 1) {
            for (const auto& ev : d.evaluations()) largest_ratio = std::max(largest_ratio, ev.ratio);
        }
        if (i >= 16) {
            INFO("sample " << i - 15 << " of the move: partner " << partner << " of " << n_ref);
            CHECK(at_a_start(partner));  // a cycle's first move in the reference, not its last standstill
        }
    }
    INFO("partner in the dwell before the move: " << before);
    CHECK(before > n_ref - 60);  // the stream joined in the reference's last standstill
    CHECK(largest_ratio < 1.0);
}
