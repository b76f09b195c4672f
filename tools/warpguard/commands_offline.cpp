// Offline subcommands: calibrate, evaluate, match, envelope, residual.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "warpguard/calibration.hpp"
#include "warpguard/decision_rules.hpp"
#include "warpguard/detector.hpp"
#include "warpguard/envelope.hpp"
#include "warpguard/evaluation.hpp"
#include "warpguard/json_file.hpp"
#include "warpguard/lever_length.hpp"
#include "warpguard/mdtw.hpp"
#include "warpguard/model_residual.hpp"
#include "warpguard/number_list.hpp"
#include "warpguard/recording_csv.hpp"

namespace warpguard::cli {

void print_interruptions(const nlohmann::json& record) {
    std::printf("note: %s\n", record.value("note", std::string()).c_str());
    const auto& list = record.value("list", nlohmann::json::array());
    for (std::size_t k = 0; k < list.size() && k < 5; ++k) {
        std::printf("  %s, row %zu: %s\n", list[k].value("file", std::string()).c_str(), list[k].value("row", std::size_t{0}),
                    list[k].value("what", std::string()).c_str());
    }
    if (list.size() > 5) std::printf("  ... and %zu more (the profile's calibration.interruptions)\n", list.size() - 5);
}

std::string describe_widest_cycles(const nlohmann::json& derivation, bool with_file) {
    if (!derivation.contains("widest_cycles") || derivation.at("widest_cycles").empty()) return "";
    auto median = [](std::vector<double> v) {
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
        return v[v.size() / 2];
    };
    const double ratio_median = median(derivation.at("cycle_maxima").get<std::vector<double>>());
    const double cusum_median = median(derivation.at("cusum_cycle_maxima").get<std::vector<double>>());
    std::string out = fmt::format("widest calibration cycles, ratio / CUSUM maximum (median of all {} cycles {:.2f} / {:.2f}):",
                                  derivation.at("cycle_maxima").size(), ratio_median, cusum_median);
    std::string file;
    for (const auto& c : derivation.at("widest_cycles")) {
        if (with_file && c.at("file").get<std::string>() != file) {
            file = c.at("file").get<std::string>();
            out += fmt::format(" {}:", file);
        }
        out += fmt::format(" cycle {} {:.2f} / {:.2f};", c.at("cycle").get<long long>(), c.at("ratio").get<double>(), c.at("cusum").get<double>());
    }
    out.back() = '.';
    return out;
}

namespace {

void write_json(const nlohmann::json& doc, const std::string& path) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error(fmt::format("{}: cannot open the file for writing", path));
    out << doc.dump(1) << '\n';
    if (!out) throw std::runtime_error(fmt::format("{}: write failed", path));
}



std::string fmt_opt(const std::optional<double>& v, double scale, const char* unit) {
    return v ? fmt::format("{:.1f} {}", *v * scale, unit) : std::string("-");
}

// ---------------------------------------------------------------------------------------------
struct CalibrateArgs {
    std::string reference;
    std::vector<std::string> nominal;
    std::size_t window = kDefaultWindow;
    std::size_t reference_cycles = 0;  // automatic (CalibrationOptions)
    double k = 3.0;
    bool round_up = false;
    double margin = 1.2;
    std::string method = "mdtw";
    std::string model;
    std::string arm;
    bool no_arm = false;
    bool keep_payload = false;
    std::string force_frame = "base";
    std::string force = "0,0,-1";
    double min_lever = kDefaultMinLever;
    std::string detector = "phase-aware";
    std::size_t persistence = 2;
    double target_cycles = 1000.0;
    double drift_cycles = CalibrationOptions{}.drift_cycles;  // one documented default (calibration.hpp)
    std::string ka_joints;
    std::size_t neighbourhood = 0;
    double cusum_reference = CalibrationOptions{}.cusum_reference;  // one documented default (calibration.hpp)
    std::string out;
};

void run_calibrate(const CalibrateArgs& a) {
    const Recording ref = read_recording(a.reference);
    std::vector<Recording> nominal;
    for (const auto& path : a.nominal) nominal.push_back(read_recording(path));
    std::vector<NamedRecording> named;
    for (std::size_t k = 0; k < nominal.size(); ++k) named.push_back({a.nominal[k], &nominal[k]});

    CalibrationOptions opt;
    opt.window = a.window;
    opt.reference_cycles = a.reference_cycles;
    opt.k_sigma = a.k;
    opt.round_up = a.round_up;
    opt.rule2_margin = a.margin;
    opt.method = parse_matching_method(a.method);
    opt.detector = parse_detector_kind(a.detector);
    opt.persistence = a.persistence;
    opt.target_cycles_per_false_stop = a.target_cycles;
    opt.drift_cycles = a.drift_cycles;
    opt.neighbourhood = a.neighbourhood;
    opt.cusum_reference = a.cusum_reference;
    opt.keep_payload = a.keep_payload;
    if (opt.method == MatchingMethod::KaMdtw) {
        if (a.model.empty()) throw std::invalid_argument("--method ka-mdtw needs --model MODEL.json");
        opt.kinematics = KinematicsSettings{load_dh_model(a.model),
                                            ForceDirection::make(parse_force_frame(a.force_frame), parse_xyz(a.force, "--force")),
                                            a.min_lever, {}};
        if (!a.ka_joints.empty()) {
            for (double v : parse_number_list(a.ka_joints, "--ka-joints")) {
                if (v < 1 || v > static_cast<double>(ref.joints()) || v != std::floor(v)) {
                    throw std::invalid_argument(fmt::format("--ka-joints '{}': {} is not a joint number 1..{}", a.ka_joints, v, ref.joints()));
                }
                opt.kinematics->scaled_joints.push_back(static_cast<std::size_t>(v) - 1);
            }
        }
    }
    if (opt.method != MatchingMethod::KaMdtw && !a.model.empty()) opt.dynamics_model = load_dh_model(a.model);
    if (!a.arm.empty()) opt.arm = load_json_file(a.arm, "arm model", arm_dynamics_from_json);
    // The default detector with the robot's kinematic model and a signed torque matches the deviation
    // from the arm's own dynamics, fitted on the nominal recordings, unless a dry-run model is given
    // or --no-arm asks for the signal itself (docs/detection.md, *The arm model from the calibration
    // recordings*).
    const bool arm_from_nominal = !a.no_arm && a.arm.empty() && arm_from_nominal_applies(opt, ref);
    opt.arm_from_nominal = arm_from_nominal;
    const Profile p = calibrate({a.reference, &ref}, named, opt);
    save_profile(p, a.out);

    std::printf("profile %s: robot %s, %zu joints, %s in %s, method %s, window m = %zu, reference n = %zu samples "
                "(cycles %s)\n",
                a.out.c_str(), p.robot.c_str(), p.joints, to_string(p.signal).c_str(), to_string(p.unit).c_str(),
                to_string(p.method).c_str(), p.window, p.reference.size(),
                nlohmann::json(p.reference.cycles).dump().c_str());
    const auto& coverage = p.calibration.at("reference_coverage");
    std::printf("reference: %d cycles (%s); %s\n", coverage.value("reference_cycles", 0),
                coverage.value("automatic", false) ? "chosen by calibration" : "as given", coverage.value("note", std::string()).c_str());
    if (std::isfinite(p.reference.speed_override)) {
        std::printf("reference recorded at speed override %.0f %% (reported)%s\n", 100.0 * p.reference.speed_override,
                    p.speed ? ": a stream starts at the speed its first report gives" : "");
    }
    if (p.calibration.contains("interruptions")) print_interruptions(p.calibration.at("interruptions"));
    if (coverage.value("uncovered", 0) > 0 && p.method != MatchingMethod::KaMdtw) {
        std::fprintf(stderr, "warning: the reference does not cover %d of %d nominal cycles (see 'reference:' above)\n",
                     coverage.value("uncovered", 0), coverage.value("cycles", 0));
    }
    std::printf("%-6s %14s %14s %14s %14s %14s\n", "joint", "theta1", "sigma1", "max|dev|", "theta2", "max eig");
    for (std::size_t j = 0; j < p.joints; ++j) {
        const auto& th = p.thresholds[j];
        std::printf("%-6zu %14.6g %14.6g %14.6g %14.6g %14.6g\n", j + 1, th.rule1.value, th.rule1.sigma,
                    th.rule1.max_abs, th.rule2.value, th.rule2.max);
    }
    std::printf("from %zu nominal windows in %zu file(s)\n", p.thresholds[0].rule1.samples, a.nominal.size());
    if (p.arm && arm_from_nominal) {
        std::printf("matched signal: the deviation from the arm model fitted on %d samples of the nominal recordings (%s)\n",
                    p.arm->derivation.value("samples", 0), p.arm->derivation.value("payload", std::string()).c_str());
        for (const auto& pair : p.arm->derivation.value("dependent_joints", nlohmann::json::array())) {
            std::printf("note: joints %d and %d moved together in every nominal recording (velocity correlation %.3f): the arm "
                        "model cannot tell their inertias apart\n",
                        pair.at("joints").at(0).get<int>(), pair.at("joints").at(1).get<int>(), pair.value("velocity_correlation", 0.0));
        }
    } else if (p.arm) {
        std::printf("matched signal: the deviation from the arm model %s (fitted on %d dry-run samples)\n", a.arm.c_str(),
                    p.arm->derivation.value("samples", 0));
    } else if (arm_from_nominal) {
        std::printf("matched signal: as recorded (%s)\n",
                    p.calibration.value("arm_model", nlohmann::json::object()).value("not_fitted", std::string()).c_str());
    }
    if (p.calibration.contains("payload_model") && p.calibration.at("payload_model").is_string()) {
        std::printf("declared payload: %s\n", p.calibration.at("payload_model").get<std::string>().c_str());
    }
    if (p.kinematics) {
        std::string scaled;
        for (std::size_t j = 0; j < p.joints; ++j) {
            if (p.kinematics->scales(j)) scaled += fmt::format("{}{}", scaled.empty() ? "" : ",", j + 1);
        }
        std::printf("KA-mDTW: joints %s divided by their lever length (force %s frame); unscaled (lever below %.3f m): %s\n", scaled.c_str(),
                    to_string(p.kinematics->force.frame).c_str(), p.kinematics->min_lever,
                    p.calibration.value("ka_unscaled_joints", std::string("none")).c_str());
    }
    if (p.speed) {
        std::printf("speed model (what scales with the override), fitted to %d nominal samples:\n",
                    p.speed->derivation.value("samples", 0));
        std::printf("  %-6s %6s %14s %14s %10s %16s %10s\n", "joint", "rank", "residual rms", "signal sd", "explained", "largest inertial",
                    "Coulomb");
        for (const auto& jt : p.speed->derivation.value("joints", nlohmann::json::array())) {
            const int joint = jt.value("joint", 0);  // 1-based
            const double coulomb =
                joint >= 1 && static_cast<std::size_t>(joint) <= p.speed->coulomb.size() ? p.speed->coulomb[joint - 1] : 0.0;
            std::printf("  %-6d %6d %14.4g %14.4g %9.1f%% %16.4g %10.4g%s\n", jt.value("joint", 0), jt.value("rank", 0),
                        jt.value("residual_rms", 0.0), jt.value("signal_sd", 0.0), 100.0 * jt.value("explained", 0.0),
                        jt.value("largest_inertial", 0.0), coulomb,
                        jt.value("dropped", false)         ? "  dropped: larger than the signal's range, compared as recorded"
                        : jt.value("shared_backed", false) ? "  own fit larger than the signal's range: the shared parameters x a factor, own friction"
                                                           : "");
        }
        if (std::isfinite(p.speed->same_speed_tolerance)) {
            std::printf("  the recorded speed: ratio within 1 +- %.4f (the estimate's spread on the nominal recordings); beyond it,\n"
                        "  joints at rest or breaking away get a band of 2 x Coulomb\n",
                        p.speed->same_speed_tolerance);
        }
    } else if (p.phase) {
        std::printf("speed model: %s\n", p.calibration.value("speed_model", std::string("none")).c_str());
    }
    if (p.phase) {
        const auto& ph = *p.phase;
        std::printf("detector phase-aware (default): thresholds per reference sample = %.3f x largest nominal |deviation| "
                    "within +-%zu samples; STOP after %zu samples over; drift rate %.4g per update\n",
                    ph.margin, ph.neighbourhood, ph.persistence, ph.drift_rate);
        std::printf("  margin from %d calibration cycles (split halves): per-cycle maxima mean %.3f, sd %.3f, largest %.3f; "
                    "for 1 false stop per %.0f cycles: Gumbel quantile %.3f, tail quantile %.3f (top %d maxima)\n",
                    ph.derivation.value("cycles", 0), ph.derivation.value("cycle_max_mean", 0.0), ph.derivation.value("cycle_max_sd", 0.0),
                    ph.derivation.value("cycle_max_largest", 0.0), ph.derivation.value("target_cycles_per_false_stop", 0.0),
                    ph.derivation.value("gumbel_quantile", 0.0), ph.derivation.value("tail_quantile", 0.0),
                    ph.derivation.value("tail_exceedances", 0));
        if (ph.cusum_limit > 0) {
            std::printf("  CUSUM of the ratio over %.2f: STOP above %.3f (per-cycle maxima mean %.3f, largest %.3f; "
                        "Gumbel quantile %.3f, tail quantile %.3f)\n",
                        ph.cusum_reference, ph.cusum_limit, ph.derivation.value("cusum_cycle_max_mean", 0.0),
                        ph.derivation.value("cusum_cycle_max_largest", 0.0), ph.derivation.value("cusum_gumbel_quantile", 0.0),
                        ph.derivation.value("cusum_tail_quantile", 0.0));
        }
        const std::string widest = describe_widest_cycles(ph.derivation, true);
        if (!widest.empty()) std::printf("  %s\n", widest.c_str());
        std::printf("%-6s %14s %14s %14s\n", "joint", "min theta", "median theta", "max theta");
        for (std::size_t j = 0; j < p.joints; ++j) {
            std::vector<double> v = ph.rule1[j];
            std::sort(v.begin(), v.end());
            std::printf("%-6zu %14.6g %14.6g %14.6g\n", j + 1, v.front(), v[v.size() / 2], v.back());
        }
    } else {
        std::printf("detector published (thesis 3.2.3)\n");
    }
}

// ---------------------------------------------------------------------------------------------
struct EvaluateArgs {
    std::string profile;
    std::string envelope;
    std::string residual;
    std::vector<std::string> runs;
    std::string out;
};

void run_evaluate(const EvaluateArgs& a) {
    if (!a.profile.empty() + !a.envelope.empty() + !a.residual.empty() != 1) {
        throw std::invalid_argument("give exactly one of --profile PROFILE.json, --envelope LIMITS.json or --residual LIMITS.json");
    }
    std::unique_ptr<Detector> detector;
    std::unique_ptr<EnvelopeChecker> checker;
    std::unique_ptr<ResidualChecker> residual;
    std::optional<Profile> profile;
    std::size_t joints = 0;
    std::size_t window = 1;
    if (!a.profile.empty()) {
        profile = load_profile(a.profile);
        detector = std::make_unique<Detector>(*profile);
        joints = detector->joints();
        window = detector->window_length();
    } else if (!a.envelope.empty()) {
        checker = std::make_unique<EnvelopeChecker>(
            load_json_file(a.envelope, "envelope limits", [](const nlohmann::json& j) { return envelope_from_json(j); }));
        joints = checker->limits().joints.size();
    } else {
        residual = std::make_unique<ResidualChecker>(
            load_json_file(a.residual, "residual limits", [](const nlohmann::json& j) { return residual_limits_from_json(j); }));
        joints = residual->limits().joints.size();
    }
    const char* kind = detector ? "profile" : checker ? "envelope" : "residual limits";

    nlohmann::json runs = nlohmann::json::array();
    std::vector<RuleSummary> by_rule(3);
    std::size_t collisions = 0, detected = 0, missed = 0, false_events = 0, events = 0, clean = 0, flagged = 0;
    std::vector<double> delays;
    for (const auto& path : a.runs) {
        const Recording rec = read_recording(path);
        if (rec.joints() != joints) {
            throw std::invalid_argument(fmt::format("{}: has {} joints; the {} has {}", path, rec.joints(),
                                                    kind, joints));
        }
        if (detector && (rec.info().unit != detector->profile().unit || rec.info().signal != detector->profile().signal)) {
            throw std::invalid_argument(fmt::format("{}: signal {} in {}; the profile expects {} in {}", path,
                                                    to_string(rec.info().signal), to_string(rec.info().unit),
                                                    to_string(detector->profile().signal),
                                                    to_string(detector->profile().unit)));
        }
        if (residual) residual->check_recording(rec, path);
        if (detector && detector->profile().payload && !rec.declares_payload()) {
            throw std::invalid_argument(fmt::format("{}: declares no payload; the profile has a payload model (its recordings declared "
                                                    "it) and would compare every sample unloaded of a payload nobody declares",
                                                    path));
        }
        // Every recording is a run of its own: a fresh detector, so that nothing one run taught
        // it (the friction drift it learned, which the daemon rightly keeps across reconnects of
        // the same robot) carries into the next (a run with friction drift +30 % before a nominal
        // one left the planar arm's nominal run with 100 false stops instead of 0).
        if (detector) detector = std::make_unique<Detector>(*profile);
        if (checker) checker->reset();
        if (residual) residual->reset();
        // As in operation: rows the robot sent while held are not judged, and it starts afresh after.
        const std::vector<Decision> decisions = decide_as_in_operation(
            rec, [&](const Sample& s) { return detector ? detector->update(s) : checker ? checker->update(s) : residual->update(s); },
            [&] {
                if (detector) detector->reset();
                if (checker) checker->reset();
                if (residual) residual->reset();
            });
        const RunEvaluation run = evaluate_decisions(path, rec, decisions, window);
        runs.push_back(to_json(run));
        for (std::size_t r = 0; r < by_rule.size(); ++r) accumulate(by_rule[r], run.by_rule[r]);
        events += run.events.size();
        clean += run.clean_cycles;
        flagged += run.clean_cycles_flagged;
        std::printf("%s: %zu samples, %zu stop events, %zu of %zu clean cycles flagged", path.c_str(), run.samples,
                    run.events.size(), run.clean_cycles_flagged, run.clean_cycles);
        if (run.truth) {
            const auto& s = *run.truth;
            collisions += s.collisions.size();
            detected += s.detected;
            missed += s.missed;
            false_events += s.false_stop_events;
            for (const auto& c : s.collisions) {
                if (c.detected) delays.push_back(c.delay);
            }
            std::printf("; collisions %zu, detected %zu, missed %zu, false stop events %zu, delay median %s p95 %s",
                        s.collisions.size(), s.detected, s.missed, s.false_stop_events,
                        fmt_opt(s.delay_median, 1000.0, "ms").c_str(), fmt_opt(s.delay_p95, 1000.0, "ms").c_str());
        }
        std::printf("\n");
    }
    const auto median = percentile(delays, 50.0);
    const auto p95 = percentile(delays, 95.0);
    auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    nlohmann::json rules = nlohmann::json::array();
    for (const auto& r : by_rule) rules.push_back(to_json(r));
    nlohmann::json doc = {{"format", "warpguard-evaluation"},
                          {"version", 1},
                          {"detector", detector ? to_string(detector->profile().method) : checker ? "envelope" : "model-residual"},
                          {"profile", detector ? a.profile : checker ? a.envelope : a.residual},
                          {"runs", runs},
                          {"totals",
                           {{"runs", a.runs.size()},
                            {"stop_events", events},
                            {"clean_cycles", clean},
                            {"clean_cycles_flagged", flagged},
                            {"collisions", collisions},
                            {"detected", detected},
                            {"missed", missed},
                            {"false_stop_events", false_events},
                            {"delay_median", opt(median)},
                            {"delay_p95", opt(p95)},
                            {"by_rule", rules}}}};
    write_json(doc, a.out);
    std::printf("total: %zu stop events, %zu of %zu clean cycles flagged", events, flagged, clean);
    if (collisions > 0) {
        std::printf("; collisions %zu, detected %zu, missed %zu, false stop events %zu, delay median %s p95 %s",
                    collisions, detected, missed, false_events, fmt_opt(median, 1000.0, "ms").c_str(),
                    fmt_opt(p95, 1000.0, "ms").c_str());
    }
    std::printf("\n");
    // The thesis's Table 3 form: each rule alone and both together.
    for (const auto& r : by_rule) {
        std::printf("  %-9s clean cycles flagged %zu of %zu (%.2f %%)", r.name.c_str(), r.clean_cycles_flagged, clean,
                    clean ? 100.0 * static_cast<double>(r.clean_cycles_flagged) / static_cast<double>(clean) : 0.0);
        if (r.collisions > 0) {
            std::printf(", collisions detected %zu of %zu (%.2f %%)", r.detected, r.collisions,
                        100.0 * static_cast<double>(r.detected) / static_cast<double>(r.collisions));
        }
        std::printf("\n");
    }
    std::printf("wrote %s\n", a.out.c_str());
}

// ---------------------------------------------------------------------------------------------
struct MatchArgs {
    std::string profile;
    std::string run;
    std::vector<std::size_t> indices;
    std::size_t joint = 1;
    std::size_t window = 0;  // 0: the profile's m
    bool path = false;
    bool json = false;
};

// What the detector matched at `index` (just fed): printed, or added to `docs` with --json.
void report_match(const MatchArgs& a, const Detector& detector, const Recording& rec, std::size_t index,
                  const Decision& decision, nlohmann::json& docs) {
    const std::size_t j = a.joint - 1;
    const auto& ev = detector.evaluations()[j];
    const auto window = detector.window(j);
    const auto ref = detector.reference(j);
    const auto path = detector.path(j);

    // "Realistic" error (§4.5): classic DTW of joint jj's window against the span it matched, on
    // unscaled signals. The window starts as copies of sample 0, so positions before the stream map
    // to sample 0.
    const auto dtw_on_span = [&](std::size_t jj) {
        const auto& e = detector.evaluations()[jj];
        const auto& r = detector.profile().reference.tau[jj];
        std::vector<double> w(window.size());
        for (std::size_t k = 0; k < w.size(); ++k) {
            const long src = static_cast<long>(index + 1 + k) - static_cast<long>(w.size());
            w[k] = rec.tau[jj][static_cast<std::size_t>(std::max(0L, src))];
        }
        return dtw_match(w, std::span<const double>(r).subspan(e.ref_start, e.ref_end - e.ref_start + 1)).cost;
    };

    const auto& th = detector.profile().thresholds[j];
    nlohmann::json doc = {{"file", a.run},
                          {"index", index},
                          {"t", rec.t[index]},
                          {"joint", a.joint},
                          {"method", to_string(detector.profile().method)},
                          {"window", window.size()},
                          {"reference_start", ev.ref_start},
                          {"reference_end", ev.ref_end},
                          {"cost", ev.cost},
                          {"dtw_cost_on_span", dtw_on_span(j)},
                          {"rule1", {{"value", ev.rule1.magnitude()}, {"deviation", ev.rule1.deviation},
                                     {"partner", ev.rule1.partner}, {"threshold", th.rule1.value}}},
                          {"rule2", {{"value", ev.rule2}, {"threshold", th.rule2.value}}},
                          {"decision", {{"verdict", to_string(decision.verdict)}, {"joint", decision.joint},
                                        {"rule", to_string(decision.rule)}}}};
    // Every joint's match at the same sample (one replay serves all joints).
    nlohmann::json all = nlohmann::json::array();
    for (std::size_t jj = 0; jj < detector.joints(); ++jj) {
        const auto& e = detector.evaluations()[jj];
        all.push_back({{"joint", jj + 1}, {"reference_start", e.ref_start}, {"reference_end", e.ref_end}, {"cost", e.cost},
                       {"dtw_cost_on_span", dtw_on_span(jj)}});
    }
    doc["joints"] = all;
    if (a.path) {
        nlohmann::json steps = nlohmann::json::array();
        for (const auto& s : path) steps.push_back({s.i, s.j, window[s.i], ref[s.j]});
        doc["path"] = steps;
    }
    if (a.json) {
        docs.push_back(std::move(doc));
        return;
    }
    std::printf("%s sample %zu (t = %.4f s), joint %zu, %s, window m = %zu\n", a.run.c_str(), index, rec.t[index],
                a.joint, to_string(detector.profile().method).c_str(), window.size());
    std::printf("matched reference span: %zu .. %zu (%zu samples)\n", ev.ref_start, ev.ref_end, ev.ref_end - ev.ref_start + 1);
    std::printf("mDTW cost d(m,end): %.6g; classic DTW on that span: %.6g\n", ev.cost, dtw_on_span(j));
    std::printf("rule 1: |a(m) - b(%zu)| = %.6g (threshold %.6g)\n", ev.rule1.partner, ev.rule1.magnitude(), th.rule1.value);
    std::printf("rule 2: second eigenvalue = %.6g (threshold %.6g)\n", ev.rule2, th.rule2.value);
    std::printf("decision: %s", to_string(decision.verdict).c_str());
    if (decision.stop()) std::printf(" (joint %zu, %s)", decision.joint, to_string(decision.rule).c_str());
    std::printf("\n");
    if (a.path) {
        std::printf("path (i j a(i) b(j)):\n");
        for (const auto& s : path) std::printf("%u %u %.6g %.6g\n", s.i, s.j, window[s.i], ref[s.j]);
    }
}

void run_match(const MatchArgs& a) {
    Profile profile = load_profile(a.profile);
    if (a.window != 0) {
        // Another window length than the profile's m: the matching alone (thesis §4.5 matches whole
        // sections of a task); the thresholds were calibrated for m and mean nothing for it.
        if (a.window < 2) throw std::invalid_argument(fmt::format("--window {}: mDTW needs a window of >= 2 samples", a.window));
        profile.window = a.window;
    }
    Detector detector(std::move(profile));
    const Recording rec = read_recording(a.run);
    if (rec.joints() != detector.joints()) {
        throw std::invalid_argument(fmt::format("{}: has {} joints; the profile has {}", a.run, rec.joints(), detector.joints()));
    }
    if (a.indices.empty()) throw std::invalid_argument("--index: give at least one sample index");
    for (std::size_t k = 0; k < a.indices.size(); ++k) {
        if (a.indices[k] >= rec.size()) {
            throw std::invalid_argument(fmt::format("--index {} is outside {} ({} samples, 0-based)", a.indices[k], a.run, rec.size()));
        }
        if (k > 0 && a.indices[k] <= a.indices[k - 1]) {
            throw std::invalid_argument(fmt::format("--index: {} after {}; several indices must increase (one replay serves them all)",
                                                    a.indices[k], a.indices[k - 1]));
        }
    }
    if (a.joint < 1 || a.joint > detector.joints()) {
        throw std::invalid_argument(fmt::format("--joint {} is not a joint of this robot (1..{})", a.joint, detector.joints()));
    }
    // Feed the stream up to each index, exactly as in operation, so the window is what the detector saw.
    std::vector<double> tau(rec.joints()), q(rec.joints());
    Decision decision;
    nlohmann::json docs = nlohmann::json::array();
    std::size_t fed = 0;
    // The classic DTW of the raw window compares the signal the reference holds: with an arm model,
    // the run's deviation from it.
    const auto& arm = detector.profile().arm;
    const Recording matched = arm ? causal_arm_deviation(*arm, rec) : Recording();
    for (const std::size_t index : a.indices) {
        for (; fed <= index; ++fed) decision = detector.update(rec.sample(fed, tau, q));
        report_match(a, detector, arm ? matched : rec, index, decision, docs);
    }
    if (a.json) std::printf("%s\n", (docs.size() == 1 ? docs[0] : docs).dump(1).c_str());
}

// ---------------------------------------------------------------------------------------------
struct EnvelopeArgs {
    std::string recording;
    std::optional<std::size_t> period;
    std::optional<std::size_t> shift;
    bool round_up = false;
    std::string out;
};

void run_envelope(const EnvelopeArgs& a) {
    const Recording rec = read_recording(a.recording);
    EnvelopeOptions opt;
    opt.period = a.period;
    opt.shift = a.shift;
    opt.round_up = a.round_up;
    const EnvelopeLimits lim = derive_envelope(rec, a.recording, opt);
    write_json(to_json(lim), a.out);
    std::printf("envelope %s: period N = %zu samples, shift s = %zu samples (from %zu aligned cycles), %zu complete cycles\n",
                a.out.c_str(), lim.period, lim.shift, lim.cycle_shifts.size(), lim.cycles);
    std::printf("%-6s %14s %14s %14s\n", "joint", "tolerance", "max excursion", "max step D");
    for (std::size_t j = 0; j < lim.joints.size(); ++j) {
        const auto& e = lim.joints[j];
        std::printf("%-6zu %14.6g %14.6g %14.6g\n", j + 1, e.tolerance, e.max_excursion, e.max_step);
    }
}

// ---------------------------------------------------------------------------------------------
struct ResidualArgs {
    std::string recording;
    std::string profile;
    double widening = 0.1;
    std::size_t persistence = 2;
    std::string out;
};

void run_residual(const ResidualArgs& a) {
    const Profile profile = load_profile(a.profile);
    if (!profile.arm) {
        throw std::invalid_argument(fmt::format("{}: has no arm model (calibrate the phase-aware detector with --model on a signed "
                                                "torque, or with --arm)",
                                                a.profile));
    }
    const Recording rec = read_recording(a.recording);
    const ResidualLimits lim = derive_residual_limits(*profile.arm, profile.payload, rec, a.recording, a.widening, a.persistence);
    write_json(to_json(lim), a.out);
    std::printf("residual limits %s: the arm model%s of %s over %zu samples of %s, widened by %g %%, %zu samples in a row\n",
                a.out.c_str(), lim.payload ? " and payload model" : "", a.profile.c_str(), lim.samples, a.recording.c_str(),
                100.0 * lim.widening, lim.persistence);
    std::printf("%-6s %14s %14s %14s %14s\n", "joint", "least", "largest", "lower", "upper");
    for (std::size_t j = 0; j < lim.joints.size(); ++j) {
        const auto& b = lim.joints[j];
        std::printf("%-6zu %14.6g %14.6g %14.6g %14.6g\n", j + 1, b.least, b.largest, b.lower, b.upper);
    }
}

}  // namespace

