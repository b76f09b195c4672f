// The kinematic identification procedure on the simulated robot (thesis §4.2): from a home pose,
// each joint in turn moves through a set of angles over its range while the controller reports the
// joint angles and the tracked point from its own forward kinematics. The simulated controller's
// forward kinematics are MuJoCo's (mj_kinematics on the model built from the robot description).
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "mujoco_model.hpp"
#include "warpguard/identification.hpp"

namespace warpguard::sim {

struct IdentificationProcedure {
    std::vector<double> home;            // empty: 0 where the joint allows it, else near its limit closest to 0
    std::size_t points_per_joint = 24;   // over the joint's range (at most +-170 deg)
    Eigen::Vector3d tracked_point{0.05, 0.0, 0.0};  // in the tool site's frame; must not lie on the last axis
    double noise = 0.0;                  // m, Gaussian noise per coordinate of the reported point
    std::uint64_t seed = 1;
};

// The default home of the procedure for a robot (see IdentificationProcedure::home).
std::vector<double> default_identification_home(const RobotDescription& robot);

// The tracked point in the base frame at configuration q (MuJoCo forward kinematics).
Eigen::Vector3d tracked_point_at(MujocoRobot& sim, const std::vector<double>& q, const Eigen::Vector3d& tracked_point);

std::vector<TrackedPointSample> run_identification_procedure(const RobotDescription& robot,
                                                             const IdentificationProcedure& procedure);

// `count` random configurations within the joint limits and the tracked point at each (joint 0 in
// the rows: they are checks, not procedure points).
std::vector<TrackedPointSample> random_check_points(const RobotDescription& robot, const Eigen::Vector3d& tracked_point,
                                                    std::size_t count, std::uint64_t seed);

}  // namespace warpguard::sim
