// The simulated robot's background task over TCP: it behaves like the vendor scripts in
// robot_scripts/ (handshake, one sample per period in the vendor's framing, a reply within the robot's
// timeout, STOP latched until a CONTINUE after an operator's resume, stop on no reply or lost link,
// reconnect staying stopped) so the daemon side is exercised exactly as a real robot would.
// Blocking POSIX sockets, like the scripts' own calls; the simulation is paced to the wall clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "robot_cell.hpp"
#include "wire_protocol.hpp"

namespace warpguard::sim {

struct LiveOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 7700;
    protocol::Handshake handshake;  // robot id, vendor, signal, unit, joints, period, timeout, framing
    double speed = 1.0;             // simulated seconds per wall-clock second
    double reconnect_interval = 0.5;  // s of wall time between connection attempts
    double connect_timeout = 0.5;     // s
    std::uint32_t record_request_from = 0, record_request_to = 0;  // cycles with mode bit 4 set (0 = never)
};

// Vendor defaults of the scripts: UR 2 ms / 20 ms ASCII, ABB 4 ms / 150 ms binary (angles in
// degrees), Denso 8 ms / 150 ms ASCII (angles in degrees); the robot's prismatic joints declared
// linear (option `linear`, in mm where the angles are in degrees), as the scripts generated for it do.
protocol::Handshake vendor_handshake(protocol::Vendor vendor, const std::string& robot_id, const RobotDescription& robot);

struct LiveStop {
    double t = 0.0;        // robot clock, s
    std::string reason;    // "STOP reply", "no reply within 20 ms", "connection lost", ...
    double wall = 0.0;     // Unix time, s (to compare with events outside the simulation)
};

class LiveRobot {
public:
    explicit LiveRobot(LiveOptions options);
    ~LiveRobot();
    LiveRobot(const LiveRobot&) = delete;
    LiveRobot& operator=(const LiveRobot&) = delete;

    // A request/reply link outside the sample loop (the identification procedure, PROTOCOL.md §5):
    // connect and send the handshake, then one line per call with the reply read exactly as the
    // vendor's script reads it (nullopt: no reply within the handshake's timeout or the link is lost).
    bool open() { return connect_now(); }
    std::optional<protocol::Reply> handshake_reply();
    std::optional<protocol::Reply> exchange(const std::string& line);

    // The cell's per-sample hook.
    Reply on_sample(const Sample& sample);

    bool held() const { return held_; }
    bool connected() const { return fd_ >= 0; }
    // Per sample sent: whether the robot was held after its reply (for the evaluation).
    const std::vector<std::uint8_t>& held_after() const { return held_after_; }
    const std::vector<double>& latencies() const { return latencies_; }  // s, sample transmitted -> reply's arrival at the socket (kernel times)
    const std::vector<LiveStop>& stops() const { return stops_; }
    const std::vector<double>& resumes() const { return resumes_; }
    std::size_t samples_sent() const { return sent_; }
    std::size_t timeouts() const { return timeouts_; }
    std::size_t connections() const { return connections_; }
    std::size_t failed_connects() const { return failed_connects_; }

private:
    bool connect_now();
    void disconnect();
    // Reads the reply of the vendor's form; nullopt on timeout or a lost link. The timeout is judged
    // on the kernel's arrival time of the reply, measured from the kernel's transmit time of the
    // byte range that ended at offset `key` of this connection (when the socket gives such stamps
    // and `key` ≥ 0), else from `sent_rt` (CLOCK_REALTIME; 0: now). `last_sent_rt_` gets the start used.
    std::optional<protocol::Reply> read_reply(double timeout_s, bool& malformed, double sent_rt = 0, std::int64_t key = -1);
    // Sends all of `bytes`; the offset of their last byte on this connection, or -1 if not all went.
    std::int64_t send_counted(const std::string& bytes);
    void hold(double t, const std::string& reason);

    LiveOptions options_;
    int fd_ = -1;
    bool held_ = false;
    bool self_stop_ = false;
    std::uint32_t seq_ = 0;
    std::chrono::steady_clock::time_point wall0_;
    double t0_ = 0.0;
    bool started_ = false;
    std::chrono::steady_clock::time_point next_attempt_{};
    std::vector<std::uint8_t> held_after_;
    std::vector<double> latencies_;
    std::vector<LiveStop> stops_;
    std::vector<double> resumes_;
    std::size_t sent_ = 0, timeouts_ = 0, connections_ = 0, failed_connects_ = 0;
    std::string line_;  // partial Denso reply line
    bool lost_ = false;  // the last read_reply() saw the connection close
    double last_arrival_rt_ = 0;  // kernel receive time of the last reply byte (CLOCK_REALTIME)
    double late_arrival_rt_ = 0;  // ... of a reply that came after the timeout (0: none)
    double last_sent_rt_ = 0;  // when the last read_reply()'s timeout began (kernel transmit time where stamped)
    bool send_stamps_ = false;  // the kernel stamps this connection's transmissions
    std::uint32_t bytes_sent_ = 0;
    std::int64_t handshake_key_ = -1;  // the handshake's last byte (its reply is timed from its transmission)  // bytes sent on this connection (the transmit stamps' key, modulo 2^32)
    char line_buffer_[1] = {};
};

}  // namespace warpguard::sim
