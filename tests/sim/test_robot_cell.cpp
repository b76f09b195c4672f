// The simulated cell: determinism, repeatability under irregular sampling, ground truth.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "identification_procedure.hpp"
#include "robot_cell.hpp"
#include "warpguard/calibration.hpp"
#include "warpguard/detector.hpp"
#include "warpguard/dynamics.hpp"
#include "warpguard/evaluation.hpp"
#include "warpguard/identification.hpp"
#include "warpguard/lever_length.hpp"
#include "warpguard/profile.hpp"
#include "warpguard/recording_csv.hpp"

using namespace warpguard;

namespace {

RobotDescription ur5e() { return load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/ur5e-like.json"); }

sim::Task ur5e_task(bool varying) {
    sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/ur5e-like-pick-and-place.json", 6);
    if (!varying) {
        for (auto& step : task.steps) {
            if (step.targets.size() > 1) step.targets.resize(1);  // always the same place
        }
    }
    return task;
}

std::string csv(const Recording& rec) {
    std::ostringstream out;
    write_recording(rec, out);
    return out.str();
}

// Calibration options for KA-mDTW with 3 reference cycles, the force straight down in the base
// frame (a carried part's weight).
CalibrationOptions ka_calibration(const RobotDescription& robot) {
    CalibrationOptions options;
    options.reference_cycles = 3;
    options.method = MatchingMethod::KaMdtw;
    options.kinematics = KinematicsSettings{robot.kinematics, ForceDirection::make(ForceDirection::Frame::Base, Eigen::Vector3d(0, 0, -1)),
                                            kDefaultMinLever, {}};
    return options;
}

// The sign of an unsigned current rebuilt over a whole recording (every sample its reference).
CurrentSign rebuild_whole(const DhModel& model, const Recording& current) {
    Reference whole;
    whole.t = current.t, whole.tau = current.tau, whole.q = current.q, whole.payload = current.payload;
    return rebuild_current_sign(model, whole);
}

// A push on `link` (1-based) from `start` (s): a ramp over `ramp` s to `peak` N, held `hold` s.
sim::Contact push_on(std::size_t link, double start, double peak, double ramp, double hold, const Eigen::Vector3d& direction) {
    sim::Contact push;
    push.start = start;
    push.link = link;
    push.profile = sim::Contact::Profile::Push;
    push.peak = peak;
    push.duration = ramp;
    push.hold = hold;
    push.direction = direction;
    return push;
}

// What the sign rebuild reads of cycles [first, last] of a recording (times, currents, angles), and
// in `at` which of its samples they are.
Recording cycles_of(const Recording& current, long first, long last, std::vector<std::size_t>& at) {
    at.clear();
    for (std::size_t k = 0; k < current.size(); ++k) {
        if (current.cycle[k] >= first && current.cycle[k] <= last) at.push_back(k);
    }
    Recording cut;
    cut.tau.assign(current.joints(), {});
    cut.q.assign(current.joints(), {});
    for (const std::size_t k : at) {
        cut.t.push_back(current.t[k]);
        for (std::size_t j = 0; j < current.joints(); ++j) cut.tau[j].push_back(current.tau[j][k]), cut.q[j].push_back(current.q[j][k]);
    }
    return cut;
}

// `robot` reporting an unsigned motor current in A (2 x rated torque / 50 A at the rated torque).
RobotDescription reporting_amps(RobotDescription robot) {
    robot.signal = SignalKind::Current;
    robot.unit = SignalUnit::A;
    for (auto& l : robot.links) l.rated_current = 2.0 * l.rated_torque / 50.0;
    return robot;
}

// A robot's task recorded twice with the same seed (the same samples): as a torque in Nm and as
// an unsigned current in `unit` (in A: 2 x rated torque / 50 A at the rated torque).
struct Twins {
    RobotDescription robot;
    Recording torque, current;
};
Twins record_twin_files(const std::string& robot_file, const std::string& task_file, std::uint64_t seed, std::size_t cycles,
                        SignalUnit unit) {
    Twins out;
    out.robot = load_robot_description(robot_file);
    const sim::Task task = sim::load_task(task_file, out.robot.dof());
    sim::CellOptions options;
    options.seed = seed;
    out.robot.signal = SignalKind::Torque;
    out.robot.unit = SignalUnit::Nm;
    out.torque = sim::RobotCell(out.robot, task, options).record(cycles);
    if (unit == SignalUnit::A) {
        out.robot = reporting_amps(out.robot);
    } else {
        out.robot.signal = SignalKind::Current;
        out.robot.unit = unit;
    }
    out.current = sim::RobotCell(out.robot, task, options).record(cycles);
    return out;
}
Twins record_twins(const std::string& name, const std::string& kind, std::uint64_t seed, std::size_t cycles, SignalUnit unit) {
    return record_twin_files(std::string(WARPGUARD_ROBOTS_DIR) + "/" + name + ".json",
                             std::string(WARPGUARD_TASKS_DIR) + "/" + name + "-" + kind + ".json", seed, cycles, unit);
}

// Joint j's samples whose current is over 30 % of its peak, and how many of them the rebuilt sign
// gives the torque's sign (`torque`: the same motion recorded as a torque).
struct SignAgreement {
    std::size_t same = 0, counted = 0;
};
SignAgreement sign_agreement(const Recording& current, const Recording& torque, const CurrentSign& rebuilt, std::size_t j) {
    const double peak = *std::max_element(current.tau[j].begin(), current.tau[j].end());
    SignAgreement out;
    for (std::size_t k = 0; k < current.size(); ++k) {
        if (current.tau[j][k] < 0.3 * peak) continue;
        ++out.counted;
        out.same += (rebuilt.sign[j][k] > 0) == (torque.tau[j][k] > 0);
    }
    return out;
}

// `cycles` cycles of `task` at `override_factor`, with `contacts` random collisions of 100-300 N.
Recording record_cell(const RobotDescription& robot, const sim::Task& task, std::size_t cycles, std::uint64_t seed,
                      double override_factor, std::size_t contacts, std::vector<sim::OverrideChange> override_changes = {}) {
    sim::CellOptions options;
    options.seed = seed;
    options.speed_override = override_factor;
    options.override_changes = std::move(override_changes);
    sim::RobotCell cell(robot, task, options);
    if (contacts > 0) {
        const auto starts = cell.schedule(cycles);
        cell.set_contacts(sim::random_contacts(contacts, starts, starts[1] - starts[0], robot.dof(), 100.0, 300.0, seed + 7));
    }
    return cell.record(cycles);
}

// The runs both payload tests judge: the task with its own part for the reference (7 cycles) and
// the calibration (30), and with every grasped part twice as heavy for 10 nominal cycles and 11
// cycles with 10 collisions. `part` is the task's own mass.
struct HeavierPartRuns {
    double part = 0;
    Recording reference, calibration, heavy, heavy_hits;
};
HeavierPartRuns record_heavier_part_runs(const RobotDescription& robot, const sim::Task& task) {
    HeavierPartRuns r;
    sim::Task heavy_task = task;
    for (auto& step : heavy_task.steps) {
        if (step.kind == sim::TaskStep::Kind::Grasp) r.part = step.mass, step.mass *= 2.0;
    }
    r.reference = record_cell(robot, task, 7, 51, 1.0, 0);
    r.calibration = record_cell(robot, task, 30, 52, 1.0, 0);
    r.heavy = record_cell(robot, heavy_task, 10, 53, 1.0, 0);
    r.heavy_hits = record_cell(robot, heavy_task, 11, 54, 1.0, 10);
    return r;
}


// A default profile with the speed model, calibrated at 100 %: reference 7 cycles (seed), 12
// calibration cycles (seed + 1), 3 reference cycles; with the arm model from the calibration
// cycles if asked (as `warpguard calibrate --model` fits it).
Profile speed_profile(const RobotDescription& robot, const sim::Task& task, std::uint64_t seed, bool arm_from_nominal = false) {
    const Recording reference = record_cell(robot, task, 7, seed, 1.0, 0);
    const Recording calibration = record_cell(robot, task, 12, seed + 1, 1.0, 0);
    CalibrationOptions options;
    options.reference_cycles = 3;
    options.dynamics_model = robot.kinematics;
    options.arm_from_nominal = arm_from_nominal;
    const NamedRecording nominal{"calibration", &calibration};
    return calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
}

// The IRB120-like pick-and-place: its robot, task, and its speed_profile (seeds 51, 52).
struct Irb120Speed {
    RobotDescription robot = load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/irb120-like.json");
    sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/irb120-like-pick-and-place.json", 6);
    Profile profile = speed_profile(robot, task, 51);
};

// The held-out LR Mate-like driving screws (samples/held-out): its robot, task, and its speed_profile
// (seeds 71, 72).
struct LrMateScrewing {
    std::string held_out = std::string(WARPGUARD_ROBOTS_DIR) + "/../held-out";
    RobotDescription robot = load_robot_description(held_out + "/lrmate-like.json");
    sim::Task task = sim::load_task(held_out + "/lrmate-like-screwing.json", 6);
    Profile profile = speed_profile(robot, task, 71);
};

}  // namespace

TEST_CASE("the same seed gives byte-identical recordings, another seed does not", "[sim][cell]") {
    sim::CellOptions options;
    options.seed = 5;
    sim::RobotCell a(ur5e(), ur5e_task(true), options);
    const std::string first = csv(a.record(3));
    sim::RobotCell b(ur5e(), ur5e_task(true), options);
    const std::string second = csv(b.record(3));
    CHECK(first.size() > 100000);
    CHECK(first == second);
    options.seed = 6;
    sim::RobotCell c(ur5e(), ur5e_task(true), options);
    CHECK(csv(c.record(3)) != first);
}

TEST_CASE("nominal cycles repeat within the configured noise once time-aligned, with different sample counts",
          "[sim][cell]") {
    sim::CellOptions options;
    options.seed = 9;
    sim::RobotCell cell(ur5e(), ur5e_task(false), options);
    const std::size_t cycles = 5;
    const Recording rec = cell.record(cycles);
    const auto spans = rec.complete_cycles();
    REQUIRE(spans.size() == cycles);
    for (std::size_t c = 0; c < cycles; ++c) CHECK(spans[c].counter == static_cast<std::int64_t>(c + 1));

    // The background task's irregular sampling: the cycles have different sample counts.
    std::vector<std::size_t> counts;
    for (const auto& s : spans) counts.push_back(s.size());
    CHECK(*std::max_element(counts.begin(), counts.end()) > *std::min_element(counts.begin(), counts.end()));

    // Time-aligned (by time since each cycle's first sample) the torques agree within the noise:
    // cycle 2 against cycle 4, by linear interpolation of cycle 4 at cycle 2's sample times.
    const auto& a = spans[1];
    const auto& b = spans[3];
    const RobotDescription robot = ur5e();
    for (std::size_t j = 0; j < 6; ++j) {
        const double sigma = options.signal.noise * robot.links[j].rated_torque;
        double sum_sq = 0.0;
        std::size_t count = 0;
        std::size_t kb = b.begin;
        for (std::size_t ka = a.begin; ka < a.end; ++ka) {
            const double t = rec.t[ka] - rec.t[a.begin] + rec.t[b.begin];
            while (kb + 1 < b.end && rec.t[kb + 1] < t) ++kb;
            if (kb + 1 >= b.end || rec.t[kb] > t) continue;
            const double w = (t - rec.t[kb]) / (rec.t[kb + 1] - rec.t[kb]);
            const double other = rec.tau[j][kb] + w * (rec.tau[j][kb + 1] - rec.tau[j][kb]);
            sum_sq += (rec.tau[j][ka] - other) * (rec.tau[j][ka] - other);
            ++count;
        }
        const double rms = std::sqrt(sum_sq / static_cast<double>(count));
        // Two independent noisy samples differ by sqrt(2) sigma in RMS (interpolation averages a
        // little of it away); allow 50 % for what interpolation cannot follow.
        INFO("joint " << j + 1 << ": rms difference " << rms << " Nm, noise sigma " << sigma << " Nm");
        CHECK(count > 800);
        CHECK(rms < 1.5 * std::sqrt(2.0) * sigma);
        CHECK(rms > 0.5 * sigma);  // the noise really is there
    }
}

TEST_CASE("contacts are in the ground truth with their peak force and link", "[sim][cell]") {
    sim::CellOptions options;
    options.seed = 3;
    sim::RobotCell cell(ur5e(), ur5e_task(true), options);
    const auto starts = cell.schedule(4);
    const sim::Contact push = push_on(3, starts[2] + 1.0, 80.0, 0.3, 0.2, Eigen::Vector3d(0, 0, 1));
    cell.set_contacts({push});
    const Recording rec = cell.record(4);
    const auto& gt = *rec.ground_truth;
    double peak = 0.0;
    std::size_t first = rec.size(), contact_samples = 0;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        if (!gt.contact[i]) continue;
        ++contact_samples;
        first = std::min(first, i);
        peak = std::max(peak, gt.contact_force[i]);
        CHECK(gt.contact_link[i] == 3);
    }
    CHECK(peak == Approx(80.0));
    CHECK(rec.t[first] >= push.start + 0.2 - 1e-9);  // the robot clock starts 0.2 s before cycle 1
    CHECK(contact_samples > 100);                      // 0.6 s of contact at about 4 ms per sample
    // Its age puts the onset where the push began (its ramp's first simulation step of 1 ms), between
    // the sample before and the first that carries it, and grows with the clock while it lasts.
    REQUIRE(gt.contact_age.size() == rec.size());
    REQUIRE(first > 0);
    const double onset = rec.t[first] - gt.contact_age[first];
    INFO("first contact sample at " << rec.t[first] << " s, age " << gt.contact_age[first] << " s, the sample before at "
                                    << rec.t[first - 1] << " s");
    CHECK(onset == Approx(push.start + 0.2).margin(0.0011));
    CHECK(onset > rec.t[first - 1]);
    CHECK(gt.contact_age[first] > 0.0);
    for (std::size_t i = first + 1; i < first + contact_samples; ++i) {
        CHECK(gt.contact_age[i] - gt.contact_age[i - 1] == Approx(rec.t[i] - rec.t[i - 1]).margin(2e-6));
    }
    CHECK(gt.contact_age[first - 1] == 0.0);
    CHECK(gt.contact_age[first + contact_samples] == 0.0);
    // The push moves joint 2 and 3 torques (it acts on link 3).
    CHECK(rec.cycle[first] == 3);
}

TEST_CASE("a contact on a link with no length of its own turns the joints before it: the 7-axis arm's link 2",
          "[sim][cell]") {
    // The held-out LBR7-like's link 2 has DH a = d = 0: its frame is the shoulder's axis intersection,
    // on the axes of joints 1 and 2 (and 3, which is beyond it). A push there turned no joint (236-272 N
    // moved the torques by at most 0.18 Nm, docs/detection.md); the link now reaches up the upper arm
    // to the elbow, as a housing would, and a push on it loads joints 1 and 2 by its lever.
    const std::string held_out = std::string(WARPGUARD_ROBOTS_DIR) + "/../held-out/";
    const RobotDescription robot = load_robot_description(held_out + "lbr7-like.json");
    const sim::Task task = sim::load_task(held_out + "lbr7-like-kitting.json", robot.dof());
    const DhModel& dh = robot.kinematics;
    REQUIRE(dh.link_transform(1, 0.0).translation().norm() == 0.0);
    // Link 2 reaches to frame 3's origin, d3 up the upper arm; a link with a length keeps its own end.
    const Eigen::Vector3d elbow = (dh.link_transform(1, 0.0) * dh.link_transform(2, 0.0)).translation();
    CHECK(elbow.norm() > 0.3);
    CHECK((sim::contact_reach(dh, 2) - elbow).norm() < 1e-12);
    CHECK((sim::contact_reach(dh, 3) - dh.link_transform(2, 0.0).translation()).norm() == 0.0);
    CHECK((sim::contact_reach(dh, 7) - dh.link_transform(6, 0.0).translation()).norm() == 0.0);
    CHECK_THROWS_WITH(sim::contact_reach(dh, 8), Catch::Contains("contact link 8") && Catch::Contains("1..7"));

    sim::CellOptions options;
    options.seed = 5;
    sim::RobotCell quiet(robot, task, options);
    const auto starts = quiet.schedule(2);
    const Recording twin = quiet.record(2);
    sim::Contact push = push_on(2, starts[1] + 2.0, 150.0, 0.4, 0.3, Eigen::Vector3d(1, 1, 0));
    push.along = 0.7;
    sim::RobotCell pushed(robot, task, options);
    pushed.set_contacts({push});
    const Recording rec = pushed.record(2);
    REQUIRE(rec.size() == twin.size());
    const auto& gt = *rec.ground_truth;
    // While the push holds its peak the servo holds the path, so the joints' torques answer the
    // push's own torque about each axis: ((p - o_k) x f) . z_k, with p on link 2, 0.7 of the way to
    // the elbow.
    const Eigen::Vector3d f = push.peak * push.direction.normalized();
    std::vector<Eigen::Isometry3d> frames(robot.dof() + 2);
    std::size_t held = 0;
    double largest_lever_torque = 0.0, worst_mismatch = 0.0, largest_beyond = 0.0;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        if (!gt.contact[i] || gt.contact_force[i] < 0.999 * push.peak) continue;
        ++held;
        std::vector<double> q(robot.dof());
        for (std::size_t j = 0; j < robot.dof(); ++j) q[j] = rec.q[j][i];
        dh.forward(q, frames);
        // frames[1]: joint 2's frame, at the shoulder; frames[3]: the elbow, whatever joint 3's angle.
        const Eigen::Vector3d p = frames[1].translation() + push.along * (frames[3].translation() - frames[1].translation());
        for (std::size_t j = 0; j < 2; ++j) {
            const double external = (p - frames[j].translation()).cross(f).dot(frames[j].linear().col(2));
            const double answered = rec.tau[j][i] - twin.tau[j][i];
            largest_lever_torque = std::max(largest_lever_torque, std::abs(external));
            worst_mismatch = std::max(worst_mismatch, std::abs(answered + external));
        }
        for (std::size_t j = 2; j < robot.dof(); ++j) largest_beyond = std::max(largest_beyond, std::abs(rec.tau[j][i] - twin.tau[j][i]));
    }
    INFO(held << " samples at the peak; the push's torque about joints 1-2 up to " << largest_lever_torque
              << " Nm, answered within " << worst_mismatch << " Nm; joints 3-7 moved up to " << largest_beyond << " Nm");
    REQUIRE(held > 50);
    CHECK(largest_lever_torque > 0.1 * push.peak * push.along * elbow.norm());
    CHECK(worst_mismatch < 0.2 * largest_lever_torque);
    CHECK(largest_beyond < 0.2 * largest_lever_torque);
}

TEST_CASE("task files name what is wrong", "[sim][task]") {
    nlohmann::json j = {{"name", "t"}, {"home", {0, 0}}, {"max_velocity", {1, 1}}, {"max_acceleration", {1, 1}},
                        {"steps", {{{"move", {0.1, 0.2, 0.3}}}}}};
    CHECK_THROWS_WITH(sim::task_from_json(j, 2), Catch::Contains("t.steps[0].move must be an array of 2 numbers"));
    j["steps"] = {{{"jump", 1}}};
    CHECK_THROWS_WITH(sim::task_from_json(j, 2), Catch::Contains("expected one of move, move_variants, wait, grasp, release"));
    j["steps"] = {{{"wait", -1}}};
    CHECK_THROWS_WITH(sim::task_from_json(j, 2), Catch::Contains("t.steps[0].wait must be >= 0 s, got -1"));
}

TEST_CASE("STOP brakes the robot to a standstill along its path and holds it — RESUME continues the program",
          "[sim][cell][stop]") {
    sim::CellOptions options;
    options.seed = 4;
    sim::RobotCell reference_cell(ur5e(), ur5e_task(false), options);
    const Recording plain = reference_cell.record(2);

    const double stop_at = reference_cell.cycle_starts()[1] + 1.2;  // during a move of cycle 2
    const double resume_at = stop_at + 1.0;
    std::vector<double> stop_window_q;
    sim::RobotCell cell(ur5e(), ur5e_task(false), options);
    cell.set_options_hook([&](const Sample& s) {
        const double t = s.t - 0.2;  // the robot clock starts 0.2 s before the first cycle
        if (t >= stop_at && t < resume_at) return sim::Reply::Stop;
        if (t >= resume_at) return sim::Reply::Resume;
        return sim::Reply::Continue;
    });
    const Recording rec = cell.record(2);
    REQUIRE(cell.stop_time().has_value());
    CHECK(*cell.stop_time() == Approx(stop_at).margin(0.01));
    // Still every cycle, complete, and later by the hold plus the braking and restarting.
    CHECK(rec.complete_cycles().size() == 2);
    const double longer = rec.t.back() - plain.t.back();
    INFO("the run took " << longer << " s longer");
    CHECK(longer > 0.9);
    CHECK(longer < 1.3);
    // Standstill from brake_time after the stop until the resume: the joints barely move.
    double moved = 0.0, before = 0.0;
    for (std::size_t i = 1; i < rec.size(); ++i) {
        const double t = rec.t[i] - 0.2;
        for (std::size_t j = 0; j < 6; ++j) {
            const double dq = std::abs(rec.q[j][i] - rec.q[j][i - 1]);
            if (t > stop_at + options.brake_time + 0.1 && t < resume_at) moved = std::max(moved, dq);
            if (t > stop_at - 0.2 && t < stop_at) before = std::max(before, dq);
        }
    }
    INFO("largest joint step per sample while held " << moved << " rad, just before the stop " << before << " rad");
    CHECK(before > 1e-3);   // it was really moving
    CHECK(moved < 1e-5);    // and it really stands
}

