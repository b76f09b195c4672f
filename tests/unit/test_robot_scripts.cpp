// The vendor background tasks filled in for a robot, and the controller-side envelope export.
#include <catch2/catch.hpp>

#include "robot_scripts.hpp"

using namespace warpguard;
using namespace warpguard::scripts;

namespace {
ScriptOptions options() {
    ScriptOptions o;
    o.host = "192.168.10.5";
    o.port = 7710;
    o.robot_id = "cell4-ur5e";
    return o;
}
// Every file a vendor's background task is written as, one after the other.
std::string rendered(ScriptVendor vendor, const ScriptOptions& o) {
    std::string all;
    for (const auto& f : render(vendor, o)) all += f.text;
    return all;
}
std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}
}  // namespace

TEST_CASE("every vendor script is filled in completely with the PC, port, robot and the vendor's protocol choices") {
    for (const auto vendor : {ScriptVendor::URScript, ScriptVendor::Rapid, ScriptVendor::PacScript}) {
        const auto files = render(vendor, options());
        REQUIRE(!files.empty());
        std::string all;
        for (const auto& f : files) {
            CHECK(f.text.find("@WG_") == std::string::npos);
            all += f.text;
        }
        CHECK(all.find("192.168.10.5") != std::string::npos);
        CHECK(all.find("cell4-ur5e") != std::string::npos);
        CHECK(all.find("UNCONFIRMED") != std::string::npos);
        switch (vendor) {
            case ScriptVendor::URScript:
                CHECK(all.find("socket_open(\"192.168.10.5\", 7710, \"wg\")") != std::string::npos);
                CHECK(all.find("WG1;cell4-ur5e;ur;torque;Nm;6;rad;2;20;ascii") != std::string::npos);
                CHECK(all.find("socket_read_binary_integer(1, \"wg\", 0.02)") != std::string::npos);
                break;
            case ScriptVendor::Rapid:
                REQUIRE(files.size() == 3);
                CHECK(all.find("WG1;cell4-ur5e;abb;torque;Nm;6;deg;4;150;binary") != std::string::npos);
                CHECK(all.find("CONST num WG_PORT:=7710;") != std::string::npos);
                CHECK(count(all, "PERS num wg_cycle:=0;") == 2);  // declared in both tasks
                break;
            case ScriptVendor::PacScript:
                CHECK(all.find("WG1;cell4-ur5e;denso;torque;Nm;6;deg;8;150;ascii") != std::string::npos);
                CHECK(all.find("GetSrvData(5)") != std::string::npos);
                break;
        }
    }
}

TEST_CASE("with --payload every vendor script declares it in the handshake and sends the declared payload last") {
    ScriptOptions o = options();
    o.payload = true;
    o.payload_var = 14;
    for (const auto vendor : {ScriptVendor::URScript, ScriptVendor::Rapid, ScriptVendor::PacScript}) {
        const std::string all = rendered(vendor, o), plain = rendered(vendor, options());
        CHECK(all.find("@WG_") == std::string::npos);
        CHECK(plain.find(";payload\"") == std::string::npos);
        CHECK(plain.find("get_target_payload") == std::string::npos);
        switch (vendor) {
            case ScriptVendor::URScript:
                CHECK(all.find("WG1;cell4-ur5e;ur;torque;Nm;6;rad;2;20;ascii;payload\"") != std::string::npos);
                // The payload field follows the angle loop, before the line is sent.
                CHECK(all.find("to_str(get_target_payload())") > all.find("to_str(q[j])"));
                CHECK(all.find("to_str(get_target_payload())") < all.find("socket_send_line(line"));
                break;
            case ScriptVendor::Rapid:
                CHECK(all.find("WG1;cell4-ur5e;abb;torque;Nm;6;deg;4;150;binary;payload\"") != std::string::npos);
                CHECK(all.find("PackRawBytes wg_payload, wg_frame, 17+8*WG_JOINTS+4\\Network\\Float4;") != std::string::npos);
                CHECK(count(all, "PERS num wg_payload:=0;") == 2);  // shared with T_ROB1, which sets it in WgPayload
                CHECK(all.find("PROC WgPayload(loaddata load)") != std::string::npos);
                break;
            case ScriptVendor::PacScript:
                CHECK(all.find("WG1;cell4-ur5e;denso;torque;Nm;6;deg;8;150;ascii;payload\"") != std::string::npos);
                CHECK(all.find("line = line & \";\" & F[14]") != std::string::npos);
                break;
        }
    }
    o.payload_var = 1000;
    CHECK_THROWS_WITH(render(ScriptVendor::PacScript, o), "--payload-var 1000 is not in 0-999");
}

