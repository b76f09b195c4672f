// warpguard-planar-arm: writes recordings of the analytic planar arm in the WarpGuard CSV format.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "planar_arm.hpp"
#include "warpguard/recording_csv.hpp"

int main(int argc, char** argv) {
    using namespace warpguard::planar_arm;
    CLI::App app{"Analytic planar 3-link arm: recordings for tests and the offline demo"};
    RunOptions opt;
    std::string out;
    std::size_t collisions = 0;
    double min_force = 20.0, max_force = 300.0;
    app.add_option("--out", out, "CSV file to write")->required();
    app.add_option("--cycles", opt.cycles, "Task cycles")->capture_default_str();
    app.add_option("--seed", opt.seed, "Random seed")->capture_default_str();
    app.add_option("--collisions", collisions, "Random collisions (one per cycle, from the second cycle)")->capture_default_str();
    app.add_option("--min-force", min_force, "Smallest collision peak force, N")->capture_default_str();
    app.add_option("--max-force", max_force, "Largest collision peak force, N")->capture_default_str();
    app.add_option("--payload", opt.payload, "Payload at the tool, kg")->capture_default_str();
    app.add_option("--override", opt.speed_override, "Speed override (1 = 100 %)")->capture_default_str();
    app.add_option("--drift", opt.friction_drift, "Relative friction increase over the run")->capture_default_str();
    app.add_option("--noise", opt.noise, "Torque noise sigma, Nm")->capture_default_str();
    app.add_option("--period", opt.sample_period, "Nominal sample period, s")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    try {
        if (collisions > 0) opt.collisions = random_collisions(collisions, 1, opt.cycles, min_force, max_force, opt.seed + 7);
        const auto rec = simulate(default_arm(), default_task(), opt);
        warpguard::write_recording(rec, out);
        std::printf("%s: %zu samples, %zu cycles, %zu collisions\n", out.c_str(), rec.size(), opt.cycles, collisions);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "warpguard-planar-arm: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
