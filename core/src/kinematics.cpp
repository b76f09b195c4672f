#include "warpguard/kinematics.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "warpguard/json_file.hpp"
#include <nlohmann/json.hpp>

namespace warpguard {

DhModel::DhModel(std::vector<DhJoint> joints, Eigen::Isometry3d tool, Eigen::Isometry3d base)
    : joints_(std::move(joints)), tool_(tool), base_(base) {
    if (joints_.empty() || joints_.size() > kMaxDhJoints) {
        throw std::invalid_argument(fmt::format("a DH model needs 1 to {} joints, got {}", kMaxDhJoints, joints_.size()));
    }
}

Eigen::Isometry3d DhModel::link_transform(std::size_t i, double qi) const {
    const DhJoint& p = joints_[i];
    const double theta = p.type == JointType::Revolute ? p.theta + qi : p.theta;
    const double d = p.type == JointType::Prismatic ? p.d + qi : p.d;
    const double ct = std::cos(theta), st = std::sin(theta);
    const double ca = std::cos(p.alpha), sa = std::sin(p.alpha);
    Eigen::Isometry3d h = Eigen::Isometry3d::Identity();
    // (40): the (1,3) entry is sin(theta) sin(alpha); (15) misprints it as sin(theta) cos(alpha).
    h.matrix() << ct, -st * ca, st * sa, p.a * ct,  //
        st, ct * ca, -ct * sa, p.a * st,            //
        0.0, sa, ca, d,                              //
        0.0, 0.0, 0.0, 1.0;
    return h;
}

void DhModel::forward(std::span<const double> q, std::span<Eigen::Isometry3d> frames) const {
    if (q.size() < dof() || frames.size() < dof() + 2) {
        throw std::invalid_argument(fmt::format("forward kinematics needs {} joint values and {} frames, got {} and {}",
                                                dof(), dof() + 2, q.size(), frames.size()));
    }
    frames[0] = base_;
    for (std::size_t i = 0; i < dof(); ++i) frames[i + 1] = frames[i] * link_transform(i, q[i]);
    frames[dof() + 1] = frames[dof()] * tool_;
}

Eigen::Isometry3d DhModel::tool_pose(std::span<const double> q) const {
    std::array<Eigen::Isometry3d, kMaxDhJoints + 2> frames;
    forward(q, std::span(frames).first(dof() + 2));
    return frames[dof() + 1];
}

namespace {

nlohmann::json isometry_json(const Eigen::Isometry3d& t) {
    nlohmann::json rotation = nlohmann::json::array();
    for (int r = 0; r < 3; ++r) rotation.push_back({t.linear()(r, 0), t.linear()(r, 1), t.linear()(r, 2)});
    return {{"translation", {t.translation().x(), t.translation().y(), t.translation().z()}}, {"rotation", rotation}};
}

// {"translation": [x, y, z], "rotation": 3x3}, both optional; `name` is used in messages.
Eigen::Isometry3d isometry_from_json(const nlohmann::json& t, const std::string& name) {
    Eigen::Isometry3d out = Eigen::Isometry3d::Identity();
    if (!t.is_object()) throw std::invalid_argument(fmt::format("{} must be an object, got {}", name, t.dump()));
    if (t.contains("translation")) {
        const auto& v = t.at("translation");
        if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() || !v[2].is_number()) {
            throw std::invalid_argument(fmt::format("{}.translation must be [x, y, z] in m, got {}", name, v.dump()));
        }
        out.translation() = Eigen::Vector3d(v[0].get<double>(), v[1].get<double>(), v[2].get<double>());
    }
    if (t.contains("rotation")) {
        const auto& r = t.at("rotation");
        if (!r.is_array() || r.size() != 3) throw std::invalid_argument(fmt::format("{}.rotation must be a 3x3 matrix (3 rows)", name));
        Eigen::Matrix3d rot;
        for (int a = 0; a < 3; ++a) {
            if (!r[a].is_array() || r[a].size() != 3) {
                throw std::invalid_argument(fmt::format("{}.rotation row {} must have 3 numbers, got {}", name, a, r[a].dump()));
            }
            for (int b = 0; b < 3; ++b) {
                if (!r[a][b].is_number()) {
                    throw std::invalid_argument(fmt::format("{}.rotation[{}][{}] must be a number, got {}", name, a, b, r[a][b].dump()));
                }
                rot(a, b) = r[a][b].get<double>();
            }
        }
        if ((rot.transpose() * rot - Eigen::Matrix3d::Identity()).norm() > 1e-6 || rot.determinant() < 0) {
            throw std::invalid_argument(fmt::format("{}.rotation is not a rotation matrix (R^T R != I or det < 0)", name));
        }
        out.linear() = rot;
    }
    return out;
}

}  // namespace

nlohmann::json to_json(const DhModel& model) {
    nlohmann::json joints = nlohmann::json::array();
    for (const auto& p : model.joints()) {
        joints.push_back({{"type", p.type == JointType::Revolute ? "revolute" : "prismatic"},
                          {"a", p.a},
                          {"alpha", p.alpha},
                          {"d", p.d},
                          {"theta", p.theta}});
    }
    nlohmann::json out = {{"joints", joints}, {"tool", isometry_json(model.tool())}};
    if (model.base().matrix() != Eigen::Matrix4d::Identity()) out["base"] = isometry_json(model.base());
    return out;
}

namespace {

double number_field(const nlohmann::json& obj, const char* key, const std::string& where, double fallback) {
    if (!obj.contains(key)) return fallback;
    const auto& v = obj.at(key);
    if (!v.is_number()) throw std::invalid_argument(fmt::format("{}.{} must be a number, got {}", where, key, v.dump()));
    return v.get<double>();
}

}  // namespace

DhModel dh_model_from_json(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("joints") || !j.at("joints").is_array()) {
        throw std::invalid_argument("a kinematic model needs an array 'joints' of DH rows");
    }
    std::vector<DhJoint> joints;
    for (std::size_t i = 0; i < j.at("joints").size(); ++i) {
        const auto& row = j.at("joints")[i];
        const std::string where = fmt::format("joints[{}]", i);
        if (!row.is_object()) throw std::invalid_argument(fmt::format("{} must be an object, got {}", where, row.dump()));
        DhJoint p;
        const std::string type = row.value("type", "revolute");
        if (type == "revolute") {
            p.type = JointType::Revolute;
        } else if (type == "prismatic") {
            p.type = JointType::Prismatic;
        } else {
            throw std::invalid_argument(fmt::format("{}.type '{}' is not known; expected revolute or prismatic", where, type));
        }
        p.a = number_field(row, "a", where, 0.0);
        p.alpha = number_field(row, "alpha", where, 0.0);
        p.d = number_field(row, "d", where, 0.0);
        p.theta = number_field(row, "theta", where, 0.0);
        joints.push_back(p);
    }
    Eigen::Isometry3d tool = Eigen::Isometry3d::Identity();
    if (j.contains("tool") && !j.at("tool").is_null()) tool = isometry_from_json(j.at("tool"), "tool");
    Eigen::Isometry3d base = Eigen::Isometry3d::Identity();
    if (j.contains("base") && !j.at("base").is_null()) base = isometry_from_json(j.at("base"), "base");
    return DhModel(std::move(joints), tool, base);
}

DhModel load_dh_model(const std::string& path) {
    return load_json_file(path, "kinematic model", [](const nlohmann::json& j) { return dh_model_from_json(j); });
}

}  // namespace warpguard
