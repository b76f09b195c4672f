#include "session.hpp"

#include <system_error>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

namespace warpguard::daemon {

PiMutex::PiMutex() {
    pthread_mutexattr_t attr;
    ::pthread_mutexattr_init(&attr);
    // Without priority inheritance (not supported: EINVAL/ENOTSUP) it is still a correct mutex.
    ::pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
    const int rc = ::pthread_mutex_init(&m_, &attr);
    ::pthread_mutexattr_destroy(&attr);
    if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_mutex_init");
}

PiMutex::~PiMutex() { ::pthread_mutex_destroy(&m_); }

void PiMutex::lock() {
    const int rc = ::pthread_mutex_lock(&m_);
    if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_mutex_lock");
}

void PiMutex::unlock() noexcept { ::pthread_mutex_unlock(&m_); }

bool PiMutex::try_lock() noexcept { return ::pthread_mutex_trylock(&m_) == 0; }

namespace {
std::atomic<bool> g_links_realtime{false};
}  // namespace

void set_links_realtime(bool realtime) { g_links_realtime.store(realtime); }

int background_nice() { return g_links_realtime.load() ? 0 : 19; }

void lower_thread_priority() {
    // A thread made by a real-time thread inherits its policy: back to normal scheduling first
    // (always allowed), then background_nice() (Linux: set through the thread id).
    sched_param normal{};
    normal.sched_priority = 0;
    ::pthread_setschedparam(::pthread_self(), SCHED_OTHER, &normal);
    if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), background_nice()) != 0) {
        spdlog::debug("cannot set a worker thread's nice value: errno {}", errno);
    }
}

std::string raise_thread_priority(int priority) {
    if (priority <= 0) return "";
    sched_param p{};
    p.sched_priority = priority;
    const int rc = ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &p);
    return rc == 0 ? std::string() : std::string(std::strerror(rc));
}

namespace {

constexpr std::size_t kRing = 2048;
constexpr std::size_t kEvidenceSpanFactor = 8;  // matched span kept as evidence: up to 8 windows long

template <std::size_t N>
void set_text(std::array<char, N>& out, const char* text) {
    std::snprintf(out.data(), N, "%s", text);
}

const char* rule_name(Rule r) {
    switch (r) {
        case Rule::AbsoluteDifference: return "rule 1 (absolute difference)";
        case Rule::Eigenvalue: return "rule 2 (eigenvalue)";
        case Rule::EnvelopeLimit: return "envelope limit";
        case Rule::NeighbourDifference: return "envelope step";
        case Rule::Fault: return "fault (sample cannot be judged)";
        case Rule::Accumulated: return "accumulated deviation (CUSUM)";
        case Rule::ResidualLimit: return "model residual limit";
        case Rule::None: break;
    }
    return "none";
}

const char* rule_key(Rule r) {
    switch (r) {
        case Rule::AbsoluteDifference: return "rule1";
        case Rule::Eigenvalue: return "rule2";
        case Rule::EnvelopeLimit: return "envelope";
        case Rule::NeighbourDifference: return "envelope_step";
        case Rule::Fault: return "fault";
        case Rule::Accumulated: return "accumulated";
        case Rule::ResidualLimit: return "residual";
        case Rule::None: break;
    }
    return "";
}

}  // namespace

RobotSession::RobotSession(RobotConfig config, Store& store, SessionSettings settings, EventCallback on_event)
    : config_(std::move(config)), store_(store), settings_(std::move(settings)), on_event_(std::move(on_event)), ring_(kRing) {
    mode_ = config_.mode;
}

RobotSession::~RobotSession() {
    if (recorder_) recorder_->finish();  // what it has is on the disk; never committed
    if (ident_worker_.joinable()) ident_worker_.join();
}

// ---------------------------------------------------------------------------------------------
// Kinematic identification procedure (PROTOCOL.md §5)

nlohmann::json RobotSession::arm_identification(std::optional<double> flange_offset, const std::string& by) {
    {
        auto lk = lock();
        if (ident_state_ == "collecting" || ident_state_ == "identifying") {
            throw std::invalid_argument(fmt::format("robot '{}' is {} an identification now", config_.id, ident_state_));
        }
        ident_armed_ = true;
        ident_flange_offset_ = flange_offset;
        ident_points_.clear();
        ident_pending_.reset();
        ident_state_ = "armed";
        ident_result_ = nlohmann::json();
    }
    event("identify", fmt::format("identification armed by {}: start the robot's identification program", by));
    return identification_status();
}

void RobotSession::note_model(std::int64_t model_id, const std::string& by) {
    event("identify", fmt::format("kinematic model {} set by {}", model_id, by));
}

nlohmann::json RobotSession::identification_status() {
    auto lk = lock();
    nlohmann::json out = {{"robot", config_.id}, {"state", ident_state_}, {"points", ident_points_.size()}};
    if (!ident_result_.is_null()) out["result"] = ident_result_;
    return out;
}

std::string RobotSession::linear_mismatch(std::uint32_t declared) const {
    const auto joints = [](std::uint32_t mask) { return mask == 0 ? std::string("none") : protocol::linear_joints_text(mask); };
    return fmt::format("its handshake declares linear joints {} but the robot is configured with {} (\"linear\": [...] in its "
                       "configuration, handshake option 'linear=')",
                       joints(declared), joints(config_.linear));
}

RobotSession::Attach RobotSession::attach_identification(std::uint64_t link, const protocol::Handshake& h, const std::string& remote) {
    Attach a;
    auto lk = lock();
    if (!ident_armed_) {
        a.reason = fmt::format("robot '{}': identification link from {} refused: the procedure is not armed (warpguard ctl identify-start {})",
                               config_.id, remote, config_.id);
    } else if (h.vendor != config_.vendor || h.joints != config_.joints) {
        a.reason = fmt::format("robot '{}': identification link refused: {} with {} joints, configured {} with {}", config_.id,
                               protocol::to_string(h.vendor), h.joints, protocol::to_string(config_.vendor), config_.joints);
    } else if (h.linear != config_.linear) {
        a.reason = fmt::format("robot '{}': identification link refused: {}", config_.id, linear_mismatch(h.linear));
    } else if (ident_link_ != 0) {
        a.reason = fmt::format("robot '{}': a second identification link from {} refused (one is running)", config_.id, remote);
    }
    if (!a.reason.empty()) {
        lk.unlock();
        post_event("refused", a.reason);
        return a;
    }
    ident_link_ = link;
    ident_handshake_ = h;
    ident_state_ = "collecting";
    a.accepted = true;
    a.reply = protocol::Reply::Continue;
    lk.unlock();
    post_event("identify", fmt::format("identification procedure connected from {}", remote));
    return a;
}

