#include "config.hpp"

#include <charconv>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "warpguard/json_file.hpp"

namespace warpguard::daemon {

std::string to_string(Mode mode) {
    switch (mode) {
        case Mode::Idle: return "idle";
        case Mode::Record: return "record";
        case Mode::Shadow: return "shadow";
        case Mode::Detect: return "detect";
    }
    return "idle";
}

Mode parse_mode(const std::string& text) {
    if (text == "idle") return Mode::Idle;
    if (text == "record") return Mode::Record;
    if (text == "shadow") return Mode::Shadow;
    if (text == "detect") return Mode::Detect;
    throw std::invalid_argument(fmt::format("mode '{}' is not one of idle, record, shadow, detect", text));
}

std::string Endpoint::text() const { return fmt::format("{}:{}", address, port); }

Endpoint parse_endpoint(const std::string& text) {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
        throw std::invalid_argument(fmt::format("address '{}' is not HOST:PORT", text));
    }
    Endpoint e;
    e.address = text.substr(0, colon);
    const std::string port = text.substr(colon + 1);
    unsigned value = 0;
    const auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || p != port.data() + port.size() || value > 65535) {
        throw std::invalid_argument(fmt::format("port '{}' of '{}' is not a number 0-65535", port, text));
    }
    e.port = static_cast<std::uint16_t>(value);
    return e;
}

namespace {

protocol::Vendor parse_vendor(const std::string& text) {
    if (text == "ur") return protocol::Vendor::UR;
    if (text == "abb") return protocol::Vendor::ABB;
    if (text == "denso") return protocol::Vendor::Denso;
    throw std::invalid_argument(fmt::format("vendor '{}' is not one of ur, abb, denso", text));
}

bool valid_id(const std::string& id) {
    if (id.empty() || id.size() > 32) return false;
    for (char c : id) {
        const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
        if (!ok) return false;
    }
    return true;
}

template <typename T>
T get(const nlohmann::json& j, const char* key, const std::string& where, T fallback) {
    if (!j.contains(key)) return fallback;
    try {
        return j.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
        throw std::invalid_argument(fmt::format("{}: key '{}' has the wrong type (got {})", where, key, j.at(key).dump()));
    }
}

}  // namespace

nlohmann::json to_json(const RobotConfig& r) {
    return {{"id", r.id},
            {"address", r.address},
            {"vendor", protocol::to_string(r.vendor)},
            {"signal", to_string(r.signal)},
            {"unit", to_string(r.unit)},
            {"joints", r.joints},
            {"profile", r.profile},
            {"mode", to_string(r.mode)},
            {"robot_starts_recording", r.robot_starts_recording},
            {"payload", r.payload},
            {"override", r.speed_override},
            {"linear", protocol::linear_joints(r.linear)}};
}

RobotConfig robot_config_from_json(const nlohmann::json& j, const std::string& where) {
    if (!j.is_object()) throw std::invalid_argument(fmt::format("{}: a robot must be an object (got {})", where, j.dump()));
    RobotConfig r;
    r.id = get<std::string>(j, "id", where, "");
    if (!valid_id(r.id)) {
        throw std::invalid_argument(
            fmt::format("{}: robot id '{}' must be 1-32 characters A-Z a-z 0-9 - _ .", where, r.id));
    }
    const std::string at = fmt::format("{} (robot '{}')", where, r.id);
    try {
        r.address = get<std::string>(j, "address", at, r.address);
        r.vendor = parse_vendor(get<std::string>(j, "vendor", at, "ur"));
        r.signal = parse_signal_kind(get<std::string>(j, "signal", at, "torque"));
        r.unit = parse_signal_unit(get<std::string>(j, "unit", at, r.signal == SignalKind::Torque ? "Nm" : "A"));
        r.joints = get<std::size_t>(j, "joints", at, 6);
        if (r.joints < 1 || r.joints > protocol::kMaxJoints) {
            throw std::invalid_argument(fmt::format("joints {} is not in 1-{}", r.joints, protocol::kMaxJoints));
        }
        r.profile = get<std::string>(j, "profile", at, "");
        r.mode = parse_mode(get<std::string>(j, "mode", at, "idle"));
        if (r.mode == Mode::Record) throw std::invalid_argument("mode 'record' cannot be a start mode; use idle, shadow or detect");
        r.robot_starts_recording = get<bool>(j, "robot_starts_recording", at, false);
        r.payload = get<bool>(j, "payload", at, false);
        r.speed_override = get<bool>(j, "override", at, false);
        for (const std::size_t joint : get<std::vector<std::size_t>>(j, "linear", at, {})) {
            if (joint < 1 || joint > r.joints || ((r.linear >> (joint - 1)) & 1U)) {
                throw std::invalid_argument(fmt::format("linear joint {} is not one of joints 1-{} (or is listed twice)", joint, r.joints));
            }
            r.linear |= 1U << (joint - 1);
        }
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        if (what.rfind(at, 0) == 0) throw;
        throw std::invalid_argument(fmt::format("{}: {}", at, what));
    }
    return r;
}