TEST_CASE("turning the speed override mid-run slows the task in time along the same path", "[sim][cell][override]") {
    sim::CellOptions options;
    options.seed = 4;
    sim::RobotCell plain_cell(ur5e(), ur5e_task(false), options);
    const Recording plain = plain_cell.record(2);

    // During a move of cycle 2 the operator turns the knob to 60 %.
    const double turn_at = plain_cell.cycle_starts()[1] + 1.2;
    options.override_changes = {{turn_at, 0.6}};
    sim::RobotCell cell(ur5e(), ur5e_task(false), options);
    const Recording rec = cell.record(2);
    CHECK(rec.complete_cycles().size() == 2);
    // The rest of the task, R s of task time at 100 %, runs at 60 % once the ramp is over: the ramp
    // (0.4 x override_ramp = 0.2 s, minimum jerk, so 0.8 on average) covers 0.16 s of task time.
    const double ramp = 0.4 * options.override_ramp;
    const double rest = plain.t.back() - (turn_at + 0.2);  // the robot clock starts 0.2 s before the task
    const double expected = turn_at + 0.2 + ramp + (rest - 0.8 * ramp) / 0.6;
    INFO("the run ended at " << rec.t.back() << " s, expected " << expected << " s; at 100 %: " << plain.t.back() << " s");
    CHECK(rec.t.back() == Approx(expected).margin(0.02 * (expected - plain.t.back())));
    // Scaled in time, not in shape: the two runs trace the same path. The discrete Frechet distance
    // between their joint-angle sequences (the least, over every monotone pairing of their samples,
    // of the largest distance of a pair; max over joints) says how far apart they ever are.
    std::vector<double> previous(plain.size()), current(plain.size());
    auto distance = [&](std::size_t i, std::size_t k) {
        double d = 0.0;
        for (std::size_t j = 0; j < 6; ++j) d = std::max(d, std::abs(rec.q[j][i] - plain.q[j][k]));
        return d;
    };
    for (std::size_t i = 0; i < rec.size(); ++i) {
        for (std::size_t k = 0; k < plain.size(); ++k) {
            double before = std::numeric_limits<double>::infinity();
            if (i > 0) before = std::min(before, previous[k]);
            if (k > 0) before = std::min(before, current[k - 1]);
            if (i > 0 && k > 0) before = std::min(before, previous[k - 1]);
            current[k] = std::max(distance(i, k), i == 0 && k == 0 ? 0.0 : before);
        }
        std::swap(previous, current);
    }
    const double off_path = previous.back();
    // Two samplings of one path lie up to half a sample's step apart.
    double step = 0.0;
    for (std::size_t k = 1; k < plain.size(); ++k) {
        for (std::size_t j = 0; j < 6; ++j) step = std::max(step, std::abs(plain.q[j][k] - plain.q[j][k - 1]));
    }
    INFO("Frechet distance from the path at 100 %: " << off_path << " rad; largest step per sample " << step << " rad");
    CHECK(off_path < 0.6 * step);

    sim::CellOptions bad = options;
    bad.override_changes = {{turn_at, 0.0}};
    CHECK_THROWS_WITH(sim::RobotCell(ur5e(), ur5e_task(false), bad), Catch::Contains("to 0 is outside (0, 1.5]"));
    bad.override_changes = {{5.0, 0.8}, {3.0, 1.0}};
    CHECK_THROWS_WITH(sim::RobotCell(ur5e(), ur5e_task(false), bad), Catch::Contains("at 3 s comes before the one at 5 s"));
    bad.override_changes = {};
    bad.override_ramp = 0.1;
    CHECK_THROWS_WITH(sim::RobotCell(ur5e(), ur5e_task(false), bad), Catch::Contains("ramp 0.1 s is shorter than the brake's 0.15 s"));
}

TEST_CASE("on the task's clock a contact waits for a held robot to resume and meets it moving", "[sim][cell][stop]") {
    // The robot is held for 2 s by a STOP 1 s before a planned push. On the simulation clock the
    // push lands on the standing robot; on the task's clock it comes when the task, resumed,
    // reaches the planned moment: 2 s later (the task advances half the brake time while braking
    // and lags half of it while restarting).
    sim::CellOptions options;
    options.seed = 5;
    const sim::RobotCell planner(ur5e(), ur5e_task(false), options);
    const auto starts = planner.schedule(3);
    const double planned = starts[1] + 1.6;  // during the first move of cycle 2
    const double stop_at = planned - 1.0, resume_at = stop_at + 2.0;
    sim::Contact push;
    push.start = planned;
    push.link = 3;
    push.profile = sim::Contact::Profile::Push;
    push.peak = 60.0;
    push.duration = 0.2;
    push.hold = 0.1;
    auto run = [&](bool task_clock, double& onset, double& speed_at_onset) {
        sim::CellOptions o = options;
        o.disturb_in_task_time = task_clock;
        sim::RobotCell cell(ur5e(), ur5e_task(false), o);
        cell.set_contacts({push});
        cell.set_options_hook([&](const Sample& s) {
            const double t = s.t - 0.2;  // the robot clock starts 0.2 s before the first cycle
            if (t >= stop_at && t < resume_at) return sim::Reply::Stop;
            return t >= resume_at ? sim::Reply::Resume : sim::Reply::Continue;
        });
        const Recording rec = cell.record(3);
        const auto& gt = *rec.ground_truth;
        const auto first = std::find(gt.contact.begin(), gt.contact.end(), 1);
        REQUIRE(first != gt.contact.end());
        const std::size_t i = static_cast<std::size_t>(first - gt.contact.begin());
        onset = rec.t[i] - 0.2;
        speed_at_onset = 0.0;
        for (std::size_t j = 0; j < 6; ++j) {
            speed_at_onset = std::max(speed_at_onset, std::abs(rec.q[j][i] - rec.q[j][i - 1]) / (rec.t[i] - rec.t[i - 1]));
        }
    };
    double sim_onset = 0, sim_speed = 0, task_onset = 0, task_speed = 0;
    run(false, sim_onset, sim_speed);
    run(true, task_onset, task_speed);
    INFO("onset on the simulation clock " << sim_onset << " s (joint speed " << sim_speed << " rad/s), on the task's "
                                          << task_onset << " s (" << task_speed << " rad/s)");
    CHECK(sim_onset == Approx(planned).margin(0.01));
    CHECK(sim_speed < 1e-3);                                  // the held robot stands
    CHECK(task_onset > resume_at);                            // after the resume
    CHECK(task_onset - planned == Approx(2.0).margin(0.02));  // delayed by the hold
    CHECK(task_speed > 0.05);                                 // and it meets the robot moving
}

TEST_CASE("an obstacle in the path makes a contact force — stopping soon after contact limits its peak", "[sim][cell][obstacle]") {
    sim::CellOptions options;
    options.seed = 8;
    sim::RobotCell free_cell(ur5e(), ur5e_task(false), options);
    const auto starts = free_cell.schedule(2);
    sim::Obstacle obstacle;
    obstacle.task_time = starts[1] + 1.5;  // where the tool will be 1.5 s into cycle 2
    obstacle.start = obstacle.task_time - 0.6;  // in place well before the tool arrives
    sim::RobotCell hit(ur5e(), ur5e_task(false), options);
    hit.set_obstacle(obstacle);
    const Recording rec = hit.record(2);
    const auto& gt = *rec.ground_truth;
    std::size_t first = rec.size();
    for (std::size_t i = 0; i < rec.size() && first == rec.size(); ++i) {
        if (gt.contact[i]) first = i;
    }
    REQUIRE(first < rec.size());
    const double without_stop = hit.peak_contact_force();
    CHECK(gt.contact_link[first] >= 5);  // the wrist or the tool meets it
    CHECK(rec.cycle[first] == 2);
    // MuJoCo found the contact in a step before this sample: its age is at least that step (1 ms),
    // and the onset it gives is no earlier than the sample before.
    CHECK(gt.contact_age[first] >= 0.001);
    CHECK(rec.t[first] - gt.contact_age[first] >= rec.t[first - 1] - 1e-9);

    // The same run, told to stop 30 ms after the first contact (a detection's delay).
    sim::RobotCell stopped(ur5e(), ur5e_task(false), options);
    stopped.set_obstacle(obstacle);
    stopped.set_stop_at(rec.t[first] - 0.2 + 0.03);
    stopped.record(2);
    const double with_stop = stopped.peak_contact_force();
    INFO("peak contact force without a stop " << without_stop << " N, with a stop after 30 ms " << with_stop << " N");
    CHECK(without_stop > 100.0);
    // Braking takes 150 ms, so the stop lowers the peak rather than removing it (the wrist touches
    // the box as it is lowered, 276 N); without it the arm runs on into the rigid box with its
    // motors at peak torque (24 kN). The stop must never raise it.
    CHECK(with_stop < without_stop);
}

TEST_CASE("a box lowered onto a held robot rests on it, and on the task's clock it comes in the planned cycle", "[sim][cell][obstacle]") {
    // The robot is stopped where the tool will be 1.5 s into cycle 2 and held there; the box is
    // lowered onto that point 0.5 s later (at 1.7 m/s: 0.5 m in 0.3 s). Driven into place it
    // pressed the held arm with 1,841 N (measured before the box was lowered rather than driven);
    // lowered, it stops where it touches: what is left is the box's own impact.
    sim::CellOptions options;
    options.seed = 8;
    const sim::RobotCell planner(ur5e(), ur5e_task(false), options);
    const auto starts = planner.schedule(3);
    sim::Obstacle obstacle;
    obstacle.task_time = starts[1] + 1.5;
    obstacle.start = obstacle.task_time + 0.5;
    obstacle.hold = 0.5;
    sim::RobotCell held(ur5e(), ur5e_task(false), options);
    held.set_obstacle(obstacle);
    held.set_stop_at(obstacle.task_time - 0.075);  // the task advances half the 150 ms brake time
    const Recording rec = held.record(2);
    std::size_t touches = 0;
    for (auto c : rec.ground_truth->contact) touches += c;
    INFO("samples in contact " << touches << ", peak force on the held robot " << held.peak_contact_force() << " N");
    CHECK(touches > 0);                          // it came down onto the tool
    CHECK(held.peak_contact_force() < 300.0);    // and rested there (measured 143 N)

    // Live, the box on the task's clock: a 2 s hold in cycle 1 delays the box by the same time, so
    // it meets the task where it would have without the hold. On the simulation clock it does not.
    sim::Obstacle planned;
    planned.task_time = starts[1] + 1.5;
    planned.start = planned.task_time - 0.6;
    planned.hold = 2.0;
    const double stop_at = starts[1] - 1.0, resume_at = stop_at + 2.0;
    auto first_contact = [&](bool hold, bool task_clock) {
        sim::CellOptions o = options;
        o.disturb_in_task_time = task_clock;
        sim::RobotCell cell(ur5e(), ur5e_task(false), o);
        cell.set_obstacle(planned);
        if (hold) {
            cell.set_options_hook([&](const Sample& s) {
                const double t = s.t - 0.2;  // the robot clock starts 0.2 s before the first cycle
                if (t >= stop_at && t < resume_at) return sim::Reply::Stop;
                return t >= resume_at ? sim::Reply::Resume : sim::Reply::Continue;
            });
        }
        const Recording r = cell.record(3);
        const auto first = std::find(r.ground_truth->contact.begin(), r.ground_truth->contact.end(), 1);
        REQUIRE(first != r.ground_truth->contact.end());
        return r.t[static_cast<std::size_t>(first - r.ground_truth->contact.begin())] - 0.2 - planned.task_time;
    };
    const double free_run = first_contact(false, false), sim_clock = first_contact(true, false), task_clock = first_contact(true, true);
    INFO("first contact with the box, s from the planned task time: " << free_run << " without the hold, " << sim_clock
                                                                      << " with it on the simulation clock, " << task_clock << " on the task's");
    CHECK(task_clock - free_run == Approx(2.0).margin(0.02));
    CHECK(std::abs(sim_clock - free_run - 2.0) > 0.1);
}

TEST_CASE("snap-fit and screwing are intended contacts: in the torques, not in the collision ground truth",
          "[sim][cell][contact-task]") {
    const RobotDescription robot = ur5e();
    const sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/ur5e-like-assembly.json", 6);
    sim::CellOptions options;
    options.seed = 2;
    options.signal.noise = 0.0;  // to see the contact torques themselves
    sim::RobotCell cell(robot, task, options);
    const Recording rec = cell.record(1);
    CHECK(std::all_of(rec.ground_truth->contact.begin(), rec.ground_truth->contact.end(), [](auto c) { return c == 0; }));

    // The same cycle with the presses removed: the difference is the intended contact's torque.
    sim::Task quiet = task;
    for (auto& step : quiet.steps) {
        if (step.kind == sim::TaskStep::Kind::Press) step.magnitude = 1e-9;
    }
    sim::RobotCell quiet_cell(robot, quiet, options);
    const Recording base = quiet_cell.record(1);
    REQUIRE(base.size() == rec.size());  // same seed: same sampling instants
    double snap = 0.0, screw = 0.0;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        snap = std::max(snap, std::abs(rec.tau[1][i] - base.tau[1][i]));   // a push along the tool axis loads joint 2
        screw = std::max(screw, std::abs(rec.tau[5][i] - base.tau[5][i]));  // a torque about the tool axis is joint 6's
    }
    INFO("largest joint-2 change " << snap << " Nm, joint-6 change " << screw << " Nm");
    CHECK(snap > 5.0);               // 60 N at roughly 0.1-0.5 m
    CHECK(screw == Approx(3.0).margin(0.05));  // the 3 Nm tightening torque, within quantisation
}

TEST_CASE("a current signal is reported as an unsigned magnitude, in A or percent", "[sim][cell][units]") {
    RobotDescription robot = ur5e();
    const sim::Task task = ur5e_task(false);
    sim::CellOptions options;
    options.seed = 12;
    sim::RobotCell torque_cell(robot, task, options);
    const Recording torque = torque_cell.record(1);

    robot = reporting_amps(robot);
    sim::RobotCell amps_cell(robot, task, options);
    const Recording amps = amps_cell.record(1);
    REQUIRE(amps.size() == torque.size());
    CHECK(amps.info().signal == SignalKind::Current);
    for (std::size_t i = 0; i < amps.size(); i += 97) {
        for (std::size_t j = 0; j < 6; ++j) {
            CHECK(amps.tau[j][i] >= 0.0);
            CHECK(amps.tau[j][i] == Approx(std::abs(torque.tau[j][i]) * 2.0 / 50.0).margin(1e-12));
        }
    }
}

TEST_CASE("an unsigned current's sign is rebuilt from the kinematics, and the detector follows the override with it",
          "[sim][units][speed]") {
    // The UR5e-like reporting its motor currents (magnitudes), against the same motion recorded as
    // torques (same seed: the same samples).
    RobotDescription robot = ur5e();
    const sim::Task task = ur5e_task(false);
    sim::CellOptions options;
    options.seed = 31;
    const Recording torque = sim::RobotCell(robot, task, options).record(4);
    robot = reporting_amps(robot);
    const Recording amps = sim::RobotCell(robot, task, options).record(4);
    REQUIRE(amps.size() == torque.size());
    const CurrentSign rebuilt = rebuild_whole(robot.kinematics, amps);
    REQUIRE(rebuilt.sign.size() == 6);
    for (std::size_t j = 0; j < 6; ++j) {
        // Where the current is over 30 % of its peak, the sign is the torque's - on a joint that
        // moves, its one free sign included (the fit absorbs it, non-negative friction sets it); a
        // joint that stays still (joint 5 in this task) shows no friction and its free sign is left
        // open.
        const auto [same, counted] = sign_agreement(amps, torque, rebuilt, j);
        REQUIRE(counted > 100);
        const auto [lowest, highest] = std::minmax_element(amps.q[j].begin(), amps.q[j].end());
        const bool moves = *highest - *lowest > 0.2;
        CHECK((moves || j == 4));
        const double agree = static_cast<double>(moves ? same : std::max(same, counted - same)) / static_cast<double>(counted);
        INFO("joint " << j + 1 << ": " << counted << " samples over 30 % of the peak, sign right on " << 100.0 * agree << " %");
        CHECK(agree > 0.95);
    }

    // Calibrated with the kinematics, the profile carries the signs and a speed model, and a run at
    // 70 % override stops far less often than the same profile without them (matched as recorded).
    const Recording reference_rec = sim::RobotCell(robot, task, options).record(4);
    options.seed = 32;
    const Recording nominal = sim::RobotCell(robot, task, options).record(12);
    CalibrationOptions calibration;
    calibration.reference_cycles = 3;
    calibration.dynamics_model = robot.kinematics;
    const NamedRecording noms[] = {{"nominal", &nominal}};
    const Profile profile = calibrate({"reference", &reference_rec}, noms, calibration);
    REQUIRE(profile.current_sign.size() == 6);
    REQUIRE(profile.speed.has_value());
    CHECK(profile.speed->uncertain_split == std::vector<bool>(6, true));
    Profile unsigned_profile = profile;
    unsigned_profile.current_sign.clear();
    unsigned_profile.speed.reset();
    sim::CellOptions slow_options;
    slow_options.seed = 33;
    slow_options.speed_override = 0.7;
    const Recording slow = sim::RobotCell(robot, task, slow_options).record(6);
    const auto stop_events = [&](const Profile& p) {
        Detector detector(p);
        std::vector<double> tau(6), q(6);
        std::size_t events = 0;
        bool stopped = false;
        for (std::size_t i = 0; i < slow.size(); ++i) {
            const bool stop = detector.update(slow.sample(i, tau, q)).stop();
            events += stop && !stopped;
            stopped = stop;
        }
        return events;
    };
    const std::size_t with_signs = stop_events(profile), as_recorded = stop_events(unsigned_profile);
    INFO("stop events at 70 % in 6 cycles: " << with_signs << " with the rebuilt signs, " << as_recorded << " matched as recorded");
    CHECK(as_recorded >= 10);
    CHECK(with_signs * 5 <= as_recorded);
}

TEST_CASE("an unsigned current's free sign per joint is the one whose fitted friction dissipates, on every arm and task of the suite",
          "[sim][units][speed]") {
    // Each joint's sign is free in the fit (it absorbs a flip); friction that may not be negative
    // sets it. Before that rule joints 2 and 3 of every arm came out flipped, and their fitted
    // Coulomb friction negative, which the speed model then dropped (no still-joint band). The sign
    // of the fitted friction's power, tried first, got joints 2 and 6 of the UR5e-like's assembly
    // task wrong here.
    for (const std::string name : {"ur5e-like", "irb120-like", "vp6242-like"}) {
        for (const std::string kind : {"pick-and-place", "assembly"}) {
            const auto [robot, torque, current] = record_twins(name, kind, 41, 3, SignalUnit::Percent);
            REQUIRE(current.size() == torque.size());
            const CurrentSign rebuilt = rebuild_whole(robot.kinematics, current);
            std::size_t moving = 0;
            for (std::size_t j = 0; j < robot.dof(); ++j) {
                const auto [lowest, highest] = std::minmax_element(current.q[j].begin(), current.q[j].end());
                if (*highest - *lowest < 0.05) continue;  // a joint that stays still shows no friction
                ++moving;
                const auto [same, counted] = sign_agreement(current, torque, rebuilt, j);
                INFO(name << " " << kind << ", joint " << j + 1 << ": the torque's sign on " << same << " of " << counted
                          << " samples over 30 % of the peak");
                REQUIRE(counted > 50);
                CHECK(2 * same > counted);
            }
            CHECK(moving >= 4);
        }
    }
}

TEST_CASE("an unsigned current's rebuilt sign is the torque's wherever the kinematics explain the current, on the suite's arms",
          "[sim][units][speed]") {
    // Each arm's pick-and-place as scripts/held-out-check.sh records its reference (7 cycles, seed
    // 7001; cycles 1-3 the reference, as calibration chooses them there), reported as a current in
    // A and recorded again as a torque (same seed: the same samples). On every joint that moves and
    // whose current the rigid-body fit explains (the rebuild's residual share under 5 %), the
    // samples whose rebuilt sign is not the torque's carry at most 5 % of the current (weighted by
    // |I|: a wrong sign near a zero crossing costs little). Before the starts with a viscous share
    // (2026-12-02) the IRB120-like's joint 1 was wrong on 5.7 % (a decelerating move against its
    // friction, the sign held through the torque's zero crossing), and that arm as a current
    // stopped 464 times in 100 cycles at 80 % override. Judged too: the VP-6242-like's joint 3,
    // which its own fit explains less well (residual share 0.10) and whose sign was wrong on 20.4 %
    // of its current before the joints' shared fit set it (flip_runs_by_shared_fit, 2026-12-02).
    for (const std::string name : {"ur5e-like", "irb120-like", "vp6242-like"}) {
        const auto [robot, torque, current] = record_twins(name, "pick-and-place", 7001, 7, SignalUnit::A);
        REQUIRE(current.size() == torque.size());
        std::vector<std::size_t> at;  // the samples of cycles 1-3
        const Recording cut = cycles_of(current, 1, 3, at);
        REQUIRE(at.size() > 1000);
        const CurrentSign rebuilt = rebuild_whole(robot.kinematics, cut);
        std::size_t judged = 0;
        for (std::size_t j = 0; j < robot.dof(); ++j) {
            const auto [lowest, highest] = std::minmax_element(cut.q[j].begin(), cut.q[j].end());
            const double residual = rebuilt.derivation["joints"][j]["residual_share"].get<double>();
            const bool shared = rebuilt.derivation["joints"][j]["in_shared_fit"].get<bool>();
            const bool vp_joint_3 = name == "vp6242-like" && j == 2;
            if (vp_joint_3) CHECK(shared);
            if (*highest - *lowest < 0.05 || (residual >= 0.05 && !vp_joint_3)) continue;
            ++judged;
            double wrong = 0, all = 0;
            for (std::size_t i = 0; i < at.size(); ++i) {
                const double magnitude = std::abs(cut.tau[j][i]), twin = torque.tau[j][at[i]];
                all += magnitude;
                if (twin != 0 && (rebuilt.sign[j][i] > 0) != (twin > 0)) wrong += magnitude;
            }
            INFO(name << ", joint " << j + 1 << " (residual share " << residual << (shared ? ", in the shared fit" : "")
                      << "): the sign wrong on " << 100.0 * wrong / all << " % of the current");
            CHECK(wrong <= 0.05 * all);
        }
        CHECK(judged >= 3);
    }
}

