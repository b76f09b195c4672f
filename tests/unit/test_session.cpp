// The daemon's RobotSession: what it judges, and that slow work leaves the robot's thread.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "session.hpp"
#include "warpguard/dynamics.hpp"
#include "test_data.hpp"

using namespace warpguard;

namespace {

struct Fixture {
    std::filesystem::path dir;
    std::unique_ptr<daemon::Store> store;
    std::vector<std::function<void()>> queued;  // the "background thread": run by hand
    std::shared_ptr<daemon::RobotSession> session;
    protocol::SampleFrame f;

    explicit Fixture(const char* mode, const Profile& profile = test::planar_profile(), double deadline_ms = 1000.0) {
        static int counter = 0;
        dir = std::filesystem::temp_directory_path() / fmt::format("warpguard-session-test-{}-{}", ::getpid(), ++counter);
        std::filesystem::create_directories(dir);
        store = std::make_unique<daemon::Store>((dir / "warpguard.sqlite").string());
        daemon::RobotConfig config;
        config.id = "planar";
        config.joints = profile.joints;
        config.unit = profile.unit;
        config.signal = profile.signal;
        daemon::SessionSettings settings{deadline_ms, 0.0, dir.string(), [this](std::function<void()> work) { queued.push_back(std::move(work)); }};
        session = std::make_shared<daemon::RobotSession>(config, *store, settings, nullptr);
        session->restore(daemon::RobotState{"planar", mode, false, "", 1}, profile);
        protocol::Handshake h;
        h.robot_id = "planar";
        h.joints = profile.joints;
        h.unit = profile.unit;
        h.signal = profile.signal;
        REQUIRE(session->attach(7, h, "127.0.0.1:1").accepted);
        f.joints = profile.joints;
    }
    ~Fixture() {
        session.reset();
        store.reset();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    void run_background() {
        auto work = std::move(queued);
        queued.clear();
        for (auto& w : work) w();
    }
    // Sample i of the profile's reference itself (never a stop on its own), `offset` added to
    // joint 1, with the given mode bits.
    // Fills `f` with sample i as send() sends it.
    void frame(std::size_t i, double offset = 0.0, std::uint32_t mode = 0) {
        const auto& ref = test::planar_profile().reference;
        const std::size_t k = i % ref.size();
        f.seq = static_cast<std::int64_t>(i);
        f.cycle = 1;
        f.t = 0.01 * static_cast<double>(i);
        f.mode = mode;
        for (std::size_t j = 0; j < f.joints; ++j) {
            f.signal[j] = ref.tau[j][k] + (j == 0 ? offset : 0.0);
            f.angle[j] = ref.q[j][k];
        }
    }
    protocol::Reply send(std::size_t i, double offset = 0.0, std::uint32_t mode = 0) {
        frame(i, offset, mode);
        return session->on_sample(7, f, daemon::Clock::now());
    }
    std::size_t events(const char* kind) { return store->events("planar", 0, 100000, kind).size(); }
};

}  // namespace

TEST_CASE("in SHADOW, samples of a robot that holds itself are not judged", "[daemon]") {
    Fixture fx("shadow");
    const double wild = 50.0 * test::planar_profile().thresholds[0].rule1.value;
    for (std::size_t i = 0; i < 200; ++i) fx.send(i);
    fx.session->request_flush();
    fx.run_background();
    const std::size_t before = fx.events("would_stop");
    CHECK(before == 0);  // the reference itself
    // Held (bit 0) and self-stopped (bit 1): a standing robot whose torque is far from the moving reference.
    for (std::size_t i = 200; i < 400; ++i) fx.send(i, wild, daemon::kBitHeld | daemon::kBitSelfStop);
    fx.session->request_flush();
    fx.run_background();
    CHECK(fx.events("would_stop") == before);
    // The same samples without the held bit are judged, and the detector says it would stop.
    for (std::size_t i = 400; i < 600; ++i) fx.send(i, wild);
    fx.session->request_flush();
    fx.run_background();
    CHECK(fx.events("would_stop") > before);
}

TEST_CASE("what the phase-aware detector learns in operation is recorded as adaptation events and shown in the status", "[daemon]") {
    // Friction rising by 30 % over 40 cycles of the planar task, streamed to a session in SHADOW
    // with the phase-aware profile: the drift the detector learns is recorded as it grows, at most
    // once per cycle, and the status reports the same terms as a detector run offline on the same
    // samples.
    const Profile& profile = test::phase_profile();
    Fixture fx("shadow", profile);
    const Recording rec = test::friction_rising_run(40, 83, 0.3);
    Detector offline(profile);
    std::vector<double> tau(rec.joints()), q(rec.joints());
    for (std::size_t i = 0; i < rec.size(); ++i) {
        const Sample s = rec.sample(i, tau, q);
        offline.update(s);
        fx.f.seq = static_cast<std::int64_t>(i);
        fx.f.cycle = s.cycle;
        fx.f.t = s.t;
        fx.f.mode = 0;
        for (std::size_t j = 0; j < rec.joints(); ++j) fx.f.signal[j] = s.tau[j], fx.f.angle[j] = s.q[j];
        fx.session->on_sample(7, fx.f, daemon::Clock::now());
        if (i % 500 == 0) {
            fx.session->request_flush();
            fx.run_background();
        }
    }
    fx.session->request_flush();
    fx.run_background();
    const auto records = fx.store->events("planar", 0, 100000, "adaptation");
    INFO(records.size() << " adaptation events in 40 cycles; first: " << (records.empty() ? "" : records.front().at("reason").get<std::string>())
                        << "; last: " << (records.empty() ? "" : records.back().at("reason").get<std::string>()));
    CHECK(records.size() >= 2);  // it grew, and was recorded more than once
    CHECK(records.size() <= 40);  // never more than once per cycle
    for (const auto& r : records) {
        const std::string reason = r.at("reason").get<std::string>();
        CHECK(reason.find("friction drift Coulomb") != std::string::npos);
        CHECK(r.at("cycle").get<std::int64_t>() >= 0);
    }
    // The status carries the learned terms, the same as the offline detector's.
    const auto status = fx.session->status();
    REQUIRE(status.at("adaptation").is_object());
    const auto& friction = status.at("adaptation").at("friction");
    REQUIRE(friction.size() == profile.joints);
    double largest = 0.0;
    for (std::size_t j = 0; j < profile.joints; ++j) {
        CHECK(friction[j].at("coulomb").get<double>() == offline.friction_drift(j)[0]);
        CHECK(friction[j].at("viscous").get<double>() == offline.friction_drift(j)[1]);
        largest = std::max(largest, std::abs(friction[j].at("coulomb").get<double>()));
    }
    CHECK(largest > 0.01);
    // The published detector learns nothing: no adaptation in its status.
    Fixture published("shadow");
    CHECK(published.session->status().at("adaptation").is_null());
}

TEST_CASE("a STOP is answered at once and its event is stored only by the background work", "[daemon]") {
    Fixture fx("detect");
    fx.run_background();  // the connect event
    const std::size_t connects = fx.events("connect");
    CHECK(connects == 1);
    const double wild = 50.0 * test::planar_profile().thresholds[0].rule1.value;
    protocol::Reply last = protocol::Reply::Continue;
    std::size_t i = 100;
    for (; i < 400 && last == protocol::Reply::Continue; ++i) last = fx.send(i, i >= 200 ? wild : 0.0);
    REQUIRE(last == protocol::Reply::Stop);
    CHECK(fx.send(i) == protocol::Reply::Stop);  // latched
    fx.session->request_flush();
    CHECK(fx.events("stop") == 0);   // nothing written on the robot's thread
    REQUIRE(fx.queued.size() == 1);  // one flush queued, however often it was asked for
    fx.session->request_flush();
    CHECK(fx.queued.size() == 1);
    fx.run_background();
    const auto stops = fx.store->events("planar", 0, 10, "stop");
    REQUIRE(stops.size() == 1);
    CHECK(stops[0].at("reason").get<std::string>().find("joint 1") != std::string::npos);
    CHECK(stops[0].at("has_evidence").get<bool>());
    CHECK(fx.store->states().at(0).latched);  // the latch reached the database too
}

TEST_CASE("a would-be stop keeps its evidence when another event follows it before the flush", "[daemon]") {
    Fixture fx("shadow");
    fx.run_background();
    const double wild = 50.0 * test::planar_profile().thresholds[0].rule1.value;
    // Would-be stops are queued (SHADOW answers CONTINUE); a malformed line follows before the
    // background thread flushes.
    for (std::size_t i = 100; i < 230; ++i) REQUIRE(fx.send(i, i >= 200 ? wild : 0.0) == protocol::Reply::Continue);
    fx.session->on_malformed(7, "test: a line that does not parse");
    fx.session->request_flush();
    fx.run_background();
    const auto would = fx.store->events("planar", 0, 100, "would_stop");
    REQUIRE(!would.empty());
    // The last would-be stop's window is the one captured: one of them carries it. Before
    // 2026-12-04 none did (the fault after them was the batch's last event).
    CHECK(std::count_if(would.begin(), would.end(), [](const nlohmann::json& e) { return e.at("has_evidence").get<bool>(); }) == 1);
    CHECK(fx.events("fault") == 1);
}

TEST_CASE("a profile with a payload model is refused for a robot configured without the payload, and the active one stays", "[daemon]") {
    Fixture fx("detect");
    fx.session->activate(5, test::planar_profile(), "test");
    Profile with_model = test::planar_profile();
    with_model.reference.payload.assign(with_model.reference.size(), 0.0);
    PayloadModel model;
    model.model = planar_arm::default_arm().dh_model();
    model.signal_per_nm.assign(with_model.joints, 1.0);
    with_model.payload = model;
    CHECK_THROWS_WITH(fx.session->activate(6, with_model, "test"),
                      Catch::Contains("profile 6 has a payload model") && Catch::Contains("robot 'planar' is configured without the payload"));
    CHECK(fx.session->status().at("profile").at("id") == 5);
    // The active profile still judges: the reference itself runs on.
    std::size_t stops = 0;
    for (std::size_t i = 0; i < 200; ++i) stops += fx.send(i) == protocol::Reply::Stop;
    CHECK(stops == 0);
}

TEST_CASE("a recording is written off the robot's thread: every sample reaches the committed CSV, in order and exact", "[daemon]") {
    Fixture fx("idle");
    fx.session->start_recording("test");
    const std::size_t n = 3000;  // 12 s at 250 Hz: several of the writer's 20 ms wake-ups and stdio buffers
    for (std::size_t i = 0; i < n; ++i) {
        fx.frame(i);
        fx.f.cycle = 1 + static_cast<std::int64_t>(i / 1000);
        fx.f.t = 0.004 * static_cast<double>(i) + 1e-9;  // not representable in few digits: %.17g must keep it
        REQUIRE(fx.session->on_sample(7, fx.f, daemon::Clock::now()) == protocol::Reply::Continue);
    }
    const nlohmann::json r = fx.session->stop_recording("test");
    CHECK(r.at("samples") == n);
    CHECK(r.at("cycles") == 1);  // cycles 1, 2, 3: only cycle 2 is known to be whole
    std::FILE* in = std::fopen(r.at("path").get<std::string>().c_str(), "r");
    REQUIRE(in);
    char line[4096];
    std::size_t data = 0;
    bool in_order = true, exact = true;
    while (std::fgets(line, sizeof line, in)) {
        if (line[0] == '#' || line[0] == 't') continue;
        double t = 0;
        long long seq = -1;
        REQUIRE(std::sscanf(line, "%lf,%lld", &t, &seq) == 2);
        in_order = in_order && seq == static_cast<long long>(data);
        exact = exact && t == 0.004 * static_cast<double>(data) + 1e-9;
        ++data;
    }
    std::fclose(in);
    CHECK(data == n);
    CHECK(in_order);
    CHECK(exact);
}

TEST_CASE("a recording whose writer falls behind loses samples, counts them and is not committed", "[daemon]") {
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("warpguard-writer-test-{}", ::getpid());
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "r.csv").string();
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f);
    // A ring of 8 samples and 20,000 samples pushed back to back: the writer wakes every 20 ms.
    daemon::RecordWriter writer(f, nullptr, path, false, false, 8);
    protocol::SampleFrame frame;
    frame.joints = 2;
    std::size_t accepted = 0;
    for (std::size_t i = 0; i < 20000; ++i) {
        frame.seq = static_cast<std::int64_t>(i);
        accepted += writer.push(frame);
    }
    const auto r = writer.finish();
    CHECK(r.lost == 20000 - accepted);
    CHECK(r.lost > 0);
    CHECK(r.written == accepted);
    CHECK_THAT(r.error, Catch::Contains(fmt::format("{} of 20000 samples were lost", r.lost)) && Catch::Contains("not committed"));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

