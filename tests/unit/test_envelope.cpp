// The envelope method of thesis §3.1.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "warpguard/envelope.hpp"

using namespace warpguard;

namespace {

// A periodic torque with a fast edge; every cycle is sampled with a slightly different number of
// samples, as by an irregular background task.
double shape(double x) { return 20.0 * std::tanh(12.0 * std::sin(2.0 * M_PI * x)) + 5.0 * std::cos(4.0 * M_PI * x); }

Recording periodic(const std::vector<std::size_t>& lengths, double noise, std::uint64_t seed) {
    RecordingInfo info;
    info.unit = SignalUnit::Percent;
    Recording rec(2, info);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n(0.0, noise);
    double t = 0;
    std::int64_t seq = 0;
    for (std::size_t c = 0; c < lengths.size(); ++c) {
        // The first and last runs are cut from 100-sample cycles: the recording starts in the
        // middle of a cycle and stops in the middle of one.
        const bool first = c == 0, last = c + 1 == lengths.size();
        const std::size_t length = first || last ? 100 : lengths[c];
        const std::size_t offset = first ? 100 - lengths[c] : 0;
        for (std::size_t k = offset; k < offset + lengths[c]; ++k) {
            const double x = static_cast<double>(k) / static_cast<double>(length);
            const double tau[2] = {shape(x) + n(rng), 0.5 * shape(x + 0.25) + n(rng)};
            const double q[2] = {0, 0};
            rec.append(Sample{t, seq++, static_cast<std::int64_t>(c), 0, tau, q});
            t += 0.008;
        }
    }
    return rec;
}

}  // namespace

TEST_CASE("envelope limits: period, shift and limits derived from recorded cycles", "[envelope]") {
    // First and last runs are partial; 10 complete cycles of 96..104 samples.
    const std::vector<std::size_t> lengths{50, 100, 96, 104, 99, 101, 97, 103, 100, 98, 102, 60};
    const Recording rec = periodic(lengths, 0.05, 3);
    const EnvelopeLimits lim = derive_envelope(rec, "cycles.csv", {});
    CHECK(lim.cycles == 10);
    CHECK(lim.period == 100);  // integer closest to the mean complete-cycle length (§3.1.3)
    CHECK(lengths[1 + lim.representative_cycle] == 100);
    // The features of a 104-sample cycle lie up to ~4 samples away from the representative's.
    CHECK(lim.cycle_shifts.size() == 9);
    const auto seen = *std::max_element(lim.cycle_shifts.begin(), lim.cycle_shifts.end());
    CHECK(seen >= 2);
    CHECK(seen <= 6);
    CHECK(lim.shift >= seen);
    CHECK(lim.shift <= 12);
    for (const auto& env : lim.joints) {
        for (std::size_t k = 0; k < lim.period; ++k) REQUIRE(env.upper[k] >= env.lower[k]);
        CHECK(env.tolerance > 0.0);
        CHECK(env.max_step >= 1.2 * env.step_max_seen);
        // Robust estimate of the added noise (0.05); the steep edges bias it up a little.
        CHECK(env.noise > 0.04);
        CHECK(env.noise < 0.075);
    }
}

TEST_CASE("envelope limits leave out the cycles in which the robot stood held or samples were lost", "[envelope][interruptions]") {
    const std::vector<std::size_t> lengths{50, 100, 96, 104, 99, 101, 97, 103, 100, 98, 102, 60};
    const Recording clean = periodic(lengths, 0.05, 3);
    const auto cycles = clean.complete_cycles();
    REQUIRE(cycles.size() == 10);
    // Cycle 3 (the fourth complete one) stood held for 30 samples at the value of its first held
    // sample, as a robot stopped by its own reply timeout; 5 samples of cycle 7 never arrived.
    Recording rec = clean;
    const std::size_t hold = cycles[3].begin + 40;
    for (std::size_t i = hold; i < hold + 30; ++i) {
        rec.mode[i] = kModeHeld | kModeSelfStop;
        for (std::size_t j = 0; j < 2; ++j) rec.tau[j][i] = rec.tau[j][hold];
    }
    const std::size_t lost = cycles[7].begin + 20;
    for (std::size_t i = lost; i < rec.size(); ++i) rec.seq[i] += 5;
    const auto kept = rec.unbroken_cycles();
    REQUIRE(kept.size() == 8);
    CHECK(std::none_of(kept.begin(), kept.end(), [&](const CycleSpan& c) { return c.begin == cycles[3].begin || c.begin == cycles[7].begin; }));
    const EnvelopeLimits lim = derive_envelope(rec, "held.csv", {});
    CHECK(lim.cycles == 8);
    // The held rows are not in the limits: the envelope is the same whatever they hold.
    Recording wild = rec;
    for (std::size_t i = hold; i < hold + 30; ++i) wild.tau[0][i] = 500.0;
    const EnvelopeLimits same = derive_envelope(wild, "held.csv", {});
    CHECK(same.joints[0].upper == lim.joints[0].upper);
    Recording blind = wild;
    std::fill(blind.mode.begin(), blind.mode.end(), 0u);
    CHECK(derive_envelope(blind, "blind.csv", {}).cycles == 9);  // without the mode bits: taken as a cycle of the task
    // Too few unbroken cycles: refused, saying how many were interrupted.
    Recording few = clean.slice(0, cycles[2].end + 1);  // complete cycles 0-2
    few.mode[cycles[1].begin + 3] = kModeHeld;
    few.mode[cycles[2].begin + 3] = kModeHeld;
    CHECK_THROWS_WITH(derive_envelope(few, "few.csv", {}), Catch::Contains("found 1") && Catch::Contains("2 more interrupted"));
}

