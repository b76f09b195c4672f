// The simulated cell's physics against the core library's kinematics: one robot description, two
// models that must agree.
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "mujoco_model.hpp"
#include "servo_controller.hpp"
#include "warpguard/dynamics.hpp"
#include "warpguard/robot_description.hpp"

using namespace warpguard;

namespace {

// The suite's three arms, the held-out 4-axis SCARA (its third joint is prismatic, a quill: the
// physics of a sliding joint, a force rather than a torque) and the held-out 7-axis arm (a redundant
// joint, every DH `a` zero).
const char* const kRobots[] = {"ur5e-like", "irb120-like", "vp6242-like", "../held-out/hs045-like", "../held-out/lbr7-like"};

RobotDescription robot(const std::string& name) {
    return load_robot_description(std::string(WARPGUARD_ROBOTS_DIR) + "/" + name + ".json");
}

}  // namespace

TEST_CASE("MuJoCo's link positions agree with the DH forward kinematics to 1e-9 m", "[sim][kinematics]") {
    for (const char* name : kRobots) {
        const RobotDescription r = robot(name);
        sim::MujocoRobot sim(r);
        const std::size_t n = r.dof();
        std::mt19937_64 rng(17);
        std::vector<double> q(n);
        std::vector<Eigen::Isometry3d> frames(n + 2);
        double worst_position = 0.0, worst_rotation = 0.0;
        for (int trial = 0; trial < 1000; ++trial) {
            for (std::size_t i = 0; i < n; ++i) {
                std::uniform_real_distribution<double> u(r.links[i].lower, r.links[i].upper);
                q[i] = u(rng);
                sim.data()->qpos[i] = q[i];
            }
            mj_kinematics(sim.model(), sim.data());
            r.kinematics.forward(q, frames);
            // Body i (1-based) sits at DH frame i-1, moved by its own joint: a hinge turns it about
            // its origin, a slide carries the origin q_i along z_{i-1}. The tool site is the DH tool pose.
            for (std::size_t i = 0; i < n; ++i) {
                const mjtNum* p = sim.data()->xpos + 3 * sim.link_body(static_cast<int>(i));
                const bool slide = r.kinematics.joints()[i].type == JointType::Prismatic;
                const Eigen::Vector3d expected = frames[i].translation() + (slide ? q[i] : 0.0) * frames[i].linear().col(2);
                const Eigen::Vector3d diff = Eigen::Vector3d(p[0], p[1], p[2]) - expected;
                worst_position = std::max(worst_position, diff.norm());
            }
            const mjtNum* tp = sim.data()->site_xpos + 3 * sim.tool_site();
            const mjtNum* tr = sim.data()->site_xmat + 9 * sim.tool_site();
            const Eigen::Isometry3d& tool = frames[n + 1];
            worst_position = std::max(worst_position, (Eigen::Vector3d(tp[0], tp[1], tp[2]) - tool.translation()).norm());
            Eigen::Matrix3d rot;
            rot << tr[0], tr[1], tr[2], tr[3], tr[4], tr[5], tr[6], tr[7], tr[8];
            worst_rotation = std::max(worst_rotation, (rot - tool.linear()).cwiseAbs().maxCoeff());
        }
        INFO(name << ": worst position error " << worst_position << " m, rotation " << worst_rotation);
        CHECK(worst_position < 1e-9);
        CHECK(worst_rotation < 1e-9);
    }
}

TEST_CASE("a static 10 N force at the tool changes the commanded joint torques by J^T F within 2 %", "[sim][dynamics]") {
    for (const char* name : kRobots) {
        const RobotDescription r = robot(name);
        // Coulomb friction would let a joint hold part of the load at standstill; the test checks
        // the rigid-body model, so friction is off here.
        sim::ModelOptions options;
        options.joint_friction = false;
        sim::MujocoRobot sim(r, options);
        const std::size_t n = r.dof();
        std::vector<double> q0(n);
        for (std::size_t i = 0; i < n; ++i) q0[i] = 0.35 * r.links[i].lower + 0.65 * r.links[i].upper;  // an off-centre pose
        for (std::size_t i = 0; i < n; ++i) sim.data()->qpos[i] = q0[i];
        mj_forward(sim.model(), sim.data());
        sim::ServoController servo(sim, q0);
        const std::vector<double> zero(n, 0.0);
        std::vector<double> tau(n);

        auto settle = [&](double seconds) {
            std::vector<double> mean(n, 0.0);
            const int steps = static_cast<int>(seconds / sim.model()->opt.timestep);
            const int averaged = steps / 4;
            for (int s = 0; s < steps; ++s) {
                servo.command(sim, q0.data(), zero.data(), zero.data(), tau.data());
                mj_step(sim.model(), sim.data());
                if (s >= steps - averaged) {
                    for (std::size_t i = 0; i < n; ++i) mean[i] += tau[i] / averaged;
                }
            }
            return mean;
        };
        const std::vector<double> before = settle(3.0);

        // 10 N at the tool point, applied through the last body (MuJoCo applies xfrc at the body's
        // centre of mass, so the moment of the offset is added).
        const Eigen::Vector3d force = 10.0 * Eigen::Vector3d(0.3, -0.5, 0.81).normalized();
        const mjtNum* tp = sim.data()->site_xpos + 3 * sim.tool_site();
        const mjtNum* com = sim.data()->xipos + 3 * sim.tool_body();
        const Eigen::Vector3d arm(tp[0] - com[0], tp[1] - com[1], tp[2] - com[2]);
        const Eigen::Vector3d moment = arm.cross(force);
        mjtNum* xfrc = sim.data()->xfrc_applied + 6 * sim.tool_body();
        for (int k = 0; k < 3; ++k) {
            xfrc[k] = force[k];
            xfrc[3 + k] = moment[k];
        }
        const std::vector<double> after = settle(3.0);

        // J^T F from the DH model: column i = z_{i-1} x (p - o_{i-1}) for a revolute joint, z_{i-1}
        // for a prismatic one (its motor holds a force along its axis).
        std::vector<Eigen::Isometry3d> frames(n + 2);
        r.kinematics.forward(q0, frames);
        const Eigen::Vector3d p = frames[n + 1].translation();
        Eigen::VectorXd jtf(n), change(n);
        for (std::size_t i = 0; i < n; ++i) {
            const Eigen::Vector3d z = frames[i].linear().col(2);
            const bool slide = r.kinematics.joints()[i].type == JointType::Prismatic;
            jtf[i] = (slide ? z : Eigen::Vector3d(z.cross(p - frames[i].translation()))).dot(force);
            change[i] = after[i] - before[i];
        }
        // The motors must hold against the external torque: their command changes by -J^T F.
        const double error = (change + jtf).norm() / jtf.norm();
        INFO(name << ": |J^T F| = " << jtf.norm() << " (Nm or N), relative error " << error << "\nJ^T F = " << jtf.transpose()
                  << "\nchange = " << change.transpose());
        CHECK(jtf.norm() > 1.0);
        CHECK(error < 0.02);
    }
}

