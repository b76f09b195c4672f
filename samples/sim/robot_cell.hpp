// The simulated robot cell: a MuJoCo robot under its servo controller runs a task program cycle
// after cycle, while a background task samples what a closed controller would report (commanded
// joint torque as current-based estimate, with noise and quantisation, and joint angles) at an
// irregular period, with the cycle counter the main program increments at every cycle start.
// External contact forces with ground truth can be put on any link.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "mujoco_model.hpp"
#include "servo_controller.hpp"
#include "warpguard/recording.hpp"
#include "warpguard/robot_description.hpp"

namespace warpguard::sim {

// One step of a task program.
struct TaskStep {
    enum class Kind { Move, Wait, Grasp, Release, Press };
    // Press: an intended contact while the robot holds still (thesis §3.3): a force along `axis`
    // of the tool frame (snap-fit: two peaks, the second ending in the click) or a torque about it
    // (screwing: a ramp to the tightening torque). It is part of the task, not a collision.
    enum class Press { SnapFit, Screw };
    Press press = Press::SnapFit;
    double magnitude = 0.0;  // N (snap-fit) or Nm (screwing)
    Eigen::Vector3d axis = Eigen::Vector3d::UnitZ();
    Kind kind = Kind::Move;
    std::vector<std::vector<double>> targets;  // Move: one target, or variants used cycle after cycle
    double speed = 1.0;      // Move: fraction of the joint velocity and acceleration limits
    double seconds = 0.0;    // Wait
    double mass = 0.0;       // Grasp: payload in kg at the tool point
};

struct Task {
    std::string name;
    std::vector<double> home;  // every cycle starts and ends here
    std::vector<TaskStep> steps;
    std::vector<double> max_velocity;      // rad/s per joint
    std::vector<double> max_acceleration;  // rad/s^2 per joint
};

// Reads a task file; throws std::invalid_argument naming the offending step and value.
Task task_from_json(const nlohmann::json& j, std::size_t joints);
Task load_task(const std::string& path, std::size_t joints);

struct Contact {
    double start = 0.0;       // s of simulated time (of task time with CellOptions::disturb_in_task_time)
    std::size_t link = 1;     // 1-based
    double along = 0.7;       // fraction of the way along the link (contact_reach)
    Eigen::Vector3d direction = Eigen::Vector3d::UnitX();  // in the world frame, normalised on use
    enum class Profile { Impact, Push, Clamp } profile = Profile::Impact;
    double peak = 100.0;      // N
    double duration = 0.02;   // s: impact length; push/clamp ramp time
    double hold = 0.3;        // s at the peak (push, clamp)
};

struct SignalOptions {
    double noise = 0.005;        // standard deviation, as a fraction of each joint's rated torque
    double quantum = 0.001;      // quantisation step, as a fraction of each joint's rated torque
};

struct SamplingOptions {
    double period = 0.004;       // s, nominal background-task period
    double jitter = 0.3;         // +- fraction of the period, per sample
    double cycle_jitter = 0.04;  // +- fraction, a per-cycle slow-down of the background task (load)
};

// A physical obstacle (a box) that moves into the path: it appears at the point the tool will pass
// at task time `task_time`, arriving from above over `approach` seconds before `start` (sim time;
// with CellOptions::disturb_in_task_time its descent begins when the task reaches start - approach).
// It is lowered, not driven: it comes down no further while it touches the robot, and again only
// after 0.2 s free of it.
struct Obstacle {
    double start = 0.0;
    double task_time = 0.0;
    double approach = 0.3;
    Eigen::Vector3d offset = Eigen::Vector3d::Zero();  // added to the tool point, m
    double hold = -1.0;  // s it stays after `start` before it leaves the way it came (< 0: it stays)
};

// What the robot's background task hears back for a sample (the wire protocol's reply, or an
// in-process detector): STOP latches a braking stop, RESUME releases it.
enum class Reply { Continue, Stop, Resume };
using SampleHook = std::function<Reply(const Sample&)>;

// The operator turns the speed override during the run (the teach pendant's slider or knob, or a
// safety function slowing the robot): from sim time `at` the task runs at `value` times its programmed
// speed. The controller scales its trajectory in time, as it does to brake: the path stays, joint
// speeds follow the value, accelerations its square, and while the value ramps (minimum jerk, from the
// speed of the moment) the speeds change along the path.
struct OverrideChange {
    double at = 0.0;     // s of sim time
    double value = 1.0;  // fraction of the programmed speed, (0, 1.5]
};

struct CellOptions {
    std::uint64_t seed = 1;
    double speed_override = 1.0;  // 1 = 100 %
    double friction_drift = 0.0;  // relative friction increase reached at the last cycle
    SignalOptions signal;
    SamplingOptions sampling;
    std::vector<Contact> contacts;
    std::optional<Obstacle> obstacle;
    std::optional<double> stop_at;  // s of sim time: brake to a stop then (an offline experiment)
    // Contacts start when the *task* reaches their time instead of the simulation clock. The task
    // time stands still while the robot is held, so in a live run with stops every contact still
    // meets the robot doing its task, as planned, instead of a robot that is already standing
    // (which tells nothing about detection). The obstacle's descent begins on the task's clock
    // and then keeps the simulation clock (Obstacle).
    bool disturb_in_task_time = false;
    double brake_time = 0.15;        // s from full speed to standstill along the path
    // Knob turns during the run, in order of `at`, and how long a change of 100 % takes (a change of
    // 30 % a third of it). 0.5 s is an estimate, not a vendor's number: a hand turning a knob or
    // dragging a slider over its range, which the controller follows smoothly; at least brake_time.
    std::vector<OverrideChange> override_changes;
    double override_ramp = 0.5;
    // Every sample carries the speed override the controller reports (speed_override x the knob
    // of the moment, Sample::speed_override): the operator's setting, which the motion follows
    // only over its ramp. Off: the robot's task does not send it. A slider ends at 100 %, so
    // overrides over 1 are refused with it (RobotCell's constructor).
    bool report_override = false;
    SampleHook on_sample;            // called for every sample, in order
};

class RobotCell {
public:
    RobotCell(RobotDescription robot, Task task, CellOptions options);