protocol::Reply RobotSession::on_ident_line(std::uint64_t link, std::string_view line) {
    std::unique_lock lk(mutex_);
    if (link != ident_link_) return protocol::Reply::Stop;
    protocol::IdentLine msg;
    try {
        msg = protocol::parse_ident_line(line, config_.joints, ident_handshake_.positions());
    } catch (const protocol::ProtocolError& e) {
        ident_state_ = "failed";
        ident_result_ = {{"error", e.what()}};
        lk.unlock();
        post_event("identify", fmt::format("identification failed: {}", e.what()));
        return protocol::Reply::Stop;
    }
    if (msg.kind == protocol::IdentLine::Kind::Angles) {
        TrackedPointSample sample;
        sample.joint = msg.joint;
        sample.q.assign(msg.q.begin(), msg.q.begin() + static_cast<std::ptrdiff_t>(config_.joints));
        sample.line = ident_points_.size() + 1;
        ident_pending_ = std::move(sample);
        return protocol::Reply::Continue;
    }
    if (msg.kind == protocol::IdentLine::Kind::Point) {
        if (!ident_pending_) {
            ident_state_ = "failed";
            ident_result_ = {{"error", "an IP line without its IQ line"}};
            lk.unlock();
            post_event("identify", "identification failed: an IP line without its IQ line");
            return protocol::Reply::Stop;
        }
        ident_pending_->p = Eigen::Vector3d(msg.p[0], msg.p[1], msg.p[2]);
        ident_points_.push_back(std::move(*ident_pending_));
        ident_pending_.reset();
        return protocol::Reply::Continue;
    }
    // IE: identify off the robot's link, on a worker thread.
    ident_state_ = "identifying";
    ident_armed_ = false;
    std::vector<TrackedPointSample> points = ident_points_;
    DhIdentifyOptions options;
    options.flange_offset = ident_flange_offset_;
    for (std::size_t j = 0; j < config_.joints; ++j) {
        if ((config_.linear >> j) & 1U) options.prismatic.push_back(j + 1);  // configured linear: prismatic
    }
    if (ident_worker_.joinable()) ident_worker_.join();
    ident_worker_ = std::thread([this, points = std::move(points), options] {
        lower_thread_priority();
        nlohmann::json result;
        std::string reason;
        bool ok = false;
        try {
            const DhIdentification id = identify_dh(points, options);
            const nlohmann::json model = to_json(id);
            const std::int64_t model_id = store_.add_model(config_.id, model);
            result = {{"model_id", model_id}, {"model", model}};
            reason = fmt::format("model {} identified from {} points: fit rms {:.3f} mm, max {:.3f} mm{}", model_id, points.size(),
                                 id.fk_rms * 1e3, id.fk_max * 1e3,
                                 id.warnings.empty() ? "" : fmt::format(" ({} warning(s))", id.warnings.size()));
            ok = true;
        } catch (const std::exception& e) {
            result = {{"error", e.what()}};
            reason = fmt::format("identification failed: {}", e.what());
        }
        {
            auto lk2 = lock();
            ident_state_ = ok ? "done" : "failed";
            ident_result_ = result;
        }
        event("identify", reason);
    });
    return protocol::Reply::Continue;
}

void RobotSession::detach_identification(std::uint64_t link, const std::string& why) {
    std::string state;
    {
        auto lk = lock();
        if (link != ident_link_) return;
        ident_link_ = 0;
        if (ident_state_ == "collecting") {
            ident_state_ = "failed";
            ident_result_ = {{"error", "the procedure's link closed before IE: " + why}};
        }
        state = ident_state_;
    }
    post_event("identify", fmt::format("identification link closed ({}): {}", state, why));
}

// Evidence storage for the profile's joints and window, reserved off the per-sample path.
void RobotSession::reserve_evidence_locked(const Profile& p) {
    const std::size_t w = p.window, span = kEvidenceSpanFactor * w, n = p.joints;
    for (Evidence* e : {&evidence_, &evidence_out_}) {
        e->valid = false;
        e->signal.assign(n * w, 0.0);
        e->reference.assign(n * span, 0.0);
        e->span_start.assign(n, 0);
        e->span_end.assign(n, 0);
        e->span_len.assign(n, 0);
        e->rule1.assign(n, 0.0);
        e->rule2.assign(n, 0.0);
        e->phase_aware = false;
        e->excess.assign(n, 0.0);
        e->phase_threshold.assign(n, 0.0);
        e->cusum.assign(n, 0.0);
        e->partner.assign(n, 0);
        e->judged_count = 0;
        e->judged_t.assign(w, 0.0);
        for (auto* v : {&e->judged_signal, &e->judged_reference, &e->judged_lower, &e->judged_upper}) v->assign(n * w, 0.0);
    }
}

void RobotSession::restore(const RobotState& state, std::optional<Profile> profile) {
    std::unique_ptr<Detector> detector;
    if (profile) detector = std::make_unique<Detector>(*profile);
    auto lk = lock();
    try {
        mode_ = parse_mode(state.mode);
    } catch (const std::invalid_argument&) {
        mode_ = Mode::Idle;
    }
    if (mode_ == Mode::Record) mode_ = Mode::Idle;  // the recording was never committed
    latched_ = state.latched;
    set_text(latch_reason_, state.reason.c_str());
    if (detector) {
        profile_id_ = state.profile_id;
        const Profile& p = detector->profile();
        profile_summary_ = {{"id", profile_id_}, {"window", p.window}, {"method", to_string(p.method)},
                            {"reference_samples", p.reference.size()}};
        reserve_evidence_locked(p);
        reset_adaptation_locked(p);
        profile_ = std::make_shared<const Profile>(p);
        detector_ = std::move(detector);
    } else if (mode_ == Mode::Detect || mode_ == Mode::Shadow) {
        mode_ = Mode::Idle;
    }
}

