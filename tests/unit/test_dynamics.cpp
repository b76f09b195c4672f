// The speed model: derivatives from sampled angles, the fit on the planar arm, the detector's speed
// estimate, and the profile's JSON form.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "planar_arm.hpp"
#include "test_data.hpp"
#include "warpguard/calibration.hpp"
#include "warpguard/detector.hpp"
#include "warpguard/dynamics.hpp"
#include "warpguard/evaluation.hpp"

using namespace warpguard;

TEST_CASE("smooth derivatives are exact for a quadratic sampled with jitter", "[dynamics]") {
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> jitter(-0.002, 0.002);
    std::vector<double> t, q;
    for (int i = 0; i < 200; ++i) {
        t.push_back(0.008 * i + jitter(rng));
        q.push_back(0.3 - 1.2 * t.back() + 2.5 * t.back() * t.back());
    }
    std::vector<double> qd(t.size()), qdd(t.size());
    smooth_derivatives(t, q, kDerivativeHalfWidth, qd, qdd);
    for (std::size_t i = 0; i < t.size(); ++i) {
        CHECK(qd[i] == Approx(-1.2 + 5.0 * t[i]).margin(1e-9));
        CHECK(qdd[i] == Approx(5.0).margin(1e-7));
    }
    std::vector<double> short_out(3);
    CHECK_THROWS_WITH(smooth_derivatives(t, q, 3, short_out, short_out), Catch::Contains("200 times"));
}

namespace {

// The planar arm moves in the x-y plane of its base with gravity along -y.
CalibrationOptions planar_options(bool with_model) {
    CalibrationOptions opt;
    opt.window = 20;
    if (with_model) {
        opt.dynamics_model = planar_arm::default_arm().dh_model();
        opt.gravity = Eigen::Vector3d(0, -9.81, 0);
    }
    return opt;
}

RunEvaluation run(const Profile& profile, const Recording& rec, double* ratio = nullptr) {
    Detector detector(profile);
    RunEvaluation out = evaluate_detector("run", rec, detector);
    if (ratio) *ratio = detector.speed_ratio();
    return out;
}

}  // namespace

TEST_CASE("the planar arm's speed model explains its torques and its speed estimate follows a 75 % override", "[dynamics][speed]") {
    const NamedRecording nominal[] = {{"nominal14.csv", &test::long_nominal_recording()}};
    const Profile plain = calibrate({"reference.csv", &test::reference_recording()}, nominal, planar_options(false));
    const Profile modelled = calibrate({"reference.csv", &test::reference_recording()}, nominal, planar_options(true));
    REQUIRE(modelled.speed.has_value());
    CHECK(modelled.calibration.at("speed_model") == "fitted");
    CHECK(plain.calibration.at("speed_model").get<std::string>().find("no kinematic model") != std::string::npos);
    for (const auto& joint : modelled.speed->derivation.at("joints")) {
        INFO("joint " << joint.at("joint").get<int>() << " explained " << joint.at("explained").get<double>() << ", residual rms "
                      << joint.at("residual_rms").get<double>());
        CHECK(joint.at("explained").get<double>() > 0.99);
    }
    planar_arm::RunOptions slow;
    slow.cycles = 6;
    slow.seed = 77;
    slow.speed_override = 0.75;
    const Recording rec = planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), slow);
    double ratio = 0;
    run(modelled, rec, &ratio);
    CHECK(ratio == Approx(0.75).margin(0.03));
    // At the recorded speed the estimate stays at 1 and nothing stops.
    double nominal_ratio = 0;
    const RunEvaluation same = run(modelled, test::nominal_recording(), &nominal_ratio);
    CHECK(same.events.empty());
    CHECK(nominal_ratio == Approx(1.0).margin(0.02));
    // Not asserted, measured (issue 8's note): on this planar arm the 75 % run still stops with
    // the speed model (the shared partner jumps between the reference's cycles there); on the
    // simulated 6-axis cell it removes the override's false stops (tests/sim/test_robot_cell.cpp).
}