// A held-out robot's task reported as a current, as scripts/held-out-check.sh records its reference
// (7 cycles, seed 7001), with its torque twin: cycles 1..`last` cut as the reference calibration
// chose (`at`: which samples of the recording they are) and their sign rebuilt with the true
// kinematics.
struct RebuiltHeldOut {
    Twins twins;
    std::vector<std::size_t> at;
    Recording cut;
    CurrentSign rebuilt;
};
RebuiltHeldOut rebuild_held_out(const std::string& robot_file, const std::string& task_file, long last) {
    const std::string held_out = std::string(WARPGUARD_ROBOTS_DIR) + "/../held-out/";
    RebuiltHeldOut out;
    out.twins = record_twin_files(held_out + robot_file, held_out + task_file, 7001, 7, SignalUnit::A);
    REQUIRE(out.twins.current.size() == out.twins.torque.size());
    out.cut = cycles_of(out.twins.current, 1, last, out.at);
    out.rebuilt = rebuild_whole(out.twins.robot.kinematics, out.cut);
    return out;
}

TEST_CASE("an unsigned current's sign is rebuilt through a move whose acceleration outweighs the gravity torque: the GP8-like's shoulder",
          "[sim][units][speed]") {
    // The held-out GP8-like dispensing, reported as a current, as scripts/held-out-check.sh records
    // its reference (7 cycles, seed 7001; cycles 1-2 the reference, as calibration chose them).
    // Out of home the shoulder reads +12 Nm over a gravity torque of -3 Nm at rest; the alternation
    // from every start kept the rest's sign through that move (the fit of a constant sign left
    // 0.33 % of the current unexplained, the torque's sign 0.07 %): wrong on 11.7 % of the
    // current's rms, and that arm as a current stopped 1,668 times in 100 cycles at 80 % override
    // (docs/detection.md). Whole segments between the current's dips are now flipped where that
    // lowers the residual.
    const auto [twins, at, cut, rebuilt] = rebuild_held_out("gp8-like.json", "gp8-like-dispensing.json", 2);
    REQUIRE(at.size() > 4000);
    for (const std::size_t j : {std::size_t{1}, std::size_t{2}}) {  // the shoulder and the elbow, which the fit explains
        double wrong = 0, all = 0, out_of_home = 0;
        for (std::size_t i = 0; i < at.size(); ++i) {
            const double magnitude = std::abs(cut.tau[j][i]), twin = twins.torque.tau[j][at[i]];
            all += magnitude * magnitude;
            if (twin != 0 && (rebuilt.sign[j][i] > 0) != (twin > 0)) {
                wrong += 4 * magnitude * magnitude;
                if (i < 70) out_of_home += magnitude;
            }
        }
        INFO("joint " << j + 1 << ": the sign wrong on " << 100.0 * std::sqrt(wrong / all) << " % of the current's rms, "
                      << out_of_home << " A summed over the move out of home; segment flips "
                      << rebuilt.derivation["joints"][j]["segment_flips"].get<int>());
        CHECK(wrong <= 0.05 * 0.05 * all);
        CHECK(out_of_home < 0.5);
    }
}