RobotSession::Attach RobotSession::attach(std::uint64_t link, const protocol::Handshake& h, const std::string& remote) {
    Attach a;
    std::string mismatch;
    if (h.vendor != config_.vendor) {
        mismatch = fmt::format("vendor '{}' but the robot is configured as '{}'", protocol::to_string(h.vendor), protocol::to_string(config_.vendor));
    } else if (h.joints != config_.joints) {
        mismatch = fmt::format("{} joints but the robot is configured with {}", h.joints, config_.joints);
    } else if (h.signal != config_.signal || h.unit != config_.unit) {
        mismatch = fmt::format("signal {} in {} but the robot is configured for {} in {}", to_string(h.signal), to_string(h.unit),
                               to_string(config_.signal), to_string(config_.unit));
    } else if (h.payload != config_.payload) {
        mismatch = h.payload ? "its samples declare the payload but the robot is configured without (\"payload\": true in its configuration)"
                             : "its samples do not declare the payload but the robot is configured with it (handshake option 'payload')";
    } else if (h.speed_override != config_.speed_override) {
        mismatch = h.speed_override
                       ? "its samples report the speed override but the robot is configured without (\"override\": true in its configuration)"
                       : "its samples do not report the speed override but the robot is configured with it (handshake option 'override')";
    } else if (h.linear != config_.linear) {
        mismatch = linear_mismatch(h.linear);
    } else if (config_.address != "any") {
        const std::string host = remote.substr(0, remote.rfind(':'));
        if (host != config_.address) mismatch = fmt::format("it connected from {} but may only connect from {}", host, config_.address);
    }
    if (!mismatch.empty()) {
        a.reason = fmt::format("robot '{}' refused: {}", config_.id, mismatch);
        post_event("refused", a.reason);
        return a;
    }
    std::uint64_t previous = 0;
    {
        auto lk = lock();
        previous = link_;
        link_ = link;
        remote_ = remote;
        handshake_ = h;
        connected_since_ = now_iso();
        first_sample_ = true;
        have_seq_ = false;
        in_stop_run_ = false;
        const double deadline_ms = settings_.deadline_ms > 0 ? settings_.deadline_ms : kDefaultDeadlineShare * 1e3 * h.timeout;
        deadline_ = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(deadline_ms));
        if (detector_) detector_->reset();
        a.accepted = true;
        a.reply = latched_ ? protocol::Reply::Stop : protocol::Reply::Continue;
    }
    post_event("connect", fmt::format("connected from {} ({}, {} joints{}, {} in {}, period {} ms, robot timeout {} ms, {} framing){}", remote,
                           protocol::to_string(h.vendor), h.joints,
                           h.linear != 0 ? fmt::format(" ({} linear)", protocol::linear_joints_text(h.linear)) : "",
                           to_string(h.signal), to_string(h.unit), h.period * 1e3, h.timeout * 1e3,
                           h.framing == protocol::Framing::Ascii ? "ascii" : "binary", previous ? "; it replaces the previous connection" : ""));
    return a;
}

void RobotSession::detach(std::uint64_t link, const std::string& why) {
    {
        auto lk = lock();
        if (link != link_) return;
        link_ = 0;
    }
    post_event("disconnect", why);
}

void RobotSession::latch_locked(const char* reason) {
    latched_ = true;
    ++stops_;
    set_text(latch_reason_, reason);
    state_dirty_ = true;
}

void RobotSession::queue_locked(PendingKind kind, const protocol::SampleFrame* frame, const Decision* decision, const char* reason,
                                bool evidence) {
    if (pending_count_ == kPending) {
        ++pending_dropped_;
        return;
    }
    Pending& p = pending_[pending_count_++];
    p.kind = kind;
    p.seq = frame ? frame->seq : -1;
    p.cycle = frame ? frame->cycle : -1;
    p.decision = decision ? *decision : Decision{};
    set_text(p.reason, reason);
    p.evidence = evidence;
    if (evidence) capture_evidence_locked();
}

void RobotSession::reset_adaptation_locked(const Profile& profile) {
    adaptation_cycle_ = std::numeric_limits<std::int64_t>::min();
    adaptation_t_ = -std::numeric_limits<double>::infinity();
    adapted_speed_ = 1.0;
    for (auto& a : adapted_) a.fill(0.0);
    smallest_threshold_.fill(0.0);
    if (!profile.phase) return;
    for (std::size_t j = 0; j < profile.joints && j < protocol::kMaxJoints; ++j) {
        const auto& th = profile.phase->rule1[j];
        if (!th.empty()) smallest_threshold_[j] = *std::min_element(th.begin(), th.end());
    }
}

void RobotSession::note_adaptation_locked(const protocol::SampleFrame& f) {
    // (Once per cycle, on the robot's thread: fixed buffers only.)
    const Detector& d = *detector_;
    if (d.profile().detector != DetectorKind::PhaseAware || !d.profile().phase) return;
    // (KA-mDTW learns in its matched units: the signal per metre of lever length)
    const bool per_metre = d.profile().method == MatchingMethod::KaMdtw;
    const char* unit = config_.unit == SignalUnit::Percent ? (per_metre ? "%/m" : "%")
                       : config_.unit == SignalUnit::A     ? (per_metre ? "A/m" : "A")
                                                           : (per_metre ? "Nm/m" : "Nm");
    char text[240];
    std::size_t used = 0;
    const auto append = [&](const char* format, auto... values) {
        if (used >= sizeof text) return;
        const int n = std::snprintf(text + used, sizeof text - used, format, values...);
        if (n > 0) used = std::min(sizeof text, used + static_cast<std::size_t>(n));
    };
    append("learned by cycle %lld:", static_cast<long long>(f.cycle));
    bool changed = false;
    if (d.has_speed_model() && d.speed_settled() && std::abs(d.speed_ratio() - adapted_speed_) > kAdaptedSpeedStep) {
        append(" speed %.2f of the recorded (was %.2f);", d.speed_ratio(), adapted_speed_);
        adapted_speed_ = d.speed_ratio();
        changed = true;
    }
    for (std::size_t j = 0; j < d.joints() && j < protocol::kMaxJoints; ++j) {
        const auto fr = d.friction_drift(j), mg = d.magnitude_drift(j);
        const std::array<double, 4> now{fr[0], fr[1], mg[0], mg[1]};
        auto& was = adapted_[j];
        const double moved = std::max(std::abs(now[0] - was[0]), std::abs(now[2] - was[2])) +
                             std::max(std::abs(now[1] - was[1]), std::abs(now[3] - was[3])) * kAdaptedSpeed;
        if (!(moved > kAdaptedShare * smallest_threshold_[j])) continue;
        append(" joint %zu friction drift Coulomb %+.3g %s, viscous %+.3g %s s/rad", j + 1, now[0], unit, now[1], unit);
        if (now[2] != 0.0 || now[3] != 0.0) append(" (magnitude %+.3g, %+.3g)", now[2], now[3]);
        append(";");
        was = now;
        changed = true;
    }
    if (!changed) return;
    if (used > 0 && used < sizeof text && text[used - 1] == ';') text[used - 1] = '\0';
    queue_locked(PendingKind::Adaptation, &f, nullptr, text, false);
}

nlohmann::json RobotSession::adaptation_json_locked() const {
    if (!detector_ || detector_->profile().detector != DetectorKind::PhaseAware || !detector_->profile().phase) return nullptr;
    nlohmann::json joints = nlohmann::json::array();
    for (std::size_t j = 0; j < detector_->joints(); ++j) {
        const auto fr = detector_->friction_drift(j), mg = detector_->magnitude_drift(j);
        joints.push_back({{"joint", j + 1}, {"coulomb", fr[0]}, {"viscous", fr[1]}, {"magnitude_coulomb", mg[0]},
                          {"magnitude_viscous", mg[1]}, {"friction_changed", detector_->friction_changed(j)}});
    }
    return {{"speed_ratio", detector_->speed_ratio()}, {"speed_settled", detector_->speed_settled()},
            {"speed_known", detector_->speed_known()},
            {"has_speed_model", detector_->has_speed_model()}, {"friction", joints}};
}

