// The phase-aware detector (issue 8), WarpGuard's default, on the planar arm.
#include <algorithm>
#include <cmath>
#include <cstdint>
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

// Four cycles of the planar task on a seed calibration never used.
Recording four_cycles(std::uint64_t seed) {
    RunOptions opt;
    opt.cycles = 4;
    opt.seed = seed;
    return simulate(default_arm(), default_task(), opt);
}

// The largest phase-aware ratio over the joints after the detector's last update.
double largest_ratio(const Detector& d) {
    double r = 0;
    for (const auto& ev : d.evaluations()) r = std::max(r, ev.ratio);
    return r;
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
    // The thresholds vary along the cycle (that is the point), except for a joint whose every
    // nominal deviation stayed under the floor of 3 noise levels (the planar arm's joint 1: no
    // phase deviates beyond its noise); none lies under that floor.
    const Detector floors(p);
    std::size_t varying = 0;
    for (std::size_t j = 0; j < p.joints; ++j) {
        const auto [lo, hi] = std::minmax_element(ph.rule1[j].begin(), ph.rule1[j].end());
        const double floor = 3.0 * floors.noise_scale(j) * ph.margin;
        INFO("joint " << j + 1 << ": thresholds " << *lo << ".." << *hi << ", floor " << floor);
        CHECK(*lo == Approx(floor).epsilon(1e-9));
        varying += *hi > *lo;
    }
    CHECK(varying >= 2);
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
        const Recording rec = test::friction_rising_run(60, 78, drift);
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
    const Recording full = four_cycles(93);  // not a calibration seed
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
    const std::size_t n_ref = p.reference.size();
    const std::vector<std::size_t>& starts = p.reference.cycle_begins;
    REQUIRE(starts.size() >= 2);
    const auto at_a_start = [&](std::size_t partner) {
        return std::any_of(starts.begin(), starts.end(), [&](std::size_t s) { return partner >= s && partner < s + 10; });
    };
    Detector d(p);
    std::vector<double> tau(rec.joints()), q(rec.joints());
    std::size_t before = 0;
    double largest = 0;
    for (std::size_t i = 0; i <= 15 + 4; ++i) {
        const Decision decision = d.update(rec.sample(i, tau, q));
        CHECK_FALSE(decision.stop());
        const std::size_t partner = d.evaluations()[0].shared.partner;
        if (i == 14) before = partner;
        // (The stream's very first sample is matched with nothing before it; from the second on.)
        if (i >= 1) {
            largest = std::max(largest, largest_ratio(d));
        }
        if (i >= 16) {
            INFO("sample " << i - 15 << " of the move: partner " << partner << " of " << n_ref);
            CHECK(at_a_start(partner));  // a cycle's first move in the reference, not its last standstill
        }
    }
    INFO("partner in the dwell before the move: " << before);
    CHECK(before > n_ref - 60);  // the stream joined in the reference's last standstill
    CHECK(largest < 1.0);
}