TEST_CASE("an unsigned current's sign is rebuilt where the joint's torque is another link's weight: the 7-axis arm's joint 3",
          "[sim][units][speed]") {
    // The held-out LBR7-like kitting, reported as a current, as scripts/held-out-check.sh records
    // its reference (7 cycles, seed 7001; cycles 1-3 the reference, as calibration chose them).
    // Joint 3 turns the upper arm about its own axis: its torque comes mostly from the links beyond
    // it, not its own motion, and from every start built on its own velocity and acceleration
    // the alternation ended at all +1 (wrong on 76 % of the current, residual share 0.053 against
    // 0.031 with the torque's sign); that arm as a current stopped 10 times in 100 cycles at 80 %
    // override, on joint 3 (docs/detection.md). A joint left at one sign now gets starts from each
    // regressor column's sign too (here a wrist link's first moment; in the held-out check, the
    // identified model's last link's mass).
    const auto [twins, at, cut, rebuilt] = rebuild_held_out("lbr7-like.json", "lbr7-like-kitting.json", 3);
    REQUIRE(at.size() > 6000);
    for (const std::size_t j : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {  // joints 2-4, which the fit explains
        double wrong = 0, all = 0;
        for (std::size_t i = 0; i < at.size(); ++i) {
            const double magnitude = std::abs(cut.tau[j][i]), twin = twins.torque.tau[j][at[i]];
            all += magnitude;
            if (twin != 0 && (rebuilt.sign[j][i] > 0) != (twin > 0)) wrong += magnitude;
        }
        INFO("joint " << j + 1 << ": the sign wrong on " << 100.0 * wrong / all << " % of the current; start "
                      << rebuilt.derivation["joints"][j]["start"].get<std::string>());
        CHECK(wrong <= 0.02 * all);
    }
}

// A profile calibrated as scripts/held-out-check.sh calibrates (its calibration cycles' seed 7002),
// on 20 cycles and with the robot's true kinematics; and those cycles.
struct HeldOutCalibration {
    Profile profile;
    Recording nominal;
};
// `declared`: whether the calibration cycles keep the payload the program declares (the reference
// is the caller's).
HeldOutCalibration calibrate_as_held_out(const RobotDescription& robot, const sim::Task& task, const Recording& reference,
                                         bool declared = true) {
    HeldOutCalibration out;
    sim::CellOptions options;
    options.seed = 7002;
    out.nominal = sim::RobotCell(robot, task, options).record(20);
    if (!declared) out.nominal.payload.clear();
    CalibrationOptions calibration;
    calibration.dynamics_model = robot.kinematics;
    const NamedRecording noms[] = {{"nominal", &out.nominal}};
    out.profile = calibrate({"reference", &reference}, noms, calibration);
    return out;
}

TEST_CASE("an unsigned current's speed split is taken as uncertain: the VP-6242-like as current runs on at 80 % override",
          "[sim][units][speed]") {
    // The VP-6242-like's joint 5 as a current: its rebuilt sign is wrong in the fast move after the
    // part's release (friction torque, the sign turns + mid-move), and the speed model's split
    // fitted to it is several times the true one in the other moves. Trusted, that split stopped
    // the held-out check's 80 % run 2,304 times in 100 cycles; set to zero, joint 5 stopped none
    // (docs/detection.md). Calibration takes every rebuilt-sign joint's split as uncertain: the
    // reference may read as recorded or as the model says, for the rules and for the drift
    // learning. Recorded as scripts/held-out-check.sh records that robot (seeds 7001 / 7002 /
    // 7013), fewer cycles and with the robot's true kinematics. Measured with the declared part
    // before 2026-12-03: 0 events in 10 cycles with the split uncertain against 115 trusted (105
    // joint 5's, 10 joint 3's). Before the sign under a joint's dry friction was taken as uncertain
    // too (next test) the split's band alone left 69 against 213: the drift model learned from the
    // samples whose sign is wrong. On the held-out check's recordings 0 against 2,304 in 100 cycles
    // (17 with the band alone). Since 2026-12-03 the sign rebuild gives joint 5 the declared part as
    // a load (its sign wrong on 5.9 -> 0.1 % of its current over the 7 cycles), and with the part
    // the trusted split stops 17 times, not 115 (joint 3 5, joint 5 12). So the contrast is
    // measured without the declared part (measured here: 0 against 122, 116 joint 5's, 6 joint
    // 3's), and with it the profile must run on too.
    const RobotDescription robot = reporting_amps(load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/vp6242-like.json"));
    const sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/vp6242-like-pick-and-place.json", robot.dof());
    sim::CellOptions options;
    options.seed = 7001;
    const Recording declared = sim::RobotCell(robot, task, options).record(7);
    Recording reference = declared;
    reference.payload.clear();
    const auto [profile, nominal] = calibrate_as_held_out(robot, task, reference, false);
    const Profile with_part = calibrate_as_held_out(robot, task, declared).profile;
    options.seed = 7013;
    options.speed_override = 0.8;
    Recording slow = sim::RobotCell(robot, task, options).record(10);
    const Recording slow_with_part = slow;
    slow.payload.clear();
    REQUIRE(profile.speed.has_value());
    CHECK(profile.speed->uncertain_split == std::vector<bool>(robot.dof(), true));
    Profile trusted = profile;
    trusted.speed->uncertain_split.clear();
    std::string by_joint;
    const auto stop_events = [&](const Profile& p, const Recording& rec) {
        Detector detector(p);
        std::vector<double> tau(robot.dof()), q(robot.dof());
        std::vector<std::size_t> per_joint(robot.dof() + 1, 0);
        std::size_t events = 0;
        bool stopped = false;
        for (std::size_t i = 0; i < rec.size(); ++i) {
            const Decision d = detector.update(rec.sample(i, tau, q));
            const bool stop = d.stop();
            if (stop && !stopped) ++events, ++per_joint[std::min(d.joint, robot.dof())];
            stopped = stop;
        }
        std::ostringstream counts;
        for (const std::size_t c : per_joint) counts << ' ' << c;
        by_joint += " [" + counts.str() + " ]";
        return events;
    };
    const std::size_t uncertain = stop_events(profile, slow), with_trust = stop_events(trusted, slow);
    INFO("stop events at 80 % in 10 cycles: " << uncertain << " with the split uncertain, " << with_trust
                                              << " trusted (by joint, 0 = none to blame:" << by_joint << ")");
    CHECK(with_trust >= 50);
    CHECK(uncertain <= 2);
    // At the recorded speed the band is shut: the nominal cycles run as before.
    CHECK(stop_events(profile, nominal) == stop_events(trusted, nominal));
    // With the part declared.
    REQUIRE(with_part.speed.has_value());
    CHECK(with_part.speed->uncertain_split == std::vector<bool>(robot.dof(), true));
    const std::size_t declared_events = stop_events(with_part, slow_with_part);
    INFO("with the part declared: " << declared_events << " stop events at 80 % in 10 cycles" << by_joint);
    CHECK(declared_events <= 2);
    // A split that moves the reference across zero at the running speed, still uncertain: the
    // sample's sign is the one nearer either reading, the recorded one included. (Judged on the
    // model's reading alone the sample took the model's sign where the signal kept the recorded
    // one: the held-out check's VP-6242-like as current at 80 %, 17 stop events in 100 cycles on
    // joint 3 whose split had grown by a quarter.) Joint 3's split made ten times what was fitted:
    // measured here 0 stop events in 10 cycles; with the sign judged on the model's reading alone
    // (the code before 2026-12-03) 45 (6 times: 3; up to 4 times: 0 either way).
    Profile inflated = with_part;
    for (auto& v : inflated.speed->inertial[2]) v *= 10.0;
    for (auto& v : inflated.speed->viscous[2]) v *= 10.0;
    const std::size_t inflated_events = stop_events(inflated, slow_with_part);
    INFO("joint 3's split x 10, uncertain: " << inflated_events << " stop events at 80 % in 10 cycles" << by_joint);
    CHECK(inflated_events <= 2);
}

TEST_CASE("an unsigned current's sign under the joint's dry friction is uncertain: the VP-6242-like as current runs on as its friction rises",
          "[sim][units][speed]") {
    // Where a joint moves and reads less than its dry friction, the two signs need rigid-body
    // torques of the same sign that differ by less than twice the friction, and the rebuild gets
    // some of them wrong (the VP-6242-like's joint 3 at the start of its moves). There a friction
    // change reads the other way, so the rules take the drift model's correction on the nearer
    // side and the drift model learns nothing there. Recorded as scripts/held-out-check.sh records
    // that robot (seeds 7001 / 7002 / 7013), fewer cycles and the true kinematics; the torque twin
    // of the reference tells where its rebuilt sign is wrong. Measured: joint 3's sign wrong on
    // 4.1 % of its current, 81 % of that where the sign is taken as uncertain (1,543 of 2,993
    // samples); friction rising to +30 % over 40 cycles, 0 stop events, where the detector before
    // this stopped 69 times (joint 3, from the 25th cycle). A rise over 20 cycles: 9 (joint 5,
    // whose magnitude term learns too slowly without the uncertain samples) against 26; learning
    // there too gives 0, but makes the held-out check's 80 % run stop 21 times (docs/detection.md).
    const auto [robot, torque, reference] = record_twins("vp6242-like", "pick-and-place", 7001, 7, SignalUnit::A);
    const sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/vp6242-like-pick-and-place.json", robot.dof());
    const Profile profile = calibrate_as_held_out(robot, task, reference).profile;
    sim::CellOptions options;
    options.seed = 7013;
    options.friction_drift = 0.3;
    const Recording warming = sim::RobotCell(robot, task, options).record(40);
    REQUIRE(profile.current_sign.size() == robot.dof());
    const Reference& ref = profile.reference;
    Detector detector(profile);
    // Joint 3: the current its rebuilt sign gets wrong, and how much of it lies where the
    // detector takes the sign as uncertain.
    constexpr std::size_t j = 2;
    double wrong = 0, wrong_uncertain = 0, all = 0;
    std::size_t uncertain = 0;
    for (std::size_t k = 0; k < ref.size(); ++k) {
        const double magnitude = std::abs(ref.tau[j][k]), twin = torque.tau[j][ref.first_sample + k];
        all += magnitude;
        uncertain += detector.sign_uncertain(j, k);
        if (twin != 0 && (profile.current_sign[j][k] > 0) != (twin > 0)) {
            wrong += magnitude;
            if (detector.sign_uncertain(j, k)) wrong_uncertain += magnitude;
        }
    }
    INFO("joint 3: sign wrong on " << 100.0 * wrong / all << " % of the reference's current, " << 100.0 * wrong_uncertain / wrong
                                   << " % of that where the sign is taken as uncertain (" << uncertain << " of " << ref.size()
                                   << " samples)");
    CHECK(wrong > 0.01 * all);
    CHECK(wrong_uncertain >= 0.5 * wrong);
    const RunEvaluation run = evaluate_detector("drift", warming, detector);
    std::ostringstream by_joint;
    for (const auto& e : run.events) by_joint << ' ' << e.decision.joint << '@' << e.t;
    INFO("40 cycles to +30 % friction: " << run.events.size() << " stop events (joint@t:" << by_joint.str() << ")");
    CHECK(run.events.size() <= 2);
}

TEST_CASE("an own copy of the parameters that fails the speed model's safety net takes the shared set's physics: "
          "the IRB 1600-like as current runs on at 80 % override",
          "[sim][units][speed]") {
    // The IRB 1600-like (samples/held-out) reporting motor currents in A, palletizing. Joints the
    // shared parameter set explains poorly (its own fit under 90 %) keep their own copy of the
    // parameters, fitted to that joint's signal alone along one repeated path; for its wrist joint 5
    // that copy put an inertial part of several times the signal's range on it, the safety net
    // dropped it, and the joint was compared as recorded at every speed (the held-out check's
    // recordings at 80 % override: 1,676 stop events in 100 cycles, 1,675 joint 5's). Such a joint
    // now takes the shared set's physics with its own factor and friction (five parameters).
    // Recorded as scripts/held-out-check.sh records (seeds 7001 / 7002 / 7013), fewer cycles, the
    // true kinematics, and without the payload the program declares: with it the sign rebuild
    // gives joint 5 its sign (the declared part as a load, the test after this one), the shared set
    // explains the joint (90 %) and takes it in, and no joint needs this copy. Measured here until
    // 2026-12-04: joints 3 and 5 took it (rank 5), 6 stop events in 10 cycles at 80 % (joint 5)
    // against 168 with their splits dropped. Since the sign rebuild's starts from single regressor
    // columns (2026-12-04) joint 5's sign is found without the load too (wrong on 14 % of its
    // current, not 36 %), its own copy holds (89 % explained), and joint 3 alone takes the shared
    // set's physics: 2 stop events (joint 5) against 4 with joint 3's split dropped, 2 of them
    // joint 3's.
    const std::string held_out = std::string(WARPGUARD_ROBOTS_DIR) + "/../held-out";
    const RobotDescription robot = reporting_amps(load_robot_description(held_out + "/irb1600-like.json"));
    const sim::Task task = sim::load_task(held_out + "/irb1600-like-palletizing.json", robot.dof());
    sim::CellOptions options;
    options.seed = 7001;
    Recording reference = sim::RobotCell(robot, task, options).record(7);
    reference.payload.clear();
    const Profile profile = calibrate_as_held_out(robot, task, reference, false).profile;
    REQUIRE(profile.speed.has_value());
    const auto& fitted = profile.speed->derivation.at("joints");
    INFO("speed model: " << fitted.dump());
    // The joints that take the shared set's physics, and the same profile with their splits
    // dropped as the safety net dropped them before.
    Profile dropped = profile;
    std::vector<std::size_t> backed;
    for (std::size_t j = 0; j < robot.dof(); ++j) {
        if (!fitted[j].value("shared_backed", false)) continue;
        backed.push_back(j + 1);
        CHECK(fitted[j].at("rank").get<std::size_t>() <= 5);
        CHECK_FALSE(fitted[j].at("dropped").get<bool>());
        // Plausible: the part that scales with the speed within the signal's range.
        const auto [lo, hi] = std::minmax_element(profile.reference.tau[j].begin(), profile.reference.tau[j].end());
        CHECK(fitted[j].at("largest_inertial").get<double>() <= *hi - *lo);
        auto& s = *dropped.speed;
        std::fill(s.inertial[j].begin(), s.inertial[j].end(), 0.0);
        std::fill(s.viscous[j].begin(), s.viscous[j].end(), 0.0);
        std::fill(s.unexplained[j].begin(), s.unexplained[j].end(), 0.0);
        s.coulomb[j] = 0.0;
    }
    REQUIRE_FALSE(backed.empty());
    options.seed = 7013;
    options.speed_override = 0.8;
    const Recording slow = sim::RobotCell(robot, task, options).record(10);
    // All stop events, and in `on_backed` those of the joints that take the shared set's physics.
    const auto stop_events = [&](const Profile& p, std::string& by_joint, std::size_t& on_backed) {
        Detector detector(p);
        const RunEvaluation run = evaluate_detector("override 80 %", slow, detector);
        std::ostringstream out;
        for (const auto& e : run.events) {
            out << ' ' << e.decision.joint << '@' << e.t;
            on_backed += std::find(backed.begin(), backed.end(), e.decision.joint) != backed.end();
        }
        by_joint = out.str();
        return run.events.size();
    };
    std::string now_at, before_at;
    std::size_t now_backed = 0, before_backed = 0;
    const std::size_t now = stop_events(profile, now_at, now_backed), before = stop_events(dropped, before_at, before_backed);
    INFO("10 cycles at 80 %: " << now << " stop events with the shared set's physics (joint@t:" << now_at << "), " << before
                               << " with those joints' splits dropped (" << before_at << ")");
    CHECK(before_backed >= 2);
    CHECK(now_backed == 0);
    CHECK(now < before);
}

TEST_CASE("a part the program declares carrying is a load in the sign rebuild of a joint the shared set leaves out: the IRB 1600-like's "
          "wrist swinging a box",
          "[sim][units][speed]") {
    // The held-out IRB 1600-like palletizing a 4 kg box and the LR Mate-like screwing (samples/
    // held-out), reporting motor currents in A, against the same motions recorded as torques (same
    // seed: the same samples). The IRB 1600-like's wrist joint 5 carries mostly the box's swing
    // (joint 1 turns at up to 2 rad/s with it) and its dry friction, and the joints' shared fit
    // leaves it out (its own fit explains 79 %). Without a load that comes and goes with the
    // declared part no parameter could follow the box, and the joint fitted one sign throughout:
    // wrong on 36 % of its current in the held-out check's reference, and at 80 % override it
    // stopped 100 times in 100 cycles (docs/detection.md). (Since 2026-12-04 a joint left at one
    // sign gets starts from single regressor columns, which find part of its sign without the load:
    // wrong on 14 % here, 1.7 % with it.) The LR Mate-like's wrist joints 4 and 6
    // are left out too, but its 0.3 kg part explains little of what their own fit leaves: their signs
    // stay as without the load.
    const std::string held_out = std::string(WARPGUARD_ROBOTS_DIR) + "/../held-out";
    const auto twins = [&](const std::string& robot_file, const std::string& task_file) {
        return record_twin_files(held_out + "/" + robot_file, held_out + "/" + task_file, 7001, 7, SignalUnit::A);
    };
    // The share of joint j's current (weighted by |I|) whose rebuilt sign is not the torque's.
    const auto wrong_share = [](const Twins& t, const CurrentSign& rebuilt, std::size_t j) {
        double wrong = 0, all = 0;
        for (std::size_t k = 0; k < t.current.size(); ++k) {
            const double magnitude = std::abs(t.current.tau[j][k]), twin = t.torque.tau[j][k];
            all += magnitude;
            if (twin != 0 && (rebuilt.sign[j][k] > 0) != (twin > 0)) wrong += magnitude;
        }
        return wrong / all;
    };
    SECTION("the IRB 1600-like: joint 5 takes the load") {
        const Twins irb = twins("irb1600-like.json", "irb1600-like-palletizing.json");
        REQUIRE(irb.current.size() == irb.torque.size());
        REQUIRE(irb.current.declares_payload());
        Recording undeclared = irb.current;
        undeclared.payload.clear();
        const CurrentSign with_load = rebuild_whole(irb.robot.kinematics, irb.current);
        const CurrentSign without = rebuild_whole(irb.robot.kinematics, undeclared);
        const auto& joint5 = with_load.derivation["joints"][4];
        INFO("joint 5: " << joint5.dump());
        CHECK_FALSE(joint5["in_shared_fit"].get<bool>());
        REQUIRE(joint5.contains("with_declared_load"));
        CHECK(joint5["with_declared_load"]["taken"].get<bool>());
        const double wrong = wrong_share(irb, with_load, 4), wrong_without = wrong_share(irb, without, 4);
        INFO("joint 5's sign wrong on " << 100 * wrong << " % of its current with the declared part as a load, " << 100 * wrong_without
                                        << " % without");
        CHECK(wrong_without >= 4 * wrong);
        CHECK(wrong <= 0.05);
        // Every other joint: no worse than without the load by more than 1 % of its current.
        for (const std::size_t j : {0, 1, 2, 3, 5}) {
            INFO("joint " << j + 1 << ": " << 100 * wrong_share(irb, with_load, j) << " % with the load, "
                          << 100 * wrong_share(irb, without, j) << " % without");
            CHECK(wrong_share(irb, with_load, j) <= wrong_share(irb, without, j) + 0.01);
        }
    }
    SECTION("the LR Mate-like: the load explains little, the signs stay") {
        const Twins lr = twins("lrmate-like.json", "lrmate-like-screwing.json");
        REQUIRE(lr.current.declares_payload());
        Recording undeclared = lr.current;
        undeclared.payload.clear();
        const CurrentSign with_load = rebuild_whole(lr.robot.kinematics, lr.current);
        const CurrentSign without = rebuild_whole(lr.robot.kinematics, undeclared);
        std::size_t tried = 0;
        for (std::size_t j = 0; j < lr.robot.dof(); ++j) {
            const auto& joint = with_load.derivation["joints"][j];
            INFO("joint " << j + 1 << ": " << joint.dump());
            if (joint.contains("with_declared_load")) {
                ++tried;
                CHECK_FALSE(joint["with_declared_load"]["taken"].get<bool>());
            }
            CHECK(with_load.sign[j] == without.sign[j]);
        }
        CHECK(tried >= 1);
    }
}

TEST_CASE("KA-mDTW matches an unsigned current with its rebuilt sign: quiet on nominal cycles of a varying task, the collisions found",
          "[sim][units][ka]") {
    // The UR5e-like reporting motor currents in A, its pick-and-place with the part's place varying
    // (what KA-mDTW is for): the reference's signed current is divided by the lever lengths.
    const RobotDescription robot = reporting_amps(ur5e());
    const sim::Task task = ur5e_task(true);
    const Recording reference = record_cell(robot, task, 4, 61, 1.0, 0);
    const Recording calibration = record_cell(robot, task, 30, 62, 1.0, 0);
    const Recording nominal = record_cell(robot, task, 10, 63, 1.0, 0);
    const Recording hits = record_cell(robot, task, 11, 64, 1.0, 10);
    CalibrationOptions options = ka_calibration(robot);
    options.dynamics_model = robot.kinematics;
    const NamedRecording noms{"calibration", &calibration};
    const Profile profile = calibrate({"reference", &reference}, std::span<const NamedRecording>(&noms, 1), options);
    REQUIRE(profile.method == MatchingMethod::KaMdtw);
    REQUIRE(profile.current_sign.size() == 6);
    REQUIRE(profile.kinematics.has_value());
    // At least one joint is divided by its lever, and its matched reference is the signed current
    // over the lever: somewhere negative, which a magnitude never is.
    Detector quiet(profile);
    std::size_t scaled_and_signed = 0;
    for (std::size_t j = 0; j < 6; ++j) {
        if (!profile.kinematics->scales(j)) continue;
        const auto matched = quiet.reference(j);
        scaled_and_signed += std::any_of(matched.begin(), matched.end(), [](double v) { return v < 0; });
    }
    CHECK(scaled_and_signed >= 1);

    const RunEvaluation clean = evaluate_detector("nominal", nominal, quiet);
    Detector watch(profile);
    const RunEvaluation hit = evaluate_detector("collisions", hits, watch);
    REQUIRE(hit.truth.has_value());
    INFO("10 nominal cycles: " << clean.events.size() << " stop events; collisions " << hit.truth->detected << " of "
                               << hit.truth->collisions.size() << " detected");
    CHECK(clean.events.size() <= 1);
    CHECK(hit.truth->collisions.size() == 10);
    CHECK(hit.truth->detected >= 8);
}

TEST_CASE("a motion that does not follow the override does not pull the speed estimate", "[sim][speed]") {
    // The LR Mate-like (samples/held-out; since 2026-11-29 no longer unseen) driving screws: when
    // the screwdriver lets go, its wrist springs back at its own pace whatever the override (about
    // 15 samples, joint 6 at up to 1 rad/s). The speed estimate learns only ratios near the latest
    // ones' median, so at 80 % it stays at 0.8 through it (0.79-0.81); learning every ratio it reached
    // 0.88 after the releases (the held-out check's 80 % run: all 31 of joint 2's false stops came there).
    const LrMateScrewing cell;
    const RobotDescription& robot = cell.robot;
    const sim::Task& task = cell.task;
    const Profile& profile = cell.profile;
    const Recording slow = record_cell(robot, task, 8, 73, 0.8, 0);
    REQUIRE(profile.speed.has_value());
    Detector detector(profile);
    std::vector<double> tau(6), q(6);
    double lowest = 2.0, highest = 0.0;
    for (std::size_t i = 0; i < slow.size(); ++i) {
        detector.update(slow.sample(i, tau, q));
        if (!detector.speed_settled()) continue;
        lowest = std::min(lowest, detector.speed_ratio());
        highest = std::max(highest, detector.speed_ratio());
    }
    INFO("8 cycles at 80 %: speed estimate " << lowest << " .. " << highest << " once settled");
    CHECK(lowest > 0.77);
    CHECK(highest < 0.83);
}

TEST_CASE("an unsigned current's friction drift is learned in its magnitude where the rebuilt sign is not the torque's",
          "[sim][speed]") {
    // The LR Mate-like driving screws reports |I|. Its joint 6 carries the screwdriver's torque,
    // which the kinematic model does not explain: the sign rebuilt for it is wrong over whole
    // moves, and there more friction shows as more current in both directions of motion - a
    // signed drift term cannot follow it (the held-out check's +30 % run: 212 stop events in 100
    // cycles, all joint 6's, from the 67th cycle on). The drift model's magnitude terms take it:
    // friction rising to +30 % over 15 cycles (faster than the held-out check's 100), 0 stop
    // events; with the signed terms alone the same run made 41, all joint 6's, from the 10th cycle.
    const LrMateScrewing cell;
    const RobotDescription& robot = cell.robot;
    const sim::Task& task = cell.task;
    const Profile& profile = cell.profile;
    REQUIRE(profile.current_sign.size() == 6);
    // A current in A shares one parameter set across the joints the model explains, with a factor
    // per joint; the screwdriver's joint 6 keeps its own copy.
    REQUIRE(profile.speed.has_value());
    const auto& speed_fit = profile.speed->derivation;
    CHECK(speed_fit.at("shared_parameters").get<bool>());
    const auto own = speed_fit.at("own_copy_joints").get<std::vector<std::size_t>>();
    INFO("joints with their own copy: " << speed_fit.at("own_copy_joints").dump());
    CHECK(std::find(own.begin(), own.end(), std::size_t{6}) != own.end());
    CHECK(std::find(own.begin(), own.end(), std::size_t{2}) == own.end());
    sim::CellOptions options;
    options.seed = 75;
    options.friction_drift = 0.3;
    sim::RobotCell warm(robot, task, options);
    const Recording warming = warm.record(15);
    Detector detector(profile);
    const RunEvaluation run = evaluate_detector("drift", warming, detector);
    const auto magnitude = detector.magnitude_drift(5), signed_terms = detector.friction_drift(5);
    INFO("15 cycles to +30 % friction: " << run.events.size() << " stop events; joint 6 learned magnitude terms "
                                         << magnitude[0] << " A, " << magnitude[1] << " A s/rad; signed terms " << signed_terms[0]
                                         << " A, " << signed_terms[1] << " A s/rad");
    CHECK(run.events.empty());
    // More friction is more current: both magnitude terms grew positive, and they carry more of
    // the change than the signed Coulomb term.
    CHECK(magnitude[0] > 0.0);
    CHECK(magnitude[1] > 0.0);
    CHECK(magnitude[0] > std::abs(signed_terms[0]));
}

TEST_CASE("at a new override the friction-drift model learns nothing until the speed estimate has settled",
          "[sim][speed]") {
    // A stream at 70 % starts with the speed estimate at 1; while it converges the residual is
    // the speed error. Learned as friction (IRB120-like joint 2: -2 Nm within the first second,
    // +-1-2 Nm for the rest of the run, against a threshold of 0.8 Nm) it made most of the false
    // stops at 70 % override (147 in 50 cycles of the benchmark; 13 without it).
    const Irb120Speed cell;
    const RobotDescription& robot = cell.robot;
    const Profile& profile = cell.profile;
    const Recording slow = record_cell(robot, cell.task, 5, 53, 0.7, 0);
    REQUIRE(profile.speed.has_value());
    Detector detector(profile);
    std::vector<double> tau(robot.dof()), q(robot.dof()), worst(robot.dof(), 0.0);
    constexpr double kTypicalSpeed = 0.5;  // rad/s: the drift model's correction at a brisk joint speed
    for (std::size_t i = 0; i < slow.size(); ++i) {
        detector.update(slow.sample(i, tau, q));
        for (std::size_t j = 0; j < robot.dof(); ++j) {
            const auto drift = detector.friction_drift(j);
            worst[j] = std::max(worst[j], std::abs(drift[0]) + std::abs(drift[1]) * kTypicalSpeed);
        }
    }
    CHECK(detector.speed_ratio() == Approx(0.7).margin(0.03));
    for (std::size_t j = 0; j < robot.dof(); ++j) {
        const auto& th = profile.phase->rule1[j];
        const double smallest = *std::min_element(th.begin(), th.end());
        INFO("joint " << j + 1 << ": largest learned drift " << worst[j] << " against the smallest threshold " << smallest);
        CHECK(worst[j] < 0.5 * smallest);
    }
}

TEST_CASE("a stream that starts at 70 % override does not stop while the speed estimate converges", "[sim][speed]") {
    // The estimate starts at the recorded speed (1) and needs about 75 clearly moving samples to
    // settle; until then the reference's value at the true speed lies between its values at the
    // running estimate and at that estimate freed of its start value. On the benchmark's
    // IRB120-like 70 % run 4 of its 6 false stop events fell in the first 0.5 s before that range
    // was forgiven (JointEvaluation::speed_band).
    const Irb120Speed cell;
    const RobotDescription& robot = cell.robot;
    const Profile& profile = cell.profile;
    REQUIRE(profile.speed.has_value());
    std::size_t early_stops = 0, streams = 0;
    double largest_band = 0.0, settled_band = 0.0;
    for (std::uint64_t seed = 60; seed < 66; ++seed) {
        const Recording slow = record_cell(robot, cell.task, 1, seed, 0.7, 0);
        Detector detector(profile);
        std::vector<double> tau(robot.dof()), q(robot.dof());
        bool stopped = false;
        for (std::size_t i = 0; i < slow.size(); ++i) {
            const Decision d = detector.update(slow.sample(i, tau, q));
            const bool settled = detector.speed_settled();
            for (std::size_t j = 0; j < robot.dof(); ++j) {
                const double band = detector.evaluations()[j].speed_band / detector.evaluations()[j].phase_threshold;
                if (!settled) largest_band = std::max(largest_band, band);
                if (settled && i > 2 * slow.size() / 3) settled_band = std::max(settled_band, band);
            }
            if (!settled && d.verdict == Verdict::Stop) stopped = true;
        }
        early_stops += stopped ? 1 : 0;
        ++streams;
        CHECK(detector.speed_ratio() == Approx(0.7).margin(0.05));
    }
    INFO(early_stops << " of " << streams << " streams stopped before the speed estimate settled; largest speed band "
                     << largest_band << " thresholds while converging, " << settled_band << " in the last third");
    CHECK(early_stops == 0);
    CHECK(largest_band > 0.5);     // the band did carry deviations of the order of the threshold
    CHECK(settled_band < 0.05);    // and is all but gone once the estimate has settled
}

TEST_CASE("a stream's first reported override gives the speed at once where the reference reported its own",
          "[sim][speed][override]") {
    // The same start at 70 % as above, now from a robot task that reports the override with every
    // sample, and a profile calibrated on recordings that reported it too: the reference's override
    // (100 %) is in the profile, and the stream's first report (70 %) gives the speed before any
    // sample has measured it. Without the reference's, the estimate converges as above.
    const Irb120Speed cell;
    sim::CellOptions reporting;
    reporting.report_override = true;
    reporting.seed = 51;
    const Recording reference = sim::RobotCell(cell.robot, cell.task, reporting).record(7);
    reporting.seed = 52;
    const Recording calibration = sim::RobotCell(cell.robot, cell.task, reporting).record(12);
    REQUIRE(reference.reports_override());
    CalibrationOptions options;
    options.reference_cycles = 3;
    options.dynamics_model = cell.robot.kinematics;
    const NamedRecording nominal{"calibration", &calibration};
    const Profile told = calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    REQUIRE(told.speed.has_value());
    CHECK(told.reference.speed_override == 1.0);
    CHECK(profile_from_json(to_json(told)).reference.speed_override == 1.0);
    Profile untold = told;
    untold.reference.speed_override = std::numeric_limits<double>::quiet_NaN();

    // A reference whose cycles ran at more than one override keeps none.
    Recording turned = reference;
    const auto complete = turned.complete_cycles();
    for (std::size_t i = complete[1].begin; i < turned.size(); ++i) turned.speed_override[i] = 0.8;
    CHECK(std::isnan(cut_reference(turned, "turned", 3).speed_override));
    CHECK(cut_reference(turned, "turned", 1).speed_override == 1.0);

    double first_told = 0.0, first_untold = 0.0, band_told = 0.0, band_untold = 0.0;
    std::size_t stops_told = 0, stops_untold = 0, streams = 0;
    for (std::uint64_t seed = 60; seed < 64; ++seed) {
        reporting.seed = seed;
        reporting.speed_override = 0.7;
        const Recording slow = sim::RobotCell(cell.robot, cell.task, reporting).record(1);
        Detector a(told), b(untold);
        std::vector<double> tau(slow.joints()), q(slow.joints());
        for (std::size_t i = 0; i < slow.size(); ++i) {
            const Sample s = slow.sample(i, tau, q);
            const Decision da = a.update(s), db = b.update(s);
            if (i == 0) {
                first_told = std::max(first_told, std::abs(a.speed_ratio() - 0.7)), first_untold = std::max(first_untold, std::abs(b.speed_ratio() - 0.7));
                CHECK(a.speed_known());  // (what the dashboard shows)
                CHECK_FALSE(b.speed_known());
            }
            // Until each estimate has settled: the largest deviation its speed band took, in thresholds.
            for (std::size_t j = 0; j < slow.joints(); ++j) {
                if (!a.speed_settled()) band_told = std::max(band_told, a.evaluations()[j].speed_band / a.evaluations()[j].phase_threshold);
                if (!b.speed_settled()) band_untold = std::max(band_untold, b.evaluations()[j].speed_band / b.evaluations()[j].phase_threshold);
            }
            stops_told += da.stop() ? 1 : 0, stops_untold += db.stop() ? 1 : 0;
        }
        CHECK(a.speed_ratio() == Approx(0.7).margin(0.05));
        CHECK(b.speed_ratio() == Approx(0.7).margin(0.05));
        ++streams;
    }
    INFO(streams << " streams at 70 %: first sample's estimate off by " << first_told << " with the reference's override, "
                 << first_untold << " without; largest speed band before settling " << band_told << " and " << band_untold
                 << " thresholds; stop samples " << stops_told << " and " << stops_untold);
    CHECK(first_told < 1e-12);
    CHECK(first_untold > 0.25);
    CHECK(band_untold > 0.5);            // converging, the band carries deviations of a threshold's order
    CHECK(band_told == 0.0);  // told, the speed interval is the estimate alone
    CHECK(stops_told == 0);
}

TEST_CASE("a turned override is followed within its ramp, its changing speed explained: nominal cycles run on, collisions still stop",
          "[sim][speed][override]") {
    // The operator turns the knob every 4 s (the controller follows each turn within 0.5 s per
    // 100 %). Under a changing speed the torque gains s' times the inertial torque of an
    // acceleration along the reference's velocity (SpeedModel::speed_change), and an estimate
    // that lags the turn by 50-100 ms reads the new speed's inertial torques as deviations (the
    // suite's UR5e-like with turns every 12 s: 240 false stops per 1,000 cycles before the
    // speed-change band and the estimate following s'; docs/detection.md).
    const RobotDescription robot = ur5e();
    const sim::Task task = ur5e_task(true);
    const Profile profile = speed_profile(robot, task, 71, true);  // the arm model as `warpguard calibrate --model` fits it
    REQUIRE(profile.speed.has_value());
    REQUIRE(profile.speed->speed_change.size() == robot.dof());
    INFO("calibrated speed-change floor " << profile.speed->speed_change_floor << " /s");
    CHECK(profile.speed->speed_change_floor > 0.0);
    CHECK(profile.speed->speed_change_floor < 2.0);  // well under the ~4 /s a turn reads at this ramp
    Profile without = profile;  // the same profile without the speed-change part (as before it was kept)
    without.speed->speed_change.clear();
    without.speed->speed_change_floor = std::numeric_limits<double>::infinity();

    const std::array<double, 6> values{0.7, 1.0, 0.85, 0.7, 0.9, 1.0};
    std::vector<sim::OverrideChange> turns;
    for (std::size_t k = 0; k < 12; ++k) turns.push_back({3.0 + 4.0 * static_cast<double>(k), values[k % values.size()]});
    const sim::CellOptions options;  // the ramp the turns are followed with
    const Recording run = record_cell(robot, task, 8, 73, 1.0, 0, turns);

    // How far the estimate is off the new override at the end of each ramp (plus 30 ms), where the
    // robot moved clearly through it.
    const auto follow = [&](const Profile& p) {
        Detector detector(p);
        std::vector<double> tau(robot.dof()), q(robot.dof()), off;
        double previous = 1.0;
        std::size_t turn = 0;
        bool moving = true;
        for (std::size_t i = 0; i < run.size(); ++i) {
            detector.update(run.sample(i, tau, q));
            if (turn >= turns.size()) break;
            const auto& change = turns[turn];
            const double start = change.at + 0.2;  // the recording's clock is 0.2 s ahead of the simulation's
            const double end = start + std::abs(change.value - previous) * options.override_ramp + 0.03;
            if (run.t[i] >= start && i > 0) {
                double speed = 0.0;
                for (std::size_t j = 0; j < robot.dof(); ++j) speed += std::abs(run.q[j][i] - run.q[j][i - 1]) / (run.t[i] - run.t[i - 1]);
                moving = moving && speed > 0.3;
            }
            if (run.t[i] >= end) {
                if (moving) off.push_back(std::abs(detector.speed_ratio() - change.value));
                previous = change.value;
                ++turn;
                moving = true;
            }
        }
        return off;
    };
    const std::vector<double> off_with = follow(profile), off_without = follow(without);
    const auto text = [](const std::vector<double>& v) {
        std::ostringstream out;
        for (double x : v) out << " " << x;
        return out.str();
    };
    const auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); };
    INFO("at the end of each ramp the robot moved through, the estimate was off the new override by" << text(off_with)
                                                                                                      << "; without the speed-change part by"
                                                                                                      << text(off_without));
    REQUIRE(off_with.size() >= 4);
    REQUIRE(off_without.size() == off_with.size());
    CHECK(std::count_if(off_with.begin(), off_with.end(), [](double x) { return x < 0.03; }) >= static_cast<std::ptrdiff_t>(3 * off_with.size() / 4));
    CHECK(mean(off_with) < 0.5 * mean(off_without));

    Detector with_detector(profile), without_detector(without);
    const RunEvaluation with_run = evaluate_detector("turns", run, with_detector);
    const RunEvaluation without_run = evaluate_detector("turns", run, without_detector);
    INFO("8 nominal cycles with 12 turns: " << with_run.events.size() << " stop events, " << without_run.events.size()
                                           << " without the speed-change part");
    CHECK(with_run.events.size() <= 1);
    CHECK(without_run.events.size() >= with_run.events.size() + 2);

    const Recording hits_run = record_cell(robot, task, 9, 74, 1.0, 8, turns);
    Detector hits_detector(profile);
    const RunEvaluation hits = evaluate_detector("turns with collisions", hits_run, hits_detector);
    REQUIRE(hits.truth.has_value());
    INFO("collisions with turns: " << hits.truth->detected << " of " << hits.truth->collisions.size() << " detected");
    CHECK(hits.truth->collisions.size() == 8);
    CHECK(hits.truth->detected >= 7);
}

