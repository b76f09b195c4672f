#include "robot_cell.hpp"

#include <algorithm>
#include <limits>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "warpguard/json_file.hpp"

#include "minimum_jerk.hpp"

namespace warpguard::sim {

namespace {


// A segment of the planned motion: a move (from -> to over `duration`) or a hold.
struct Segment {
    double start = 0.0;
    double duration = 0.0;
    std::vector<double> from, to;
    bool grasp = false, release = false;  // at the segment's start
    double mass = 0.0;
    const TaskStep* press = nullptr;       // an intended contact during this (holding) segment
};

// Intended contact profile at normalised time s in [0, 1], as a fraction of the step's magnitude.
double press_profile(TaskStep::Press kind, double s) {
    if (s < 0 || s > 1) return 0.0;
    if (kind == TaskStep::Press::Screw) return s < 0.9 ? s / 0.9 : 0.0;  // tighten, then let go
    // Snap-fit: first peak (the latch deflects), a dip, the higher second peak, the click, release.
    if (s < 0.3) return 0.6 * s / 0.3;
    if (s < 0.45) return 0.6 - 0.4 * (s - 0.3) / 0.15;
    if (s < 0.75) return 0.2 + 0.8 * (s - 0.45) / 0.3;
    if (s < 0.8) return 1.0 - 0.9 * (s - 0.75) / 0.05;
    return 0.1 * (1.0 - s) / 0.2;
}

struct Plan {
    std::vector<Segment> segments;
    std::vector<double> cycle_starts;
    double end = 0.0;
};

std::vector<double> numbers(const nlohmann::json& v, std::size_t joints, const std::string& where) {
    if (!v.is_array() || v.size() != joints) {
        throw std::invalid_argument(fmt::format("{} must be an array of {} numbers, got {}", where, joints, v.dump().substr(0, 80)));
    }
    std::vector<double> out;
    for (const auto& x : v) {
        if (!x.is_number()) throw std::invalid_argument(fmt::format("{} holds {}, expected a number", where, x.dump()));
        out.push_back(x.get<double>());
    }
    return out;
}

Plan plan(const Task& task, const RobotDescription& robot, std::size_t cycles, double override_factor) {
    Plan p;
    const std::size_t n = robot.dof();
    double t = 0.0;
    for (std::size_t c = 0; c < cycles; ++c) {
        p.cycle_starts.push_back(t);
        std::vector<double> at = task.home;
        for (const auto& step : task.steps) {
            Segment s;
            s.start = t;
            s.from = at;
            switch (step.kind) {
                case TaskStep::Kind::Move: {
                    s.to = step.targets[c % step.targets.size()];
                    // Minimum jerk: peak velocity 1.875 dq / T, peak acceleration 5.7735 dq / T^2.
                    double duration = 0.05;
                    for (std::size_t i = 0; i < n; ++i) {
                        const double dq = std::abs(s.to[i] - s.from[i]);
                        const double v = task.max_velocity[i] * step.speed * override_factor;
                        const double a = task.max_acceleration[i] * step.speed * override_factor * override_factor;
                        duration = std::max({duration, 1.875 * dq / v, std::sqrt(5.7735 * dq / a)});
                    }
                    s.duration = duration;
                    at = s.to;
                    break;
                }
                case TaskStep::Kind::Wait:
                    s.to = at;
                    s.duration = step.seconds;
                    break;
                case TaskStep::Kind::Press:
                    s.to = at;
                    s.duration = step.seconds;
                    s.press = &step;
                    break;
                case TaskStep::Kind::Grasp:
                case TaskStep::Kind::Release:
                    s.to = at;
                    s.grasp = step.kind == TaskStep::Kind::Grasp;
                    s.release = step.kind == TaskStep::Kind::Release;
                    s.mass = step.mass;
                    break;
            }
            t += s.duration;
            p.segments.push_back(std::move(s));
        }
        // Back home to close the cycle.
        Segment back;
        back.start = t;
        back.from = at;
        back.to = task.home;
        double duration = 0.05;
        for (std::size_t i = 0; i < n; ++i) {
            const double dq = std::abs(back.to[i] - back.from[i]);
            duration = std::max({duration, 1.875 * dq / (task.max_velocity[i] * override_factor),
                                 std::sqrt(5.7735 * dq / (task.max_acceleration[i] * override_factor * override_factor))});
        }
        back.duration = duration;
        t += duration;
        p.segments.push_back(std::move(back));
    }
    p.end = t;
    return p;
}

}  // namespace

Task task_from_json(const nlohmann::json& j, std::size_t joints) {
    if (!j.is_object()) throw std::invalid_argument("a task must be a JSON object");
    Task task;
    task.name = j.value("name", "task");
    task.home = numbers(j.value("home", nlohmann::json()), joints, task.name + ".home");
    task.max_velocity = numbers(j.value("max_velocity", nlohmann::json()), joints, task.name + ".max_velocity");
    task.max_acceleration = numbers(j.value("max_acceleration", nlohmann::json()), joints, task.name + ".max_acceleration");
    for (std::size_t i = 0; i < joints; ++i) {
        if (!(task.max_velocity[i] > 0) || !(task.max_acceleration[i] > 0)) {
            throw std::invalid_argument(fmt::format("{}: joint {} needs positive velocity and acceleration limits", task.name, i + 1));
        }
    }
    if (!j.contains("steps") || !j.at("steps").is_array() || j.at("steps").empty()) {
        throw std::invalid_argument(fmt::format("{}: 'steps' must be a non-empty array", task.name));
    }
    for (std::size_t k = 0; k < j.at("steps").size(); ++k) {
        const auto& s = j.at("steps")[k];
        const std::string where = fmt::format("{}.steps[{}]", task.name, k);
        TaskStep step;
        if (s.contains("move")) {
            step.kind = TaskStep::Kind::Move;
            step.targets.push_back(numbers(s.at("move"), joints, where + ".move"));
        } else if (s.contains("move_variants")) {
            step.kind = TaskStep::Kind::Move;
            for (std::size_t v = 0; v < s.at("move_variants").size(); ++v) {
                step.targets.push_back(numbers(s.at("move_variants")[v], joints, fmt::format("{}.move_variants[{}]", where, v)));
            }
            if (step.targets.empty()) throw std::invalid_argument(fmt::format("{}.move_variants is empty", where));
        } else if (s.contains("wait")) {
            step.kind = TaskStep::Kind::Wait;
            step.seconds = s.at("wait").get<double>();
            if (!(step.seconds >= 0)) throw std::invalid_argument(fmt::format("{}.wait must be >= 0 s, got {}", where, step.seconds));
        } else if (s.contains("grasp")) {
            step.kind = TaskStep::Kind::Grasp;
            step.mass = s.at("grasp").get<double>();
            if (!(step.mass >= 0)) throw std::invalid_argument(fmt::format("{}.grasp must be a mass >= 0 kg, got {}", where, step.mass));
        } else if (s.contains("release")) {
            step.kind = TaskStep::Kind::Release;
        } else if (s.contains("press")) {
            const auto& pr = s.at("press");
            step.kind = TaskStep::Kind::Press;
            const std::string profile = pr.value("profile", "");
            if (profile == "snap-fit") {
                step.press = TaskStep::Press::SnapFit;
            } else if (profile == "screw") {
                step.press = TaskStep::Press::Screw;
            } else {
                throw std::invalid_argument(fmt::format("{}.press.profile '{}' is not known; expected snap-fit or screw", where, profile));
            }
            step.magnitude = pr.value("magnitude", 0.0);
            step.seconds = pr.value("duration", 0.0);
            if (!(step.magnitude > 0) || !(step.seconds > 0)) {
                throw std::invalid_argument(fmt::format("{}.press needs magnitude > 0 and duration > 0 s", where));
            }
            if (pr.contains("axis")) {
                const auto ax = numbers(pr.at("axis"), 3, where + ".press.axis");
                step.axis = Eigen::Vector3d(ax[0], ax[1], ax[2]);
                if (step.axis.norm() < 1e-9) throw std::invalid_argument(fmt::format("{}.press.axis has no length", where));
                step.axis.normalize();
            }
        } else {
            throw std::invalid_argument(fmt::format("{}: expected one of move, move_variants, wait, grasp, release, press; got {}", where,
                                                    s.dump().substr(0, 80)));
        }
        step.speed = s.value("speed", 1.0);
        if (!(step.speed > 0 && step.speed <= 1)) {
            throw std::invalid_argument(fmt::format("{}.speed must be in (0, 1], got {}", where, step.speed));
        }
        task.steps.push_back(std::move(step));
    }
    return task;
}

Task load_task(const std::string& path, std::size_t joints) {
    return load_json_file(path, "task", [joints](const nlohmann::json& j) { return task_from_json(j, joints); });
}

RobotCell::RobotCell(RobotDescription robot, Task task, CellOptions options)
    : robot_(std::move(robot)), task_(std::move(task)), options_(std::move(options)) {
    if (task_.home.size() != robot_.dof()) {
        throw std::invalid_argument(fmt::format("task '{}' is for {} joints; robot '{}' has {}", task_.name, task_.home.size(),
                                                robot_.name, robot_.dof()));
    }
    if (!(options_.speed_override > 0 && options_.speed_override <= 1.5)) {
        throw std::invalid_argument(fmt::format("speed override {} is outside (0, 1.5]", options_.speed_override));
    }
    double previous = -std::numeric_limits<double>::infinity();
    for (const OverrideChange& c : options_.override_changes) {
        if (!(c.value > 0 && c.value <= 1.5)) {
            throw std::invalid_argument(fmt::format("speed override change at {} s to {} is outside (0, 1.5]", c.at, c.value));
        }
        if (!(c.at >= previous)) {
            throw std::invalid_argument(fmt::format("speed override change at {} s comes before the one at {} s: expected them in time order",
                                                    c.at, previous));
        }
        previous = c.at;
    }
    if (!(options_.override_ramp >= options_.brake_time)) {
        throw std::invalid_argument(fmt::format("speed override ramp {} s is shorter than the brake's {} s: expected at least that",
                                                options_.override_ramp, options_.brake_time));
    }
    if (options_.report_override) {
        // What the controller reports is its slider, which ends at 100 %.
        double highest = options_.speed_override;
        for (const OverrideChange& c : options_.override_changes) highest = std::max(highest, options_.speed_override * c.value);
        if (highest > 1.0) {
            throw std::invalid_argument(fmt::format("a reported speed override cannot exceed 1 (a slider ends at 100 %), but "
                                                    "the run reaches {}: lower --override or the --override-change values",
                                                    highest));
        }
    }

}

std::vector<double> RobotCell::schedule(std::size_t cycles) const {
    return plan(task_, robot_, cycles, options_.speed_override).cycle_starts;
}

Recording RobotCell::record(std::size_t cycles) {
    const std::size_t n = robot_.dof();
    const Plan p = plan(task_, robot_, cycles, options_.speed_override);
    cycle_starts_ = p.cycle_starts;
    peak_force_ = 0.0;
    stop_time_.reset();

    ModelOptions model_options;
    model_options.obstacle = options_.obstacle.has_value();
    MujocoRobot sim(robot_, model_options);
    mjModel* m = sim.mutable_model();
    const double dt = m->opt.timestep;
    std::vector<double> damping(n), friction(n);
    for (std::size_t i = 0; i < n; ++i) {
        damping[i] = m->dof_damping[i];
        friction[i] = m->dof_frictionloss[i];
        sim.data()->qpos[i] = task_.home[i];
    }
    mj_forward(m, sim.data());
    ServoController servo(sim, task_.home);

    std::mt19937_64 rng(options_.seed);
    std::normal_distribution<double> gauss(0.0, 1.0);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    std::vector<double> cycle_rate(cycles + 2);
    for (auto& r : cycle_rate) r = 1.0 + options_.sampling.cycle_jitter * unit(rng);

    RecordingInfo info;
    info.robot = robot_.name;
    info.signal = robot_.signal;
    info.unit = robot_.unit;
    info.source = fmt::format("warpguard-sim robot={} task={} cycles={} seed={} override={} drift={} contacts={}", robot_.name,
                              task_.name, cycles, options_.seed, options_.speed_override, options_.friction_drift,
                              options_.contacts.size());
    for (const OverrideChange& c : options_.override_changes) info.source += fmt::format(" override-change={}:{}", c.at, c.value);
    Recording rec(n, info);
    rec.ground_truth = GroundTruth{};

    // Desired joint motion and its derivatives with respect to task time at task time tau.
    std::size_t segment = 0;
    std::size_t events = 0;  // segments whose grasp/release has been carried out
    double declared_payload = 0.0;  // what the task program has declared (set_payload / GripLoad)
    std::vector<double> q(n), dq(n), ddq(n);
    auto desired = [&](double tau) {
        std::fill(dq.begin(), dq.end(), 0.0);
        std::fill(ddq.begin(), ddq.end(), 0.0);
        if (tau < 0 || tau >= p.end) {
            q = task_.home;
            return;
        }
        while (segment + 1 < p.segments.size() && tau >= p.segments[segment + 1].start) ++segment;
        for (; events <= segment; ++events) {
            if (p.segments[events].grasp) sim.set_payload(declared_payload = p.segments[events].mass);
            if (p.segments[events].release) sim.set_payload(declared_payload = 0.0);
        }
        const Segment& s = p.segments[segment];
        if (s.duration > 0 && s.from != s.to) {
            double f, fd, fdd;
            samples::minimum_jerk((tau - s.start) / s.duration, f, fd, fdd);
            for (std::size_t i = 0; i < n; ++i) {
                const double span = s.to[i] - s.from[i];
                q[i] = s.from[i] + span * f;
                dq[i] = span * fd / s.duration;
                ddq[i] = span * fdd / (s.duration * s.duration);
            }
        } else {
            q = s.to;
        }
    };

    // The obstacle's target: where the tool will be at the given task time.
    Eigen::Vector3d obstacle_target = Eigen::Vector3d::Zero();
    if (options_.obstacle) {
        std::size_t saved_segment = segment, saved_events = events;
        desired(options_.obstacle->task_time);
        obstacle_target = robot_.kinematics.tool_pose(q).translation() + options_.obstacle->offset;
        segment = saved_segment;
        events = saved_events;
        sim.set_payload(declared_payload = 0.0);
    }

    const double pre = 0.2, post = 0.2;
    const double give_up = 3.0 * (pre + p.end + post) + 10.0;  // a stop that is never released ends here
    std::vector<double> qd(n), qdd(n), tau_cmd(n), measured(n), angles(n);
    std::size_t cycle = 0;
    double next_sample = -pre;
    std::int64_t seq = 0;
    double task_time = -pre, rate = 1.0;
    bool stopped = false;
    double knob = 1.0;           // the operator's speed override of the moment (override_changes)
    std::size_t next_change = 0;
    bool braking = false;        // the rate follows a stop or a resume (brake_time), not the knob
    double knob_from = 1.0, knob_began = 0.0, knob_length = 0.0;  // the knob's ramp: from rate, when, how long
    double t = -pre;
    constexpr double kNever = std::numeric_limits<double>::infinity();
    contact_onset_.assign(options_.contacts.size(), kNever);
    double obstacle_begun = kNever;  // sim time its descent began (disturb_in_task_time)
    double obstacle_arrive = 0.0;    // how far it has come down, 0 (parked above) to 1 (in place)
    double obstacle_touched = -kNever;  // sim time it last touched the robot
    // The ground truth's contact age: a contact begins at a simulation step, mostly between two
    // samples; the first sample that carries it records how long it has lasted.
    double touched_since_sample = kNever;  // sim time of the first step with contact since the last sample
    double contact_began = kNever;         // sim time the contact the last sample carried began
    bool sampled_touching = false;         // whether the last sample carried a contact
    for (; task_time < p.end + post && t < -pre + give_up; t += dt) {
        // Which contacts have begun: by the simulation clock exactly at their time; by the task's,
        // at the step in which the task reaches it.
        const double clock = options_.disturb_in_task_time ? task_time : t;
        for (std::size_t k = 0; k < options_.contacts.size(); ++k) {
            if (contact_onset_[k] == kNever && clock >= options_.contacts[k].start) {
                contact_onset_[k] = options_.disturb_in_task_time ? t : options_.contacts[k].start;
            }
        }
        // Stop latch: the task time slows to standstill along the path within brake_time.
        if (options_.stop_at && !stopped && !stop_time_ && t >= *options_.stop_at) {
            stopped = true;
            stop_time_ = t;
        }
        while (next_change < options_.override_changes.size() && t >= options_.override_changes[next_change].at) {
            knob = options_.override_changes[next_change++].value;
            // The controller follows a turn of the knob from where the speed is now, smoothly
            // (a minimum-jerk ramp: its acceleration never jumps, as a controller limits jerk).
            knob_from = rate, knob_began = t, knob_length = std::abs(knob - rate) * options_.override_ramp;
        }
        const double target_rate = stopped ? 0.0 : knob;
        if (stopped) braking = true;
        double rate_dot = 0.0;  // d(rate)/dt
        if (braking) {
            // To stop and to resume, a linear ramp of the task time's speed at the brake's slope.
            const double slope = 1.0 / options_.brake_time;
            if (rate > target_rate) {
                rate_dot = -slope;
                rate = std::max(target_rate, rate - dt * slope);
            } else if (rate < target_rate) {
                rate_dot = slope;
                rate = std::min(target_rate, rate + dt * slope);
            }
            if (rate == target_rate && !stopped) braking = false;
        } else if (rate != knob) {
            const double u = knob_length > 0 ? std::clamp((t - knob_began) / knob_length, 0.0, 1.0) : 1.0;
            double f, fd, fdd;
            samples::minimum_jerk(u, f, fd, fdd);
            rate = u >= 1.0 ? knob : knob_from + (knob - knob_from) * f;
            rate_dot = u >= 1.0 ? 0.0 : (knob - knob_from) * fd / knob_length;
        }

        while (cycle < cycles && task_time >= (cycle + 1 < cycles ? p.cycle_starts[cycle + 1] : p.end)) ++cycle;
        const std::int64_t counter = task_time < 0 ? 0 : static_cast<std::int64_t>(cycle) + 1;  // cycles are numbered from 1
        desired(task_time);
        for (std::size_t i = 0; i < n; ++i) {
            qd[i] = dq[i] * rate;
            qdd[i] = ddq[i] * rate * rate + dq[i] * rate_dot;
        }
        // Friction drifts slowly over the run (warm-up over a shift).
        if (options_.friction_drift != 0.0 && cycles > 1) {
            const double f = 1.0 + options_.friction_drift * static_cast<double>(std::min(cycle, cycles - 1)) /
                                       static_cast<double>(cycles - 1);
            for (std::size_t i = 0; i < n; ++i) {
                m->dof_damping[i] = damping[i] * f;
                m->dof_frictionloss[i] = friction[i] * f;
            }
        }
        // Contact with the obstacle, as MuJoCo's contact model computed it in the last step.
        int obstacle_link = 0;
        const double obstacle_force = sim.has_obstacle() ? sim.obstacle_force(obstacle_link) : 0.0;
        // The obstacle comes down into the path.
        if (options_.obstacle) {
            // It arrives over `approach` seconds up to its start, then stays for `hold` seconds, on
            // the simulation clock: a box driven by the task's clock would hover over a held robot
            // and come down onto it after the resume (measured: 24 kN in the live demo). With
            // disturb_in_task_time its descent begins when the task reaches start - approach, so
            // that it meets the cycle it was planned for however long earlier stops held the
            // robot, and runs on the simulation clock from then on.
            const Obstacle& o = *options_.obstacle;
            double start = o.start;
            if (options_.disturb_in_task_time) {
                if (obstacle_begun == kNever && task_time >= o.start - o.approach) obstacle_begun = t;
                start = obstacle_begun + o.approach;  // kNever until then
            }
            const double lead = start - t;  // > 0 before the start
            double arrive = std::clamp(1.0 - lead / o.approach, 0.0, 1.0);
            const double since = t - start;  // after the start
            if (o.hold >= 0 && since > o.hold) arrive = std::clamp(1.0 - (since - o.hold) / o.approach, 0.0, 1.0);
            // Lowered, not driven: while it touches the robot it comes down no further, and it is
            // lowered again only after 0.2 s free of it, as whoever lowers a box stops at a touch
            // and goes on once the arm has moved away. (A kinematic box driven on pressed a held
            // robot with 860-1,230 N in the live demo; lowered again whenever the contact flickered
            // open, it crept down onto it to 709 N.)
            constexpr double kLowerAgainAfter = 0.2;  // s free of the robot
            if (obstacle_force > 0.0) obstacle_touched = t;
            const bool lower = t - obstacle_touched >= kLowerAgainAfter;
            obstacle_arrive = std::min(arrive, lower ? obstacle_arrive + dt / o.approach : obstacle_arrive);
            const Eigen::Vector3d parked = obstacle_target + Eigen::Vector3d(0, 0, 0.5);
            sim.place_obstacle(lead > o.approach ? Eigen::Vector3d(0, 0, -10) : parked + obstacle_arrive * (obstacle_target - parked));
        }
        // Scripted external contact forces.
        std::size_t contact_link = 0;
        const Contact* contact = nullptr;
        double force = contact_force(t, contact_link, &contact);
        for (int b = 0; b < m->nbody; ++b) {
            for (int c = 0; c < 6; ++c) sim.data()->xfrc_applied[6 * b + c] = 0.0;
        }
        if (contact) {
            const int body = sim.link_body(static_cast<int>(contact->link) - 1);
            const mjtNum* origin = sim.data()->xpos + 3 * body;
            const mjtNum* rot = sim.data()->xmat + 9 * body;
            Eigen::Matrix3d r;
            r << rot[0], rot[1], rot[2], rot[3], rot[4], rot[5], rot[6], rot[7], rot[8];
            const Eigen::Vector3d reach = contact_reach(robot_.kinematics, contact->link);
            const Eigen::Vector3d point = Eigen::Vector3d(origin[0], origin[1], origin[2]) + r * (contact->along * reach);
            const Eigen::Vector3d f = force * contact->direction.normalized();
            const mjtNum* com = sim.data()->xipos + 3 * body;
            const Eigen::Vector3d moment = (point - Eigen::Vector3d(com[0], com[1], com[2])).cross(f);
            for (int c = 0; c < 3; ++c) {
                sim.data()->xfrc_applied[6 * body + c] = f[c];
                sim.data()->xfrc_applied[6 * body + 3 + c] = moment[c];
            }
        }
        // The task's intended contact (snap-fit, screwing) at the tool, in the tool frame.
        if (task_time >= 0 && task_time < p.end && p.segments[segment].press) {
            const Segment& seg = p.segments[segment];
            const TaskStep& press = *seg.press;
            const double level = press.magnitude * press_profile(press.press, (task_time - seg.start) / seg.duration);
            const mjtNum* rot = sim.data()->site_xmat + 9 * sim.tool_site();
            Eigen::Matrix3d r;
            r << rot[0], rot[1], rot[2], rot[3], rot[4], rot[5], rot[6], rot[7], rot[8];
            const Eigen::Vector3d axis = r * press.axis;
            const int body = sim.tool_body();
            const mjtNum* tp = sim.data()->site_xpos + 3 * sim.tool_site();
            const mjtNum* com = sim.data()->xipos + 3 * body;
            const Eigen::Vector3d arm(tp[0] - com[0], tp[1] - com[1], tp[2] - com[2]);
            // The work piece pushes back on the tool: a reaction along -axis, or a reaction torque.
            const Eigen::Vector3d f = press.press == TaskStep::Press::SnapFit ? Eigen::Vector3d(-level * axis) : Eigen::Vector3d::Zero();
            const Eigen::Vector3d moment = press.press == TaskStep::Press::Screw ? Eigen::Vector3d(-level * axis) : arm.cross(f);
            for (int c = 0; c < 3; ++c) {
                sim.data()->xfrc_applied[6 * body + c] += f[c];
                sim.data()->xfrc_applied[6 * body + 3 + c] += moment[c];
            }
        }
        if (obstacle_force > force) {
            force = obstacle_force;
            contact_link = static_cast<std::size_t>(obstacle_link);
        }
        peak_force_ = std::max(peak_force_, force);
        // A scripted force acts from this step on; the obstacle's contact formed in the last step.
        if (force > 0.0 && touched_since_sample == kNever) touched_since_sample = force == obstacle_force ? t - dt : t;

        servo.command(sim, q.data(), qd.data(), qdd.data(), tau_cmd.data());

        // The background task: one sample per period, with jitter.
        if (t >= next_sample) {
            for (std::size_t i = 0; i < n; ++i) {
                const double rated = robot_.links[i].rated_torque;
                double value = tau_cmd[i] + options_.signal.noise * rated * gauss(rng);
                const double quantum = options_.signal.quantum * rated;
                if (quantum > 0) value = std::round(value / quantum) * quantum;
                measured[i] = reported(i, value);
                angles[i] = sim.data()->qpos[i];
            }
            const double robot_clock = std::round((t + pre) * 1e6) / 1e6;
            Sample sample{robot_clock, seq++, counter, 0u, measured, angles};
            sample.payload = declared_payload;
            if (options_.report_override) sample.speed_override = options_.speed_override * knob;
            rec.append(sample);
            const bool touching = force > 0.0;
            rec.ground_truth->contact.push_back(touching ? 1 : 0);
            rec.ground_truth->contact_force.push_back(force);
            rec.ground_truth->contact_link.push_back(static_cast<std::int32_t>(contact_link));
            if (touching && !sampled_touching) contact_began = touched_since_sample;
            rec.ground_truth->contact_age.push_back(touching ? t - contact_began : 0.0);
            sampled_touching = touching;
            touched_since_sample = kNever;
            if (options_.on_sample) {
                const Reply reply = options_.on_sample(sample);
                if (reply == Reply::Stop && !stopped) {
                    stopped = true;
                    if (!stop_time_) stop_time_ = t;
                } else if (reply == Reply::Resume) {
                    stopped = false;
                }
            }
            const std::size_t rate_index = task_time < 0 ? 0 : std::min(cycle + 1, cycle_rate.size() - 1);
            next_sample += options_.sampling.period * cycle_rate[rate_index] * (1.0 + options_.sampling.jitter * unit(rng));
        }
        mj_step(m, sim.data());
        task_time += rate * dt;
    }
    simulated_ = t + pre;
    return rec;
}

Eigen::Vector3d contact_reach(const DhModel& kinematics, std::size_t link) {
    const std::size_t joints = kinematics.joints().size();
    if (link < 1 || link > joints) {
        throw std::invalid_argument(fmt::format("contact link {} out of range: expected 1..{}", link, joints));
    }
    constexpr double kNoLength = 1e-6;  // m, as the model's capsules (mujoco_model.cpp)
    // From this link's body frame (the frame before it, turned by its joint) to frame j, at zero angles
    // beyond this link: the frames the link's housing would carry.
    Eigen::Isometry3d to = kinematics.link_transform(link - 1, 0.0);
    for (std::size_t j = link; to.translation().norm() <= kNoLength && j < joints; ++j) to = to * kinematics.link_transform(j, 0.0);
    if (to.translation().norm() <= kNoLength) to = to * kinematics.tool();
    return to.translation();
}

double RobotCell::reported(std::size_t joint, double torque) const {
    const LinkDynamics& l = robot_.links[joint];
    if (robot_.signal == SignalKind::Current) {
        // Motor current follows the torque's magnitude; like Denso's, the value is unsigned.
        const double fraction = std::abs(torque) / l.rated_torque;
        return robot_.unit == SignalUnit::A ? fraction * l.rated_current : 100.0 * fraction;
    }
    return robot_.unit == SignalUnit::Percent ? 100.0 * torque / l.rated_torque : torque;
}

double RobotCell::contact_force(double t, std::size_t& link, const Contact** active) const {
    double best = 0.0;
    for (std::size_t k = 0; k < options_.contacts.size(); ++k) {
        const Contact& c = options_.contacts[k];
        const double dt = t - contact_onset_[k];  // -inf until it has begun
        double f = 0.0;
        switch (c.profile) {
            case Contact::Profile::Impact:
                if (dt >= 0 && dt <= c.duration) f = c.peak * std::sin(M_PI * dt / c.duration);
                break;
            case Contact::Profile::Push:
            case Contact::Profile::Clamp: {
                const double release = c.profile == Contact::Profile::Push ? 0.1 : 0.02;
                if (dt >= 0 && dt < c.duration) {
                    f = c.peak * dt / c.duration;
                } else if (dt >= c.duration && dt < c.duration + c.hold) {
                    f = c.peak;
                } else if (dt >= c.duration + c.hold && dt < c.duration + c.hold + release) {
                    f = c.peak * (1.0 - (dt - c.duration - c.hold) / release);
                }
                break;
            }
        }
        if (f > best) {
            best = f;
            link = c.link;
            *active = &c;
        }
    }
    return best;
}

std::vector<Contact> random_contacts(std::size_t count, const std::vector<double>& cycle_starts, double cycle_length,
                                     std::size_t links, double min_force, double max_force, std::uint64_t seed) {
    if (cycle_starts.size() < 2 || count > cycle_starts.size() - 1) {
        throw std::invalid_argument(fmt::format("{} contacts do not fit in {} cycles (one per cycle, not in the first)", count,
                                                cycle_starts.size()));
    }
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<std::size_t> pool(cycle_starts.size() - 1);
    for (std::size_t k = 0; k < pool.size(); ++k) pool[k] = k + 1;
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<Contact> out;
    for (std::size_t k = 0; k < count; ++k) {
        Contact c;
        c.start = cycle_starts[pool[k]] + (0.05 + 0.8 * u(rng)) * cycle_length;
        c.link = 2 + static_cast<std::size_t>(u(rng) * static_cast<double>(links - 1)) % (links - 1);  // links 2..N
        const double pick = u(rng);
        c.profile = pick < 0.5 ? Contact::Profile::Impact : Contact::Profile::Push;
        c.peak = min_force * std::pow(max_force / min_force, u(rng));  // log-uniform
        c.duration = c.profile == Contact::Profile::Impact ? 0.01 + 0.04 * u(rng) : 0.2 + 0.8 * u(rng);
        c.hold = 0.2;
        c.along = 0.3 + 0.6 * u(rng);
        const double az = 2 * M_PI * u(rng), el = std::asin(2 * u(rng) - 1);
        c.direction = Eigen::Vector3d(std::cos(el) * std::cos(az), std::cos(el) * std::sin(az), std::sin(el));
        out.push_back(c);
    }
    std::sort(out.begin(), out.end(), [](const Contact& a, const Contact& b) { return a.start < b.start; });
    return out;
}

}  // namespace warpguard::sim