TEST_CASE("robot descriptions name what is wrong", "[sim][description]") {
    nlohmann::json j = nlohmann::json::parse(R"({"name":"x","joints":[{"dh":{"a":0.1},"limits":[1,0],"mass":1,
        "com":[0,0,0],"inertia":[1,1,1],"rated_torque":1,"gear":1,"viscous":0,"coulomb":0}]})");
    CHECK_THROWS_WITH(robot_description_from_json(j), Catch::Contains("x.joints[0].limits [1, 0] must have lower < upper"));
    j["joints"][0]["limits"] = {0, 1};
    j["joints"][0]["mass"] = -2;
    CHECK_THROWS_WITH(robot_description_from_json(j), Catch::Contains("x.joints[0].mass must be > 0, got -2"));
    CHECK_THROWS_WITH(load_robot_description("/nonexistent/robot.json"), Catch::Contains("/nonexistent/robot.json"));
}

TEST_CASE("The dynamics regressor with the described parameters reproduces MuJoCo's inverse dynamics", "[sim][dynamics]") {
    for (const char* name : kRobots) {
        const RobotDescription r = robot(name);
        sim::ModelOptions options;
        options.joint_friction = false;  // rigid bodies and armature; the smooth Coulomb column is WarpGuard's own
        sim::MujocoRobot sim(r, options);
        sim.set_payload(0.0);
        const DynamicsRegressor regressor(r.kinematics);
        Eigen::VectorXd pi = regressor.parameters(r.links);
        const std::size_t n = r.dof();
        for (std::size_t j = 0; j < n; ++j) {  // the MuJoCo model has no joint friction here
            pi(static_cast<Eigen::Index>(regressor.joint_column(j, 1))) = 0.0;
            pi(static_cast<Eigen::Index>(regressor.joint_column(j, 2))) = 0.0;
        }
        std::mt19937_64 rng(23);
        std::vector<double> q(n), qd(n), qdd(n);
        Eigen::MatrixXd y(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(regressor.columns()));
        Eigen::MatrixXd y_motion = y;
        double worst = 0.0, largest = 0.0, worst_split = 0.0;
        for (int trial = 0; trial < 300; ++trial) {
            for (std::size_t i = 0; i < n; ++i) {
                q[i] = std::uniform_real_distribution<double>(r.links[i].lower, r.links[i].upper)(rng);
                qd[i] = std::uniform_real_distribution<double>(-2.0, 2.0)(rng);
                qdd[i] = std::uniform_real_distribution<double>(-5.0, 5.0)(rng);
                sim.data()->qpos[i] = q[i];
                sim.data()->qvel[i] = qd[i];
                sim.data()->qacc[i] = qdd[i];
            }
            mj_inverse(sim.model(), sim.data());
            regressor.compute(q, qd, qdd, true, y);
            const Eigen::VectorXd tau = y * pi;
            // Gravity alone: MuJoCo at rest; the motion part is the difference.
            regressor.compute(q, qd, qdd, false, y_motion);
            const Eigen::VectorXd motion = y_motion * pi;
            std::vector<double> inverse(n);
            for (std::size_t i = 0; i < n; ++i) inverse[i] = sim.data()->qfrc_inverse[i];
            for (std::size_t i = 0; i < n; ++i) {
                sim.data()->qvel[i] = 0.0;
                sim.data()->qacc[i] = 0.0;
            }
            mj_inverse(sim.model(), sim.data());
            for (std::size_t i = 0; i < n; ++i) {
                const auto k = static_cast<Eigen::Index>(i);
                worst = std::max(worst, std::abs(tau(k) - inverse[i]));
                largest = std::max(largest, std::abs(inverse[i]));
                worst_split = std::max(worst_split, std::abs(motion(k) - (inverse[i] - sim.data()->qfrc_inverse[i])));
            }
        }
        INFO(name << ": worst |Y pi - MuJoCo| = " << worst << " Nm (largest torque " << largest << " Nm), motion part " << worst_split);
        CHECK(largest > 10.0);
        CHECK(worst < 1e-6 * largest);
        CHECK(worst_split < 1e-6 * largest);
    }
}