TEST_CASE("an override turned while the robot waits is taken within a few samples of moving again",
          "[sim][speed][override]") {
    // A turn during a wait: no sample measures s', and when the robot moves again every ratio lies
    // far off the estimate. The outlier test (kept for motions that do not follow the override)
    // held them until half its ring agreed, and the average then took ~25 samples more: the
    // IRB120-like stopped again and again in those 100-300 ms (docs/detection.md). A run of
    // consecutive moving samples that agree, borne by two joints, now replaces the estimate at once.
    const Irb120Speed cell;
    const sim::CellOptions options;  // the ramp the turns are followed with
    const auto joint_speed = [](const Recording& r, std::size_t i) {  // summed |dq/dt|, rad/s
        double speed = 0.0;
        for (std::size_t j = 0; j < r.joints(); ++j) speed += std::abs(r.q[j][i] - r.q[j][i - 1]) / (r.t[i] - r.t[i - 1]);
        return speed;
    };
    // Each turn goes to the start of a standstill (>= 0.15 s) of the run with the turns before it
    // (a turn moves the later waits), after 4 s, 12 s and 20 s; its ramp (|change| x 0.5 s) ends
    // within the standstill.
    const std::array<double, 3> values{0.75, 1.0, 0.85};
    std::vector<sim::OverrideChange> turns;
    std::vector<double> still_at;  // each turn's standstill start, on the recording's clock
    Recording run;
    for (double value : values) {
        run = record_cell(cell.robot, cell.task, 8, 81, 1.0, 0, turns);
        const double after = 4.0 + 8.0 * static_cast<double>(turns.size());
        std::size_t begin = 0;
        for (std::size_t i = 1; i < run.size() && still_at.size() == turns.size(); ++i) {
            const bool still = run.t[i] > after && joint_speed(run, i) < 0.01;
            if (!still) begin = 0;
            else if (begin == 0) begin = i;
            else if (run.t[i] - run.t[begin] >= 0.15) still_at.push_back(run.t[begin]);
        }
        REQUIRE(still_at.size() == turns.size() + 1);
        const double previous = turns.empty() ? 1.0 : turns.back().value;
        REQUIRE(std::abs(value - previous) * options.override_ramp < 0.14);
        turns.push_back({still_at.back() + 0.01 - 0.2, value});  // the recording's clock is 0.2 s ahead of the simulation's
    }
    run = record_cell(cell.robot, cell.task, 8, 81, 1.0, 0, turns);

    // The estimate 60 ms and 300 ms after the robot moves again (summed joint speed over 0.3 rad/s)
    // after each turn's standstill. Before the run of agreeing samples was taken at once it was
    // still off by 0.26, 0.24, 0.16 at 60 ms and by 0.26, 0.05, 0.16 at 300 ms (the first and last
    // turn's new speed was never learned in those 300 ms), with 61 stop events in these 8 cycles.
    Detector detector(cell.profile);
    std::vector<double> tau(run.joints()), q(run.joints()), soon, later;
    std::size_t turn = 0;
    double moving_at = -1.0;
    for (std::size_t i = 0; i < run.size() && turn < turns.size(); ++i) {
        detector.update(run.sample(i, tau, q));
        if (i == 0 || run.t[i] < still_at[turn] + 0.15) continue;
        if (moving_at < 0 && joint_speed(run, i) > 0.3) moving_at = run.t[i];
        if (moving_at < 0) continue;
        const double off = std::abs(detector.speed_ratio() - turns[turn].value);
        if (soon.size() == turn && run.t[i] >= moving_at + 0.06) soon.push_back(off);
        if (run.t[i] >= moving_at + 0.3) later.push_back(off), ++turn, moving_at = -1.0;
    }
    std::ostringstream text;
    for (std::size_t k = 0; k < later.size(); ++k) text << " " << soon[k] << " (" << later[k] << ")";
    INFO("60 ms (300 ms) after moving again the estimate was off the new override by" << text.str());
    REQUIRE(later.size() == turns.size());
    for (std::size_t k = 0; k < later.size(); ++k) {
        CHECK(soon[k] < 0.1);
        CHECK(later[k] < 0.02);
    }

    Detector judge(cell.profile);
    const RunEvaluation nominal = evaluate_detector("turns in waits", run, judge);
    // What remains stops at a motion's first samples: the torque of the new speed comes with the
    // controller's first acceleration, a sample or two before any velocity tells the speed.
    INFO("8 nominal cycles with 3 turns in waits: " << nominal.events.size() << " stop events");
    CHECK(nominal.events.size() <= 3 * turns.size());
}

namespace {

// 12 turns of a reported override, one every 4 s from 3 s, through 70-100 %, with the seed given:
// the turns of the two reported-override tests below.
sim::CellOptions reported_turns(std::uint64_t seed) {
    const std::array<double, 6> values{0.7, 1.0, 0.85, 0.7, 0.9, 1.0};
    sim::CellOptions options;
    for (std::size_t k = 0; k < 12; ++k) options.override_changes.push_back({3.0 + 4.0 * static_cast<double>(k), values[k % values.size()]});
    options.seed = seed;
    options.report_override = true;
    return options;
}

}  // namespace

TEST_CASE("a reported override is followed at its turn, even with the arm at rest: fewer stops, collisions found",
          "[sim][speed][override]") {
    // The held-out LR Mate-like reports motor current (no torque witness of a ramp) and stands
    // through its screwing, where no velocity can tell a turn; a robot task that sends the
    // controller's override (Sample::speed_override) tells the detector when and by how much.
    const LrMateScrewing cell;
    sim::CellOptions options = reported_turns(75);
    const std::vector<sim::OverrideChange> turns = options.override_changes;
    sim::RobotCell reporting(cell.robot, cell.task, options);
    const Recording run = reporting.record(10);
    REQUIRE(run.reports_override());
    Recording silent = run;  // the same samples from a task that does not send the override
    silent.speed_override.clear();
    REQUIRE_FALSE(silent.reports_override());

    // The report: the knob of the moment, from the turn's own time on (the recording's clock is
    // 0.2 s ahead of the simulation's; a sample within a microsecond of a turn may read either).
    for (std::size_t i = 0; i < run.size(); ++i) {
        double knob = 1.0;
        bool at_turn = false;
        for (const auto& c : turns) {
            if (run.t[i] - 0.2 >= c.at) knob = c.value;
            at_turn = at_turn || std::abs(run.t[i] - 0.2 - c.at) < 1e-6;
        }
        if (at_turn) continue;
        if (std::abs(run.speed_override[i] - knob) > 1e-12) FAIL("row " << i << " at t = " << run.t[i] << " reports " << run.speed_override[i] << ", the knob was " << knob);
    }

    // Each turn moves the estimate by the turn's own factor: at its first sample where the arm
    // stands (the screwing), through the controller's ramp where it moves, and by the end of the
    // turn's window either way (Detector::kTurnLead + kTurnSecondsPer100 x the change: 0.1 s + 1 s
    // per 100 %; the update also learns from the sample itself, within 5 %).
    Detector detector(cell.profile);
    std::vector<double> tau(run.joints()), q(run.joints());
    std::size_t at_once = 0, by_the_end = 0, seen = 0;
    double before = detector.speed_ratio(), from = before, factor = 1.0, until = -1.0;
    for (std::size_t i = 0; i < run.size(); ++i) {
        detector.update(run.sample(i, tau, q));
        if (until >= 0 && run.t[i] > until) {
            if (std::abs(detector.speed_ratio() / from - factor) < 0.05 * factor) ++by_the_end;
            until = -1.0;
        }
        if (i > 0 && run.speed_override[i] != run.speed_override[i - 1]) {
            ++seen;
            factor = run.speed_override[i] / run.speed_override[i - 1];
            from = before;
            until = run.t[i] + 0.1 + std::abs(run.speed_override[i] - run.speed_override[i - 1]);
            if (std::abs(detector.speed_ratio() / before - factor) < 0.05 * factor) ++at_once;
        }
        before = detector.speed_ratio();
    }
    INFO(at_once << " of " << seen << " turns moved the estimate by their factor at once, " << by_the_end
                 << " by the end of their window");
    const auto within = static_cast<std::size_t>(std::count_if(turns.begin(), turns.end(), [&](const auto& c) { return c.at + 0.2 < run.t.back(); }));
    REQUIRE(seen == within);
    REQUIRE(seen >= 8);
    CHECK(by_the_end == seen);
    CHECK(at_once >= 1);
    CHECK(at_once < seen);  // some turns come while the arm moves: measured, not scaled

    // A controller that pauses by its override (a report under 5 %) leaves the estimate alone, and
    // the next positive report is compared with the last positive one: a pause reported in the
    // middle of a stretch between two turns changes nothing.
    {
        Recording paused = run;
        const auto begin = static_cast<std::size_t>(std::lower_bound(run.t.begin(), run.t.end(), turns[1].at + 1.2) - run.t.begin());
        const auto end = static_cast<std::size_t>(std::lower_bound(run.t.begin(), run.t.end(), turns[1].at + 2.2) - run.t.begin());
        REQUIRE(end > begin + 100);
        for (std::size_t i = begin; i < end; ++i) paused.speed_override[i] = 0.02;
        Detector a(cell.profile), b(cell.profile);
        double largest = 0.0;
        std::size_t differing = 0;
        for (std::size_t i = 0; i < run.size(); ++i) {
            const Decision da = a.update(run.sample(i, tau, q)), db = b.update(paused.sample(i, tau, q));
            largest = std::max(largest, std::abs(a.speed_ratio() - b.speed_ratio()));
            if (da.stop() != db.stop()) ++differing;
        }
        INFO("a reported pause of " << end - begin << " samples: estimates differ by up to " << largest << ", decisions at "
                                    << differing << " samples");
        CHECK(largest == 0.0);
        CHECK(differing == 0);
    }

    Detector with(cell.profile), without(cell.profile);
    const RunEvaluation told = evaluate_detector("turns reported", run, with);
    const RunEvaluation guessed = evaluate_detector("turns not reported", silent, without);
    INFO("10 nominal cycles with " << seen << " turns: " << told.events.size() << " stop events with the override reported, "
                                              << guessed.events.size() << " without");
    CHECK(2 * told.events.size() <= guessed.events.size());

    options.seed = 76;
    sim::RobotCell hitting(cell.robot, cell.task, options);
    const auto starts = hitting.schedule(11);
    hitting.set_contacts(sim::random_contacts(10, starts, starts[1] - starts[0], cell.robot.dof(), 100.0, 300.0, 83));
    const Recording hits_run = hitting.record(11);
    Detector hits_detector(cell.profile);
    const RunEvaluation hits = evaluate_detector("turns reported, collisions", hits_run, hits_detector);
    REQUIRE(hits.truth.has_value());
    INFO("collisions with reported turns: " << hits.truth->detected << " of " << hits.truth->collisions.size() << " detected");
    CHECK(hits.truth->collisions.size() == 10);
    CHECK(hits.truth->detected >= 9);
}

TEST_CASE("a reported turn lets either witness explain its ramp on a torque arm, the larger on the turn's side",
          "[sim][speed][override]") {
    // The same turns on the UR5e-like (a signed torque): with the report, the angles' and the
    // torques' s' each count on the turn's side while the controller follows it (without, both must
    // agree, the smaller taken). The band then explains more of each ramp, never against a turn.
    const RobotDescription robot = ur5e();
    const sim::Task task = ur5e_task(true);
    const Profile profile = speed_profile(robot, task, 71, true);
    REQUIRE(profile.speed.has_value());
    const sim::CellOptions options = reported_turns(77);
    const std::vector<sim::OverrideChange>& turns = options.override_changes;
    sim::RobotCell cell(robot, task, options);
    const Recording run = cell.record(8);
    Recording silent = run;
    silent.speed_override.clear();

    // In each turn's first 0.15 s (a ramp of 0.5 s per 100 %: 0.05-0.15 s here): samples whose band
    // took s' on the turn's side, and against it.
    const auto explained = [&](const Recording& r) {
        Detector detector(profile);
        std::vector<double> tau(r.joints()), q(r.joints());
        std::array<std::size_t, 2> count{};
        double previous = 1.0;
        std::size_t turn = 0;
        for (std::size_t i = 0; i < r.size(); ++i) {
            detector.update(r.sample(i, tau, q));
            while (turn < turns.size() && r.t[i] >= turns[turn].at + 0.2 + 0.15) previous = turns[turn++].value;
            if (turn >= turns.size() || r.t[i] < turns[turn].at + 0.2) continue;
            const double side = turns[turn].value > previous ? 1.0 : -1.0, took = detector.speed_change_explained();
            if (took * side > 0) ++count[0];
            if (took * side < 0) ++count[1];
        }
        return count;
    };
    const auto told = explained(run), guessed = explained(silent);
    INFO("samples of the turns' first 0.15 s explained on the turn's side (against it): reported " << told[0] << " (" << told[1]
                                                                                                      << "), not reported " << guessed[0] << " ("
                                                                                                      << guessed[1] << ")");
    CHECK(2 * told[0] > 3 * guessed[0]);  // more than half as many again
    CHECK(told[1] == 0);
    Detector with(profile), without(profile);
    const RunEvaluation a = evaluate_detector("reported", run, with), b = evaluate_detector("not reported", silent, without);
    INFO("8 cycles with 12 turns: " << a.events.size() << " stop events reported, " << b.events.size() << " not");
    CHECK(a.events.size() <= b.events.size());
}

TEST_CASE("a turn reported while the arm creeps to a stop is the controller's by the end of its window, whatever the creep read",
          "[sim][speed][override]") {
    // Held-out UR10e-like with turns reported: 0.7 -> 0.9 came at the end of a move, the arm
    // creeping (not clearly moving: scaled at once to 0.906); the ramp's first samples still read
    // 0.70-0.72, agreed for a run and took the estimate back to 0.711; the arm stood 1.5 s, moved
    // on at 0.9, and joint 5 stopped the robot 90 ms later. Here the UR5e-like's wait before its
    // grasp lasts 1.5 s, and the override is turned from 100 to 75 % at moments of the move's last
    // 200 ms (one run each): by the end of the turn's window (0.1 s + 1 s per 100 %) the estimate
    // is the turn's, within 5 %, and the moves after the wait run on. (Before the fix, measured:
    // the turn 150 ms before the rest ended its window at 1.014 for 0.753, the other 8 of the
    // first 9 moments followed; no stop either way on this arm.)
    const RobotDescription robot = ur5e();
    sim::Task task = ur5e_task(false);
    for (auto& step : task.steps) {
        if (step.kind == sim::TaskStep::Kind::Wait && step.seconds > 0.15) {
            step.seconds = 1.5;
            break;
        }
    }
    const Profile profile = speed_profile(robot, task, 83, true);
    sim::CellOptions options;
    options.seed = 85;
    options.report_override = true;
    const Recording plain = sim::RobotCell(robot, task, options).record(2);
    // The second cycle's long standstill: its first sample (joint angles within 0.1 mrad of it for 1 s).
    double rest = -1.0;
    for (std::size_t i = 1; i < plain.size() && rest < 0; ++i) {
        if (plain.t[i] < 0.5 * plain.t.back()) continue;
        std::size_t k = i;
        for (; k < plain.size() && plain.t[k] < plain.t[i] + 1.0; ++k) {
            bool still = true;
            for (std::size_t j = 0; j < plain.joints(); ++j) still = still && std::abs(plain.q[j][k] - plain.q[j][i]) < 1e-4;
            if (!still) break;
        }
        if (k < plain.size() && plain.t[k] >= plain.t[i] + 1.0) rest = plain.t[i];
    }
    REQUIRE(rest > 0);
    std::vector<double> tau(plain.joints()), q(plain.joints());
    std::size_t runs = 0, followed = 0, stopped = 0;
    std::ostringstream report;
    for (const double before_rest : {0.01, 0.025, 0.04, 0.055, 0.07, 0.085, 0.1, 0.125, 0.15, 0.175, 0.2}) {
        options.override_changes = {{rest - before_rest - 0.2, 0.75}};  // (the recording's clock is 0.2 s ahead)
        const Recording run = sim::RobotCell(robot, task, options).record(2);
        Detector detector(profile);
        double target = 0.0, until = -1.0, estimate = 0.0;
        std::size_t stops_after = 0;
        for (std::size_t i = 0; i < run.size(); ++i) {
            const double previous = detector.speed_ratio();
            const Decision d = detector.update(run.sample(i, tau, q));
            if (target == 0.0 && i > 0 && run.speed_override[i] != run.speed_override[i - 1]) {
                target = previous * run.speed_override[i] / run.speed_override[i - 1];
                until = run.t[i] + 0.1 + std::abs(run.speed_override[i] - run.speed_override[i - 1]);
            }
            if (until > 0 && estimate == 0.0 && run.t[i] > until) estimate = detector.speed_ratio();
            if (until > 0 && d.stop()) ++stops_after;
        }
        REQUIRE(target > 0.0);
        REQUIRE(estimate > 0.0);
        ++runs;
        if (std::abs(estimate / target - 1.0) < 0.05) ++followed;
        if (stops_after > 0) ++stopped;
        report << " " << before_rest * 1000 << " ms: " << estimate << " for " << target << (stops_after > 0 ? " (stopped)" : "") << ";";
    }
    INFO("turns " << report.str());
    CHECK(followed == runs);
    CHECK(stopped == 0);
}

TEST_CASE("through a reported turn the arm model's causal acceleration lags the ramp, and its band takes part of it",
          "[sim][speed][override][arm]") {
    // With an arm model the detector matches the torque less the arm's, whose accelerations come
    // from a causal fit: through the controller's ramp it misses part of the ramp's change (s' qd_ref
    // and s^2 qdd_ref), and the arm's inertial torque of it reads as a deviation of either sign
    // (held-out HS-045-like with turns reported: joint 1's CUSUM stopped 0.05 s into a 75 ms ramp,
    // the fit's error -2.6 then +2.8 % of rated against a 2 % threshold). The band
    // (Detector::arm_lag_band) bounds it from the speeds and s' the detector took over the fit's
    // span. Here the error is the causal deviation less the offline one (central derivatives,
    // which look ahead), per joint and sample while the band is open.
    const RobotDescription robot = ur5e();
    const sim::Task task = ur5e_task(true);
    const Profile profile = speed_profile(robot, task, 71, true);
    REQUIRE(profile.arm.has_value());
    sim::RobotCell cell(robot, task, reported_turns(78));
    const Recording run = cell.record(8);
    const Recording causal = causal_arm_deviation(*profile.arm, run), offline = arm_deviation(*profile.arm, run);
    Detector detector(profile);
    std::vector<double> tau(run.joints()), q(run.joints());
    std::size_t open = 0, large = 0, large_left = 0;
    double error_sum = 0.0, taken_sum = 0.0, largest = 0.0, largest_left = 0.0;
    std::vector<double> band_share;  // each open sample's widest band, in its joint's thresholds
    for (std::size_t i = 0; i < run.size(); ++i) {
        detector.update(run.sample(i, tau, q));
        double widest = 0.0;
        bool any = false;
        for (std::size_t j = 0; j < run.joints(); ++j) {
            const double band = detector.arm_lag_band(j), threshold = detector.evaluations()[j].phase_threshold;
            if (!(band > 0.0)) continue;
            any = true;
            widest = std::max(widest, band / threshold);
            const double error = std::abs(causal.tau[j][i] - offline.tau[j][i]);
            largest = std::max(largest, error / threshold);
            largest_left = std::max(largest_left, std::max(0.0, error - band) / threshold);
            if (error > 0.25 * threshold) ++large, error_sum += error, taken_sum += std::min(error, band);
            if (error - band > 0.25 * threshold) ++large_left;
        }
        if (any) ++open, band_share.push_back(widest);
    }
    REQUIRE(open > 100);
    std::sort(band_share.begin(), band_share.end());
    const double median = band_share[band_share.size() / 2];
    INFO(open << " samples with the band open; joint-samples whose fit error exceeds a quarter threshold: " << large << " ("
              << large_left << " beyond the band), the band takes " << taken_sum << " of their summed error " << error_sum << "; the largest error " << largest << " thresholds, "
              << largest_left << " beyond the band; the widest joint's band: median " << median << " thresholds, largest "
              << band_share.back());
    REQUIRE(large >= 10);
    // (What it leaves is mostly the wrist's, whose fit error the arm's inertia along the path does
    // not carry: joint 5's 0.3-0.4 thresholds, measured, not traced.)
    CHECK(taken_sum > 0.4 * error_sum);
    CHECK(large_left < large);
    CHECK(largest_left < largest);
    // What it costs: the limits widen by a small part of a threshold at most samples of a turn,
    // and by less than one anywhere.
    CHECK(median < 0.1);
    CHECK(band_share.back() < 1.0);
}