    // Runs `cycles` task cycles and returns the recording (every cycle complete: it starts a little
    // before the first cycle start and ends a little after the last cycle).
    Recording record(std::size_t cycles);

    // Start times of `cycles` planned cycles (s): the schedule contacts are placed in.
    std::vector<double> schedule(std::size_t cycles) const;
    void set_contacts(std::vector<Contact> contacts) { options_.contacts = std::move(contacts); }

    // Start time of every simulated cycle of the last record() (s).
    const std::vector<double>& cycle_starts() const { return cycle_starts_; }
    double simulated_seconds() const { return simulated_; }
    // Largest contact force of the last record() over every physics step (N), and when the robot
    // was first told to stop (sim time, s), if it was.
    double peak_contact_force() const { return peak_force_; }
    std::optional<double> stop_time() const { return stop_time_; }
    void set_options_hook(SampleHook hook) { options_.on_sample = std::move(hook); }
    void set_obstacle(Obstacle obstacle) { options_.obstacle = obstacle; }
    void set_stop_at(double t) { options_.stop_at = t; }

private:
    double contact_force(double t, std::size_t& link, const Contact** active) const;
    // Sim time at which each contact began; +inf until it has.
    std::vector<double> contact_onset_;
    // The value the controller reports for a commanded joint torque, in the robot's signal and unit.
    double reported(std::size_t joint, double torque) const;

    RobotDescription robot_;
    Task task_;
    CellOptions options_;
    std::vector<double> cycle_starts_;
    double simulated_ = 0.0;
    double peak_force_ = 0.0;
    std::optional<double> stop_time_;
};

// Where a contact on `link` (1-based) can land, in the link's own body frame (origin on its joint's
// axis): a contact lies at `along` times this vector. It is the next frame's origin, the link's far
// end. A link with no length of its own (DH a = d = 0: a wrist or shoulder whose axes meet) has its
// frame at its joint, where a force may pass through every axis it could turn (the 7-axis arm's link
// 2: the shoulder's axis intersection) and no joint feels it; a real housing meets a push off the
// axes. Such a link reaches instead to the next frame that lies away from its joint (the tool point
// after the last link): its housing is taken to hold the start of the next stretch of the arm.
Eigen::Vector3d contact_reach(const DhModel& kinematics, std::size_t link);

// Random contacts spread over cycles, links, profiles, magnitudes and phases, deterministic in `seed`.
std::vector<Contact> random_contacts(std::size_t count, const std::vector<double>& cycle_starts, double cycle_length,
                                     std::size_t links, double min_force, double max_force, std::uint64_t seed);

}  // namespace warpguard::sim