void RobotSession::capture_evidence_locked() {
    if (!detector_ || evidence_.signal.empty()) return;
    Evidence& e = evidence_;
    const std::size_t n = detector_->joints(), w = detector_->window_length(), span = kEvidenceSpanFactor * w;
    e.joints = n;
    e.window = w;
    e.phase_aware = detector_->profile().detector == DetectorKind::PhaseAware && detector_->profile().phase.has_value();
    for (std::size_t j = 0; j < n; ++j) {
        const auto window = detector_->window(j);
        std::copy(window.begin(), window.end(), e.signal.begin() + static_cast<std::ptrdiff_t>(j * w));
        const JointEvaluation& ev = detector_->evaluations()[j];
        const auto ref = detector_->reference(j);
        // The reference the rules compared with: the phase-aware detector's, up to the shared
        // partner (the window's length of it); the published one's, the joint's own mDTW span.
        const std::size_t partner = ev.shared.partner;
        const std::size_t start = e.phase_aware ? (partner + 1 >= w ? partner + 1 - w : 0) : ev.ref_start;
        const std::size_t end = e.phase_aware ? partner : ev.ref_end;
        const std::size_t len = std::min(span, end - start + 1);
        std::copy_n(ref.begin() + static_cast<std::ptrdiff_t>(start), len, e.reference.begin() + static_cast<std::ptrdiff_t>(j * span));
        e.span_start[j] = static_cast<std::uint32_t>(start);
        e.span_end[j] = static_cast<std::uint32_t>(end);
        e.span_len[j] = static_cast<std::uint32_t>(len);
        e.rule1[j] = ev.rule1.magnitude();
        e.rule2[j] = ev.rule2;
        e.excess[j] = ev.ratio * ev.phase_threshold;
        e.phase_threshold[j] = ev.phase_threshold;
        e.cusum[j] = ev.cusum;
        e.partner[j] = static_cast<std::uint32_t>(partner);
    }
    // The newest window's length of feed points (the current sample's is filled before a stop is
    // queued): what the dashboard drew up to the stop.
    const std::uint64_t have = std::min<std::uint64_t>({ring_next_, ring_.size(), w});
    e.judged_count = static_cast<std::size_t>(have);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::size_t k = 0; k < e.judged_count; ++k) {
        const FeedPoint& p = ring_[(ring_next_ - have + k) % ring_.size()];
        e.judged_t[k] = p.t;
        for (std::size_t j = 0; j < n; ++j) {
            const std::size_t at = j * w + k;
            const bool has = j < p.joints && j < protocol::kMaxJoints;
            e.judged_signal[at] = has ? p.signal[j] : nan;
            e.judged_reference[at] = has ? p.reference[j] : nan;
            e.judged_lower[at] = has ? p.lower[j] : nan;
            e.judged_upper[at] = has ? p.upper[j] : nan;
        }
    }
    e.valid = true;
}

protocol::Reply RobotSession::on_sample(std::uint64_t link, const protocol::SampleFrame& f, Clock::time_point received) {
    auto lk = lock();
    const auto locked = Clock::now();
    if (link != link_) return protocol::Reply::Stop;  // a replaced connection
    ++samples_;
    char reason[240];

    // Sequence numbers: count what is missing (the ASCII counter wraps at 2^31, the binary one at 2^32).
    if (have_seq_) {
        const std::int64_t diff = f.seq - last_seq_;
        if (diff > 1) gaps_ += static_cast<std::uint64_t>(diff - 1);
    }
    have_seq_ = true;
    last_seq_ = f.seq;
    cycle_ = f.cycle;
    last_t_ = f.t;

    // A robot that comes back already stopped (it stopped itself when the link was lost) stays stopped.
    if (first_sample_) {
        first_sample_ = false;
        if ((f.mode & kBitHeld) && !latched_) {
            std::snprintf(reason, sizeof reason,
                          "robot reconnected while stopped (it stopped itself: %s); an operator must resume",
                          (f.mode & kBitSelfStop) ? "no reply in time or lost connection" : "held");
            latch_locked(reason);
            queue_locked(PendingKind::HeldOnReconnect, &f, nullptr, reason, false);
        }
    }
    if (config_.robot_starts_recording) {
        const bool now = f.mode & kBitRecordRequest, before = last_mode_bits_ & kBitRecordRequest;
        if (now && !before && mode_ == Mode::Idle) queue_locked(PendingKind::RecordStart, &f, nullptr, "robot program asked to record", false);
        if (!now && before && mode_ == Mode::Record) queue_locked(PendingKind::RecordStop, &f, nullptr, "robot program ended the recording", false);
    }
    last_mode_bits_ = f.mode;

    FeedPoint& point = ring_[ring_next_ % ring_.size()];
    point.index = ring_next_++;
    point.t = f.t;
    point.seq = f.seq;
    point.cycle = f.cycle;
    point.joints = f.joints;
    point.fired = 0;
    point.would_stop = false;
    std::copy_n(f.signal.begin(), f.joints, point.signal.begin());
    // Nothing judged (recording, idle, held): no reference to show (null in the feed).
    point.reference.fill(std::numeric_limits<double>::quiet_NaN());
    point.lower.fill(std::numeric_limits<double>::quiet_NaN());
    point.upper.fill(std::numeric_limits<double>::quiet_NaN());

