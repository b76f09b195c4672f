// Calibration of the thresholds, thesis §3.2.3, and the profile file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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

TEST_CASE("a rebuilt current sign round-trips through the profile, and a bad one is named", "[calibration][profile]") {
    Profile p = planar_profile();
    p.signal = SignalKind::Current;
    p.unit = SignalUnit::A;
    p.current_sign.assign(p.joints, std::vector<std::int8_t>(p.reference.size(), 1));
    p.current_sign[1][3] = -1;
    const std::string path = "profile_current_sign_test.json";
    save_profile(p, path);
    const Profile back = load_profile(path);
    CHECK(back.current_sign == p.current_sign);

    nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
    j["current_sign"][1][3] = 0;
    std::ofstream(path) << j.dump();
    CHECK_THROWS_WITH(load_profile(path), Catch::Contains("current_sign[1][3] is 0") && Catch::Contains("expected 1 or -1"));
    j["current_sign"][1][3] = 1;
    j["current_sign"][0].erase(0);
    std::ofstream(path) << j.dump();
    CHECK_THROWS_WITH(load_profile(path), Catch::Contains("current_sign[0]") && Catch::Contains("one per reference sample"));
    std::remove(path.c_str());
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
    j = to_json(planar_profile());
    j["reference"]["speed_override"] = 70;  // percent where a fraction belongs
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("reference speed_override is 70") && Catch::Contains("in (0, 1]"));
    j["reference"]["speed_override"] = 0.7;
    CHECK(profile_from_json(j).reference.speed_override == 0.7);
    CHECK_THROWS_WITH(load_profile("/nonexistent/profile.json"), Catch::Contains("/nonexistent/profile.json"));
}

// The phase-aware margin and CUSUM limit come from extreme-value fits to per-cycle maxima.
namespace {

// Exceedance probability of x for a mixture: with weight 1 - w a Gumbel(mu, beta) (an ordinary
// cycle's largest noise), with weight w u0 + Exp(scale) (the rare cycle with another cause).
double mixture_exceedance(double x, double w, double mu, double beta, double u0, double scale) {
    const double g = 1.0 - std::exp(-std::exp(-(x - mu) / beta));
    const double e = x > u0 ? std::exp(-(x - u0) / scale) : 1.0;
    return (1.0 - w) * g + w * e;
}

std::vector<double> mixture_draws(std::mt19937_64& rng, std::size_t n, double w, double mu, double beta, double u0,
                                  double scale) {
    std::uniform_real_distribution<double> unit(std::nextafter(0.0, 1.0), 1.0);
    std::vector<double> x(n);
    for (double& v : x) {
        const bool rare = unit(rng) < w;
        const double u = unit(rng);
        v = rare ? u0 - scale * std::log(u) : mu - beta * std::log(-std::log(u));
    }
    return x;
}

}  // namespace

TEST_CASE("the tail fit finds the quantile of an exponential tail that the Gumbel moments fit underestimates",
          "[calibration][phase-aware]") {
    // 20,000 maxima of 0.5 + Exp(0.25): exceeded once in 2,000 at 0.5 + 0.25 ln 2000 = 2.400.
    std::mt19937_64 rng(11);
    const auto x = mixture_draws(rng, 20000, 1.0, 0.0, 1.0, 0.5, 0.25);
    const double truth = 0.5 + 0.25 * std::log(2000.0);
    const ExtremeFit f = fit_cycle_maxima(x, 2000);
    CHECK(f.tail_exceedances == 4000);
    CHECK(f.tail_quantile == Approx(truth).epsilon(0.05));
    CHECK(f.tail_quantile >= truth);  // the scale at its upper bound: never optimistic here
    // The moments fit follows the bulk: about 2.12, the quantile of 1 in ~600 cycles.
    CHECK(f.gumbel_quantile < 0.92 * truth);
    CHECK(f.largest == *std::max_element(x.begin(), x.end()));
}

