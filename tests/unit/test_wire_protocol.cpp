// The robot wire protocol codec, byte for byte (robot_scripts/PROTOCOL.md).
#include <cmath>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "reply_timing.hpp"
#include "wire_protocol.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace warpguard;
using namespace warpguard::protocol;

namespace {

std::string error_of(const std::string& line) {
    try {
        parse_handshake(line);
    } catch (const ProtocolError& e) {
        return e.what();
    }
    return "no error";
}

Handshake ur6() { return parse_handshake("WG1;cell4-ur5e;ur;torque;Nm;6;rad;2;20;ascii"); }

}  // namespace

TEST_CASE("a handshake is read field by field and written back byte for byte", "[protocol]") {
    const Handshake h = ur6();
    CHECK(h.robot_id == "cell4-ur5e");
    CHECK(h.vendor == Vendor::UR);
    CHECK(h.signal == SignalKind::Torque);
    CHECK(h.unit == SignalUnit::Nm);
    CHECK(h.joints == 6);
    CHECK(h.angles == AngleUnit::Rad);
    CHECK(h.period == Approx(0.002));
    CHECK(h.timeout == Approx(0.020));
    CHECK(h.framing == Framing::Ascii);
    CHECK(encode_handshake(h) == "WG1;cell4-ur5e;ur;torque;Nm;6;rad;2;20;ascii\n");
    const Handshake d = parse_handshake("WG1;vp6242;denso;current;percent;6;deg;8;150;ascii\r");
    CHECK(d.vendor == Vendor::Denso);
    CHECK(d.signal == SignalKind::Current);
    CHECK(d.angles == AngleUnit::Deg);
    CHECK(parse_handshake("WG1;irb120;abb;torque;Nm;6;deg;4;100;binary").framing == Framing::Binary);
}

TEST_CASE("a bad handshake names the field, the value and what was expected", "[protocol]") {
    CHECK(error_of("WG2;a;ur;torque;Nm;6;rad;2;20;ascii") == "handshake field version is 'WG2'; expected WG1");
    CHECK(error_of("WG1;a b;ur;torque;Nm;6;rad;2;20;ascii") ==
          "handshake field robot id is 'a b'; expected 1-32 characters A-Z a-z 0-9 - _ .");
    CHECK(error_of("WG1;a;kuka;torque;Nm;6;rad;2;20;ascii") == "handshake field vendor is 'kuka'; expected ur, abb or denso");
    CHECK(error_of("WG1;a;ur;torque;A;6;rad;2;20;ascii") == "handshake field unit is 'A'; expected Nm or percent for torque");
    CHECK(error_of("WG1;a;ur;torque;Nm;17;rad;2;20;ascii") == "handshake field joints is '17'; expected an integer from 1 to 16");
    CHECK(error_of("WG1;a;ur;torque;Nm;6;grad;2;20;ascii") == "handshake field angles is 'grad'; expected rad or deg");
    CHECK(error_of("WG1;a;ur;torque;Nm;6;rad;0;20;ascii") == "handshake field period is '0'; expected milliseconds from 1 to 1000");
    CHECK(error_of("WG1;a;ur;torque;Nm;6;rad;2;20;json") == "handshake field framing is 'json'; expected ascii, binary or ident");
    CHECK(error_of("hello") == "handshake has 1 fields; expected 10 to 13: WG1;id;vendor;signal;unit;joints;angles;period_ms;"
                               "timeout_ms;framing[;payload][;override][;linear=J,...]");
    const std::string options = "; expected payload (every sample ends with the declared payload in kg), override (then the speed "
                                "override in percent) or linear=J[,J...] (joints whose positions are mm with deg, m with rad), each at "
                                "most once";
    CHECK(error_of("WG1;a;ur;torque;Nm;6;rad;2;20;ascii;mass") == "handshake field option is 'mass'" + options);
    CHECK(error_of("WG1;a;ur;torque;Nm;6;rad;2;20;ascii;payload;payload") == "handshake field option is 'payload'" + options);
    CHECK(error_of("WG1;a;ur;torque;Nm;6;rad;2;20;ascii;linear=3;linear=3") == "handshake field option is 'linear=3'" + options);
    CHECK(error_of("WG1;a;ur;torque;Nm;6;rad;2;20;ascii;override;override") == "handshake field option is 'override'" + options);
}