TEST_CASE("the speed model survives the profile's JSON form and bad sizes are refused by name", "[dynamics][profile]") {
    const NamedRecording nominal[] = {{"nominal14.csv", &test::long_nominal_recording()}};
    const Profile p = calibrate({"reference.csv", &test::reference_recording()}, nominal, planar_options(true));
    REQUIRE(p.speed.has_value());
    const Profile back = profile_from_json(to_json(p));
    REQUIRE(back.speed.has_value());
    for (std::size_t j = 0; j < p.joints; ++j) {
        for (std::size_t k = 0; k < p.reference.size(); k += 37) {
            CHECK(back.speed->inertial[j][k] == Approx(p.speed->inertial[j][k]).epsilon(1e-5).margin(1e-9));
            CHECK(back.speed->viscous[j][k] == Approx(p.speed->viscous[j][k]).epsilon(1e-5).margin(1e-9));
        }
    }
    REQUIRE(p.speed->unexplained.size() == p.joints);
    for (std::size_t j = 0; j < p.joints; ++j) {
        REQUIRE(back.speed->unexplained[j].size() == p.reference.size());
        for (std::size_t k = 0; k < p.reference.size(); k += 37) {
            CHECK(back.speed->unexplained[j][k] == Approx(p.speed->unexplained[j][k]).epsilon(1e-5).margin(1e-9));
        }
    }
    // The speed-change part: per sample the inertial torque of an acceleration qd_ref, which is
    // not zero where the arm moves; and the floor its estimate reads at one speed.
    REQUIRE(p.speed->speed_change.size() == p.joints);
    double largest_change = 0.0;
    for (std::size_t j = 0; j < p.joints; ++j) {
        REQUIRE(back.speed->speed_change[j].size() == p.reference.size());
        for (std::size_t k = 0; k < p.reference.size(); k += 37) {
            CHECK(back.speed->speed_change[j][k] == Approx(p.speed->speed_change[j][k]).epsilon(1e-5).margin(1e-9));
            largest_change = std::max(largest_change, std::abs(p.speed->speed_change[j][k]));
        }
    }
    CHECK(largest_change > 0.0);
    CHECK(std::isfinite(p.speed->speed_change_floor));
    CHECK(back.speed->speed_change_floor == Approx(p.speed->speed_change_floor));
    REQUIRE(p.speed->coulomb.size() == p.joints);
    for (std::size_t j = 0; j < p.joints; ++j) CHECK(back.speed->coulomb[j] == Approx(p.speed->coulomb[j]));
    CHECK(std::isfinite(p.speed->same_speed_tolerance));
    CHECK(back.speed->same_speed_tolerance == Approx(p.speed->same_speed_tolerance));
    auto j = to_json(p);
    j["speed_model"]["inertial"][1].erase(0);
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("speed_model.inertial[1]") && Catch::Contains("the reference has"));
    j = to_json(p);
    j["speed_model"]["unexplained"][0].erase(0);
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("speed_model.unexplained[0]") && Catch::Contains("the reference has"));
    j = to_json(p);
    j["speed_model"]["speed_change"][1].erase(0);
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("speed_model.speed_change[1]") && Catch::Contains("the reference has"));
    j = to_json(p);
    j["speed_model"]["speed_change_floor"] = -1.0;
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("speed_change_floor is -1.0") && Catch::Contains(">= 0"));
    j = to_json(p);
    j["speed_model"]["coulomb"][1] = -0.5;
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("speed_model.coulomb[1] is -0.5") && Catch::Contains(">= 0"));
    // An unsigned current's uncertain splits (calibration sets them; the planar arm reports torque).
    Profile flagged = p;
    flagged.speed->uncertain_split.assign(p.joints, false);
    flagged.speed->uncertain_split[1] = true;
    CHECK(profile_from_json(to_json(flagged)).speed->uncertain_split == flagged.speed->uncertain_split);
    CHECK(p.speed->uncertain_split.empty());
    CHECK(back.speed->uncertain_split.empty());
    j = to_json(flagged);
    j["speed_model"]["uncertain_split"].erase(0);
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("speed_model.uncertain_split has " + std::to_string(p.joints - 1) + " values") &&
                                                 Catch::Contains("expected " + std::to_string(p.joints)));
    j = to_json(flagged);
    j["speed_model"]["uncertain_split"][0] = "yes";
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("speed_model.uncertain_split must be an array of true/false"));
    j = to_json(p);
    j["speed_model"]["same_speed_tolerance"] = "fast";
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("same_speed_tolerance is \"fast\""));
    // A profile from before the bands were kept: no band (Coulomb 0, nothing unexplained), tolerance
    // never reached.
    j = to_json(p);
    j["speed_model"].erase("coulomb");
    j["speed_model"].erase("same_speed_tolerance");
    j["speed_model"].erase("unexplained");
    j["speed_model"].erase("speed_change");
    j["speed_model"].erase("speed_change_floor");
    const Profile old = profile_from_json(j);
    CHECK(old.speed->unexplained.empty());
    CHECK(old.speed->speed_change.empty());
    CHECK(std::isinf(old.speed->speed_change_floor));
    CHECK(old.speed->coulomb == std::vector<double>(p.joints, 0.0));
    CHECK(std::isinf(old.speed->same_speed_tolerance));
}

TEST_CASE("a joint resting since the stream began may hold its dry friction, and a push from that torque still stops",
          "[dynamics][friction]") {
    // A joint that comes to rest keeps whatever torque its dry friction then holds, anywhere in a
    // band of twice its Coulomb friction; the reference's rest held one such torque. A stream that
    // begins while the joint rests never saw how it came to rest: until it moves, its torque may sit
    // anywhere in the band at the recorded speed too.
    const NamedRecording nominal[] = {{"nominal14.csv", &test::long_nominal_recording()}};
    const Profile profile = calibrate({"reference.csv", &test::reference_recording()}, nominal, planar_options(true));
    REQUIRE(profile.speed.has_value());
    REQUIRE(profile.phase.has_value());
    const auto& coulomb = profile.speed->coulomb;
    const std::size_t j = static_cast<std::size_t>(std::max_element(coulomb.begin(), coulomb.end()) - coulomb.begin());
    const double F = coulomb[j];
    INFO("joint " << j + 1 << ", fitted Coulomb friction " << F << " Nm");
    REQUIRE(F > 0.0);
    planar_arm::RunOptions opt;
    opt.cycles = 2;
    opt.seed = 91;  // not a calibration seed
    const Recording clean = planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
    std::size_t first_move = 1;
    while (first_move < clean.size() && std::abs(clean.q[j][first_move] - clean.q[j][0]) < 1e-4) ++first_move;
    // The robot rested at home before the stream began: the stream opens with 60 more samples of
    // that rest (the first sample's values), so the window is full long before the joint moves.
    const std::size_t pre = 60, moves_at = pre + first_move;
    const double period = opt.sample_period;
    // Stops before the joint first moves, with `offset` added to its torque from the stream's
    // start and `push` more from sample `push_from` on.
    const auto stops_before_moving = [&](const Profile& p, double offset, double push, std::size_t push_from) {
        Detector detector(p);
        std::vector<double> tau(clean.joints()), q(clean.joints());
        std::size_t stops = 0;
        for (std::size_t i = 0; i < moves_at; ++i) {
            Sample s = clean.sample(i < pre ? 0 : i - pre, tau, q);
            if (i < pre) s.t -= static_cast<double>(pre - i) * period;
            tau[j] += offset + (i >= push_from ? push : 0.0);
            stops += detector.update(s).stop();
        }
        return stops;
    };
    // A band of zero width (no friction fitted) judges the held 1.6 F and stops the robot before
    // it ever moves...
    Profile zero_band = profile;
    std::fill(zero_band.speed->coulomb.begin(), zero_band.speed->coulomb.end(), 0.0);
    CHECK(stops_before_moving(zero_band, 1.6 * F, 0.0, moves_at) > 0);
    // ...with the fitted band the same stream runs (and so does the stream as recorded),
    CHECK(stops_before_moving(profile, 1.6 * F, 0.0, moves_at) == 0);
    CHECK(stops_before_moving(profile, 0.0, 0.0, moves_at) == 0);
    // and a push of 4 F on top of the held torque, once the rest has set it, stops.
    CHECK(stops_before_moving(profile, 1.6 * F, 4.0 * F, pre / 2) > 0);
    // Without a speed model (no kinematic model, or an unsigned motor current) no band is known:
    // the level a joint holds until it first moves is taken as found, and changes from it judged.
    const Profile no_model = calibrate({"reference.csv", &test::reference_recording()}, nominal, planar_options(false));
    REQUIRE_FALSE(no_model.speed.has_value());
    CHECK(stops_before_moving(no_model, 1.6 * F, 0.0, moves_at) == 0);
    CHECK(stops_before_moving(no_model, 0.0, 0.0, moves_at) == 0);
    CHECK(stops_before_moving(no_model, 1.6 * F, 4.0 * F, pre / 2) > 0);
}