TEST_CASE("a turned override's first milliseconds are explained where the angles and the torques both witness the "
          "speed change, a collision's are not",
          "[sim][speed][override]") {
    // The first 10-30 ms of a turn's ramp: s' still under what the angles read at one speed (the
    // calibrated floor), so speed_changing() cannot tell it yet, while the inertial torque of the
    // changing speed already stops the robot (the suite's IRB120-like with turns every 12 s: 4
    // stop events in 50 cycles, each 13-28 ms after a turn; given the simulation's true s' they
    // were 0). The witnessed s' explains them: the angles' s' of the sample and the torques' s'
    // (the deviations fitted to s' x the speed-change torques) on one side, the smaller taken.
    // Measured with the witness switched off (the same run): in the ramps' first halves the band
    // took s' on the ramp's side at 27 of 130 samples, and 3 stop events began 20-28 ms after a
    // turn (17 in all); with it 66 of 130 and none (10 in all: 49-62 ms into the first ramp and
    // 0.2-0.6 s after two others, not traced).
    const Irb120Speed cell;
    const sim::CellOptions options;  // the ramp the turns are followed with
    const std::array<double, 6> values{0.7, 1.0, 0.85, 0.7, 0.9, 1.0};
    std::vector<sim::OverrideChange> turns;
    for (std::size_t k = 0; k < 10; ++k) turns.push_back({2.0 + 2.5 * static_cast<double>(k), values[k % values.size()]});
    const Recording run = record_cell(cell.robot, cell.task, 10, 91, 1.0, 0, turns);

    // The side of the ramp a sample lies in the first half of (0: none), and how long after the
    // last turn began it comes, on the recording's clock (0.2 s ahead of the simulation's).
    const auto ramp_side = [&](double t) {
        double previous = 1.0;
        for (const auto& change : turns) {
            const double start = change.at + 0.2;
            const double length = std::abs(change.value - previous) * options.override_ramp;
            if (t >= start && t < start + 0.5 * length) return change.value > previous ? 1 : -1;
            previous = change.value;
        }
        return 0;
    };
    const auto since_turn = [&](double t) {
        double since = std::numeric_limits<double>::infinity();
        for (const auto& change : turns) {
            if (t >= change.at + 0.2) since = t - change.at - 0.2;
        }
        return since;
    };
    Detector detector(cell.profile);
    std::vector<double> tau(run.joints()), q(run.joints());
    std::size_t early = 0, early_right = 0, early_wrong = 0;
    for (std::size_t i = 0; i < run.size(); ++i) {
        detector.update(run.sample(i, tau, q));
        const int side = ramp_side(run.t[i]);
        const double s = detector.speed_change_explained();
        if (side == 0) continue;
        ++early;
        if (s * side > 0) ++early_right;
        if (s * side < 0) ++early_wrong;
    }
    INFO("ramps' first halves: " << early << " samples, s' explained on the ramp's side at " << early_right << ", against it at "
                                  << early_wrong);
    REQUIRE(early >= 100);
    CHECK(5 * early_right >= 2 * early);
    CHECK(early_wrong <= early / 20);
    Detector judge(cell.profile);
    const RunEvaluation nominal = evaluate_detector("turns", run, judge);
    std::ostringstream soon;
    std::size_t within = 0;
    for (const auto& e : nominal.events) {
        if (since_turn(e.t) < 0.03) ++within, soon << " " << e.t;
    }
    INFO("10 nominal cycles with 10 turns: " << nominal.events.size() << " stop events, " << within
                                              << " of them begun within 30 ms of a turn:" << soon.str());
    CHECK(within == 0);

    // Collisions at one speed: the witnesses disagree (the contact's torque against what the
    // angles show), and what the speed-change band forgives is a small part of the deviations.
    const Recording hits_run = record_cell(cell.robot, cell.task, 11, 92, 1.0, 10);
    Detector hits_detector(cell.profile);
    const auto& gt = *hits_run.ground_truth;
    double forgiven = 0.0, deviation = 0.0;
    for (std::size_t i = 0; i < hits_run.size(); ++i) {
        hits_detector.update(hits_run.sample(i, tau, q));
        if (!gt.contact[i]) continue;
        for (const JointEvaluation& ev : hits_detector.evaluations()) {
            forgiven += ev.speed_change_band;
            deviation += std::abs(ev.shared.deviation);
        }
    }
    INFO("on contact samples the speed-change band forgave " << forgiven << " of a summed |deviation| of " << deviation);
    REQUIRE(deviation > 0.0);
    CHECK(forgiven < 0.01 * deviation);
    Detector hits_judge(cell.profile);
    const RunEvaluation hits = evaluate_detector("collisions", hits_run, hits_judge);
    REQUIRE(hits.truth.has_value());
    INFO("collisions: " << hits.truth->detected << " of " << hits.truth->collisions.size() << " detected");
    CHECK(hits.truth->collisions.size() == 10);
    CHECK(hits.truth->detected >= 9);
}

TEST_CASE("a joint the task never moves, held a little off its recorded angle, does not keep the speed from being learned",
          "[sim][speed]") {
    // The LR Mate-like driving screws never moves joint 4. A partner tells the speed only when the
    // angles confirm it, each joint within three of its own samples' motion of the reference's angle
    // (joint 4: the 0.1 mrad floor); the held-out check's wrist stood 0.4-1.4 mrad off in moves after
    // a screwing, no partner there was confirmed, and an override turned during the screwing was
    // not learned in them (docs/detection.md). A joint the reference hardly moves is allowed a
    // quarter of the fastest joint's step; one far off still rejects the partner.
    const LrMateScrewing cell;
    REQUIRE(cell.profile.speed.has_value());
    const Recording slow = record_cell(cell.robot, cell.task, 6, 77, 0.8, 0);
    const auto estimate = [&](double offset, bool& settled) {
        Recording shifted = slow;
        for (double& angle : shifted.q[3]) angle += offset;
        Detector detector(cell.profile);
        std::vector<double> tau(6), q(6);
        for (std::size_t i = 0; i < shifted.size(); ++i) detector.update(shifted.sample(i, tau, q));
        settled = detector.speed_settled();
        return detector.speed_ratio();
    };
    bool settled_exact = false, settled_near = false, settled_far = false;
    const double exact = estimate(0.0, settled_exact), near = estimate(0.001, settled_near), far = estimate(0.05, settled_far);
    INFO("6 cycles at 80 %, joint 4 as recorded: estimate " << exact << (settled_exact ? "" : " (not settled)") << "; 1 mrad off: "
         << near << (settled_near ? "" : " (not settled)") << "; 50 mrad off: " << far << (settled_far ? "" : " (not settled)"));
    // Before the allowance, 1 mrad off: 1.05, not settled (no partner confirmed in 6 cycles).
    CHECK(settled_exact);
    CHECK(exact == Approx(0.8).margin(0.02));
    CHECK(settled_near);
    CHECK(near == Approx(0.8).margin(0.02));
    // 50 mrad is over five times the allowance anywhere in this task (at most 9.5 mrad): no partner.
    CHECK_FALSE(settled_far);
}

TEST_CASE("off the recorded speed the partner follows a screwing through its hold, though the wrist gives way less than "
          "in the reference",
          "[sim][speed][override]") {
    // The LR Mate-like holds joint 6 while the screwdriver's torque ramps up, and its servo gives
    // way to it (7.9 mrad in the held-out check's reference). A turned override slows the press
    // too, and at 70 % the wrist gave way 5.5 mrad there: scored by the angle at each reference
    // sample (0.1 mrad of angle scale), the partner stayed where the angle matched, up to 30
    // samples behind the current's ramp, and joint 6 stopped the robot — 110 of the check's 151
    // false stop events in 100 cycles with turns. Off the recorded speed, where the reference
    // stands later in the partner's hold, a joint's angle is measured from the range the hold's
    // standing samples read (docs/detection.md).
    const LrMateScrewing cell;
    const std::vector<sim::OverrideChange> turn{{1.0, 0.7}};
    const Recording run = record_cell(cell.robot, cell.task, 8, 95, 1.0, 0, turn);
    Detector judge(cell.profile);
    const RunEvaluation nominal = evaluate_detector("turned", run, judge);
    std::size_t wrist = 0;
    std::ostringstream which;
    for (const auto& e : nominal.events) wrist += e.decision.joint == 6, which << " " << e.t << " s (joint " << e.decision.joint << ")";
    INFO("8 cycles, the override turned to 70 % at 1 s: " << nominal.events.size() << " stop events, " << wrist << " by joint 6:"
                                                           << which.str());
    // Measured before: 73 stop events, 63 by joint 6; after: 9, none by joint 6 — joint 2 in the
    // turn's own ramp (1.25-1.32 s; a current's sign is rebuilt, so no witnessed s' there) and as
    // it starts the move after the wrist's spring-back (twice).
    CHECK(wrist == 0);
    CHECK(nominal.events.size() <= 12);

    // Collisions at 70 %: the angles of a hold still place no partner before the one the signals had.
    const Recording hits_run = record_cell(cell.robot, cell.task, 11, 96, 1.0, 10, turn);
    Detector hits_judge(cell.profile);
    const RunEvaluation hits = evaluate_detector("collisions", hits_run, hits_judge);
    REQUIRE(hits.truth.has_value());
    INFO("collisions at 70 %: " << hits.truth->detected << " of " << hits.truth->collisions.size() << " detected");
    CHECK(hits.truth->collisions.size() == 10);
    CHECK(hits.truth->detected >= 9);
}

TEST_CASE("off the recorded speed the partner follows the wrist's creep inside a screwing's hold too", "[sim][speed][override]") {
    // The screwdriver's torque makes the LR Mate-like's joint 6 give way faster than the rest
    // velocity for 70 samples in the middle of its hold (up to 0.033 rad/s in the reference):
    // those samples count as moving. Off the recorded speed the hold's angles are measured from its
    // range only for standing candidates, so until 2026-12-06 the partner was held back in the
    // creep by an angle the slower press had not reached (the wrist gives way less at 70 %) while
    // the current ramped on, and joint 6's deviation rose (held-out check with turns reported: 14
    // of its 24 false stop events). Since then the creep between a hold's standing samples counts
    // as standing; only a move's tails at the hold's edges do not. The profile is calibrated on 100
    // cycles as the held-out check's is: its thresholds are what make the lag count.
    const std::string held_out = std::string(WARPGUARD_ROBOTS_DIR) + "/../held-out";
    const RobotDescription robot = load_robot_description(held_out + "/lrmate-like.json");
    const sim::Task task = sim::load_task(held_out + "/lrmate-like-screwing.json", 6);
    const Recording reference = record_cell(robot, task, 7, 7001, 1.0, 0);
    const Recording calibration = record_cell(robot, task, 100, 7002, 1.0, 0);
    // The kinematics as the held-out check identifies them (the procedure's points with 0.05 mm of
    // noise): the speed model from the true ones explains the screwing closely enough that the
    // partner was not held back, from these it was.
    sim::IdentificationProcedure procedure;
    procedure.noise = 0.05e-3;
    procedure.seed = 7020;
    CalibrationOptions options;
    options.dynamics_model = identify_dh(sim::run_identification_procedure(robot, procedure)).model;
    const NamedRecording nominal{"calibration", &calibration};
    const Profile profile = calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    const Recording run = record_cell(robot, task, 10, 95, 1.0, 0, {{1.0, 0.7}});
    // Per screwing, joint 6's largest ratio (the rule's deviation over its threshold) while the arm
    // stands at a hole (joint 1 at one of the task's three holes and joint 5 at 1.15 rad, both
    // within 2 mrad), after the run's first 2 s (the turn and its ramp).
    Detector detector(profile);
    std::map<std::int64_t, double> screw_ratio;
    std::vector<double> tau(run.joints()), q(run.joints());
    std::size_t stops = 0;
    for (std::size_t i = 0; i < run.size(); ++i) {
        const Sample s = run.sample(i, tau, q);
        stops += detector.update(s).stop();
        const bool at_hole = std::abs(s.q[4] - 1.15) < 2e-3 &&
                             (std::abs(s.q[0] + 0.3) < 2e-3 || std::abs(s.q[0] + 0.1) < 2e-3 || std::abs(s.q[0] - 0.1) < 2e-3);
        if (s.t > 2.0 && at_hole && !detector.warming_up()) {
            double& r = screw_ratio[s.cycle];
            r = std::max(r, detector.evaluations()[5].ratio);
        }
    }
    double mean = 0.0;
    std::size_t near = 0;
    std::ostringstream each;
    for (const auto& [cycle, r] : screw_ratio) mean += r / static_cast<double>(screw_ratio.size()), near += r > 0.5, each << " " << r;
    INFO("per screwing:" << each.str());
    INFO(screw_ratio.size() << " screwings: joint 6's largest ratio " << mean << " on average, over 0.5 in " << near << "; "
                            << stops << " STOP decisions in the run");
    // Measured: before 0.63 on average, over 0.5 in 5 of 10 (1.70 at the fourth); after 0.31, 1
    // (0.69, the first, in the turn's own ramp).
    CHECK(screw_ratio.size() >= 8);
    CHECK(mean < 0.45);
    CHECK(near <= 2);
}

TEST_CASE("the limits the dashboard draws are where the ratio rule calls a sample over, bands and all", "[sim][speed][dashboard]") {
    // Detector::judged gives the dashboard the offsets from the matched reference beyond which a
    // sample is over its threshold. At 70 % override from the stream's start every band the rule
    // takes off is in play (the reference's range around the match, the converging speed, the
    // model's unexplained part, dry friction off the recorded speed, a resting joint's held offset),
    // and collisions push samples over: a sample is outside the limits exactly when its ratio is
    // over 1.
    const Irb120Speed cell;
    const RobotDescription& robot = cell.robot;
    const Recording slow_hits = record_cell(robot, cell.task, 7, 67, 0.7, 6);
    Detector detector(cell.profile);
    std::vector<double> tau(robot.dof()), q(robot.dof());
    std::size_t judged = 0, straddle = 0, over = 0, outside = 0, disagree = 0, asymmetric = 0, ratio_stops = 0, stops_off = 0;
    double worst = 0.0;
    for (std::size_t i = 0; i < slow_hits.size(); ++i) {
        const Decision d = detector.update(slow_hits.sample(i, tau, q));
        if (detector.warming_up()) continue;
        if (d.stop() && d.rule == Rule::AbsoluteDifference) {
            // What the stop evidence shows: the stopping sample beyond its limit by the stop's
            // value less its threshold (the deviation beyond the bands less the phase threshold).
            const Detector::Judged limits = detector.judged(d.joint - 1);
            const double beyond = std::max(limits.low - limits.offset, limits.offset - limits.high);
            ++ratio_stops;
            stops_off += std::abs(beyond - (d.value - d.threshold)) > 1e-9 * (limits.high - limits.low);
        }
        for (std::size_t j = 0; j < robot.dof(); ++j) {
            const JointEvaluation& ev = detector.evaluations()[j];
            const Detector::Judged limits = detector.judged(j);
            straddle += limits.low < 0.0 && limits.high > 0.0;  // the reference itself is never over
            ++judged;
            // (a hair's width of rounding at the limit itself is not a disagreement)
            const double beyond = std::max(limits.low - limits.offset, limits.offset - limits.high);
            const bool is_over = ev.ratio > 1.0, is_outside = beyond > 0.0;
            over += is_over, outside += is_outside;
            if (is_over != is_outside && std::abs(beyond) > 1e-9 * (limits.high - limits.low)) {
                ++disagree;
                worst = std::max(worst, std::abs(beyond) / (limits.high - limits.low));
            }
            asymmetric += std::abs(limits.high + limits.low) > 0.05 * (limits.high - limits.low);
        }
    }
    INFO(judged << " joint-samples judged, " << over << " with a ratio over 1, " << outside << " outside the limits, " << disagree
                << " disagreeing (largest " << worst << " of the limits' width), " << asymmetric << " with limits over 5 % off-centre; "
                << ratio_stops << " stops by the ratio rule, " << stops_off << " not beyond their limit by value - threshold");
    CHECK(straddle == judged);
    CHECK(over > 20);  // the collisions did cross the limits
    CHECK(disagree == 0);
    CHECK(asymmetric > judged / 20);  // the bands do widen one side: the old symmetric band could not show it
    CHECK(ratio_stops > 0);
    CHECK(stops_off == 0);
}

TEST_CASE("the speed model from 100 % recordings keeps nominal cycles at 70 % override running — collisions still stop",
          "[sim][speed]") {
    const RobotDescription robot = ur5e();
    const sim::Task task = ur5e_task(true);  // pick-and-place with three place positions and a carried part
    const auto record = [&](std::size_t cycles, std::uint64_t seed, double override_factor, std::size_t contacts) {
        return record_cell(robot, task, cycles, seed, override_factor, contacts);
    };
    const Recording reference = record(7, 31, 1.0, 0);
    const Recording calibration = record(12, 32, 1.0, 0);
    const Recording slow = record(10, 33, 0.7, 0);
    const Recording slow_hits = record(11, 34, 0.7, 10);

    CalibrationOptions options;
    options.reference_cycles = 3;
    const NamedRecording nominal{"calibration", &calibration};
    const Profile plain = calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    options.dynamics_model = robot.kinematics;
    const Profile modelled = calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    REQUIRE_FALSE(plain.speed.has_value());
    REQUIRE(modelled.speed.has_value());
    for (const auto& joint : modelled.speed->derivation.at("joints")) {
        INFO("joint " << joint.at("joint").get<int>() << ": explained " << joint.at("explained").get<double>());
        CHECK(joint.at("explained").get<double>() > 0.5);
    }

    const auto run = [](const Profile& profile, const Recording& rec, double* ratio) {
        Detector detector(profile);
        RunEvaluation out = evaluate_detector("run", rec, detector);
        if (ratio) *ratio = detector.speed_ratio();
        return out;
    };
    double ratio = 0.0;
    const RunEvaluation without = run(plain, slow, nullptr);
    const RunEvaluation with = run(modelled, slow, &ratio);
    INFO("10 nominal cycles at 70 %: " << without.events.size() << " stop events without the speed model, " << with.events.size()
                                        << " with it; estimated speed ratio " << ratio);
    CHECK(without.events.size() >= 20);
    CHECK(with.events.size() <= 1);
    CHECK(ratio == Approx(0.7).margin(0.03));

    const RunEvaluation hits = run(modelled, slow_hits, nullptr);
    REQUIRE(hits.truth.has_value());
    INFO("collisions at 70 %: " << hits.truth->detected << " of " << hits.truth->collisions.size() << " detected, "
                                << hits.truth->false_stop_events << " false stop events");
    CHECK(hits.truth->collisions.size() == 10);
    CHECK(hits.truth->detected >= 9);
}

// A contact task (snap-fit at three poses, then screwing) calibrated at 100 % and run at 80 %: the
// moves slow down, the presses and waits keep their durations. The speed model is fitted on the
// samples where the robot moves; fitted on every sample, the presses (the robot stands while it
// presses) bent the shared parameters and gave the moves a wrong inertial part (the suite's
// IRB120-like assembly at 80 %: 374 stop events in 30 cycles, every cycle stopped; docs/detection.md).
// This test with the fit on every sample: 2 stop events in these 8 cycles (20 calibration cycles give
// wider thresholds than the suite's 50).
namespace {

// A contact task (snap-fit at three poses, then screwing) calibrated at 100 % with the arm model from
// the calibration cycles, then run at 80 % override: 8 nominal cycles and 9 with 8 collisions. The
// robot stands while it presses and screws; those samples must not bend the arm model or the speed
// model (docs/detection.md, *The speed model*).
void check_contact_task_off_speed(const std::string& name, std::uint64_t seed) {
    const RobotDescription robot = load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/" + name + ".json");
    const sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/" + name + "-assembly.json", 6);
    const Recording reference = record_cell(robot, task, 7, seed, 1.0, 0);
    const Recording calibration = record_cell(robot, task, 20, seed + 1, 1.0, 0);
    const Recording slow = record_cell(robot, task, 8, seed + 2, 0.8, 0);
    const Recording slow_hits = record_cell(robot, task, 9, seed + 3, 0.8, 8);

    CalibrationOptions options;
    options.reference_cycles = 3;
    options.dynamics_model = robot.kinematics;
    options.arm_from_nominal = true;  // as `warpguard calibrate --model` does
    const NamedRecording nominal{"calibration", &calibration};
    const Profile profile = calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    REQUIRE(profile.arm.has_value());
    REQUIRE(profile.speed.has_value());
    const std::size_t resting = profile.speed->derivation.value("resting_samples_left_out", std::size_t{0});
    const std::size_t fitted = profile.speed->derivation.at("samples").get<std::size_t>();
    INFO("speed model: " << fitted << " moving samples fitted, " << resting << " at rest left out");
    CHECK(resting > fitted / 4);  // the task stands for its presses and waits
    const std::size_t arm_resting = profile.arm->derivation.value("resting_samples_left_out", std::size_t{0});
    const std::size_t arm_fitted = profile.arm->derivation.at("samples").get<std::size_t>();
    INFO("arm model: " << arm_fitted << " moving samples fitted, " << arm_resting << " at rest left out");
    CHECK(arm_resting > arm_fitted / 4);

    Detector detector(profile);
    const RunEvaluation run = evaluate_detector("80 %", slow, detector);
    INFO("8 nominal cycles at 80 %: " << run.events.size() << " stop events; estimated speed ratio " << detector.speed_ratio());
    CHECK(run.events.size() <= 1);
    CHECK(detector.speed_ratio() == Approx(0.8).margin(0.03));

    Detector hits_detector(profile);
    const RunEvaluation hits = evaluate_detector("80 % with collisions", slow_hits, hits_detector);
    REQUIRE(hits.truth.has_value());
    INFO("collisions at 80 %: " << hits.truth->detected << " of " << hits.truth->collisions.size() << " detected");
    CHECK(hits.truth->collisions.size() == 8);
    CHECK(hits.truth->detected >= 7);
}

}  // namespace

// Before the speed model was fitted on moving samples only: 2 stop events in the 8 cycles (the
// presses bent the split of joint 3's move after the screwing).
TEST_CASE("a contact task calibrated at 100 % runs on at 80 % override — collisions still stop", "[sim][speed][contact-task]") {
    check_contact_task_off_speed("irb120-like", 81);
}

