// The model-based residual, the reference method of model_residual.hpp, on the planar arm.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "test_data.hpp"
#include "warpguard/dynamics.hpp"
#include "warpguard/model_residual.hpp"

using namespace warpguard;

namespace {

const Eigen::Vector3d kPlanarGravity(0, -9.81, 0);

// The planar arm's own dynamics, fitted on its 14-cycle nominal run (it carries nothing).
const ArmDynamics& planar_arm_model() {
    static const ArmDynamics arm = [] {
        const Recording* runs[] = {&test::long_nominal_recording()};
        return fit_arm_dynamics(planar_arm::default_arm().dh_model(), runs, kPlanarGravity);
    }();
    return arm;
}

PayloadModel planar_payload_model() {
    PayloadModel pm;
    pm.model = planar_arm::default_arm().dh_model();
    pm.gravity = kPlanarGravity;
    pm.signal_per_nm.assign(pm.model.dof(), 1.0);
    return pm;
}

// Runs the checker over a recording as in operation (a fresh stream, reset after every stop) and
// returns the indices of its stop decisions.
std::vector<std::size_t> stops(ResidualChecker& checker, const Recording& rec) {
    checker.reset();
    std::vector<double> tau(rec.joints()), q(rec.joints());
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        const Decision d = checker.update(rec.sample(i, tau, q));
        if (d.stop()) {
            out.push_back(i);
            checker.reset();
        }
    }
    return out;
}

}  // namespace

TEST_CASE("the residual band is the calibration's least and largest residual widened about their centre", "[residual]") {
    const Recording& calibration = test::nominal_recording();
    const ResidualLimits lim = derive_residual_limits(planar_arm_model(), std::nullopt, calibration, "nominal.csv", 0.1, 2);
    REQUIRE(lim.joints.size() == calibration.joints());
    CHECK(lim.samples == calibration.size() - (planar_arm_model().causal_samples - 1));
    for (const auto& b : lim.joints) {
        CHECK(b.least < b.largest);
        CHECK(b.upper - b.lower == Approx(1.1 * (b.largest - b.least)));
        CHECK(b.upper + b.lower == Approx(b.largest + b.least));
    }
    // Its own calibration recording never leaves the band, nor does another nominal run of the task:
    // the arm model explains the arm alike in both (the planar arm is fitted on a third one).
    ResidualChecker checker(lim);
    CHECK(stops(checker, calibration).empty());
    CHECK(stops(checker, test::reference_recording()).empty());
    // JSON round trip.
    const ResidualLimits back = residual_limits_from_json(to_json(lim));
    REQUIRE(back.joints.size() == lim.joints.size());
    CHECK(back.joints[1].upper == lim.joints[1].upper);
    CHECK(back.persistence == 2);
    CHECK(back.samples == lim.samples);
    CHECK(back.arm.causal_samples == lim.arm.causal_samples);
    CHECK_FALSE(back.payload.has_value());
}

TEST_CASE("the residual stops after its persistence outside the band, not on one sample", "[residual]") {
    const Recording& calibration = test::nominal_recording();
    ResidualLimits lim = derive_residual_limits(planar_arm_model(), std::nullopt, calibration, "nominal.csv", 0.1, 2);
    const double width = lim.joints[0].upper - lim.joints[0].lower;
    const Recording& run = test::reference_recording();
    const std::size_t at = run.size() / 2;
    // One sample of joint 1 pushed a whole band's width over: fired, no stop.
    Recording once = run;
    once.tau[0][at] += 1.5 * width;
    ResidualChecker checker(lim);
    std::vector<double> tau(run.joints()), q(run.joints());
    std::size_t fired = 0, stopped = 0;
    for (std::size_t i = 0; i < once.size(); ++i) {
        const Decision d = checker.update(once.sample(i, tau, q));
        fired += d.fired_rule(Rule::ResidualLimit);
        stopped += d.stop();
    }
    CHECK(fired == 1);
    CHECK(stopped == 0);
    // Two samples in a row: a stop at the second, by joint 1 and this rule, its value and band edge.
    Recording twice = once;
    twice.tau[0][at + 1] += 1.5 * width;
    checker.reset();
    Decision first_stop;
    std::size_t stop_index = 0;
    for (std::size_t i = 0; i < twice.size() && !first_stop.stop(); ++i) {
        first_stop = checker.update(twice.sample(i, tau, q));
        stop_index = i;
    }
    REQUIRE(first_stop.stop());
    CHECK(stop_index == at + 1);
    CHECK(first_stop.joint == 1);
    CHECK(first_stop.rule == Rule::ResidualLimit);
    CHECK(first_stop.threshold == lim.joints[0].upper);
    CHECK(first_stop.value > lim.joints[0].upper);
    // With a persistence of 1 the single sample stops.
    lim.persistence = 1;
    ResidualChecker eager(lim);
    const auto eager_stops = stops(eager, once);
    REQUIRE(eager_stops.size() == 1);
    CHECK(eager_stops[0] == at);
}