TEST_CASE("with the handshake option 'linear' those joints' positions are mm with degrees, m with radians", "[protocol]") {
    // A Denso SCARA: its controller reports joint 3, the quill, in mm where the others are in degrees.
    const Handshake h = parse_handshake("WG1;cell2-hs045;denso;torque;percent;4;deg;8;150;ascii;linear=3");
    CHECK(h.linear == 0b100);
    CHECK_FALSE(h.payload);
    CHECK(encode_handshake(h) == "WG1;cell2-hs045;denso;torque;percent;4;deg;8;150;ascii;linear=3\n");
    const Handshake both = parse_handshake("WG1;t;abb;torque;Nm;6;deg;4;150;binary;linear=6,2;payload");
    CHECK(both.linear == 0b100010);
    CHECK(both.payload);
    CHECK(encode_handshake(both) == "WG1;t;abb;torque;Nm;6;deg;4;150;binary;payload;linear=2,6\n");
    const std::string expected = "; expected linear=J[,J...] with distinct joints from 1 to 4";
    CHECK(error_of("WG1;s;denso;torque;percent;4;deg;8;150;ascii;linear=5") == "handshake field option is 'linear=5'" + expected);
    CHECK(error_of("WG1;s;denso;torque;percent;4;deg;8;150;ascii;linear=0") == "handshake field option is 'linear=0'" + expected);
    CHECK(error_of("WG1;s;denso;torque;percent;4;deg;8;150;ascii;linear=3,3") == "handshake field option is 'linear=3,3'" + expected);
    CHECK(error_of("WG1;s;denso;torque;percent;4;deg;8;150;ascii;linear=") == "handshake field option is 'linear='" + expected);
    CHECK(error_of("WG1;s;denso;torque;percent;4;deg;8;150;ascii;linear=3,") == "handshake field option is 'linear=3,'" + expected);

    // Samples: the quill's 75.5 mm is 0.0755 m, the angles in rad as before.
    const SampleDecoder ascii(h);
    SampleFrame f;
    REQUIRE(ascii.next(std::string("5;2;0;1.25;10;-20;-8.6;0.5;90;45;75.5;-180\n"), f).status == Status::Ok);
    CHECK(f.angle[0] == Approx(M_PI / 2));
    CHECK(f.angle[1] == Approx(M_PI / 4));
    CHECK(f.angle[2] == Approx(0.0755).epsilon(1e-15));
    CHECK(f.angle[3] == Approx(-M_PI));
    CHECK(encode_sample_ascii(f, h.positions()) == "5;2;0;1.250000;10;-20;-8.6;0.5;90;45;75.5;-180\n");
    // With radians a linear joint is in m: nothing is scaled.
    Handshake si = h;
    si.angles = AngleUnit::Rad;
    REQUIRE(SampleDecoder(si).next(std::string("5;2;0;1.25;10;-20;-8.6;0.5;1.5;0.7;0.0755;-3\n"), f).status == Status::Ok);
    CHECK(f.angle[2] == 0.0755);
    CHECK(f.angle[1] == 0.7);
    // Binary frames (RAPID: an IRB 910SC-like SCARA) the same.
    Handshake b = h;
    b.framing = Framing::Binary;
    SampleFrame g;
    g.seq = 9, g.cycle = 1, g.t = 0.5, g.joints = 4, g.signal = {1, 2, 3, 4}, g.angle = {90.0f, -45.0f, 120.0f, 10.0f};
    REQUIRE(SampleDecoder(b).next(encode_sample_binary(g), f).status == Status::Ok);
    CHECK(f.angle[2] == Approx(0.120).epsilon(1e-7));
    CHECK(f.angle[0] == Approx(M_PI / 2).epsilon(1e-7));
    // Identification lines: the quill's millimetres in m.
    const IdentLine q = parse_ident_line("IQ;3;10;20;42.5;30", 4, h.positions());
    CHECK(q.q[2] == Approx(0.0425).epsilon(1e-15));
    CHECK(q.q[0] == Approx(10 * M_PI / 180).epsilon(1e-15));
    const double back[4] = {M_PI / 2, 0.0, 0.0425, -M_PI};
    CHECK(encode_ident_angles(3, back, h.positions()) == "IQ;3;90.000000;0.000000;42.500000;-180.000000\n");
    CHECK(linear_joints_text(0) == "");
    CHECK(linear_joints_text(0b1000101) == "1,3,7");
}

