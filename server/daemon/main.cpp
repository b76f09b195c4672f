// warpguardd: keeps robots under watch. See docs/daemon.md.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <latch>
#include <mutex>
#include <thread>

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <cerrno>
#include <cstring>

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
        // Robots' links run on `io` (its own threads, nothing there waits for a disk); the control API,
        // SQLite writes and event subscribers run on `background` (one thread, so events keep their order).
        boost::asio::io_context io;
        boost::asio::io_context background;
        auto background_guard = boost::asio::make_work_guard(background);
        const PostBackground post_background = [&background](std::function<void()> work) { boost::asio::post(background, std::move(work)); };
        std::unique_ptr<ControlServer> control;
        SessionSettings settings{config.deadline_ms, config.resume_grace_s, config.data_dir, post_background};
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

        RobotServer robot_server(io, config.robots, registry, store, config.idle_timeout_s, post_background);
        DaemonContext context{registry, store, settings, config.token, robot_server.port(), make_session};
        control = std::make_unique<ControlServer>(background, config.control, context);
        spdlog::info("warpguardd {} listening: robots on {}:{}, control API on {}:{}; data in {}", WARPGUARD_VERSION, config.robots.address,
                     robot_server.port(), config.control.address, control->port(), config.data_dir);
        if (!ready_file.empty()) {
            const std::string tmp = ready_file + ".tmp";
            std::ofstream(tmp) << nlohmann::json{{"robot_port", robot_server.port()}, {"control_port", control->port()}, {"pid", ::getpid()}}.dump()
                               << '\n';
            std::filesystem::rename(tmp, ready_file);
        }

        boost::asio::signal_set signals(background, SIGINT, SIGTERM);
        signals.async_wait([&](const boost::system::error_code&, int signal) {
            spdlog::info("signal {}: shutting down", signal);
            robot_server.stop();
            io.stop();
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
            // Events posted before this point are stored first (one thread, in order).
            boost::asio::post(background, [&background] { background.stop(); });
        });
        // Every page of the daemon stays in memory: under memory pressure the kernel would otherwise
        // page out its code and data (file pages first), and a robot's reply would then wait for the
        // disk to fault them back in; behind a busy disk that is tens of milliseconds. Locked before the threads start, so
        // their stacks are locked as well.
        if (config.lock_memory) {
            if (::mlockall(MCL_CURRENT | MCL_FUTURE) == 0) {
                spdlog::info("memory locked (lock_memory): no page of the daemon is paged out");
            } else {
                spdlog::warn("cannot lock the daemon's memory ({}): under memory pressure a page can be paged out and a robot's reply "
                             "wait for the disk; grant it (root, CAP_IPC_LOCK or LimitMEMLOCK=infinity, see docs/daemon.md) or set "
                             "lock_memory false",
                             std::strerror(errno));
            }
        }
        const std::size_t threads = config.io_threads ? config.io_threads : std::max(2u, std::thread::hardware_concurrency());
        std::vector<std::thread> pool;
        // The robots' threads run real-time (config robot_thread_priority); the background thread, and
        // what it starts (calibration, identification, which lower themselves further), normally.
        sched_param normal{};
        ::pthread_setschedparam(::pthread_self(), SCHED_OTHER, &normal);  // if started under a real-time policy
        std::latch tried(static_cast<std::ptrdiff_t>(threads));
        std::mutex priority_mutex;
        std::string priority_error;
        for (std::size_t k = 0; k < threads; ++k) {
            pool.emplace_back([&io, &tried, &priority_mutex, &priority_error, priority = config.robot_thread_priority] {
                const std::string why = raise_thread_priority(priority);
                if (!why.empty()) {
                    std::lock_guard lk(priority_mutex);
                    priority_error = why;
                }
                tried.count_down();
                io.run();
            });
        }
        tried.wait();
        set_links_realtime(config.robot_thread_priority > 0 && priority_error.empty());
        if (config.robot_thread_priority == 0) {
            spdlog::info("robot link threads: {} at normal scheduling (robot_thread_priority 0); calibration and identification "
                         "at nice {}",
                         threads, background_nice());
        } else if (priority_error.empty()) {
            spdlog::info("robot link threads: {} at SCHED_FIFO priority {}; calibration and identification at nice {}", threads,
                         config.robot_thread_priority, background_nice());
        } else {
            spdlog::warn("robot link threads cannot run at SCHED_FIFO priority {} ({}): they run at normal priority, and other "
                         "programs on this PC can delay a reply past the robot's timeout; grant it (root, CAP_SYS_NICE or "
                         "LimitRTPRIO, see docs/daemon.md) or set robot_thread_priority 0; calibration and identification run at nice {} "
                         "meanwhile, so as not to delay the replies",
                         config.robot_thread_priority, priority_error, background_nice());
        }
        background.run();
        io.stop();
        for (auto& t : pool) t.join();
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        return 1;
    }
    return 0;
}
