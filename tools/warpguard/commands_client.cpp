// `warpguard ctl …` (client of warpguardd's control API), `warpguard script …` (the vendor background
// task filled in for a robot) and `warpguard export-envelope …` (the controller-only check of §3.1).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "commands.hpp"
#include "control_client.hpp"
#include "robot_scripts.hpp"
#include "warpguard/envelope.hpp"
#include "warpguard/json_file.hpp"
#include "warpguard/number_list.hpp"

namespace warpguard::cli {

namespace {

struct CtlArgs {
    std::string host = "127.0.0.1";
    int port = 7701;
    std::string token, token_file;
    bool json = false;
    // Per command.
    std::string robot, mode, kind, operator_name = "operator", state, config;
    std::int64_t id = 0, after = 0, recording = 0;
    std::size_t limit = 50, reference_cycles = 0, window = 0;  // reference_cycles 0: the daemon chooses
    double k = 0, margin = 0, timeout = 60, seconds = 0;
    std::string detector, method, force_frame, model_file;
    std::int64_t model = 0;
    std::int64_t dry_run = 0;
    std::int64_t excitation = 0;
    bool no_arm = false;
    double flange_offset = 0;
    bool has_flange_offset = false;
    std::int64_t cycle = -1;
    bool activate = false;
    std::string raw;
};

std::string token_of(const CtlArgs& a) {
    if (!a.token.empty()) return a.token;
    if (!a.token_file.empty()) {
        std::ifstream in(a.token_file);
        if (!in) throw std::runtime_error(fmt::format("--token-file '{}' cannot be read", a.token_file));
        std::string t;
        std::getline(in, t);
        return t;
    }
    if (const char* env = std::getenv("WARPGUARD_TOKEN")) return env;
    throw std::runtime_error("no control token: give --token, --token-file or set WARPGUARD_TOKEN");
}

std::unique_ptr<ControlClient> connect(const CtlArgs& a) {
    return std::make_unique<ControlClient>(a.host, static_cast<std::uint16_t>(a.port), token_of(a), "warpguard-cli");
}

void print_robot(const nlohmann::json& r) {
    std::printf("%-16s %-12s %-7s %-5s samples %-9llu cycle %-6lld gaps %-5llu stops %-4llu processing %.0f us (max %.0f)%s%s\n",
                r.at("id").get<std::string>().c_str(), r.at("state").get<std::string>().c_str(), r.at("mode").get<std::string>().c_str(),
                r.at("vendor").get<std::string>().c_str(), r.at("samples").get<unsigned long long>(), r.at("cycle").get<long long>(),
                r.at("gaps").get<unsigned long long>(), r.at("stops").get<unsigned long long>(),
                r.at("processing_us").at("mean").get<double>(), r.at("processing_us").at("max").get<double>(),
                r.at("latched").get<bool>() ? "\n    STOPPED: " : "", r.at("latched").get<bool>() ? r.at("reason").get<std::string>().c_str() : "");
}

void print_event(const nlohmann::json& e) {
    std::printf("#%-6lld %s %-14s %-11s %s\n", e.at("id").get<long long>(), e.value("time", std::string()).c_str(),
                e.at("robot").get<std::string>().c_str(), e.at("kind").get<std::string>().c_str(), e.at("reason").get<std::string>().c_str());
}

// A stop's evidence as a table per joint: the default detector's own rule values at the matched
// reference sample with the newest sample against its limits (what the panel's evidence shows), or
// the published rules 1 and 2 over each joint's matched span.
void print_evidence(const nlohmann::json& ev) {
    const std::string unit = ev.value("unit", std::string());
    if (ev.contains("matched")) std::printf("matched signal: %s\n", ev.at("matched").get<std::string>().c_str());
    if (ev.value("detector", std::string()) != "phase-aware") {
        std::printf("joint  rule1 (%s)   theta1       rule2        theta2       matched span\n", unit.c_str());
        for (const auto& j : ev.at("joints")) {
            std::printf("%-6d %-14.5g %-12.5g %-12.5g %-12.5g %u..%u\n", j.at("joint").get<int>(), j.at("rule1").get<double>(), j.value("theta1", 0.0),
                        j.at("rule2").get<double>(), j.value("theta2", 0.0), j.at("ref_start").get<unsigned>(), j.at("ref_end").get<unsigned>());
        }
        return;
    }
    const double cusum_limit = ev.value("cusum_limit", 0.0);
    std::printf("the default detector's rules at the matched reference sample (CUSUM limit %.4g); the newest sample and its limits in %s\n",
                cusum_limit, unit.c_str());
    std::printf("joint  deviation    threshold    x threshold   CUSUM          matched  newest       limits\n");
    for (const auto& j : ev.at("joints")) {
        const double deviation = j.value("deviation", 0.0), threshold = j.value("phase_threshold", 0.0), cusum = j.value("cusum", 0.0);
        const double ratio = threshold > 0 ? deviation / threshold : 0.0;
        std::string newest = "-", limits = "-";
        if (j.contains("judged")) {
            const auto& jd = j.at("judged");
            const auto last = [&](const char* key) { return jd.at(key).empty() ? nlohmann::json() : jd.at(key).back(); };
            const nlohmann::json x = last("signal"), lo = last("lower"), hi = last("upper");
            if (x.is_number()) newest = fmt::format("{:.4g}", x.get<double>());
            if (lo.is_number() && hi.is_number()) {
                const bool out = x.is_number() && (x.get<double>() < lo.get<double>() || x.get<double>() > hi.get<double>());
                limits = fmt::format("{:.4g} .. {:.4g}{}", lo.get<double>(), hi.get<double>(), out ? "  (outside)" : "");
            }
        }
        std::printf("%-6d %-12.4g %-12.4g %-13s %-14s %-8u %-12s %s\n", j.at("joint").get<int>(), deviation, threshold,
                    fmt::format("{:.2f}{}", ratio, ratio > 1.0 ? " over" : "").c_str(),
                    fmt::format("{:.4g}{}", cusum, cusum_limit > 0 && cusum > cusum_limit ? " over" : "").c_str(), j.value("partner", 0u),
                    newest.c_str(), limits.c_str());
    }
}

void show(const CtlArgs& a, const nlohmann::json& j, const std::function<void()>& human) {
    if (a.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        human();
    }
}

}  // namespace

void register_ctl(CLI::App& app) {
    auto a = std::make_shared<CtlArgs>();
    auto* ctl = app.add_subcommand("ctl", "Client of warpguardd's control API (robots, recording, calibration, modes, resume, events)");
    ctl->require_subcommand(1);
    ctl->add_option("--host", a->host, "Daemon's control address")->capture_default_str();
    ctl->add_option("--port", a->port, "Daemon's control port")->capture_default_str();
    ctl->add_option("--token", a->token, "Control token (or --token-file, or WARPGUARD_TOKEN)");
    ctl->add_option("--token-file", a->token_file, "File whose first line is the control token");
    ctl->add_flag("--json", a->json, "Print the daemon's JSON answer");

    auto simple = [&](const char* name, const char* help, auto build, auto human) {
        auto* c = ctl->add_subcommand(name, help);
        c->callback([a, build, human] {
            auto client = connect(*a);
            const nlohmann::json answer = client->call(build(*a), a->timeout);
            show(*a, answer, [&] { human(*a, answer); });
        });
        return c;
    };

    simple("robots", "Every robot and its state", [](const CtlArgs&) { return nlohmann::json{{"cmd", "robots"}}; },
           [](const CtlArgs&, const nlohmann::json& j) {
               for (const auto& r : j.at("robots")) print_robot(r);
           });
    simple("status", "One robot's state", [](const CtlArgs& x) { return nlohmann::json{{"cmd", "robot"}, {"robot", x.robot}}; },
           [](const CtlArgs&, const nlohmann::json& j) { print_robot(j); })
        ->add_option("robot", a->robot, "Robot id")->required();
    simple("record-start", "Start recording the robot's task (detection is off while recording)",
           [](const CtlArgs& x) { return nlohmann::json{{"cmd", "record_start"}, {"robot", x.robot}}; },
           [](const CtlArgs&, const nlohmann::json& j) { std::printf("recording into %s\n", j.at("recording").at("path").get<std::string>().c_str()); })
        ->add_option("robot", a->robot, "Robot id")->required();
    simple("record-stop", "Stop and commit the recording",
           [](const CtlArgs& x) { return nlohmann::json{{"cmd", "record_stop"}, {"robot", x.robot}}; },
           [](const CtlArgs&, const nlohmann::json& j) {
               std::printf("recording %lld: %zu samples, %zu complete cycles, %s\n", j.at("id").get<long long>(), j.at("samples").get<std::size_t>(),
                           j.at("cycles").get<std::size_t>(), j.at("path").get<std::string>().c_str());
           })
        ->add_option("robot", a->robot, "Robot id")->required();
    simple("recordings", "Committed recordings", [](const CtlArgs& x) { return nlohmann::json{{"cmd", "recordings"}, {"robot", x.robot}}; },
           [](const CtlArgs&, const nlohmann::json& j) {
               for (const auto& r : j.at("recordings")) {
                   std::printf("%-5lld %-16s %8lld samples %4lld cycles  %s\n", r.at("id").get<long long>(), r.at("robot").get<std::string>().c_str(),
                               r.at("samples").get<long long>(), r.at("cycles").get<long long>(), r.at("path").get<std::string>().c_str());
               }
           })
        ->add_option("robot", a->robot, "Robot id (default: all)");
    {
        auto* c = simple("calibrate", "Build a profile from a committed recording (first cycles = reference, the rest = nominal data)",
                         [](const CtlArgs& x) {
                             nlohmann::json r{{"cmd", "calibrate"}, {"robot", x.robot}, {"activate", x.activate}};
                             if (x.reference_cycles) r["reference_cycles"] = x.reference_cycles;
                             if (x.recording) r["recording"] = x.recording;
                             if (x.window) r["window"] = x.window;
                             if (x.k > 0) r["k"] = x.k;
                             if (x.margin > 0) r["margin"] = x.margin;
                             if (!x.detector.empty()) r["detector"] = x.detector;
                             if (!x.method.empty()) r["method"] = x.method;
                             if (!x.force_frame.empty()) r["force_frame"] = x.force_frame;
                             if (x.model) r["model"] = x.model;
                             if (x.dry_run) r["dry_run"] = x.dry_run;
                             if (x.excitation) r["excitation"] = x.excitation;
                             if (x.no_arm) r["no_arm"] = true;
                             return r;
                         },
                         [](const CtlArgs&, const nlohmann::json& j) {
                             const auto& s = j.at("summary");
                             std::printf("profile %lld from recording %lld: window %zu, reference %zu samples (%zu cycles), %zu nominal cycles\n",
                                         j.at("profile").get<long long>(), s.at("recording").get<long long>(), s.at("window").get<std::size_t>(),
                                         s.at("reference_samples").get<std::size_t>(), s.at("reference_cycles").get<std::size_t>(),
                                         s.at("nominal_cycles").get<std::size_t>());
                             if (s.contains("reference_coverage")) {
                                 const auto& cov = s.at("reference_coverage");
                                 std::printf("reference: %s; %s\n", cov.value("automatic", false) ? "cycles chosen by calibration" : "cycles as given",
                                             cov.value("note", std::string()).c_str());
                             }
                             if (s.contains("reference_override")) {
                                 std::printf("reference recorded at speed override %.0f %% (reported)%s\n",
                                             100.0 * s.at("reference_override").get<double>(),
                                             s.contains("speed_model") ? ": a stream starts at the speed its first report gives" : "");
                             }
                             if (s.contains("interruptions")) print_interruptions(s.at("interruptions"));
                             std::printf("joint  theta1 (%s)   sigma        theta2       nominal max\n", s.at("unit").get<std::string>().c_str());
                             for (const auto& t : s.at("thresholds")) {
                                 std::printf("%-6d %-14.5g %-12.5g %-12.5g %-12.5g\n", t.at("joint").get<int>(), t.at("theta1").get<double>(),
                                             t.at("sigma").get<double>(), t.at("theta2").get<double>(), t.at("rule2_max").get<double>());
                             }
                             if (s.contains("phase_aware")) {
                                 const auto& ph = s.at("phase_aware");
                                 std::printf("detector phase-aware: per-phase thresholds = %.3f x largest nominal deviation nearby "
                                             "(per joint min / median / max below), CUSUM limit %.3f, persistence %zu\n",
                                             ph.at("margin").get<double>(), ph.at("cusum_limit").get<double>(), ph.at("persistence").get<std::size_t>());
                                 for (const auto& t : ph.at("joints")) {
                                     std::printf("%-6d %-12.5g %-12.5g %-12.5g\n", t.at("joint").get<int>(), t.at("min").get<double>(),
                                                 t.at("median").get<double>(), t.at("max").get<double>());
                                 }
                                 const std::string widest = describe_widest_cycles(ph.value("derivation", nlohmann::json::object()), false);
                                 if (!widest.empty()) std::printf("%s\n", widest.c_str());
                             } else {
                                 std::printf("detector published (thesis 3.2.3)\n");
                             }
                             if (s.contains("arm_model_not_fitted")) {
                                 std::printf("matched signal: as recorded (%s)\n", s.at("arm_model_not_fitted").get<std::string>().c_str());
                             }
                             if (s.contains("arm_model")) {
                                 const auto& arm = s.at("arm_model");
                                 if (arm.value("dry_run", 0LL) != 0) {
                                     std::printf("matched signal: the deviation from the arm model fitted on dry run %lld (%d samples; "
                                                 "derivatives in operation: order %zu over %zu samples)\n",
                                                 arm.at("dry_run").get<long long>(), arm.value("samples", 0),
                                                 arm.at("causal_order").get<std::size_t>(), arm.at("causal_samples").get<std::size_t>());
                                 } else {
                                     std::printf("matched signal: the deviation from the arm model fitted on the task's recording (%d samples, "
                                                 "%s; derivatives in operation: order %zu over %zu samples)\n",
                                                 arm.value("samples", 0), arm.value("payload", std::string()).c_str(),
                                                 arm.at("causal_order").get<std::size_t>(), arm.at("causal_samples").get<std::size_t>());
                                 }
                                 if (arm.value("excitation", 0LL) != 0) {
                                     std::printf("  and on excitation run %lld\n", arm.at("excitation").get<long long>());
                                 }
                                 for (const auto& pair : arm.value("dependent_joints", nlohmann::json::array())) {
                                     std::printf("warning: joints %d and %d move together in every run of the arm model (velocity correlation "
                                                 "%.3f): it cannot tell their inertias apart; add %s that moves them separately\n",
                                                 pair.at("joints")[0].get<int>(), pair.at("joints")[1].get<int>(),
                                                 pair.at("velocity_correlation").get<double>(),
                                                 arm.value("dry_run", 0LL) != 0 ? "an excitation run (--excitation)"
                                                                                 : "a dry run (--dry-run) and an excitation run (--excitation)");
                                 }
                             }
                             if (j.contains("status")) std::printf("activated\n");
                         });
        c->add_option("robot", a->robot, "Robot id")->required();
        c->add_option("--recording", a->recording, "Recording id (default: the robot's latest)");
        c->add_option("--reference-cycles", a->reference_cycles,
                      "Complete cycles cut into the reference (default: the daemon takes the fewest from 2 whose joint path covers the rest)");
        c->add_option("--window", a->window, "Measurement window m in samples (default 30)");
        c->add_option("--k", a->k, "Rule 1: theta1 = k * sigma (default 3)");
        c->add_option("--margin", a->margin, "Rule 2: theta2 = margin * nominal maximum (default 1.2)");
        c->add_option("--detector", a->detector, "phase-aware (default; needs >= 10 nominal cycles) or published")
            ->check(CLI::IsMember({"phase-aware", "published"}));
        c->add_option("--method", a->method, "mdtw (default) or ka-mdtw (needs the robot's kinematic model)")
            ->check(CLI::IsMember({"mdtw", "ka-mdtw"}));
        c->add_option("--force-frame", a->force_frame, "KA-mDTW: frame of the force direction, base (default) or tool")
            ->check(CLI::IsMember({"base", "tool"}));
        c->add_option("--model", a->model, "Kinematic model id for KA-mDTW and the default detector's speed model (default: the robot's latest)");
        c->add_option("--dry-run", a->dry_run,
                      "Recording id of a dry run of the task (no part, nothing to press): match the deviation from the arm model "
                      "fitted on it (thesis 4.5.1)");
        c->add_flag("--no-arm", a->no_arm,
                    "Match the signal as recorded. Without it and without --dry-run, the default detector with the robot's kinematic "
                    "model matches the deviation from the arm model fitted on the task's recording itself")
            ->excludes("--dry-run");
        c->add_option("--excitation", a->excitation,
                      "Recording id of an excitation run (each joint moved alone) fitted with the dry run: tells apart joints the "
                      "task always moves together");
        c->add_flag("--activate", a->activate, "Activate the new profile at once");
        // Calibration runs at the lowest priority in the daemon: on a busy PC it takes longer.
        c->preparse_callback([a](std::size_t) { a->timeout = 600; });
        c->add_option("--timeout", a->timeout, "Seconds to wait for the daemon's answer (default 600)");
    }
    {
        auto* c = simple("identify-start",
                         "Arm the kinematic identification procedure; then start the robot's identification program",
                         [](const CtlArgs& x) {
                             nlohmann::json r{{"cmd", "identify_start"}, {"robot", x.robot}};
                             if (x.has_flange_offset) r["flange_offset"] = x.flange_offset;
                             return r;
                         },
                         [](const CtlArgs& x, const nlohmann::json& j) {
                             std::printf("robot %s: identification %s; start the robot's identification program now\n", x.robot.c_str(),
                                         j.at("state").get<std::string>().c_str());
                         });
        c->add_option("robot", a->robot, "Robot id")->required();
        c->add_option("--flange-offset", a->flange_offset, "Distance of the flange from the last joint's axis origin along it, m")
            ->each([a](const std::string&) { a->has_flange_offset = true; });
    }
    simple("identification", "State and result of the identification procedure, and the robot's latest model",
           [](const CtlArgs& x) { return nlohmann::json{{"cmd", "identification"}, {"robot", x.robot}}; },
           [](const CtlArgs&, const nlohmann::json& j) {
               std::printf("identification %s, %zu points\n", j.at("state").get<std::string>().c_str(), j.at("points").get<std::size_t>());
               if (j.contains("result") && j["result"].contains("error")) std::printf("error: %s\n", j["result"]["error"].get<std::string>().c_str());
               if (j.contains("latest_model")) {
                   const auto& m = j["latest_model"];
                   std::printf("latest model %lld (%s)", m.at("id").get<long long>(), m.at("created").get<std::string>().c_str());
                   const auto& model = m.at("model");
                   if (model.contains("identification")) {
                       std::printf(": fk rms %.3f mm", model["identification"].value("fk_rms_m", 0.0) * 1e3);
                   }
                   std::printf("\n");
               }
           })
        ->add_option("robot", a->robot, "Robot id")->required();
    {
        auto* c = ctl->add_subcommand("set-model", "Store a kinematic model for a robot (a preset or 'warpguard identify dh' output)");
        c->add_option("robot", a->robot, "Robot id")->required();
        c->add_option("model", a->model_file, "Model JSON file")->required()->check(CLI::ExistingFile);
        c->callback([a] {
            std::ifstream in(a->model_file);
            nlohmann::json model;
            try {
                model = nlohmann::json::parse(in);
            } catch (const nlohmann::json::exception& e) {
                throw std::runtime_error(fmt::format("{}: not valid JSON ({})", a->model_file, e.what()));
            }
            auto client = connect(*a);
            const auto r = client->call({{"cmd", "set_model"}, {"robot", a->robot}, {"model", model}}, a->timeout);
            show(*a, r, [&] { std::printf("model %lld stored for robot %s\n", r.at("model_id").get<long long>(), a->robot.c_str()); });
        });
    }
    simple("profiles", "Profiles of a robot", [](const CtlArgs& x) { return nlohmann::json{{"cmd", "profiles"}, {"robot", x.robot}}; },
           [](const CtlArgs&, const nlohmann::json& j) {
               for (const auto& p : j.at("profiles")) {
                   std::printf("%-5lld %-16s %s from recording %lld, window %zu\n", p.at("id").get<long long>(), p.at("robot").get<std::string>().c_str(),
                               p.at("created").get<std::string>().c_str(), p.at("recording").get<long long>(),
                               p.at("summary").at("window").get<std::size_t>());
               }
           })
        ->add_option("robot", a->robot, "Robot id (default: all)");
    {
        auto* c = simple("activate", "Activate a profile", [](const CtlArgs& x) { return nlohmann::json{{"cmd", "activate"}, {"robot", x.robot}, {"profile", x.id}}; },
                         [](const CtlArgs&, const nlohmann::json& j) { print_robot(j); });
        c->add_option("robot", a->robot, "Robot id")->required();
        c->add_option("profile", a->id, "Profile id")->required();
    }
    {
        auto* c = simple("mode", "Set the mode: idle, shadow (detect and log, never stop) or detect",
                         [](const CtlArgs& x) { return nlohmann::json{{"cmd", "mode"}, {"robot", x.robot}, {"mode", x.mode}}; },
                         [](const CtlArgs&, const nlohmann::json& j) { print_robot(j); });
        c->add_option("robot", a->robot, "Robot id")->required();
        c->add_option("mode", a->mode, "idle, shadow, detect")->required()->check(CLI::IsMember({"idle", "shadow", "detect"}));
    }
    {
        auto* c = simple("resume", "Release a stopped robot (an operator's decision; logged with the name)",
                         [](const CtlArgs& x) { return nlohmann::json{{"cmd", "resume"}, {"robot", x.robot}, {"by", x.operator_name}}; },
                         [](const CtlArgs&, const nlohmann::json& j) { print_robot(j); });
        c->add_option("robot", a->robot, "Robot id")->required();
        c->add_option("--operator", a->operator_name, "Who resumes (kept in the event log)")->capture_default_str();
    }
    {
        auto* c = simple("events", "The event log (stops, faults, modes, connections)",
                         [](const CtlArgs& x) {
                             return nlohmann::json{{"cmd", "events"}, {"robot", x.robot}, {"after", x.after}, {"limit", x.limit}, {"kind", x.kind}};
                         },
                         [](const CtlArgs&, const nlohmann::json& j) {
                             for (const auto& e : j.at("events")) print_event(e);
                         });
        c->add_option("--robot", a->robot, "Only this robot");
        c->add_option("--kind", a->kind, "Only this kind (stop, would_stop, fault, resume, mode, connect, disconnect, refused, gap, recording, profile)");
        c->add_option("--after", a->after, "Only events with a larger id");
        c->add_option("--limit", a->limit, "At most this many (the newest)")->capture_default_str();
    }
    {
        auto* c = simple("event", "One event with its evidence (window, matched reference span, rule values)",
                         [](const CtlArgs& x) { return nlohmann::json{{"cmd", "event"}, {"id", x.id}}; },
                         [](const CtlArgs&, const nlohmann::json& e) {
                             print_event(e);
                             if (e.contains("evidence") && !e.at("evidence").is_null()) print_evidence(e.at("evidence"));
                         });
        c->add_option("id", a->id, "Event id")->required();
    }
    {
        auto* c = ctl->add_subcommand("wait", "Wait until a robot reaches a state (or a cycle); exit 1 on timeout");
        c->add_option("robot", a->robot, "Robot id")->required();
        c->add_option("--state", a->state, "connected, disconnected, stopped, idle, record, shadow, detect");
        c->add_option("--cycle", a->cycle, "Until the robot's cycle counter reaches this value");
        c->add_option("--timeout", a->timeout, "Give up after this many seconds")->capture_default_str();
        c->callback([a] {
            auto client = connect(*a);
            const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(a->timeout));
            while (true) {
                const auto r = client->call({{"cmd", "robot"}, {"robot", a->robot}});
                const bool state_ok = a->state.empty() || r.at("state") == a->state || (a->state == "connected" && r.at("connected").get<bool>());
                const bool cycle_ok = a->cycle < 0 || r.at("cycle").get<std::int64_t>() >= a->cycle;
                if (state_ok && cycle_ok) {
                    if (a->json) std::printf("%s\n", r.dump(2).c_str());
                    return;
                }
                if (std::chrono::steady_clock::now() > until) {
                    throw std::runtime_error(fmt::format("robot '{}' did not reach {}{} within {} s (now: state {}, cycle {})", a->robot,
                                                         a->state.empty() ? "" : "state " + a->state, a->cycle >= 0 ? fmt::format(" cycle {}", a->cycle) : "",
                                                         a->timeout, r.at("state").get<std::string>(), r.at("cycle").get<long long>()));
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        });
    }
    {
        auto* c = ctl->add_subcommand("watch", "Print events as they happen");
        c->add_option("--seconds", a->seconds, "Stop after this many seconds (default: never)");
        c->callback([a] {
            auto client = connect(*a);
            client->call({{"cmd", "subscribe"}, {"events", true}});
            const auto start = std::chrono::steady_clock::now();
            while (a->seconds <= 0 || std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < a->seconds) {
                const auto m = client->next(0.2);
                if (m && m->contains("event")) {
                    print_event(m->at("event"));
                    std::fflush(stdout);
                }
            }
        });
    }
    {
        auto* c = ctl->add_subcommand("add-robot", "Add a robot (JSON: id, address, vendor, signal, unit, joints)");
        c->add_option("config", a->config, "Robot configuration as JSON text")->required();
        c->callback([a] {
            auto client = connect(*a);
            const auto r = client->call({{"cmd", "add_robot"}, {"config", nlohmann::json::parse(a->config)}});
            show(*a, r, [&] { print_robot(r); });
        });
    }
    {
        auto* c = ctl->add_subcommand("call", "Send one raw JSON request and print the answer");
        c->add_option("request", a->raw, "The request, e.g. '{\"cmd\":\"robots\"}'")->required();
        c->callback([a] {
            auto client = connect(*a);
            std::printf("%s\n", client->call(nlohmann::json::parse(a->raw), a->timeout).dump(2).c_str());
        });
    }
}

namespace {

struct ScriptArgs {
    std::string vendor, out_dir, signal = "torque", unit = "Nm";
    scripts::ScriptOptions options;
    int port = 7700;
    bool identify = false;
    scripts::IdentifyScriptOptions identification;
    std::string tracked = "0.05,0,0";
    std::vector<std::size_t> linear;
};
}  // namespace

void register_script(CLI::App& app) {
    auto a = std::make_shared<ScriptArgs>();
    auto* c = app.add_subcommand("script", "Write the robot's background task (URScript, RAPID, PacScript) for this PC");
    c->add_option("format", a->vendor, "urscript, rapid or pacscript")->required()->check(CLI::IsMember({"urscript", "rapid", "pacscript"}));
    c->add_option("--host", a->options.host, "The PC's address as the robot reaches it")->required();
    c->add_option("--port", a->port, "warpguardd's robot port")->capture_default_str();
    c->add_option("--robot", a->options.robot_id, "Robot id (as configured in warpguardd)")->required();
    c->add_option("--joints", a->options.joints, "Joints")->capture_default_str();
    c->add_option("--signal", a->signal, "torque or current")->capture_default_str();
    c->add_option("--unit", a->unit, "Nm, A or percent")->capture_default_str();
    c->add_option("--period-ms", a->options.period_ms, "Sample period, ms (default: UR 2, ABB 4, Denso 8)");
    c->add_option("--timeout-ms", a->options.timeout_ms, "Robot-side reply timeout, ms (default: UR 20, ABB/Denso 150)");
    c->add_option("--com-line", a->options.com_line, "Denso: comm line number")->capture_default_str();
    c->add_option("--cycle-var", a->options.cycle_var, "Denso: global integer I[n] the program counts cycles in")->capture_default_str();
    c->add_option("--record-var", a->options.record_var, "Denso: global integer I[n] asking for a recording")->capture_default_str();
    c->add_option("--stop-io", a->options.stop_io, "Denso: output mapped to the step-stop input")->capture_default_str();
    c->add_option("--servo-id", a->options.servo_id, "Denso: GetSrvData id (default 5 torque, 4 current)");
    c->add_flag("--payload", a->options.payload, "Send the payload the program declares with every sample (configure the robot with \"payload\": true)");
    c->add_option("--linear", a->linear, "Linear joints, 1-based (a SCARA's quill: 3), sent in mm (configure the robot with \"linear\": [3])")
        ->delimiter(',');
    c->add_flag("--override", a->options.speed_override,
                "Send the controller's speed override with every sample (configure the robot with \"override\": true)");
    c->add_option("--payload-var", a->options.payload_var, "Denso, --payload: global float F[n] the program keeps the payload in (kg)")->capture_default_str();
    c->add_option("--out-dir", a->out_dir, "Write the files here (default: print a single file to stdout)");
    c->add_flag("--identify", a->identify, "The kinematic identification procedure (thesis 4.2) instead of the background task");
    c->add_option("--points", a->identification.points, "--identify: angles per joint")->capture_default_str();
    c->add_option("--span", a->identification.span_deg, "--identify: each joint turns +-span/2 deg about its home angle")->capture_default_str();
    c->add_option("--span-mm", a->identification.span_mm, "--identify: each linear joint moves +-span/2 mm about its home position")
        ->capture_default_str();
    c->add_option("--tracked-point", a->tracked, "--identify: tracked point x,y,z in the flange frame, m (off the last axis)")->capture_default_str();
    c->add_option("--tool-number", a->identification.tool_number, "--identify, Denso: tool number defined as the tracked point")->capture_default_str();
    c->callback([a] {
        a->options.port = static_cast<std::uint16_t>(a->port);
        if (a->port <= 0 || a->port > 65535) throw std::runtime_error(fmt::format("--port {} is not a port 1-65535", a->port));
        a->options.signal = parse_signal_kind(a->signal);
        a->options.unit = parse_signal_unit(a->unit);
        for (const std::size_t joint : a->linear) {
            if (joint < 1 || joint > a->options.joints || joint > 32) {
                throw std::runtime_error(fmt::format("--linear {}: not one of joints 1-{}", joint, a->options.joints));
            }
            a->options.linear |= 1U << (joint - 1);
        }
        std::vector<scripts::ScriptFile> files;
        if (a->identify) {
            const Eigen::Vector3d tp = parse_xyz(a->tracked, "--tracked-point");
            for (int k = 0; k < 3; ++k) a->identification.tracked[k] = tp[k];
            files.push_back(scripts::render_identification(scripts::parse_script_vendor(a->vendor), a->options, a->identification));
        } else {
            files = scripts::render(scripts::parse_script_vendor(a->vendor), a->options);
        }
        if (a->out_dir.empty()) {
            if (files.size() > 1) {
                throw std::runtime_error(fmt::format("{} writes {} files: give --out-dir", a->vendor, files.size()));
            }
            std::fwrite(files[0].text.data(), 1, files[0].text.size(), stdout);
            return;
        }
        std::filesystem::create_directories(a->out_dir);
        for (const auto& f : files) {
            const auto path = std::filesystem::path(a->out_dir) / f.name;
            std::ofstream(path) << f.text;
            std::printf("%s\n", path.string().c_str());
        }
    });
}

namespace {
struct ExportArgs {
    std::string limits, format, out;
};
}  // namespace

void register_export_envelope(CLI::App& app) {
    auto a = std::make_shared<ExportArgs>();
    auto* c = app.add_subcommand("export-envelope", "Write envelope limits (thesis §3.1) as a controller-side check, no PC attached");
    c->add_option("--limits", a->limits, "Limits JSON from 'warpguard envelope'")->required()->check(CLI::ExistingFile);
    c->add_option("--format", a->format, "urscript, rapid or pacscript")->required()->check(CLI::IsMember({"urscript", "rapid", "pacscript"}));
    c->add_option("--out", a->out, "File to write (default: stdout)");
    c->callback([a] {
        const EnvelopeLimits limits = load_json_file(a->limits, "envelope limits", [](const nlohmann::json& j) { return envelope_from_json(j); });
        const auto file = scripts::render_envelope(scripts::parse_script_vendor(a->format), limits);
        if (a->out.empty()) {
            std::fwrite(file.text.data(), 1, file.text.size(), stdout);
        } else {
            std::ofstream(a->out) << file.text;
            std::printf("%s: %s check of %zu joints x %zu samples per period\n", a->out.c_str(), a->format.c_str(), limits.joints.size(), limits.period);
        }
    });
}

}  // namespace warpguard::cli