TEST_CASE("with a rare second cause in the maxima the combined limit is exceeded far less often than the Gumbel's",
          "[calibration][phase-aware]") {
    // 100 calibration cycles, 200 calibrations: the mean probability that a new cycle exceeds the
    // limit, against the target 1 / 2000.
    const double p = 1.0 / 2000, w = 0.05, mu = 0.6, beta = 0.08, u0 = 0.8, scale = 0.4;
    std::mt19937_64 rng(3);
    double gumbel_only = 0, combined = 0, pure_combined = 0, pure_gumbel = 0;
    const int trials = 200;
    for (int t = 0; t < trials; ++t) {
        const ExtremeFit f = fit_cycle_maxima(mixture_draws(rng, 100, w, mu, beta, u0, scale), 1 / p);
        CHECK(f.tail_exceedances == 20);
        gumbel_only += mixture_exceedance(std::max(f.gumbel_quantile, f.largest), w, mu, beta, u0, scale) / trials;
        combined += mixture_exceedance(std::max({f.gumbel_quantile, f.tail_quantile, f.largest}), w, mu, beta, u0, scale) / trials;
        const ExtremeFit g = fit_cycle_maxima(mixture_draws(rng, 100, 0.0, mu, beta, u0, scale), 1 / p);
        pure_gumbel += mixture_exceedance(std::max(g.gumbel_quantile, g.largest), 0.0, mu, beta, u0, scale) / trials;
        pure_combined +=
            mixture_exceedance(std::max({g.gumbel_quantile, g.tail_quantile, g.largest}), 0.0, mu, beta, u0, scale) / trials;
    }
    INFO("mixture: Gumbel only " << gumbel_only / p << " x target, combined " << combined / p << " x; pure Gumbel: "
                                 << pure_gumbel / p << " x, combined " << pure_combined / p << " x");
    // Gumbel alone: about 12 times the target; the tail fit halves it (it still cannot see a
    // 5 % cause well in 100 cycles: about 5 of them).
    CHECK(gumbel_only > 5 * p);
    CHECK(combined < 0.6 * gumbel_only);
    // Where the maxima are Gumbel the combined limit is conservative.
    CHECK(pure_combined <= p);
    CHECK(pure_combined <= pure_gumbel);
}

TEST_CASE("the extreme-value fit refuses too few maxima and an impossible target", "[calibration]") {
    CHECK_THROWS_WITH(fit_cycle_maxima({1.0}, 2000), Catch::Contains(">= 2 per-cycle maxima, got 1"));
    CHECK_THROWS_WITH(fit_cycle_maxima({1.0, 2.0}, 1.0), Catch::Contains("must be > 1, got 1"));
    // Ten cycles (the least the wizard accepts): nine of them make the tail.
    const ExtremeFit f = fit_cycle_maxima({0.5, 0.6, 0.7, 0.55, 0.65, 0.8, 0.62, 0.58, 0.71, 0.9}, 2000);
    CHECK(f.tail_exceedances == 9);
    CHECK(f.tail_threshold == 0.5);
    CHECK(f.tail_quantile > f.largest);
}

namespace {

// The planar arm's pick-and-place placing at `places` places in turn (cycle c at place c % places).
planar_arm::TaskOptions placing_at(std::size_t places) {
    planar_arm::TaskOptions task = planar_arm::default_task();
    task.varying_index = 4;  // the place waypoint
    for (std::size_t k = 0; k < places; ++k) {
        std::vector<double> q = task.waypoints[4].q;
        q[0] -= 0.25 * static_cast<double>(k);  // each place 0.25 rad lower at the shoulder
        q[1] += 0.15 * static_cast<double>(k);
        task.variants.push_back(q);
    }
    return task;
}

Recording run_of(const planar_arm::TaskOptions& task, std::size_t cycles, std::uint64_t seed) {
    planar_arm::RunOptions opt;
    opt.cycles = cycles;
    opt.seed = seed;
    return planar_arm::simulate(planar_arm::default_arm(), task, opt);
}

}  // namespace