TEST_CASE("friction that changed beyond what calibration learned opens a moved joint's friction band", "[dynamics][friction]") {
    // Calibration runs the friction-drift model over its nominal recordings and keeps the largest
    // Coulomb change it learned per joint; in operation a larger one means the friction changed,
    // so a joint coming to rest may hold another torque than the reference's.
    const NamedRecording nominal[] = {{"nominal14.csv", &test::long_nominal_recording()}};
    const Profile profile = calibrate({"reference.csv", &test::reference_recording()}, nominal, planar_options(true));
    REQUIRE(profile.phase.has_value());
    const auto& learned = profile.phase->drift_coulomb_nominal;
    REQUIRE(learned.size() == profile.joints);
    for (double v : learned) CHECK((v >= 0.0 && std::isfinite(v)));
    CHECK(*std::max_element(learned.begin(), learned.end()) > 0.0);  // the model learns something from noise

    // The calibration recording itself, run as in operation: never past its own largest change.
    const auto changed_samples = [&](const Recording& rec, std::vector<std::size_t>& open_moved) {
        Detector detector(profile);
        std::vector<double> tau(rec.joints()), q(rec.joints());
        std::size_t changed = 0;
        open_moved.assign(rec.joints(), 0);
        for (std::size_t i = 0; i < rec.size(); ++i) {
            detector.update(rec.sample(i, tau, q));
            for (std::size_t j = 0; j < rec.joints(); ++j) {
                changed += detector.friction_changed(j);
                // at the recorded speed, for a joint that has moved: open only by the changed friction
                if (i > 100 && detector.friction_changed(j) && detector.friction_band_open(j, false)) ++open_moved[j];
            }
        }
        return changed;
    };
    std::vector<std::size_t> open_moved;
    CHECK(changed_samples(test::long_nominal_recording(), open_moved) == 0);

    // Friction rising by 30 % over 60 cycles: the learned change passes the calibrated one and the
    // band opens.
    const Recording drifting = test::friction_rising_run(60, 78, 0.3);
    const std::size_t changed = changed_samples(drifting, open_moved);
    INFO("samples x joints with changed friction: " << changed << " of " << drifting.size() * drifting.joints());
    CHECK(changed > drifting.size() / 10);
    CHECK(*std::max_element(open_moved.begin(), open_moved.end()) > 0);

    // Its JSON form, and a bad value refused by name.
    const Profile back = profile_from_json(to_json(profile));
    REQUIRE(back.phase->drift_coulomb_nominal.size() == profile.joints);
    for (std::size_t j = 0; j < profile.joints; ++j) CHECK(back.phase->drift_coulomb_nominal[j] == Approx(learned[j]));
    auto j = to_json(profile);
    j["phase_aware"]["drift_coulomb_nominal"][1] = -0.5;
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("joint 2: drift_coulomb_nominal is -0.5") && Catch::Contains(">= 0"));
    j = to_json(profile);
    j["phase_aware"]["drift_coulomb_nominal"].erase(0);
    CHECK_THROWS_WITH(profile_from_json(j), Catch::Contains("drift_coulomb_nominal has 2 values; expected one per joint (3)"));
    // A profile from before it was kept: the band never opens on drift.
    j = to_json(profile);
    j["phase_aware"].erase("drift_coulomb_nominal");
    CHECK(profile_from_json(j).phase->drift_coulomb_nominal.empty());
}

TEST_CASE("the friction-drift model's bounded fit is the box's least-squares minimum", "[dynamics][friction]") {
    std::mt19937 rng(17);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int trial = 0; trial < 200; ++trial) {
        // A positive definite R (nearly collinear in some trials, as a joint at one steady speed gives).
        const double r00 = 0.1 + std::abs(u(rng)) * 5, r11 = 0.1 + std::abs(u(rng)) * 5;
        const double r01 = u(rng) * 0.999 * std::sqrt(r00 * r11);
        const double b0 = 4 * u(rng), b1 = 4 * u(rng);
        const double det = r00 * r11 - r01 * r01;
        const std::array<double, 2> free{(r11 * b0 - r01 * b1) / det, (r00 * b1 - r01 * b0) / det};
        const double lc = 0.05 + std::abs(u(rng)), lv = 0.05 + std::abs(u(rng));
        const auto cost = [&](double c, double v) { return r00 * c * c + 2 * r01 * c * v + r11 * v * v - 2 * (b0 * c + b1 * v); };
        const auto x = bounded_friction(r00, r01, r11, b0, b1, lc, lv);
        INFO("trial " << trial << ": free (" << free[0] << ", " << free[1] << "), bounded (" << x[0] << ", " << x[1] << ")");
        CHECK(std::abs(x[0]) <= lc * (1 + 1e-12));
        CHECK(std::abs(x[1]) <= lv * (1 + 1e-12));
        // No point of a fine grid over the box is better.
        double grid = INFINITY;
        for (int i = 0; i <= 400; ++i) {
            for (int k = 0; k <= 400; ++k) grid = std::min(grid, cost(lc * (i / 200.0 - 1), lv * (k / 200.0 - 1)));
        }
        CHECK(cost(x[0], x[1]) <= grid + 1e-12);
        if (std::abs(free[0]) <= lc && std::abs(free[1]) <= lv) CHECK((x[0] == free[0] && x[1] == free[1]));
    }
}