TEST_CASE("the robot's cycle counter puts the shared partner at a reference cycle's begin", "[phase-aware]") {
    // The planar task ends each cycle in a dwell and begins the next with a move; the reference
    // holds several cycles. Through a cycle's closing dwell the partner sits in the reference's
    // last standstill, and the next cycle's first sample (its torque already that of the move) is
    // far from it. The counter changed with that sample: every reference cycle's begin is offered.
    const Profile& p = test::phase_profile();
    REQUIRE(p.reference.cycle_begins.size() == p.reference.cycles.size());
    REQUIRE(p.reference.cycle_begins.size() >= 2);
    CHECK(p.reference.cycle_begins.front() == 0);
    // (The reference's cycles as cut from its recording.)
    const Recording& reference = test::reference_recording();
    for (std::size_t c = 0; c < p.reference.cycle_begins.size(); ++c) {
        const std::size_t at = p.reference.first_sample + p.reference.cycle_begins[c];
        CHECK(reference.cycle[at] == p.reference.cycles[c]);
        CHECK(reference.cycle[at - 1] != reference.cycle[at]);
    }
    // They survive the profile file, and a profile without them (written before) still loads.
    CHECK(profile_from_json(to_json(p)).reference.cycle_begins == p.reference.cycle_begins);
    Profile bad = p;
    bad.reference.cycle_begins.back() = p.reference.size();
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains(std::to_string(p.reference.size())) && Catch::Contains("begins at sample"));
    bad.reference.cycle_begins.pop_back();
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("cycle begins for"));
    Profile blind = p;  // a profile from before the cycle begins were recorded
    blind.reference.cycle_begins.clear();
    CHECK(profile_from_json(to_json(blind)).reference.cycle_begins.empty());
    const Recording full = four_cycles(93);  // not a calibration seed
    const auto cycles = full.complete_cycles();
    REQUIRE(cycles.size() >= 2);
    const std::size_t lead = cycles[1].begin - cycles[0].begin;  // a whole cycle first: every joint has moved
    const Recording rec = full.slice(cycles[0].begin, full.size());
    REQUIRE(rec.cycle[lead - 1] != rec.cycle[lead]);
    const auto at_a_begin = [&](std::size_t partner) {
        return std::any_of(p.reference.cycle_begins.begin(), p.reference.cycle_begins.end(),
                           [&](std::size_t b) { return partner >= b && partner <= b + 2; });
    };
    Detector counted(p), not_counted(blind);
    std::vector<double> tau(rec.joints()), q(rec.joints());
    for (std::size_t i = 0; i <= lead + p.window; ++i) {
        const Sample s = rec.sample(i, tau, q);
        const Decision a = counted.update(s);
        not_counted.update(s);
        const std::size_t partner = counted.evaluations()[0].shared.partner;
        if (!counted.warming_up()) {
            INFO("sample " << i << " (the cycle begins at " << lead << "), partner " << partner);
            CHECK_FALSE(a.stop());
            CHECK(largest_ratio(counted) < 1.0);
        }
        if (i == lead) {
            CHECK(at_a_begin(partner));
            // Without the counter the partner is still in the dwell ending the reference, and the
            // move's first sample is over its threshold there (1.83 times it, measured).
            CHECK(not_counted.evaluations()[0].shared.partner > p.reference.size() - p.window);
            CHECK(largest_ratio(not_counted) > 1.0);
        }
    }
}

TEST_CASE("a program that waits after counting its cycle keeps the partner at rest", "[phase-aware]") {
    // The counter may change well before the robot moves (the program counts, then waits for a
    // part): the reference cycles' begins, where the reference moves at once, are then offered but
    // lose against the dwell the robot still stands in. 40 samples of rest (twice the window)
    // between the counter's change and the move, then the move: no stop, no ratio near 1.
    const Profile& p = test::phase_profile();
    const Recording full = four_cycles(94);  // not a calibration seed
    const auto cycles = full.complete_cycles();
    REQUIRE(cycles.size() >= 3);
    const std::size_t boundary = cycles[1].begin, wait = 2 * p.window;
    Detector d(p);
    std::vector<double> tau(full.joints()), q(full.joints()), rest_tau(full.joints()), rest_q(full.joints());
    const Sample rest = full.sample(boundary - 1, rest_tau, rest_q);
    const double dt = full.t[boundary] - full.t[boundary - 1];
    double largest = 0;
    std::size_t stops = 0, judged = 0;
    const auto feed = [&](Sample s) {
        stops += d.update(s).stop();
        if (d.warming_up()) return;
        ++judged;
        largest = std::max(largest, largest_ratio(d));
    };
    for (std::size_t i = cycles[0].begin; i < boundary; ++i) feed(full.sample(i, tau, q));
    for (std::size_t k = 0; k < wait; ++k) {
        Sample s = rest;  // the dwell's last sample, counted into the next cycle
        s.t = rest.t + static_cast<double>(k + 1) * dt;
        s.cycle = full.cycle[boundary];
        feed(s);
    }
    for (std::size_t i = boundary; i < cycles[2].end; ++i) {
        Sample s = full.sample(i, tau, q);
        s.t += static_cast<double>(wait) * dt;
        feed(s);
    }
    INFO("largest ratio " << largest << " over " << judged << " samples");
    CHECK(judged > 2 * (cycles[1].end - cycles[1].begin));
    CHECK(stops == 0);
    CHECK(largest < 0.9);
}

