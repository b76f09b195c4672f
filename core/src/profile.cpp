#include "warpguard/profile.hpp"

#include <cmath>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "warpguard/json_file.hpp"
#include <nlohmann/json.hpp>

namespace warpguard {

std::string to_string(MatchingMethod method) { return method == MatchingMethod::Mdtw ? "mdtw" : "ka-mdtw"; }

MatchingMethod parse_matching_method(const std::string& text) {
    if (text == "mdtw") return MatchingMethod::Mdtw;
    if (text == "ka-mdtw") return MatchingMethod::KaMdtw;
    throw std::invalid_argument(fmt::format("matching method '{}' is not known; expected mdtw or ka-mdtw", text));
}

std::string to_string(DetectorKind kind) { return kind == DetectorKind::Published ? "published" : "phase-aware"; }

DetectorKind parse_detector_kind(const std::string& text) {
    if (text == "published") return DetectorKind::Published;
    if (text == "phase-aware") return DetectorKind::PhaseAware;
    throw std::invalid_argument(fmt::format("detector '{}' is not known; expected phase-aware or published", text));
}

std::string describe_matched_signal(const Profile& profile) {
    const std::string signal = profile.signal == SignalKind::Current ? "motor current" : "torque";
    std::string out;
    if (profile.arm) {
        const std::string where = profile.arm->derivation.value("fitted_on", std::string());
        out = fmt::format("the {} less the arm model{}", signal, where.empty() ? std::string() : " fitted on " + where);
    } else {
        out = fmt::format("the {} as recorded", signal);
    }
    if (profile.payload) {
        out += profile.payload->beyond_reference_part ? ", less the torque of a declared payload beyond the reference's part"
                                                      : ", less the declared payload's torque";
    }
    if (profile.method == MatchingMethod::KaMdtw) out += ", divided by the lever lengths (KA-mDTW)";
    return out;
}

void Profile::validate() const {
    if (joints == 0) throw std::invalid_argument("profile has 0 joints");
    if (window < 2) throw std::invalid_argument(fmt::format("profile window is {} samples; mDTW needs >= 2", window));
    if (reference.size() < 2) {
        throw std::invalid_argument(fmt::format("profile reference has {} samples; expected >= 2", reference.size()));
    }
    if (reference.tau.size() != joints || reference.q.size() != joints) {
        throw std::invalid_argument(fmt::format("profile reference has {} signal and {} angle columns; expected {}",
                                                reference.tau.size(), reference.q.size(), joints));
    }
    for (std::size_t j = 0; j < joints; ++j) {
        if (reference.tau[j].size() != reference.size() || reference.q[j].size() != reference.size()) {
            throw std::invalid_argument(fmt::format("profile reference joint {} has {} values; expected {}", j + 1,
                                                    reference.tau[j].size(), reference.size()));
        }
    }
    if (!reference.cycle_begins.empty()) {
        const auto& b = reference.cycle_begins;
        if (b.size() != reference.cycles.size()) {
            throw std::invalid_argument(fmt::format("profile reference has {} cycle begins for {} cycles; expected one per cycle", b.size(),
                                                    reference.cycles.size()));
        }
        if (b.front() != 0) throw std::invalid_argument(fmt::format("profile reference's first cycle begins at sample {}; expected 0", b.front()));
        for (std::size_t c = 1; c < b.size(); ++c) {
            if (b[c] <= b[c - 1] || b[c] >= reference.size()) {
                throw std::invalid_argument(fmt::format("profile reference's cycle {} begins at sample {}; expected after {} and before {}", c + 1,
                                                        b[c], b[c - 1], reference.size()));
            }
        }
    }
    if (thresholds.size() != joints) {
        throw std::invalid_argument(fmt::format("profile has thresholds for {} joints; expected {}", thresholds.size(), joints));
    }
    for (std::size_t j = 0; j < joints; ++j) {
        const auto& th = thresholds[j];
        if (!(th.rule1.value >= 0) || !(th.rule2.value >= 0)) {
            throw std::invalid_argument(fmt::format("joint {}: thresholds must be >= 0, got rule1 {} and rule2 {}", j + 1,
                                                    th.rule1.value, th.rule2.value));
        }
    }
    if (detector == DetectorKind::PhaseAware) {
        if (!phase) throw std::invalid_argument("phase-aware profile has no phase thresholds");
        if (phase->rule1.size() != joints) {
            throw std::invalid_argument(fmt::format("phase thresholds for {} joints; expected {}", phase->rule1.size(), joints));
        }
        for (std::size_t j = 0; j < joints; ++j) {
            if (phase->rule1[j].size() != reference.size()) {
                throw std::invalid_argument(fmt::format("joint {}: {} phase thresholds; the reference has {} samples", j + 1,
                                                        phase->rule1[j].size(), reference.size()));
            }
            for (std::size_t k = 0; k < phase->rule1[j].size(); ++k) {
                if (!(phase->rule1[j][k] > 0) || !std::isfinite(phase->rule1[j][k])) {
                    throw std::invalid_argument(fmt::format("joint {}: phase threshold at reference sample {} is {}; expected > 0",
                                                            j + 1, k, phase->rule1[j][k]));
                }
            }
        }
        if (phase->persistence < 1) throw std::invalid_argument("phase-aware persistence must be >= 1 sample");
        if (!(phase->drift_rate >= 0 && phase->drift_rate < 1)) {
            throw std::invalid_argument(fmt::format("drift rate must be in [0, 1), got {}", phase->drift_rate));
        }
        if (!phase->drift_coulomb_nominal.empty() && phase->drift_coulomb_nominal.size() != joints) {
            throw std::invalid_argument(fmt::format("drift_coulomb_nominal has {} values; expected one per joint ({})",
                                                    phase->drift_coulomb_nominal.size(), joints));
        }
        for (std::size_t j = 0; j < phase->drift_coulomb_nominal.size(); ++j) {
            if (!(phase->drift_coulomb_nominal[j] >= 0) || !std::isfinite(phase->drift_coulomb_nominal[j])) {
                throw std::invalid_argument(fmt::format("joint {}: drift_coulomb_nominal is {}; expected a finite value >= 0", j + 1,
                                                        phase->drift_coulomb_nominal[j]));
            }
        }
    }
    if (speed) {
        // One value per joint and reference sample in every table of the speed model (its
        // unexplained part may be absent: a profile from before it was kept).
        const auto check_table = [&](const std::vector<std::vector<double>>& table, const char* what) {
            if (table.size() != joints) {
                throw std::invalid_argument(fmt::format("speed model's {} part for {} joints; expected {}", what, table.size(), joints));
            }
            for (std::size_t j = 0; j < joints; ++j) {
                if (table[j].size() != reference.size()) {
                    throw std::invalid_argument(fmt::format("joint {}: the speed model's {} part has {} values; the reference has {} samples",
                                                            j + 1, what, table[j].size(), reference.size()));
                }
            }
        };
        check_table(speed->inertial, "inertial");
        check_table(speed->viscous, "viscous");
        if (!speed->unexplained.empty()) check_table(speed->unexplained, "unexplained");
        if (!speed->speed_change.empty()) check_table(speed->speed_change, "speed-change");
    }
    if (!std::isnan(reference.speed_override) && !(reference.speed_override > 0.0 && reference.speed_override <= 1.0)) {
        throw std::invalid_argument(fmt::format("reference speed_override is {}; expected the override the reference was recorded at, in (0, 1] (1 = 100 %)",
                                                reference.speed_override));
    }
    if (!reference.payload.empty() && reference.payload.size() != reference.size()) {
        throw std::invalid_argument(fmt::format("the reference declares {} payload values for {} samples", reference.payload.size(), reference.size()));
    }
    for (std::size_t k = 0; k < reference.payload.size(); ++k) {
        if (!(reference.payload[k] >= 0) || !std::isfinite(reference.payload[k])) {
            throw std::invalid_argument(fmt::format("reference payload at sample {} is {}; expected a mass >= 0 kg", k, reference.payload[k]));
        }
    }
    if (payload) {
        if (reference.payload.empty()) throw std::invalid_argument("a payload model needs a reference that declares its payload");
        if (payload->model.dof() != joints || payload->signal_per_nm.size() != joints ||
            (!payload->relative_error.empty() && payload->relative_error.size() != joints)) {
            throw std::invalid_argument(fmt::format("payload model for {} joints; expected {}", payload->model.dof(), joints));
        }
    }
    if (arm) {
        if (arm->model.dof() != joints) {
            throw std::invalid_argument(fmt::format("the arm model has {} joints; the profile has {}", arm->model.dof(), joints));
        }
        if (signal != SignalKind::Torque || arm->unit != unit) {
            throw std::invalid_argument(fmt::format("the arm model was fitted to a torque in '{}'; the profile's signal is '{}' in '{}'",
                                                    to_string(arm->unit), to_string(signal), to_string(unit)));
        }
    }
    if (method == MatchingMethod::KaMdtw) {
        if (!kinematics) throw std::invalid_argument("KA-mDTW profile has no kinematics");
        if (kinematics->model.dof() != joints) {
            throw std::invalid_argument(fmt::format("kinematic model has {} joints; the profile has {}",
                                                    kinematics->model.dof(), joints));
        }
        if (!(kinematics->min_lever > 0)) {
            throw std::invalid_argument(fmt::format("min_lever must be > 0 m, got {}", kinematics->min_lever));
        }
    }
}

nlohmann::json to_json(const Profile& p) {
    using nlohmann::json;
    json thresholds = json::array();
    for (std::size_t j = 0; j < p.thresholds.size(); ++j) {
        const auto& th = p.thresholds[j];
        thresholds.push_back(
            {{"joint", j + 1},
             {"rule1",
              {{"value", th.rule1.value},
               {"derivation", fmt::format("{} x sigma{}", th.rule1.k, th.rule1.rounded_up ? ", rounded up to the next integer" : "")},
               {"k", th.rule1.k},
               {"rounded_up", th.rule1.rounded_up},
               {"sigma", th.rule1.sigma},
               {"mean", th.rule1.mean},
               {"max_abs", th.rule1.max_abs},
               {"samples", th.rule1.samples}}},
             {"rule2",
              {{"value", th.rule2.value},
               {"derivation", fmt::format("{} x largest nominal second eigenvalue", th.rule2.margin)},
               {"margin", th.rule2.margin},
               {"max", th.rule2.max},
               {"mean", th.rule2.mean},
               {"windows", th.rule2.windows}}}});
    }
    json ref = {{"source", p.reference.source},
                {"cycles", p.reference.cycles},
                {"first_sample", p.reference.first_sample},
                {"t", p.reference.t},
                {"tau", p.reference.tau},
                {"q", p.reference.q}};
    if (!p.reference.payload.empty()) ref["payload"] = p.reference.payload;
    if (!p.reference.cycle_begins.empty()) ref["cycle_begins"] = p.reference.cycle_begins;
    if (std::isfinite(p.reference.speed_override)) ref["speed_override"] = p.reference.speed_override;
    json out = {{"format", "warpguard-profile"},
                {"version", 1},
                {"robot", p.robot},
                {"joints", p.joints},
                {"signal", to_string(p.signal)},
                {"unit", to_string(p.unit)},
                {"window", p.window},
                {"method", to_string(p.method)},
                {"detector", to_string(p.detector)},
                {"thresholds", thresholds},
                {"calibration", p.calibration},
                {"reference", ref}};
    if (p.phase) {
        // Thresholds rounded to 6 significant digits: the file stays readable in size.
        json rule1 = json::array();
        for (const auto& joint : p.phase->rule1) {
            json values = json::array();
            for (double v : joint) values.push_back(std::stod(fmt::format("{:.6g}", v)));
            rule1.push_back(std::move(values));
        }
        out["phase_aware"] = {{"neighbourhood", p.phase->neighbourhood},
                              {"persistence", p.phase->persistence},
                              {"margin", p.phase->margin},
                              {"drift_rate", p.phase->drift_rate},
                              {"cusum_reference", p.phase->cusum_reference},
                              {"cusum_limit", p.phase->cusum_limit},
                              {"drift_coulomb_nominal", p.phase->drift_coulomb_nominal},
                              {"derivation", p.phase->derivation},
                              {"rule1", rule1}};
    }
    if (p.speed) out["speed_model"] = to_json(*p.speed);
    if (!p.current_sign.empty()) out["current_sign"] = p.current_sign;
    if (p.payload) out["payload_model"] = to_json(*p.payload);
    if (p.arm) out["arm_model"] = to_json(*p.arm);
    if (p.kinematics) {
        const auto& k = *p.kinematics;
        out["kinematics"] = {{"model", to_json(k.model)},
                             {"force", {{"frame", to_string(k.force.frame)},
                                        {"direction", {k.force.unit.x(), k.force.unit.y(), k.force.unit.z()}}}},
                             {"min_lever", k.min_lever}};
        if (!k.scaled_joints.empty()) {
            std::vector<std::size_t> one_based;
            for (std::size_t j : k.scaled_joints) one_based.push_back(j + 1);
            out["kinematics"]["scaled_joints"] = one_based;
        }
    }
    return out;
}

namespace {

const nlohmann::json& field(const nlohmann::json& obj, const char* key, const std::string& where) {
    if (!obj.is_object() || !obj.contains(key)) throw std::invalid_argument(fmt::format("{} has no '{}'", where, key));
    return obj.at(key);
}

template <typename T>
T typed(const nlohmann::json& obj, const char* key, const std::string& where) {
    const auto& v = field(obj, key, where);
    try {
        return v.get<T>();
    } catch (const nlohmann::json::exception&) {
        throw std::invalid_argument(fmt::format("{}.{} has the wrong type: {}", where, key, v.dump().substr(0, 60)));
    }
}

}  // namespace

Profile profile_from_json(const nlohmann::json& j) {
    if (!j.is_object() || j.value("format", "") != "warpguard-profile") {
        throw std::invalid_argument("not a WarpGuard profile (expected \"format\": \"warpguard-profile\")");
    }
    const int version = typed<int>(j, "version", "profile");
    if (version != 1) throw std::invalid_argument(fmt::format("profile version {} is not supported; expected 1", version));
    Profile p;
    p.robot = typed<std::string>(j, "robot", "profile");
    p.joints = typed<std::size_t>(j, "joints", "profile");
    p.signal = parse_signal_kind(typed<std::string>(j, "signal", "profile"));
    p.unit = parse_signal_unit(typed<std::string>(j, "unit", "profile"));
    p.window = typed<std::size_t>(j, "window", "profile");
    p.method = parse_matching_method(typed<std::string>(j, "method", "profile"));
    const auto& ref = field(j, "reference", "profile");
    p.reference.source = typed<std::string>(ref, "source", "reference");
    p.reference.cycles = typed<std::vector<std::int64_t>>(ref, "cycles", "reference");
    p.reference.first_sample = typed<std::size_t>(ref, "first_sample", "reference");
    p.reference.t = typed<std::vector<double>>(ref, "t", "reference");
    p.reference.tau = typed<std::vector<std::vector<double>>>(ref, "tau", "reference");
    p.reference.q = typed<std::vector<std::vector<double>>>(ref, "q", "reference");
    if (ref.contains("payload")) p.reference.payload = typed<std::vector<double>>(ref, "payload", "reference");
    if (ref.contains("cycle_begins")) p.reference.cycle_begins = typed<std::vector<std::size_t>>(ref, "cycle_begins", "reference");
    if (ref.contains("speed_override")) p.reference.speed_override = typed<double>(ref, "speed_override", "reference");
    const auto& ths = field(j, "thresholds", "profile");
    if (!ths.is_array()) throw std::invalid_argument("profile.thresholds must be an array");
    for (std::size_t k = 0; k < ths.size(); ++k) {
        const std::string where = fmt::format("thresholds[{}]", k);
        const auto& r1 = field(ths[k], "rule1", where);
        const auto& r2 = field(ths[k], "rule2", where);
        JointThresholds th;
        th.rule1.value = typed<double>(r1, "value", where + ".rule1");
        th.rule1.k = r1.value("k", 3.0);
        th.rule1.rounded_up = r1.value("rounded_up", false);
        th.rule1.sigma = r1.value("sigma", 0.0);
        th.rule1.mean = r1.value("mean", 0.0);
        th.rule1.max_abs = r1.value("max_abs", 0.0);
        th.rule1.samples = r1.value("samples", std::size_t{0});
        th.rule2.value = typed<double>(r2, "value", where + ".rule2");
        th.rule2.margin = r2.value("margin", 1.2);
        th.rule2.max = r2.value("max", 0.0);
        th.rule2.mean = r2.value("mean", 0.0);
        th.rule2.windows = r2.value("windows", std::size_t{0});
        p.thresholds.push_back(th);
    }
    if (j.contains("calibration")) p.calibration = j.at("calibration");
    p.detector = parse_detector_kind(j.value("detector", std::string("published")));
    if (j.contains("phase_aware") && !j.at("phase_aware").is_null()) {
        const auto& ph = j.at("phase_aware");
        PhaseAwareSettings s;
        s.neighbourhood = typed<std::size_t>(ph, "neighbourhood", "phase_aware");
        s.persistence = typed<std::size_t>(ph, "persistence", "phase_aware");
        s.margin = typed<double>(ph, "margin", "phase_aware");
        s.drift_rate = typed<double>(ph, "drift_rate", "phase_aware");
        s.cusum_reference = ph.value("cusum_reference", 0.5);
        s.cusum_limit = ph.value("cusum_limit", 0.0);
        s.rule1 = typed<std::vector<std::vector<double>>>(ph, "rule1", "phase_aware");
        if (ph.contains("drift_coulomb_nominal")) s.drift_coulomb_nominal = typed<std::vector<double>>(ph, "drift_coulomb_nominal", "phase_aware");
        if (ph.contains("derivation")) s.derivation = ph.at("derivation");
        p.phase = std::move(s);
    }
    if (j.contains("current_sign") && !j.at("current_sign").is_null()) {
        const auto signs = typed<std::vector<std::vector<int>>>(j, "current_sign", "profile");
        if (signs.size() != p.joints) {
            throw std::invalid_argument(fmt::format("current_sign has {} rows; expected {} (one per joint)", signs.size(), p.joints));
        }
        p.current_sign.assign(p.joints, std::vector<std::int8_t>());
        for (std::size_t r = 0; r < signs.size(); ++r) {
            if (signs[r].size() != p.reference.size()) {
                throw std::invalid_argument(fmt::format("current_sign[{}] has {} values; expected {} (one per reference sample)", r,
                                                        signs[r].size(), p.reference.size()));
            }
            for (std::size_t k = 0; k < signs[r].size(); ++k) {
                if (signs[r][k] != 1 && signs[r][k] != -1) {
                    throw std::invalid_argument(fmt::format("current_sign[{}][{}] is {}; expected 1 or -1", r, k, signs[r][k]));
                }
                p.current_sign[r].push_back(static_cast<std::int8_t>(signs[r][k]));
            }
        }
        if (p.signal != SignalKind::Current) throw std::invalid_argument("current_sign is given for a signal that is not a motor current");
    }
    if (j.contains("speed_model") && !j.at("speed_model").is_null()) {
        p.speed = speed_model_from_json(j.at("speed_model"), p.joints, p.reference.size());
    }
    if (j.contains("payload_model") && !j.at("payload_model").is_null()) {
        p.payload = payload_model_from_json(j.at("payload_model"), p.joints);
    }
    if (j.contains("arm_model") && !j.at("arm_model").is_null()) p.arm = arm_dynamics_from_json(j.at("arm_model"));
    if (j.contains("kinematics") && !j.at("kinematics").is_null()) {
        const auto& k = j.at("kinematics");
        const auto& force = field(k, "force", "kinematics");
        const auto dir = typed<std::vector<double>>(force, "direction", "kinematics.force");
        if (dir.size() != 3) throw std::invalid_argument("kinematics.force.direction must have 3 numbers");
        p.kinematics = KinematicsSettings{
            dh_model_from_json(field(k, "model", "kinematics")),
            ForceDirection::make(parse_force_frame(typed<std::string>(force, "frame", "kinematics.force")),
                                 Eigen::Vector3d(dir[0], dir[1], dir[2])),
            k.value("min_lever", kDefaultMinLever),
            {}};
        if (k.contains("scaled_joints")) {
            for (std::size_t joint : typed<std::vector<std::size_t>>(k, "scaled_joints", "kinematics")) {
                if (joint < 1 || joint > p.joints) {
                    throw std::invalid_argument(fmt::format("kinematics.scaled_joints: joint {} is not a joint of this profile (1..{})", joint, p.joints));
                }
                p.kinematics->scaled_joints.push_back(joint - 1);
            }
        }
    }
    p.validate();
    return p;
}

void save_profile(const Profile& profile, const std::string& path) {
    profile.validate();
    std::ofstream out(path);
    if (!out) throw std::runtime_error(fmt::format("{}: cannot open the file for writing", path));
    out << to_json(profile).dump(1) << '\n';
    if (!out) throw std::runtime_error(fmt::format("{}: write failed", path));
}

Profile load_profile(const std::string& path) {
    return load_json_file(path, "profile", [](const nlohmann::json& j) { return profile_from_json(j); });
}

}  // namespace warpguard
