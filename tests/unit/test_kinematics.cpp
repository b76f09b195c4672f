// DH forward kinematics (15)/(40) and equivalent lever lengths (41)-(48).
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "warpguard/kinematics.hpp"
#include "warpguard/lever_length.hpp"

using namespace warpguard;

namespace {

DhModel planar(double l1, double l2) {
    return DhModel({{JointType::Revolute, l1, 0, 0, 0}, {JointType::Revolute, l2, 0, 0, 0}});
}

// UR5e's published DH table (a, d, alpha) with a tool offset: a full 3D test chain.
DhModel ur5e_like() {
    const double pi = M_PI;
    Eigen::Isometry3d tool = Eigen::Isometry3d::Identity();
    tool.translation() << 0.02, -0.01, 0.15;
    tool.linear() = Eigen::AngleAxisd(0.3, Eigen::Vector3d::UnitX()).toRotationMatrix();
    return DhModel({{JointType::Revolute, 0.0, pi / 2, 0.1625, 0},
                    {JointType::Revolute, -0.425, 0, 0, 0},
                    {JointType::Revolute, -0.3922, 0, 0, 0},
                    {JointType::Revolute, 0.0, pi / 2, 0.1333, 0},
                    {JointType::Revolute, 0.0, -pi / 2, 0.0997, 0},
                    {JointType::Revolute, 0.0, 0, 0.0996, 0}},
                   tool);
}

}  // namespace

TEST_CASE("a DH link transform is Rot_z(theta) Trans_z(d) Trans_x(a) Rot_x(alpha) (14)", "[kinematics]") {
    const DhModel model({{JointType::Revolute, 0.3, 0.7, 0.2, 0.1}});
    const double q = 0.9;
    const Eigen::Isometry3d expected = Eigen::AngleAxisd(q + 0.1, Eigen::Vector3d::UnitZ()) *
                                       Eigen::Translation3d(0, 0, 0.2) * Eigen::Translation3d(0.3, 0, 0) *
                                       Eigen::AngleAxisd(0.7, Eigen::Vector3d::UnitX());
    CHECK((model.link_transform(0, q).matrix() - expected.matrix()).norm() < 1e-12);
}

TEST_CASE("a prismatic joint adds q to d", "[kinematics]") {
    const DhModel model({{JointType::Prismatic, 0.0, 0.0, 0.1, 0.0}});
    CHECK(model.tool_pose(std::vector<double>{0.25}).translation().z() == Approx(0.35));
}

TEST_CASE("planar two-link forward kinematics matches the closed form", "[kinematics]") {
    const DhModel model = planar(0.5, 0.3);
    for (double q1 = -2.0; q1 < 2.0; q1 += 0.37) {
        for (double q2 = -2.5; q2 < 2.5; q2 += 0.41) {
            const std::vector<double> q{q1, q2};
            const auto p = model.tool_pose(q).translation();
            CHECK(p.x() == Approx(0.5 * std::cos(q1) + 0.3 * std::cos(q1 + q2)).margin(1e-12));
            CHECK(p.y() == Approx(0.5 * std::sin(q1) + 0.3 * std::sin(q1 + q2)).margin(1e-12));
            CHECK(p.z() == Approx(0.0).margin(1e-12));
        }
    }
}

