#include "mujoco_model.hpp"

#include <array>
#include <sstream>
#include <stdexcept>

#include <Eigen/Geometry>
#include <fmt/format.h>

namespace warpguard::sim {

namespace {

constexpr double kNoPayload = 1e-6;  // kg: MuJoCo needs a positive mass for a body
constexpr double kPayloadRadius = 0.04;  // m: the payload's inertia is that of a solid sphere

std::string vec(const Eigen::Vector3d& v) { return fmt::format("{:.17g} {:.17g} {:.17g}", v.x(), v.y(), v.z()); }

std::string quat(const Eigen::Matrix3d& r) {
    Eigen::Quaterniond q(r);
    q.normalize();
    return fmt::format("{:.17g} {:.17g} {:.17g} {:.17g}", q.w(), q.x(), q.y(), q.z());  // MuJoCo order w x y z
}

// DH link transform of joint i at q = 0: offsets only.
Eigen::Isometry3d link_at_zero(const DhModel& model, std::size_t i) { return model.link_transform(i, 0.0); }

}  // namespace

std::string mjcf_from_description(const RobotDescription& robot, const ModelOptions& options) {
    const DhModel& dh = robot.kinematics;
    std::ostringstream x;
    x << "<mujoco model=\"" << robot.name << "\">\n"
      << "  <compiler angle=\"radian\" autolimits=\"true\"/>\n"
      << fmt::format("  <option timestep=\"{:.17g}\" gravity=\"0 0 -9.81\" integrator=\"Euler\"/>\n", options.timestep)
      << "  <worldbody>\n";
    std::string indent = "    ";
    for (std::size_t i = 0; i < robot.dof(); ++i) {
        const LinkDynamics& l = robot.links[i];
        const DhJoint& p = dh.joints()[i];
        // Body i: placed at the previous link's transform (identity for the first).
        if (i == 0) {
            x << indent << "<body name=\"link1\" pos=\"0 0 0\">\n";
        } else {
            const Eigen::Isometry3d parent = link_at_zero(dh, i - 1);
            x << indent << fmt::format("<body name=\"link{}\" pos=\"{}\" quat=\"{}\">\n", i + 1, vec(parent.translation()),
                                       quat(parent.linear()));
        }
        const std::string in = indent + "  ";
        const bool prismatic = p.type == JointType::Prismatic;
        x << in
          << fmt::format("<joint name=\"j{}\" type=\"{}\" axis=\"0 0 1\" range=\"{:.17g} {:.17g}\" armature=\"{:.17g}\"",
                         i + 1, prismatic ? "slide" : "hinge", l.lower, l.upper, l.armature);
        if (options.joint_friction) x << fmt::format(" damping=\"{:.17g}\" frictionloss=\"{:.17g}\"", l.viscous, l.coulomb);
        x << "/>\n";
        // Link i's mass properties are given in DH frame i = this body's frame * link transform.
        const Eigen::Isometry3d to_frame_i = link_at_zero(dh, i);
        x << in
          << fmt::format("<inertial pos=\"{}\" quat=\"{}\" mass=\"{:.17g}\" diaginertia=\"{}\"/>\n",
                         vec(to_frame_i * l.com), quat(to_frame_i.linear()), l.mass, vec(l.inertia));
        // A capsule from the joint to the next frame, for contacts with the obstacle; it adds no mass.
        const Eigen::Vector3d end = to_frame_i.translation();
        if (end.norm() > 1e-6) {
            // contype 2 / conaffinity 0: touches the obstacle (conaffinity 2), never the robot itself.
            x << in << fmt::format("<geom type=\"capsule\" fromto=\"0 0 0 {}\" size=\"0.03\" mass=\"0\" contype=\"2\" conaffinity=\"0\"/>\n", vec(end));
        }
        if (i + 1 == robot.dof()) {
            const Eigen::Isometry3d tool = to_frame_i * dh.tool();
            if ((tool.translation() - end).norm() > 1e-6) {  // the tool itself, flange to tool point
                x << in << fmt::format("<geom type=\"capsule\" fromto=\"{} {}\" size=\"0.02\" mass=\"0\" contype=\"2\" conaffinity=\"0\"/>\n",
                                       vec(end), vec(tool.translation()));
            }
            x << in << fmt::format("<site name=\"tool\" pos=\"{}\" quat=\"{}\" size=\"0.01\"/>\n", vec(tool.translation()),
                                   quat(tool.linear()));
            // The payload: a small sphere at the tool point, welded to the last link.
            x << in << fmt::format("<body name=\"payload\" pos=\"{}\"><inertial pos=\"0 0 0\" mass=\"{:.17g}\" diaginertia=\"{:.17g} {:.17g} {:.17g}\"/></body>\n",
                                   vec(tool.translation()), kNoPayload, kNoPayload * 1e-3, kNoPayload * 1e-3, kNoPayload * 1e-3);
        }
        indent += "  ";
    }
    for (std::size_t i = robot.dof(); i-- > 0;) {
        indent.resize(indent.size() - 2);
        x << indent << "</body>\n";
    }
    if (options.obstacle) {
        // Parked far below the cell until a scenario moves it into the path.
        x << fmt::format("    <body name=\"obstacle\" mocap=\"true\" pos=\"0 0 -10\"><geom name=\"obstacle\" type=\"box\" "
                         "size=\"{0:.17g} {0:.17g} {0:.17g}\" contype=\"0\" conaffinity=\"2\" mass=\"1\"/></body>\n",
                         options.obstacle_half_size);
    }
    x << "  </worldbody>\n  <actuator>\n";
    for (std::size_t i = 0; i < robot.dof(); ++i) {
        // The motor torque the controller commands, limited to 3x the rated torque (peak).
        const double peak = 3.0 * robot.links[i].rated_torque;
        x << fmt::format("    <motor name=\"m{}\" joint=\"j{}\" gear=\"1\" ctrlrange=\"{:.17g} {:.17g}\"/>\n", i + 1, i + 1,
                         -peak, peak);
    }
    x << "  </actuator>\n</mujoco>\n";
    return x.str();
}

MujocoRobot::MujocoRobot(const RobotDescription& robot, const ModelOptions& options) {
    const std::string xml = mjcf_from_description(robot, options);
    auto vfs = std::make_unique<mjVFS>();
    mj_defaultVFS(vfs.get());
    const std::string name = "robot.xml";
    if (mj_makeEmptyFileVFS(vfs.get(), name.c_str(), static_cast<int>(xml.size())) != 0) {
        throw std::runtime_error("MuJoCo: cannot create the in-memory model file");
    }
    const int index = mj_findFileVFS(vfs.get(), name.c_str());
    std::copy(xml.begin(), xml.end(), static_cast<char*>(vfs->filedata[index]));
    std::array<char, 1024> error{};
    model_ = mj_loadXML(name.c_str(), vfs.get(), error.data(), static_cast<int>(error.size()));
    mj_deleteVFS(vfs.get());
    if (!model_) throw std::runtime_error(fmt::format("MuJoCo rejected the model of '{}': {}", robot.name, error.data()));
    data_ = mj_makeData(model_);
    tool_site_ = mj_name2id(model_, mjOBJ_SITE, "tool");
    first_body_ = mj_name2id(model_, mjOBJ_BODY, "link1");
    tool_body_ = mj_name2id(model_, mjOBJ_BODY, fmt::format("link{}", robot.dof()).c_str());
    payload_body_ = mj_name2id(model_, mjOBJ_BODY, "payload");
    obstacle_body_ = mj_name2id(model_, mjOBJ_BODY, "obstacle");
    obstacle_geom_ = mj_name2id(model_, mjOBJ_GEOM, "obstacle");
    if (tool_site_ < 0 || first_body_ < 0 || tool_body_ < 0 || payload_body_ < 0) {
        throw std::runtime_error("MuJoCo model lacks its tool site, links or payload body");
    }
}

void MujocoRobot::place_obstacle(const Eigen::Vector3d& position) {
    if (obstacle_body_ < 0) throw std::logic_error("this model was built without an obstacle");
    const int mocap = model_->body_mocapid[obstacle_body_];
    for (int k = 0; k < 3; ++k) data_->mocap_pos[3 * mocap + k] = position[k];
}

double MujocoRobot::obstacle_force(int& link) const {
    link = 0;
    if (obstacle_geom_ < 0) return 0.0;
    Eigen::Vector3d total = Eigen::Vector3d::Zero();
    double strongest = 0.0;
    for (int c = 0; c < data_->ncon; ++c) {
        const mjContact& con = data_->contact[c];
        if (con.geom1 != obstacle_geom_ && con.geom2 != obstacle_geom_) continue;
        mjtNum local[6];
        mj_contactForce(model_, data_, c, local);
        // The contact frame's rows are its axes in world coordinates: force = frame^T * local.
        Eigen::Vector3d f = Eigen::Vector3d::Zero();
        for (int r = 0; r < 3; ++r) {
            for (int k = 0; k < 3; ++k) f[k] += con.frame[3 * r + k] * local[r];
        }
        total += f;
        const int robot_geom = con.geom1 == obstacle_geom_ ? con.geom2 : con.geom1;
        const int body = model_->geom_bodyid[robot_geom];
        if (f.norm() > strongest) {
            strongest = f.norm();
            link = body - first_body_ + 1;
        }
    }
    return total.norm();
}

void MujocoRobot::set_payload(double kg) {
    if (!(kg >= 0)) throw std::invalid_argument(fmt::format("payload must be >= 0 kg, got {}", kg));
    const double mass = std::max(kg, kNoPayload);
    const double inertia = 0.4 * mass * kPayloadRadius * kPayloadRadius;
    model_->body_mass[payload_body_] = mass;
    for (int k = 0; k < 3; ++k) model_->body_inertia[3 * payload_body_ + k] = inertia;
}

MujocoRobot::~MujocoRobot() {
    if (data_) mj_deleteData(data_);
    if (model_) mj_deleteModel(model_);
}

}  // namespace warpguard::sim
