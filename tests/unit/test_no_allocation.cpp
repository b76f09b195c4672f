// The per-sample path must not allocate after warm-up. This binary replaces the global operator
// new to count every allocation made while the detector runs.
#include <atomic>
#include <cmath>
#include <span>
#include <cstdlib>
#include <new>
#include <vector>

#include <catch2/catch.hpp>

#include "test_data.hpp"
#include "warpguard/detector.hpp"
#include "warpguard/envelope.hpp"
#include "warpguard/model_residual.hpp"
#include "warpguard/streaming_mdtw.hpp"
#include "robot_server.hpp"
#include "session.hpp"
#include "wire_protocol.hpp"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <thread>
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <fmt/format.h>

namespace {
std::atomic<std::size_t> g_allocations{0};
// Allocations made on threads that flagged themselves (t_watched) while g_watching is set.
std::atomic<std::size_t> g_watched_allocations{0};
std::atomic<bool> g_watching{false};
thread_local bool t_watched = false;
}

// GCC cannot see that the replacement new below pairs malloc with free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t size) {
    ++g_allocations;
    if (t_watched && g_watching.load(std::memory_order_relaxed)) ++g_watched_allocations;
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace warpguard;

namespace {

// A robot session in SHADOW on a SQLite store in a scratch directory, its robot attached on link 7.
struct SessionRig {
    std::filesystem::path dir;
    daemon::Store store;
    daemon::RobotSession session;
    SessionRig(const char* name, const Profile& profile)
        : dir(std::filesystem::temp_directory_path() / fmt::format("warpguard-{}-{}", name, ::getpid())),
          store((std::filesystem::create_directories(dir), (dir / "warpguard.sqlite").string())),
          session(config(profile), store, daemon::SessionSettings{1000.0, 0.0, dir.string(), nullptr}, nullptr) {
        session.restore(daemon::RobotState{"planar", "shadow", false, "", 1}, profile);
        protocol::Handshake h;
        h.robot_id = "planar";
        h.joints = profile.joints;
        h.unit = profile.unit;
        h.signal = profile.signal;
        REQUIRE(session.attach(7, h, "127.0.0.1:1").accepted);
    }
    ~SessionRig() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    static daemon::RobotConfig config(const Profile& profile) {
        daemon::RobotConfig c;
        c.id = "planar";
        c.joints = profile.joints;
        c.unit = profile.unit;
        c.signal = profile.signal;
        return c;
    }
};

}  // namespace

TEST_CASE("Detector::update does not allocate after construction", "[detector][realtime]") {
    const Recording& rec = test::nominal_recording();
    Detector detector(test::planar_profile());
    std::vector<double> tau(rec.joints()), q(rec.joints());
    const std::size_t before = g_allocations.load();
    std::size_t stops = 0;
    for (std::size_t i = 0; i < 1500; ++i) stops += detector.update(rec.sample(i, tau, q)).stop();
    detector.reset();
    for (std::size_t i = 1500; i < 2000; ++i) stops += detector.update(rec.sample(i, tau, q)).stop();
    CHECK(g_allocations.load() - before == 0);
    CHECK(detector.updates() == 500);
    // The detector did real work: the published thresholds flag some nominal samples (heavy tails).
    CHECK(stops > 0);
}

TEST_CASE("the phase-aware detector does not allocate per sample", "[detector][realtime]") {
    Detector detector(test::phase_profile());
    const Recording& rec = test::nominal_recording();
    std::vector<double> tau(rec.joints()), q(rec.joints());
    for (std::size_t i = 0; i < 50; ++i) detector.update(rec.sample(i, tau, q));  // warm-up
    const std::size_t before = g_allocations.load();
    std::size_t stops = 0;
    for (std::size_t i = 50; i < rec.size(); ++i) stops += detector.update(rec.sample(i, tau, q)).stop();
    CHECK(g_allocations.load() == before);
    CHECK(detector.updates() == rec.size());
    (void)stops;
}

