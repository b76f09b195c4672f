// A blocking client of warpguardd's control API (newline-delimited JSON over TCP), used by
// `warpguard ctl`, the integration tests and the load benchmark.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace warpguard::cli {

class ControlClient {
public:
    // Connects and says hello with the token; throws std::runtime_error with the daemon's answer.
    ControlClient(const std::string& host, std::uint16_t port, const std::string& token, const std::string& client = "warpguard-cli");
    ~ControlClient();
    ControlClient(const ControlClient&) = delete;
    ControlClient& operator=(const ControlClient&) = delete;

    // Sends a request and returns the answer with the same id (events and feed messages that arrive
    // meanwhile are passed to `on_push` if set, else dropped). Throws on {"ok": false}.
    nlohmann::json call(nlohmann::json request, double timeout_s = 60.0);
    // The next pushed message (event / feed), or nullopt after timeout.
    std::optional<nlohmann::json> next(double timeout_s);

private:
    std::optional<std::string> line(double timeout_s);
    int fd_ = -1;
    std::string buffer_;
    std::int64_t next_id_ = 1;
    std::vector<nlohmann::json> pushed_;
};

}  // namespace warpguard::cli
