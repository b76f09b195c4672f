#include "live_robot.hpp"

#include "reply_timing.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/time.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <cmath>

#include <fmt/format.h>

namespace warpguard::sim {

using Clock = std::chrono::steady_clock;

protocol::Handshake vendor_handshake(protocol::Vendor vendor, const std::string& robot_id, const RobotDescription& robot) {
    protocol::Handshake h;
    h.robot_id = robot_id;
    h.vendor = vendor;
    h.signal = robot.signal;
    h.unit = robot.unit;
    h.joints = robot.dof();
    for (std::size_t j = 0; j < h.joints; ++j) {
        if (robot.kinematics.joints()[j].type == JointType::Prismatic) h.linear |= 1U << j;
    }
    switch (vendor) {
        case protocol::Vendor::UR:
            h.angles = protocol::AngleUnit::Rad;
            h.period = 0.002;
            h.timeout = 0.020;
            h.framing = protocol::Framing::Ascii;
            break;
        case protocol::Vendor::ABB:
            h.angles = protocol::AngleUnit::Deg;
            h.period = 0.004;
            h.timeout = 0.150;
            h.framing = protocol::Framing::Binary;
            break;
        case protocol::Vendor::Denso:
            h.angles = protocol::AngleUnit::Deg;
            h.period = 0.008;
            h.timeout = 0.150;
            h.framing = protocol::Framing::Ascii;
            break;
    }
    return h;
}

LiveRobot::LiveRobot(LiveOptions options) : options_(std::move(options)) {}

LiveRobot::~LiveRobot() { disconnect(); }

void LiveRobot::disconnect() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    line_.clear();
}

bool LiveRobot::connect_now() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(options_.host.c_str(), std::to_string(options_.port).c_str(), &hints, &found) != 0 || !found) return false;
    int fd = ::socket(found->ai_family, SOCK_STREAM, 0);
    bool ok = fd >= 0;
    if (ok) {
        const int flags = ::fcntl(fd, F_GETFL, 0);
        ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
        int rc = ::connect(fd, found->ai_addr, found->ai_addrlen);
        if (rc < 0 && errno == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            rc = ::poll(&p, 1, static_cast<int>(options_.connect_timeout * 1000)) == 1 ? 0 : -1;
            int error = 0;
            socklen_t len = sizeof error;
            if (rc == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0 || error != 0)) rc = -1;
        }
        ok = rc == 0;
        if (ok) {
            ::fcntl(fd, F_SETFL, flags);
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            protocol::enable_arrival_times(fd);  // the deadline is judged on each reply's arrival time ...
            send_stamps_ = protocol::enable_send_times(fd);  // ... from the transmit time of the sample's bytes
        } else {
            ::close(fd);
        }
    }
    ::freeaddrinfo(found);
    if (!ok) {
        ++failed_connects_;
        return false;
    }
    fd_ = fd;
    ++connections_;
    bytes_sent_ = 0;
    const std::string hello = protocol::encode_handshake(options_.handshake);
    handshake_key_ = send_counted(hello);
    if (handshake_key_ < 0) {
        disconnect();
        return false;
    }
    return true;
}

std::int64_t LiveRobot::send_counted(const std::string& bytes) {
    if (::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) return -1;
    bytes_sent_ += static_cast<std::uint32_t>(bytes.size());
    return static_cast<std::int64_t>(static_cast<std::uint32_t>(bytes_sent_ - 1));
}

using protocol::realtime_now;