TEST_CASE("the four-term drift fit is the least over the box", "[dynamics][friction]") {
    // Random positive definite 4 x 4 systems (some nearly singular: a signed and a magnitude term
    // that coincide where the sign follows the motion), bounds finite or infinite. The answer lies
    // in the box and satisfies the optimality conditions of a box-constrained convex quadratic:
    // the gradient 2 (R x - b) is 0 in a term strictly inside its bounds, <= 0 at its upper bound,
    // >= 0 at its lower one; no random point of the box costs less.
    std::mt19937 rng(23);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::size_t at_bound = 0, free_answers = 0;
    for (int trial = 0; trial < 300; ++trial) {
        Eigen::Matrix4d g = Eigen::Matrix4d::Zero();
        for (int i = 0; i < 4; ++i) {
            for (int k = 0; k < 4; ++k) g(i, k) = u(rng);
        }
        if (trial % 3 == 0) g.col(2) = g.col(0) + 1e-3 * g.col(2);  // nearly collinear terms
        const Eigen::Matrix4d rm = g.transpose() * g + 1e-3 * Eigen::Matrix4d::Identity();
        std::array<std::array<double, 4>, 4> r{};
        std::array<double, 4> b{}, limit{};
        for (int i = 0; i < 4; ++i) {
            for (int k = 0; k < 4; ++k) r[i][k] = rm(i, k);
            b[i] = (trial % 4 == 1 ? 0.01 : 3.0) * u(rng);  // every fourth one mostly inside the box
            limit[i] = trial % 5 == i ? std::numeric_limits<double>::infinity() : 0.05 + std::abs(u(rng));
        }
        const auto x = bounded_fit(r, b, limit);
        const auto cost = [&](const std::array<double, 4>& p) {
            double c = 0;
            for (int i = 0; i < 4; ++i) {
                c -= 2 * b[i] * p[i];
                for (int k = 0; k < 4; ++k) c += p[i] * r[i][k] * p[k];
            }
            return c;
        };
        bool bounded = false;
        for (int i = 0; i < 4; ++i) {
            INFO("trial " << trial << ", term " << i << ": x = " << x[i] << ", limit " << limit[i]);
            REQUIRE(std::abs(x[i]) <= limit[i] * (1 + 1e-12));
            double gradient = -2 * b[i];
            for (int k = 0; k < 4; ++k) gradient += 2 * r[i][k] * x[k];
            const double tol = 1e-7 * (1 + std::abs(b[i]) + rm.row(i).cwiseAbs().sum());
            if (x[i] >= limit[i] * (1 - 1e-12)) {
                CHECK(gradient <= tol);
                bounded = true;
            } else if (x[i] <= -limit[i] * (1 - 1e-12)) {
                CHECK(gradient >= -tol);
                bounded = true;
            } else {
                CHECK(std::abs(gradient) <= tol);
            }
        }
        (bounded ? at_bound : free_answers) += 1;
        double best_random = std::numeric_limits<double>::infinity();
        for (int s = 0; s < 2000; ++s) {
            std::array<double, 4> p{};
            for (int i = 0; i < 4; ++i) p[i] = (std::isfinite(limit[i]) ? limit[i] : 10.0) * u(rng);
            best_random = std::min(best_random, cost(p));
        }
        CHECK(cost(x) <= best_random + 1e-12);
    }
    // Both kinds of answer were exercised.
    CHECK(at_bound > 100);
    CHECK(free_answers > 20);

    // With the magnitude's terms uncoupled and bound to 0 the fit is the two-term one.
    for (int trial = 0; trial < 50; ++trial) {
        const double r00 = 0.1 + std::abs(u(rng)) * 5, r11 = 0.1 + std::abs(u(rng)) * 5;
        const double r01 = u(rng) * 0.9 * std::sqrt(r00 * r11);
        const double b0 = 4 * u(rng), b1 = 4 * u(rng), lc = 0.05 + std::abs(u(rng)), lv = 0.05 + std::abs(u(rng));
        const auto two = bounded_friction(r00, r01, r11, b0, b1, lc, lv);
        const auto four = bounded_fit({{{r00, r01, 0, 0}, {r01, r11, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}}, {b0, b1, 0, 0}, {lc, lv, 1, 1});
        CHECK(four[0] == Approx(two[0]).margin(1e-12));
        CHECK(four[1] == Approx(two[1]).margin(1e-12));
        CHECK(four[2] == 0.0);
        CHECK(four[3] == 0.0);
    }
}

TEST_CASE("the friction-drift model learns at most the joint's fitted dry friction", "[dynamics][friction]") {
    // Friction growing to 4 times its value over 40 cycles: far beyond any warm-up, the way a
    // steady press the guard lets through looks to the model. The Coulomb term stays within the
    // fitted dry friction of each joint (the friction at most doubled), and reaches it.
    const NamedRecording nominal[] = {{"nominal14.csv", &test::long_nominal_recording()}};
    const Profile profile = calibrate({"reference.csv", &test::reference_recording()}, nominal, planar_options(true));
    REQUIRE(profile.speed.has_value());
    const Recording rec = test::friction_rising_run(40, 91, 3.0);
    Detector detector(profile);
    std::vector<double> tau(rec.joints()), q(rec.joints()), largest(rec.joints(), 0.0);
    for (std::size_t i = 0; i < rec.size(); ++i) {
        detector.update(rec.sample(i, tau, q));
        for (std::size_t j = 0; j < rec.joints(); ++j) largest[j] = std::max(largest[j], std::abs(detector.friction_drift(j)[0]));
    }
    bool reached = false;
    for (std::size_t j = 0; j < rec.joints(); ++j) {
        const double limit = profile.speed->coulomb[j];
        INFO("joint " << j + 1 << ": largest learned Coulomb term " << largest[j] << ", fitted dry friction " << limit);
        CHECK(largest[j] <= limit * (1 + 1e-9));
        reached = reached || largest[j] > 0.99 * limit;
    }
    CHECK(reached);
}

TEST_CASE("the friction-drift model fits nothing before a joint's own motion outweighs its prior", "[dynamics][friction]") {
    // The prior weighs a tenth of the model's memory (Detector::kFrictionPrior = 0.1 over the
    // drift rate) at the joint's median speed while moving in the reference (faster than 0.01
    // rad/s). The weighted sum of the squared velocities the model learns from is at most the
    // plain sum over every sample of the stream, so while that sum is below the prior's weight
    // every learned term must still be exactly 0; with friction rising, terms are learned later.
    // (Without the wait, joint 2 learned a Coulomb term at sample 175, its motion 81 of the 129
    // the prior weighs.)
    const NamedRecording nominal[] = {{"nominal14.csv", &test::long_nominal_recording()}};
    const Profile profile = calibrate({"reference.csv", &test::reference_recording()}, nominal, planar_options(true));
    REQUIRE(profile.phase.has_value());
    REQUIRE(profile.phase->drift_rate > 0);
    const std::size_t n = profile.joints;
    std::vector<double> needed(n);
    for (std::size_t j = 0; j < n; ++j) {
        std::vector<double> moving;
        const auto& qr = profile.reference.q[j];
        const auto& tr = profile.reference.t;
        for (std::size_t k = 1; k < qr.size(); ++k) {
            if (!(tr[k] > tr[k - 1])) continue;
            const double v = std::abs(qr[k] - qr[k - 1]) / (tr[k] - tr[k - 1]);
            if (v > 0.01) moving.push_back(v);
        }
        REQUIRE(!moving.empty());
        std::nth_element(moving.begin(), moving.begin() + static_cast<std::ptrdiff_t>(moving.size() / 2), moving.end());
        const double speed = moving[moving.size() / 2];
        needed[j] = 0.1 / profile.phase->drift_rate * speed * speed;
    }
    const Recording rec = test::friction_rising_run(12, 97, 0.5);
    Detector detector(profile);
    std::vector<double> tau(n), q(n), motion(n, 0.0), previous_q(n);
    std::vector<std::size_t> checked(n, 0);
    double previous_t = 0;
    bool learned = false;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        const Sample s = rec.sample(i, tau, q);
        if (i > 0 && s.t > previous_t) {
            for (std::size_t j = 0; j < n; ++j) {
                const double v = (q[j] - previous_q[j]) / (s.t - previous_t);
                motion[j] += v * v;
            }
        }
        detector.update(s);
        for (std::size_t j = 0; j < n; ++j) {
            const auto f = detector.friction_drift(j);
            if (motion[j] < needed[j]) {
                ++checked[j];
                INFO("joint " << j + 1 << ", sample " << i << ": motion " << motion[j] << " of " << needed[j]);
                REQUIRE(f[0] == 0.0);
                REQUIRE(f[1] == 0.0);
            } else if (f[0] != 0.0 || f[1] != 0.0) {
                learned = true;
            }
        }
        previous_q = q;
        previous_t = s.t;
    }
    for (std::size_t j = 0; j < n; ++j) {
        INFO("joint " << j + 1 << ": samples before its motion outweighs the prior " << checked[j]);
        CHECK(checked[j] > 50);  // the checks above ran (90 samples on joint 1, the fastest)
    }
    CHECK(learned);
}

