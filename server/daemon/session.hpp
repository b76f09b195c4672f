// One configured robot inside warpguardd: its mode, stop latch, profile and detector, recorder,
// connection counters and live feed. The robot link calls on_sample() for every decoded sample and
// writes the returned reply at once; request_flush() then hands the slow part (SQLite, event
// subscribers) to the daemon's background thread, so a robot's thread never waits for a disk. No
// file or database I/O happens while the session's mutex is held (on_sample() takes the same mutex,
// and a reply later than the robot's timeout stops the robot). on_sample() does not allocate:
// events, evidence and the feed go into storage reserved when the session and its profile are set up.
//
// Fail-safe: every doubt answers STOP and latches it (malformed data, DETECT without a profile, a
// missed deadline, an internal error, a robot that comes back already stopped). Only resume()
// (an operator through the control API) releases the latch.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <pthread.h>

#include "config.hpp"
#include "record_writer.hpp"
#include "store.hpp"
#include "warpguard/detector.hpp"
#include "warpguard/identification.hpp"
#include "wire_protocol.hpp"

namespace warpguard::daemon {

// The session's mutex, with priority inheritance: a robot's real-time link thread that waits for it
// lends its priority to the holder (the control API, the feed, a flush: normal or nice-19 threads),
// so a holder preempted by other programs cannot keep the reply waiting for a time slice. Measured
// with std::mutex under CPU and disk load: one reply waited 21 ms for the lock (a UR's timeout is 20 ms).
class PiMutex {
public:
    PiMutex();
    ~PiMutex();
    PiMutex(const PiMutex&) = delete;
    PiMutex& operator=(const PiMutex&) = delete;
    void lock();
    void unlock() noexcept;
    bool try_lock() noexcept;

private:
    pthread_mutex_t m_;
};

// Background work (calibration, identification) runs at normal scheduling with background_nice():
// 19, the lowest, while the robots' link threads run at normal scheduling too, so that on a small
// cell PC it never delays a reply to a robot (a reply later than the robot's timeout stops it); 0
// once they run real-time (set_links_realtime), since SCHED_FIFO threads preempt it anyway. At
// nice 19 beside two busy programs on a 2-core PC it got about 1.5 % of a core: a 0.7 s
// identification took over 15 s and a calibration over 120 s (integration tests beside the
// benchmark suite).
void lower_thread_priority();
void set_links_realtime(bool realtime);
int background_nice();
// The robots' link threads: SCHED_FIFO at `priority` (0: leave as is). Returns an empty string on
// success, else why not.
std::string raise_thread_priority(int priority);

using Clock = std::chrono::steady_clock;

// Mode bits the robot task sends (robot_scripts/PROTOCOL.md §2.1).
inline constexpr std::uint32_t kBitHeld = 1;           // the robot is stopped by WarpGuard
inline constexpr std::uint32_t kBitSelfStop = 2;       // ... because it heard no reply / lost the link
inline constexpr std::uint32_t kBitRecordRequest = 4;  // the robot program asks for a recording

// One decided sample as the live feed shows it.
struct FeedPoint {
    std::uint64_t index = 0;  // running number of the session's samples
    double t = 0.0;
    std::int64_t seq = 0;
    std::int64_t cycle = 0;
    bool stop = false;     // the reply
    bool would_stop = false;  // the detector's own verdict (also in SHADOW and grace)
    std::uint8_t fired = 0;
    std::size_t joints = 0;
    std::array<double, protocol::kMaxJoints> signal{};
    // The reference value paired with the newest sample and the limits the rules allow around it
    // (beyond them the sample is over its threshold), in the units the robot sends
    // (Detector::judged: the measured value less its judged offset, plus the limits' offsets),
    // whatever the detector matches (the arm model's deviation, the payload taken off, KA scaling).
    // NaN where nothing was judged.
    std::array<double, protocol::kMaxJoints> reference{};
    std::array<double, protocol::kMaxJoints> lower{};
    std::array<double, protocol::kMaxJoints> upper{};
    std::array<double, protocol::kMaxJoints> rule1{};      // |deviation|
    std::array<double, protocol::kMaxJoints> rule2{};
    std::array<std::uint32_t, protocol::kMaxJoints> ref_start{};
    std::array<std::uint32_t, protocol::kMaxJoints> ref_end{};
};

// Hands work to the daemon's background thread (SQLite, subscribers), in the order posted.
using PostBackground = std::function<void(std::function<void()>)>;

// The deadline when the configuration sets none, as a share of the robot's own reply timeout. A
// decision's reply only has to reach the robot before the robot stops by itself; the rest of its
// timeout is left for the way there and the robot's read (a cell's LAN: under 1 ms; the script's
// read loop: one robot cycle, 2-4 ms at 250-500 Hz; a quarter of a UR's 20 ms is 5 ms). Until
// 2026-12-04 the share was half: a decision after 10-15 ms, whose CONTINUE still reached the robot
// in time, then answered STOP (2 of 7 README demo runs of 2026-12-03, the daemon's thread not run
// by the virtual machine for 11-14 ms).
inline constexpr double kDefaultDeadlineShare = 0.75;

struct SessionSettings {
    double deadline_ms = 0.0;  // 0: kDefaultDeadlineShare of the robot's reply timeout
    double resume_grace_s = 0.5;
    std::string data_dir;
    // Runs slow work (SQLite, subscribers) on the daemon's background thread, in the order posted.
    // Empty: the work runs at once on the calling thread (tests).
    PostBackground post_background;
};

using EventCallback = std::function<void(const nlohmann::json&)>;

class RobotSession : public std::enable_shared_from_this<RobotSession> {
public:
    RobotSession(RobotConfig config, Store& store, SessionSettings settings, EventCallback on_event);
    ~RobotSession();