TEST_CASE("without a configured deadline, a decision whose reply still reaches the robot in time is no deadline miss", "[daemon]") {
    // The handshake's timeout is the protocol's default, 20 ms (a UR's); deadline_ms 0 = the default share.
    Fixture fx("detect", test::planar_profile(), 0.0);
    CHECK(fx.session->status().at("deadline_ms").get<double>() == Approx(15.0));
    for (std::size_t i = 0; i < 40; ++i) REQUIRE(fx.send(i) == protocol::Reply::Continue);  // the window fills
    // Decided 14 ms after the sample came in (a thread not run for that long): the CONTINUE still
    // reaches the robot 6 ms before it would stop by itself.
    fx.f.seq = 40;
    CHECK(fx.session->on_sample(7, fx.f, daemon::Clock::now() - std::chrono::milliseconds(14)) == protocol::Reply::Continue);
    CHECK(fx.session->status().at("deadline_misses") == 0);
    // Decided 16 ms after: too close to the robot's 20 ms for the reply to be trusted to arrive.
    fx.f.seq = 41;
    CHECK(fx.session->on_sample(7, fx.f, daemon::Clock::now() - std::chrono::milliseconds(16)) == protocol::Reply::Stop);
    CHECK(fx.session->status().at("deadline_misses") == 1);
    fx.session->request_flush();
    fx.run_background();
    const auto stops = fx.store->events("planar", 0, 10, "fault");  // a deadline miss is a fault event
    REQUIRE(stops.size() == 1);
    CHECK_THAT(stops[0].at("reason").get<std::string>(), Catch::Contains("sample seq 41 decided after 16") && Catch::Contains("(deadline 15.00 ms"));
}

