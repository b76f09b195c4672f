// A robot description: the one source of truth for a robot's kinematics and dynamics. The core
// library builds its DH model from it; the simulated cell builds its MuJoCo model from it, so the
// two agree on forward kinematics by construction.
//
// JSON (SI units, radians):
// {
//   "name": "ur5e-like", "vendor": "ur", "signal": "torque", "unit": "Nm",
//   "sources": "where every number comes from",
//   "joints": [ { "dh": {"a", "alpha", "d", "theta"}, "limits": [lo, hi],
//                 "mass", "com": [x, y, z], "inertia": [ixx, iyy, izz],   // in DH frame i (link i)
//                 "rated_torque", "gear", "viscous", "coulomb", "armature", "rated_current",
//                 "estimated": ["inertia", ...] }, ... ],
//   "tool": {"translation": [...], "rotation": [[...]...]}                  // optional
// }
#pragma once

#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "warpguard/kinematics.hpp"
#include "warpguard/recording.hpp"

namespace warpguard {

struct LinkDynamics {
    double mass = 0.0;                          // kg
    Eigen::Vector3d com = Eigen::Vector3d::Zero();      // m, in DH frame i
    Eigen::Vector3d inertia = Eigen::Vector3d::Zero();  // kg m^2, principal moments about the COM, axes of frame i
    double lower = -M_PI, upper = M_PI;         // joint limits, rad
    double rated_torque = 0.0;                  // Nm at the joint
    double gear = 1.0;                          // reduction ratio
    double viscous = 0.0;                       // Nm s/rad at the joint
    double coulomb = 0.0;                       // Nm at the joint
    double armature = 0.0;                      // kg m^2, reflected rotor inertia at the joint
    double rated_current = 0.0;                 // A at rated torque (needed for a current signal in A)
    std::vector<std::string> estimated;         // fields that are estimates, not published values
};

struct RobotDescription {
    std::string name;
    std::string vendor;
    SignalKind signal = SignalKind::Torque;
    SignalUnit unit = SignalUnit::Nm;
    std::string sources;
    DhModel kinematics;
    std::vector<LinkDynamics> links;

    std::size_t dof() const { return links.size(); }
};

// Throws std::invalid_argument naming the offending field and value.
RobotDescription robot_description_from_json(const nlohmann::json& j);
RobotDescription load_robot_description(const std::string& path);  // std::runtime_error with the path

}  // namespace warpguard