namespace {

// The planar arm's own dynamics, fitted on a dry run of its task (8 cycles, a seed no other test uses).
const ArmDynamics& planar_arm_model() {
    static const ArmDynamics arm = [] {
        planar_arm::RunOptions opt;
        opt.cycles = 8;
        opt.seed = 43;
        const Recording dry = planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
        const Recording* runs[] = {&dry};
        return fit_arm_dynamics(planar_arm::default_arm().dh_model(), runs, Eigen::Vector3d(0, -9.81, 0));
    }();
    return arm;
}

double rms(const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x * x;
    return std::sqrt(sum / static_cast<double>(v.size()));
}

}  // namespace

TEST_CASE("the arm deviation filter differentiates from past samples only and starts afresh after a gap", "[dynamics][arm]") {
    ArmDeviationFilter filter(planar_arm_model());
    const std::size_t n = planar_arm_model().model.dof();
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> jitter(-0.002, 0.002);
    std::vector<double> q(n), tau(n, 0.0), out(n);
    // A quadratic joint path sampled with jitter: the fit over the newest samples is exact.
    const auto angle = [](double t, std::size_t j) { return 0.2 * static_cast<double>(j) - 0.7 * t + 1.9 * t * t; };
    double t = 0;
    for (int i = 0; i < 40; ++i) {
        t = 0.008 * i + jitter(rng);
        for (std::size_t j = 0; j < n; ++j) q[j] = angle(t, j);
        filter.apply(t, q, tau, out);
        if (i == 0) {
            CHECK(filter.velocity()[0] == 0.0);  // one sample: at rest
            CHECK(filter.acceleration()[0] == 0.0);
        } else if (i == 1) {
            CHECK(filter.acceleration()[0] == 0.0);  // two: a constant velocity
            CHECK(filter.velocity()[0] != 0.0);
        } else {
            for (std::size_t j = 0; j < n; ++j) {
                CHECK(filter.velocity()[j] == Approx(-0.7 + 3.8 * t).margin(1e-8));
                CHECK(filter.acceleration()[j] == Approx(3.8).margin(1e-6));
            }
        }
    }
    // A gap of 10 sample periods (more than kCausalGapFactor spacings) starts the estimate afresh.
    t += 0.08;
    for (std::size_t j = 0; j < n; ++j) q[j] = angle(t, j);
    filter.apply(t, q, tau, out);
    CHECK(filter.velocity()[0] == 0.0);
    CHECK(filter.acceleration()[0] == 0.0);
    // So does time running backwards (a robot clock reset).
    filter.apply(t + 0.008, q, tau, out);
    CHECK(filter.velocity()[0] == 0.0);  // q did not change: a zero secant velocity
    filter.apply(t - 1.0, q, tau, out);
    CHECK(filter.velocity()[0] == 0.0);
    CHECK(filter.acceleration()[0] == 0.0);
    // The filter refuses an arm model whose parameters do not fit its model.
    ArmDynamics broken = planar_arm_model();
    broken.parameters.pop_back();
    CHECK_THROWS_WITH(ArmDeviationFilter(broken), Catch::Contains("parameter vectors"));
}

TEST_CASE("the causal arm deviation of a held-out run stays near the offline one's size", "[dynamics][arm]") {
    planar_arm::RunOptions opt;
    opt.cycles = 4;
    opt.seed = 44;
    const Recording run = planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
    const Recording offline = arm_deviation(planar_arm_model(), run);
    const Recording causal = causal_arm_deviation(planar_arm_model(), run);
    REQUIRE(causal.size() == run.size());
    for (std::size_t j = 0; j < run.joints(); ++j) {
        const double torque = rms(run.tau[j]), off = rms(offline.tau[j]), on = rms(causal.tau[j]);
        INFO("joint " << j + 1 << ": torque rms " << torque << " Nm, offline deviation " << off << ", causal " << on);
        // Both leave little of the arm's torque; the causal one pays for looking back with more noise.
        CHECK(off < 0.05 * torque);
        CHECK(on < 0.10 * torque);
        CHECK(on >= off * 0.9);
    }
}