TEST_CASE("automatic reference cycles: the fewest that cover every variant of the task", "[calibration][coverage]") {
    const auto task = placing_at(4);
    const Recording ref = run_of(task, 6, 41), nominal = run_of(task, 12, 42);
    const NamedRecording named[] = {{"nominal.csv", &nominal}};

    const ReferenceCoverage automatic = choose_reference_cycles({"ref.csv", &ref}, named, 0);
    CHECK(automatic.automatic);
    CHECK(automatic.available_cycles == 6);
    CHECK(automatic.reference_cycles == 4);  // cycles 0-3: the four places
    CHECK(automatic.cycles == 12);
    CHECK(automatic.uncovered == 0);
    CHECK(automatic.worst_distance <= automatic.tolerance);
    CHECK_THAT(automatic.note, Catch::Contains("cover all 12 nominal cycles") && Catch::Contains("the fewest that do"));

    // Two given cycles hold places 0 and 1 only: the nominal cycles at places 2 and 3 are not covered.
    const ReferenceCoverage two = choose_reference_cycles({"ref.csv", &ref}, named, 2);
    CHECK_FALSE(two.automatic);
    CHECK(two.reference_cycles == 2);
    CHECK(two.uncovered == 6);
    // Place 3 is 0.5 rad from place 1 at the shoulder; the reference's path passes nearer on other ways.
    CHECK(two.worst_distance > 4 * two.tolerance);
    CHECK(two.worst_distance <= 0.5 + 1e-9);
    CHECK((two.worst_joint >= 1 && two.worst_joint <= 3));
    CHECK_THAT(two.worst_cycle, Catch::Contains("nominal.csv, cycle"));
    CHECK_THAT(two.note, Catch::Contains("6 of 12 nominal cycles") && Catch::Contains("variants the reference lacks"));

    // A reference recording with fewer cycles than places cannot cover them: all of it, and why.
    const Recording short_ref = run_of(task, 3, 43);
    const ReferenceCoverage best = choose_reference_cycles({"short.csv", &short_ref}, named, 0);
    CHECK(best.reference_cycles == 3);
    CHECK(best.uncovered == 3);
    CHECK_THAT(best.note, Catch::Contains("Record a reference with every variant"));

    // The daemon's single recording: the first cycles become the reference, the rest stay nominal.
    const Recording one = run_of(task, 16, 44);
    const ReferenceCoverage same = choose_reference_cycles({"one.csv", &one}, {}, 0, true, 10);
    CHECK(same.reference_cycles == 4);
    CHECK(same.cycles == 12);
    CHECK(same.uncovered == 0);

    CHECK_THROWS_WITH(choose_reference_cycles({"short.csv", &short_ref}, named, 5), Catch::Contains("short.csv") && Catch::Contains("needs 5"));
}

TEST_CASE("calibration takes the covering reference by default and says so in the profile", "[calibration][coverage]") {
    const auto task = placing_at(3);
    const Recording ref = run_of(task, 5, 51), nominal = run_of(task, 12, 52);
    const NamedRecording named[] = {{"nominal.csv", &nominal}};
    CalibrationOptions opt;
    opt.window = 20;
    opt.detector = DetectorKind::Published;  // the reference's choice does not depend on the detector
    const Profile p = calibrate({"ref.csv", &ref}, named, opt);
    CHECK(p.reference.cycles.size() == 3);
    const auto& coverage = p.calibration.at("reference_coverage");
    CHECK(coverage.at("automatic").get<bool>());
    CHECK(coverage.at("reference_cycles").get<int>() == 3);
    CHECK(coverage.at("uncovered").get<int>() == 0);
    opt.reference_cycles = 2;
    const Profile given = calibrate({"ref.csv", &ref}, named, opt);
    CHECK(given.reference.cycles.size() == 2);
    CHECK(given.calibration.at("reference_coverage").at("uncovered").get<int>() == 4);  // the 4 cycles at the third place
}