void register_calibrate(CLI::App& app) {
    auto args = std::make_shared<CalibrateArgs>();
    auto* cmd = app.add_subcommand("calibrate", "Build a profile: reference + thresholds from nominal recordings (thesis §3.2.3)");
    cmd->add_option("--reference", args->reference, "Recording with >= 2 complete cycles of the task")->required()->check(CLI::ExistingFile);
    cmd->add_option("--nominal", args->nominal, "Held-out nominal recordings (no collisions)")->required()->expected(1, -1)->check(CLI::ExistingFile);
    cmd->add_option("--window", args->window, "Measurement window m in samples")->capture_default_str()->check(CLI::Range(2, 100000));
    cmd->add_option("--reference-cycles", args->reference_cycles,
                    "Complete cycles cut into the reference (default: the fewest from 2 whose joint path covers every nominal cycle's)")
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--k", args->k, "Rule 1: theta1 = k * sigma")->capture_default_str();
    cmd->add_flag("--round-up", args->round_up, "Rule 1: round theta1 up to the next integer (as the thesis)");
    cmd->add_option("--margin", args->margin, "Rule 2: theta2 = margin * nominal maximum")->capture_default_str();
    cmd->add_option("--method", args->method, "mdtw or ka-mdtw")->capture_default_str()->check(CLI::IsMember({"mdtw", "ka-mdtw"}));
    cmd->add_option("--model", args->model, "The robot's kinematic model JSON (warpguard identify dh): needed by KA-mDTW; "
                   "gives the phase-aware detector its speed-override model")->check(CLI::ExistingFile);
    cmd->add_option("--arm", args->arm, "The arm's own dynamics JSON (warpguard identify dynamics, fitted on a dry run): match the "
                   "deviation from it, what the task's force adds (thesis 4.5.1), rather than the signal")->check(CLI::ExistingFile);
    cmd->add_flag("--no-arm", args->no_arm,
                  "Match the signal itself. Without it and without --arm, the phase-aware detector with --model, a signed torque "
                  "and recordings that declare the payload fits the arm model on the nominal recordings (less their declared "
                  "payload) and matches the deviation from it")
        ->excludes("--arm");
    cmd->add_flag("--keep-payload", args->keep_payload,
                  "Match the declared payload's torque as part of the signal rather than taking it off with a payload model; "
                  "only a part of another mass than the reference's is taken off, by its difference "
                  "(KA-mDTW always does: its lever lengths scale the load's force)");
    cmd->add_option("--force-frame", args->force_frame, "Frame of the force direction: base or tool")->capture_default_str()->check(CLI::IsMember({"base", "tool"}));
    cmd->add_option("--force", args->force, "Force direction x,y,z")->capture_default_str();
    cmd->add_option("--min-lever", args->min_lever, "Smallest lever length in m to divide by")->capture_default_str();
    cmd->add_option("--ka-joints", args->ka_joints, "KA-mDTW: joints to scale, e.g. 2,3,5 (default: every joint with a lever over the whole reference)");
    cmd->add_option("--detector", args->detector, "phase-aware (default) or published (thesis 3.2.3)")->capture_default_str()
        ->check(CLI::IsMember({"phase-aware", "published"}));
    cmd->add_option("--persistence", args->persistence, "Phase-aware: samples over the threshold in a row before STOP")
        ->capture_default_str()->check(CLI::Range(1, 1000));
    cmd->add_option("--target-cycles", args->target_cycles, "Phase-aware: nominal cycles per false stop the margin is fitted for")
        ->capture_default_str();
    cmd->add_option("--drift-cycles", args->drift_cycles, "Phase-aware: drift time constant in cycles (0 = off)")->capture_default_str();
    cmd->add_option("--neighbourhood", args->neighbourhood, "Phase-aware: +- reference samples pooled (0 = the window m)")->capture_default_str();
    cmd->add_option("--cusum-reference", args->cusum_reference,
                    "Phase-aware: ratio above which deviations accumulate towards the CUSUM limit (0 = no CUSUM)")
        ->capture_default_str()->check(CLI::Range(0.0, 100.0));
    cmd->add_option("--out", args->out, "Profile JSON to write")->required();
    cmd->callback([args] { run_calibrate(*args); });
}