TEST_CASE("a profile with an arm model judges the deviation from it, exactly as calibration measured it", "[dynamics][arm][detector]") {
    const NamedRecording nominal[] = {{"nominal14.csv", &test::long_nominal_recording()}};
    CalibrationOptions opt = planar_options(true);
    opt.arm = planar_arm_model();
    const Profile with_arm = calibrate({"reference.csv", &test::reference_recording()}, nominal, opt);
    REQUIRE(with_arm.arm.has_value());
    REQUIRE(with_arm.phase.has_value());
    CHECK(with_arm.calibration.contains("arm_model"));
    // The same calibration on recordings transformed beforehand, without the arm in the profile.
    const Recording reference_deviation = causal_arm_deviation(*opt.arm, test::reference_recording());
    const Recording nominal_deviation = causal_arm_deviation(*opt.arm, test::long_nominal_recording());
    const NamedRecording nominal_dev[] = {{"nominal14.csv", &nominal_deviation}};
    // The arm model took its dry friction off the recordings; the still-joint band must still
    // span all of it, so that calibration is told what was removed.
    CalibrationOptions deviation_options = planar_options(true);
    for (std::size_t j = 0; j < with_arm.joints; ++j) deviation_options.removed_coulomb.push_back(arm_coulomb(*opt.arm, j));
    const Profile on_deviation = calibrate({"reference.csv", &reference_deviation}, nominal_dev, deviation_options);
    CHECK_FALSE(on_deviation.arm.has_value());
    CHECK(with_arm.reference.tau == on_deviation.reference.tau);
    CHECK(with_arm.phase->rule1 == on_deviation.phase->rule1);
    CHECK(with_arm.phase->margin == on_deviation.phase->margin);
    REQUIRE(with_arm.speed.has_value());
    CHECK(with_arm.speed->coulomb == on_deviation.speed->coulomb);
    // The band is the speed model's own term on the deviation plus the arm model's, which is
    // the planar arm's real dry friction within 20 % (planar_arm_model is fitted on its dry runs).
    const Profile told_nothing = calibrate({"reference.csv", &reference_deviation}, nominal_dev, planar_options(true));
    const auto links = planar_arm::default_arm().links;
    for (std::size_t j = 0; j < with_arm.joints; ++j) {
        INFO("joint " << j + 1 << ": band " << with_arm.speed->coulomb[j] << ", speed model alone " << told_nothing.speed->coulomb[j]
                      << ", arm model " << arm_coulomb(*opt.arm, j) << ", simulated " << links[j].coulomb);
        CHECK(with_arm.speed->coulomb[j] == Approx(told_nothing.speed->coulomb[j] + arm_coulomb(*opt.arm, j)));
        CHECK(arm_coulomb(*opt.arm, j) == Approx(links[j].coulomb).epsilon(0.2));
    }
    CalibrationOptions bad = planar_options(true);
    bad.removed_coulomb = {0.1};
    CHECK_THROWS_WITH(calibrate({"reference.csv", &reference_deviation}, nominal_dev, bad),
                      Catch::Contains("1 values") && Catch::Contains("reference.csv"));
    bad.removed_coulomb = {0.1, -0.2, 0.1};
    CHECK_THROWS_WITH(calibrate({"reference.csv", &reference_deviation}, nominal_dev, bad), Catch::Contains("joint 2") && Catch::Contains("-0.2"));
    // The reference no longer carries the arm's gravity torque: a fraction of the signal is left.
    for (std::size_t j = 0; j < with_arm.joints; ++j) {
        std::vector<double> raw(test::reference_recording().tau[j].begin() + static_cast<std::ptrdiff_t>(with_arm.reference.first_sample),
                                test::reference_recording().tau[j].begin() +
                                    static_cast<std::ptrdiff_t>(with_arm.reference.first_sample + with_arm.reference.size()));
        INFO("joint " << j + 1);
        CHECK(rms(with_arm.reference.tau[j]) < 0.1 * rms(raw));
    }
    // A run with contacts: the detector given raw samples decides exactly as one given the deviation,
    // and so does the profile after its JSON round trip.
    planar_arm::RunOptions run_opt;
    run_opt.cycles = 4;
    run_opt.seed = 45;
    run_opt.collisions = {{1, 0.3, 2, planar_arm::ContactProfile::Impact, 40.0, 0.05, 1.0},
                          {2, 0.6, 1, planar_arm::ContactProfile::Push, 60.0, 0.4, -1.0}};
    const Recording run = planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), run_opt);
    const Recording run_deviation = causal_arm_deviation(*opt.arm, run);
    Detector raw_detector(with_arm), deviation_detector(on_deviation), reloaded(profile_from_json(to_json(with_arm)));
    std::vector<double> tau(run.joints()), q(run.joints()), dtau(run.joints()), dq(run.joints());
    std::size_t stops = 0, differences = 0;
    for (std::size_t i = 0; i < run.size(); ++i) {
        const Decision a = raw_detector.update(run.sample(i, tau, q));
        const Decision b = deviation_detector.update(run_deviation.sample(i, dtau, dq));
        const Decision c = reloaded.update(run.sample(i, tau, q));
        differences += (a.verdict != b.verdict) + (a.verdict != c.verdict);
        stops += a.stop();
    }
    CHECK(differences == 0);
    CHECK(stops > 0);  // the contacts stop it: the comparison covered STOPs too
    // An arm model in another unit, or for another joint count, is refused by name.
    CalibrationOptions percent = opt;
    percent.arm->unit = SignalUnit::Percent;
    CHECK_THROWS_WITH(calibrate({"reference.csv", &test::reference_recording()}, nominal, percent),
                      Catch::Contains("reference.csv") && Catch::Contains("'percent'"));
    Profile wrong = with_arm;
    wrong.arm->model = DhModel({DhJoint{}});
    CHECK_THROWS_WITH(wrong.validate(), Catch::Contains("the arm model has 1 joints"));
}

