// Subcommands of the `warpguard` command-line tool. Each register_* adds one subcommand to the app.
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace warpguard::cli {

// One line for calibrate's output: the calibration cycles with the largest split-half maxima, which
// set the phase-aware margin and CUSUM limit (the derivation's widest_cycles), against the median of
// all, so that a user can look at what happened in them; "" when the profile has none. `with_file`
// names each cycle's recording too.
std::string describe_widest_cycles(const nlohmann::json& derivation, bool with_file);

// Prints calibration's record of interrupted recordings (calibration.interruptions): its note and
// the first interruptions, so that a user sees what was left out and why.
void print_interruptions(const nlohmann::json& record);

void register_calibrate(CLI::App& app);
void register_evaluate(CLI::App& app);
void register_match(CLI::App& app);
void register_envelope(CLI::App& app);
void register_residual(CLI::App& app);
void register_ctl(CLI::App& app);
void register_script(CLI::App& app);
void register_export_envelope(CLI::App& app);
void register_identify(CLI::App& app);
void register_deviation(CLI::App& app);
void register_fk(CLI::App& app);

}  // namespace warpguard::cli