TEST_CASE("a late decision outside DETECT is reported as a 'late' event, at most once a second, and never stops", "[daemon]") {
    Fixture fx("shadow");
    for (std::size_t i = 0; i < 40; ++i) fx.send(i);  // warm-up: the window fills
    fx.run_background();
    // The deadline is 1000 ms here (SessionSettings): two samples "received" 1.5 s ago.
    const auto long_ago = daemon::Clock::now() - std::chrono::milliseconds(1500);
    fx.f.seq = 40;
    CHECK(fx.session->on_sample(7, fx.f, long_ago) == protocol::Reply::Continue);
    fx.f.seq = 41;
    CHECK(fx.session->on_sample(7, fx.f, long_ago) == protocol::Reply::Continue);
    fx.session->request_flush();
    fx.run_background();
    const auto late = fx.store->events("planar", 0, 10, "late");
    REQUIRE(late.size() == 1);  // the second one within the same second is counted, not logged
    CHECK_THAT(late[0].at("reason").get<std::string>(), Catch::Contains("sample seq 40 decided after 15") && Catch::Contains("waiting for the session lock"));
    CHECK(fx.session->status().at("deadline_misses") == 2);
    CHECK(fx.events("stop") == 0);
}

TEST_CASE("a robot configured with a linear joint takes only handshakes that declare it, for samples and identification", "[daemon]") {
    // The configuration: "linear": [3] on a 4-joint robot; a joint past the robot's, or twice, is refused.
    const nlohmann::json json = {{"id", "cell2-hs045"}, {"vendor", "denso"}, {"signal", "torque"}, {"unit", "percent"},
                                 {"joints", 4},         {"linear", {3}}};
    const daemon::RobotConfig config = daemon::robot_config_from_json(json, "robots[0]");
    CHECK(config.linear == 0b100);
    CHECK(daemon::to_json(config).at("linear") == nlohmann::json::array({3}));
    nlohmann::json bad = json;
    bad["linear"] = {5};
    CHECK_THROWS_WITH(daemon::robot_config_from_json(bad, "robots[0]"),
                      "robots[0] (robot 'cell2-hs045'): linear joint 5 is not one of joints 1-4 (or is listed twice)");
    bad["linear"] = {3, 3};
    CHECK_THROWS_WITH(daemon::robot_config_from_json(bad, "robots[0]"), Catch::Contains("linear joint 3 is not one of joints 1-4"));

    const auto dir = std::filesystem::temp_directory_path() / fmt::format("warpguard-session-linear-{}", ::getpid());
    std::filesystem::create_directories(dir);
    {
        daemon::Store store((dir / "warpguard.sqlite").string());
        daemon::SessionSettings settings{1000.0, 0.0, dir.string(), [](std::function<void()> work) { work(); }};
        auto session = std::make_shared<daemon::RobotSession>(config, store, settings, nullptr);
        protocol::Handshake h = protocol::parse_handshake("WG1;cell2-hs045;denso;torque;percent;4;deg;8;150;ascii");
        const auto refused = session->attach(1, h, "127.0.0.1:5");
        CHECK_FALSE(refused.accepted);
        CHECK(refused.reason == "robot 'cell2-hs045' refused: its handshake declares linear joints none but the robot is configured with 3 "
                                "(\"linear\": [...] in its configuration, handshake option 'linear=')");
        h.linear = 0b1000;
        CHECK(session->attach(2, h, "127.0.0.1:5").reason.find("declares linear joints 4 but the robot is configured with 3") !=
              std::string::npos);
        h.linear = 0b100;
        CHECK(session->attach(3, h, "127.0.0.1:5").accepted);

        session->arm_identification(std::nullopt, "test");
        protocol::Handshake ident = protocol::parse_handshake("WG1;cell2-hs045;denso;torque;Nm;4;deg;8;150;ident");
        CHECK(session->attach_identification(4, ident, "127.0.0.1:6").reason.find("identification link refused: its handshake declares "
                                                                                  "linear joints none") != std::string::npos);
        ident.linear = 0b100;
        REQUIRE(session->attach_identification(5, ident, "127.0.0.1:6").accepted);
        // The quill's millimetres arrive in m.
        CHECK(session->on_ident_line(5, "IQ;3;10;20;42.5;30") == protocol::Reply::Continue);
        CHECK(session->identification_status().at("state") == "collecting");
        session.reset();
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}