// The robot's controller runs its timeout in real time; this process does not (it shares the PC
// with the daemon and the physics). So the deadline is judged on the kernel's arrival time of the
// reply, not on when this thread happened to wake up: a reply that arrived in time is in time even
// if the simulator was descheduled, and one that arrived late is late even if it was read at once.
// The timeout starts when the kernel transmitted the sample's last byte: a real controller's task
// sends in real time, and a simulator descheduled on its way into send() (measured: send() returning
// 11-29 ms after it was called on a busy 2-core VM) has not yet given the PC anything to answer.
std::optional<protocol::Reply> LiveRobot::read_reply(double timeout_s, bool& malformed, double sent_rt, std::int64_t key) {
    malformed = false;
    lost_ = false;
    late_arrival_rt_ = 0;
    if (sent_rt <= 0) sent_rt = realtime_now();
    // The transmit stamp is queued by the time the reply can arrive (the reply answers those bytes);
    // looked up when it is needed, and kept once found.
    bool stamped = false;
    auto timeout_from = [&] {
        if (!stamped && send_stamps_ && key >= 0) {
            double tx = 0;
            if (protocol::sent_time(fd_, static_cast<std::uint32_t>(key), tx)) {
                stamped = true;
                sent_rt = std::max(sent_rt, tx);
            }
        }
        last_sent_rt_ = sent_rt;
        return sent_rt;
    };
    timeout_from();
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    const bool ascii = options_.handshake.vendor == protocol::Vendor::Denso;
    char bytes[4];
    std::size_t have = 0;
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
        if (left > 0) {
            pollfd p{fd_, POLLIN, 0};
            const int rc = ::poll(&p, 1, static_cast<int>((left + 999) / 1000));
            if (rc < 0 && errno == EINTR) continue;
        }
        // Whatever is there now (also after the poll timed out: it may have come while this thread waited to run).
        double arrival = 0;
        const ssize_t n = ascii ? protocol::receive_stamped(fd_, line_buffer_, 1, MSG_DONTWAIT, arrival)
                                 : protocol::receive_stamped(fd_, bytes + have, 4 - have, MSG_DONTWAIT, arrival);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            lost_ = true;
            return std::nullopt;
        }
        if (n < 0) {
            if (left <= 0 || Clock::now() >= deadline) return std::nullopt;  // nothing came in time
            continue;
        }
        if (arrival > timeout_from() + timeout_s) {  // it came, but after the robot's timeout
            late_arrival_rt_ = arrival;
            return std::nullopt;
        }
        last_arrival_rt_ = arrival;
        if (ascii) {
            const char c = line_buffer_[0];
            if (c == '\n') {
                const std::string text = line_;
                line_.clear();
                if (text == "0") return protocol::Reply::Continue;
                malformed = text != "1";
                return protocol::Reply::Stop;
            }
            if (line_.size() < 16) line_ += c;
        } else {
            have += static_cast<std::size_t>(n);
            if (have == 4) {
                const std::uint32_t v = (std::uint32_t(static_cast<unsigned char>(bytes[0])) << 24) |
                                        (std::uint32_t(static_cast<unsigned char>(bytes[1])) << 16) |
                                        (std::uint32_t(static_cast<unsigned char>(bytes[2])) << 8) | static_cast<unsigned char>(bytes[3]);
                if (v == 0) return protocol::Reply::Continue;
                malformed = v != 1;
                return protocol::Reply::Stop;
            }
        }
    }
}

std::optional<protocol::Reply> LiveRobot::handshake_reply() {
    if (fd_ < 0) return std::nullopt;
    bool malformed = false;
    return read_reply(options_.handshake.timeout, malformed, 0, handshake_key_);
}

std::optional<protocol::Reply> LiveRobot::exchange(const std::string& line) {
    if (fd_ < 0) return std::nullopt;
    const double sent_rt = realtime_now();
    const std::int64_t key = send_counted(line);
    if (key < 0) {
        disconnect();
        return std::nullopt;
    }
    bool malformed = false;
    return read_reply(options_.handshake.timeout, malformed, sent_rt, key);
}

void LiveRobot::hold(double t, const std::string& reason) {
    if (held_) return;
    held_ = true;
    const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    stops_.push_back({t, reason, wall});
}

