// warpguardd's configuration file (JSON). See docs/daemon.md for every key and its default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire_protocol.hpp"
#include "warpguard/recording.hpp"

namespace warpguard::daemon {

enum class Mode { Idle, Record, Shadow, Detect };
std::string to_string(Mode mode);
// Throws std::invalid_argument naming the text and the accepted values.
Mode parse_mode(const std::string& text);

struct Endpoint {
    std::string address = "127.0.0.1";
    std::uint16_t port = 0;
    std::string text() const;
};
// "HOST:PORT"; throws std::invalid_argument naming the text.
Endpoint parse_endpoint(const std::string& text);

struct RobotConfig {
    std::string id;
    std::string address = "any";  // the only address the robot may connect from, or "any"
    protocol::Vendor vendor = protocol::Vendor::UR;
    SignalKind signal = SignalKind::Torque;
    SignalUnit unit = SignalUnit::Nm;
    std::size_t joints = 6;
    std::string profile;          // a profile JSON to activate at start (optional)
    Mode mode = Mode::Idle;       // mode at first start; later the stored mode wins
    bool robot_starts_recording = false;  // mode bit 2 from the robot program starts/stops a recording
    // The robot's task sends the payload its program declares with every sample (handshake option
    // `payload`, PROTOCOL.md §2); recordings then carry it and the default detector expects it.
    bool payload = false;
    // The robot's task sends the controller's speed override with every sample (handshake option
    // `override`, PROTOCOL.md §2); recordings then carry it and the default detector follows its turns.
    bool speed_override = false;
    // Joints that are linear (bit j is joint j + 1; a SCARA's quill): the handshake must declare
    // them (option `linear`, PROTOCOL.md §1) and the kinematic identification takes them as prismatic.
    std::uint32_t linear = 0;
};
nlohmann::json to_json(const RobotConfig& robot);
// Throws std::invalid_argument naming `where`, the key and the value.
RobotConfig robot_config_from_json(const nlohmann::json& j, const std::string& where);

struct DaemonConfig {
    Endpoint robots{"0.0.0.0", 7700};
    Endpoint control{"127.0.0.1", 7701};
    std::string token;             // control API token (or read from token_file)
    std::string data_dir = "/var/lib/warpguard";
    double deadline_ms = 0.0;      // 0: three quarters of the robot's own reply timeout (kDefaultDeadlineShare)
    double resume_grace_s = 0.5;   // after a resume, stops are not applied while the robot accelerates
    double idle_timeout_s = 5.0;   // a robot link without a byte for this long is closed
    std::size_t io_threads = 0;    // 0: one per core
    // SCHED_FIFO priority of the robots' link threads (1-99; 0: normal scheduling). A woken link
    // thread then runs at once instead of waiting behind other programs' time slices: the reply
    // must reach the robot within its timeout (20 ms on a UR). Needs root, CAP_SYS_NICE or
    // LimitRTPRIO (the systemd unit grants it); without, the daemon warns and runs normally.
    int robot_thread_priority = 20;
    bool lock_memory = true;  // mlockall: no page of the daemon is paged out and faulted back in on a robot's reply
    std::vector<RobotConfig> robots_list;
    std::string path;              // where it was read from
};

// Reads and checks the file; throws std::runtime_error "PATH: key 'K' ...".
DaemonConfig load_config(const std::string& path);
DaemonConfig config_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace warpguard::daemon
