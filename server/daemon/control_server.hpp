// The control API of warpguardd: newline-delimited JSON over TCP (bound to loopback by default),
// the first message carries the token. Used by warpguard-panel and `warpguard ctl`. The messages
// are listed in docs/control-api.md.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it
#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "registry.hpp"

namespace warpguard::daemon {

struct DaemonContext {
    Registry& registry;
    Store& store;
    SessionSettings settings;
    std::string token;
    std::uint16_t robot_port = 0;
    // Creates a session for a robot added through the API (wires the event callback).
    std::function<std::shared_ptr<RobotSession>(const RobotConfig&)> make_session;
};

class ControlConnection;

class ControlServer {
public:
    ControlServer(boost::asio::io_context& io, const Endpoint& listen, DaemonContext& context);
    std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
    // Sends an event to every subscribed client (any thread).
    void publish_event(const nlohmann::json& event);
    void stop();

private:
    void accept();
    boost::asio::io_context& io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    DaemonContext& context_;
    std::mutex mutex_;
    std::vector<std::weak_ptr<ControlConnection>> connections_;
};

// Handles one request (already authenticated); exposed for tests of the command set.
nlohmann::json handle_command(DaemonContext& context, const nlohmann::json& request);

}  // namespace warpguard::daemon
