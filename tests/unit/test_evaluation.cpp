// Offline evaluation: stop events, collisions, delays, false stops, clean cycles.
#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include "test_data.hpp"
#include "warpguard/detector.hpp"
#include "warpguard/evaluation.hpp"

using namespace warpguard;

namespace {

Recording tiny(const std::vector<std::int64_t>& cycles, const std::vector<std::uint8_t>& contact) {
    Recording rec(1, RecordingInfo{});
    rec.ground_truth = GroundTruth{};
    for (std::size_t i = 0; i < cycles.size(); ++i) {
        const double tau[1] = {0.0};
        const double q[1] = {0.0};
        rec.append(Sample{0.01 * static_cast<double>(i), static_cast<std::int64_t>(i), cycles[i], 0, tau, q});
        rec.ground_truth->contact.push_back(contact[i]);
        rec.ground_truth->contact_force.push_back(contact[i] ? 40.0 + static_cast<double>(i) : 0.0);
        rec.ground_truth->contact_link.push_back(contact[i] ? 2 : 0);
    }
    return rec;
}

std::vector<Decision> verdicts(const std::string& pattern) {
    std::vector<Decision> out;
    for (char c : pattern) {
        Decision d;
        if (c == 'S') {
            d.verdict = Verdict::Stop;
            d.joint = 1;
            d.rule = Rule::AbsoluteDifference;
        }
        out.push_back(d);
    }
    return out;
}

}  // namespace

TEST_CASE("stop events, detections, delays and false stops follow the documented definitions", "[evaluation]") {
    //            index:   0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19
    const Recording rec = tiny({0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4},
                               {0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0});
    // Window 2: a STOP up to 2 samples after a contact still belongs to it.
    const auto decisions = verdicts("S...." ".S.S." "....." "SS..." "S");
    //                               0-4     5-9     10-14   15-19 (index 20 unused)
    REQUIRE(decisions.size() == 21);
    const std::vector<Decision> d(decisions.begin(), decisions.begin() + 20);
    const RunEvaluation run = evaluate_decisions("tiny.csv", rec, d, 2);
    CHECK(run.samples == 20);
    CHECK(run.stop_samples == 5);
    REQUIRE(run.events.size() == 4);
    CHECK(run.events[0].index == 0);
    CHECK(run.events[1].index == 6);
    CHECK(run.events[2].index == 8);
    CHECK(run.events[3].index == 15);
    CHECK(run.events[3].end_index == 17);
    REQUIRE(run.truth.has_value());
    const auto& s = *run.truth;
    REQUIRE(s.collisions.size() == 2);
    // Collision 1: contact 4-5, STOP at 6 (within 2 samples after the contact): detected, delay 0.02 s.
    CHECK(s.collisions[0].detected);
    CHECK(s.collisions[0].detection_index == 6);
    CHECK(s.collisions[0].delay == Approx(0.02));
    CHECK(s.collisions[0].peak_force == 45.0);
    CHECK(s.collisions[0].force_at_detection == 0.0);  // the contact had ended at sample 6
    CHECK(s.collisions[0].link == 2);
    // Collision 2: contact 10-12, nothing until 14: missed.
    CHECK_FALSE(s.collisions[1].detected);
    CHECK(s.detected == 1);
    CHECK(s.missed == 1);
    // Events at 0, 8 (collision 1's interval ends at 5 + 2 = 7) and 15 are false.
    CHECK(s.false_stop_events == 3);
    CHECK(*s.delay_median == Approx(0.02));
    // Complete cycles: 1 (2-6, contact), 2 (7-11, contact), 3 (12-16, contact at 12): no clean one.
    CHECK(run.clean_cycles == 0);
}

TEST_CASE("a STOP during the contact records the force the contact had reached", "[evaluation]") {
    // Contact 3-7 with force 40 + index (a push rising 43, 44, ... N); the first STOP at 5.
    const Recording rec = tiny({0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 1, 1, 1, 1, 0, 0});
    const RunEvaluation run = evaluate_decisions("push.csv", rec, verdicts(".....SS..."), 2);
    REQUIRE(run.truth.has_value());
    REQUIRE(run.truth->collisions.size() == 1);
    const auto& c = run.truth->collisions[0];
    CHECK(c.detected);
    CHECK(c.detection_index == 5);
    CHECK(c.force_at_detection == 45.0);
    CHECK(c.peak_force == 47.0);
    CHECK(c.delay == Approx(0.02));
}

TEST_CASE("a contact's delay counts from its own onset, before the first sample that carries it", "[evaluation]") {
    // Contact 3-7; it began 6 ms before sample 3 (t = 0.03), so at t = 0.024; the first STOP at 5.
    Recording rec = tiny({0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 1, 1, 1, 1, 0, 0});
    rec.ground_truth->contact_age = {0, 0, 0, 0.006, 0.016, 0.026, 0.036, 0.046, 0, 0};
    const RunEvaluation run = evaluate_decisions("aged.csv", rec, verdicts(".....SS..."), 2);
    REQUIRE(run.truth.has_value());
    REQUIRE(run.truth->collisions.size() == 1);
    const auto& c = run.truth->collisions[0];
    CHECK(c.onset_index == 3);
    CHECK(c.onset_t == Approx(0.024));
    CHECK(c.delay == Approx(0.026));  // 0.05 - 0.024, against 0.02 from the first contact sample
    // A STOP at the very first contact sample is still 6 ms after the contact began.
    const RunEvaluation first = evaluate_decisions("aged.csv", rec, verdicts("...S......"), 2);
    CHECK(first.truth->collisions[0].delay == Approx(0.006));
}