TEST_CASE("the split halves hold every kind of cycle of a task that cycles through variants", "[calibration][coverage]") {
    // Cycles of a task with p variants in turn: cycle c is variant c % p. Each half must hold
    // cycles of every variant, about as many as the other half (even/odd cycles would put variants
    // 0 and 2 of 4 into one half only).
    const auto halves = calibration_halves(100);
    REQUIRE(halves.size() == 100);
    CHECK(std::count(halves.begin(), halves.end(), 1) == 50);
    for (std::size_t period = 2; period <= 8; ++period) {
        for (std::size_t variant = 0; variant < period; ++variant) {
            std::size_t in[2] = {0, 0};
            for (std::size_t c = variant; c < 100; c += period) ++in[halves[c]];
            INFO("period " << period << ", variant " << variant << ": " << in[0] << " / " << in[1]);
            CHECK(static_cast<double>(in[0]) >= 0.4 * static_cast<double>(in[0] + in[1]));
            CHECK(static_cast<double>(in[1]) >= 0.4 * static_cast<double>(in[0] + in[1]));
        }
    }
    CHECK(calibration_halves(10).size() == 10);
    CHECK(calibration_halves(0).empty());
}

namespace {

// One cycle of a synthetic reference: a move out (joint 1 from 0 to 1 rad, joint 2 up and down by
// `bump` rad), a rest of `rest` samples whose torque on joint 2 holds 3 Nm until `release` samples
// before its end and then drops to 0 (a tool released while the arm stands), and a move back.
void add_cycle(Reference& ref, std::size_t move, std::size_t rest, std::size_t release, double bump) {
    const auto sample = [&](double q1, double q2, double tau2) {
        ref.t.push_back(0.004 * static_cast<double>(ref.t.size()));
        ref.q[0].push_back(q1);
        ref.q[1].push_back(q2);
        ref.tau[0].push_back(2.0 * std::cos(q1));
        ref.tau[1].push_back(tau2 + 0.5 * q2);
    };
    for (std::size_t k = 0; k < move; ++k) {
        const double phase = static_cast<double>(k) / static_cast<double>(move);
        sample(phase, bump * std::sin(M_PI * phase), 0.0);
    }
    for (std::size_t k = 0; k < rest; ++k) sample(1.0, 0.0, k + release < rest ? 3.0 : 0.0);
    for (std::size_t k = 0; k < move; ++k) sample(1.0 - static_cast<double>(k) / static_cast<double>(move), 0.0, 0.0);
}

}  // namespace

TEST_CASE("the reference's cycles are aligned phase by phase, where they pass the same poses", "[calibration][phase-aware]") {
    // Three cycles at different speeds with rests of different lengths; the third takes another
    // way out (joint 2 bulges 0.4 rad).
    Reference ref;
    ref.q.resize(2);
    ref.tau.resize(2);
    const std::vector<std::size_t> bounds = {0, 300, 300 + 380, 300 + 380 + 330};
    add_cycle(ref, 100, 100, 30, 0.0);  // samples 0-299: release at 170, back from 200
    add_cycle(ref, 130, 120, 40, 0.0);  // 300-679: release at 300 + 210, back from 300 + 250
    add_cycle(ref, 110, 110, 35, 0.4);  // 680-1009: release at 680 + 185, back from 680 + 220
    REQUIRE(ref.size() == bounds.back());
    const CycleTwins twins = align_reference_cycles(ref, bounds, 0.05);
    REQUIRE(twins.cycles == 3);
    const auto twin = [&](std::size_t p, std::size_t c) {
        return std::pair<long, long>(twins.lo[p * 3 + c], twins.hi[p * 3 + c]);
    };
    // Each sample is its own twin in its own cycle.
    CHECK(twin(150, 0) == std::pair<long, long>(150, 150));
    CHECK(twin(700, 2) == std::pair<long, long>(700, 700));
    // Every twin stands within the tolerance of the sample on every joint.
    std::size_t pairs = 0;
    for (std::size_t p = 0; p < ref.size(); ++p) {
        for (std::size_t c = 0; c < 3; ++c) {
            const auto [lo, hi] = twin(p, c);
            for (long s = lo; s <= hi; ++s) {
                ++pairs;
                for (std::size_t j = 0; j < 2; ++j) CHECK(std::abs(ref.q[j][p] - ref.q[j][static_cast<std::size_t>(s)]) <= 0.05);
            }
        }
    }
    CHECK(pairs > ref.size());
    // The move out, at the same fraction of it in cycles 1 and 2 (a sample apart at these speeds).
    const auto [lo_mid, hi_mid] = twin(50, 1);  // halfway out in cycle 1: 300 + 65
    CHECK(lo_mid <= 300 + 66);
    CHECK(hi_mid >= 300 + 64);
    CHECK(hi_mid - lo_mid <= 3);
    // The release, a torque step while the arm stands: placed on the other cycles' release.
    const auto [lo_rel, hi_rel] = twin(170, 1);
    CHECK(lo_rel <= 300 + 210);
    CHECK(hi_rel >= 300 + 210);
    CHECK(twin(300 + 210, 0).first <= 170);
    CHECK(twin(300 + 210, 0).second >= 170);
    // The third cycle's way out bulges farther than the tolerance: halfway out has no twin there,
    // while its rest and its way back do.
    const auto [lo_far, hi_far] = twin(50, 2);
    CHECK(lo_far > hi_far);
    CHECK(twin(680 + 55, 0).first > twin(680 + 55, 0).second);
    CHECK(twin(250, 2).first <= twin(250, 2).second);  // cycle 0 halfway back
    const auto [lo_rel2, hi_rel2] = twin(170, 2);
    CHECK(lo_rel2 <= 680 + 185);
    CHECK(hi_rel2 >= 680 + 185);
    CHECK(twins.aligned < ref.size());
    CHECK(twins.largest_pose_distance > 0.3);
    // One cycle: nothing to align.
    CHECK(align_reference_cycles(ref, {0, 300}, 0.05).empty());
}