TEST_CASE("the KA-mDTW detector does not allocate per sample either", "[detector][realtime]") {
    Profile p = test::planar_profile();
    p.method = MatchingMethod::KaMdtw;
    p.kinematics = KinematicsSettings{planar_arm::default_arm().dh_model(),
                                      ForceDirection::make(ForceDirection::Frame::Base, {0, -1, 0}), 1e-3, {}};
    // The planar arm never points straight up in this task, so the reference has no near-zero lever.
    Detector detector(p);
    const Recording& rec = test::nominal_recording();
    std::vector<double> tau(rec.joints()), q(rec.joints());
    const std::size_t before = g_allocations.load();
    for (std::size_t i = 0; i < 1000; ++i) detector.update(rec.sample(i, tau, q));
    CHECK(g_allocations.load() - before == 0);
}

TEST_CASE("a detector matching the deviation from an arm model does not allocate per sample", "[detector][realtime]") {
    const Recording& rec = test::nominal_recording();
    const Recording* runs[] = {&rec};  // the dry run: the planar arm carries nothing
    const ArmDynamics arm = fit_arm_dynamics(planar_arm::default_arm().dh_model(), runs, Eigen::Vector3d(0, -9.81, 0));
    CalibrationOptions opt;
    opt.window = 20;
    opt.arm = arm;
    // with the speed model, so that a reported turn opens the arm model's lag band
    opt.dynamics_model = planar_arm::default_arm().dh_model();
    opt.gravity = Eigen::Vector3d(0, -9.81, 0);
    const NamedRecording nominal[] = {{"nominal14.csv", &test::long_nominal_recording()}};
    Detector detector(calibrate({"reference.csv", &test::reference_recording()}, nominal, opt));
    // The robot reports its override, turned from 100 to 80 % a third of the way in.
    Recording reporting = rec;
    reporting.speed_override.assign(rec.size(), 1.0);
    for (std::size_t i = rec.size() / 3; i < rec.size(); ++i) reporting.speed_override[i] = 0.8;
    std::vector<double> tau(rec.joints()), q(rec.joints());
    detector.update(rec.sample(0, tau, q));  // warm-up
    const std::size_t before = g_allocations.load();
    for (std::size_t i = 1; i < rec.size(); ++i) detector.update(rec.sample(i, tau, q));
    detector.reset();
    std::size_t band_open = 0;
    for (std::size_t i = 0; i < reporting.size(); ++i) {
        detector.update(reporting.sample(i, tau, q));
        band_open += detector.arm_lag_band(0) > 0.0 || detector.arm_lag_band(1) > 0.0;
    }
    detector.reset();
    for (std::size_t i = 0; i < 200; ++i) detector.update(rec.sample(i, tau, q));
    CHECK(g_allocations.load() == before);
    CHECK(detector.updates() == 200);
    CHECK(band_open > 0);  // the turn's path ran
}

TEST_CASE("EnvelopeChecker::update does not allocate", "[envelope][realtime]") {
    const Recording& rec = test::nominal_recording();
    EnvelopeChecker checker(derive_envelope(rec, "nominal", {}));
    std::vector<double> tau(rec.joints()), q(rec.joints());
    const std::size_t before = g_allocations.load();
    for (std::size_t i = 0; i < rec.size(); ++i) checker.update(rec.sample(i, tau, q));
    CHECK(g_allocations.load() - before == 0);
    CHECK(checker.armed());
}

TEST_CASE("ResidualChecker::update does not allocate, with a declared payload too", "[residual][realtime]") {
    Recording rec = test::nominal_recording();
    rec.payload.assign(rec.size(), 0.0);
    const Recording* runs[] = {&test::long_nominal_recording()};
    const ArmDynamics arm = fit_arm_dynamics(planar_arm::default_arm().dh_model(), runs, Eigen::Vector3d(0, -9.81, 0));
    PayloadModel payload;
    payload.model = planar_arm::default_arm().dh_model();
    payload.gravity = Eigen::Vector3d(0, -9.81, 0);
    payload.signal_per_nm.assign(rec.joints(), 1.0);
    const ResidualLimits limits = derive_residual_limits(arm, payload, rec, "nominal.csv");
    ResidualChecker checker(limits), empty(limits);  // the second is told no part is carried
    std::vector<double> tau(rec.joints()), q(rec.joints());
    const std::size_t before = g_allocations.load();
    double taken_off = 0.0;  // what the payload's path took off on the samples that declare a part
    for (std::size_t i = 0; i < rec.size(); ++i) {
        Sample s = rec.sample(i, tau, q);
        s.payload = 0.0;
        empty.update(s);
        s.payload = i % 2 == 0 ? 0.0 : 1.0;  // the payload's path on every other sample
        checker.update(s);
        taken_off += std::abs(checker.residual()[1] - empty.residual()[1]);
    }
    checker.reset();
    CHECK(g_allocations.load() - before == 0);
    CHECK(taken_off > 0.0);
}

