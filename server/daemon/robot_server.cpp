#include "robot_server.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "listen.hpp"

namespace warpguard::daemon {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// A link's socket and timer run on a strand of their own, named by its concrete type: through the
// type-erased any_io_executor of a plain tcp::socket, Asio built a new heap-allocated copy of the
// strand for every operation's work tracking (two mallocs per sample on the reply path, seen with
// a uprobe on malloc under the load benchmark).
using Strand = asio::strand<asio::io_context::executor_type>;
using Socket = tcp::socket::rebind_executor<Strand>::other;
using Timer = asio::steady_timer::rebind_executor<Strand>::other;

std::string endpoint_text(const Socket& s) {
    boost::system::error_code ec;
    const auto e = s.remote_endpoint(ec);
    return ec ? std::string("unknown") : fmt::format("{}:{}", e.address().to_string(), e.port());
}

// The vendor field of a handshake line that did not parse, if it names one (to answer in its form).
std::optional<protocol::Vendor> vendor_of(std::string_view line) {
    std::size_t field = 0, start = 0;
    for (std::size_t i = 0; i <= line.size(); ++i) {
        if (i == line.size() || line[i] == ';') {
            if (field == 2) {
                const std::string_view v = line.substr(start, i - start);
                if (v == "ur") return protocol::Vendor::UR;
                if (v == "abb") return protocol::Vendor::ABB;
                if (v == "denso") return protocol::Vendor::Denso;
                return std::nullopt;
            }
            ++field;
            start = i + 1;
        }
    }
    return std::nullopt;
}

class RobotLink : public std::enable_shared_from_this<RobotLink> {
public:
    RobotLink(Socket socket, std::uint64_t id, Registry& registry, Store& store, double idle_timeout_s, PostBackground post_background)
        : socket_(std::move(socket)), timer_(socket_.get_executor()), id_(id), registry_(registry), store_(store),
          idle_timeout_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(idle_timeout_s))),
          post_background_(std::move(post_background)) {}

    void start() {
        boost::system::error_code ec;
        socket_.set_option(tcp::no_delay(true), ec);
        remote_ = endpoint_text(socket_);
        last_activity_ = Clock::now();
        spdlog::debug("robot link {}: connection from {}", id_, remote_);
        arm_timer();
        read();
    }