Reply LiveRobot::on_sample(const Sample& s) {
    // Pace the simulation to the wall clock (the robot's controller runs in real time).
    if (!started_) {
        started_ = true;
        wall0_ = Clock::now();
        t0_ = s.t;
    }
    const auto due = wall0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>((s.t - t0_) / options_.speed));
    std::this_thread::sleep_until(due);

    const bool was_held = held_;
    if (fd_ < 0) {
        if (Clock::now() >= next_attempt_) {
            next_attempt_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.reconnect_interval));
            if (connect_now()) {
                bool malformed = false;
                const auto r = read_reply(options_.handshake.timeout, malformed, 0, handshake_key_);
                if (!r) {
                    self_stop_ = true;
                    hold(s.t, "no reply to the handshake");
                    disconnect();
                } else if (*r == protocol::Reply::Stop) {
                    hold(s.t, malformed ? "unknown reply to the handshake" : "STOP reply to the handshake");
                }
                // A CONTINUE to the handshake does not release a held robot (PROTOCOL.md §3).
            }
        }
        if (fd_ < 0 && !held_) {
            // No link (at start or lost): the robot must not move unwatched.
            self_stop_ = true;
            hold(s.t, "no connection to the PC");
        }
    }
    if (fd_ >= 0) {
        protocol::SampleFrame f;
        f.seq = seq_;
        f.cycle = s.cycle;
        f.mode = (held_ ? 1u : 0u) | (self_stop_ ? 2u : 0u);
        if (options_.record_request_to > 0 && s.cycle >= options_.record_request_from && s.cycle < options_.record_request_to) f.mode |= 4u;
        f.t = s.t;
        f.joints = s.tau.size();
        // The ASCII encoder converts rad (m) to the handshake's units itself; the binary frame carries what
        // RAPID reads from CJointT: degrees (mm for a linear axis).
        const bool binary = options_.handshake.framing == protocol::Framing::Binary;
        const protocol::PositionUnits units = options_.handshake.positions();
        for (std::size_t j = 0; j < f.joints; ++j) {
            f.signal[j] = s.tau[j];
            f.angle[j] = binary ? s.q[j] / units.to_si(j) : s.q[j];
        }
        // With the handshake's `payload` option: what the task program declared (as the vendor
        // scripts send it); 0 when the cell does not know it.
        if (options_.handshake.payload) f.payload = std::isfinite(s.payload) ? s.payload : 0.0;
        // With the handshake's `override` option: the override the controller reports (the cell
        // reports it when its options say so; 100 % otherwise, the slider's default).
        if (options_.handshake.speed_override) f.speed_override = std::isfinite(s.speed_override) ? s.speed_override : 1.0;
        const std::string bytes = options_.handshake.framing == protocol::Framing::Binary ? protocol::encode_sample_binary(f)
                                                                                          : protocol::encode_sample_ascii(f, units);
        seq_ = options_.handshake.framing == protocol::Framing::Binary ? seq_ + 1 : (seq_ + 1) & 0x7fffffffu;
        const double sent_rt = realtime_now();
        const std::int64_t key = send_counted(bytes);
        const bool sent_all = key >= 0;
        const double send_returned_rt = realtime_now();
        if (!sent_all) {
            self_stop_ = true;
            hold(s.t, "connection lost");
            disconnect();
        } else {
            ++sent_;
            bool malformed = false;
            const auto r = read_reply(options_.handshake.timeout, malformed, sent_rt, key);
            const double timed_from = last_sent_rt_;  // the sample's transmit time where the kernel stamped it
            if (!r) {
                self_stop_ = true;
                if (lost_) {
                    hold(s.t, "connection lost");
                } else {
                    ++timeouts_;
                    hold(s.t, fmt::format("no reply within {:.0f} ms", options_.handshake.timeout * 1e3));
                    // Diagnosis only (the robot is already held): did the reply come late, or never?
                    double arrived = late_arrival_rt_;
                    bool late_malformed = false;
                    if (arrived <= 0 && read_reply(0.5, late_malformed, sent_rt)) arrived = last_arrival_rt_;
                    std::fprintf(stderr, "warpguard-sim: t=%.3f s seq %lld: no reply within %.0f ms; %s\n", s.t, static_cast<long long>(f.seq),
                                 options_.handshake.timeout * 1e3,
                                 arrived > 0 ? fmt::format("it arrived {:.1f} ms after the sample was sent ({}; send() was called "
                                                           "{:.1f} ms before that and returned {:.1f} ms after it)",
                                                           (arrived - timed_from) * 1e3,
                                                           send_stamps_ ? "the kernel's transmit time" : "no transmit stamps: the time send() was called",
                                                           (timed_from - sent_rt) * 1e3, (send_returned_rt - sent_rt) * 1e3)
                                                   .c_str()
                                             : "none arrived within 500 ms either");
                }
                disconnect();  // a late reply would be taken for the next sample's: start over
            } else {
                latencies_.push_back(last_arrival_rt_ - timed_from);  // transmit -> arrival at the robot's socket
                if (*r == protocol::Reply::Continue) {
                    if (held_) {
                        held_ = false;
                        self_stop_ = false;
                        resumes_.push_back(s.t);
                    }
                } else {
                    hold(s.t, malformed ? "reply that is not part of the protocol" : "STOP reply");
                }
            }
        }
    }
    held_after_.push_back(held_ ? 1 : 0);
    if (held_ && !was_held) return Reply::Stop;
    if (!held_ && was_held) return Reply::Resume;
    return held_ ? Reply::Stop : Reply::Continue;
}

}  // namespace warpguard::sim
