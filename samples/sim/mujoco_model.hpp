// The simulated robot's physics: a MuJoCo model built at run time from a robot description.
//
// Body i carries link i and joint i. Its frame is DH frame i-1 turned by q_i about z (or moved by
// q_i along z for a prismatic joint), so the joint axis is the body's z axis; its child sits at
// Rot_z(theta_i) Trans_z(d_i) Trans_x(a_i) Rot_x(alpha_i), the DH link transform at q = 0. Link i's
// mass, centre of mass and principal inertias are given in DH frame i and placed accordingly. The
// tool point is a site. MuJoCo's own forward kinematics therefore reproduce the DH model exactly.
#pragma once

#include <memory>
#include <string>

#include <Eigen/Core>
#include <mujoco/mujoco.h>

#include "warpguard/robot_description.hpp"

namespace warpguard::sim {

struct ModelOptions {
    double timestep = 0.001;  // s, the physics and servo step
    bool joint_friction = true;  // viscous damping and Coulomb friction loss from the description
    bool obstacle = false;       // a movable box (mocap body) that the links collide with
    double obstacle_half_size = 0.05;  // m
};

// MJCF text of the robot (exposed for inspection and tests).
std::string mjcf_from_description(const RobotDescription& robot, const ModelOptions& options);

// Owns an mjModel and its mjData.
class MujocoRobot {
public:
    MujocoRobot(const RobotDescription& robot, const ModelOptions& options = {});
    ~MujocoRobot();
    MujocoRobot(const MujocoRobot&) = delete;
    MujocoRobot& operator=(const MujocoRobot&) = delete;

    const mjModel* model() const { return model_; }
    mjModel* mutable_model() { return model_; }  // for run-time changes: payload, friction drift
    mjData* data() { return data_; }
    const mjData* data() const { return data_; }
    int dof() const { return model_->nv; }
    int tool_site() const { return tool_site_; }
    int tool_body() const { return tool_body_; }
    int link_body(int joint) const { return first_body_ + joint; }  // 0-based joint -> body id
    // A body at the tool point that carries the payload; set_payload(0) leaves a negligible mass.
    int payload_body() const { return payload_body_; }
    void set_payload(double kg);
    // The obstacle (ModelOptions::obstacle): its mocap position, and the total force it gets from
    // contacts with the robot now (N, with the 1-based link that takes most of it, 0 if none).
    bool has_obstacle() const { return obstacle_body_ >= 0; }
    void place_obstacle(const Eigen::Vector3d& position);
    double obstacle_force(int& link) const;

private:
    mjModel* model_ = nullptr;
    mjData* data_ = nullptr;
    int tool_site_ = -1;
    int tool_body_ = -1;
    int first_body_ = 1;
    int payload_body_ = -1;
    int obstacle_body_ = -1;
    int obstacle_geom_ = -1;
};

}  // namespace warpguard::sim