TEST_CASE("a pose passed the other way in another reference cycle is no twin", "[calibration][phase-aware]") {
    // Cycle 0 goes out (joint 1 from 0 to 1 rad) and back, then rests; cycle 1 goes out, halfway
    // back, out again and back. The alignment (both ends anchored) takes cycle 1's way halfway
    // back along cycle 0's way back, so its second way out runs against cycle 0's way back where
    // both pass 0.5 rad. Joint 1's torque carries a friction of +-1 Nm by the direction of motion,
    // as a real joint's does: samples there are the same pose, not the same phase.
    Reference ref;
    ref.q.resize(2);
    ref.tau.resize(2);
    const auto leg = [&](double from, double to, std::size_t samples) {
        for (std::size_t k = 0; k < samples; ++k) {
            const double q = from + (to - from) * static_cast<double>(k) / static_cast<double>(samples);
            ref.t.push_back(0.004 * static_cast<double>(ref.t.size()));
            ref.q[0].push_back(q);
            ref.q[1].push_back(0.2);
            ref.tau[0].push_back(2.0 * std::cos(q) + (to > from ? 1.0 : (to < from ? -1.0 : 0.0)));
            ref.tau[1].push_back(0.5);
        }
    };
    leg(0.0, 1.0, 100), leg(1.0, 0.0, 100), leg(0.0, 0.0, 100);                   // cycle 0: 0-299
    leg(0.0, 1.0, 100), leg(1.0, 0.5, 50), leg(0.5, 1.0, 50), leg(1.0, 0.0, 100);  // cycle 1: 300-599
    const std::vector<std::size_t> bounds = {0, 300, 600};
    REQUIRE(ref.size() == bounds.back());
    const CycleTwins twins = align_reference_cycles(ref, bounds, 0.05);
    REQUIRE(twins.cycles == 2);
    const auto twin_of = [&](std::size_t p, std::size_t c) { return std::pair<long, long>(twins.lo[p * 2 + c], twins.hi[p * 2 + c]); };
    // Some aligned pairs within the pose tolerance moved the other way and were left out.
    CHECK(twins.opposite > 0);
    // Every sample of cycle 0 within the pose tolerance in a cycle 1 sample's twin span passes the
    // pose the same way (samples within 3 of a turn, whose fitted velocity is near 0,
    // are not judged).
    const auto direction = [](std::size_t k) {  // +1 out, -1 back, 0 rest or near a turn
        static const std::size_t starts[] = {0, 100, 200, 300, 400, 450, 500, 600};
        static const int way[] = {1, -1, 0, 1, -1, 1, -1};
        for (std::size_t l = 0; l + 1 < std::size(starts); ++l) {
            if (k >= starts[l] && k < starts[l + 1]) return k < starts[l] + 3 || k + 3 >= starts[l + 1] ? 0 : way[l];
        }
        return 0;
    };
    std::size_t judged = 0;
    for (std::size_t p = 300; p < ref.size(); ++p) {
        const auto [lo, hi] = twin_of(p, 0);
        for (long t = lo; t <= hi; ++t) {
            const auto s = static_cast<std::size_t>(t);
            if (std::abs(ref.q[0][p] - ref.q[0][s]) > 0.05 || direction(p) == 0 || direction(s) == 0) continue;
            INFO("cycle 1 sample " << p << ", twin " << s);
            CHECK(direction(p) == direction(s));
            ++judged;
        }
    }
    CHECK(judged > 100);
    // Passed the same way, the same phase: halfway out (sample 50) and halfway back along the
    // first way back (sample 125, 0.75 rad) have their twins in cycle 1's.
    CHECK(twin_of(50, 1).first <= 350 + 1);
    CHECK(twin_of(50, 1).second >= 350 - 1);
    CHECK(twin_of(125, 1).first <= 425 + 1);
    CHECK(twin_of(125, 1).second >= 425 - 1);
}