private:
    void read() {
        socket_.async_read_some(asio::buffer(buffer_.data() + fill_, buffer_.size() - fill_),
                                [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                                    self->on_read(ec, n, Clock::now());
                                });
    }

    void arm_timer() {
        timer_.expires_after(idle_timeout_ / 2);
        timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
            if (ec || self->closed_) return;
            if (Clock::now() - self->last_activity_ > self->idle_timeout_) {
                self->close(fmt::format("no data from {} for {:.1f} s", self->remote_,
                                        std::chrono::duration<double>(self->idle_timeout_).count()));
                return;
            }
            self->arm_timer();
        });
    }

    void on_read(const boost::system::error_code& ec, std::size_t n, Clock::time_point received) {
        if (closed_) return;
        if (ec) {
            close(ec == asio::error::eof ? fmt::format("{} closed the connection", remote_)
                                         : fmt::format("connection to {} lost: {}", remote_, ec.message()));
            return;
        }
        last_activity_ = received;
        fill_ += n;
        try {
            process(received);
        } catch (const std::exception& e) {
            // Fail-safe: whatever went wrong, the robot hears STOP.
            if (session_) {
                reply(session_->on_internal_error(id_, e.what()));
                session_->request_flush();
            }
            close(fmt::format("internal error: {}", e.what()));
            return;
        }
        if (!closed_) read();
    }

    void reply(protocol::Reply r) {
        std::array<char, 4> bytes{};
        const std::size_t n = protocol::encode_reply(vendor_, r, bytes);
        boost::system::error_code ec;
        asio::write(socket_, asio::buffer(bytes.data(), n), ec);
        if (ec) spdlog::warn("robot link {} ({}): cannot send the reply: {}", id_, remote_, ec.message());
    }

    void consume(std::size_t n) {
        std::memmove(buffer_.data(), buffer_.data() + n, fill_ - n);
        fill_ -= n;
    }

    void refuse(const std::string& robot, const std::string& reason, std::optional<protocol::Vendor> vendor) {
        if (vendor) {
            vendor_ = *vendor;
            reply(protocol::Reply::Stop);
        }
        spdlog::warn("robot link {}: {}", id_, reason);
        EventRecord e;
        e.robot = robot;
        e.kind = "refused";
        e.reason = reason;
        auto store = [&store = store_, e = std::move(e)] {
            try {
                store.add_event(e);
            } catch (const std::exception& ex) {
                spdlog::error("cannot store the refusal: {}", ex.what());
            }
        };
        if (post_background_) post_background_(std::move(store));
        else store();
        close(reason);
    }

    void handshake() {
        const char* end = static_cast<const char*>(std::memchr(buffer_.data(), '\n', fill_));
        if (!end) {
            if (fill_ > protocol::kMaxLine) refuse("?", fmt::format("handshake from {} is longer than {} bytes", remote_, protocol::kMaxLine), std::nullopt);
            return;
        }
        std::size_t len = static_cast<std::size_t>(end - buffer_.data());
        const std::size_t consumed = len + 1;
        if (len > 0 && buffer_[len - 1] == '\r') --len;
        const std::string line(buffer_.data(), len);
        protocol::Handshake h;
        try {
            h = protocol::parse_handshake(line);
        } catch (const protocol::ProtocolError& e) {
            refuse("?", fmt::format("handshake from {} refused: {}", remote_, e.what()), vendor_of(line));
            return;
        }
        vendor_ = h.vendor;
        auto session = registry_.find(h.robot_id);
        if (!session) {
            refuse(h.robot_id, fmt::format("unknown robot '{}' from {} refused (configured robots: {})", h.robot_id, remote_, registry_.ids()),
                   h.vendor);
            return;
        }
        // The identification procedure's own link carries lines, one reply each; it is never a
        // sample link.
        const bool ident = h.framing == protocol::Framing::Ident;
        const RobotSession::Attach a = ident ? session->attach_identification(id_, h, remote_) : session->attach(id_, h, remote_);
        if (!a.accepted) {
            spdlog::warn("robot link {}: {}", id_, a.reason);
            reply(protocol::Reply::Stop);
            close(a.reason);
            return;
        }
        session_ = std::move(session);
        if (ident) {
            ident_ = true;
        } else {
            decoder_.emplace(h);
        }
        consume(consumed);
        reply(a.reply);
    }

    void process(Clock::time_point received) {
        if (!decoder_ && !ident_) {
            handshake();
            if (!decoder_ && !ident_) return;
        }
        if (ident_) {
            while (fill_ > 0 && !closed_) {
                const char* end = static_cast<const char*>(std::memchr(buffer_.data(), '\n', fill_));
                if (!end) {
                    if (fill_ > protocol::kMaxLine) {
                        reply(protocol::Reply::Stop);
                        close("identification line longer than the limit");
                    }
                    break;
                }
                std::size_t len = static_cast<std::size_t>(end - buffer_.data());
                const std::size_t consumed = len + 1;
                if (len > 0 && buffer_[len - 1] == '\r') --len;
                const protocol::Reply r = session_->on_ident_line(id_, std::string_view(buffer_.data(), len));
                consume(consumed);
                reply(r);
            }
            return;
        }
        while (fill_ > 0 && !closed_) {
            const protocol::DecodeResult r = decoder_->next(std::span<const char>(buffer_.data(), fill_), frame_);
            if (r.status == protocol::Status::Incomplete) {
                if (fill_ == buffer_.size()) {
                    reply(session_->on_malformed(id_, "a frame larger than the receive buffer"));
                    fill_ = 0;
                }
                break;
            }
            if (r.status == protocol::Status::Ok) {
                reply(session_->on_sample(id_, frame_, received));
            } else {
                reply(session_->on_malformed(id_, r.message()));
            }
            consume(std::max<std::size_t>(r.consumed, 1));
        }
        session_->request_flush();
        if (!session_->is_link(id_)) close("replaced by a newer connection of the same robot");
    }

    void close(const std::string& why) {
        if (closed_) return;
        closed_ = true;
        boost::system::error_code ec;
        timer_.cancel();
        socket_.shutdown(tcp::socket::shutdown_both, ec);
        socket_.close(ec);
        if (session_ && ident_) session_->detach_identification(id_, why);
        else if (session_) session_->detach(id_, why);
        else spdlog::info("robot link {} closed: {}", id_, why);
    }

    Socket socket_;
    Timer timer_;
    std::uint64_t id_;
    Registry& registry_;
    Store& store_;
    Clock::duration idle_timeout_;
    Clock::time_point last_activity_;
    std::string remote_;
    std::array<char, 8192> buffer_{};
    std::size_t fill_ = 0;
    protocol::Vendor vendor_ = protocol::Vendor::UR;
    std::optional<protocol::SampleDecoder> decoder_;
    bool ident_ = false;  // an identification procedure's link
    protocol::SampleFrame frame_;
    std::shared_ptr<RobotSession> session_;
    bool closed_ = false;
    PostBackground post_background_;
};

}  // namespace

RobotServer::RobotServer(asio::io_context& io, const Endpoint& listen, Registry& registry, Store& store, double idle_timeout_s,
                         PostBackground post_background)
    : io_(io), acceptor_(open_acceptor(io, listen)), registry_(registry), store_(store), idle_timeout_s_(idle_timeout_s),
      post_background_(std::move(post_background)) {
    accept();
}

void RobotServer::accept() {
    acceptor_.async_accept(asio::make_strand(io_.get_executor()), [this](const boost::system::error_code& ec, Socket socket) {
        if (ec) {
            if (ec != asio::error::operation_aborted) {
                spdlog::error("robot listener: {}", ec.message());
                accept();
            }
            return;
        }
        std::make_shared<RobotLink>(std::move(socket), next_link_++, registry_, store_, idle_timeout_s_, post_background_)->start();
        accept();
    });
}

void RobotServer::stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
}

}  // namespace warpguard::daemon