TEST_CASE("the envelope checker passes the recorded cycles and stops on a deviation", "[envelope]") {
    const std::vector<std::size_t> lengths{50, 100, 96, 104, 99, 101, 97, 103, 100, 98, 102, 60};
    const Recording rec = periodic(lengths, 0.05, 3);
    const EnvelopeLimits lim = derive_envelope(rec, "cycles.csv", {});
    EnvelopeChecker checker(lim);
    std::vector<double> tau(2), q(2);
    std::size_t stops = 0;
    for (std::size_t i = 0; i < rec.size(); ++i) stops += checker.update(rec.sample(i, tau, q)).stop();
    CHECK(stops == 0);
    CHECK(checker.armed());

    // Fresh cycles of the same process (other noise, other lengths) also pass ...
    const Recording fresh = periodic({30, 99, 101, 100, 97, 103, 20}, 0.05, 99);
    checker.reset();
    stops = 0;
    for (std::size_t i = 0; i < fresh.size(); ++i) stops += checker.update(fresh.sample(i, tau, q)).stop();
    CHECK(stops == 0);

    // ... and a push of 8 % on joint 2 in the middle of a cycle is caught at once.
    Recording hit = fresh;
    const std::size_t at = 30 + 99 + 40;
    for (std::size_t k = at; k < at + 20; ++k) hit.tau[1][k] += 8.0;
    checker.reset();
    std::optional<std::size_t> first;
    Decision first_decision;
    for (std::size_t i = 0; i < hit.size(); ++i) {
        const Decision d = checker.update(hit.sample(i, tau, q));
        if (d.stop() && !first) {
            first = i;
            first_decision = d;
        }
    }
    REQUIRE(first.has_value());
    CHECK(*first == at);
    CHECK(first_decision.joint == 2);
}

TEST_CASE("the envelope checker: neighbour-difference rule, trigger and arming", "[envelope]") {
    EnvelopeLimits lim;
    lim.period = 4;
    JointEnvelope env;
    env.upper = {10, 10, 20, 10};
    env.lower = {-10, -10, 15, -10};
    env.tolerance = 0.0;
    env.max_step = 1.0;
    lim.joints = {env};
    EnvelopeChecker checker(lim);
    auto feed = [&](std::int64_t cycle, double x) {
        const double tau[1] = {x};
        const double q[1] = {0};
        return checker.update(Sample{0, 0, cycle, 0, tau, q});
    };
    // Before the first cycle start nothing is checked (as on the robot).
    CHECK_FALSE(feed(0, 100.0).stop());
    CHECK_FALSE(checker.armed());
    // Trigger: phase 0 at the counter change.
    CHECK(feed(1, 0.0).rule == Rule::NeighbourDifference);  // 100 -> 0 is a step of 100 > 1
    CHECK(checker.phase() == 0);
    CHECK_FALSE(feed(1, 0.5).stop());
    const Decision low = feed(1, 1.0);  // phase 2 needs 15..20
    CHECK(low.rule == Rule::EnvelopeLimit);
    CHECK(low.threshold == 15.0);
    CHECK(checker.phase() == 2);
    CHECK_FALSE(feed(1, 1.5).stop());   // phase 3
    CHECK_FALSE(feed(1, 2.0).stop());   // cycle longer than N: wraps to phase 0
    CHECK(checker.phase() == 0);
    CHECK_FALSE(feed(2, 2.5).stop());   // next trigger restarts at phase 0
    CHECK(checker.phase() == 0);
    const Decision jump = feed(2, 4.0);
    CHECK(jump.rule == Rule::NeighbourDifference);
    CHECK(jump.value == Approx(1.5));
}

TEST_CASE("envelope limits round-trip through JSON", "[envelope]") {
    const Recording rec = periodic({50, 100, 96, 104, 99, 60}, 0.05, 4);
    const EnvelopeLimits lim = derive_envelope(rec, "cycles.csv", {});
    const EnvelopeLimits back = envelope_from_json(to_json(lim));
    CHECK(back.period == lim.period);
    CHECK(back.shift == lim.shift);
    CHECK(back.joints[1].upper == lim.joints[1].upper);
    CHECK(back.joints[0].tolerance == lim.joints[0].tolerance);
    CHECK_THROWS_WITH(derive_envelope(rec.slice(0, 200), "short.csv", {}),
                      Catch::Contains("short.csv") && Catch::Contains(">= 2 complete cycles"));
}
