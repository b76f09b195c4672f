#include "identification_procedure.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

namespace warpguard::sim {

std::vector<double> default_identification_home(const RobotDescription& robot) {
    std::vector<double> home;
    for (const auto& l : robot.links) {
        // A joint that cannot be at 0 (VP-6242 joint 3) waits 15 % of its range inside the limit
        // closest to 0: the arm stays open and the tracked point far from joint 1's axis.
        const double margin = 0.15 * (l.upper - l.lower);
        home.push_back(l.lower <= 0 && 0 <= l.upper ? 0.0 : (l.lower > 0 ? l.lower + margin : l.upper - margin));
    }
    return home;
}

Eigen::Vector3d tracked_point_at(MujocoRobot& sim, const std::vector<double>& q, const Eigen::Vector3d& tracked_point) {
    mjData* d = sim.data();
    for (int i = 0; i < sim.dof(); ++i) d->qpos[i] = q[static_cast<std::size_t>(i)];
    mj_kinematics(sim.model(), d);
    const int s = sim.tool_site();
    const Eigen::Vector3d origin(d->site_xpos[3 * s], d->site_xpos[3 * s + 1], d->site_xpos[3 * s + 2]);
    Eigen::Matrix3d rot;
    for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) rot(r, c) = d->site_xmat[9 * s + 3 * r + c];
    }
    return origin + rot * tracked_point;
}

std::vector<TrackedPointSample> run_identification_procedure(const RobotDescription& robot,
                                                             const IdentificationProcedure& procedure) {
    const std::size_t n = robot.dof();
    const std::vector<double> home = procedure.home.empty() ? default_identification_home(robot) : procedure.home;
    if (home.size() != n) throw std::invalid_argument(fmt::format("home has {} values; the robot has {} joints", home.size(), n));
    if (procedure.points_per_joint < 3) {
        throw std::invalid_argument(fmt::format("{} points per joint; the identification needs at least 3", procedure.points_per_joint));
    }
    for (std::size_t k = 0; k < n; ++k) {
        const auto& l = robot.links[k];
        if (home[k] < l.lower || home[k] > l.upper) {
            throw std::invalid_argument(fmt::format("home of joint {} is {:.4g} rad, outside its limits [{:.4g}, {:.4g}]", k + 1,
                                                    home[k], l.lower, l.upper));
        }
    }
    MujocoRobot sim(robot);
    std::mt19937_64 rng(procedure.seed);
    std::normal_distribution<double> noise(0.0, procedure.noise > 0 ? procedure.noise : 1.0);
    std::vector<TrackedPointSample> out;
    constexpr double kMaxSwing = 170.0 * M_PI / 180.0;  // consecutive points stay < 180 deg apart
    for (std::size_t k = 0; k < n; ++k) {
        const double lo = std::max(robot.links[k].lower, -kMaxSwing), hi = std::min(robot.links[k].upper, kMaxSwing);
        for (std::size_t s = 0; s < procedure.points_per_joint; ++s) {
            TrackedPointSample x;
            x.joint = k + 1;
            x.q = home;
            x.q[k] = lo + (hi - lo) * static_cast<double>(s) / static_cast<double>(procedure.points_per_joint - 1);
            x.p = tracked_point_at(sim, x.q, procedure.tracked_point);
            if (procedure.noise > 0) x.p += Eigen::Vector3d(noise(rng), noise(rng), noise(rng));
            out.push_back(std::move(x));
        }
    }
    return out;
}

std::vector<TrackedPointSample> random_check_points(const RobotDescription& robot, const Eigen::Vector3d& tracked_point,
                                                    std::size_t count, std::uint64_t seed) {
    MujocoRobot sim(robot);
    std::mt19937_64 rng(seed);
    std::vector<TrackedPointSample> out;
    for (std::size_t c = 0; c < count; ++c) {
        TrackedPointSample x;
        x.joint = 0;
        for (const auto& l : robot.links) x.q.push_back(std::uniform_real_distribution<double>(l.lower, l.upper)(rng));
        x.p = tracked_point_at(sim, x.q, tracked_point);
        out.push_back(std::move(x));
    }
    return out;
}

}  // namespace warpguard::sim
