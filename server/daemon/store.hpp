// warpguardd's persistent store: one SQLite file (WAL journal) with the robots added through the
// control API, each robot's mode and stop latch, recordings' metadata (the samples are CSV files
// beside it), profiles and events. Every write is its own transaction: once a call returns, the record
// survives a crash of the daemon (kill -9); synchronous=NORMAL in WAL mode risks only the last
// transactions on a power loss of the whole PC. Thread-safe (one connection behind a mutex).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

struct sqlite3;

namespace warpguard::daemon {

struct EventRecord {
    std::string robot;
    std::string kind;    // stop, would_stop, fault, resume, mode, connect, disconnect, refused, gap, recording, profile
    std::string reason;  // one line a person can read
    std::int64_t seq = -1;
    std::int64_t cycle = -1;
    int joint = 0;       // 1-based, 0 = none
    std::string rule;
    double value = 0.0;
    double threshold = 0.0;
    nlohmann::json evidence;  // null or the window / matched span / rule values
};

struct RobotState {
    std::string robot;
    std::string mode = "idle";
    bool latched = false;
    std::string reason;
    std::int64_t profile_id = 0;  // 0 = none
};

class StoreError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Store {
public:
    explicit Store(const std::string& path);  // creates the file and schema; throws StoreError
    ~Store();
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    const std::string& path() const { return path_; }

    // Events: returns the new id; the JSON forms carry every column (evidence only in event()).
    std::int64_t add_event(const EventRecord& e);
    nlohmann::json events(const std::string& robot, std::int64_t after_id, std::size_t limit, const std::string& kind = "");
    std::optional<nlohmann::json> event(std::int64_t id);

    std::int64_t add_recording(const std::string& robot, const std::string& path, const std::string& started,
                               std::size_t samples, std::size_t complete_cycles);
    nlohmann::json recordings(const std::string& robot);
    std::optional<nlohmann::json> recording(std::int64_t id);

    std::int64_t add_profile(const std::string& robot, std::int64_t recording_id, const nlohmann::json& summary,
                             const std::string& profile_json);
    nlohmann::json profiles(const std::string& robot);
    // Kinematic models identified on the robot (thesis 4.2), newest last.
    std::int64_t add_model(const std::string& robot, const nlohmann::json& model);
    std::optional<nlohmann::json> latest_model(const std::string& robot);
    std::optional<nlohmann::json> model(std::int64_t id);
    std::optional<std::string> profile_json(std::int64_t id, std::string* robot = nullptr);

    void save_state(const RobotState& s);
    std::vector<RobotState> states();

    // Robots added through the control API (the configuration file's robots are not stored).
    void put_robot(const std::string& id, const nlohmann::json& config);
    void remove_robot(const std::string& id);
    std::vector<nlohmann::json> robots();

private:
    void exec(const char* sql);
    std::mutex mutex_;
    sqlite3* db_ = nullptr;
    std::string path_;
};

// UTC time with milliseconds, ISO 8601.
std::string now_iso();

}  // namespace warpguard::daemon