TEST_CASE("long reference cycles are aligned on every few samples, each sample still with its twins", "[calibration][phase-aware]") {
    // Cycles of 6,000 and 7,600 samples: 45.6 M pairs, over the 16 M the alignment stores, so it
    // takes every 2nd sample.
    Reference ref;
    ref.q.resize(2);
    ref.tau.resize(2);
    add_cycle(ref, 2000, 2000, 600, 0.0);  // 0-5999: release at 3400
    add_cycle(ref, 2600, 2400, 800, 0.0);  // 6000-13599: release at 6000 + 4200
    const std::vector<std::size_t> bounds = {0, 6000, 13600};
    REQUIRE(ref.size() == bounds.back());
    const CycleTwins twins = align_reference_cycles(ref, bounds, 0.05);
    REQUIRE(twins.cycles == 2);
    CHECK(twins.aligned == ref.size());  // the same path: every sample has a twin in the other cycle
    const auto lo = [&](std::size_t p, std::size_t c) { return static_cast<long>(twins.lo[p * 2 + c]); };
    const auto hi = [&](std::size_t p, std::size_t c) { return static_cast<long>(twins.hi[p * 2 + c]); };
    CHECK(lo(3400, 1) <= 6000 + 4200 + 2);
    CHECK(hi(3400, 1) >= 6000 + 4200 - 2);
    CHECK(lo(6000 + 4200, 0) <= 3400 + 2);
    CHECK(hi(6000 + 4200, 0) >= 3400 - 2);
    // Halfway out: 1000 against 6000 + 1300, within the stride.
    CHECK(lo(1000, 1) <= 6000 + 1302);
    CHECK(hi(1000, 1) >= 6000 + 1298);
    CHECK(hi(1000, 1) - lo(1000, 1) <= 5);
    CHECK(hi(1001, 1) - lo(1001, 1) <= 5);
}

TEST_CASE("reference cycle bounds that do not rise within the reference are refused", "[calibration][phase-aware]") {
    Reference ref;
    ref.q.resize(2);
    ref.tau.resize(2);
    add_cycle(ref, 100, 100, 30, 0.0);
    CHECK_THROWS_WITH(align_reference_cycles(ref, {0, 150, 120}, 0.05), Catch::Contains("bound 2 is 120 after 150"));
    CHECK_THROWS_WITH(align_reference_cycles(ref, {0, 150, 301}, 0.05), Catch::Contains("300 samples"));
    CHECK_THROWS_WITH(align_reference_cycles(ref, {0, 150, 300}, 0.0), Catch::Contains("tolerance must be > 0"));
    CHECK(align_reference_cycles(ref, {0, 150, 300}, 0.05).cycles == 2);
}