    const RobotConfig& config() const { return config_; }
    const std::string& id() const { return config_.id; }
    std::size_t joints() const { return config_.joints; }

    // Robot link side. attach() checks the handshake against the configuration; on refusal the
    // reason names the offending value and the link must close after sending the STOP reply.
    struct Attach {
        bool accepted = false;
        std::string reason;
        protocol::Reply reply = protocol::Reply::Stop;
    };
    Attach attach(std::uint64_t link, const protocol::Handshake& handshake, const std::string& remote);
    void detach(std::uint64_t link, const std::string& why);
    protocol::Reply on_sample(std::uint64_t link, const protocol::SampleFrame& frame, Clock::time_point received);
    protocol::Reply on_malformed(std::uint64_t link, std::string_view message);
    protocol::Reply on_internal_error(std::uint64_t link, std::string_view message);
    void flush();  // stores and publishes what on_sample() queued; call after the reply is written
    void request_flush();  // flush() on the background thread (at most one waiting at a time)
    bool is_link(std::uint64_t link) {
        auto lk = lock();
        return link == link_;
    }

    // Control side (each returns the JSON answer or throws std::invalid_argument / std::runtime_error).
    nlohmann::json status();
    nlohmann::json set_mode(Mode mode, const std::string& by);
    nlohmann::json start_recording(const std::string& by);
    nlohmann::json stop_recording(const std::string& by);
    nlohmann::json activate(std::int64_t profile_id, const Profile& profile, const std::string& by);
    nlohmann::json resume(const std::string& by);
    // Feed points after `after` (index), at most one in `decimate`; returns the last index seen.
    std::uint64_t feed(std::uint64_t after, std::size_t decimate, std::vector<FeedPoint>& out);
    // The active profile's reference (for the panel's charts), or null.
    nlohmann::json reference_summary();

    // Kinematic identification procedure (PROTOCOL.md §5): armed through the control API, then a
    // second link of the robot (framing "ident") reports the tracked point joint by joint; at its
    // end the daemon identifies the DH model (worker thread) and stores it.
    Attach attach_identification(std::uint64_t link, const protocol::Handshake& handshake, const std::string& remote);
    protocol::Reply on_ident_line(std::uint64_t link, std::string_view line);
    void detach_identification(std::uint64_t link, const std::string& why);
    nlohmann::json arm_identification(std::optional<double> flange_offset, const std::string& by);
    nlohmann::json identification_status();
    void note_model(std::int64_t model_id, const std::string& by);  // a model set through the control API