// In percent of rated torque. Before the arm model too was fitted on moving samples only, the
// suite's profile stopped this task in every cycle at 80 % (267 stop events in 30 cycles).
TEST_CASE("a contact task in percent calibrated at 100 % runs on at 80 % override — collisions still stop",
          "[sim][speed][contact-task]") {
    check_contact_task_off_speed("vp6242-like", 91);
}

TEST_CASE("a declared heavier part is expected from the kinematics: nominal cycles run on, collisions still stop",
          "[sim][payload]") {
    const RobotDescription robot = ur5e();
    const sim::Task task = ur5e_task(true);
    const HeavierPartRuns runs = record_heavier_part_runs(robot, task);
    const double part = runs.part;
    REQUIRE(part > 0);
    const Recording &reference = runs.reference, &calibration = runs.calibration, &heavy = runs.heavy, &heavy_hits = runs.heavy_hits;
    REQUIRE(heavy.declares_payload());
    CHECK(*std::max_element(heavy.payload.begin(), heavy.payload.end()) == 2.0 * part);

    CalibrationOptions options;
    options.reference_cycles = 3;
    options.dynamics_model = robot.kinematics;
    const NamedRecording nominal{"calibration", &calibration};
    const Profile profile = calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    REQUIRE(profile.payload.has_value());
    // The signal is in Nm: each joint's jumps at the releases must be the part's weight through the
    // kinematics (a check of the model and of the fitted centre of mass, not an input).
    const auto& derivation = profile.payload->derivation;
    INFO("payload model: " << derivation.dump());
    CHECK(derivation.at("payload_changes_while_standing").get<std::size_t>() >= 5);
    const auto measured = derivation.at("measured_signal_per_nm").get<std::vector<double>>();
    CHECK(measured[1] == Approx(1.0).margin(0.05));
    CHECK(measured[2] == Approx(1.0).margin(0.05));
    // The part hangs at the tool point: (0, 0, 0.12) m from the flange in the description.
    const auto centre = derivation.at("centre_of_mass").get<std::vector<double>>();
    const Eigen::Vector3d tool = robot.kinematics.tool().translation();
    CHECK(std::hypot(centre[0] - tool.x(), centre[1] - tool.y(), centre[2] - tool.z()) < 0.01);
    // Every grasp and release happens with the tool pointing down: the changes fit the centre
    // across the flange's axis to millimetres and cannot see how far along it the part hangs, which
    // is given the last link's length (the last axis point to the tool point).
    const auto& spread = profile.payload->centre_uncertainty;
    REQUIRE(spread.size() == 3);
    std::vector<double> reach;
    for (const auto& u : spread) reach.push_back(u.norm());
    std::sort(reach.begin(), reach.end());
    CHECK(reach[1] < 0.01);
    const std::vector<double> zero(robot.kinematics.dof(), 0.0);
    std::vector<Eigen::Isometry3d> frames(robot.kinematics.dof() + 2);
    robot.kinematics.forward(zero, frames);
    const double link = (frames[robot.kinematics.dof() + 1].translation() - frames[robot.kinematics.dof() - 1].translation()).norm();
    CHECK(reach[2] == Approx(link).margin(0.01));
    for (const auto& u : spread) {
        if (u.norm() > 0.1) CHECK(std::abs(u.normalized().z()) > 0.99);  // along the flange's axis
    }
    // The base joint's jumps cannot show its error (a weight has no torque about a vertical axis):
    // it takes the largest error of the joints whose jumps show theirs, not the whole difference.
    const auto shown = derivation.at("error_shown_by_joints").get<std::vector<std::size_t>>();
    const auto& relative = profile.payload->relative_error;
    CHECK(std::find(shown.begin(), shown.end(), 1u) == shown.end());
    CHECK(std::find(shown.begin(), shown.end(), 2u) != shown.end());
    CHECK(std::find(shown.begin(), shown.end(), 3u) != shown.end());
    double largest = 0;
    for (std::size_t j : shown) largest = std::max(largest, relative[j - 1]);
    CHECK(largest > 0);
    CHECK(largest < 0.2);
    CHECK(relative[0] == Approx(largest));

    const auto run = [&](const Recording& rec) {
        Detector detector(profile);
        return evaluate_detector("run", rec, detector);
    };
    Recording undeclared = heavy;
    undeclared.payload.clear();  // the same cycles from a robot that does not send its payload
    const RunEvaluation without = run(undeclared);
    const RunEvaluation with = run(heavy);
    INFO("10 cycles with twice the part: " << without.events.size() << " stop events undeclared, " << with.events.size()
                                           << " declared");
    std::ostringstream stops;
    for (const auto& e : with.events) {
        stops << "\n  stop at sample " << e.index << " of " << heavy.size() << ", joint " << e.decision.joint << ", "
              << to_string(e.decision.rule) << " " << e.decision.value << " over " << e.decision.threshold << " (reference "
              << e.decision.ref_start << ".." << e.decision.ref_end << ")";
    }
    INFO("declared payload, stop events:" << stops.str());
    CHECK(without.events.size() >= 10);
    CHECK(with.events.size() <= 1);
    const RunEvaluation hits = run(heavy_hits);
    REQUIRE(hits.truth.has_value());
    INFO("collisions with twice the part: " << hits.truth->detected << " of " << hits.truth->collisions.size() << " detected, "
                                            << hits.truth->false_stop_events << " false stop events");
    CHECK(hits.truth->collisions.size() == 10);
    CHECK(hits.truth->detected >= 9);
}

TEST_CASE("KA-mDTW keeps the reference's part and takes off only a declared heavier part's difference", "[sim][payload][ka]") {
    // KA-mDTW matches the part's torque over the lever lengths (thesis 4.5.1), so its payload model
    // takes off only what a sample carries beyond the reference's part: twice the part is matched
    // as the reference's part. Each robot's pick-and-place, the part's place varying.
    const std::string name = GENERATE(as<std::string>{}, "ur5e-like", "irb120-like", "vp6242-like");
    INFO(name);
    const RobotDescription robot = load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/" + name + ".json");
    const sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/" + name + "-pick-and-place.json", 6);
    const HeavierPartRuns runs = record_heavier_part_runs(robot, task);
    REQUIRE(runs.part > 0);
    const Recording &reference = runs.reference, &calibration = runs.calibration, &heavy = runs.heavy, &heavy_hits = runs.heavy_hits;
    const Recording same = record_cell(robot, task, 10, 55, 1.0, 0);

    CalibrationOptions options = ka_calibration(robot);
    const NamedRecording nominal{"calibration", &calibration};
    const Profile profile = calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    REQUIRE(profile.payload.has_value());
    CHECK(profile.payload->beyond_reference_part);
    const std::string note = profile.calibration.at("payload_model").get<std::string>();
    INFO("payload note: " << note);
    CHECK(note.find("not taken off: KA-mDTW") == 0);
    CHECK(note.find("taken off by its difference") != std::string::npos);
    CHECK(describe_matched_signal(profile).find("beyond the reference's part") != std::string::npos);
    Profile unmodelled = profile;  // as calibrated before: the part's mass not modelled at all
    unmodelled.payload.reset();

    const auto run = [&](const Profile& p, const Recording& rec) {
        Detector detector(p);
        return evaluate_detector("run", rec, detector);
    };
    // The reference's own part: nothing is taken off, the matched signal is the one without the
    // model, sample for sample.
    {
        Detector with(profile), without(unmodelled);
        std::vector<double> tau(6), q(6);
        double largest = 0.0;
        for (std::size_t i = 0; i < same.size(); ++i) {
            const Sample sample = same.sample(i, tau, q);
            with.update(sample);
            without.update(sample);
            for (std::size_t j = 0; j < 6; ++j) largest = std::max(largest, std::abs(with.window(j).back() - without.window(j).back()));
        }
        INFO("the reference's part: largest difference of the matched signal with and without the model " << largest);
        CHECK(largest == 0.0);
    }
    const RunEvaluation unmodelled_run = run(unmodelled, heavy);
    const RunEvaluation modelled_run = run(profile, heavy);
    INFO("10 cycles with twice the part: " << unmodelled_run.events.size() << " stop events without the model, " << modelled_run.events.size()
                                           << " with it");
    CHECK(unmodelled_run.events.size() >= 10);
    CHECK(modelled_run.events.size() <= 1);
    const RunEvaluation hits = run(profile, heavy_hits);
    REQUIRE(hits.truth.has_value());
    INFO("collisions with twice the part: " << hits.truth->detected << " of " << hits.truth->collisions.size() << " detected, "
                                            << hits.truth->false_stop_events << " false stop events");
    CHECK(hits.truth->collisions.size() == 10);
    CHECK(hits.truth->detected >= 9);
}

TEST_CASE("without a payload model the declared payload still marks the phase: the shared partner carries when the robot does",
          "[sim][payload]") {
    // A profile without the robot's kinematics has no model of the part's torques, but the
    // carrying state the robot declares (a part or none) tells the phase of the task all the same:
    // a sample that declares the grasp belongs where the reference carries the part.
    const RobotDescription robot = ur5e();
    const sim::Task task = ur5e_task(true);
    const Recording reference = record_cell(robot, task, 7, 61, 1.0, 0);
    const Recording calibration = record_cell(robot, task, 12, 62, 1.0, 0);
    const Recording run = record_cell(robot, task, 10, 63, 1.0, 0);
    REQUIRE(run.declares_payload());
    CalibrationOptions options;
    options.reference_cycles = 3;
    const NamedRecording nominal{"calibration", &calibration};
    const Profile profile = calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    REQUIRE_FALSE(profile.payload.has_value());
    REQUIRE_FALSE(profile.reference.payload.empty());
    Detector detector(profile);
    std::vector<double> tau(run.joints()), q(run.joints());
    std::size_t judged = 0, disagree = 0, carrying = 0;
    for (std::size_t i = 0; i < run.size(); ++i) {
        detector.update(run.sample(i, tau, q));
        if (detector.warming_up()) continue;
        const std::size_t partner = detector.evaluations()[0].shared.partner;
        ++judged;
        carrying += run.payload[i] > 0.0;
        disagree += (run.payload[i] > 0.0) != (profile.reference.payload[partner] > 0.0);
    }
    INFO(disagree << " of " << judged << " samples matched against a reference sample of the other carrying state; "
                  << carrying << " samples carried the part");
    CHECK(carrying > judged / 10);
    CHECK(disagree == 0);
}

namespace {

// A robot's pick-and-place recorded by the simulated cell, its torques in Nm whatever the robot
// reports (percent converted with the description's rated torques).
struct SpeedFitData {
    RobotDescription robot;
    Recording reference_rec, nominal;
    Reference reference;
};
SpeedFitData speed_fit_data(const std::string& name) {
    SpeedFitData d;
    d.robot = load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/" + name + ".json");
    const sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/" + name + "-pick-and-place.json", 6);
    const auto record = [&](std::size_t cycles, std::uint64_t seed) {
        sim::CellOptions options;
        options.seed = seed;
        sim::RobotCell cell(d.robot, task, options);
        Recording rec = cell.record(cycles);
        if (rec.info().unit == SignalUnit::Percent) {
            for (std::size_t j = 0; j < rec.joints(); ++j) {
                for (double& v : rec.tau[j]) v *= d.robot.links[j].rated_torque / 100.0;
            }
            rec.info().unit = SignalUnit::Nm;
        }
        return rec;
    };
    d.reference_rec = record(4, 41);
    d.nominal = record(20, 42);
    d.reference = cut_reference(d.reference_rec, "reference", 3);
    return d;
}

// RMS over the reference of the error of a split's expected change at 70 % override, against the
// change the robot's true parameters give, for joint j; and the RMS of that true change.
std::pair<double, double> split_error_at_70(const SpeedFitData& d, const SpeedModel& model, std::size_t j) {
    const DynamicsRegressor regressor(d.robot.kinematics);
    const Eigen::VectorXd pi = regressor.parameters(d.robot.links);
    const Reference& reference = d.reference;
    const std::size_t n = d.robot.dof(), m = reference.size();
    std::vector<std::vector<double>> qd(n, std::vector<double>(m)), qdd(n, std::vector<double>(m));
    for (std::size_t i = 0; i < n; ++i) smooth_derivatives(reference.t, reference.q[i], kDerivativeHalfWidth, qd[i], qdd[i]);
    Eigen::MatrixXd y(n, regressor.columns());
    const double c2 = 0.7 * 0.7 - 1.0, c1 = 0.7 - 1.0;
    double err = 0, truth = 0;
    std::vector<double> q(n), v(n), a(n);
    for (std::size_t k = 0; k < m; ++k) {
        for (std::size_t i = 0; i < n; ++i) q[i] = reference.q[i][k], v[i] = qd[i][k], a[i] = qdd[i][k];
        regressor.compute(q, v, a, false, y);
        const auto row = static_cast<Eigen::Index>(j);
        const double viscous = y(row, static_cast<Eigen::Index>(regressor.joint_column(j, 1))) * pi(static_cast<Eigen::Index>(regressor.joint_column(j, 1)));
        const double coulomb = y(row, static_cast<Eigen::Index>(regressor.joint_column(j, 2))) * pi(static_cast<Eigen::Index>(regressor.joint_column(j, 2)));
        const double inertial = y.row(row).dot(pi) - viscous - coulomb;
        const double change = c2 * inertial + c1 * viscous;  // the true change at 70 %
        const double fitted = c2 * model.inertial[j][k] + c1 * model.viscous[j][k];
        err += (fitted - change) * (fitted - change);
        truth += change * change;
    }
    return {std::sqrt(err / static_cast<double>(m)), std::sqrt(truth / static_cast<double>(m))};
}

}  // namespace

TEST_CASE("with torques in Nm the speed model's split follows the robot's true dynamics, not a per-joint trade-off",
          "[sim][speed]") {
    // The split of the reference into what scales with the override is compared with the one the
    // simulated robot's true parameters give (the description the simulator runs on), as the
    // change expected at 70 %: one parameter set for all joints against a copy per joint.
    const SpeedFitData d = speed_fit_data("irb120-like");
    const SpeedModelSource source{"nominal", &d.nominal, {}};
    const SpeedModel shared = fit_speed_model(d.robot.kinematics, d.reference, SignalKind::Torque, SignalUnit::Nm,
                                              std::span<const SpeedModelSource>(&source, 1));
    const SpeedModel per_joint = fit_speed_model(d.robot.kinematics, d.reference, SignalKind::Torque, SignalUnit::Nm,
                                                 std::span<const SpeedModelSource>(&source, 1), Eigen::Vector3d(0, 0, -9.81), 60000,
                                                 ParameterSharing::PerJoint);
    CHECK(shared.derivation.at("shared_parameters").get<bool>());
    CHECK_FALSE(per_joint.derivation.at("shared_parameters").get<bool>());
    for (std::size_t j : {1u, 2u}) {  // joints 2 and 3, which carry the arm
        const auto [rms_shared, rms_truth] = split_error_at_70(d, shared, j);
        const double rms_per_joint = split_error_at_70(d, per_joint, j).first;
        INFO("joint " << j + 1 << ": true change at 70 % rms " << rms_truth << " Nm; error of the split: shared " << rms_shared
                      << " Nm, per joint " << rms_per_joint << " Nm");
        CHECK(rms_shared < 0.5 * rms_per_joint);
        CHECK(rms_shared < rms_truth);
    }
}

TEST_CASE("with torques in percent of each joint's rated torque the speed model fits one parameter set and a factor per joint",
          "[sim][speed]") {
    // The VP-6242-like reports percent (as a Denso controller does). Fitted in percent with a
    // factor per joint, the split (converted back to Nm) comes close to the Nm fit's and is far
    // better than a copy of the parameters per joint (what percent got before).
    const SpeedFitData d = speed_fit_data("vp6242-like");
    const auto to_percent = [&](Recording rec) {
        for (std::size_t j = 0; j < rec.joints(); ++j) {
            for (double& v : rec.tau[j]) v *= 100.0 / d.robot.links[j].rated_torque;
        }
        rec.info().unit = SignalUnit::Percent;
        return rec;
    };
    const Recording nominal_percent = to_percent(d.nominal);
    const Reference reference_percent = cut_reference(to_percent(d.reference_rec), "reference", 3);
    const SpeedModelSource source{"nominal", &d.nominal, {}}, source_percent{"nominal", &nominal_percent, {}};
    const SpeedModel nm = fit_speed_model(d.robot.kinematics, d.reference, SignalKind::Torque, SignalUnit::Nm,
                                          std::span<const SpeedModelSource>(&source, 1));
    const SpeedModel per_joint = fit_speed_model(d.robot.kinematics, d.reference, SignalKind::Torque, SignalUnit::Nm,
                                                 std::span<const SpeedModelSource>(&source, 1), Eigen::Vector3d(0, 0, -9.81), 60000,
                                                 ParameterSharing::PerJoint);
    SpeedModel scaled = fit_speed_model(d.robot.kinematics, reference_percent, SignalKind::Torque, SignalUnit::Percent,
                                        std::span<const SpeedModelSource>(&source_percent, 1));
    CHECK(scaled.derivation.at("shared_parameters").get<bool>());
    CHECK(scaled.derivation.at("joint_scales").size() == d.robot.dof());
    for (std::size_t j = 0; j < d.robot.dof(); ++j) {
        for (auto* part : {&scaled.inertial[j], &scaled.viscous[j]}) {
            for (double& v : *part) v *= d.robot.links[j].rated_torque / 100.0;
        }
    }
    for (std::size_t j : {1u, 2u}) {
        const auto [rms_scaled, rms_truth] = split_error_at_70(d, scaled, j);
        const double rms_nm = split_error_at_70(d, nm, j).first, rms_per_joint = split_error_at_70(d, per_joint, j).first;
        INFO("joint " << j + 1 << ": true change at 70 % rms " << rms_truth << " Nm; error of the split: percent with factors "
                      << rms_scaled << " Nm, Nm " << rms_nm << " Nm, per joint " << rms_per_joint << " Nm");
        // Measured (joints 2 / 3, Nm): percent with factors 0.072 / 0.063, Nm 0.061 / 0.049, per joint
        // 0.155 / 0.244 since the speed model is fitted on the samples where the robot moves
        // (2026-11-29); on every sample 0.063 / 0.045, 0.057 / 0.044, 0.138 / 0.127.
        CHECK(rms_scaled < 0.6 * rms_per_joint);
        CHECK(rms_scaled < 1.4 * rms_nm);
        CHECK(rms_scaled < rms_truth);
    }
}

