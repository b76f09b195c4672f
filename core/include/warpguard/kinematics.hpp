// Standard Denavit-Hartenberg kinematics: thesis (14)-(15), printed correctly as (40).
//
//   H_{i-1}^i = Rot_z(theta_i) Trans_z(d_i) Trans_x(a_i) Rot_x(alpha_i)
//
// Joint i turns about (or slides along) z_{i-1}. For a revolute joint theta_i = q_i + theta offset;
// for a prismatic joint d_i = q_i + d offset. An optional tool transform follows the flange.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Geometry>
#include <nlohmann/json_fwd.hpp>

namespace warpguard {

inline constexpr std::size_t kMaxDhJoints = 16;

enum class JointType { Revolute, Prismatic };

struct DhJoint {
    JointType type = JointType::Revolute;
    double a = 0.0;      // m, length of the common normal
    double alpha = 0.0;  // rad, twist about x_i
    double d = 0.0;      // m, offset along z_{i-1} (added to q for prismatic joints)
    double theta = 0.0;  // rad, offset about z_{i-1} (added to q for revolute joints)
};

class DhModel {
public:
    DhModel() = default;
    explicit DhModel(std::vector<DhJoint> joints, Eigen::Isometry3d tool = Eigen::Isometry3d::Identity(),
                     Eigen::Isometry3d base = Eigen::Isometry3d::Identity());

    std::size_t dof() const { return joints_.size(); }
    const std::vector<DhJoint>& joints() const { return joints_; }
    const Eigen::Isometry3d& tool() const { return tool_; }
    void set_tool(const Eigen::Isometry3d& tool) { tool_ = tool; }
    // DH frame 0 in the robot's base frame: identity when the base z axis is joint 1's axis and the
    // base origin lies on it (the usual case); identified models may need it.
    const Eigen::Isometry3d& base() const { return base_; }
    void set_base(const Eigen::Isometry3d& base) { base_ = base; }

    // H_{i-1}^i for joint i (0-based index here) at joint value qi.
    Eigen::Isometry3d link_transform(std::size_t i, double qi) const;

    // frames[k] = H_0^k for k = 0..dof in the base frame (frames[0] = base()), frames[dof+1] = tool frame.
    // `frames` must hold dof()+2 entries. Does not allocate.
    void forward(std::span<const double> q, std::span<Eigen::Isometry3d> frames) const;
    // Pose of the tool (flange if no tool is set) in the base frame.
    Eigen::Isometry3d tool_pose(std::span<const double> q) const;

private:
    std::vector<DhJoint> joints_;
    Eigen::Isometry3d tool_ = Eigen::Isometry3d::Identity();
    Eigen::Isometry3d base_ = Eigen::Isometry3d::Identity();
};

// JSON form: {"joints":[{"type":"revolute","a":..,"alpha":..,"d":..,"theta":..},...],
//             "tool":{"translation":[x,y,z],"rotation":[[...],[...],[...]]},   (optional)
//             "base":{"translation":[x,y,z],"rotation":[[...],[...],[...]]}}   (optional)
nlohmann::json to_json(const DhModel& model);
// Throws std::invalid_argument naming the offending field.
DhModel dh_model_from_json(const nlohmann::json& j);
DhModel load_dh_model(const std::string& path);

}  // namespace warpguard