void register_evaluate(CLI::App& app) {
    auto args = std::make_shared<EvaluateArgs>();
    auto* cmd = app.add_subcommand("evaluate", "Run a profile (or envelope or residual limits) over recordings and report stop events");
    cmd->add_option("--profile", args->profile, "Profile JSON from 'warpguard calibrate'")->check(CLI::ExistingFile);
    cmd->add_option("--envelope", args->envelope, "Envelope limits JSON from 'warpguard envelope'")->check(CLI::ExistingFile);
    cmd->add_option("--residual", args->residual, "Residual limits JSON from 'warpguard residual' (the model-based reference method)")
        ->check(CLI::ExistingFile);
    cmd->add_option("runs", args->runs, "Recordings to evaluate")->required()->expected(1, -1)->check(CLI::ExistingFile);
    cmd->add_option("--out", args->out, "Result JSON to write")->required();
    cmd->callback([args] { run_evaluate(*args); });
}

void register_match(CLI::App& app) {
    auto args = std::make_shared<MatchArgs>();
    auto* cmd = app.add_subcommand("match", "Show how one measurement window matches the reference");
    cmd->add_option("--profile", args->profile, "Profile JSON")->required()->check(CLI::ExistingFile);
    cmd->add_option("--run", args->run, "Recording the window is taken from")->required()->check(CLI::ExistingFile);
    cmd->add_option("--index", args->indices,
                    "Sample index (0-based) of the newest sample in the window; several, increasing (e.g. 500,900): one replay, a JSON array")
        ->required()
        ->expected(1, -1)
        ->delimiter(',');
    cmd->add_option("--window", args->window,
                    "Match a window of this many samples instead of the profile's m (the matching only: thresholds are for m)");
    cmd->add_option("--joint", args->joint, "Joint (1-based)")->capture_default_str();
    cmd->add_flag("--path", args->path, "Print the warping path");
    cmd->add_flag("--json", args->json, "Print JSON");
    cmd->callback([args] { run_match(*args); });
}