    // Restores mode, latch and profile from the store (at start).
    void restore(const RobotState& state, std::optional<Profile> profile);

private:
    // Why a handshake declaring these linear joints does not match the configuration.
    std::string linear_mismatch(std::uint32_t declared) const;
    enum class PendingKind { Stop, WouldStop, Fault, Refused, HeldOnReconnect, Deadline, Late, RecordStart, RecordStop, Adaptation };
    struct Pending {
        PendingKind kind = PendingKind::Stop;
        std::int64_t seq = -1;
        std::int64_t cycle = -1;
        Decision decision;
        std::array<char, 240> reason{};
        bool evidence = false;
    };
    struct Evidence {
        bool valid = false;
        std::size_t joints = 0;
        std::size_t window = 0;
        std::vector<double> signal;     // joint-major, window values each (as matched)
        std::vector<double> reference;  // joint-major, up to kEvidenceSpan values each
        std::vector<std::uint32_t> span_start, span_end, span_len;
        std::vector<double> rule1, rule2;
        // The phase-aware detector's own rule values (what its STOP was decided on): the
        // deviation beyond the bands, the threshold at the matched phase, the CUSUM, and the shared
        // partner (the reference sample matched to the newest one). Not filled for the published one.
        bool phase_aware = false;
        std::vector<double> excess, phase_threshold, cusum;
        std::vector<std::uint32_t> partner;
        // The newest samples as judged, in the robot's units (the dashboard's feed points: the
        // measured value, the reference paired with it and the limits around it; NaN where a
        // sample was not judged), joint-major, judged_count values each, oldest first.
        std::size_t judged_count = 0;
        std::vector<double> judged_t, judged_signal, judged_reference, judged_lower, judged_upper;
    };
    static constexpr std::size_t kPending = 16;

    void latch_locked(const char* reason);
    void queue_locked(PendingKind kind, const protocol::SampleFrame* frame, const Decision* decision, const char* reason,
                      bool evidence);
    void capture_evidence_locked();
    void reserve_evidence_locked(const Profile& profile);
    // The visible record of what the phase-aware detector adapts in operation (its learned
    // friction drift per joint, its speed-ratio estimate): at each new cycle (or every
    // kAdaptationPeriod s of robot time for a robot that sends no cycle counter), an "adaptation"
    // event for what moved by more than kAdaptedShare of the joint's smallest phase threshold
    // (the least deviation its rules judge: a change they would feel), or by kAdaptedSpeedStep of
    // the recorded speed, since that joint's or the speed's last record. Cleared with a new detector.
    static constexpr double kAdaptedShare = 0.25;
    static constexpr double kAdaptedSpeedStep = 0.05;
    static constexpr double kAdaptedSpeed = 1.0;  // rad/s: the joint speed a viscous term is weighed at
    void reset_adaptation_locked(const Profile& profile);
    void note_adaptation_locked(const protocol::SampleFrame& frame);
    nlohmann::json adaptation_json_locked() const;
    static constexpr double kAdaptationPeriod = 10.0;
    std::int64_t adaptation_cycle_ = std::numeric_limits<std::int64_t>::min();
    double adaptation_t_ = -std::numeric_limits<double>::infinity();
    double adapted_speed_ = 1.0;
    std::array<std::array<double, 4>, protocol::kMaxJoints> adapted_{};  // last recorded drift terms per joint
    std::array<double, protocol::kMaxJoints> smallest_threshold_{};
    // The state row (mode, latch, profile) is written outside the mutex: snapshot under the lock,
    // save_state() after it; a snapshot older than the one last written is skipped.
    struct StateSnapshot {
        RobotState state;
        std::uint64_t version = 0;
    };
    StateSnapshot snapshot_locked();
    void save_state(const StateSnapshot& s);
    // A recording taken off the session under the lock, finished (fsync, SQLite) after it.
    struct ClosedRecording {
        std::unique_ptr<RecordWriter> writer;
        std::string path, started;
        std::size_t samples = 0, cycles = 0;
    };
    ClosedRecording close_recording_locked();
    nlohmann::json commit_recording(ClosedRecording r, const std::string& by);
    void post_event(const char* kind, std::string reason);  // event() on the background thread
    std::unique_lock<PiMutex> lock() { return std::unique_lock(mutex_); }
    nlohmann::json status_locked() const;
    nlohmann::json evidence_json(const Evidence& e) const;
    void event(EventRecord record);
    void event(const char* kind, std::string reason);  // a plain event of this robot
    void write_record_locked(const protocol::SampleFrame& frame);