DaemonConfig config_from_json(const nlohmann::json& j, const std::string& where) {
    if (!j.is_object()) throw std::invalid_argument(fmt::format("{}: the configuration must be a JSON object", where));
    static const char* known[] = {"robot_listen", "control_listen", "token", "token_file", "data_dir", "deadline_ms",
                                  "resume_grace_s", "idle_timeout_s", "io_threads", "robot_thread_priority", "lock_memory", "robots"};
    for (const auto& [key, value] : j.items()) {
        bool ok = false;
        for (const char* k : known) ok = ok || key == k;
        if (!ok) throw std::invalid_argument(fmt::format("{}: unknown key '{}'", where, key));
    }
    DaemonConfig c;
    c.path = where;
    try {
        c.robots = parse_endpoint(get<std::string>(j, "robot_listen", where, c.robots.text()));
        c.control = parse_endpoint(get<std::string>(j, "control_listen", where, c.control.text()));
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(fmt::format("{}: {}", where, e.what()));
    }
    c.token = get<std::string>(j, "token", where, "");
    const std::string token_file = get<std::string>(j, "token_file", where, "");
    if (!token_file.empty()) {
        std::ifstream in(token_file);
        if (!in) throw std::invalid_argument(fmt::format("{}: token_file '{}' cannot be read", where, token_file));
        std::getline(in, c.token);
    }
    if (c.token.size() < 8) {
        throw std::invalid_argument(fmt::format("{}: the control token must have at least 8 characters (got {})", where, c.token.size()));
    }
    c.data_dir = get<std::string>(j, "data_dir", where, c.data_dir);
    c.deadline_ms = get<double>(j, "deadline_ms", where, c.deadline_ms);
    c.resume_grace_s = get<double>(j, "resume_grace_s", where, c.resume_grace_s);
    c.idle_timeout_s = get<double>(j, "idle_timeout_s", where, c.idle_timeout_s);
    c.io_threads = get<std::size_t>(j, "io_threads", where, 0);
    c.robot_thread_priority = get<int>(j, "robot_thread_priority", where, c.robot_thread_priority);
    c.lock_memory = get<bool>(j, "lock_memory", where, c.lock_memory);
    if (c.robot_thread_priority < 0 || c.robot_thread_priority > 99) {
        throw std::invalid_argument(fmt::format("{}: robot_thread_priority must be 0 (normal scheduling) or a SCHED_FIFO priority 1-99, got {}",
                                                where, c.robot_thread_priority));
    }
    if (c.deadline_ms < 0 || c.resume_grace_s < 0 || c.idle_timeout_s <= 0) {
        throw std::invalid_argument(fmt::format("{}: deadline_ms and resume_grace_s must be >= 0, idle_timeout_s > 0", where));
    }
    if (j.contains("robots")) {
        if (!j.at("robots").is_array()) throw std::invalid_argument(fmt::format("{}: 'robots' must be an array", where));
        for (std::size_t k = 0; k < j.at("robots").size(); ++k) {
            c.robots_list.push_back(robot_config_from_json(j.at("robots")[k], fmt::format("{}: robots[{}]", where, k)));
            for (std::size_t i = 0; i + 1 < c.robots_list.size(); ++i) {
                if (c.robots_list[i].id == c.robots_list.back().id) {
                    throw std::invalid_argument(fmt::format("{}: robot id '{}' appears twice", where, c.robots_list.back().id));
                }
            }
        }
    }
    return c;
}

DaemonConfig load_config(const std::string& path) {
    const nlohmann::json j = read_json_file(path, "configuration file");
    try {
        return config_from_json(j, path);
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error(e.what());
    }
}

}  // namespace warpguard::daemon