TEST_CASE("the arm model's causal estimator is chosen on the dry run: coarse encoders get a longer fit", "[dynamics][arm]") {
    planar_arm::RunOptions opt;
    opt.cycles = 8;
    opt.seed = 43;
    Recording dry = planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
    const DhModel model = planar_arm::default_arm().dh_model();
    const Eigen::Vector3d gravity(0, -9.81, 0);
    const Recording* runs[] = {&dry};
    const ArmDynamics smooth = fit_arm_dynamics(model, runs, gravity);
    // The same run read through an encoder of 1e-4 rad steps (about 16 bits per turn).
    for (auto& joint : dry.q) {
        for (double& v : joint) v = std::round(v / 1e-4) * 1e-4;
    }
    const ArmDynamics coarse = fit_arm_dynamics(model, runs, gravity);
    const auto& choice = coarse.derivation.at("causal_derivatives");
    INFO("smooth angles: order " << smooth.causal_order << " over " << smooth.causal_samples << " samples; quantised: order "
                                 << coarse.causal_order << " over " << coarse.causal_samples << "; " << choice.dump());
    // The chosen candidate is the best of those tried, and no candidate beats looking ahead by much.
    double best = std::numeric_limits<double>::infinity();
    for (const auto& c : choice.at("candidates")) best = std::min(best, c.at("relative").get<double>());
    CHECK(choice.at("chosen").at("relative").get<double>() == best);
    CHECK(best > 0.9);
    // Quantisation noise is amplified most by short fits: the quantised run chooses a longer one
    // for its order (a fit over more samples, or a lower order over as many).
    const double smooth_span = static_cast<double>(smooth.causal_samples) / static_cast<double>(smooth.causal_order);
    const double coarse_span = static_cast<double>(coarse.causal_samples) / static_cast<double>(coarse.causal_order);
    CHECK(coarse_span > smooth_span);
    // The choice survives the JSON form; an estimator out of range is refused by name.
    const ArmDynamics back = arm_dynamics_from_json(to_json(coarse));
    CHECK(back.causal_order == coarse.causal_order);
    CHECK(back.causal_samples == coarse.causal_samples);
    nlohmann::json bad = to_json(coarse);
    bad["causal_derivatives"]["samples"] = 40;
    CHECK_THROWS_WITH(arm_dynamics_from_json(bad), Catch::Contains("order") && Catch::Contains("over 40 samples"));
}

namespace {

// The change of each joint's torque that an acceleration of joint `alone` by 1 rad/s^2, all else at
// rest, causes at pose q: from the arm model, and from the planar arm's true dynamics.
std::vector<double> modelled_inertia_column(const ArmDynamics& arm, const std::vector<double>& q, std::size_t alone) {
    const std::size_t n = q.size();
    const DynamicsRegressor regressor(arm.model, arm.gravity);
    Eigen::MatrixXd y(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(regressor.columns()));
    std::vector<double> zero(n, 0.0), unit(n, 0.0), out(n);
    unit[alone] = 1.0;
    regressor.compute(q, zero, unit, false, y);
    for (std::size_t j = 0; j < n; ++j) out[j] = y.row(static_cast<Eigen::Index>(j)).dot(arm.parameters[j]);
    regressor.compute(q, zero, zero, false, y);
    for (std::size_t j = 0; j < n; ++j) out[j] -= y.row(static_cast<Eigen::Index>(j)).dot(arm.parameters[j]);
    return out;
}

std::vector<double> true_inertia_column(const planar_arm::Arm& arm, const std::vector<double>& q, std::size_t alone) {
    const std::size_t n = q.size();
    std::vector<double> zero(n, 0.0), unit(n, 0.0), moved(n), rest(n);
    unit[alone] = 1.0;
    planar_arm::inverse_dynamics(arm, q.data(), zero.data(), unit.data(), 0.0, moved.data());
    planar_arm::inverse_dynamics(arm, q.data(), zero.data(), zero.data(), 0.0, rest.data());
    for (std::size_t j = 0; j < n; ++j) moved[j] -= rest[j];
    return moved;
}

}  // namespace

TEST_CASE("joints that always move together are reported, and an excitation run tells their inertias apart", "[dynamics][arm]") {
    // A task whose joints all move in lockstep, along one line in joint space: as the suite's tasks
    // turn the wrist with the base (and, the UR5e-like's wrist being vertical, with the same axis),
    // the dry run cannot tell what one joint's acceleration alone does.
    planar_arm::TaskOptions lockstep = planar_arm::default_task();
    for (auto& w : lockstep.waypoints) w.q[1] = 0.5 - 0.8 * w.q[0], w.q[2] = -1.6 + w.q[0];
    planar_arm::RunOptions opt;
    opt.cycles = 8;
    opt.seed = 61;
    const Recording dry = planar_arm::simulate(planar_arm::default_arm(), lockstep, opt);
    // The excitation run: every joint alone, out by +-0.4 rad from the task's first pose and back.
    planar_arm::TaskOptions excitation;
    const std::vector<double> centre = lockstep.waypoints.front().q;
    excitation.waypoints.push_back({centre, 0.8, 0.1});
    for (std::size_t k = 0; k < centre.size(); ++k) {
        for (double sign : {1.0, -1.0}) {
            std::vector<double> out = centre;
            out[k] += 0.4 * sign;
            excitation.waypoints.push_back({out, 0.6, 0.1});
            excitation.waypoints.push_back({centre, 0.6, 0.1});
        }
    }
    opt.cycles = 3;
    opt.seed = 62;
    const Recording excite = planar_arm::simulate(planar_arm::default_arm(), excitation, opt);
    const Eigen::Vector3d gravity(0, -9.81, 0);
    const DhModel model = planar_arm::default_arm().dh_model();

    const Recording* task_only[] = {&dry};
    const ArmDynamics from_task = fit_arm_dynamics(model, task_only, gravity);
    const auto& pairs = from_task.derivation.at("dependent_joints");
    REQUIRE(pairs.size() == 3);
    CHECK(pairs[0].at("joints") == nlohmann::json({1, 2}));
    CHECK(pairs[0].at("velocity_correlation").get<double>() < -0.99);
    CHECK(pairs[1].at("joints") == nlohmann::json({1, 3}));
    CHECK(pairs[1].at("velocity_correlation").get<double>() > 0.99);
    CHECK(pairs[2].at("joints") == nlohmann::json({2, 3}));

    const Recording* both[] = {&dry, &excite};
    const ArmDynamics with_excitation = fit_arm_dynamics(model, both, gravity);
    CHECK(with_excitation.derivation.at("dependent_joints").empty());

    // Joint 3 accelerated alone, at the task's poses: what each model expects of every joint,
    // against the arm's true dynamics.
    double task_error = 0, excited_error = 0, largest = 0;
    for (std::size_t i = 0; i < dry.size(); i += 50) {
        const std::vector<double> q = {dry.q[0][i], dry.q[1][i], dry.q[2][i]};
        const auto truth = true_inertia_column(planar_arm::default_arm(), q, 2);
        const auto a = modelled_inertia_column(from_task, q, 2), b = modelled_inertia_column(with_excitation, q, 2);
        for (std::size_t j = 0; j < 3; ++j) {
            task_error = std::max(task_error, std::abs(a[j] - truth[j]));
            excited_error = std::max(excited_error, std::abs(b[j] - truth[j]));
            largest = std::max(largest, std::abs(truth[j]));
        }
    }
    INFO("joint 3 alone at 1 rad/s^2: largest true torque " << largest << " Nm; largest error of the model fitted on the task "
         << task_error << " Nm, with the excitation run " << excited_error << " Nm");
    // (measured: 11 % of the largest true torque from the task alone, 0.2 % with the excitation run)
    CHECK(task_error > 0.05 * largest);         // the task alone: the motion is extrapolated
    CHECK(excited_error < 0.02 * largest);      // with the excitation run: within 2 % of the effect
    CHECK(excited_error < 0.1 * task_error);
}

