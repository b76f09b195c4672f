#include "warpguard/lever_length.hpp"

#include <array>

#include <fmt/format.h>

namespace warpguard {

ForceDirection ForceDirection::make(Frame frame, const Eigen::Vector3d& direction) {
    const double norm = direction.norm();
    if (!(norm > 1e-12)) {
        throw std::invalid_argument(fmt::format("force direction ({}, {}, {}) has no length; expected a non-zero vector",
                                                direction.x(), direction.y(), direction.z()));
    }
    return ForceDirection{frame, direction / norm};
}

std::string to_string(ForceDirection::Frame frame) { return frame == ForceDirection::Frame::Base ? "base" : "tool"; }

ForceDirection::Frame parse_force_frame(const std::string& text) {
    if (text == "base") return ForceDirection::Frame::Base;
    if (text == "tool") return ForceDirection::Frame::Tool;
    throw std::invalid_argument(fmt::format("force frame '{}' is not known; expected base or tool", text));
}

void equivalent_lever_lengths(const DhModel& model, std::span<const double> q, const ForceDirection& force,
                              std::span<double> out) {
    const std::size_t n = model.dof();
    if (out.size() < n) throw std::invalid_argument(fmt::format("lever output holds {} values, needs {}", out.size(), n));
    std::array<Eigen::Isometry3d, kMaxDhJoints + 2> frames;
    model.forward(q, std::span(frames).first(n + 2));
    const Eigen::Isometry3d& base_to_tool = frames[n + 1];  // H_b^e (43)

    // (44)-(45): F_e = F_b T_b^e, the row-vector form of R^T F_b.
    const Eigen::Vector3d f_tool =
        force.frame == ForceDirection::Frame::Base ? Eigen::Vector3d(base_to_tool.linear().transpose() * force.unit)
                                                   : force.unit;

    for (std::size_t o = 0; o < n; ++o) {
        // Joint o+1 acts about z of frame o.
        const Eigen::Isometry3d joint_to_tool = frames[o].inverse() * base_to_tool;  // H_o^e (41)
        const Eigen::Vector3d f_joint = joint_to_tool.linear() * f_tool;          // (46)-(47)
        if (model.joints()[o].type == JointType::Prismatic) {
            out[o] = std::abs(f_joint.z());
        } else {
            const Eigen::Vector3d lever = joint_to_tool.translation();  // (42)
            out[o] = std::abs(lever.cross(f_joint).z());                 // (48)
        }
    }
}

NearZeroLeverError::NearZeroLeverError(std::size_t joint, std::size_t sample, double lever, double minimum)
    : std::runtime_error(fmt::format(
          "joint {}: equivalent lever length {:.4g} m at reference sample {} is below the minimum {:.4g} m; "
          "KA-mDTW cannot divide by it (thesis §4.5) - record a reference that avoids this pose or use plain mDTW",
          joint, lever, sample, minimum)),
      joint_(joint),
      sample_(sample) {}

}  // namespace warpguard
