// Equivalent lever lengths, thesis §4.4 (41)-(48), used by KA-mDTW (51)-(56).
//
// For joint o (1-based) the lever is the tool point seen from the frame whose z axis is that joint's
// axis, i.e. frame o-1 in standard DH: l = translation of H_{o-1}^e (42). The unit contact-force
// direction is known either in the base frame (payload weight: (0,0,-1)) and rotated into the tool
// frame, F_e = F_b T_b^e (43)-(45), or directly in the tool frame (pressing, insertion). Then
// F_o = F_e T_o^e' (46)-(47) and l_equiv = |(l x F_o)_z| (48): the torque about the joint axis per
// newton of contact force. For a prismatic joint the value is |z . F| (force per newton along the
// axis, dimensionless).
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include <Eigen/Core>

#include "warpguard/kinematics.hpp"

namespace warpguard {

struct ForceDirection {
    enum class Frame { Base, Tool };
    Frame frame = Frame::Base;
    Eigen::Vector3d unit{0.0, 0.0, -1.0};  // normalised on construction through make()

    // Throws std::invalid_argument for a zero vector.
    static ForceDirection make(Frame frame, const Eigen::Vector3d& direction);
};

std::string to_string(ForceDirection::Frame frame);
ForceDirection::Frame parse_force_frame(const std::string& text);

// Lever lengths of all joints at configuration q. `out` must hold model.dof() values. No allocation.
void equivalent_lever_lengths(const DhModel& model, std::span<const double> q, const ForceDirection& force,
                              std::span<double> out);

// A reference sample whose lever length is too small to divide by (§4.5: such references are refused).
class NearZeroLeverError : public std::runtime_error {
public:
    NearZeroLeverError(std::size_t joint, std::size_t sample, double lever, double minimum);
    std::size_t joint() const { return joint_; }    // 1-based
    std::size_t sample() const { return sample_; }  // 0-based sample index
private:
    std::size_t joint_;
    std::size_t sample_;
};

// Documented default for the smallest lever a signal may be divided by: 1 cm. Below that a
// torque noise of 0.1 Nm already reads as 10 N of contact force, and the scaled signal is noise.
inline constexpr double kDefaultMinLever = 0.01;

}  // namespace warpguard