TEST_CASE("with the handshake option 'payload' every sample ends with the declared payload", "[protocol]") {
    const Handshake h = parse_handshake("WG1;cell4-ur5e;ur;torque;Nm;2;rad;2;20;ascii;payload");
    CHECK(h.payload);
    CHECK_FALSE(ur6().payload);
    CHECK(encode_handshake(h) == "WG1;cell4-ur5e;ur;torque;Nm;2;rad;2;20;ascii;payload\n");
    const SampleDecoder ascii(h);
    SampleFrame f;
    REQUIRE(ascii.next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2;1.25\n"), f).status == Status::Ok);
    CHECK(f.payload == 1.25);
    CHECK(f.view().payload == 1.25);
    CHECK(encode_sample_ascii(f, AngleUnit::Rad) == "17;3;1;12.500000;1.5;-2.25;0.1;0.2;1.25\n");
    CHECK(ascii.next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2\n"), f).message() == "8 fields, expected 9 in sample line '17;3;1;12.5;1.5;-2.25;0.1;0.2'");
    CHECK(ascii.next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2;-1\n"), f).message() == "field payload is '-1'; expected a mass >= 0 kg");
    // Without the option the frame has no payload and the sample says so (NaN).
    Handshake plain = ur6();
    plain.joints = 2;
    REQUIRE(SampleDecoder(plain).next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2\n"), f).status == Status::Ok);
    CHECK(std::isnan(f.view().payload));

    // Binary: one more float32 after the angles.
    const Handshake b = parse_handshake("WG1;irb120;abb;torque;Nm;2;deg;4;100;binary;payload");
    const SampleDecoder binary(b);
    CHECK(binary.binary_frame_size() == 40);
    SampleFrame g;
    g.seq = 5, g.cycle = 1, g.t = 0.5, g.joints = 2, g.signal = {1.0, 2.0}, g.angle = {10.0, 20.0}, g.payload = 2.5;
    const std::string frame = encode_sample_binary(g);
    REQUIRE(frame.size() == 40);
    REQUIRE(binary.next(frame, f).status == Status::Ok);
    CHECK(f.payload == 2.5);
    g.payload = -0.5;
    CHECK(binary.next(encode_sample_binary(g), f).message() == "binary frame payload is -0.5; expected a mass >= 0 kg");
}

TEST_CASE("with the handshake option 'override' every sample ends with the speed override in percent, after the payload",
          "[protocol]") {
    const Handshake h = parse_handshake("WG1;cell4-ur5e;ur;torque;Nm;2;rad;2;20;ascii;override;payload");
    CHECK(h.speed_override);
    CHECK(h.payload);
    CHECK_FALSE(ur6().speed_override);
    CHECK(encode_handshake(h) == "WG1;cell4-ur5e;ur;torque;Nm;2;rad;2;20;ascii;payload;override\n");
    const SampleDecoder ascii(h);
    SampleFrame f;
    REQUIRE(ascii.next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2;1.25;85\n"), f).status == Status::Ok);
    CHECK(f.payload == 1.25);
    CHECK(f.speed_override == 0.85);
    CHECK(f.view().speed_override == 0.85);
    CHECK(encode_sample_ascii(f, AngleUnit::Rad) == "17;3;1;12.500000;1.5;-2.25;0.1;0.2;1.25;85\n");
    CHECK(ascii.next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2;1.25\n"), f).message() ==
          "9 fields, expected 10 in sample line '17;3;1;12.5;1.5;-2.25;0.1;0.2;1.25'");
    CHECK(ascii.next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2;1.25;0.85x\n"), f).message() ==
          "field override is '0.85x'; expected a speed override from 0 to 100 percent");
    CHECK(ascii.next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2;1.25;120\n"), f).message() ==
          "field override is '120'; expected a speed override from 0 to 100 percent");
    CHECK(ascii.next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2;1.25;nan\n"), f).message() ==
          "field override is 'nan'; expected a speed override from 0 to 100 percent");
    // Alone it follows the angles; 16 joints with both options fit the decoder's fields.
    Handshake alone = ur6();
    alone.joints = 2, alone.speed_override = true;
    REQUIRE(SampleDecoder(alone).next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2;70\n"), f).status == Status::Ok);
    CHECK(f.speed_override == 0.7);
    CHECK(std::isnan(f.payload));
    Handshake wide = h;
    wide.joints = 16;
    std::string line = "1;1;0;0.5";
    for (int k = 0; k < 32; ++k) line += ";0.25";
    REQUIRE(SampleDecoder(wide).next(line + ";2;100\n", f).status == Status::Ok);
    CHECK(f.speed_override == 1.0);
    CHECK(f.payload == 2.0);
    // Without the option the sample says so (NaN).
    Handshake plain = ur6();
    plain.joints = 2;
    REQUIRE(SampleDecoder(plain).next(std::string("17;3;1;12.5;1.5;-2.25;0.1;0.2\n"), f).status == Status::Ok);
    CHECK(std::isnan(f.view().speed_override));

    // Binary: one more float32 after the payload's.
    const Handshake b = parse_handshake("WG1;irb120;abb;torque;Nm;2;deg;4;100;binary;payload;override");
    const SampleDecoder binary(b);
    CHECK(binary.binary_frame_size() == 44);
    SampleFrame g;
    g.seq = 5, g.cycle = 1, g.t = 0.5, g.joints = 2, g.signal = {1.0, 2.0}, g.angle = {10.0, 20.0}, g.payload = 2.5, g.speed_override = 0.75;
    const std::string frame = encode_sample_binary(g);
    REQUIRE(frame.size() == 44);
    CHECK(frame.substr(40) == std::string("\x42\x96\x00\x00", 4));  // 75.0f, big-endian
    REQUIRE(binary.next(frame, f).status == Status::Ok);
    CHECK(f.payload == 2.5);
    CHECK(f.speed_override == 0.75);
    g.speed_override = 1.5;
    CHECK(binary.next(encode_sample_binary(g), f).message() == "binary frame override is 150; expected a speed override from 0 to 100 percent");
}

namespace {
std::string ident_error(const std::string& line, std::size_t joints = 6) {
    try {
        parse_ident_line(line, joints, AngleUnit::Rad);
    } catch (const ProtocolError& e) {
        return e.what();
    }
    return "no error";
}
}  // namespace

TEST_CASE("identification lines (PROTOCOL.md 5) are read exactly and written byte for byte", "[protocol]") {
    CHECK(parse_handshake("WG1;irb120;abb;torque;Nm;6;deg;4;150;ident").framing == Framing::Ident);
    CHECK(encode_handshake(parse_handshake("WG1;irb120;abb;torque;Nm;6;deg;4;150;ident")) == "WG1;irb120;abb;torque;Nm;6;deg;4;150;ident\n");
    const IdentLine q = parse_ident_line("IQ;3;0;-1.5707963;0.25;1e-3;0;3.14159", 6, AngleUnit::Rad);
    CHECK(q.kind == IdentLine::Kind::Angles);
    CHECK(q.joint == 3);
    CHECK(q.q[1] == -1.5707963);
    CHECK(q.q[3] == 1e-3);
    CHECK(q.q[5] == 3.14159);
    const IdentLine d = parse_ident_line("IQ;2;0;90;-45;0;0;180", 6, AngleUnit::Deg);
    CHECK(d.q[1] == Approx(M_PI / 2).epsilon(1e-15));
    CHECK(d.q[2] == Approx(-M_PI / 4).epsilon(1e-15));
    const IdentLine p = parse_ident_line("IP;0.412;-0.1335;0.6001", 6, AngleUnit::Rad);
    CHECK(p.kind == IdentLine::Kind::Point);
    CHECK(p.p[0] == 0.412);
    CHECK(p.p[1] == -0.1335);
    CHECK(p.p[2] == 0.6001);
    CHECK(parse_ident_line("IE", 6, AngleUnit::Rad).kind == IdentLine::Kind::End);
    const double angles[6] = {0.0, -1.5, 0.25, 1.0e-3, 0.0, 3.0};
    CHECK(encode_ident_angles(4, angles, AngleUnit::Rad) == "IQ;4;0.000000;-1.500000;0.250000;0.001000;0.000000;3.000000\n");
    const double right[2] = {M_PI / 2, -M_PI};
    CHECK(encode_ident_angles(1, right, AngleUnit::Deg) == "IQ;1;90.000000;-180.000000\n");
    CHECK(encode_ident_point(0.4, -0.05, 1.25) == "IP;0.400000;-0.050000;1.250000\n");
    // What is written is read back to the printed precision.
    const std::string line = encode_ident_angles(4, angles, AngleUnit::Rad);
    CHECK(parse_ident_line(line.substr(0, line.size() - 1), 6, AngleUnit::Rad).q[2] == 0.25);
}

TEST_CASE("a bad identification line names the field, the value and what was expected", "[protocol]") {
    CHECK(ident_error("IQ;1;0;0;zero;0;0;0") == "identification line: q3 is 'zero'; expected a finite number");
    CHECK(ident_error("IQ;7;0;0;0;0;0;0") == "identification line: joint is '7'; expected 1 to 6");
    CHECK(ident_error("IQ;1;0;0;0") == "identification line: the field count is '5'; expected 8: IQ;joint;q1..q6");
    CHECK(ident_error("IP;0;0") == "identification line: the field count is '3'; expected 4: IP;x;y;z");
    CHECK(ident_error("IP;0;nan;0") == "identification line: y is 'nan'; expected a finite number");
    CHECK(ident_error("IE;1") == "identification line: IE is 'IE;1'; expected IE alone");
    CHECK(ident_error("XX;1") == "identification line: the line type is 'XX'; expected IQ, IP or IE");
    CHECK(ident_error("") == "identification line: the line type is ''; expected IQ, IP or IE");
}

TEST_CASE("ASCII samples are decoded exactly, one line at a time, degrees converted", "[protocol]") {
    Handshake h = ur6();
    h.joints = 2;
    const SampleDecoder decoder(h);
    const std::string two = "17;3;1;12.5;1.5;-2.25;0.1;0.2\n18;3;1;12.502;1.6;-2.2;0.1;0.21\r\n19;3";
    SampleFrame f;
    DecodeResult r = decoder.next(two, f);
    REQUIRE(r.status == Status::Ok);
    CHECK(r.consumed == 30);
    CHECK(f.seq == 17);
    CHECK(f.cycle == 3);
    CHECK(f.mode == 1);
    CHECK(f.t == 12.5);
    CHECK(f.signal[1] == -2.25);
    CHECK(f.angle[1] == 0.2);
    r = decoder.next(std::string_view(two).substr(30), f);
    REQUIRE(r.status == Status::Ok);
    CHECK(f.seq == 18);
    CHECK(f.angle[1] == 0.21);
    r = decoder.next(std::string_view(two).substr(30 + r.consumed), f);
    CHECK(r.status == Status::Incomplete);
    CHECK(r.consumed == 0);

    h.angles = AngleUnit::Deg;
    const SampleDecoder degrees(h);
    REQUIRE(degrees.next(std::string("1;1;0;0;0;0;90;-180\n"), f).status == Status::Ok);
    CHECK(f.angle[0] == Approx(M_PI / 2));
    CHECK(f.angle[1] == Approx(-M_PI));
}

TEST_CASE("a malformed sample line is an error naming the field and value, and is skipped", "[protocol]") {
    Handshake h = ur6();
    h.joints = 2;
    const SampleDecoder decoder(h);
    SampleFrame f;
    DecodeResult r = decoder.next(std::string("17;3;1;12.5;1.5;oops;0.1;0.2\nnext"), f);
    CHECK(r.status == Status::Error);
    CHECK(r.consumed == 29);
    CHECK(r.message() == "field signal2 is 'oops'; expected a finite number");
    r = decoder.next(std::string("17;3;1;12.5;1.5\n"), f);
    CHECK(r.message() == "5 fields, expected 8 in sample line '17;3;1;12.5;1.5'");
    r = decoder.next(std::string("x;3;1;12.5;1.5;2;0.1;0.2\n"), f);
    CHECK(r.message() == "field seq is 'x'; expected an integer");
    r = decoder.next(std::string("1;3;1;nan;1.5;2;0.1;0.2\n"), f);
    CHECK(r.message() == "field t is 'nan'; expected a number of seconds");
    const std::string endless(1100, '1');
    r = decoder.next(endless, f);
    CHECK(r.status == Status::Error);
    CHECK(r.consumed == endless.size());
}

TEST_CASE("binary frames are decoded byte for byte, big-endian float32", "[protocol]") {
    Handshake h = parse_handshake("WG1;irb120;abb;torque;Nm;2;deg;4;100;binary");
    const SampleDecoder decoder(h);
    CHECK(decoder.binary_frame_size() == 36);
    // seq 258, cycle -2, mode 5, t 1.5 s, signals 2.0 and -0.5 Nm, angles 90 and 45 degrees.
    const unsigned char bytes[] = {'W', 'G', 1, 2,  0, 0, 1, 2,  0xff, 0xff, 0xff, 0xfe,  0, 0, 0, 5,  0x3f, 0xc0, 0, 0,
                                   0x40, 0, 0, 0,  0xbf, 0, 0, 0,  0x42, 0xb4, 0, 0,  0x42, 0x34, 0, 0};
    const std::string frame(reinterpret_cast<const char*>(bytes), sizeof bytes);
    SampleFrame f;
    DecodeResult r = decoder.next(frame.substr(0, 20), f);
    CHECK(r.status == Status::Incomplete);
    r = decoder.next(frame, f);
    REQUIRE(r.status == Status::Ok);
    CHECK(r.consumed == 36);
    CHECK(f.seq == 258);
    CHECK(f.cycle == -2);
    CHECK(f.mode == 5);
    CHECK(f.t == 1.5);
    CHECK(f.signal[0] == 2.0);
    CHECK(f.signal[1] == -0.5);
    CHECK(f.angle[0] == Approx(M_PI / 2));
    CHECK(f.angle[1] == Approx(M_PI / 4));
    // Encoding the same frame gives the same bytes (in rad the angles go out as degrees * pi/180).
    SampleFrame g = f;
    g.angle[0] = 90.0;
    g.angle[1] = 45.0;
    CHECK(encode_sample_binary(g) == frame);

    std::string wrong = frame;
    wrong[0] = 'X';
    r = decoder.next(wrong, f);
    CHECK(r.status == Status::Error);
    CHECK(r.message() == "frame magic is 'XG'; expected 'WG'");
    wrong = frame;
    wrong[3] = 3;
    CHECK(decoder.next(wrong, f).message() == "frame joint count is 3; the handshake said otherwise");
}

TEST_CASE("replies are the bytes each vendor's script reads", "[protocol]") {
    std::array<char, 4> out{};
    CHECK(encode_reply(Vendor::UR, Reply::Stop, out) == 4);
    CHECK(std::memcmp(out.data(), "\x00\x00\x00\x01", 4) == 0);
    CHECK(encode_reply(Vendor::ABB, Reply::Continue, out) == 4);
    CHECK(std::memcmp(out.data(), "\x00\x00\x00\x00", 4) == 0);
    CHECK(encode_reply(Vendor::Denso, Reply::Stop, out) == 2);
    CHECK(std::string(out.data(), 2) == "1\n");
    CHECK(encode_reply(Vendor::Denso, Reply::Continue, out) == 2);
    CHECK(std::string(out.data(), 2) == "0\n");
}

TEST_CASE("what the robot's task encodes, the daemon decodes", "[protocol]") {
    SampleFrame s;
    s.seq = 123456;
    s.cycle = 42;
    s.mode = 2;
    s.t = 98.765432;
    s.joints = 6;
    for (std::size_t j = 0; j < 6; ++j) {
        s.signal[j] = -12.5 + 3.25 * static_cast<double>(j);
        s.angle[j] = 0.1 * static_cast<double>(j) - 0.3;
    }
    Handshake h = ur6();
    SampleFrame back;
    REQUIRE(SampleDecoder(h).next(encode_sample_ascii(s, AngleUnit::Rad), back).status == Status::Ok);
    CHECK(back.seq == s.seq);
    CHECK(back.t == Approx(s.t).margin(1e-6));
    for (std::size_t j = 0; j < 6; ++j) {
        CHECK(back.signal[j] == Approx(s.signal[j]));
        CHECK(back.angle[j] == Approx(s.angle[j]).margin(1e-9));
    }
}

TEST_CASE("the robot side times a reply from the kernel's transmit time of its sample to the reply's arrival", "[protocol][timing]") {
    // A loopback connection as the simulated robot's: the "robot" end stamps what it sends and receives.
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listener >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener, 1) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    const int robot = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(::connect(robot, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    const int pc = ::accept(listener, nullptr, nullptr);
    REQUIRE(pc >= 0);
    REQUIRE(protocol::enable_arrival_times(robot));
    REQUIRE(protocol::enable_send_times(robot));

    // Three samples of 10, 12 and 9 bytes: their last bytes are at offsets 9, 21 and 30, and each
    // one's stamp lies between the clock read before its send() and after it.
    const char* lines[3] = {"123456789\n", "12345678901\n", "12345678\n"};
    const std::uint32_t keys[3] = {9, 21, 30};
    double sent = 0;
    for (int k = 0; k < 3; ++k) {
        const double before = protocol::realtime_now();
        REQUIRE(::send(robot, lines[k], std::strlen(lines[k]), 0) == static_cast<ssize_t>(std::strlen(lines[k])));
        const double after = protocol::realtime_now();
        REQUIRE(protocol::sent_time(robot, keys[k], sent));
        CHECK(sent >= before);
        CHECK(sent <= after);
    }
    CHECK_FALSE(protocol::sent_time(robot, 30, sent));  // read once: the queue is drained
    REQUIRE(::send(robot, lines[1], 12, 0) == 12);       // offset 42
    CHECK_FALSE(protocol::sent_time(robot, 41, sent));  // no range ends at 41 (and 42's stamp is dropped with it)

    // The PC answers; the reply's arrival is stamped too, after the transmission it answers.
    char buffer[64];
    REQUIRE(::recv(pc, buffer, sizeof buffer, 0) > 0);
    REQUIRE(::send(pc, "\0\0\0\0", 4, 0) == 4);
    char reply[4];
    double arrival = 0;
    std::size_t have = 0;
    while (have < 4) {
        const ssize_t n = protocol::receive_stamped(robot, reply + have, 4 - have, 0, arrival);
        REQUIRE(n > 0);
        have += static_cast<std::size_t>(n);
    }
    CHECK(arrival >= sent);
    CHECK(arrival <= protocol::realtime_now());
    ::close(pc);
    ::close(robot);
    ::close(listener);
}