TEST_CASE("with --override every vendor script declares it in the handshake and sends the override last, after the payload") {
    ScriptOptions o = options();
    o.speed_override = true;
    ScriptOptions both = o;
    both.payload = true;
    for (const auto vendor : {ScriptVendor::URScript, ScriptVendor::Rapid, ScriptVendor::PacScript}) {
        const std::string all = rendered(vendor, o), with_payload = rendered(vendor, both), plain = rendered(vendor, options());
        CHECK(all.find("@WG_") == std::string::npos);
        CHECK(plain.find("override\"") == std::string::npos);
        CHECK(count(all, "UNCONFIRMED") > count(plain, "UNCONFIRMED"));  // the override's read is marked
        switch (vendor) {
            case ScriptVendor::URScript:
                CHECK(all.find("WG1;cell4-ur5e;ur;torque;Nm;6;rad;2;20;ascii;override\"") != std::string::npos);
                CHECK(with_payload.find("ascii;payload;override\"") != std::string::npos);
                CHECK(all.find("to_str(get_target_speed_fraction() * 100)") > all.find("to_str(q[j])"));
                CHECK(all.find("to_str(get_target_speed_fraction() * 100)") < all.find("socket_send_line(line"));
                CHECK(with_payload.find("get_target_speed_fraction") > with_payload.find("to_str(get_target_payload())"));
                CHECK(plain.find("get_target_speed_fraction") == std::string::npos);
                break;
            case ScriptVendor::Rapid:
                CHECK(all.find("binary;override\"") != std::string::npos);
                // The frame's last float32: 1-based byte 21 + 8 N, four bytes further after a payload.
                CHECK(all.find("PackRawBytes CSpeedOverride(), wg_frame, 17+8*WG_JOINTS+4\\Network\\Float4;") != std::string::npos);
                CHECK(with_payload.find("PackRawBytes CSpeedOverride(), wg_frame, 17+8*WG_JOINTS+8\\Network\\Float4;") != std::string::npos);
                CHECK(with_payload.find("CSpeedOverride()") < with_payload.find("SocketSend wg_sock\\RawData:=wg_frame;"));
                break;
            case ScriptVendor::PacScript:
                CHECK(all.find("ascii;override\"") != std::string::npos);
                CHECK(with_payload.find("line = line & \";\" & CurExtSpd") > with_payload.find("line = line & \";\" & F[10]"));
                CHECK(with_payload.find("line = line & \";\" & CurExtSpd") < with_payload.find("PRINT #WG_LINE, line"));
                break;
        }
    }
}

TEST_CASE("script options a robot cannot carry are refused naming the option and value") {
    auto o = options();
    o.host = "pc;rm";
    CHECK_THROWS_WITH(render(ScriptVendor::URScript, o), Catch::Contains("--host 'pc;rm'"));
    o = options();
    o.timeout_ms = 500;
    CHECK_THROWS_WITH(render(ScriptVendor::URScript, o), Catch::Contains("--timeout 500 ms"));
    o = options();
    o.joints = 7;
    CHECK_THROWS_WITH(render(ScriptVendor::Rapid, o), Catch::Contains("--joints 7"));
    CHECK_THROWS_WITH(parse_script_vendor("kuka"), Catch::Contains("'kuka'"));
}