    switch (mode_) {
        case Mode::Idle: break;
        case Mode::Record: write_record_locked(f); break;
        case Mode::Shadow:
        case Mode::Detect: {
            if (!detector_) {
                if (mode_ == Mode::Detect && !latched_) {
                    latch_locked("DETECT mode without an active profile");
                    queue_locked(PendingKind::Fault, &f, nullptr, "DETECT mode without an active profile", false);
                }
                break;
            }
            if (f.mode & kBitHeld) {
                // The robot stands still (held by WarpGuard or by itself): a standing robot is not judged
                // against a moving reference; the detector starts afresh when it moves again.
                robot_held_ = true;
                in_stop_run_ = false;
                break;
            }
            if (robot_held_) {
                robot_held_ = false;
                detector_->reset();
            }
            const Decision d = detector_->update(f.view());
            const auto evaluations = detector_->evaluations();
            for (std::size_t j = 0; j < evaluations.size() && j < protocol::kMaxJoints; ++j) {
                const JointEvaluation& ev = evaluations[j];
                const Detector::Judged judged = detector_->judged(j);
                point.reference[j] = f.signal[j] - judged.offset;
                point.lower[j] = point.reference[j] + judged.low;
                point.upper[j] = point.reference[j] + judged.high;
                point.rule1[j] = ev.rule1.magnitude();
                point.rule2[j] = ev.rule2;
                point.ref_start[j] = static_cast<std::uint32_t>(ev.ref_start);
                point.ref_end[j] = static_cast<std::uint32_t>(ev.ref_end);
            }
            point.fired = d.fired;
            point.would_stop = d.stop();
            // (at each new cycle; a robot that sends no cycle counter, every kAdaptationPeriod s)
            if (f.cycle != adaptation_cycle_ || !(f.t - adaptation_t_ < kAdaptationPeriod)) {
                adaptation_cycle_ = f.cycle;
                adaptation_t_ = f.t;
                note_adaptation_locked(f);
            }
            bool applies = true;
            if (grace_left_ > 0) {
                --grace_left_;
                applies = false;
            }
            if (d.stop() && applies && !in_stop_run_) {
                const char* unit = config_.unit == SignalUnit::Percent ? "%" : (config_.unit == SignalUnit::A ? "A" : "Nm");
                if (d.rule == Rule::Fault) {
                    std::snprintf(reason, sizeof reason, "sample seq %lld cannot be judged (wrong size or not a finite number)",
                                  static_cast<long long>(f.seq));
                } else {
                    // Rule 2 is in unit squared; the CUSUM sums deviations in multiples of the phase threshold.
                    char squared[8];
                    std::snprintf(squared, sizeof squared, "%s^2", unit);
                    const char* value_unit = d.rule == Rule::Eigenvalue ? squared : d.rule == Rule::Accumulated ? "(threshold units)" : unit;
                    std::snprintf(reason, sizeof reason, "joint %zu %s: %.4g > limit %.4g %s at cycle %lld, seq %lld", d.joint,
                                  rule_name(d.rule), d.value, d.threshold, value_unit, static_cast<long long>(f.cycle),
                                  static_cast<long long>(f.seq));
                }
                if (mode_ == Mode::Detect) {
                    if (!latched_) {
                        latch_locked(reason);
                        queue_locked(d.rule == Rule::Fault ? PendingKind::Fault : PendingKind::Stop, &f, &d, reason, true);
                    }
                } else {
                    queue_locked(PendingKind::WouldStop, &f, &d, reason, true);
                }
            }
            in_stop_run_ = d.stop() && applies;
            break;
        }
    }

    // Deadline: a decision that took too long is not trusted in DETECT; in the other modes it is
    // reported (at most once a second) so that a slow PC shows before DETECT depends on it.
    const auto done = Clock::now();
    const double us = std::chrono::duration<double, std::micro>(done - received).count();
    const double wait_us = std::chrono::duration<double, std::micro>(locked - received).count();
    processing_mean_us_ = samples_ == 1 ? us : 0.99 * processing_mean_us_ + 0.01 * us;
    if (us > processing_max_us_) {
        processing_max_us_ = us;
        lock_wait_max_us_ = wait_us;
    }
    if (done - received > deadline_) {
        ++deadline_misses_;
        const bool detect = mode_ == Mode::Detect;
        if (detect ? !latched_ : done - late_reported_ > std::chrono::seconds(1)) {
            std::snprintf(reason, sizeof reason,
                          "deadline missed: sample seq %lld decided after %.2f ms (deadline %.2f ms; %.2f ms of it waiting for the session lock)",
                          static_cast<long long>(f.seq), us / 1e3, std::chrono::duration<double, std::milli>(deadline_).count(), wait_us / 1e3);
            if (detect) {
                latch_locked(reason);
                queue_locked(PendingKind::Deadline, &f, nullptr, reason, false);
            } else {
                late_reported_ = done;
                queue_locked(PendingKind::Late, &f, nullptr, reason, false);
            }
        }
    }
    point.stop = latched_;
    return latched_ ? protocol::Reply::Stop : protocol::Reply::Continue;
}

protocol::Reply RobotSession::on_malformed(std::uint64_t link, std::string_view message) {
    auto lk = lock();
    if (link != link_) return protocol::Reply::Stop;
    ++malformed_;
    char reason[240];
    std::snprintf(reason, sizeof reason, "malformed sample from %s: %.*s", remote_.c_str(), static_cast<int>(message.size()), message.data());
    if (!latched_) latch_locked(reason);
    queue_locked(PendingKind::Fault, nullptr, nullptr, reason, false);
    return protocol::Reply::Stop;
}

protocol::Reply RobotSession::on_internal_error(std::uint64_t link, std::string_view message) {
    auto lk = lock();
    if (link != link_) return protocol::Reply::Stop;
    char reason[240];
    std::snprintf(reason, sizeof reason, "internal error: %.*s", static_cast<int>(message.size()), message.data());
    if (!latched_) latch_locked(reason);
    queue_locked(PendingKind::Fault, nullptr, nullptr, reason, false);
    return protocol::Reply::Stop;
}

void RobotSession::write_record_locked(const protocol::SampleFrame& f) {
    if (!recorder_) return;
    recorder_->push(f);  // a copy into the writer's ring; a full ring is counted and fails the commit
    if (record_samples_ > 0 && f.cycle != record_last_cycle_) ++record_cycle_changes_;
    record_last_cycle_ = f.cycle;
    ++record_samples_;
}

RobotSession::StateSnapshot RobotSession::snapshot_locked() {
    StateSnapshot s;
    s.state.robot = config_.id;
    s.state.mode = to_string(mode_);
    s.state.latched = latched_;
    s.state.reason = latch_reason_.data();
    s.state.profile_id = profile_id_;
    s.version = ++state_version_;
    return s;
}

void RobotSession::save_state(const StateSnapshot& s) {
    std::lock_guard lk(persist_mutex_);
    if (s.version <= persisted_version_) return;  // a newer state is already on disk
    store_.save_state(s.state);
    persisted_version_ = s.version;
}

void RobotSession::post_event(const char* kind, std::string reason) {
    std::weak_ptr<RobotSession> weak = weak_from_this();
    if (!settings_.post_background || weak.expired()) {
        event(kind, std::move(reason));
        return;
    }
    settings_.post_background([weak, kind, reason = std::move(reason)]() mutable {
        if (auto self = weak.lock()) self->event(kind, std::move(reason));
    });
}

void RobotSession::request_flush() {
    {
        auto lk = lock();
        if (pending_count_ == 0 && !state_dirty_ && gaps_ == gaps_reported_) return;
    }
    std::weak_ptr<RobotSession> weak = weak_from_this();
    if (!settings_.post_background || weak.expired()) {
        flush();
        return;
    }
    if (flush_posted_.exchange(true)) return;  // one is waiting already; it takes everything queued
    settings_.post_background([weak] {
        if (auto self = weak.lock()) {
            self->flush_posted_ = false;
            self->flush();
        }
    });
}

void RobotSession::event(const char* kind, std::string reason) {
    EventRecord e;
    e.robot = config_.id;
    e.kind = kind;
    e.reason = std::move(reason);
    event(std::move(e));
}

