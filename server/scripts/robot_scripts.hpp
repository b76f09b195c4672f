// The vendor background tasks of robot_scripts/, filled in for one robot and one PC: used by
// `warpguard script`, the control API's `script` command (the panel) and `warpguard export-envelope`,
// which writes the controller-only envelope check of thesis §3.1 in the vendor's language.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "warpguard/envelope.hpp"
#include "warpguard/recording.hpp"

namespace warpguard::scripts {

enum class ScriptVendor { URScript, Rapid, PacScript };
// Accepts urscript|ur, rapid|abb, pacscript|denso; throws std::invalid_argument naming the text.
ScriptVendor parse_script_vendor(const std::string& text);

struct ScriptOptions {
    std::string host;
    std::uint16_t port = 7700;
    std::string robot_id;
    std::size_t joints = 6;
    SignalKind signal = SignalKind::Torque;
    SignalUnit unit = SignalUnit::Nm;
    double period_ms = 0;   // 0: the vendor's default (UR 2, ABB 4, Denso 8)
    double timeout_ms = 0;  // 0: the vendor's default (UR 20, ABB 150, Denso 150)
    // Denso controller specifics.
    int com_line = 8;
    int cycle_var = 10;
    int record_var = 11;
    int stop_io = 128;
    int servo_id = 0;  // 0: 5 (torque) or 4 (current) from the signal
    // Send the payload the robot program declares with every sample (handshake option `payload`,
    // PROTOCOL.md §2): UR get_target_payload(); ABB the PERS wg_payload the program sets with
    // WgPayload next to its GripLoad; Denso the global float F[payload_var] the program sets.
    bool payload = false;
    int payload_var = 10;
    // Send the controller's speed override with every sample, after the payload (handshake option
    // `override`, PROTOCOL.md §2), in percent: UR get_target_speed_fraction() x 100, ABB
    // CSpeedOverride(), Denso CurExtSpd (each UNCONFIRMED: see the generated comments).
    bool speed_override = false;
    // Linear joints (bit j is joint j + 1: a SCARA's quill, ABB's IRB 910SC axis 3): declared in the
    // handshake (option `linear`), their positions sent as the controller reports them, in mm.
    std::uint32_t linear = 0;
};

struct ScriptFile {
    std::string name;
    std::string text;
};

// Throws std::invalid_argument naming the offending option and value.
std::vector<ScriptFile> render(ScriptVendor vendor, const ScriptOptions& options);

// The kinematic identification procedure (thesis 4.2, PROTOCOL.md 5) as a program the robot runs on
// its own: each joint through `points` angles over `span_deg` around the pose it starts in, the
// tracked point from the controller's forward kinematics.
struct IdentifyScriptOptions {
    std::size_t points = 12;       // per joint (>= 3; the circle fit wants more)
    double span_deg = 120.0;       // each joint turns +-span/2 about its home angle
    double span_mm = 40.0;         // each linear joint moves +-span_mm/2 about its home position
    double tracked[3] = {0.05, 0.0, 0.0};  // tracked point in the flange frame, m (off the last axis)
    int tool_number = 1;           // Denso: the tool number defined as the tracked point
};
ScriptFile render_identification(ScriptVendor vendor, const ScriptOptions& options, const IdentifyScriptOptions& identify);

// The envelope limits as a self-contained controller-side check (no PC attached).
ScriptFile render_envelope(ScriptVendor vendor, const EnvelopeLimits& limits);

}  // namespace warpguard::scripts