TEST_CASE("the envelope export carries every limit of every joint into the controller's script") {
    EnvelopeLimits l;
    l.robot = "r";
    l.source = "rec.csv";
    l.period = 5;
    for (int j = 0; j < 2; ++j) {
        JointEnvelope e;
        for (int k = 0; k < 5; ++k) {
            e.upper.push_back(10.0 * j + k + 0.5);
            e.lower.push_back(10.0 * j + k - 0.5);
        }
        e.tolerance = 0.25 + j;
        e.max_step = 3.5 + j;
        l.joints.push_back(e);
    }
    const auto ur = render_envelope(ScriptVendor::URScript, l);
    CHECK(ur.text.find("global wg_upper_2 = [10.5,11.5,12.5,13.5,14.5]") != std::string::npos);
    CHECK(ur.text.find("global wg_tolerance = [0.25,1.25]") != std::string::npos);
    CHECK(ur.text.find("protective_stop()") != std::string::npos);
    const auto rapid = render_envelope(ScriptVendor::Rapid, l);
    CHECK(rapid.text.find("CONST num wg_upper{2,5}:=[[0.5,1.5,2.5,3.5,4.5],") != std::string::npos);
    CHECK(rapid.text.find("CONST num wg_step{2}:=[3.5,4.5];") != std::string::npos);
    const auto pac = render_envelope(ScriptVendor::PacScript, l);
    CHECK(pac.text.find("wgUpper(9) = 14.5: wgLower(9) = 13.5") != std::string::npos);
    l.joints[1].upper.pop_back();
    CHECK_THROWS_WITH(render_envelope(ScriptVendor::Rapid, l), Catch::Contains("joint 2 has 4 values; the period is 5"));
}

TEST_CASE("the identification procedure is written for each vendor with the ident handshake, the span and the tracked point") {
    IdentifyScriptOptions id;
    id.points = 9;
    id.span_deg = 100;
    id.tracked[0] = 0.06;
    id.tracked[2] = 0.02;
    for (const auto vendor : {ScriptVendor::URScript, ScriptVendor::Rapid, ScriptVendor::PacScript}) {
        const ScriptFile f = render_identification(vendor, options(), id);
        CHECK(f.text.find("@WG_") == std::string::npos);
        CHECK(f.text.find("UNCONFIRMED") != std::string::npos);
        CHECK(f.text.find("\"IE\"") != std::string::npos);
        CHECK(f.text.find("+-50 deg") != std::string::npos);
        switch (vendor) {
            case ScriptVendor::URScript:
                CHECK(f.name == "warpguard_identify.script");
                CHECK(f.text.find("WG1;cell4-ur5e;ur;torque;Nm;6;rad;2;20;ident") != std::string::npos);
                CHECK(f.text.find("set_tcp(p[0.06, 0, 0.02, 0, 0, 0])") != std::string::npos);
                CHECK(f.text.find("span * k / (9 - 1.0)") != std::string::npos);
                break;
            case ScriptVendor::Rapid:
                CHECK(f.name == "WarpGuardIdentify.mod");
                CHECK(f.text.find("WG1;cell4-ur5e;abb;torque;Nm;6;deg;4;150;ident") != std::string::npos);
                CHECK(f.text.find("[[60, 0, 20], [1, 0, 0, 0]]") != std::string::npos);  // mm in tooldata
                // The longest IQ line: "IQ;6" and six ";-123.4567" = 64 characters < RAPID's 80.
                CHECK(count(f.text, "NumToStr(now.robax.rax_") == 6);
                CHECK(count(f.text, ", 4)") == 6);
                break;
            case ScriptVendor::PacScript:
                CHECK(f.name == "PRO_WarpGuardIdentify.pcs");
                CHECK(f.text.find("WG1;cell4-ur5e;denso;torque;Nm;6;deg;8;150;ident") != std::string::npos);
                CHECK(f.text.find("ChangeTool 1") != std::string::npos);
                break;
        }
    }
    id.tracked[0] = 0.0;
    CHECK_THROWS_WITH(render_identification(ScriptVendor::URScript, options(), id), Catch::Contains("at least 10 mm off the last joint's axis"));
    id.tracked[0] = 0.05;
    id.points = 2;
    CHECK_THROWS_WITH(render_identification(ScriptVendor::URScript, options(), id), Catch::Contains("--points 2"));
}