TEST_CASE("the daemon's per-sample path (RobotSession::on_sample) does not allocate", "[daemon][realtime]") {
    const Recording& rec = test::nominal_recording();
    SessionRig rig("alloc-test", test::planar_profile());
    daemon::Store& store = rig.store;
    daemon::RobotSession& session = rig.session;
    protocol::SampleFrame f;
    f.joints = rec.joints();
    std::vector<double> tau(rec.joints()), q(rec.joints());
    auto frame = [&](std::size_t i) {
        const Sample s = rec.sample(i, tau, q);
        f.seq = static_cast<std::int64_t>(i);
        f.cycle = s.cycle;
        f.t = s.t;
        for (std::size_t j = 0; j < f.joints; ++j) {
            f.signal[j] = s.tau[j];
            f.angle[j] = s.q[j];
        }
        return f;
    };
    for (std::size_t i = 0; i < 50; ++i) session.on_sample(7, frame(i), daemon::Clock::now());  // warm-up
    session.flush();
    const std::size_t before = g_allocations.load();
    std::size_t stops = 0;
    for (std::size_t i = 50; i < 1500; ++i) stops += session.on_sample(7, frame(i), daemon::Clock::now()) == protocol::Reply::Stop;
    const std::size_t shadow_allocations = g_allocations.load() - before;
    CHECK(shadow_allocations == 0);
    CHECK(stops == 0);  // SHADOW never stops
    session.flush();    // stores the would-stop events (allocates; after the replies)
    CHECK(store.events("planar", 0, 1000, "would_stop").size() > 0);
    session.set_mode(daemon::Mode::Detect, "test");
    const std::size_t before_detect = g_allocations.load();
    for (std::size_t i = 1500; i < 2000; ++i) stops += session.on_sample(7, frame(i), daemon::Clock::now()) == protocol::Reply::Stop;
    CHECK(g_allocations.load() - before_detect == 0);
    CHECK(stops > 0);  // the published thresholds stop on these nominal samples (heavy tails): latched
    session.flush();
    CHECK(store.events("planar", 0, 10, "stop").size() == 1);
    // RECORD: the sample is copied into the writer's ring, the file is written on the writer's thread.
    session.start_recording("test");
    const std::size_t before_record = g_allocations.load();
    for (std::size_t i = 2000; i < 2500; ++i) session.on_sample(7, frame(i), daemon::Clock::now());
    CHECK(g_allocations.load() - before_record == 0);
    CHECK(session.stop_recording("test").at("samples") == 500);
}

TEST_CASE("the daemon's per-sample path records the phase-aware detector's adaptations without allocating", "[daemon][realtime]") {
    // Friction rising by 60 % over 16 cycles: the learned drift grows, and each cycle's check
    // (RobotSession::note_adaptation_locked, on the robot's thread) queues adaptation events.
    const Recording rec = test::friction_rising_run(16, 85, 0.6);
    SessionRig rig("alloc-adapt", test::phase_profile());
    daemon::RobotSession& session = rig.session;
    protocol::SampleFrame f;
    f.joints = rec.joints();
    std::vector<double> tau(rec.joints()), q(rec.joints());
    std::size_t allocations = 0;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        const Sample s = rec.sample(i, tau, q);
        f.seq = static_cast<std::int64_t>(i);
        f.cycle = s.cycle;
        f.t = s.t;
        for (std::size_t j = 0; j < f.joints; ++j) f.signal[j] = s.tau[j], f.angle[j] = s.q[j];
        const std::size_t before = g_allocations.load();
        session.on_sample(7, f, daemon::Clock::now());
        if (i >= 50) allocations += g_allocations.load() - before;
        if (i % 50 == 0) session.flush();  // stores what was queued (allocates; after the replies)
    }
    session.flush();
    CHECK(allocations == 0);
    CHECK(rig.store.events("planar", 0, 1000, "adaptation").size() >= 2);
}