TEST_CASE("after a gap in time the residual waits for the estimator's span before it judges again", "[residual]") {
    const ResidualLimits lim = derive_residual_limits(planar_arm_model(), std::nullopt, test::long_nominal_recording(),
                                                      "nominal14.csv", 0.1, 2);
    // Another nominal run whose robot clock jumps 1 s ahead halfway (samples lost on the way).
    Recording run = test::nominal_recording();
    const std::size_t at = run.size() / 2;
    for (std::size_t i = at; i < run.size(); ++i) run.t[i] += 1.0;
    ResidualChecker checker(lim);
    std::vector<double> tau(run.joints()), q(run.joints());
    std::size_t unjudged_after_gap = 0, stops_after_gap = 0;
    for (std::size_t i = 0; i < run.size(); ++i) {
        const Sample s = run.sample(i, tau, q);
        if (i < at) {
            checker.update(s);
            continue;
        }
        ResidualChecker probe = checker;  // a copy tells whether update() judges this sample
        const bool judged = probe.compute(s);
        unjudged_after_gap += !judged && i < at + 20;
        stops_after_gap += checker.update(s).stop();
    }
    // The estimator restarts at the gap: the gap's sample and the next causal_samples - 2 are not
    // judged (the estimate there would assume the moving arm at rest), and nothing stops.
    CHECK(unjudged_after_gap == planar_arm_model().causal_samples - 1);
    CHECK(stops_after_gap == 0);
}

TEST_CASE("the residual finds the planar arm's collisions in the samples they act", "[residual]") {
    const ResidualLimits lim = derive_residual_limits(planar_arm_model(), std::nullopt, test::long_nominal_recording(),
                                                      "nominal14.csv", 0.1, 2);
    planar_arm::RunOptions opt;
    opt.cycles = 12;
    opt.seed = 4711;
    opt.collisions = planar_arm::random_collisions(10, 1, opt.cycles, 60.0, 200.0, 4712);
    const Recording run = planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
    REQUIRE(run.has_ground_truth());
    ResidualChecker checker(lim);
    const auto at = stops(checker, run);
    // Every stop lies in a contact or within 0.2 s after one began (a push's tail), and at least 8 of
    // the 10 contacts of 60-200 N are found.
    std::size_t found = 0, outside = 0;
    const auto& contact = run.ground_truth->contact;
    std::vector<bool> counted(run.size(), false);
    for (std::size_t i : at) {
        bool near = false;
        for (std::size_t k = i + 1; k-- > 0 && run.t[i] - run.t[k] <= 0.2;) near = near || contact[k] != 0;
        outside += !near;
    }
    for (std::size_t i = 0; i < run.size(); ++i) {
        if (contact[i] == 0 || (i > 0 && contact[i - 1] != 0)) continue;  // a contact's first sample
        std::size_t k = i;
        while (k < run.size() && contact[k] != 0) ++k;
        bool hit = false;
        for (std::size_t s : at) hit = hit || (s >= i && s <= k);
        found += hit;
    }
    INFO("stops " << at.size() << ", outside a contact " << outside << ", contacts found " << found);
    CHECK(outside == 0);
    CHECK(found >= 8);
}