TEST_CASE("with --linear a SCARA's quill is declared linear in both handshakes and the identification moves it in mm") {
    ScriptOptions o = options();
    o.robot_id = "cell2-hs045";
    o.joints = 4;
    o.unit = SignalUnit::Percent;
    o.linear = 0b100;  // joint 3
    IdentifyScriptOptions id;
    id.span_mm = 30;
    CHECK(rendered(ScriptVendor::PacScript, o).find("WG1;cell2-hs045;denso;torque;percent;4;deg;8;150;ascii;linear=3\"") != std::string::npos);
    const ScriptFile denso_id = render_identification(ScriptVendor::PacScript, o, id);
    CHECK(denso_id.text.find("WG1;cell2-hs045;denso;torque;Nm;4;deg;8;150;ident;linear=3\"") != std::string::npos);
    CHECK(denso_id.text.find("If axis = 3 Then span = 30") != std::string::npos);
    CHECK(denso_id.text.find("+-15 mm") != std::string::npos);
    // Without linear joints the test never holds and every joint turns over the span in degrees.
    const ScriptFile plain_id = render_identification(ScriptVendor::PacScript, options(), id);
    CHECK(plain_id.text.find("If axis = 0 Then span = 30") != std::string::npos);
    CHECK(plain_id.text.find(";ident\"") != std::string::npos);

    // ABB (an IRB 910SC-like SCARA: axis 3 linear), two linear joints to show the list.
    o.linear = 0b1100;
    CHECK(rendered(ScriptVendor::Rapid, o).find("WG1;cell2-hs045;abb;torque;percent;4;deg;4;150;binary;linear=3,4\"") != std::string::npos);
    const ScriptFile abb_id = render_identification(ScriptVendor::Rapid, o, id);
    CHECK(abb_id.text.find("IF axis = 3 OR axis = 4 THEN") != std::string::npos);
    CHECK(abb_id.text.find(";ident;linear=3,4\"") != std::string::npos);

    // A UR arm has none; a joint past the robot's is refused.
    CHECK_THROWS_WITH(render(ScriptVendor::URScript, o), "--linear 3,4: a UR arm has no linear joint");
    o.linear = 0b10000;
    CHECK_THROWS_WITH(render(ScriptVendor::PacScript, o), "--linear 5: a robot with 4 joints has no joint 5");
    id.span_mm = 1;
    o.linear = 0b100;
    CHECK_THROWS_WITH(render_identification(ScriptVendor::PacScript, o, id), Catch::Contains("--span-mm 1 mm is not in 2-1000 mm"));
}

TEST_CASE("a RAPID handshake longer than a RAPID string holds is refused with the longest robot id that fits") {
    ScriptOptions o = options();
    o.robot_id = "cell-12-palletizer-line-4-irb460";  // 32 characters, the protocol's longest id
    o.signal = SignalKind::Current;
    o.unit = SignalUnit::Percent;
    o.payload = true;
    // "WG1;" + id + ";abb;current;percent;6;deg;4;150;binary;payload" is 83 characters.
    CHECK_THROWS_WITH(render(ScriptVendor::Rapid, o), Catch::Contains("has 83 characters; a RAPID string holds 80 (use a robot id at most 29 "
                                                                      "characters long)"));
    o.robot_id = o.robot_id.substr(0, 29);
    CHECK_NOTHROW(render(ScriptVendor::Rapid, o));
    CHECK_NOTHROW(render(ScriptVendor::PacScript, options()));
}