void RobotSession::event(EventRecord record) {
    try {
        const std::int64_t id = store_.add_event(record);
        const auto level = record.kind == "stop" || record.kind == "fault" || record.kind == "refused" || record.kind == "late" ? spdlog::level::warn : spdlog::level::info;
        spdlog::log(level, "robot {}: {}: {}", record.robot, record.kind, record.reason);
        if (on_event_) {
            nlohmann::json j = {{"id", id},           {"robot", record.robot}, {"kind", record.kind},     {"reason", record.reason},
                                {"seq", record.seq},  {"cycle", record.cycle}, {"joint", record.joint},   {"rule", record.rule},
                                {"value", record.value}, {"threshold", record.threshold}, {"has_evidence", !record.evidence.is_null()},
                                {"time", now_iso()}};
            on_event_(j);
        }
    } catch (const std::exception& e) {
        spdlog::error("robot {}: cannot store event '{}: {}': {}", record.robot, record.kind, record.reason, e.what());
    }
}

nlohmann::json RobotSession::evidence_json(const Evidence& e) const {
    if (!e.valid) return nullptr;
    const std::size_t w = e.window, span = kEvidenceSpanFactor * w;
    nlohmann::json joints = nlohmann::json::array();
    std::vector<JointThresholds> thresholds;
    std::vector<double> phase_theta1;  // the phase-aware threshold where the window matched
    std::vector<std::vector<double>> phase_span;  // ... and along the matched span, per joint
    double cusum_limit = 0.0;
    std::string matched;
    {
        std::lock_guard lk(mutex_);
        if (detector_) {
            thresholds = detector_->profile().thresholds;
            matched = describe_matched_signal(detector_->profile());
            if (const auto& ph = detector_->profile().phase) {
                cusum_limit = ph->cusum_limit;
                for (std::size_t j = 0; j < e.joints && j < ph->rule1.size(); ++j) {
                    const auto& t = ph->rule1[j];
                    phase_theta1.push_back(t[std::min<std::size_t>(e.span_end[j], t.size() - 1)]);
                    auto& along = phase_span.emplace_back();
                    for (std::size_t k = 0; k < e.span_len[j]; ++k) along.push_back(t[std::min<std::size_t>(e.span_start[j] + k, t.size() - 1)]);
                }
            }
        }
    }
    for (std::size_t j = 0; j < e.joints; ++j) {
        nlohmann::json jj;
        jj["joint"] = j + 1;
        jj["window"] = std::vector<double>(e.signal.begin() + static_cast<std::ptrdiff_t>(j * w), e.signal.begin() + static_cast<std::ptrdiff_t>((j + 1) * w));
        jj["reference"] = std::vector<double>(e.reference.begin() + static_cast<std::ptrdiff_t>(j * span),
                                              e.reference.begin() + static_cast<std::ptrdiff_t>(j * span + e.span_len[j]));
        jj["ref_start"] = e.span_start[j];
        jj["ref_end"] = e.span_end[j];
        jj["reference_truncated"] = e.span_len[j] < e.span_end[j] - e.span_start[j] + 1;
        jj["rule1"] = e.rule1[j];
        jj["rule2"] = e.rule2[j];
        if (j < thresholds.size()) {
            jj["theta1"] = j < phase_theta1.size() ? phase_theta1[j] : thresholds[j].rule1.value;
            if (j < phase_span.size()) jj["theta1_span"] = phase_span[j];  // phase-aware: per reference sample
            jj["theta2"] = thresholds[j].rule2.value;
        }
        if (e.phase_aware) {
            // What the default detector decided on (its ratio rule: deviation > threshold; its
            // accumulated rule: CUSUM > cusum_limit), at the shared partner.
            jj["deviation"] = e.excess[j];
            jj["phase_threshold"] = e.phase_threshold[j];
            jj["cusum"] = e.cusum[j];
            jj["partner"] = e.partner[j];
        }
        if (e.judged_count > 0) {
            // The samples as the dashboard drew them (null where a sample was not judged).
            const auto values = [&](const std::vector<double>& v) {
                nlohmann::json a = nlohmann::json::array();
                for (std::size_t k = 0; k < e.judged_count; ++k) {
                    const double x = v[j * w + k];
                    a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
                }
                return a;
            };
            jj["judged"] = {{"signal", values(e.judged_signal)},
                            {"reference", values(e.judged_reference)},
                            {"lower", values(e.judged_lower)},
                            {"upper", values(e.judged_upper)}};
        }
        joints.push_back(std::move(jj));
    }
    nlohmann::json out = {{"window", w}, {"unit", to_string(config_.unit)}, {"joints", std::move(joints)}};
    if (config_.linear != 0) out["linear"] = protocol::linear_joints(config_.linear);
    if (e.judged_count > 0) out["judged_t"] = std::vector<double>(e.judged_t.begin(), e.judged_t.begin() + static_cast<std::ptrdiff_t>(e.judged_count));
    if (e.phase_aware) out["detector"] = "phase-aware", out["cusum_limit"] = cusum_limit;
    if (!matched.empty()) out["matched"] = matched;
    return out;
}

void RobotSession::flush() {
    std::array<Pending, kPending> pending;
    std::size_t count = 0, dropped = 0;
    bool dirty = false;
    std::uint64_t new_gaps = 0;
    std::optional<StateSnapshot> state;
    {
        auto lk = lock();
        if (pending_count_ == 0 && !state_dirty_ && gaps_ == gaps_reported_) return;
        count = pending_count_;
        std::copy_n(pending_.begin(), count, pending.begin());
        pending_count_ = 0;
        dropped = pending_dropped_;
        pending_dropped_ = 0;
        dirty = state_dirty_;
        state_dirty_ = false;
        if (count > 0) std::swap(evidence_, evidence_out_);
        evidence_.valid = false;
        const auto now = Clock::now();
        if (gaps_ != gaps_reported_ && now - gap_report_time_ > std::chrono::seconds(1)) {
            new_gaps = gaps_ - gaps_reported_;
            gaps_reported_ = gaps_;
            gap_report_time_ = now;
        }
        if (dirty) state = snapshot_locked();
    }
    if (state) {
        try {
            save_state(*state);
        } catch (const std::exception& e) {
            spdlog::error("robot {}: cannot store its state: {}", config_.id, e.what());
        }
    }
    // The evidence buffer holds the window of the last event queued with evidence (each capture
    // overwrites it): it belongs to that event, wherever it stands in the batch. Until 2026-12-04
    // it went to the batch's last event only, so a stop or would-be stop followed before the flush
    // by an event without evidence (a malformed line, an adaptation) was stored without it (the
    // panel test's evidence dialog of a would-be stop then had no decision to show).
    std::size_t with_evidence = count;
    for (std::size_t k = 0; k < count; ++k) {
        if (pending[k].evidence) with_evidence = k;
    }
    for (std::size_t k = 0; k < count; ++k) {
        const Pending& p = pending[k];
        switch (p.kind) {
            case PendingKind::RecordStart:
                try {
                    start_recording("robot program (mode bit 4)");
                } catch (const std::exception& e) {
                    spdlog::error("robot {}: cannot start recording: {}", config_.id, e.what());
                }
                continue;
            case PendingKind::RecordStop:
                try {
                    stop_recording("robot program (mode bit 4)");
                } catch (const std::exception& e) {
                    spdlog::error("robot {}: cannot stop recording: {}", config_.id, e.what());
                }
                continue;
            default: break;
        }
        EventRecord e;
        e.robot = config_.id;
        e.kind = p.kind == PendingKind::Stop || p.kind == PendingKind::HeldOnReconnect ? "stop"
                 : p.kind == PendingKind::WouldStop                                     ? "would_stop"
                 : p.kind == PendingKind::Late                                          ? "late"
                 : p.kind == PendingKind::Adaptation                                    ? "adaptation"
                                                                                        : "fault";
        e.reason = p.reason.data();
        e.seq = p.seq;
        e.cycle = p.cycle;
        e.joint = static_cast<int>(p.decision.joint);
        e.rule = rule_key(p.decision.rule);
        e.value = p.decision.value;
        e.threshold = p.decision.threshold;
        if (k == with_evidence) e.evidence = evidence_json(evidence_out_);
        event(std::move(e));
    }
    if (dropped > 0) spdlog::warn("robot {}: {} events dropped (more than {} between two flushes)", config_.id, dropped, kPending);
    if (new_gaps > 0) {
        event("gap", fmt::format("{} samples missing according to the sequence numbers (total {})", new_gaps, gaps_reported_));
    }
}