TEST_CASE("a declared payload's torque is taken off the residual with the payload model", "[residual]") {
    // The planar arm carrying 2 kg at its tool, declared, judged by the band of the unloaded run.
    planar_arm::RunOptions opt;
    opt.cycles = 6;
    opt.seed = 4721;
    opt.payload = 2.0;
    Recording loaded = planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
    loaded.payload.assign(loaded.size(), 2.0);
    Recording unloaded_calibration = test::long_nominal_recording();
    unloaded_calibration.payload.assign(unloaded_calibration.size(), 0.0);
    const ResidualLimits with_model =
        derive_residual_limits(planar_arm_model(), planar_payload_model(), unloaded_calibration, "nominal14.csv", 0.1, 2);
    ResidualChecker checker(with_model);
    const auto loaded_stops = stops(checker, loaded);
    // Without the payload model the part's weight is in the residual: the band is left all the time.
    const ResidualLimits without = derive_residual_limits(planar_arm_model(), std::nullopt, unloaded_calibration, "nominal14.csv");
    ResidualChecker blind(without);
    const auto blind_stops = stops(blind, loaded);
    INFO("stops with the payload model " << loaded_stops.size() << ", without " << blind_stops.size() << " in " << loaded.size()
                                         << " samples");
    CHECK(blind_stops.size() > 500);
    // With it, a few stops are left (3 in 6 cycles when this was written: the part's inertial torque
    // from the causal accelerations, which the band of an unloaded arm has not seen), over 100
    // times fewer.
    CHECK(loaded_stops.size() * 100 < blind_stops.size());
    // The residual with the model stays as close to zero as the unloaded run's: at most 1.5 times
    // its largest magnitude per joint over the unloaded calibration.
    std::vector<double> tau(loaded.joints()), q(loaded.joints()), largest(loaded.joints(), 0.0);
    checker.reset();
    for (std::size_t i = 0; i < loaded.size(); ++i) {
        if (!checker.compute(loaded.sample(i, tau, q))) continue;
        for (std::size_t j = 0; j < loaded.joints(); ++j) largest[j] = std::max(largest[j], std::abs(checker.residual()[j]));
    }
    for (std::size_t j = 0; j < loaded.joints(); ++j) {
        const auto& b = with_model.joints[j];
        INFO("joint " << j + 1 << ": largest " << largest[j] << ", band " << b.least << " .. " << b.largest);
        CHECK(largest[j] <= 1.5 * std::max(std::abs(b.least), std::abs(b.largest)));
    }
}

TEST_CASE("the residual refuses what it cannot judge and stops on a sample it cannot read", "[residual]") {
    const Recording& calibration = test::nominal_recording();
    // A motor current: the arm model expects a torque.
    Recording current = calibration;
    current.info().signal = SignalKind::Current;
    current.info().unit = SignalUnit::A;
    REQUIRE_THROWS_WITH(derive_residual_limits(planar_arm_model(), std::nullopt, current, "current.csv"),
                        Catch::Contains("current.csv") && Catch::Contains("expects a torque"));
    // A payload model and a recording that declares none.
    REQUIRE_THROWS_WITH(derive_residual_limits(planar_arm_model(), planar_payload_model(), calibration, "nominal.csv"),
                        Catch::Contains("nominal.csv: declares no payload"));
    // A payload model that keeps the reference's part (KA-mDTW's).
    PayloadModel beyond = planar_payload_model();
    beyond.beyond_reference_part = true;
    Recording declared = calibration;
    declared.payload.assign(declared.size(), 0.0);
    REQUIRE_THROWS_WITH(derive_residual_limits(planar_arm_model(), beyond, declared, "nominal.csv"),
                        Catch::Contains("beyond the reference's"));
    REQUIRE_THROWS_WITH(derive_residual_limits(planar_arm_model(), std::nullopt, calibration, "nominal.csv", -0.1),
                        Catch::Contains("widening -0.1"));
    REQUIRE_THROWS_WITH(residual_limits_from_json(nlohmann::json{{"format", "warpguard-envelope"}}),
                        Catch::Contains("format 'warpguard-envelope'"));
    // A sample it cannot read stops the robot; a recording it cannot judge is refused before.
    ResidualChecker checker(derive_residual_limits(planar_arm_model(), std::nullopt, calibration, "nominal.csv"));
    REQUIRE_THROWS_WITH(checker.check_recording(current, "run.csv"), Catch::Contains("run.csv: signal current in A"));
    checker.check_recording(calibration, "nominal.csv");
    std::vector<double> tau(calibration.joints(), 0.0), q(calibration.joints(), 0.0);
    tau[1] = std::nan("");
    Sample s;
    s.tau = tau;
    s.q = q;
    const Decision d = checker.update(s);
    CHECK(d.stop());
    CHECK(d.rule == Rule::Fault);
    CHECK(d.joint == 2);
}