TEST_CASE("lever lengths of a planar two-link arm match closed-form values", "[kinematics][lever]") {
    const double l1 = 0.5, l2 = 0.3;
    const DhModel model = planar(l1, l2);
    std::vector<double> lever(2);
    for (double q1 = -1.9; q1 < 1.9; q1 += 0.23) {
        for (double q2 = -2.3; q2 < 2.3; q2 += 0.29) {
            const std::vector<double> q{q1, q2};
            INFO("q = " << q1 << ", " << q2);
            // Weight-like force fixed in the base frame, along -y (in the plane of motion).
            equivalent_lever_lengths(model, q, ForceDirection::make(ForceDirection::Frame::Base, {0, -1, 0}), lever);
            CHECK(lever[0] == Approx(std::abs(l1 * std::cos(q1) + l2 * std::cos(q1 + q2))).margin(1e-12));
            CHECK(lever[1] == Approx(std::abs(l2 * std::cos(q1 + q2))).margin(1e-12));
            // Pushing along the tool's x axis (along link 2): joint 2 sees no torque.
            equivalent_lever_lengths(model, q, ForceDirection::make(ForceDirection::Frame::Tool, {1, 0, 0}), lever);
            CHECK(lever[0] == Approx(std::abs(l1 * std::sin(q2))).margin(1e-12));
            CHECK(lever[1] == Approx(0.0).margin(1e-12));
            // Pushing along the tool's y axis (normal to link 2).
            equivalent_lever_lengths(model, q, ForceDirection::make(ForceDirection::Frame::Tool, {0, 1, 0}), lever);
            CHECK(lever[0] == Approx(std::abs(l1 * std::cos(q2) + l2)).margin(1e-12));
            CHECK(lever[1] == Approx(l2).margin(1e-12));
            // A force normal to the plane of motion cannot turn the joints.
            equivalent_lever_lengths(model, q, ForceDirection::make(ForceDirection::Frame::Base, {0, 0, 1}), lever);
            CHECK(lever[0] == Approx(0.0).margin(1e-12));
        }
    }
}

TEST_CASE("lever lengths of a 6-axis arm equal the torque about each joint axis per newton", "[kinematics][lever]") {
    const DhModel model = ur5e_like();
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> angle(-M_PI, M_PI);
    std::vector<double> lever(6);
    std::array<Eigen::Isometry3d, 8> frames;
    for (int trial = 0; trial < 300; ++trial) {
        std::vector<double> q(6);
        for (auto& v : q) v = angle(rng);
        model.forward(q, frames);
        const Eigen::Vector3d tip = frames[7].translation();
        const Eigen::Vector3d f_base(0.3, -0.5, -0.8);
        const Eigen::Vector3d f_tool_dir(0.1, 0.2, 1.0);
        equivalent_lever_lengths(model, q, ForceDirection::make(ForceDirection::Frame::Base, f_base), lever);
        for (std::size_t o = 0; o < 6; ++o) {
            const Eigen::Vector3d axis = frames[o].linear().col(2);
            const double torque = axis.dot((tip - frames[o].translation()).cross(f_base.normalized()));
            CHECK(lever[o] == Approx(std::abs(torque)).margin(1e-12));
        }
        equivalent_lever_lengths(model, q, ForceDirection::make(ForceDirection::Frame::Tool, f_tool_dir), lever);
        const Eigen::Vector3d f_in_base = frames[7].linear() * f_tool_dir.normalized();
        for (std::size_t o = 0; o < 6; ++o) {
            const Eigen::Vector3d axis = frames[o].linear().col(2);
            CHECK(lever[o] == Approx(std::abs(axis.dot((tip - frames[o].translation()).cross(f_in_base)))).margin(1e-12));
        }
    }
}

TEST_CASE("a zero force direction is refused with the offending vector", "[kinematics][lever]") {
    CHECK_THROWS_WITH(ForceDirection::make(ForceDirection::Frame::Base, {0, 0, 0}), Catch::Contains("(0, 0, 0)"));
}

TEST_CASE("kinematic models round-trip through JSON and bad rows are named", "[kinematics]") {
    const DhModel model = ur5e_like();
    const DhModel back = dh_model_from_json(to_json(model));
    const std::vector<double> q{0.1, -0.7, 1.2, 0.4, -0.3, 2.0};
    CHECK((back.tool_pose(q).matrix() - model.tool_pose(q).matrix()).norm() < 1e-12);

    nlohmann::json bad = to_json(model);
    bad["joints"][2]["type"] = "spherical";
    CHECK_THROWS_WITH(dh_model_from_json(bad), Catch::Contains("joints[2].type 'spherical'"));
    bad = to_json(model);
    bad["joints"][1]["a"] = "long";
    CHECK_THROWS_WITH(dh_model_from_json(bad), Catch::Contains("joints[1].a must be a number"));
}
