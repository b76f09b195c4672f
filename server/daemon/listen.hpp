// An Asio acceptor listening on a configured endpoint (robot links and the control API alike).
#pragma once

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it
#include <boost/asio.hpp>

#include "config.hpp"

namespace warpguard::daemon {

inline boost::asio::ip::tcp::acceptor open_acceptor(boost::asio::io_context& io, const Endpoint& listen) {
    using boost::asio::ip::tcp;
    const tcp::endpoint ep(boost::asio::ip::make_address(listen.address), listen.port);
    tcp::acceptor acceptor(io);
    acceptor.open(ep.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(ep);
    acceptor.listen();
    return acceptor;
}

}  // namespace warpguard::daemon
