// The recording file format: round trip and one-line errors with file, line and column.
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "warpguard/recording_csv.hpp"

using namespace warpguard;

namespace {

const std::string kHeader =
    "# robot: vp6242\n# joints: 2\n# signal: torque\n# unit: percent\n# source: test\n"
    "t,seq,cycle,mode,tau1,tau2,q1,q2\n";

Recording parse(const std::string& text) {
    std::istringstream in(text);
    return read_recording(in, "run.csv");
}

std::string error_of(const std::string& text) {
    try {
        parse(text);
    } catch (const CsvError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("a recording is read with its metadata, samples, cycles and ground truth", "[csv]") {
    const Recording rec = parse(
        "# robot: ur5e\n# joints: 2\n# signal: current\n# unit: A\n# source: sim\n# site: cell 4\n"
        "t,seq,cycle,mode,tau1,tau2,q1,q2,contact,contact_force,contact_link\n"
        "0.000,10,7,1,1.5,-2.25,0.1,0.2,0,0,0\n"
        "0.008,11,7,1,1.6,-2.20,0.1,0.2,1,35.5,2\n"
        "\n"
        "0.016,12,8,1,1.7,-2.10,0.1,0.2,0,0,0\n");
    CHECK(rec.info().robot == "ur5e");
    CHECK(rec.info().signal == SignalKind::Current);
    CHECK(rec.info().unit == SignalUnit::A);
    CHECK(rec.info().extra.at("site") == "cell 4");
    REQUIRE(rec.size() == 3);
    CHECK(rec.joints() == 2);
    CHECK(rec.seq[2] == 12);
    CHECK(rec.tau[1][0] == -2.25);
    CHECK(rec.q[1][2] == 0.2);
    REQUIRE(rec.has_ground_truth());
    CHECK(rec.ground_truth->contact_force[1] == 35.5);
    CHECK(rec.ground_truth->contact_link[1] == 2);
    const auto cycles = rec.cycles();
    REQUIRE(cycles.size() == 2);
    CHECK(cycles[0].counter == 7);
    CHECK(cycles[0].size() == 2);
    CHECK_FALSE(cycles[0].complete);
}

TEST_CASE("writing and reading a recording gives back the same numbers", "[csv]") {
    RecordingInfo info;
    info.robot = "irb120";
    info.unit = SignalUnit::Nm;
    info.source = "round trip";
    Recording rec(3, info);
    rec.ground_truth = GroundTruth{};
    for (int i = 0; i < 50; ++i) {
        const double tau[3] = {0.1 * i + 1e-13, -3.0 / (i + 1), 1e6 * i};
        const double q[3] = {M_PI / (i + 2), -0.5, 1.0 / 3.0};
        rec.append(Sample{0.004 * i, i, i / 10, 3u, tau, q});
        rec.ground_truth->contact.push_back(i % 7 == 0);
        rec.ground_truth->contact_force.push_back(i % 7 == 0 ? 12.25 : 0.0);
        rec.ground_truth->contact_link.push_back(i % 7 == 0 ? 3 : 0);
    }
    std::stringstream text;
    write_recording(rec, text);
    const Recording back = read_recording(text, "mem");
    CHECK(back.t == rec.t);
    CHECK(back.seq == rec.seq);
    CHECK(back.cycle == rec.cycle);
    CHECK(back.mode == rec.mode);
    CHECK(back.tau == rec.tau);
    CHECK(back.q == rec.q);
    CHECK(back.ground_truth->contact == rec.ground_truth->contact);
    CHECK(back.ground_truth->contact_force == rec.ground_truth->contact_force);
    CHECK(back.info().robot == "irb120");
}

TEST_CASE("the declared payload column is read, written back and sliced with the samples", "[csv]") {
    const Recording rec = parse(kHeader.substr(0, kHeader.size() - 1) +
                                ",payload,contact,contact_force,contact_link\n"
                                "0.000,1,1,0,1.5,2.5,0.1,0.2,0,0,0,0\n"
                                "0.004,2,1,0,1.6,2.4,0.1,0.2,1.25,1,20,3\n"
                                "0.008,3,2,0,1.7,2.3,0.1,0.2,1.25,0,0,0\n");
    REQUIRE(rec.declares_payload());
    CHECK(rec.payload == std::vector<double>{0.0, 1.25, 1.25});
    CHECK(rec.ground_truth->contact_force[1] == 20.0);
    std::vector<double> tau(2), q(2);
    CHECK(rec.sample(1, tau, q).payload == 1.25);
    std::stringstream text;
    write_recording(rec, text);
    const Recording back = read_recording(text, "mem");
    CHECK(back.payload == rec.payload);
    CHECK(back.ground_truth->contact_link == rec.ground_truth->contact_link);
    CHECK(rec.slice(1, 3).payload == std::vector<double>{1.25, 1.25});
    // Without the column nothing is declared, and a sample reads NaN.
    const Recording plain = parse(kHeader + "0.0,1,1,0,1,2,0,0\n");
    CHECK_FALSE(plain.declares_payload());
    CHECK(std::isnan(plain.sample(0, tau, q).payload));
}

TEST_CASE("a recording declares its payload in every sample or in none", "[csv]") {
    Recording rec(1, RecordingInfo{});
    const double tau[1] = {1.0}, q[1] = {0.0};
    Sample s{0.0, 0, 0, 0u, tau, q};
    rec.append(s);
    s.payload = 2.0;
    CHECK_THROWS_WITH(rec.append(s), "sample 1 declares a payload (2 kg) in a recording whose earlier samples declare none; "
                                     "a recording declares it in every sample or in none");
    Recording declared(1, RecordingInfo{});
    declared.append(s);
    s.payload = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH(declared.append(s), "sample 1 declares no payload in a recording whose earlier samples do");
    s.payload = -1.0;
    CHECK_THROWS_WITH(declared.append(s), "declared payload must be >= 0 kg, got -1");
    CHECK(declared.size() == 1);  // nothing half-appended
    CHECK(declared.payload.size() == 1);
}

TEST_CASE("the reported speed override column is read after the payload, written back and sliced", "[csv]") {
    const Recording rec = parse(kHeader.substr(0, kHeader.size() - 1) +
                                ",payload,override,contact,contact_force,contact_link\n"
                                "0.000,1,1,0,1.5,2.5,0.1,0.2,0,1,0,0,0\n"
                                "0.004,2,1,0,1.6,2.4,0.1,0.2,1.25,0.7,1,20,3\n"
                                "0.008,3,2,0,1.7,2.3,0.1,0.2,1.25,0.7,0,0,0\n");
    REQUIRE(rec.reports_override());
    CHECK(rec.speed_override == std::vector<double>{1.0, 0.7, 0.7});
    CHECK(rec.payload == std::vector<double>{0.0, 1.25, 1.25});
    std::vector<double> tau(2), q(2);
    CHECK(rec.sample(1, tau, q).speed_override == 0.7);
    std::stringstream text;
    write_recording(rec, text);
    CHECK(text.str().find("q2,payload,override,contact") != std::string::npos);
    const Recording back = read_recording(text, "mem");
    CHECK(back.speed_override == rec.speed_override);
    CHECK(back.ground_truth->contact_force == rec.ground_truth->contact_force);
    CHECK(rec.slice(0, 2).speed_override == std::vector<double>{1.0, 0.7});
    // Without the payload the override follows the angles; without the column a sample reads NaN.
    const Recording alone = parse(kHeader.substr(0, kHeader.size() - 1) + ",override\n0.0,1,1,0,1,2,0,0,0.85\n");
    CHECK(alone.speed_override == std::vector<double>{0.85});
    CHECK_FALSE(alone.declares_payload());
    const Recording plain = parse(kHeader + "0.0,1,1,0,1,2,0,0\n");
    CHECK_FALSE(plain.reports_override());
    CHECK(std::isnan(plain.sample(0, tau, q).speed_override));
}

TEST_CASE("a recording reports the speed override in every sample or in none, each in [0, 1]", "[csv]") {
    Recording rec(1, RecordingInfo{});
    const double tau[1] = {1.0}, q[1] = {0.0};
    Sample s{0.0, 0, 0, 0u, tau, q};
    rec.append(s);
    s.speed_override = 0.8;
    CHECK_THROWS_WITH(rec.append(s), "sample 1 reports a speed override (0.8) in a recording whose earlier samples report none; "
                                     "a recording reports it in every sample or in none");
    Recording reported(1, RecordingInfo{});
    reported.append(s);
    s.speed_override = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH(reported.append(s), "sample 1 reports no speed override in a recording whose earlier samples do");
    s.speed_override = 1.2;
    CHECK_THROWS_WITH(reported.append(s), "reported speed override must lie in [0, 1] (1 = 100 %), got 1.2");
    s.speed_override = 0.9, s.payload = -1.0;  // a bad payload beside a good override: neither is appended
    CHECK_THROWS(reported.append(s));
    CHECK(reported.size() == 1);
    CHECK(reported.speed_override.size() == 1);
}

TEST_CASE("malformed files give one line with file, line, column and the offending text", "[csv]") {
    CHECK(error_of(kHeader + "0.0,1,1,0,1.5,abc,0,0\n") ==
          "run.csv:7:6: column 'tau2' expects a finite number (got 'abc')");
    CHECK(error_of(kHeader + "0.0,1,1,0,1.5,2.5,0\n") == "run.csv:7:8: row has 7 values; expected 8 (one per header column)");
    CHECK(error_of(kHeader + "0.0,1.5,1,0,1.5,2.5,0,0\n") == "run.csv:7:2: column 'seq' expects an integer (got '1.5')");
    CHECK(error_of(kHeader + "0.1,1,1,0,1,2,0,0\n0.05,2,1,0,1,2,0,0\n") ==
          "run.csv:8:1: time goes backwards: t = 0.05 after t = 0.1 (got '0.05')");
    CHECK(error_of(kHeader + "0.0,1,1,0,1,nan,0,0\n") == "run.csv:7:6: column 'tau2' expects a finite number (got 'nan')");
    CHECK(error_of("# joints: 2\n# signal: torque\n# unit: percent\nt,seq,cycle,mode,tau1,tau3,q1,q2\n") ==
          "run.csv:4:6: expected column 'tau2' for 2 joints (got 'tau3')");
    CHECK(error_of("# joints: 2\n# signal: torque\nt,seq\n") == "run.csv: metadata '# unit: Nm|A|percent' is missing");
    CHECK(error_of("# joints: two\n") == "run.csv:1:11: joints must be an integer from 1 to 64 (got 'two')");
    CHECK(error_of("# joints: 2\n# signal: torque\n# unit: A\nt\n") ==
          "run.csv:3: unit 'A' does not fit signal 'torque'; torque is in Nm or percent, current in A or percent");
    CHECK(error_of("# joints: 2\n# signal: force\n") ==
          "run.csv:2:11: signal 'force' is not known; expected torque or current");
    CHECK(error_of("# joints 2\n") == "run.csv:1:1: metadata line must be '# key: value' (got '# joints 2')");
    CHECK(error_of(kHeader.substr(0, kHeader.size() - 1) + ",contact,force,contact_link\n") ==
          "run.csv:6:10: expected ground-truth column 'contact_force' (got 'force'); after the angles come an optional "
          "'payload', an optional 'override' and the optional ground truth contact,contact_force,contact_link[,contact_age]");
    CHECK(error_of(kHeader.substr(0, kHeader.size() - 1) + ",mass\n") ==
          "run.csv:6:9: expected 'payload', 'override' or ground-truth column 'contact' (got 'mass'); after the angles come an "
          "optional 'payload', an optional 'override' and the optional ground truth contact,contact_force,contact_link[,contact_age]");
    CHECK(error_of(kHeader.substr(0, kHeader.size() - 1) + ",payload,slider\n") ==
          "run.csv:6:10: expected 'override' or ground-truth column 'contact' (got 'slider'); after the angles come an "
          "optional 'payload', an optional 'override' and the optional ground truth contact,contact_force,contact_link[,contact_age]");
    CHECK(error_of(kHeader.substr(0, kHeader.size() - 1) + ",override,payload\n") ==
          "run.csv:6:10: expected ground-truth column 'contact' (got 'payload'); after the angles come an optional "
          "'payload', an optional 'override' and the optional ground truth contact,contact_force,contact_link[,contact_age]");
    CHECK(error_of(kHeader.substr(0, kHeader.size() - 1) + ",override\n0.0,1,1,0,1,2,0,0,85\n") ==
          "run.csv:7:9: override must lie in [0, 1] (1 = 100 %; got '85')");
    CHECK(error_of(kHeader.substr(0, kHeader.size() - 1) + ",payload\n0.0,1,1,0,1,2,0,0,-0.5\n") ==
          "run.csv:7:9: payload must be >= 0 kg (got '-0.5')");
    CHECK(error_of(kHeader.substr(0, kHeader.size() - 1) + ",payload\n0.0,1,1,0,1,2,0,0\n") ==
          "run.csv:7:9: row has 8 values; expected 9 (one per header column)");
    CHECK(error_of("# joints: 1\n# signal: torque\n# unit: Nm\nt,seq,cycle,mode,tau1,q1,contact,contact_force,contact_link\n"
                   "0,0,0,0,1,1,2,0,0\n") == "run.csv:5:7: contact must be 0 or 1 (got '2')");
    const std::string aged = "# joints: 1\n# signal: torque\n# unit: Nm\n"
                             "t,seq,cycle,mode,tau1,q1,contact,contact_force,contact_link,contact_age\n";
    CHECK(error_of(aged + "0,0,0,0,1,1,1,5,2,-0.001\n") == "run.csv:5:10: contact_age must be >= 0 s (got '-0.001')");
    CHECK(error_of(aged + "0,0,0,0,1,1,0,0,0,0.002\n") == "run.csv:5:10: contact_age must be 0 where contact is 0 (got '0.002')");
    CHECK(error_of(aged.substr(0, aged.size() - 1) + ",extra\n") ==
          "run.csv:4:11: unexpected column 'extra' after contact_age");
    CHECK(error_of("# joints: 1\n# signal: torque\n# unit: Nm\nt,seq,cycle,mode,tau1,q1,contact,contact_force,contact_link,age\n") ==
          "run.csv:4:10: unexpected column 'age' after contact_link (only 'contact_age' may follow it)");
}

TEST_CASE("the contact's age is read, written back and sliced with the samples", "[csv]") {
    // A contact that began 1.5 ms before the sample that first carries it.
    const Recording rec = parse(kHeader.substr(0, kHeader.size() - 1) +
                                ",contact,contact_force,contact_link,contact_age\n"
                                "0.000,1,1,0,1.5,2.5,0.1,0.2,0,0,0,0\n"
                                "0.004,2,1,0,1.6,2.4,0.1,0.2,1,20,3,0.0015\n"
                                "0.008,3,2,0,1.7,2.3,0.1,0.2,1,35,3,0.0055\n");
    REQUIRE(rec.ground_truth.has_value());
    CHECK(rec.ground_truth->contact_age == std::vector<double>{0.0, 0.0015, 0.0055});
    std::stringstream text;
    write_recording(rec, text);
    CHECK(text.str().find("contact,contact_force,contact_link,contact_age\n") != std::string::npos);
    const Recording back = read_recording(text, "mem");
    CHECK(back.ground_truth->contact_age == rec.ground_truth->contact_age);
    CHECK(rec.slice(1, 3).ground_truth->contact_age == std::vector<double>{0.0015, 0.0055});
    // Files written before the column existed read as before, without ages.
    const Recording old = parse(kHeader.substr(0, kHeader.size() - 1) + ",contact,contact_force,contact_link\n"
                                                                          "0.000,1,1,0,1.5,2.5,0.1,0.2,1,20,3\n");
    CHECK(old.ground_truth->contact_age.empty());
    std::stringstream old_text;
    write_recording(old, old_text);
    CHECK(old_text.str().find("contact_age") == std::string::npos);
}

TEST_CASE("a file that cannot be opened is named", "[csv]") {
    CHECK_THROWS_WITH(read_recording("/nonexistent/run.csv"), "/nonexistent/run.csv: cannot open the file for reading");
}
