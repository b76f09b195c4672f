// The robots' side of warpguardd: a TCP acceptor and one link per connected robot task, speaking the
// wire protocol (robot_scripts/PROTOCOL.md) through the pure codec. Each link's handlers run on its
// own strand; a sample is decoded, decided and answered inside the read handler, with a synchronous
// write of the 4 (or 2) reply bytes, before anything else happens. Nothing on these threads waits for
// the disk: events and state go to the background thread (`post_background`).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it
#include <boost/asio.hpp>

#include "registry.hpp"

namespace warpguard::daemon {

class RobotServer {
public:
    RobotServer(boost::asio::io_context& io, const Endpoint& listen, Registry& registry, Store& store, double idle_timeout_s,
                PostBackground post_background);
    std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
    void stop();

private:
    void accept();
    boost::asio::io_context& io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    Registry& registry_;
    Store& store_;
    double idle_timeout_s_;
    PostBackground post_background_;
    std::atomic<std::uint64_t> next_link_{1};
};

}  // namespace warpguard::daemon