nlohmann::json RobotSession::status_locked() const {
    nlohmann::json j = to_json(config_);
    j["connected"] = link_ != 0;
    j["remote"] = remote_;
    j["connected_since"] = connected_since_;
    j["mode"] = to_string(mode_);
    j["latched"] = latched_;
    j["reason"] = latched_ ? std::string(latch_reason_.data()) : std::string();
    j["state"] = link_ == 0 ? "disconnected" : latched_ ? "stopped" : to_string(mode_);
    j["profile"] = profile_id_ ? profile_summary_ : nlohmann::json();
    j["samples"] = samples_;
    j["gaps"] = gaps_;
    j["malformed"] = malformed_;
    j["stops"] = stops_;
    j["deadline_misses"] = deadline_misses_;
    j["cycle"] = cycle_;
    j["robot_time"] = last_t_;
    j["processing_us"] = {{"mean", processing_mean_us_}, {"max", processing_max_us_}, {"max_lock_wait", lock_wait_max_us_}};
    // What the detector has learned in operation since its profile was activated (null: nothing it learns).
    j["adaptation"] = adaptation_json_locked();
    if (link_ != 0) {
        j["period_ms"] = handshake_.period * 1e3;
        j["robot_timeout_ms"] = handshake_.timeout * 1e3;
        j["deadline_ms"] = std::chrono::duration<double, std::milli>(deadline_).count();
    }
    if (recorder_) {
        j["recording"] = {{"path", record_path_}, {"samples", record_samples_}, {"lost", recorder_->lost()},
                          {"complete_cycles", record_cycle_changes_ > 0 ? record_cycle_changes_ - 1 : 0}, {"started", record_started_}};
    }
    return j;
}

nlohmann::json RobotSession::status() {
    auto lk = lock();
    return status_locked();
}

nlohmann::json RobotSession::set_mode(Mode mode, const std::string& by) {
    if (mode == Mode::Record) return start_recording(by);
    nlohmann::json committed;
    Mode before;
    ClosedRecording closed;
    StateSnapshot state;
    {
        auto lk = lock();
        if ((mode == Mode::Detect || mode == Mode::Shadow) && !detector_) {
            throw std::invalid_argument(fmt::format("robot '{}' has no active profile: record, calibrate and activate one before '{}'",
                                                    config_.id, to_string(mode)));
        }
        before = mode_;
        if (mode_ == Mode::Record && recorder_) closed = close_recording_locked();
        mode_ = mode;
        if (detector_ && mode != before) detector_->reset();
        in_stop_run_ = false;
        state = snapshot_locked();
    }
    save_state(state);
    event("mode", fmt::format("mode {} -> {} by {}", to_string(before), to_string(mode), by));
    if (closed.writer) committed = commit_recording(std::move(closed), by);  // throws if samples were lost
    nlohmann::json j = status();
    if (!committed.is_null()) j["committed_recording"] = committed;
    return j;
}