namespace {

// `rec` with rows [from, from + count) replaced by a robot standing held where row `from` left it
// (mode bits held + self-stop, the signal and angles of row `from`, the clock and the sequence
// running on), as the daemon records a robot that stopped itself mid-cycle until an operator resumed.
Recording with_hold(const Recording& rec, std::size_t from, std::size_t count) {
    Recording out = rec;
    for (std::size_t i = from; i < from + count; ++i) {
        out.mode[i] = kModeHeld | kModeSelfStop;
        for (std::size_t j = 0; j < rec.joints(); ++j) {
            out.tau[j][i] = rec.tau[j][from];
            out.q[j][i] = rec.q[j][from];
        }
    }
    return out;
}

// `rec` without rows [from, from + count): samples lost on the way, the sequence numbers jumping.
Recording without_rows(const Recording& rec, std::size_t from, std::size_t count) {
    Recording out = rec.slice(0, from);
    std::vector<double> tau(rec.joints()), q(rec.joints());
    for (std::size_t i = from + count; i < rec.size(); ++i) out.append(rec.sample(i, tau, q));
    return out;
}

}  // namespace

TEST_CASE("a recording interrupted by a hold or lost samples is calibrated on its unbroken runs", "[calibration][interruptions]") {
    const auto task = planar_arm::default_task();
    const Recording clean = run_of(task, 16, 61);
    const auto cycles = clean.complete_cycles();
    REQUIRE(cycles.size() >= 14);
    // Held for 150 samples in the middle of the second complete cycle; 20 samples lost in the tenth.
    const std::size_t hold_at = (cycles[1].begin + cycles[1].end) / 2, lost_at = (cycles[9].begin + cycles[9].end) / 2;
    const Recording held = with_hold(clean, hold_at, 150);
    const Recording rec = without_rows(held, lost_at, 20);

    const UnbrokenRuns runs = rec.unbroken_runs();
    REQUIRE(runs.interruptions.size() == 2);
    CHECK(runs.interruptions[0].begin == hold_at);
    CHECK(runs.interruptions[0].end == hold_at + 150);
    CHECK_THAT(runs.interruptions[0].what, Catch::Contains("robot held for 150 samples") && Catch::Contains("its own reply timeout"));
    CHECK(runs.interruptions[1].begin == lost_at);
    CHECK(runs.interruptions[1].end == lost_at);
    CHECK_THAT(runs.interruptions[1].what, Catch::Contains("20 samples missing"));
    REQUIRE(runs.runs.size() == 3);
    CHECK(runs.runs[0] == std::pair<std::size_t, std::size_t>{0, hold_at});
    CHECK(runs.runs[1] == std::pair<std::size_t, std::size_t>{hold_at + 150, lost_at});
    CHECK(runs.runs[2] == std::pair<std::size_t, std::size_t>{lost_at, rec.size()});
    // A clean recording is one run; a counter that wraps where the protocol's does is no break.
    CHECK(clean.unbroken_runs().interruptions.empty());
    Recording wrapped = clean.slice(0, 10);
    for (std::size_t i = 0; i < wrapped.size(); ++i) wrapped.seq[i] = i < 5 ? 0x7fffffffLL - 4 + static_cast<std::int64_t>(i) : static_cast<std::int64_t>(i) - 5;
    CHECK(wrapped.unbroken_runs().interruptions.empty());
    wrapped.t[7] = wrapped.t[6];  // a coarse clock repeating a value: no break
    CHECK(wrapped.unbroken_runs().interruptions.empty());
    wrapped.t[7] = wrapped.t[6] - 1.0;
    CHECK_THAT(wrapped.unbroken_runs().interruptions.at(0).what, Catch::Contains("goes back"));

    // The daemon's single recording as the reference and the nominal data (2 reference cycles).
    CalibrationOptions opt;
    opt.window = 20;
    opt.detector = DetectorKind::Published;
    opt.reference_cycles = 2;
    const Recording nominal = run_of(task, 12, 62);
    const NamedRecording named[] = {{"nominal.csv", &rec}, {"more.csv", &nominal}};
    const Profile p = calibrate({"rec.csv", &rec}, named, opt);
    // The first run holds one complete cycle only: the reference is the first two of the second run,
    // and none of its rows was held.
    const auto second = rec.slice(runs.runs[1].first, runs.runs[1].second).complete_cycles();
    CHECK(p.reference.first_sample == runs.runs[1].first + second[0].begin);
    CHECK(p.reference.size() == second[0].size() + second[1].size());
    for (std::size_t i = p.reference.first_sample; i < p.reference.first_sample + p.reference.size(); ++i) REQUIRE(rec.mode[i] == 0);
    const auto& record = p.calibration.at("interruptions");
    CHECK(record.at("list").size() == 4);  // rec.csv's two, as the reference and as "nominal.csv"
    CHECK(record.at("reference_run") == nlohmann::json::array({runs.runs[1].first, runs.runs[1].second}));
    CHECK_THAT(record.at("note").get<std::string>(), Catch::Contains("rows ") && Catch::Contains("unbroken run(s)"));
    // The thresholds are those of the unbroken runs given one by one.
    const Recording ref_run = rec.slice(runs.runs[1].first, runs.runs[1].second);
    std::vector<Recording> pieces;
    for (const auto& [b, e] : runs.runs) pieces.push_back(rec.slice(b, e));
    const NamedRecording by_hand[] = {{"a", &pieces[0]}, {"b", &pieces[1]}, {"c", &pieces[2]}, {"more.csv", &nominal}};
    const Profile q = calibrate({"rec.csv", &ref_run}, by_hand, opt);
    for (std::size_t j = 0; j < p.joints; ++j) {
        CHECK(p.thresholds[j].rule1.value == q.thresholds[j].rule1.value);
        CHECK(p.thresholds[j].rule2.value == q.thresholds[j].rule2.value);
    }
    // Taken as task data (the mode bits cleared), the standing robot and the jump would pass into the
    // statistics: the thresholds come out wider.
    Recording blind = rec;
    std::fill(blind.mode.begin(), blind.mode.end(), 0u);
    std::iota(blind.seq.begin(), blind.seq.end(), std::int64_t{0});
    const NamedRecording blind_named[] = {{"nominal.csv", &blind}, {"more.csv", &nominal}};
    const Profile b = calibrate({"rec.csv", &blind}, blind_named, opt);
    CHECK(b.reference.first_sample == cycles[0].begin);  // the held cycle inside the reference
    double wider = 0;
    for (std::size_t j = 0; j < p.joints; ++j) {
        INFO("joint " << j + 1 << ": theta1 " << p.thresholds[j].rule1.value << " vs " << b.thresholds[j].rule1.value << ", theta2 "
                      << p.thresholds[j].rule2.value << " vs " << b.thresholds[j].rule2.value);
        wider = std::max(wider, b.thresholds[j].rule2.value / p.thresholds[j].rule2.value);
    }
    // Measured: theta2 4.9x (joint 1) and 2.3x (joint 2) as wide, joint 3 0.91x (another reference).
    CHECK(wider > 2);

    // Automatic reference cycles: cut from the run with the most complete cycles (the first run
    // holds 1).
    std::size_t most = 0, most_begin = 0;
    for (const auto& [first, end] : runs.runs) {
        const std::size_t c = rec.slice(first, end).complete_cycles().size();
        if (c > most) most = c, most_begin = first;
    }
    CHECK(reference_run({"rec.csv", &rec}, runs, 0) == *std::find_if(runs.runs.begin(), runs.runs.end(), [&](const auto& r) { return r.first == most_begin; }));
    CHECK(reference_run({"rec.csv", &rec}, runs, 2, 1) == runs.runs[1]);  // the first with 2 + 1
    // No run with enough cycles: refused, naming the file and the interruptions.
    opt.reference_cycles = 9;
    CHECK_THROWS_WITH(calibrate({"rec.csv", &rec}, named, opt), Catch::Contains("rec.csv") && Catch::Contains("one unbroken stretch") &&
                                                                    Catch::Contains("robot held for 150 samples"));
}
