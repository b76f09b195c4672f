#include "warpguard/robot_description.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "warpguard/json_file.hpp"

namespace warpguard {

namespace {

double number(const nlohmann::json& obj, const char* key, const std::string& where) {
    if (!obj.contains(key)) throw std::invalid_argument(fmt::format("{}.{} is missing", where, key));
    const auto& v = obj.at(key);
    if (!v.is_number()) throw std::invalid_argument(fmt::format("{}.{} must be a number, got {}", where, key, v.dump()));
    return v.get<double>();
}

double positive(const nlohmann::json& obj, const char* key, const std::string& where, bool allow_zero) {
    const double v = number(obj, key, where);
    if (!(allow_zero ? v >= 0 : v > 0)) {
        throw std::invalid_argument(fmt::format("{}.{} must be {} 0, got {}", where, key, allow_zero ? ">=" : ">", v));
    }
    return v;
}

Eigen::Vector3d vector3(const nlohmann::json& obj, const char* key, const std::string& where) {
    if (!obj.contains(key) || !obj.at(key).is_array() || obj.at(key).size() != 3) {
        throw std::invalid_argument(fmt::format("{}.{} must be an array of 3 numbers", where, key));
    }
    const auto& v = obj.at(key);
    return {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
}

}  // namespace

RobotDescription robot_description_from_json(const nlohmann::json& j) {
    if (!j.is_object()) throw std::invalid_argument("a robot description must be a JSON object");
    RobotDescription r;
    r.name = j.value("name", "");
    if (r.name.empty()) throw std::invalid_argument("robot description has no 'name'");
    r.vendor = j.value("vendor", "");
    r.signal = parse_signal_kind(j.value("signal", "torque"));
    r.unit = parse_signal_unit(j.value("unit", "Nm"));
    r.sources = j.value("sources", "");
    if (!j.contains("joints") || !j.at("joints").is_array() || j.at("joints").empty()) {
        throw std::invalid_argument(fmt::format("robot '{}' needs a non-empty 'joints' array", r.name));
    }
    nlohmann::json kin = {{"joints", nlohmann::json::array()}};
    for (std::size_t i = 0; i < j.at("joints").size(); ++i) {
        const auto& jj = j.at("joints")[i];
        const std::string where = fmt::format("{}.joints[{}]", r.name, i);
        if (!jj.contains("dh")) throw std::invalid_argument(fmt::format("{}.dh is missing", where));
        kin["joints"].push_back(jj.at("dh"));
        LinkDynamics l;
        l.mass = positive(jj, "mass", where, false);
        l.com = vector3(jj, "com", where);
        l.inertia = vector3(jj, "inertia", where);
        if ((l.inertia.array() <= 0).any()) {
            throw std::invalid_argument(fmt::format("{}.inertia must be positive principal moments", where));
        }
        if (!jj.contains("limits") || !jj.at("limits").is_array() || jj.at("limits").size() != 2) {
            throw std::invalid_argument(fmt::format("{}.limits must be [lower, upper] in rad", where));
        }
        l.lower = jj.at("limits")[0].get<double>();
        l.upper = jj.at("limits")[1].get<double>();
        if (!(l.lower < l.upper)) {
            throw std::invalid_argument(fmt::format("{}.limits [{}, {}] must have lower < upper", where, l.lower, l.upper));
        }
        l.rated_torque = positive(jj, "rated_torque", where, false);
        l.gear = positive(jj, "gear", where, false);
        l.viscous = positive(jj, "viscous", where, true);
        l.coulomb = positive(jj, "coulomb", where, true);
        l.armature = jj.contains("armature") ? positive(jj, "armature", where, true) : 0.0;
        l.rated_current = jj.contains("rated_current") ? positive(jj, "rated_current", where, false) : 0.0;
        if (r.signal == SignalKind::Current && r.unit == SignalUnit::A && !(l.rated_current > 0)) {
            throw std::invalid_argument(fmt::format("{}.rated_current (A) is needed for a current signal in A", where));
        }
        l.estimated = jj.value("estimated", std::vector<std::string>{});
        r.links.push_back(l);
    }
    if (j.contains("tool")) kin["tool"] = j.at("tool");
    try {
        r.kinematics = dh_model_from_json(kin);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(fmt::format("robot '{}': {}", r.name, e.what()));
    }
    return r;
}

RobotDescription load_robot_description(const std::string& path) {
    return load_json_file(path, "robot description", [](const nlohmann::json& j) { return robot_description_from_json(j); });
}

}  // namespace warpguard
