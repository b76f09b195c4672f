// warpguard-sim: the simulated robot cell. `record` writes a recording in the project's CSV format.
#include <chrono>
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "robot_cell.hpp"
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
    sim::CellOptions options;
    auto* record = app.add_subcommand("record", "Run task cycles and write the background task's samples as CSV");
    record->add_option("--robot", robot_file, "Robot description JSON (samples/robots/)")->required()->check(CLI::ExistingFile);
    record->add_option("--task", task_file, "Task program JSON (samples/tasks/)")->required()->check(CLI::ExistingFile);
    record->add_option("--cycles", cycles, "Task cycles")->capture_default_str()->check(CLI::Range(1, 100000));
    record->add_option("--seed", options.seed, "Random seed (noise, sampling, contacts)")->capture_default_str();
    record->add_option("--override", options.speed_override, "Speed override (1 = 100 %)")->capture_default_str();
    record->add_option("--drift", options.friction_drift, "Relative joint friction increase over the run")->capture_default_str();
    record->add_option("--period", options.sampling.period, "Background task's nominal sample period, s")->capture_default_str();
    record->add_option("--contacts", contacts, "Random external contacts (one per cycle, not in the first)")->capture_default_str();
    record->add_option("--min-force", min_force, "Smallest contact peak force, N")->capture_default_str();
    record->add_option("--max-force", max_force, "Largest contact peak force, N")->capture_default_str();
    record->add_option("--payload", payload, "Replace every grasped mass of the task, kg");
    record->add_option("--obstacle-at", obstacle_at, "Put a rigid box where the tool will be at this task time, s");
    record->add_option("--stop-at", stop_at, "Brake to a stop at this time, s (and stay stopped)");
    record->add_option("--out", out, "CSV file to write")->required();
    CLI11_PARSE(app, argc, argv);
    try {
        const RobotDescription robot = load_robot_description(robot_file);
        sim::Task task = sim::load_task(task_file, robot.dof());
        if (payload >= 0) {
            for (auto& step : task.steps) {
                if (step.kind == sim::TaskStep::Kind::Grasp) step.mass = payload;
            }
        }
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
