#include "robot_scripts.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "wire_protocol.hpp"

namespace warpguard::scripts {

namespace templates {
extern const std::string_view urscript;
extern const std::string_view rapid_module;
extern const std::string_view rapid_pers;
extern const std::string_view rapid_cfg;
extern const std::string_view pacscript;
extern const std::string_view urscript_identify;
extern const std::string_view rapid_identify;
extern const std::string_view pacscript_identify;
}  // namespace templates

ScriptVendor parse_script_vendor(const std::string& text) {
    if (text == "urscript" || text == "ur") return ScriptVendor::URScript;
    if (text == "rapid" || text == "abb") return ScriptVendor::Rapid;
    if (text == "pacscript" || text == "denso") return ScriptVendor::PacScript;
    throw std::invalid_argument(fmt::format("script format '{}' is not one of urscript, rapid, pacscript", text));
}

namespace {

std::string fill(std::string_view text, const std::vector<std::pair<std::string, std::string>>& values) {
    std::string out(text);
    for (const auto& [key, value] : values) {
        const std::string marker = "@" + key + "@";
        for (std::size_t at = out.find(marker); at != std::string::npos; at = out.find(marker, at + value.size())) {
            out.replace(at, marker.size(), value);
        }
    }
    const auto left = out.find("@WG_");
    if (left != std::string::npos) {
        throw std::logic_error(fmt::format("script template has an unfilled field near '{}'", out.substr(left, 24)));
    }
    return out;
}

std::string number(double v) { return fmt::format("{}", v); }

void check_text(const char* option, const std::string& value) {
    if (value.empty()) throw std::invalid_argument(fmt::format("{} is empty", option));
    for (char c : value) {
        if (c == '"' || c == ';' || c == '\n' || c == '\r' || c == '\\' || c == ' ') {
            throw std::invalid_argument(fmt::format("{} '{}' contains a character a robot script cannot carry ('{}')", option, value, c));
        }
    }
    if (value.size() > 64) throw std::invalid_argument(fmt::format("{} '{}' is longer than 64 characters", option, value));
}

}  // namespace

namespace {
std::vector<std::pair<std::string, std::string>> values_of(ScriptVendor vendor, const ScriptOptions& o) {
    check_text("--host", o.host);
    check_text("--robot", o.robot_id);
    if (o.robot_id.size() > 32) throw std::invalid_argument(fmt::format("--robot '{}' is longer than 32 characters", o.robot_id));
    if (o.port == 0) throw std::invalid_argument("--port 0 is not a port a robot can connect to");
    if (o.joints < 1 || o.joints > 16) throw std::invalid_argument(fmt::format("--joints {} is not in 1-16", o.joints));
    const double period = o.period_ms > 0 ? o.period_ms : vendor == ScriptVendor::URScript ? 2 : vendor == ScriptVendor::Rapid ? 4 : 8;
    const double timeout = o.timeout_ms > 0 ? o.timeout_ms : vendor == ScriptVendor::URScript ? 20 : 150;
    if (period < 1 || period > 1000) throw std::invalid_argument(fmt::format("--period {} ms is not in 1-1000 ms", period));
    if (timeout < 1 || timeout > 1000) throw std::invalid_argument(fmt::format("--timeout {} ms is not in 1-1000 ms", timeout));
    if (vendor == ScriptVendor::URScript && timeout > 200) {
        throw std::invalid_argument(fmt::format("--timeout {} ms: UR's real-time reads should wait at most 200 ms", timeout));
    }
    if (vendor == ScriptVendor::Rapid && o.joints > 6) {
        throw std::invalid_argument(fmt::format("--joints {}: the RAPID task reads the six robot axes of CJointT", o.joints));
    }
    if (o.joints < 32 && (o.linear >> o.joints) != 0) {
        throw std::invalid_argument(fmt::format("--linear {}: a robot with {} joints has no joint {}", protocol::linear_joints_text(o.linear),
                                                o.joints, std::bit_width(o.linear)));
    }
    if (vendor == ScriptVendor::URScript && o.linear != 0) {
        throw std::invalid_argument(fmt::format("--linear {}: a UR arm has no linear joint", protocol::linear_joints_text(o.linear)));
    }
    const std::string linear_option = o.linear != 0 ? ";linear=" + protocol::linear_joints_text(o.linear) : "";
    const std::string hello_options = std::string(o.payload ? ";payload" : "") + (o.speed_override ? ";override" : "") + linear_option;
    if (vendor == ScriptVendor::Rapid) {
        // A RAPID string holds at most 80 characters (the hello is a CONST string).
        const std::string hello = fmt::format("WG1;{};abb;{};{};{};deg;{};{};binary{}", o.robot_id, to_string(o.signal), to_string(o.unit),
                                              o.joints, number(period), number(timeout), hello_options);
        if (hello.size() > 80) {
            throw std::invalid_argument(fmt::format("--robot '{}': the RAPID handshake '{}' has {} characters; a RAPID string holds 80 "
                                                    "(use a robot id at most {} characters long)",
                                                    o.robot_id, hello, hello.size(), o.robot_id.size() - (hello.size() - 80)));
        }
    }
    // The identification procedure's linear joints: "axis = 3 Or axis = 7" (PacScript), "axis = 3 OR
    // axis = 7" (RAPID); "axis = 0", never true, without any.
    std::string linear_test;
    for (std::size_t j = 0; j < o.joints; ++j) {
        if (((o.linear >> j) & 1U) == 0) continue;
        if (!linear_test.empty()) linear_test += vendor == ScriptVendor::Rapid ? " OR " : " Or ";
        linear_test += fmt::format("axis = {}", j + 1);
    }
    if (linear_test.empty()) linear_test = "axis = 0";
    std::vector<std::pair<std::string, std::string>> v = {
        {"WG_HOST", o.host},
        {"WG_PORT", std::to_string(o.port)},
        {"WG_ROBOT_ID", o.robot_id},
        {"WG_JOINTS", std::to_string(o.joints)},
        {"WG_SIGNAL", to_string(o.signal)},
        {"WG_UNIT", to_string(o.unit)},
        {"WG_PERIOD_MS", number(period)},
        {"WG_TIMEOUT_MS", number(timeout)},
        {"WG_PERIOD_S", number(period / 1000.0)},
        {"WG_TIMEOUT_S", number(timeout / 1000.0)},
        {"WG_COM_LINE", std::to_string(o.com_line)},
        {"WG_CYCLE_VAR", std::to_string(o.cycle_var)},
        {"WG_RECORD_VAR", std::to_string(o.record_var)},
        {"WG_STOP_IO", std::to_string(o.stop_io)},
        {"WG_SERVO_ID", std::to_string(o.servo_id ? o.servo_id : o.signal == SignalKind::Torque ? 5 : 4)},
        {"WG_HELLO_OPTIONS", hello_options},
        {"WG_HELLO_LINEAR", linear_option},
        {"WG_LINEAR_TEST", linear_test},
    };
    if (o.payload_var < 0 || o.payload_var > 999) throw std::invalid_argument(fmt::format("--payload-var {} is not in 0-999", o.payload_var));
    std::string field;
    if (o.payload) {
        switch (vendor) {
            case ScriptVendor::URScript:
                field = "      # The payload the program declared (set_payload), kg: get_target_payload() UNCONFIRMED on CB3\n"
                        "      # (present in the e-Series manual).\n"
                        "      line = str_cat(line, str_cat(\";\", to_str(get_target_payload())))\n";
                break;
            case ScriptVendor::Rapid:
                field = "        ! The payload the program declared (WgPayload next to its GripLoad), kg.\n"
                        "        PackRawBytes wg_payload, wg_frame, 17+8*WG_JOINTS+4\\Network\\Float4;\n";
                break;
            case ScriptVendor::PacScript:
                field = fmt::format("    ' The payload the program declared, kg: it sets F[{0}] next to every payload change (UNCONFIRMED:\n"
                                    "    ' no system variable for the active payload was found in the public PAC material).\n"
                                    "    line = line & \";\" & F[{0}]\n",
                                    o.payload_var);
                break;
        }
    }
    if (o.speed_override) {
        switch (vendor) {
            case ScriptVendor::URScript:
                field += "      # The speed override in percent: the teach pendant's slider. get_target_speed_fraction()\n"
                         "      # UNCONFIRMED as a script function (RTDE publishes target_speed_fraction, the slider, 0..1).\n"
                         "      line = str_cat(line, str_cat(\";\", to_str(get_target_speed_fraction() * 100)))\n";
                break;
            case ScriptVendor::Rapid:
                field += fmt::format("        ! The speed override in percent (the FlexPendant's): CSpeedOverride() UNCONFIRMED here\n"
                                     "        ! (RAPID's function for the override of the motion task; not in the material at hand).\n"
                                     "        PackRawBytes CSpeedOverride(), wg_frame, 17+8*WG_JOINTS+{}\\Network\\Float4;\n",
                                     o.payload ? 8 : 4);
                break;
            case ScriptVendor::PacScript:
                field += "    ' The speed override in percent: CurExtSpd, the external speed the pendant sets (UNCONFIRMED\n"
                         "    ' name; the motion speed is ExtSpeed x the program's Speed).\n"
                         "    line = line & \";\" & CurExtSpd\n";
                break;
        }
    }
    v.push_back({"WG_EXTRA_FIELDS", field});
    return v;
}
}  // namespace

ScriptFile render_identification(ScriptVendor vendor, const ScriptOptions& o, const IdentifyScriptOptions& id) {
    auto v = values_of(vendor, o);
    if (id.points < 3 || id.points > 100) throw std::invalid_argument(fmt::format("--points {} is not in 3-100 (angles per joint)", id.points));
    if (!(id.span_deg >= 10.0 && id.span_deg <= 340.0)) {
        throw std::invalid_argument(fmt::format("--span {} deg is not in 10-340 deg (each joint turns +-span/2 about home)", id.span_deg));
    }
    if (std::hypot(id.tracked[0], id.tracked[1]) < 0.01) {
        throw std::invalid_argument(fmt::format("--tracked-point {},{},{}: the point must lie at least 10 mm off the last joint's axis "
                                                "(the flange z axis), or the last joint cannot be identified",
                                                id.tracked[0], id.tracked[1], id.tracked[2]));
    }
    if (id.tool_number < 1 || id.tool_number > 63) throw std::invalid_argument(fmt::format("--tool-number {} is not in 1-63", id.tool_number));
    if (!(id.span_mm >= 2.0 && id.span_mm <= 1000.0)) {
        throw std::invalid_argument(fmt::format("--span-mm {} mm is not in 2-1000 mm (each linear joint moves +-span/2 about home)", id.span_mm));
    }
    v.push_back({"WG_SPAN_MM", number(id.span_mm)});
    v.push_back({"WG_HALF_SPAN_MM", number(id.span_mm / 2)});
    v.push_back({"WG_POINTS", std::to_string(id.points)});
    v.push_back({"WG_SPAN_DEG", number(id.span_deg)});
    v.push_back({"WG_HALF_SPAN_DEG", number(id.span_deg / 2)});
    v.push_back({"WG_TP_X", number(id.tracked[0])});
    v.push_back({"WG_TP_Y", number(id.tracked[1])});
    v.push_back({"WG_TP_Z", number(id.tracked[2])});
    v.push_back({"WG_TP_X_MM", number(id.tracked[0] * 1e3)});
    v.push_back({"WG_TP_Y_MM", number(id.tracked[1] * 1e3)});
    v.push_back({"WG_TP_Z_MM", number(id.tracked[2] * 1e3)});
    v.push_back({"WG_TOOL_NUMBER", std::to_string(id.tool_number)});
    switch (vendor) {
        case ScriptVendor::URScript: return {"warpguard_identify.script", fill(templates::urscript_identify, v)};
        case ScriptVendor::Rapid: return {"WarpGuardIdentify.mod", fill(templates::rapid_identify, v)};
        case ScriptVendor::PacScript: return {"PRO_WarpGuardIdentify.pcs", fill(templates::pacscript_identify, v)};
    }
    return {};
}

std::vector<ScriptFile> render(ScriptVendor vendor, const ScriptOptions& o) {
    const auto v = values_of(vendor, o);
    switch (vendor) {
        case ScriptVendor::URScript: return {{"warpguard.script", fill(templates::urscript, v)}};
        case ScriptVendor::Rapid:
            return {{"WarpGuard.mod", fill(templates::rapid_module, v)},
                    {"T_ROB1_pers.mod", fill(templates::rapid_pers, v)},
                    {"SYS_cfg_snippet.cfg", fill(templates::rapid_cfg, v)}};
        case ScriptVendor::PacScript: return {{"TSR_WarpGuard.pcs", fill(templates::pacscript, v)}};
    }
    return {};
}

namespace {

std::string list(const std::vector<double>& values, const char* open, const char* close, std::size_t per_line, const char* indent) {
    std::string out = open;
    for (std::size_t k = 0; k < values.size(); ++k) {
        if (k) out += ",";
        if (k && k % per_line == 0) out += fmt::format("\n{}", indent);
        out += fmt::format("{:.6g}", values[k]);
    }
    return out + close;
}

std::string envelope_urscript(const EnvelopeLimits& l) {
    const std::size_t n = l.joints.size();
    std::string s = fmt::format(
        "# WarpGuard envelope check for Universal Robots: thesis §3.1, on the controller, no PC attached.\n"
        "# Written by `warpguard export-envelope` from {} (robot {}, {} samples per period, shift {}).\n"
        "# Installation as warpguard.script (README in robot_scripts/urscript): Before Start -> Script\n"
        "# node; the main program increments wg_cycle at every cycle start.\n"
        "# Rule 1: signal outside [lower - tolerance, upper + tolerance] at the phase index; rule 2:\n"
        "# |x(k) - x(k-1)| > D. The phase index restarts at every change of wg_cycle and wraps at N.\n"
        "# get_joint_torques(), protective_stop(), sync(): CONFIRMED; list literals of {} elements:\n"
        "# UNCONFIRMED size limit (split the lists if the controller refuses them).\n\n"
        "global wg_cycle = 0\nglobal wg_env_stop = False\n",
        l.source, l.robot, l.period, l.shift, l.period);
    for (std::size_t j = 0; j < n; ++j) {
        const auto& e = l.joints[j];
        s += fmt::format("global wg_upper_{} = {}\n", j + 1, list(e.upper, "[", "]", 12, "  "));
        s += fmt::format("global wg_lower_{} = {}\n", j + 1, list(e.lower, "[", "]", 12, "  "));
    }
    std::vector<double> tol, step;
    for (const auto& e : l.joints) {
        tol.push_back(e.tolerance);
        step.push_back(e.max_step);
    }
    s += fmt::format("global wg_tolerance = {}\nglobal wg_step = {}\n\n", list(tol, "[", "]", 16, ""), list(step, "[", "]", 16, ""));
    s += "def wg_env_violated(j, x, k):\n";
    for (std::size_t j = 0; j < n; ++j) {
        s += fmt::format("  if j == {0}:\n    return x > wg_upper_{1}[k] + wg_tolerance[{0}] or x < wg_lower_{1}[k] - wg_tolerance[{0}]\n  end\n", j, j + 1);
    }
    s += "  return False\nend\n\n";
    s += fmt::format(
        "thread wg_env_thread():\n"
        "  armed = False\n  last_cycle = wg_cycle\n  k = 0\n  prev = get_joint_torques()\n"
        "  while True:\n"
        "    x = get_joint_torques()\n"
        "    if wg_cycle != last_cycle:\n      last_cycle = wg_cycle\n      k = 0\n      armed = True\n    end\n"
        "    if armed:\n"
        "      j = 0\n"
        "      while j < {0}:\n"
        "        if wg_env_violated(j, x[j], k) or norm(x[j] - prev[j]) > wg_step[j]:\n"
        "          if not wg_env_stop:\n            wg_env_stop = True\n            protective_stop()\n          end\n"
        "        end\n"
        "        j = j + 1\n"
        "      end\n"
        "      k = k + 1\n"
        "      if k >= {1}:\n        k = 0\n      end\n"
        "    end\n"
        "    prev = x\n"
        "    sync()\n"
        "  end\nend\n\nwg_env_handle = run wg_env_thread()\n",
        n, l.period);
    return s;
}

std::string envelope_rapid(const EnvelopeLimits& l) {
    const std::size_t n = l.joints.size();
    std::string s = fmt::format(
        "MODULE WarpGuardEnvelope(SYSMODULE,NOSTEPIN)\n"
        "    ! WarpGuard envelope check for ABB: thesis §3.1, on the controller, no PC attached.\n"
        "    ! Written by `warpguard export-envelope` from {} (robot {}, {} samples per period, shift {}).\n"
        "    ! Runs as the semistatic task of robot_scripts/rapid (replace WarpGuard.mod by this module);\n"
        "    ! T_ROB1 increments the shared PERS wg_cycle at every cycle start (T_ROB1_pers.mod).\n"
        "    ! TestSignDefine/TestSignRead: CONFIRMED; signal id 4002 = motor torque: UNCONFIRMED.\n"
        "    PERS num wg_cycle:=0;\n"
        "    CONST num WG_N:={};\n",
        l.source, l.robot, l.period, l.shift, l.period);
    std::vector<double> upper, lower, tol, step;
    for (const auto& e : l.joints) {
        upper.insert(upper.end(), e.upper.begin(), e.upper.end());
        lower.insert(lower.end(), e.lower.begin(), e.lower.end());
        tol.push_back(e.tolerance);
        step.push_back(e.max_step);
    }
    // RAPID two-dimensional array aggregates: one row per joint.
    auto rows = [&](const char* name, const std::vector<double>& all) {
        std::string out = fmt::format("    CONST num {}{{{},{}}}:=[", name, n, l.period);
        for (std::size_t j = 0; j < n; ++j) {
            if (j) out += ",\n        ";
            out += list(std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(j * l.period),
                                            all.begin() + static_cast<std::ptrdiff_t>((j + 1) * l.period)),
                        "[", "]", 10, "         ");
        }
        return out + "];\n";
    };
    s += rows("wg_upper", upper);
    s += rows("wg_lower", lower);
    s += fmt::format("    CONST num wg_tol{{{}}}:={};\n    CONST num wg_step{{{}}}:={};\n", n, list(tol, "[", "]", 16, ""), n,
                     list(step, "[", "]", 16, ""));
    s += fmt::format(
        "    VAR num wg_x{{{0}}};\n    VAR num wg_prev{{{0}}};\n    VAR bool wg_stopped:=FALSE;\n\n"
        "    PROC main()\n"
        "        VAR num k:=1;\n        VAR num last:=0;\n        VAR bool armed:=FALSE;\n"
        "        FOR i FROM 1 TO {0} DO\n            TestSignDefine i, 4002, ROB_1, i, 0.004;\n        ENDFOR\n"
        "        last:=wg_cycle;\n"
        "        WHILE TRUE DO\n"
        "            FOR i FROM 1 TO {0} DO\n                wg_x{{i}}:=TestSignRead(i);\n            ENDFOR\n"
        "            IF wg_cycle<>last THEN\n                last:=wg_cycle;\n                k:=1;\n                armed:=TRUE;\n            ENDIF\n"
        "            IF armed THEN\n"
        "                FOR i FROM 1 TO {0} DO\n"
        "                    IF wg_x{{i}}>wg_upper{{i,k}}+wg_tol{{i}} OR wg_x{{i}}<wg_lower{{i,k}}-wg_tol{{i}} OR Abs(wg_x{{i}}-wg_prev{{i}})>wg_step{{i}} THEN\n"
        "                        IF NOT wg_stopped THEN\n                            wg_stopped:=TRUE;\n                            StopMove\\AllMotionTasks;\n                        ENDIF\n"
        "                    ENDIF\n"
        "                ENDFOR\n"
        "                k:=k+1;\n                IF k>WG_N k:=1;\n"
        "            ENDIF\n"
        "            wg_prev:=wg_x;\n"
        "            WaitTime 0.004;\n"
        "        ENDWHILE\n"
        "    ENDPROC\nENDMODULE\n",
        n);
    return s;
}

std::string envelope_pacscript(const EnvelopeLimits& l) {
    const std::size_t n = l.joints.size();
    std::string s = fmt::format(
        "'!TITLE \"WarpGuard envelope check\"\n"
        "' WarpGuard envelope check for Denso RC8: thesis §3.1, on the controller, no PC attached.\n"
        "' Written by `warpguard export-envelope` from {} (robot {}, {} samples per period, shift {}).\n"
        "' Supervisory task (name TSR*); the robot program increments I[10] at every cycle start.\n"
        "' GetSrvData(5) (torque %) and the step-stop output IO[128]: UNCONFIRMED (robot_scripts/pacscript).\n\n"
        "#Define WG_N {}\n#Define WG_JOINTS {}\n\n"
        "Dim wgUpper({}) As Single\nDim wgLower({}) As Single\nDim wgTol({}) As Single\nDim wgStep({}) As Single\n\n"
        "Sub WgLimits()\n",
        l.source, l.robot, l.period, l.shift, l.period, n, n * l.period, n * l.period, n, n);
    for (std::size_t j = 0; j < n; ++j) {
        const auto& e = l.joints[j];
        s += fmt::format("    wgTol({}) = {:.6g}\n    wgStep({}) = {:.6g}\n", j, e.tolerance, j, e.max_step);
        for (std::size_t k = 0; k < l.period; ++k) {
            s += fmt::format("    wgUpper({0}) = {1:.6g}: wgLower({0}) = {2:.6g}\n", j * l.period + k, e.upper[k], e.lower[k]);
        }
    }
    s += "End Sub\n\n"
         "Sub Main\n"
         "    Dim x As Variant\n    Dim prev As Variant\n    Dim k As Integer\n    Dim last As Integer\n    Dim armed As Integer\n"
         "    Dim i As Integer\n    Dim stopped As Integer\n"
         "    Call WgLimits\n"
         "    last = I[10]\n    armed = 0\n    stopped = 0\n    k = 0\n"
         "    prev = GetSrvData(5)\n"
         "    Do\n"
         "        x = GetSrvData(5)\n"
         "        If I[10] <> last Then\n            last = I[10]\n            k = 0\n            armed = 1\n        End If\n"
         "        If armed <> 0 Then\n"
         "            For i = 0 To WG_JOINTS - 1\n"
         "                If x(i) > wgUpper(i * WG_N + k) + wgTol(i) Or x(i) < wgLower(i * WG_N + k) - wgTol(i) Or Abs(x(i) - prev(i)) > wgStep(i) Then\n"
         "                    If stopped = 0 Then\n                        stopped = 1\n                        Set IO[128]\n                    End If\n"
         "                End If\n"
         "            Next i\n"
         "            k = k + 1\n            If k >= WG_N Then k = 0\n"
         "        End If\n"
         "        prev = x\n"
         "        Delay 8\n"
         "    Loop\n"
         "End Sub\n";
    return s;
}

}  // namespace

ScriptFile render_envelope(ScriptVendor vendor, const EnvelopeLimits& limits) {
    if (limits.joints.empty() || limits.period == 0) throw std::invalid_argument("envelope limits have no joints or no period");
    for (std::size_t j = 0; j < limits.joints.size(); ++j) {
        if (limits.joints[j].upper.size() != limits.period || limits.joints[j].lower.size() != limits.period) {
            throw std::invalid_argument(fmt::format("envelope of joint {} has {} values; the period is {}", j + 1, limits.joints[j].upper.size(), limits.period));
        }
    }
    switch (vendor) {
        case ScriptVendor::URScript: return {"warpguard-envelope.script", envelope_urscript(limits)};
        case ScriptVendor::Rapid: return {"WarpGuardEnvelope.mod", envelope_rapid(limits)};
        case ScriptVendor::PacScript: return {"TSR_WarpGuardEnvelope.pcs", envelope_pacscript(limits)};
    }
    return {};
}

}  // namespace warpguard::scripts
