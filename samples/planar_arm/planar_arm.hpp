// An analytic robot for tests and the offline demo: a 3-link arm moving in a vertical plane, with
// closed-form rigid-body dynamics (planar recursive Newton-Euler), joint friction, a payload at the
// tool, a position-controlled task of minimum-jerk point-to-point moves with waits, a background
// task that samples irregularly, and external contact forces with ground truth.
//
// The "measured" signal is the motor torque a stiff position controller commands:
//   tau_m = M(q) q'' + c(q, q') + g(q) + friction(q') - J_c(q)^T F_ext  + noise, quantised.
// This is not the MuJoCo cell of issue 3 (no contact dynamics, no controller lag); it exists so the
// algorithms can be tested on signals with the right structure (time warping, gravity and inertial
// parts, pose-dependent lever arms) and reproducible ground truth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "warpguard/kinematics.hpp"
#include "warpguard/recording.hpp"

namespace warpguard::planar_arm {

struct Link {
    double length;   // m
    double mass;     // kg
    double com;      // m, centre of mass along the link from its joint
    double inertia;  // kg m^2 about the centre of mass (axis normal to the plane)
    double viscous;  // Nm s/rad, joint friction
    double coulomb;  // Nm
};

struct Arm {
    std::vector<Link> links;
    // The DH model of the arm: a_i = length, alpha = d = theta = 0; the tool is the tip of link 3.
    DhModel dh_model() const;
};

// A 3-link arm of roughly industrial proportions (links 0.45 m, 0.40 m, 0.12 m; 9, 6, 1.5 kg).
Arm default_arm();

struct Waypoint {
    std::vector<double> q;  // rad
    double move_time;       // s to reach this waypoint from the previous one
    double wait;            // s to stay here afterwards
};

enum class ContactProfile { Impact, Push };

struct Collision {
    std::size_t cycle;        // 0-based cycle of the run
    double phase;             // 0..1, fraction of the cycle at which the contact starts
    std::size_t link;         // 1-based
    ContactProfile profile;
    double magnitude;         // N, peak
    double duration;          // s: impact length, or push ramp time
    double direction;         // +1 / -1, normal to the link in the plane
};

struct TaskOptions {
    std::vector<Waypoint> waypoints;  // one cycle: from the last waypoint through all of them
    // Optional per-cycle alternatives for waypoint `varying_index` (pick at one place, place at
    // several): cycle c uses variants[c % variants.size()].
    std::size_t varying_index = 0;
    std::vector<std::vector<double>> variants;
};

struct RunOptions {
    std::size_t cycles = 10;
    std::uint64_t seed = 1;
    double sample_period = 0.008;   // s, nominal background-task period (Denso-like 125 Hz)
    double sample_jitter = 0.25;    // +- fraction of the period, per sample
    double cycle_rate_jitter = 0.04;  // +- fraction, per cycle (the task's load differs per cycle)
    double noise = 0.02;            // Nm, standard deviation of the torque noise
    double quantum = 0.01;          // Nm
    double payload = 0.0;           // kg at the tool
    double speed_override = 1.0;    // 1 = programmed speed
    double friction_drift = 0.0;    // relative friction increase reached at the last cycle
    std::vector<Collision> collisions;
    std::int64_t first_cycle = 1;   // counter value of the first cycle
    std::string name = "planar-arm";
};

// Pick-and-place cycle used by the tests and the demo.
TaskOptions default_task();

// Inverse dynamics (planar RNEA) plus friction; tau must hold links.size() values.
void inverse_dynamics(const Arm& arm, const double* q, const double* qd, const double* qdd, double payload,
                      double* tau);

// Simulates a run. The recording starts a little before the first cycle start and ends a little
// after the last, so every cycle of the run is complete (bounded by counter changes).
Recording simulate(const Arm& arm, const TaskOptions& task, const RunOptions& options);

// Spreads `count` collisions over cycles [first_cycle, cycles), links, profiles, magnitudes
// [min_force, max_force] and phases, deterministically from `seed`.
std::vector<Collision> random_collisions(std::size_t count, std::size_t first_cycle, std::size_t cycles,
                                         double min_force, double max_force, std::uint64_t seed);

}  // namespace warpguard::planar_arm