TEST_CASE("clean cycles are counted and flagged when any STOP falls inside", "[evaluation]") {
    const Recording rec = tiny({0, 1, 1, 2, 2, 3, 3, 4}, {0, 0, 0, 0, 0, 0, 0, 0});
    const RunEvaluation run = evaluate_decisions("clean.csv", rec, verdicts("...S...."), 5);
    CHECK(run.clean_cycles == 3);
    CHECK(run.clean_cycles_flagged == 1);
    CHECK(run.truth->collisions.empty());
    CHECK(run.truth->false_stop_events == 1);
    CHECK_FALSE(run.truth->delay_median.has_value());
}

TEST_CASE("percentiles interpolate linearly", "[evaluation]") {
    CHECK(*percentile({4, 1, 3, 2}, 50) == Approx(2.5));
    CHECK(*percentile({1, 2, 3, 4, 5}, 95) == Approx(4.8));
    CHECK_FALSE(percentile({}, 50).has_value());
}

TEST_CASE("each rule is also counted alone, as the thesis's Table 3 does", "[evaluation]") {
    //            index:   0 1 2 3 4 5 6 7 8 9
    const Recording rec = tiny({0, 1, 1, 1, 2, 2, 2, 3, 3, 4}, {0, 0, 0, 0, 0, 1, 1, 0, 0, 0});
    std::vector<Decision> d(10);
    auto fire = [&](std::size_t i, Rule r) {
        d[i].verdict = Verdict::Stop;
        d[i].rule = r;
        d[i].fired = static_cast<std::uint8_t>(d[i].fired | (1u << static_cast<int>(r)));
    };
    fire(2, Rule::AbsoluteDifference);  // a clean cycle (1) flagged by rule 1 only
    fire(6, Rule::Eigenvalue);          // the collision (5-6) seen by rule 2 only
    const RunEvaluation run = evaluate_decisions("rules.csv", rec, d, 2);
    REQUIRE(run.by_rule.size() == 3);
    const auto& r1 = run.by_rule[0];
    const auto& r2 = run.by_rule[1];
    const auto& both = run.by_rule[2];
    CHECK(r1.name == "rule 1");
    CHECK(r1.clean_cycles_flagged == 1);
    CHECK(r1.detected == 0);
    CHECK(r2.clean_cycles_flagged == 0);
    CHECK(r2.detected == 1);
    CHECK(r2.delays.front() == Approx(0.01));
    CHECK(both.clean_cycles_flagged == 1);
    CHECK(both.detected == 1);
    CHECK(both.false_stop_events == 1);
    // Peak force 46 N (40 + index 6): the < 50 N bin.
    CHECK(both.bins[0].collisions == 1);
    CHECK(both.bins[0].detected == 1);
    CHECK(both.bins[3].collisions == 0);
}

TEST_CASE("rows the robot sent while held are not judged, and the detector starts afresh after them", "[evaluation][interruptions]") {
    const Profile& p = test::phase_profile();  // the default detector
    planar_arm::RunOptions opt;
    opt.cycles = 6;
    opt.seed = 77;
    const Recording clean = planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
    const auto cycles = clean.complete_cycles();
    REQUIRE(cycles.size() >= 3);
    // The robot stands held for 200 samples in the middle of a cycle where a STOP left it: the
    // signal and angles of the first held row, the clock running on.
    Recording held = clean;
    const std::size_t from = (cycles[1].begin + cycles[1].end) / 2;
    for (std::size_t i = from; i < from + 200; ++i) {
        held.mode[i] = kModeHeld;
        for (std::size_t j = 0; j < held.joints(); ++j) {
            held.tau[j][i] = clean.tau[j][from];
            held.q[j][i] = clean.q[j][from];
        }
    }
    Detector detector(p);
    const RunEvaluation clean_run = evaluate_detector("clean.csv", clean, detector);
    const RunEvaluation run = evaluate_detector("held.csv", held, detector);
    const auto in_hold = [&](const RunEvaluation& r) {
        return std::count_if(r.events.begin(), r.events.end(), [&](const StopEvent& e) { return e.index >= from && e.index < from + 200 + p.window; });
    };
    INFO("events: clean " << clean_run.events.size() << ", held " << run.events.size());
    CHECK(in_hold(clean_run) == 0);
    CHECK(in_hold(run) == 0);  // none in the held rows or while the fresh window fills after them
    CHECK(run.events.size() <= clean_run.events.size());
    // Judged as task data (the mode bit cleared), the standing robot is matched against its moving
    // reference: the default detector takes it for a rest (measured: no event either way), the
    // published rules stop in it — what the daemon's rule, and now the evaluation's, keeps out.
    Recording blind = held;
    std::fill(blind.mode.begin(), blind.mode.end(), 0u);
    CHECK(in_hold(evaluate_detector("blind.csv", blind, detector)) == 0);
    Detector published(test::planar_profile());
    const auto pub_held = evaluate_detector("held.csv", held, published), pub_blind = evaluate_detector("blind.csv", blind, published);
    INFO("published: held " << pub_held.events.size() << " (" << in_hold(pub_held) << " in the hold), blind " << pub_blind.events.size() << " (" << in_hold(pub_blind) << ")");
    CHECK(in_hold(pub_held) == 0);
    CHECK(in_hold(pub_blind) >= 1);
    // The same through decide_as_in_operation directly: held rows CONTINUE and one restart after them.
    std::size_t restarts = 0;
    const auto decisions = decide_as_in_operation(
        held, [&](const Sample& s) { return detector.update(s); }, [&] { ++restarts; detector.reset(); });
    CHECK(restarts == 1);
    for (std::size_t i = from; i < from + 200; ++i) REQUIRE_FALSE(decisions[i].stop());
}