TEST_CASE("the partner range holds every reference cycle's value at the partner's phase", "[phase-aware]") {
    // The reference's cycles pass through the same phases of the task, and the shared partner of
    // a sample may lie in any of their copies; a value one copy read there is nominal in all. Here
    // the copies of the task's longer dwells are moved apart on purpose, up by delta on joint 1 in
    // the even reference cycles and down in the odd ones, and clean cycles streamed. With the
    // cycles' begins the range judged spans both copies and holds the clean value; without them
    // (a profile from before they were recorded) the partner's own range holds one
    // copy, and the partner can only escape to a dwell's edge, whose +- 2 samples reach into the
    // move (unmodified): at one dwell that leaves the clean samples about 0.38 delta off. The
    // shared partner is chosen by each candidate's own copy alone (a pooled score is flat over a
    // move's copies and loosens the partner's timing), so both detectors' partners escape alike
    // and the pooled range, the one judged, holds the clean value there. (The published profile:
    // its limits are the partner range alone. In a dwell the signal is flat, so no warping finds
    // another sample that reads the clean value.)
    Profile p = test::planar_profile();
    const std::vector<std::size_t> begins = p.reference.cycle_begins;
    REQUIRE(begins.size() >= 2);
    const std::size_t n = p.reference.size(), j = 0;
    auto& ref = p.reference.tau[j];
    const auto [lo, hi] = std::minmax_element(ref.begin(), ref.end());
    const double delta = 0.05 * (*hi - *lo);
    // The dwells: 30 samples or more where no joint angle changes by 1e-5 rad.
    std::vector<std::pair<std::size_t, std::size_t>> dwells;  // [first, last)
    std::vector<std::uint8_t> cycles_with_dwells(begins.size(), 0);
    for (std::size_t k = 1, first = 0; k <= n; ++k) {
        bool still = k < n;
        for (std::size_t i = 0; i < p.joints && still; ++i) still = std::abs(p.reference.q[i][k] - p.reference.q[i][k - 1]) < 1e-5;
        if (still) continue;
        if (k - first >= 30) {
            const auto cycle = static_cast<std::size_t>(std::upper_bound(begins.begin(), begins.end(), first) - begins.begin()) - 1;
            for (std::size_t x = first; x < k; ++x) ref[x] += cycle % 2 ? -delta : delta;
            dwells.emplace_back(first, k);
            cycles_with_dwells[cycle] = 1;
        }
        first = k;
    }
    REQUIRE(std::count(cycles_with_dwells.begin(), cycles_with_dwells.end(), 1) >= 2);
    Profile blind = p;
    blind.reference.cycle_begins.clear();
    Detector pooled(p), own(blind);
    const Recording rec = four_cycles(95);  // not a calibration seed
    std::vector<double> tau(rec.joints()), q(rec.joints());
    std::size_t judged = 0, missed = 0, same_partner = 0;
    double narrowest = INFINITY, pooled_largest = 0, own_largest = 0;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        const Sample s = rec.sample(i, tau, q);
        pooled.update(s);
        own.update(s);
        if (pooled.warming_up()) continue;
        ++judged;
        const JointEvaluation& a = pooled.evaluations()[j];
        const JointEvaluation& b = own.evaluations()[j];
        pooled_largest = std::max(pooled_largest, std::abs(a.shared.deviation));
        own_largest = std::max(own_largest, std::abs(b.shared.deviation));
        same_partner += a.shared.partner == b.shared.partner;
        if (std::abs(b.shared.deviation) <= 0.3 * delta) continue;  // where the own copy misses the clean value
        ++missed;
        narrowest = std::min(narrowest, a.limit_high - a.limit_low);
    }
    INFO("delta " << delta << " in " << dwells.size() << " dwells; " << judged << " samples judged, " << missed
                  << " over 0.3 delta off the own copy (pooled range there at least " << narrowest << " wide); largest deviation "
                  << pooled_largest << " pooled, " << own_largest << " own copy; same partner at " << same_partner);
    REQUIRE(missed > 50);
    CHECK(narrowest > delta);           // the other copy's level is in the range
    CHECK(pooled_largest < 0.1 * delta);  // at every judged sample
    CHECK(own_largest > 0.3 * delta);
}