TEST_CASE("the phase-aware detector with a speed model does not allocate per sample", "[detector][realtime]") {
    CalibrationOptions opt;
    opt.window = 20;
    opt.dynamics_model = planar_arm::default_arm().dh_model();
    opt.gravity = Eigen::Vector3d(0, -9.81, 0);  // the planar arm moves in its base's x-y plane
    const NamedRecording nominal[] = {{"nominal14.csv", &test::long_nominal_recording()}};
    const Profile p = calibrate({"reference.csv", &test::reference_recording()}, nominal, opt);
    REQUIRE(p.speed.has_value());
    Detector detector(p);
    const Recording& rec = test::nominal_recording();
    std::vector<double> tau(rec.joints()), q(rec.joints());
    for (std::size_t i = 0; i < 50; ++i) detector.update(rec.sample(i, tau, q));  // warm-up
    const std::size_t before = g_allocations.load();
    for (std::size_t i = 50; i < rec.size(); ++i) detector.update(rec.sample(i, tau, q));
    CHECK(g_allocations.load() == before);
    CHECK(detector.speed_ratio() == Approx(1.0).margin(0.05));

    // With a declared payload: the tool point's Jacobian and the payload's torques per sample.
    Profile with_payload = p;
    PayloadModel payload;
    payload.model = planar_arm::default_arm().dh_model();
    payload.gravity = opt.gravity;
    payload.signal_per_nm.assign(p.joints, 1.0);
    with_payload.payload = payload;
    with_payload.reference.payload.assign(p.reference.size(), 0.5);
    Detector carrying(with_payload);
    REQUIRE(carrying.has_payload_model());
    for (std::size_t i = 0; i < 50; ++i) {
        Sample s = rec.sample(i, tau, q);
        s.payload = 1.0;
        carrying.update(s);
    }
    const std::size_t before_payload = g_allocations.load();
    for (std::size_t i = 50; i < rec.size(); ++i) {
        Sample s = rec.sample(i, tau, q);
        s.payload = 1.0;
        carrying.update(s);
    }
    CHECK(g_allocations.load() == before_payload);
    CHECK(carrying.payload_declared());
    CHECK(carrying.payload_taken_off(1) != 0.0);
}

TEST_CASE("the streaming matcher's float sweep does not allocate per sample", "[streaming][realtime]") {
    // A smooth 6-joint stream with one impact on joint 2 (whose windows then take the coarse rest
    // bound), the float wavefront forced (and its exact fallback), then Auto.
    const std::size_t joints = 6, m = 32, n = 2000, samples = 600;
    // Joint k's signal at time t (reference samples), on a 0.001 grid.
    auto signal = [](std::size_t k, double t) {
        const double x = t / 200.0 + static_cast<double>(k);
        return std::round((3.0 * std::sin(x) + std::sin(2.7 * x)) * 1000.0) / 1000.0;
    };
    std::vector<std::vector<double>> refs(joints, std::vector<double>(n));
    for (std::size_t k = 0; k < joints; ++k) {
        for (std::size_t j = 0; j < n; ++j) refs[k][j] = signal(k, static_cast<double>(j));
    }
    // Every window of the stream, prepared before counting (0.9 times the reference's rate).
    std::vector<double> windows(samples * joints * m);
    for (std::size_t s = 0; s < samples; ++s) {
        for (std::size_t k = 0; k < joints; ++k) {
            for (std::size_t i = 0; i < m; ++i) {
                const std::size_t at = s + i;  // the sample's time in the stream
                const double impact = k == 2 && at >= 300 ? 25.0 * std::pow(0.85, static_cast<double>(at - 300)) : 0.0;
                windows[(s * joints + k) * m + i] = signal(k, 0.9 * static_cast<double>(at + 100)) + impact;
            }
        }
    }
    for (const auto kernel : {StreamingMdtw::SweepKernel::WavefrontFloat, StreamingMdtw::SweepKernel::Auto}) {
        StreamingMdtw matcher(m, refs);
        matcher.set_kernel(kernel);
        const std::span<const double> all(windows);
        matcher.match(all.subspan(0, joints * m));  // warm-up: the first sample has no bound
        const std::size_t before = g_allocations.load();
        std::size_t float_samples = 0;
        for (std::size_t s = 1; s < samples; ++s) {
            matcher.match(all.subspan(s * joints * m, joints * m));
            float_samples += matcher.last_kernel() == StreamingMdtw::SweepKernel::WavefrontFloat;
        }
        CHECK(g_allocations.load() == before);
        if (StreamingMdtw::float_sweep_built()) CHECK(float_samples > samples / 2);
        if (StreamingMdtw::float_sweep_built()) CHECK(matcher.rest_bound_sweeps() > 0u);
        CHECK(matcher.result(0).path.size() >= m);
    }
}