TEST_CASE("the payload model's centre uncertainty survives its JSON form and a bad entry is refused by name", "[dynamics][payload]") {
    const double pi = 3.14159265358979323846;
    PayloadModel m;
    m.model = DhModel({{JointType::Revolute, 0.0, pi / 2, 0.16, 0}, {JointType::Revolute, -0.42, 0, 0, 0}});
    m.signal_per_nm = {1.0, 1.0};
    m.relative_error = {0.03, 0.02};
    m.centre_uncertainty = {Eigen::Vector3d(0.004, 0, 0), Eigen::Vector3d(0, 0.003, 0), Eigen::Vector3d(0, 0, 0.2)};
    const PayloadModel back = payload_model_from_json(to_json(m), 2);
    REQUIRE(back.centre_uncertainty.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) CHECK((back.centre_uncertainty[k] - m.centre_uncertainty[k]).norm() < 1e-12);
    auto j = to_json(m);
    j["centre_uncertainty"][1] = {0.0, "far"};
    CHECK_THROWS_WITH(payload_model_from_json(j, 2), Catch::Contains("centre_uncertainty entry [0.0,\"far\"]") &&
                                                         Catch::Contains("[x, y, z] in m"));
    j = to_json(m);
    j["centre_uncertainty"].push_back({1.0, 0.0, 0.0});
    CHECK_THROWS_WITH(payload_model_from_json(j, 2), Catch::Contains("expected up to 3 vectors"));
    // A model from before the centre's uncertainty was kept: none (the relative error alone).
    j = to_json(m);
    j.erase("centre_uncertainty");
    CHECK(payload_model_from_json(j, 2).centre_uncertainty.empty());
}

TEST_CASE("the arm filter's causal acceleration misses at most its kink response of a changing acceleration, and its inertial "
          "torque is the model's",
          "[dynamics][arm]") {
    // An acceleration that begins to change at a constant rate somewhere between samples (a kink:
    // positions c (t - k)^3 / 6 after k): the filter's largest error over where the kink falls,
    // as a share of what the acceleration changes by over its span, is causal_kink_response().
    const double h = 0.004;
    for (const auto& [samples, order] : {std::pair<std::size_t, std::size_t>{5, 3}, {7, 3}, {15, 3}, {7, 2}}) {
        ArmDynamics arm = planar_arm_model();
        arm.causal_samples = samples;
        arm.causal_order = order;
        ArmDeviationFilter filter(arm);
        const std::size_t n = arm.model.dof();
        std::vector<double> q(n);
        const double span = h * static_cast<double>(samples - 1), rate = 40.0;  // rad/s^3
        double worst = 0.0;
        for (int step = 0; step < 200; ++step) {
            // within one sample period, once the fit's span has filled
            const double kink = h * (static_cast<double>(samples) + step / 200.0);
            filter.reset();
            for (std::size_t i = 0; i < 2 * samples + 5; ++i) {
                const double t = h * static_cast<double>(i), d = std::max(0.0, t - kink);
                for (std::size_t j = 0; j < n; ++j) q[j] = 0.1 * static_cast<double>(j) + rate * (1.0 + static_cast<double>(j)) * d * d * d / 6.0;
                filter.differentiate(t, q);
                if (i + 1 < samples) continue;  // the fit's span filled
                for (std::size_t j = 0; j < n; ++j) {
                    const double truth = rate * (1.0 + static_cast<double>(j)) * d;
                    worst = std::max(worst, std::abs(filter.acceleration()[j] - truth) / (rate * (1.0 + static_cast<double>(j)) * span));
                }
            }
        }
        INFO("order " << order << " over " << samples << " samples: largest error " << worst << " of the change over the span, kink response "
                      << filter.kink_response());
        CHECK(worst == Approx(filter.kink_response()).epsilon(0.01));
        CHECK(filter.kink_response() == Approx(causal_kink_response(samples, order)));
        if (order == 3) CHECK(filter.kink_response() == Approx(0.21).margin(0.01));
        if (order == 2) CHECK(filter.kink_response() == Approx(0.5).margin(0.01));
    }
    CHECK_THROWS_WITH(causal_kink_response(3, 3), Catch::Contains("order 3 over 3 samples"));

    // inertial_torque: M(q) a, the sum of the model's inertia columns (no velocity, gravity or offset).
    ArmDeviationFilter filter(planar_arm_model());
    const std::vector<double> pose{0.4, -0.9, 1.3}, a{2.0, -1.0, 0.5};
    REQUIRE(pose.size() == planar_arm_model().model.dof());
    std::vector<double> expected(pose.size(), 0.0), out(pose.size());
    for (std::size_t k = 0; k < pose.size(); ++k) {
        const auto column = modelled_inertia_column(planar_arm_model(), pose, k);
        for (std::size_t j = 0; j < pose.size(); ++j) expected[j] += column[j] * a[k];
    }
    filter.inertial_torque(pose, a, out);
    for (std::size_t j = 0; j < pose.size(); ++j) {
        INFO("joint " << j + 1);
        CHECK(std::abs(expected[j]) > 1e-3);
        CHECK(out[j] == Approx(expected[j]).margin(1e-9));
    }
}
