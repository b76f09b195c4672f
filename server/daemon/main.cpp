// warpguardd: keeps robots under watch. See docs/daemon.md.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it
#include <boost/asio.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "config.hpp"
#include "control_server.hpp"
#include "registry.hpp"
#include "robot_server.hpp"
#include "store.hpp"
#include "warpguard/profile.hpp"

using namespace warpguard;
using namespace warpguard::daemon;

int main(int argc, char** argv) {
    CLI::App app{"warpguardd: WarpGuard's daemon (robot links, detection, control API)"};
    std::string config_path, log_level = "info", ready_file;
    app.add_option("--config", config_path, "Configuration file (JSON)")->required();
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
    app.add_option("--ready-file", ready_file, "Write {\"robot_port\",\"control_port\",\"pid\"} here once listening");
    app.set_version_flag("--version", WARPGUARD_VERSION);
    CLI11_PARSE(app, argc, argv);

    DaemonConfig config;
    try {
        config = load_config(config_path);
        std::filesystem::create_directories(config.data_dir);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "warpguardd: error: %s\n", e.what());
        return 2;
    }
    auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>((std::filesystem::path(config.data_dir) / "warpguardd.log").string());
    auto logger = std::make_shared<spdlog::logger>("warpguardd", spdlog::sinks_init_list{console, file});
    logger->set_level(spdlog::level::from_str(log_level));
    logger->flush_on(spdlog::level::info);
    spdlog::set_default_logger(logger);

    try {
        Store store((std::filesystem::path(config.data_dir) / "warpguard.sqlite").string());
        Registry registry;
        boost::asio::io_context io;
        std::unique_ptr<ControlServer> control;
        SessionSettings settings{config.deadline_ms, config.resume_grace_s, config.data_dir};
        auto on_event = [&control](const nlohmann::json& e) {
            if (control) control->publish_event(e);
        };
        auto make_session = [&](const RobotConfig& rc) { return std::make_shared<RobotSession>(rc, store, settings, on_event); };

        // Robots: the configuration file's, then those added through the control API.
        std::vector<RobotConfig> robots = config.robots_list;
        for (const auto& j : store.robots()) {
            const RobotConfig rc = robot_config_from_json(j, store.path());
            if (std::none_of(robots.begin(), robots.end(), [&](const RobotConfig& r) { return r.id == rc.id; })) robots.push_back(rc);
        }
        const auto states = store.states();
        for (const auto& rc : robots) {
            auto session = make_session(rc);
            RobotState state{rc.id, to_string(rc.mode), false, "", 0};
            std::optional<Profile> profile;
            for (const auto& s : states) {
                if (s.robot == rc.id) state = s;
            }
            try {
                if (state.profile_id) {
                    std::string owner;
                    if (auto text = store.profile_json(state.profile_id, &owner)) profile = profile_from_json(nlohmann::json::parse(*text));
                } else if (!rc.profile.empty()) {
                    profile = load_profile(rc.profile);
                }
            } catch (const std::exception& e) {
                spdlog::error("robot {}: its profile cannot be loaded ({}); it starts without one", rc.id, e.what());
            }
            session->restore(state, profile);
            registry.add(session);
            const auto st = session->status();
            spdlog::info("robot {}: {} {} joints, mode {}{}{}", rc.id, protocol::to_string(rc.vendor), rc.joints, st.at("mode").get<std::string>(),
                         st.at("latched").get<bool>() ? ", STOPPED: " + st.at("reason").get<std::string>() : "",
                         profile ? fmt::format(", profile with {} reference samples", profile->reference.size()) : ", no profile");
        }

        RobotServer robot_server(io, config.robots, registry, store, config.idle_timeout_s);
        DaemonContext context{registry, store, settings, config.token, robot_server.port(), make_session};
        control = std::make_unique<ControlServer>(io, config.control, context);
        spdlog::info("warpguardd {} listening: robots on {}:{}, control API on {}:{}; data in {}", WARPGUARD_VERSION, config.robots.address,
                     robot_server.port(), config.control.address, control->port(), config.data_dir);
        if (!ready_file.empty()) {
            const std::string tmp = ready_file + ".tmp";
            std::ofstream(tmp) << nlohmann::json{{"robot_port", robot_server.port()}, {"control_port", control->port()}, {"pid", ::getpid()}}.dump()
                               << '\n';
            std::filesystem::rename(tmp, ready_file);
        }

        boost::asio::signal_set signals(io, SIGINT, SIGTERM);
        signals.async_wait([&](const boost::system::error_code&, int signal) {
            spdlog::info("signal {}: shutting down", signal);
            robot_server.stop();
            control->stop();
            for (const auto& s : registry.all()) {
                if (s->status().contains("recording")) {
                    try {
                        s->stop_recording("shutdown");
                    } catch (const std::exception& e) {
                        spdlog::error("robot {}: {}", s->id(), e.what());
                    }
                }
            }
            io.stop();
        });
        std::size_t threads = config.io_threads ? config.io_threads : std::max(2u, std::thread::hardware_concurrency());
        std::vector<std::thread> pool;
        for (std::size_t k = 1; k < threads; ++k) pool.emplace_back([&io] { io.run(); });
        io.run();
        for (auto& t : pool) t.join();
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        return 1;
    }
    return 0;
}
