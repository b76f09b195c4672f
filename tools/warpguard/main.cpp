// warpguard: the offline tool. Every subcommand prints one clear line and exits non-zero on bad input.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
    CLI::App app{"WarpGuard: collision detection for robots with closed controllers (offline tool and client of warpguardd)"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "warpguard 0.1.0");
    warpguard::cli::register_calibrate(app);
    warpguard::cli::register_evaluate(app);
    warpguard::cli::register_match(app);
    warpguard::cli::register_envelope(app);
    warpguard::cli::register_residual(app);
    warpguard::cli::register_export_envelope(app);
    warpguard::cli::register_script(app);
    warpguard::cli::register_ctl(app);
    warpguard::cli::register_identify(app);
    warpguard::cli::register_deviation(app);
    warpguard::cli::register_fk(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "warpguard: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