TEST_CASE("a sample's whole way through the daemon's robot link - socket read, decoding, decision, reply - does not allocate", "[daemon][realtime]") {
    // The real link (RobotServer on loopback, its socket and timer on a strand, the session in
    // DETECT with the phase-aware profile) against a client that sends the nominal recording's
    // samples as the URScript task does and waits for each reply. Counted: every allocation on the
    // link's thread from the 100th sample on. Until 2026-12-04 Asio built a heap copy of the
    // link's strand for every read (two per sample: a type-erased executor's work tracking).
    const Recording& rec = test::nominal_recording();
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("warpguard-alloc-link-{}", ::getpid());
    std::filesystem::create_directories(dir);
    {
        daemon::Store store((dir / "warpguard.sqlite").string());
        daemon::Registry registry;
        std::vector<std::function<void()>> posted;  // the background thread's work, run after the count
        std::mutex posted_mutex;
        const daemon::PostBackground post = [&](std::function<void()> work) {
            std::lock_guard lock(posted_mutex);
            posted.push_back(std::move(work));
        };
        auto session = std::make_shared<daemon::RobotSession>(SessionRig::config(test::phase_profile()), store,
                                                              daemon::SessionSettings{1000.0, 0.0, dir.string(), post}, nullptr);
        session->restore(daemon::RobotState{"planar", "detect", false, "", 1}, test::phase_profile());
        REQUIRE(registry.add(session));
        boost::asio::io_context io;
        daemon::RobotServer server(io, daemon::Endpoint{"127.0.0.1", 0}, registry, store, 30.0, post);
        auto guard = boost::asio::make_work_guard(io);
        std::thread link_thread([&] {
            t_watched = true;
            io.run();
        });

        // Every line encoded before anything is counted.
        protocol::Handshake h;
        h.robot_id = "planar";
        h.joints = rec.joints();
        h.unit = test::phase_profile().unit;
        h.signal = test::phase_profile().signal;
        std::vector<std::string> lines;
        protocol::SampleFrame f;
        f.joints = rec.joints();
        std::vector<double> tau(rec.joints()), q(rec.joints());
        const std::size_t count = std::min<std::size_t>(rec.size(), 1500);
        for (std::size_t i = 0; i < count; ++i) {
            const Sample smp = rec.sample(i, tau, q);
            f.seq = static_cast<std::int64_t>(i);
            f.cycle = smp.cycle;
            f.t = smp.t;
            for (std::size_t j = 0; j < f.joints; ++j) f.signal[j] = smp.tau[j], f.angle[j] = smp.q[j];
            lines.push_back(protocol::encode_sample_ascii(f, protocol::AngleUnit::Rad));
        }
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(server.port());
        ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
        REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        auto exchange = [&](const std::string& line) {  // one reply of 4 bytes (URScript's int32)
            if (::send(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) return -1;
            unsigned char reply[4];
            std::size_t have = 0;
            while (have < 4) {
                const ssize_t r = ::recv(fd, reply + have, 4 - have, 0);
                if (r <= 0) return -1;
                have += static_cast<std::size_t>(r);
            }
            return static_cast<int>(reply[3]);
        };
        REQUIRE(exchange(protocol::encode_handshake(h)) == 0);  // CONTINUE
        std::size_t answered = 0, stops = 0;
        for (std::size_t i = 0; i < count; ++i) {
            if (i == 100) g_watching = true;  // warm-up over: the window is full, the buffers are made
            const int r = exchange(lines[i]);
            answered += r >= 0;
            stops += r == 1;
        }
        g_watching = false;
        ::close(fd);
        guard.reset();
        server.stop();
        io.stop();
        link_thread.join();
        CHECK(answered == count);
        CHECK(stops == 0);  // nominal samples: the phase-aware detector lets them pass
        CHECK(g_watched_allocations.load() == 0);
        CHECK(session->status().at("samples").get<std::size_t>() == count);
        for (auto& work : posted) work();
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}
