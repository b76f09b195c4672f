// Subcommands of the `warpguard` command-line tool. Each register_* adds one subcommand to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace warpguard::cli {

void register_calibrate(CLI::App& app);
void register_evaluate(CLI::App& app);
void register_match(CLI::App& app);
void register_envelope(CLI::App& app);
void register_ctl(CLI::App& app);
void register_script(CLI::App& app);
void register_export_envelope(CLI::App& app);
void register_identify(CLI::App& app);
void register_deviation(CLI::App& app);
void register_fk(CLI::App& app);

}  // namespace warpguard::cli
