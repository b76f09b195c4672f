// The joint position controller a closed industrial controller runs at its servo rate: model-based
// feed-forward (MuJoCo inverse dynamics of the desired motion: inertia, Coriolis, gravity, joint
// damping) plus a PID on the joint error. The "measured" torque a robot reports is what this
// controller commands.
#pragma once

#include <vector>

#include "mujoco_model.hpp"

namespace warpguard::sim {

struct ServoOptions {
    double bandwidth_hz = 15.0;  // closed-loop bandwidth of the position loop
    double damping_ratio = 1.0;
    double integral_ratio = 0.1;  // Ki = Kp * omega * ratio
};

class ServoController {
public:
    // Gains are set from the mass matrix at configuration `q_home`.
    ServoController(MujocoRobot& robot, const std::vector<double>& q_home, const ServoOptions& options = {});
    ~ServoController();
    ServoController(const ServoController&) = delete;
    ServoController& operator=(const ServoController&) = delete;

    // Torque for the desired motion at the robot's current state; written to the actuators and to
    // `tau` (robot.dof() values). Call once per physics step.
    void command(MujocoRobot& robot, const double* q_des, const double* qd_des, const double* qdd_des, double* tau);
    void reset_integral();

    const std::vector<double>& kp() const { return kp_; }

private:
    mjData* scratch_ = nullptr;
    const mjModel* model_ = nullptr;
    std::vector<double> kp_, kd_, ki_, integral_;
};

}  // namespace warpguard::sim
