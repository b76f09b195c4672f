#include "servo_controller.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace warpguard::sim {

ServoController::ServoController(MujocoRobot& robot, const std::vector<double>& q_home, const ServoOptions& options)
    : model_(robot.model()) {
    const int n = robot.dof();
    if (static_cast<int>(q_home.size()) != n) {
        throw std::invalid_argument(fmt::format("home configuration has {} values; the robot has {} joints", q_home.size(), n));
    }
    scratch_ = mj_makeData(model_);
    for (int i = 0; i < n; ++i) scratch_->qpos[i] = q_home[static_cast<std::size_t>(i)];
    mj_forward(model_, scratch_);
    std::vector<mjtNum> mass(static_cast<std::size_t>(n * n));
    mj_fullM(model_, mass.data(), scratch_->qM);
    const double omega = 2.0 * M_PI * options.bandwidth_hz;
    for (int i = 0; i < n; ++i) {
        const double inertia = mass[static_cast<std::size_t>(i * n + i)];
        kp_.push_back(inertia * omega * omega);
        kd_.push_back(2.0 * options.damping_ratio * omega * inertia);
        ki_.push_back(kp_.back() * omega * options.integral_ratio);
    }
    integral_.assign(static_cast<std::size_t>(n), 0.0);
}

ServoController::~ServoController() {
    if (scratch_) mj_deleteData(scratch_);
}

void ServoController::reset_integral() { std::fill(integral_.begin(), integral_.end(), 0.0); }

void ServoController::command(MujocoRobot& robot, const double* q_des, const double* qd_des, const double* qdd_des,
                              double* tau) {
    const int n = robot.dof();
    const mjData* d = robot.data();
    // Feed-forward: inverse dynamics of the desired motion on the controller's own model.
    for (int i = 0; i < n; ++i) {
        scratch_->qpos[i] = q_des[i];
        scratch_->qvel[i] = qd_des[i];
        scratch_->qacc[i] = qdd_des[i];
    }
    mj_inverse(model_, scratch_);
    const double dt = model_->opt.timestep;
    for (int i = 0; i < n; ++i) {
        const std::size_t k = static_cast<std::size_t>(i);
        const double e = q_des[i] - d->qpos[i];
        const double ed = qd_des[i] - d->qvel[i];
        integral_[k] += e * dt;
        double u = scratch_->qfrc_inverse[i] + kp_[k] * e + kd_[k] * ed + ki_[k] * integral_[k];
        const double lo = model_->actuator_ctrlrange[2 * i], hi = model_->actuator_ctrlrange[2 * i + 1];
        u = std::clamp(u, lo, hi);
        tau[i] = u;
        robot.data()->ctrl[i] = u;
    }
}

}  // namespace warpguard::sim