    RobotConfig config_;
    Store& store_;
    SessionSettings settings_;
    EventCallback on_event_;
    mutable PiMutex mutex_;

    // Identification procedure.
    bool ident_armed_ = false;
    std::uint64_t ident_link_ = 0;
    std::optional<double> ident_flange_offset_;
    std::vector<TrackedPointSample> ident_points_;
    std::optional<TrackedPointSample> ident_pending_;
    protocol::Handshake ident_handshake_;
    std::string ident_state_ = "idle";  // idle, armed, collecting, identifying, done, failed
    nlohmann::json ident_result_;
    std::thread ident_worker_;

    // Mode, latch, profile.
    Mode mode_ = Mode::Idle;
    bool latched_ = false;
    std::array<char, 240> latch_reason_{};
    std::int64_t profile_id_ = 0;
    nlohmann::json profile_summary_;
    std::unique_ptr<Detector> detector_;
    std::shared_ptr<const Profile> profile_;  // the detector's profile, for answers built outside the lock
    std::size_t grace_left_ = 0;   // samples whose STOP verdicts are not applied (after a resume)
    bool in_stop_run_ = false;     // the detector said STOP for the previous sample too
    bool robot_held_ = false;      // the last sample had the held bit: the detector was not run
    bool state_dirty_ = false;
    std::uint64_t state_version_ = 0;
    std::mutex persist_mutex_;
    std::uint64_t persisted_version_ = 0;
    std::atomic<bool> flush_posted_{false};

    // Link.
    std::uint64_t link_ = 0;  // 0 = not connected
    std::string remote_;
    protocol::Handshake handshake_;
    std::string connected_since_;
    bool first_sample_ = true;
    bool have_seq_ = false;
    std::int64_t last_seq_ = 0;
    std::uint32_t last_mode_bits_ = 0;
    Clock::duration deadline_{};

    // Counters.
    std::uint64_t samples_ = 0;
    std::uint64_t gaps_ = 0;            // samples missing according to seq
    std::uint64_t gaps_reported_ = 0;
    Clock::time_point gap_report_time_{};
    std::uint64_t malformed_ = 0;
    std::uint64_t stops_ = 0;
    std::uint64_t deadline_misses_ = 0;
    double processing_mean_us_ = 0.0;   // exponential mean of parse-to-decision time
    double processing_max_us_ = 0.0;
    double lock_wait_max_us_ = 0.0;       // of processing_max_us_: waiting for the session's mutex
    Clock::time_point late_reported_{};  // outside DETECT a late reply is reported at most once a second
    std::int64_t cycle_ = 0;
    double last_t_ = 0.0;

    // Recording.
    std::unique_ptr<RecordWriter> recorder_;  // while recording
    static constexpr std::size_t kRecordBuffer = 1 << 20;
    bool record_opening_ = false;  // start_recording() is creating the file (without the lock)
    std::string record_path_;
    std::string record_started_;
    std::size_t record_samples_ = 0;
    std::size_t record_cycle_changes_ = 0;
    std::int64_t record_last_cycle_ = 0;

    // Queued for flush().
    std::array<Pending, kPending> pending_{};
    std::size_t pending_count_ = 0;
    std::size_t pending_dropped_ = 0;
    Evidence evidence_;
    Evidence evidence_out_;

    // Live feed ring.
    std::vector<FeedPoint> ring_;
    std::uint64_t ring_next_ = 0;  // index of the next point
};

}  // namespace warpguard::daemon
