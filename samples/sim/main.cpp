// warpguard-sim: the simulated robot cell. `record` writes a recording in the project's CSV format.
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>

#include <sys/mman.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "identification_procedure.hpp"
#include "live_robot.hpp"
#include "robot_cell.hpp"
#include "warpguard/evaluation.hpp"
#include "warpguard/number_list.hpp"
#include "warpguard/recording_csv.hpp"

int main(int argc, char** argv) {
    using namespace warpguard;
    CLI::App app{"WarpGuard's simulated robot cell (MuJoCo)"};
    app.require_subcommand(1);
    std::string robot_file, task_file, out;
    std::size_t cycles = 10, contacts = 0;
    double min_force = 20.0, max_force = 300.0;
    double payload = -1.0;
    double obstacle_at = -1.0, stop_at = -1.0;
    std::vector<std::string> override_changes;
    sim::CellOptions options;
    auto* record = app.add_subcommand("record", "Run task cycles and write the background task's samples as CSV");
    // Options of the cell, the same for an offline recording and a live run.
    auto add_cell_options = [&](CLI::App* cmd) {
        cmd->add_option("--robot", robot_file, "Robot description JSON (samples/robots/)")->required()->check(CLI::ExistingFile);
        cmd->add_option("--task", task_file, "Task program JSON (samples/tasks/)")->required()->check(CLI::ExistingFile);
        cmd->add_option("--cycles", cycles, "Task cycles")->capture_default_str()->check(CLI::Range(1, 100000));
        cmd->add_option("--seed", options.seed, "Random seed (noise, sampling, contacts)")->capture_default_str();
        cmd->add_option("--override", options.speed_override, "Speed override (1 = 100 %)")->capture_default_str();
        cmd->add_option("--drift", options.friction_drift, "Relative joint friction increase over the run")->capture_default_str();
        cmd->add_option("--contacts", contacts, "Random external contacts (one per cycle, not in the first)")->capture_default_str();
        cmd->add_option("--min-force", min_force, "Smallest contact peak force, N")->capture_default_str();
        cmd->add_option("--max-force", max_force, "Largest contact peak force, N")->capture_default_str();
        cmd->add_option("--payload", payload, "Replace every grasped mass of the task, kg");
        cmd->add_option("--obstacle-at", obstacle_at, "Put a rigid box where the tool will be at this task time, s");
        cmd->add_option("--override-change", override_changes,
                        "T:S, repeatable: the operator turns the speed override to S (1 = the programmed speed) at T s of the run");
        cmd->add_option("--override-ramp", options.override_ramp, "Seconds a change of the override by 100 % takes")->capture_default_str();
    };
    add_cell_options(record);
    record->add_option("--period", options.sampling.period, "Background task's nominal sample period, s")->capture_default_str();
    record->add_option("--stop-at", stop_at, "Brake to a stop at this time, s (and stay stopped)");
    record->add_flag("--report-override", options.report_override,
                     "Every sample carries the speed override the controller reports (column 'override'; at most 1)");
    record->add_option("--out", out, "CSV file to write")->required();

    // run: the same cell, live against warpguardd over TCP, behaving like the vendor's script.
    std::string connect, vendor = "ur", robot_id, report;
    double speed = 1.0, timeout_ms = 0.0, run_period = 0.0;
    std::size_t contacts_from = 0, window = 30;
    std::string record_request;
    bool without = false;
    bool declare_payload = false;
    bool send_override = false;
    std::size_t obstacle_cycle = 0;
    double obstacle_hold = -1.0;
    auto* run = app.add_subcommand("run", "Play the robot live against warpguardd over the wire protocol (like the vendor script)");
    add_cell_options(run);
    run->add_option("--connect", connect, "warpguardd's robot port, HOST:PORT")->required();
    run->add_option("--vendor", vendor, "Script to behave like: ur, abb or denso")->capture_default_str()->check(CLI::IsMember({"ur", "abb", "denso"}));
    run->add_option("--id", robot_id, "Robot id in the handshake (as configured in warpguardd)")->required();
    run->add_option("--speed", speed, "Simulated seconds per wall-clock second")->capture_default_str()->check(CLI::Range(0.05, 20.0));
    run->add_option("--period", run_period, "Background task's sample period, s (default: the vendor's, see PROTOCOL.md)");
    run->add_option("--timeout-ms", timeout_ms, "Robot-side reply timeout, ms (default: the vendor's)");
    run->add_option("--contacts-from-cycle", contacts_from, "First cycle (0-based) that may get a contact")->capture_default_str();
    run->add_option("--obstacle-hold", obstacle_hold, "The box leaves this many seconds after it arrived (default: it stays)");
    run->add_option("--obstacle-in-cycle", obstacle_cycle, "Put the box where the tool will be 1.5 s into this cycle (1-based)");
    run->add_option("--record-request", record_request, "Cycles A:B during which the program sets the record bit (mode bit 4)");
    run->add_option("--window", window, "Detection window in samples used to judge detections (the profile's m)")->capture_default_str();
    run->add_flag("--declare-payload", declare_payload, "Send the declared payload with every sample (handshake option 'payload')");
    run->add_flag("--report-override", send_override,
                  "Send the controller's speed override with every sample (handshake option 'override'; at most 100 %)");
    run->add_flag("--without", without, "Also simulate the same run without WarpGuard and compare peak contact forces");
    run->add_option("--out", out, "CSV file for the robot's samples with ground truth");
    run->add_option("--report", report, "JSON summary to write");
    // identify: the kinematic identification procedure (thesis 4.2) on the simulated controller.
    sim::IdentificationProcedure procedure;
    std::string ident_robot, home_text, tracked_text, check_out;
    double noise_mm = 0.0;
    std::size_t check_count = 1000;
    auto* ident = app.add_subcommand("identify", "Move one joint at a time and write the tracked point as the controller reports it (POINTS.csv)");
    ident->add_option("--robot", ident_robot, "Robot description JSON (samples/robots/)")->required()->check(CLI::ExistingFile);
    ident->add_option("--out", out, "POINTS.csv to write (joint,q1..qN,x,y,z)");
    std::string ident_connect, ident_vendor = "ur", ident_id;
    ident->add_option("--connect", ident_connect, "Report the points to warpguardd's robot port instead (HOST:PORT, PROTOCOL.md §5)");
    ident->add_option("--vendor", ident_vendor, "With --connect: script to behave like: ur, abb or denso")
        ->capture_default_str()->check(CLI::IsMember({"ur", "abb", "denso"}));
    ident->add_option("--id", ident_id, "With --connect: robot id in the handshake");
    ident->add_option("--points-per-joint", procedure.points_per_joint, "Angles per joint over its range")->capture_default_str()->check(CLI::Range(3, 10000));
    ident->add_option("--home", home_text, "Home configuration q1,...,qN in rad (default: 0, or near the limit closest to 0)");
    ident->add_option("--tracked-point", tracked_text, "Tracked point x,y,z in the tool frame, m (not on the last axis)")->capture_default_str();
    ident->add_option("--noise-mm", noise_mm, "Gaussian noise per coordinate of the reported point, mm")->capture_default_str();
    ident->add_option("--seed", procedure.seed, "Random seed of the noise")->capture_default_str();
    ident->add_option("--check-out", check_out, "Also write random configurations and their tracked point (joint 0) here");
    ident->add_option("--check-count", check_count, "Configurations in --check-out")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    try {
        for (const std::string& text : override_changes) {
            const auto colon = text.find(':');
            if (colon == std::string::npos) {
                throw std::invalid_argument(fmt::format("--override-change '{}' is not T:S (seconds into the run, then the override, 1 = 100 %)", text));
            }
            const std::vector<double> at = parse_number_list(text.substr(0, colon), "--override-change's time");
            const std::vector<double> value = parse_number_list(text.substr(colon + 1), "--override-change's override");
            if (at.size() != 1 || value.size() != 1) {
                throw std::invalid_argument(fmt::format("--override-change '{}' is not T:S (one time and one override)", text));
            }
            options.override_changes.push_back({at[0], value[0]});
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "warpguard-sim: error: %s\n", e.what());
        return 1;
    }
    if (*ident) {
        try {
            const RobotDescription robot = load_robot_description(ident_robot);
            if (!home_text.empty()) procedure.home = parse_number_list(home_text, "--home");
            if (!tracked_text.empty()) procedure.tracked_point = parse_xyz(tracked_text, "--tracked-point");
            procedure.noise = noise_mm * 1e-3;
            if (out.empty() == ident_connect.empty()) throw std::invalid_argument("give exactly one of --out POINTS.csv and --connect HOST:PORT");
            const auto points = sim::run_identification_procedure(robot, procedure);
            if (!ident_connect.empty()) {
                if (ident_id.empty()) throw std::invalid_argument("--connect needs --id ROBOT_ID (as configured in warpguardd)");
                const auto colon = ident_connect.rfind(':');
                if (colon == std::string::npos) throw std::invalid_argument(fmt::format("--connect '{}' is not HOST:PORT", ident_connect));
                sim::LiveOptions live;
                live.host = ident_connect.substr(0, colon);
                live.port = static_cast<std::uint16_t>(std::stoi(ident_connect.substr(colon + 1)));
                live.handshake = sim::vendor_handshake(ident_vendor == "ur" ? protocol::Vendor::UR : ident_vendor == "abb" ? protocol::Vendor::ABB : protocol::Vendor::Denso, ident_id, robot);
                live.handshake.signal = SignalKind::Torque;  // the identification script's hello says torque in Nm
                live.handshake.unit = SignalUnit::Nm;
                live.handshake.framing = protocol::Framing::Ident;
                // The procedure waits for each reply as long as the script does: its handshake timeout
                // is the sample link's, but a point is sent only when the robot stands still.
                sim::LiveRobot link(live);
                if (!link.open()) throw std::runtime_error(fmt::format("cannot connect to {}", ident_connect));
                const auto hello = link.handshake_reply();
                if (hello != protocol::Reply::Continue) {
                    throw std::runtime_error(fmt::format("warpguardd refused the identification link (see its log; is the procedure armed? "
                                                         "warpguard ctl identify-start {})", ident_id));
                }
                const auto send = [&](const std::string& line) {
                    const auto r = link.exchange(line);
                    if (r != protocol::Reply::Continue) {
                        throw std::runtime_error(fmt::format("warpguardd answered {} to '{}'", r ? "STOP" : "nothing",
                                                             line.substr(0, line.size() - 1)));
                    }
                };
                for (const auto& p : points) {
                    send(protocol::encode_ident_angles(p.joint, p.q, live.handshake.positions()));
                    send(protocol::encode_ident_point(p.p.x(), p.p.y(), p.p.z()));
                }
                send("IE\n");
                std::printf("%zu points (%zu per joint) of %s's tracked point reported to %s as robot %s, noise %.3f mm\n", points.size(),
                            procedure.points_per_joint, robot.name.c_str(), ident_connect.c_str(), ident_id.c_str(), noise_mm);
                return 0;
            }
            write_tracked_points_csv(out, points);
            std::printf("%s: %zu points (%zu per joint) of %s's tracked point, noise %.3f mm\n", out.c_str(), points.size(),
                        procedure.points_per_joint, robot.name.c_str(), noise_mm);
            if (!check_out.empty()) {
                write_tracked_points_csv(check_out, sim::random_check_points(robot, procedure.tracked_point, check_count, procedure.seed + 1000));
                std::printf("%s: %zu random configurations with the tracked point (no noise)\n", check_out.c_str(), check_count);
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "warpguard-sim: error: %s\n", e.what());
            return 1;
        }
        return 0;
    }
    // The task program, with --payload replacing every grasped mass.
    auto load_cell_task = [&](const RobotDescription& robot) {
        sim::Task task = sim::load_task(task_file, robot.dof());
        if (payload >= 0) {
            for (auto& step : task.steps) {
                if (step.kind == sim::TaskStep::Kind::Grasp) step.mass = payload;
            }
        }
        return task;
    };
    if (*run) {
        try {
            const RobotDescription robot = load_robot_description(robot_file);
            const sim::Task task = load_cell_task(robot);
            sim::LiveOptions live;
            const auto colon = connect.rfind(':');
            if (colon == std::string::npos) throw std::invalid_argument(fmt::format("--connect '{}' is not HOST:PORT", connect));
            live.host = connect.substr(0, colon);
            live.port = static_cast<std::uint16_t>(std::stoi(connect.substr(colon + 1)));
            const protocol::Vendor v = vendor == "ur" ? protocol::Vendor::UR : vendor == "abb" ? protocol::Vendor::ABB : protocol::Vendor::Denso;
            live.handshake = sim::vendor_handshake(v, robot_id, robot);
            live.handshake.payload = declare_payload;
            live.handshake.speed_override = send_override;
            options.report_override = send_override;
            if (run_period > 0) live.handshake.period = run_period;
            if (timeout_ms > 0) live.handshake.timeout = timeout_ms / 1e3;
            live.speed = speed;
            // The simulated controller stands in for a real-time one: its pages stay in memory, so
            // that memory pressure on this PC cannot stall a sample's send() behind the disk (measured:
            // 20-22 ms stalls with a disk writer running). Best effort: without the privilege it runs on.
            if (::mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
                std::fprintf(stderr, "warpguard-sim: note: cannot lock memory (mlockall); under memory pressure a sample can be sent late\n");
            }
            if (!record_request.empty()) {
                const auto c = record_request.find(':');
                if (c == std::string::npos) throw std::invalid_argument(fmt::format("--record-request '{}' is not A:B", record_request));
                live.record_request_from = static_cast<std::uint32_t>(std::stoul(record_request.substr(0, c)));
                live.record_request_to = static_cast<std::uint32_t>(std::stoul(record_request.substr(c + 1)));
            }
            options.sampling.period = live.handshake.period;
            // Stops hold the robot: schedule the disturbances on the task's clock so that each one
            // meets the robot doing its task (docs/simulator.md).
            options.disturb_in_task_time = true;
            // The disturbances of the run, the same for the live cell and the run without WarpGuard.
            auto disturb = [&](sim::RobotCell& c) {
                const auto starts = c.schedule(cycles);
                if (contacts > 0) {
                    const double length = starts.size() > 1 ? starts[1] - starts[0] : 1.0;
                    if (contacts_from >= starts.size()) throw std::invalid_argument("--contacts-from-cycle is beyond the last cycle");
                    // random_contacts leaves the first cycle it is given free.
                    const std::vector<double> later(starts.begin() + static_cast<std::ptrdiff_t>(contacts_from > 0 ? contacts_from - 1 : 0), starts.end());
                    c.set_contacts(sim::random_contacts(contacts, later, length, robot.dof(), min_force, max_force, options.seed + 7));
                }
                if (obstacle_cycle > 0) {
                    if (obstacle_cycle > starts.size()) throw std::invalid_argument(fmt::format("--obstacle-in-cycle {} is beyond the last cycle", obstacle_cycle));
                    obstacle_at = starts[obstacle_cycle - 1] + 1.5;
                }
                if (obstacle_at >= 0) {
                    sim::Obstacle obstacle;
                    obstacle.task_time = obstacle_at;
                    obstacle.start = std::max(0.0, obstacle_at - 0.6);
                    obstacle.hold = obstacle_hold;
                    c.set_obstacle(obstacle);
                }
            };
            sim::RobotCell cell(robot, task, options);
            disturb(cell);
            sim::LiveRobot link(live);
            cell.set_options_hook([&link](const Sample& s) { return link.on_sample(s); });
            std::printf("warpguard-sim: %s playing '%s' as a %s robot '%s' against %s (%.0f ms period, %.0f ms timeout, %.1fx real time)\n",
                        robot.name.c_str(), task.name.c_str(), vendor.c_str(), robot_id.c_str(), connect.c_str(), live.handshake.period * 1e3,
                        live.handshake.timeout * 1e3, speed);
            std::fflush(stdout);
            const Recording rec = cell.record(cycles);
            if (!out.empty()) write_recording(rec, out);

            std::vector<Decision> decisions(rec.size());
            const auto& held = link.held_after();
            for (std::size_t i = 0; i < rec.size() && i < held.size(); ++i) {
                if (held[i]) decisions[i].verdict = Verdict::Stop;
            }
            const RunEvaluation eval = evaluate_decisions(out.empty() ? "live run" : out, rec, decisions, window);
            std::vector<double> lat = link.latencies();
            nlohmann::json summary = {{"samples", rec.size()},
                                      {"sent", link.samples_sent()},
                                      {"timeouts", link.timeouts()},
                                      {"connections", link.connections()},
                                      {"failed_connects", link.failed_connects()},
                                      {"latency_median_ms", percentile(lat, 50).value_or(0) * 1e3},
                                      {"latency_p99_ms", percentile(lat, 99).value_or(0) * 1e3},
                                      {"latency_max_ms", lat.empty() ? 0.0 : *std::max_element(lat.begin(), lat.end()) * 1e3},
                                      {"peak_contact_force", cell.peak_contact_force()},
                                      {"evaluation", to_json(eval)}};
            nlohmann::json stops = nlohmann::json::array();
            for (const auto& st : link.stops()) stops.push_back({{"t", st.t}, {"reason", st.reason}, {"wall", st.wall}});
            summary["stops"] = stops;
            summary["resumes"] = link.resumes();
            std::printf("\n%zu samples sent, %zu replies missed (timeouts), %zu connection(s); reply latency median %.3f ms, p99 %.3f ms\n",
                        link.samples_sent(), link.timeouts(), link.connections(), summary["latency_median_ms"].get<double>(),
                        summary["latency_p99_ms"].get<double>());
            std::printf("robot stops: %zu, resumes: %zu\n", link.stops().size(), link.resumes().size());
            for (const auto& st : link.stops()) std::printf("  stop at t = %.3f s: %s\n", st.t, st.reason.c_str());
            if (eval.truth) {
                const auto& g = *eval.truth;
                std::printf("collisions %zu: detected %zu, missed %zu; false stops %zu", g.collisions.size(), g.detected, g.missed, g.false_stop_events);
                if (g.delay_median) std::printf("; detection delay median %.1f ms, p95 %.1f ms", *g.delay_median * 1e3, g.delay_p95.value_or(0) * 1e3);
                std::printf("\n");
                for (const auto& c : g.collisions) {
                    // When the robot was told to stop, and how hard the contact pressed then (a push
                    // ramps up from nothing; an impact may be over by then).
                    std::string outcome = "MISSED";
                    if (c.detected) {
                        outcome = fmt::format("stopped {:.1f} ms after it began, ", c.delay * 1e3);
                        outcome += c.force_at_detection > 0 ? fmt::format("pressing {:.0f} N then", c.force_at_detection) : "once it was over";
                    }
                    std::printf("  collision at t = %7.3f s on link %d, peak %6.1f N: %s\n", c.onset_t, c.link, c.peak_force, outcome.c_str());
                }
            }
            if (without) {
                sim::CellOptions plain = options;
                sim::RobotCell reference_cell(robot, task, plain);
                disturb(reference_cell);
                reference_cell.record(cycles);
                summary["peak_contact_force_without"] = reference_cell.peak_contact_force();
                std::printf("peak contact force: %.1f N with WarpGuard, %.1f N in the same run without it\n", cell.peak_contact_force(),
                            reference_cell.peak_contact_force());
                if (obstacle_at >= 0) {  // scripted contacts are forces applied as given; the box is rigid
                    std::printf("  (the simulated arm has no protective stop of its own: without WarpGuard it follows its program into\n"
                                "   the rigid box with its motors at peak torque, and the contact's transients can reach kN; docs/simulator.md)\n");
                }
            }
            if (!report.empty()) std::ofstream(report) << summary.dump(2) << '\n';
        } catch (const std::exception& e) {
            std::fprintf(stderr, "warpguard-sim: error: %s\n", e.what());
            return 1;
        }
        return 0;
    }
    try {
        const RobotDescription robot = load_robot_description(robot_file);
        const sim::Task task = load_cell_task(robot);
        sim::RobotCell cell(robot, task, options);
        if (contacts > 0) {
            const auto starts = cell.schedule(cycles);
            const double length = starts.size() > 1 ? starts[1] - starts[0] : 1.0;
            cell.set_contacts(sim::random_contacts(contacts, starts, length, robot.dof(), min_force, max_force, options.seed + 7));
        }
        if (obstacle_at >= 0) {
            sim::Obstacle obstacle;
            obstacle.task_time = obstacle_at;
            obstacle.start = std::max(0.0, obstacle_at - 0.6);
            cell.set_obstacle(obstacle);
        }
        if (stop_at >= 0) cell.set_stop_at(stop_at);
        const auto t0 = std::chrono::steady_clock::now();
        const Recording rec = cell.record(cycles);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        write_recording(rec, out);
        std::printf("%s: %zu samples, %zu cycles of '%s' on %s, %.1f s simulated in %.2f s wall = %.0fx real time\n",
                    out.c_str(), rec.size(), cycles, task.name.c_str(), robot.name.c_str(), cell.simulated_seconds(), wall,
                    cell.simulated_seconds() / wall);
        if (cell.peak_contact_force() > 0) std::printf("peak contact force %.1f N\n", cell.peak_contact_force());
        if (cell.stop_time()) std::printf("stopped at %.3f s\n", *cell.stop_time());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "warpguard-sim: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