TEST_CASE("off the recorded speed a still joint's dry-friction band keeps 70 % cycles running — collisions still stop",
          "[sim][speed][friction]") {
    // The VP-6242-like's wrist joints have dry friction of about 5 % of their rated torque. Where a
    // joint comes to rest or breaks away, the torque its friction holds depends on how it got
    // there, and at 70 % override that is not how the reference got there: without the band these
    // phases made most of the 70 % false stops of the benchmark (2,740 per 1,000 cycles).
    const RobotDescription robot = load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/vp6242-like.json");
    const sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/vp6242-like-pick-and-place.json", 6);
    const auto record = [&](std::size_t cycles, std::uint64_t seed, double override_factor, std::size_t contacts) {
        return record_cell(robot, task, cycles, seed, override_factor, contacts);
    };
    const Recording reference = record(7, 61, 1.0, 0);
    const Recording calibration = record(12, 62, 1.0, 0);
    const Recording same_speed = record(10, 63, 1.0, 0);
    const Recording slow = record(10, 64, 0.7, 0);
    const Recording slow_hits = record(11, 65, 0.7, 10);
    CalibrationOptions options;
    options.reference_cycles = 3;
    options.dynamics_model = robot.kinematics;
    const NamedRecording nominal{"calibration", &calibration};
    const Profile with_band = calibrate({"reference", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    REQUIRE(with_band.speed.has_value());
    // The tolerance is the calibration pass's own spread of the speed estimate around 1.
    const double tolerance = with_band.speed->same_speed_tolerance;
    INFO("same-speed tolerance " << tolerance);
    CHECK(tolerance > 0.0);
    CHECK(tolerance < 0.05);
    // Dry friction fitted for every joint that moves; joint 5 carries the wrist's 5 % of its rating.
    const auto& coulomb = with_band.speed->coulomb;
    REQUIRE(coulomb.size() == robot.dof());
    INFO("fitted Coulomb friction (% of rated torque) of joint 5: " << coulomb[4]);
    CHECK(coulomb[4] > 2.5);
    CHECK(coulomb[4] < 10.0);
    Profile without_band = with_band;
    std::fill(without_band.speed->coulomb.begin(), without_band.speed->coulomb.end(), 0.0);

    // At the recorded speed the band stays shut.
    {
        Detector detector(with_band);
        std::vector<double> tau(robot.dof()), q(robot.dof());
        std::size_t open = 0;
        for (std::size_t i = 0; i < same_speed.size(); ++i) {
            detector.update(same_speed.sample(i, tau, q));
            for (const auto& ev : detector.evaluations()) open += ev.friction_band > 0.0;
        }
        INFO("joint-samples with an open band at 100 %: " << open << " of " << same_speed.size() * robot.dof());
        CHECK(open < same_speed.size() * robot.dof() / 100);
    }
    const auto run = [](const Profile& profile, const Recording& rec) {
        Detector detector(profile);
        return evaluate_detector("run", rec, detector);
    };
    // At 70 %: how close each joint comes to its threshold (the largest ratio held for the
    // persistence, and the largest CUSUM against its limit), without and with the band.
    const auto closest = [&](const Profile& profile) {
        Detector detector(profile);
        std::vector<double> tau(robot.dof()), q(robot.dof()), held(robot.dof(), 0.0), cusum(robot.dof(), 0.0), previous(robot.dof(), 0.0);
        for (std::size_t i = 0; i < slow.size(); ++i) {
            detector.update(slow.sample(i, tau, q));
            if (detector.warming_up()) continue;
            const auto evs = detector.evaluations();
            for (std::size_t j = 0; j < robot.dof(); ++j) {
                held[j] = std::max(held[j], std::min(evs[j].ratio, previous[j]));
                previous[j] = evs[j].ratio;
                cusum[j] = std::max(cusum[j], evs[j].cusum / profile.phase->cusum_limit);
            }
        }
        return std::pair{held, cusum};
    };
    const auto [held_before, cusum_before] = closest(without_band);
    const auto [held_after, cusum_after] = closest(with_band);
    std::ostringstream table;
    for (std::size_t j = 0; j < robot.dof(); ++j) {
        table << "joint " << j + 1 << ": largest held ratio " << held_before[j] << " -> " << held_after[j] << ", largest CUSUM / limit "
              << cusum_before[j] << " -> " << cusum_after[j] << "\n";
    }
    INFO("at 70 %, without -> with the band:\n" << table.str());
    // Joint 5 is where the benchmark's false stops were (measured with the speed model fitted on
    // every sample: CUSUM 0.79 -> 0.28 of its limit, held ratio 0.36 -> 0.29; fitted on the samples
    // where the robot moves, since 2026-11-29, the model alone keeps it at 0.23 and the band takes
    // it to 0.22, held ratio 0.37 -> 0.35); the closest any joint comes to its CUSUM limit drops
    // with it.
    CHECK(cusum_after[4] < cusum_before[4]);
    CHECK(held_after[4] < held_before[4]);
    CHECK(*std::max_element(cusum_after.begin(), cusum_after.end()) < 0.75 * *std::max_element(cusum_before.begin(), cusum_before.end()));
    const RunEvaluation after = run(with_band, slow);
    // What the speed model leaves unexplained of the reference shows at 70 % where the thresholds
    // are tight: as the Gumbel fit alone sets them from these 12 calibration cycles (margin about
    // 1, CUSUM limit about 1.1; the tail fit widens them) its band is needed too (measured: 3 stop
    // events in these 10 cycles without it).
    Profile tight = with_band;
    {
        auto& ph = *tight.phase;
        const double margin = std::max({ph.derivation.at("gumbel_quantile").get<double>(),
                                        ph.derivation.at("cycle_max_largest").get<double>(), 1.0});
        for (auto& joint : ph.rule1) {
            for (double& v : joint) v *= margin / ph.margin;
        }
        ph.margin = margin;
        ph.cusum_limit = std::max(ph.derivation.at("cusum_gumbel_quantile").get<double>(),
                                  ph.derivation.at("cusum_cycle_max_largest").get<double>());
    }
    const RunEvaluation tight_after = run(tight, slow);
    Profile without_unexplained = tight;
    without_unexplained.speed->unexplained.clear();
    const RunEvaluation unexplained_off = run(without_unexplained, slow);
    const auto [held_tight, cusum_tight] = closest(tight);
    const auto [held_tight_off, cusum_tight_off] = closest(without_unexplained);
    const double closest_tight = *std::max_element(cusum_tight.begin(), cusum_tight.end());
    const double closest_tight_off = *std::max_element(cusum_tight_off.begin(), cusum_tight_off.end());
    const double held_max = *std::max_element(held_tight.begin(), held_tight.end());
    const double held_max_off = *std::max_element(held_tight_off.begin(), held_tight_off.end());
    INFO("tight thresholds, largest CUSUM / limit without -> with the model-error band: " << closest_tight_off << " -> "
                                                                                          << closest_tight << ", largest held ratio "
                                                                                          << held_max_off << " -> " << held_max);
    INFO("calibrated margin " << with_band.phase->margin << ", CUSUM limit " << with_band.phase->cusum_limit << "; tight "
                              << tight.phase->margin << ", " << tight.phase->cusum_limit);
    INFO("10 nominal cycles at 70 %: " << after.events.size() << " stop events with the bands; with tight thresholds "
                                       << tight_after.events.size() << " with the bands, " << unexplained_off.events.size()
                                       << " without the model-error band");
    std::ostringstream tight_events;
    for (const auto& e : tight_after.events) {
        tight_events << "sample " << e.index << " (t " << e.t << " s), joint " << e.decision.joint << ", rule "
                     << to_string(e.decision.rule) << ", value " << e.decision.value << " vs " << e.decision.threshold
                     << ", reference span " << e.decision.ref_start << "-" << e.decision.ref_end << "\n";
    }
    INFO("stop events with tight thresholds and the bands:\n" << tight_events.str());
    CHECK(after.events.empty());
    CHECK(tight_after.events.empty());
    // Measured with the speed model fitted on every sample: 3 stop events without the model-error
    // band. Fitted on the moving samples the split is close enough that there are none; the band
    // still takes the run farther from its limits.
    CHECK(unexplained_off.events.size() >= tight_after.events.size());
    CHECK(closest_tight + held_max < closest_tight_off + held_max_off);

    const RunEvaluation hits = run(with_band, slow_hits);
    REQUIRE(hits.truth.has_value());
    INFO("collisions of 100-300 N at 70 %: " << hits.truth->detected << " of " << hits.truth->collisions.size() << " detected");
    CHECK(hits.truth->collisions.size() == 10);
    CHECK(hits.truth->detected >= 9);
}

namespace {

// A robot's pick-and-place recorded as a dry run (every grasped mass 0, 12 cycles, seed `dry_seed`),
// the arm model fitted on it, and 4 cycles with the part (seed `run_seed`) beside the same cycles
// without it: the same motion and reading noise, so loaded - twin is the part's torque exactly.
struct ArmTwin {
    RobotDescription robot;
    double part = 0;  // kg, the largest grasped mass
    Recording loaded, twin;
    ArmDynamics arm;
    Recording deviation;  // loaded less the arm model
};
ArmTwin arm_twin(const std::string& name, std::uint64_t dry_seed, std::uint64_t run_seed) {
    ArmTwin d;
    d.robot = load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/" + name + ".json");
    const sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/" + name + "-pick-and-place.json", 6);
    sim::Task dry_task = task;
    for (auto& step : dry_task.steps) {
        if (step.kind == sim::TaskStep::Kind::Grasp) d.part = std::max(d.part, step.mass), step.mass = 0.0;
    }
    const Recording dry = record_cell(d.robot, dry_task, 12, dry_seed, 1.0, 0);
    d.loaded = record_cell(d.robot, task, 4, run_seed, 1.0, 0);
    d.twin = record_cell(d.robot, dry_task, 4, run_seed, 1.0, 0);
    const Recording* runs[] = {&dry};
    d.arm = fit_arm_dynamics(d.robot.kinematics, runs);
    d.deviation = arm_deviation(d.arm, d.loaded);
    return d;
}

double rms(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s / static_cast<double>(v.size()));
}

// Joint j: RMS of the part's true torque and of the model deviation's error against it.
std::pair<double, double> part_torque_and_error(const ArmTwin& d, std::size_t j) {
    std::vector<double> truth(d.loaded.size()), error(d.loaded.size());
    for (std::size_t i = 0; i < d.loaded.size(); ++i) {
        truth[i] = d.loaded.tau[j][i] - d.twin.tau[j][i];
        error[i] = d.deviation.tau[j][i] - truth[i];
    }
    return {rms(truth), rms(error)};
}

double dry_residual(const ArmTwin& d, std::size_t j) { return d.arm.derivation.at("joints")[j].at("residual_rms").get<double>(); }

}  // namespace

TEST_CASE("in percent of rated torque the arm model fits a factor per joint and still leaves the part's torque", "[sim][dynamics][ka]") {
    // The VP-6242-like reports percent of each joint's rated torque (as a Denso controller does):
    // one parameter set and a factor per joint, as the speed model fits them. Same comparison as
    // the Nm test below: a run with the 0.5 kg part against the same run without it.
    const ArmTwin d = arm_twin("vp6242-like", 63, 64);
    REQUIRE(d.loaded.info().unit == SignalUnit::Percent);
    REQUIRE(d.loaded.size() == d.twin.size());
    CHECK(d.arm.unit == SignalUnit::Percent);
    CHECK(d.arm.derivation.at("joint_scales").size() == d.robot.dof());
    for (std::size_t j : {1u, 2u}) {
        const auto [truth, error] = part_torque_and_error(d, j);
        INFO("joint " << j + 1 << ": the part's torque rms " << truth << " %; the model deviation's error rms " << error
                      << " %; the fit's residual on the dry run " << dry_residual(d, j) << " %");
        // On a run it was not fitted to, the model leaves no more than on its own dry run.
        CHECK(error < 1.2 * dry_residual(d, j));
        // Joint 3 carries the part clearly (about 3 % of its rated torque); on joint 2 (rated for
        // the whole arm) the part's 0.9 % is about the size of the reading noise the fit leaves.
        if (j == 2) CHECK(error < 0.5 * truth);
    }
}

TEST_CASE("the arm model fitted on a dry run leaves the carried part's torque as the deviation", "[sim][dynamics][ka]") {
    // Thesis §4.5.1 feeds KA-mDTW the deviation a task's force causes: the signal less that of the
    // same motion without the force. Here the arm's own dynamics come from a dry run of the
    // IRB120-like pick-and-place (no part grasped), and the deviation of a run with the part is
    // compared with the truth the simulator gives: the same run recorded again without the part
    // (same seed, so the same motion and reading noise, which cancels in the difference).
    const ArmTwin d = arm_twin("irb120-like", 61, 62);
    REQUIRE(d.part > 0.0);
    REQUIRE(d.loaded.size() == d.twin.size());
    const Recording empty_deviation = arm_deviation(d.arm, d.twin);
    for (std::size_t j : {1u, 2u}) {  // joints 2 and 3 carry the part's weight
        const auto [truth, error] = part_torque_and_error(d, j);
        INFO("joint " << j + 1 << " (part " << d.part << " kg): the part's torque rms " << truth << " Nm; the model deviation's error rms "
                      << error << " Nm; deviation of the run without the part rms " << rms(empty_deviation.tau[j])
                      << " Nm; the arm fit's residual on the dry run " << dry_residual(d, j) << " Nm");
        CHECK(error < 0.25 * truth);
        // On a run it was not fitted to, the model leaves no more than on its own dry run.
        CHECK(rms(empty_deviation.tau[j]) < 1.2 * dry_residual(d, j));
    }

    // Its JSON form, and what it refuses.
    const ArmDynamics& arm = d.arm;
    const ArmDynamics back = arm_dynamics_from_json(to_json(arm));
    REQUIRE(back.parameters.size() == arm.parameters.size());
    for (std::size_t j = 0; j < arm.parameters.size(); ++j) CHECK(back.parameters[j] == arm.parameters[j]);
    Recording percent = d.loaded;
    percent.info().unit = SignalUnit::Percent;
    CHECK_THROWS_WITH(arm_deviation(arm, percent), Catch::Contains("'percent'") && Catch::Contains("'Nm'"));
    nlohmann::json broken = to_json(arm);
    broken["parameters"][2].erase(0);
    CHECK_THROWS_WITH(arm_dynamics_from_json(broken), Catch::Contains("joint 3 has"));
    const DhModel five(std::vector<DhJoint>(d.robot.kinematics.joints().begin(), d.robot.kinematics.joints().begin() + 5));
    const Recording* runs[] = {&d.twin};
    CHECK_THROWS_WITH(fit_arm_dynamics(five, runs), Catch::Contains("a dry run has 6 joints; the kinematic model has 5"));
}

TEST_CASE("the arm model fitted on the calibration cycles, less their declared part, predicts the arm without the part",
          "[sim][dynamics][arm]") {
    // CalibrationOptions::arm_from_nominal: no dry run. The IRB120-like pick-and-place carries its
    // part in part of the cycle and declares it; the calibration takes the part's torque off with the
    // payload model fitted on the same recordings, fits the arm model, and matches the deviation.
    // The truth: the same run recorded again without the part (same seed: same motion and noise).
    const RobotDescription robot = load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/irb120-like.json");
    const sim::Task task = sim::load_task(std::string(WARPGUARD_TASKS_DIR) + "/irb120-like-pick-and-place.json", 6);
    sim::Task empty_task = task;
    for (auto& step : empty_task.steps) {
        if (step.kind == sim::TaskStep::Kind::Grasp) step.mass = 0.0;
    }
    const Recording reference = record_cell(robot, task, 5, 71, 1.0, 0);
    const Recording calibration = record_cell(robot, task, 12, 72, 1.0, 0);
    const Recording loaded = record_cell(robot, task, 4, 73, 1.0, 0);
    const Recording empty = record_cell(robot, empty_task, 4, 73, 1.0, 0);
    REQUIRE(calibration.declares_payload());

    CalibrationOptions options;
    options.reference_cycles = 3;
    options.dynamics_model = robot.kinematics;
    options.arm_from_nominal = true;
    const NamedRecording nominal{"calibration.csv", &calibration};
    const Profile profile = calibrate({"reference.csv", &reference}, std::span<const NamedRecording>(&nominal, 1), options);
    REQUIRE(profile.arm.has_value());
    REQUIRE(profile.payload.has_value());
    CHECK(profile.calibration.at("arm_model").at("fitted_on").get<std::string>().find("nominal") != std::string::npos);
    CHECK(profile.calibration.at("arm_model").at("payload").get<std::string>().find("less its declared payload") != std::string::npos);

    // The same fit without taking the part off first spreads the part over the links' parameters.
    const Recording* raw_runs[] = {&calibration};
    const ArmDynamics naive = fit_arm_dynamics(robot.kinematics, raw_runs);
    const Recording fitted_empty = arm_deviation(*profile.arm, empty);
    const Recording naive_empty = arm_deviation(naive, empty);
    for (std::size_t j : {1u, 2u}) {  // joints 2 and 3 carry the part's weight
        std::vector<double> part(loaded.size());
        for (std::size_t i = 0; i < loaded.size(); ++i) part[i] = loaded.tau[j][i] - empty.tau[j][i];
        INFO("joint " << j + 1 << ": the part's torque rms " << rms(part) << " Nm; deviation of the run without the part rms "
                      << rms(fitted_empty.tau[j]) << " Nm (fitted less the part), " << rms(naive_empty.tau[j])
                      << " Nm (fitted with the part left in)");
        CHECK(rms(fitted_empty.tau[j]) < 0.25 * rms(part));
        CHECK(rms(fitted_empty.tau[j]) < 0.5 * rms(naive_empty.tau[j]));
    }
    // The unloaded calibration recording itself: what unload_payload took off is the part's torque.
    const Recording unloaded = unload_payload(*profile.payload, loaded);
    for (std::size_t j : {1u, 2u}) {
        std::vector<double> error(loaded.size()), part(loaded.size());
        for (std::size_t i = 0; i < loaded.size(); ++i) {
            part[i] = loaded.tau[j][i] - empty.tau[j][i];
            error[i] = unloaded.tau[j][i] - empty.tau[j][i];
        }
        INFO("joint " << j + 1 << ": unloaded less the run without the part rms " << rms(error) << " Nm, the part's torque rms " << rms(part));
        CHECK(rms(error) < 0.1 * rms(part));
    }

    // Nominal cycles run on; refusals name what is missing.
    Detector detector(profile);
    const RunEvaluation run = evaluate_detector("loaded", loaded, detector);
    for (const StopEvent& e : run.events) {
        UNSCOPED_INFO("stop event at sample " << e.index << ": joint " << e.decision.joint << ", rule " << to_string(e.decision.rule) << ", "
                                              << e.decision.value << " against " << e.decision.threshold << ", reference "
                                              << e.decision.ref_start << "-" << e.decision.ref_end);
    }
    CHECK(run.events.size() <= 1);

    // What the dashboard draws (Detector::judged): the reference as the robot would have sent it.
    // The detector matches the torque less the arm and the part, so its own reference value lies
    // tens of Nm from the measured torque on joints 2 and 3; the measured torque less the judged
    // offset is where the reference puts it, inside the limits in nominal cycles.
    {
        std::vector<double> tau(6), q(6);
        for (std::size_t j : {1u, 2u}) {
            std::vector<double> off_matched, off_judged, band;
            std::size_t inside = 0;
            Detector fresh(profile);
            for (std::size_t i = 0; i < loaded.size(); ++i) {
                const Sample sample = loaded.sample(i, tau, q);
                fresh.update(sample);
                if (fresh.updates() < profile.window) continue;
                const Detector::Judged judged = fresh.judged(j);
                const double matched_reference = fresh.reference(j)[fresh.evaluations()[j].shared.partner];
                off_matched.push_back(std::abs(sample.tau[j] - matched_reference));
                off_judged.push_back(std::abs(judged.offset));
                band.push_back(std::min(judged.high, -judged.low));
                inside += judged.low <= judged.offset && judged.offset <= judged.high;
            }
            const auto median = [](std::vector<double> v) {
                std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
                return v[v.size() / 2];
            };
            const double share = static_cast<double>(inside) / static_cast<double>(band.size());
            INFO("joint " << j + 1 << ": median |measured - matched reference| " << median(off_matched) << " Nm, median |judged offset| "
                          << median(off_judged) << " Nm, median narrower side of the limits " << median(band) << " Nm, inside the limits " << share);
            CHECK(median(off_matched) > 5.0 * median(band));
            CHECK(median(off_judged) < 0.5 * median(band));
            CHECK(share > 0.95);  // measured 1.000 on both (the symmetric band drawn before 2026-11-27: 0.989 and 0.997)
        }
    }
    // KA-mDTW, calibrated the same way, keeps the part: the arm model fitted on the same recordings
    // (less the part) takes the arm off, the part's torque stays, and its matched signal while the
    // robot carries is the part's torque over the lever lengths (thesis 4.5.1).
    {
        CalibrationOptions ka = options;
        ka.method = MatchingMethod::KaMdtw;
        ka.dynamics_model.reset();
        ka.kinematics = KinematicsSettings{robot.kinematics, ForceDirection::make(ForceDirection::Frame::Base, Eigen::Vector3d(0, 0, -1)),
                                           kDefaultMinLever, {}};
        REQUIRE(arm_from_nominal_applies(ka, reference));
        const Profile kap = calibrate({"reference.csv", &reference}, std::span<const NamedRecording>(&nominal, 1), ka);
        REQUIRE(kap.arm.has_value());
        REQUIRE(kap.payload.has_value());  // only for a part of another mass than the reference's
        CHECK(kap.payload->beyond_reference_part);
        CHECK(kap.calibration.at("payload_model").get<std::string>().find("not taken off: KA-mDTW") == 0);
        CHECK(describe_matched_signal(kap).find("less the declared payload") == std::string::npos);
        Detector kd(kap);
        std::vector<double> tau(6), q(6), levers(6);
        for (std::size_t j : {1u, 2u}) REQUIRE(kap.kinematics->scales(j));
        std::vector<double> error[2], part[2];
        for (std::size_t i = 0; i < loaded.size(); ++i) {
            const Sample sample = loaded.sample(i, tau, q);
            kd.update(sample);
            if (kd.updates() < kap.window || !(loaded.payload[i] > 0)) continue;
            equivalent_lever_lengths(robot.kinematics, sample.q, kap.kinematics->force, levers);
            for (std::size_t k = 0; k < 2; ++k) {
                const std::size_t j = k + 1;
                const double expected = (loaded.tau[j][i] - empty.tau[j][i]) / std::max(levers[j], kap.kinematics->min_lever);
                part[k].push_back(expected);
                error[k].push_back(kd.window(j).back() - expected);
            }
        }
        for (std::size_t k = 0; k < 2; ++k) {
            INFO("joint " << k + 2 << ", " << part[k].size() << " carrying samples: the part's torque over the lever rms " << rms(part[k])
                          << " N, matched less that rms " << rms(error[k]) << " N");
            REQUIRE(part[k].size() > 100);
            CHECK(rms(error[k]) < 0.25 * rms(part[k]));
        }
        // mDTW keeps it only when asked, and then models only a part of another mass.
        CalibrationOptions keep = options;
        keep.keep_payload = true;
        const Profile kept = calibrate({"reference.csv", &reference}, std::span<const NamedRecording>(&nominal, 1), keep);
        CHECK(kept.arm.has_value());
        REQUIRE(kept.payload.has_value());
        CHECK(kept.payload->beyond_reference_part);
        CHECK(kept.calibration.at("payload_model").get<std::string>().find("not taken off (--keep-payload)") == 0);
    }

    CalibrationOptions no_model = options;
    no_model.dynamics_model.reset();
    CHECK_THROWS_WITH(calibrate({"reference.csv", &reference}, std::span<const NamedRecording>(&nominal, 1), no_model),
                      Catch::Contains("kinematic model"));
    Recording undeclared = loaded;
    undeclared.payload.clear();
    CHECK_THROWS_WITH(unload_payload(*profile.payload, undeclared), Catch::Contains("declares no payload"));
    // A robot that does not send its payload: the part is unknown to an arm model, and calibration
    // matches the signal as recorded, saying why.
    Recording undeclared_reference = reference, undeclared_calibration = calibration;
    undeclared_reference.payload.clear();
    undeclared_calibration.payload.clear();
    const NamedRecording undeclared_nominal{"calibration.csv", &undeclared_calibration};
    const Profile plain = calibrate({"reference.csv", &undeclared_reference}, std::span<const NamedRecording>(&undeclared_nominal, 1), options);
    CHECK_FALSE(plain.arm.has_value());
    CHECK(plain.calibration.at("arm_model").at("not_fitted").get<std::string>().find("do not declare the payload") != std::string::npos);
}