nlohmann::json RobotSession::start_recording(const std::string& by) {
    {
        auto lk = lock();
        if (recorder_ || record_opening_) {
            throw std::invalid_argument(fmt::format("robot '{}' is already recording to {}", config_.id, record_path_));
        }
        record_opening_ = true;
    }
    // The file is created and its header written without the lock (the robot's samples take it).
    std::string path, started;
    std::FILE* f = nullptr;
    auto buffer = std::make_unique<char[]>(kRecordBuffer);
    try {
        const std::filesystem::path dir = std::filesystem::path(settings_.data_dir) / "recordings";
        std::filesystem::create_directories(dir);
        started = now_iso();
        std::string stamp = started;
        std::replace(stamp.begin(), stamp.end(), ':', '-');
        path = (dir / fmt::format("{}-{}.csv", config_.id, stamp)).string();
        f = std::fopen(path.c_str(), "w");
        if (!f) throw std::runtime_error(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
        std::setvbuf(f, buffer.get(), _IOFBF, kRecordBuffer);
        std::fprintf(f, "# robot: %s\n# joints: %zu\n# signal: %s\n# unit: %s\n# source: warpguardd recording started %s by %s\n",
                     config_.id.c_str(), config_.joints, to_string(config_.signal).c_str(), to_string(config_.unit).c_str(),
                     started.c_str(), by.c_str());
        std::fprintf(f, "t,seq,cycle,mode");
        for (std::size_t j = 1; j <= config_.joints; ++j) std::fprintf(f, ",tau%zu", j);
        for (std::size_t j = 1; j <= config_.joints; ++j) std::fprintf(f, ",q%zu", j);
        if (config_.payload) std::fprintf(f, ",payload");
        if (config_.speed_override) std::fprintf(f, ",override");
        std::fputc('\n', f);
    } catch (...) {
        if (f) std::fclose(f);
        auto lk = lock();
        record_opening_ = false;
        throw;
    }
    // The ring holds 30 s of the robot's samples (at least 4,096): the writer thread empties it every
    // 20 ms, so only a disk that stalls for that long loses samples (and then the commit says so).
    double period = 0.004;
    {
        auto lk = lock();
        if (link_ != 0 && handshake_.period > 0) period = handshake_.period;
    }
    const std::size_t capacity = std::clamp<std::size_t>(static_cast<std::size_t>(30.0 / period), 4096, 65536);
    auto writer = std::make_unique<RecordWriter>(f, std::move(buffer), path, config_.payload, config_.speed_override, capacity);
    StateSnapshot state;
    {
        auto lk = lock();
        record_opening_ = false;
        recorder_ = std::move(writer);
        record_path_ = path;
        record_started_ = started;
        record_samples_ = 0;
        record_cycle_changes_ = 0;
        mode_ = Mode::Record;
        state = snapshot_locked();
    }
    save_state(state);
    event("recording", fmt::format("recording started by {} into {} (detection is off while recording)", by, path));
    return status();
}

RobotSession::ClosedRecording RobotSession::close_recording_locked() {
    if (!recorder_) throw std::invalid_argument(fmt::format("robot '{}' is not recording", config_.id));
    ClosedRecording r;
    r.writer = std::move(recorder_);
    r.path = record_path_;
    r.started = record_started_;
    r.samples = record_samples_;
    r.cycles = record_cycle_changes_ > 0 ? record_cycle_changes_ - 1 : 0;
    mode_ = Mode::Idle;
    return r;
}

nlohmann::json RobotSession::commit_recording(ClosedRecording r, const std::string& by) {
    // Durable before it is listed: the CSV reaches the disk, then its row is committed.
    const RecordWriter::Result written = r.writer->finish();
    r.writer.reset();
    if (!written.error.empty()) {
        event("recording", fmt::format("recording into {} not committed: {}", r.path, written.error));
        throw std::runtime_error(written.error);
    }
    const std::int64_t id = store_.add_recording(config_.id, r.path, r.started, r.samples, r.cycles);
    spdlog::info("robot {}: recording {} committed by {}: {} samples, {} complete cycles, {}", config_.id, id, by, r.samples, r.cycles,
                 r.path);
    return {{"id", id}, {"path", r.path}, {"samples", r.samples}, {"cycles", r.cycles}};
}

nlohmann::json RobotSession::stop_recording(const std::string& by) {
    ClosedRecording closed;
    StateSnapshot state;
    {
        auto lk = lock();
        closed = close_recording_locked();
        state = snapshot_locked();
    }
    save_state(state);
    const nlohmann::json r = commit_recording(std::move(closed), by);
    event("recording", fmt::format("recording {} stopped by {}: {} samples, {} complete cycles", r["id"].get<std::int64_t>(), by,
                                   r["samples"].get<std::size_t>(), r["cycles"].get<std::size_t>()));
    return r;
}

nlohmann::json RobotSession::activate(std::int64_t profile_id, const Profile& profile, const std::string& by) {
    if (profile.joints != config_.joints) {
        throw std::invalid_argument(fmt::format("profile {} has {} joints; robot '{}' has {}", profile_id, profile.joints, config_.id, config_.joints));
    }
    if (profile.unit != config_.unit) {
        throw std::invalid_argument(fmt::format("profile {} is in {}; robot '{}' sends {}", profile_id, to_string(profile.unit), config_.id,
                                                to_string(config_.unit)));
    }
    if (profile.payload && !profile.payload->beyond_reference_part && !config_.payload) {
        // Its samples would be compared unloaded of a payload nobody declares: measured offline,
        // a VP-6242-like nominal run without the declaration stopped 175 times in 40 cycles. (A
        // model of the payload beyond the reference's part takes nothing off an undeclared sample.)
        throw std::invalid_argument(fmt::format("profile {} has a payload model (its recordings declared the payload); robot '{}' is "
                                                "configured without the payload: set \"payload\": true in its configuration, or "
                                                "calibrate on recordings that do not declare it",
                                                profile_id, config_.id));
    }
    auto detector = std::make_unique<Detector>(profile);
    auto shared = std::make_shared<const Profile>(profile);
    nlohmann::json summary = {{"id", profile_id}, {"window", profile.window}, {"method", to_string(profile.method)},
                              {"reference_samples", profile.reference.size()}};
    StateSnapshot state;
    {
        auto lk = lock();
        reserve_evidence_locked(profile);
        reset_adaptation_locked(profile);
        detector_ = std::move(detector);
        profile_ = std::move(shared);
        profile_id_ = profile_id;
        profile_summary_ = std::move(summary);
        in_stop_run_ = false;
        state = snapshot_locked();
    }
    save_state(state);
    event("profile", fmt::format("profile {} activated by {} (window {}, reference {} samples, {})", profile_id, by, profile.window,
                                 profile.reference.size(), to_string(profile.method)));
    return status();
}

nlohmann::json RobotSession::resume(const std::string& by) {
    std::string was;
    StateSnapshot state;
    {
        auto lk = lock();
        if (!latched_) throw std::invalid_argument(fmt::format("robot '{}' is not stopped; nothing to resume", config_.id));
        was = latch_reason_.data();
        latched_ = false;
        latch_reason_[0] = '\0';
        in_stop_run_ = false;
        if (detector_) detector_->reset();
        const double period = link_ != 0 ? handshake_.period : 0.004;
        grace_left_ = static_cast<std::size_t>(std::ceil(settings_.resume_grace_s / std::max(period, 1e-4)));
        state = snapshot_locked();
    }
    save_state(state);
    event("resume", fmt::format("resumed by {} (the stop was: {})", by, was));
    return status();
}

std::uint64_t RobotSession::feed(std::uint64_t after, std::size_t decimate, std::vector<FeedPoint>& out) {
    auto lk = lock();
    if (ring_next_ == 0) return after;
    const std::uint64_t oldest = ring_next_ > ring_.size() ? ring_next_ - ring_.size() : 0;
    std::uint64_t from = std::max(oldest, after + 1);
    if (after == UINT64_MAX) from = oldest;
    for (std::uint64_t i = from; i < ring_next_; ++i) {
        if (decimate <= 1 || i % decimate == 0 || i + 1 == ring_next_) out.push_back(ring_[i % ring_.size()]);
    }
    return ring_next_ - 1;
}

nlohmann::json RobotSession::reference_summary() {
    std::shared_ptr<const Profile> profile;
    std::int64_t profile_id = 0;
    {
        auto lk = lock();
        profile = profile_;
        profile_id = profile_id_;
    }
    if (!profile) return nullptr;
    const Profile& p = *profile;  // the (large) answer is built without the lock
    nlohmann::json joints = nlohmann::json::array();
    for (std::size_t j = 0; j < p.joints; ++j) {
        joints.push_back({{"joint", j + 1}, {"theta1", p.thresholds[j].rule1.value}, {"theta2", p.thresholds[j].rule2.value}});
    }
    nlohmann::json out = {{"profile", profile_id}, {"window", p.window}, {"reference_samples", p.reference.size()},
                          {"reference", p.reference.tau}, {"thresholds", joints}, {"detector", to_string(p.detector)},
                          {"matched", describe_matched_signal(p)}};
    if (p.phase) out["phase_theta1"] = p.phase->rule1;  // per joint, per reference sample
    return out;
}

}  // namespace warpguard::daemon