void register_envelope(CLI::App& app) {
    auto args = std::make_shared<EnvelopeArgs>();
    auto* cmd = app.add_subcommand("envelope", "Derive the controller-side envelope limits of thesis §3.1 from recorded cycles");
    cmd->add_option("recording", args->recording, "Recording with >= 2 complete cycles")->required()->check(CLI::ExistingFile);
    cmd->add_option("--period", args->period, "Samples per period in operation (default: mean cycle length)");
    cmd->add_option("--shift", args->shift, "Shift s in samples (default: measured by DTW)");
    cmd->add_flag("--round-up", args->round_up, "Round tolerance and step limit up to the next integer");
    cmd->add_option("--out", args->out, "Limits JSON to write")->required();
    cmd->callback([args] { run_envelope(*args); });
}

void register_residual(CLI::App& app) {
    auto args = std::make_shared<ResidualArgs>();
    auto* cmd = app.add_subcommand("residual", "Derive the model-based residual's static band (a reference method) from a collision-free recording");
    cmd->add_option("recording", args->recording, "Collision-free recording of the task (e.g. the calibration cycles)")->required()
        ->check(CLI::ExistingFile);
    cmd->add_option("--profile", args->profile, "Profile whose arm model (and payload model) the residual uses")->required()
        ->check(CLI::ExistingFile);
    cmd->add_option("--widening", args->widening, "Share of the band's half-width added on each side")->capture_default_str()
        ->check(CLI::Range(0.0, 10.0));
    cmd->add_option("--persistence", args->persistence, "Samples outside the band in a row before STOP")->capture_default_str()
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--out", args->out, "Limits JSON to write")->required();
    cmd->callback([args] { run_residual(*args); });
}

}  // namespace warpguard::cli
