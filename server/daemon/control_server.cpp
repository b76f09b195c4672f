#include "control_server.hpp"

#include <atomic>
#include <cmath>
#include <deque>
#include <set>
#include <thread>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "listen.hpp"

#include "robot_scripts.hpp"
#include "warpguard/calibration.hpp"
#include "warpguard/recording_csv.hpp"

namespace warpguard::daemon {

namespace asio = boost::asio;
using asio::ip::tcp;
using nlohmann::json;

namespace {

class CommandError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

template <typename T>
T arg(const json& request, const char* key, T fallback) {
    if (!request.contains(key) || request.at(key).is_null()) return fallback;
    try {
        return request.at(key).get<T>();
    } catch (const json::exception&) {
        throw CommandError(fmt::format("'{}' has the wrong type (got {})", key, request.at(key).dump()));
    }
}

template <typename T>
T required(const json& request, const char* key) {
    if (!request.contains(key)) throw CommandError(fmt::format("'{}' is missing", key));
    return arg<T>(request, key, T{});
}

std::shared_ptr<RobotSession> robot(DaemonContext& c, const json& request) {
    const auto id = required<std::string>(request, "robot");
    auto s = c.registry.find(id);
    if (!s) throw CommandError(fmt::format("unknown robot '{}' (known: {})", id, c.registry.ids()));
    return s;
}

json feed_point(const FeedPoint& p) {
    const auto n = static_cast<std::ptrdiff_t>(p.joints);
    return {{"i", p.index},
            {"t", p.t},
            {"seq", p.seq},
            {"cycle", p.cycle},
            {"stop", p.stop},
            {"would_stop", p.would_stop},
            {"fired", p.fired},
            {"signal", std::vector<double>(p.signal.begin(), p.signal.begin() + n)},
            {"reference", std::vector<double>(p.reference.begin(), p.reference.begin() + n)},
            {"lower", std::vector<double>(p.lower.begin(), p.lower.begin() + n)},
            {"upper", std::vector<double>(p.upper.begin(), p.upper.begin() + n)},
            {"rule1", std::vector<double>(p.rule1.begin(), p.rule1.begin() + n)},
            {"rule2", std::vector<double>(p.rule2.begin(), p.rule2.begin() + n)},
            {"ref_start", std::vector<std::uint32_t>(p.ref_start.begin(), p.ref_start.begin() + n)},
            {"ref_end", std::vector<std::uint32_t>(p.ref_end.begin(), p.ref_end.begin() + n)}};
}

// Calibration from a committed recording: the first `reference_cycles` complete cycles become the
// reference (0 or absent: the fewest from 2 whose joint path covers the later cycles', keeping 10
// for the default detector's thresholds when the recording has them), every later sample is the
// nominal data the thresholds are learnt from.
json calibrate_command(DaemonContext& c, const json& request) {
    auto session = robot(c, request);
    CalibrationOptions options;
    options.reference_cycles = arg<std::size_t>(request, "reference_cycles", options.reference_cycles);
    options.window = arg<std::size_t>(request, "window", options.window);
    options.k_sigma = arg<double>(request, "k", options.k_sigma);
    options.rule2_margin = arg<double>(request, "margin", options.rule2_margin);
    options.detector = parse_detector_kind(arg<std::string>(request, "detector", to_string(options.detector)));
    options.target_cycles_per_false_stop = arg<double>(request, "target_cycles", options.target_cycles_per_false_stop);
    options.method = parse_matching_method(arg<std::string>(request, "method", "mdtw"));
    if (options.method == MatchingMethod::KaMdtw) {
        // KA-mDTW scales by lever lengths from the robot's kinematic model: the latest stored one
        // (identified by the procedure or set from a preset) unless a model id is given.
        const std::int64_t model_id = arg<std::int64_t>(request, "model", 0);
        const auto stored = model_id == 0 ? c.store.latest_model(session->id()) : c.store.model(model_id);
        if (!stored) {
            throw CommandError(model_id == 0 ? fmt::format("robot '{}' has no kinematic model for KA-mDTW: run the identification procedure "
                                                           "(identify_start) or set a model (set_model) first",
                                                           session->id())
                                             : fmt::format("model {} does not exist", model_id));
        }
        if (stored->at("robot").get<std::string>() != session->id()) {
            throw CommandError(fmt::format("model {} belongs to robot '{}', not '{}'", stored->at("id").get<std::int64_t>(),
                                           stored->at("robot").get<std::string>(), session->id()));
        }
        std::vector<double> force = arg<std::vector<double>>(request, "force", {0.0, 0.0, -1.0});
        if (force.size() != 3) throw CommandError(fmt::format("'force' has {} values; expected [x, y, z]", force.size()));
        KinematicsSettings k{dh_model_from_json(stored->at("model")),
                             ForceDirection::make(parse_force_frame(arg<std::string>(request, "force_frame", "base")),
                                                  Eigen::Vector3d(force[0], force[1], force[2])),
                             arg<double>(request, "min_lever", kDefaultMinLever),
                             {}};
        if (k.model.dof() != session->joints()) {
            throw CommandError(fmt::format("model {} has {} joints; robot '{}' has {}", stored->at("id").get<std::int64_t>(), k.model.dof(),
                                           session->id(), session->joints()));
        }
        options.kinematics = std::move(k);
    } else if (options.detector == DetectorKind::PhaseAware) {
        // The default detector's speed-override model needs the robot's kinematics: the latest
        // stored model when there is one (without, the profile assumes the recorded speed).
        const std::int64_t model_id = arg<std::int64_t>(request, "model", 0);
        const auto stored = model_id == 0 ? c.store.latest_model(session->id()) : c.store.model(model_id);
        if (model_id != 0 && !stored) throw CommandError(fmt::format("model {} does not exist", model_id));
        if (stored && stored->at("robot").get<std::string>() == session->id()) {
            DhModel model = dh_model_from_json(stored->at("model"));
            if (model.dof() == session->joints()) options.dynamics_model = std::move(model);
        }
    }
    // The arm's own dynamics from a committed dry run of the task (the same program with no part and
    // nothing to press): the profile then matches the deviation from them, what the task's force
    // adds (thesis 4.5.1). Fitted on the robot's kinematic model: the one calibration uses, else
    // the latest stored.
    const std::int64_t dry_id = arg<std::int64_t>(request, "dry_run", 0);
    // An excitation run (every joint moved alone) separates joints the task moves together.
    const std::int64_t excitation_id = arg<std::int64_t>(request, "excitation", 0);
    // Without a dry run, the default detector with a kinematic model fits the arm model on the task's
    // recording itself (less its declared payload); no_arm matches the signal as recorded.
    const bool no_arm = arg<bool>(request, "no_arm", false);
    if (no_arm && dry_id != 0) {
        throw CommandError(fmt::format("no_arm and dry run {} exclude each other: the dry run is fitted as the arm model", dry_id));
    }
    if (dry_id != 0) {
        const auto dry_meta = c.store.recording(dry_id);
        if (!dry_meta) throw CommandError(fmt::format("dry run {}: recording {} does not exist", dry_id, dry_id));
        if (dry_meta->at("robot").get<std::string>() != session->id()) {
            throw CommandError(fmt::format("dry run {} belongs to robot '{}', not '{}'", dry_id, dry_meta->at("robot").get<std::string>(),
                                           session->id()));
        }
        std::optional<DhModel> model = options.kinematics ? std::optional<DhModel>(options.kinematics->model) : options.dynamics_model;
        if (!model) {
            const auto stored = c.store.latest_model(session->id());
            if (!stored) {
                throw CommandError(fmt::format("robot '{}' has no kinematic model for the arm model: run the identification procedure "
                                               "(identify_start) or set a model (set_model) first",
                                               session->id()));
            }
            model = dh_model_from_json(stored->at("model"));
        }
        if (model->dof() != session->joints()) {
            throw CommandError(fmt::format("the kinematic model has {} joints; robot '{}' has {}", model->dof(), session->id(), session->joints()));
        }
        std::vector<Recording> runs{read_recording(dry_meta->at("path").get<std::string>())};
        if (excitation_id != 0) {
            const auto meta = c.store.recording(excitation_id);
            if (!meta) throw CommandError(fmt::format("excitation run {}: recording {} does not exist", excitation_id, excitation_id));
            if (meta->at("robot").get<std::string>() != session->id()) {
                throw CommandError(fmt::format("excitation run {} belongs to robot '{}', not '{}'", excitation_id,
                                               meta->at("robot").get<std::string>(), session->id()));
            }
            if (excitation_id == dry_id) {
                throw CommandError(
                    fmt::format("excitation run {} is the dry run itself; record a run that moves each joint alone", excitation_id));
            }
            runs.push_back(read_recording(meta->at("path").get<std::string>()));
        }
        std::vector<const Recording*> pointers;
        for (const auto& r : runs) pointers.push_back(&r);
        try {
            options.arm = fit_arm_dynamics(*model, pointers);
        } catch (const std::invalid_argument& e) {
            throw CommandError(excitation_id != 0 ? fmt::format("dry run {} with excitation run {}: {}", dry_id, excitation_id, e.what())
                                                  : fmt::format("dry run {}: {}", dry_id, e.what()));
        }
    } else if (excitation_id != 0) {
        throw CommandError("an excitation run is fitted with a dry run: give dry_run too");
    }
    std::int64_t recording_id = arg<std::int64_t>(request, "recording", 0);
    if (recording_id == 0) {
        const json all = c.store.recordings(session->id());
        if (all.empty()) throw CommandError(fmt::format("robot '{}' has no committed recording; record its task first", session->id()));
        recording_id = all.back().at("id").get<std::int64_t>();
    }
    // The arm model's runs are other recordings than the task's: the task's holds its part and presses.
    for (const auto& [id, what] : {std::pair{dry_id, "dry run"}, std::pair{excitation_id, "excitation run"}}) {
        if (id == recording_id) {
            throw CommandError(fmt::format("{} {} is the task's recording itself; the arm model is fitted on another recording, without "
                                           "the task's part and force",
                                           what, recording_id));
        }
    }
    const auto meta = c.store.recording(recording_id);
    if (!meta) throw CommandError(fmt::format("recording {} does not exist", recording_id));
    if (meta->at("robot").get<std::string>() != session->id()) {
        throw CommandError(fmt::format("recording {} belongs to robot '{}', not '{}'", recording_id, meta->at("robot").get<std::string>(), session->id()));
    }
    const std::string path = meta->at("path").get<std::string>();
    const Recording whole = read_recording(path);
    // A stop or a reconnect while recording (the robot held, samples lost): the reference and the
    // first nominal part come from one unbroken run, the other runs are nominal data of their own.
    const UnbrokenRuns runs = whole.unbroken_runs();
    const bool interrupted = !runs.interruptions.empty();
    const auto [run_begin, run_end] =
        interrupted ? reference_run(NamedRecording{path, &whole}, runs, options.reference_cycles, 1) : std::pair<std::size_t, std::size_t>{0, whole.size()};
    std::optional<Recording> run;
    const Recording& rec = interrupted ? run.emplace(whole.slice(run_begin, run_end)) : whole;
    std::vector<Recording> other_runs;
    std::vector<std::string> other_names;
    for (const auto& [b, e] : runs.runs) {
        if (!interrupted || b == run_begin) continue;
        other_runs.push_back(whole.slice(b, e));
        other_names.push_back(fmt::format("{} (rows {}-{})", path, b, e - 1));
    }
    options.arm_from_nominal = dry_id == 0 && !no_arm && arm_from_nominal_applies(options, rec);
    const auto cycles = rec.complete_cycles();
    const std::size_t wanted = std::max<std::size_t>(options.reference_cycles, kMinReferenceCycles);
    if (cycles.size() < wanted + 1) {
        throw CommandError(fmt::format("recording {} has {} complete cycles; calibration needs {} for the reference and at least 1 more "
                                       "(better 10 or more) for the thresholds",
                                       recording_id, cycles.size(), wanted));
    }
    // KA-mDTW matches other variants of a task by their lever lengths: its automatic reference is the minimum.
    const bool ka = options.method == MatchingMethod::KaMdtw;
    std::vector<NamedRecording> other_named;
    for (std::size_t k = 0; k < other_runs.size(); ++k) other_named.push_back({other_names[k], &other_runs[k]});
    const ReferenceCoverage coverage = choose_reference_cycles(NamedRecording{path, &rec}, other_named, options.reference_cycles == 0 && ka ? kMinReferenceCycles
                                                                                                                             : options.reference_cycles,
                                                         true, options.detector == DetectorKind::PhaseAware ? 10 : 1);
    options.reference_cycles = coverage.reference_cycles;
    const Recording nominal = rec.slice(cycles[options.reference_cycles].begin, rec.size());
    std::vector<NamedRecording> nominal_named{{path + " (after the reference cycles)", &nominal}};
    nominal_named.insert(nominal_named.end(), other_named.begin(), other_named.end());
    Profile profile = calibrate(NamedRecording{path, &rec}, nominal_named, options);
    profile.reference.first_sample += run_begin;
    if (interrupted) {
        profile.calibration["interruptions"] =
            interruptions_record(interruptions_to_json(path, runs), path, run_begin, run_end, nominal_named.size());
    }
    profile.robot = session->id();
    // calibrate() judged the reference against the nominal part alone; the choice above says how it
    // was made (KA-mDTW keeps calibrate()'s note: cycles elsewhere are expected there).
    if (!ka) profile.calibration["reference_coverage"] = coverage.to_json();
    json thresholds = json::array();
    for (std::size_t j = 0; j < profile.thresholds.size(); ++j) {
        const auto& t = profile.thresholds[j];
        thresholds.push_back({{"joint", j + 1},
                              {"theta1", t.rule1.value},
                              {"sigma", t.rule1.sigma},
                              {"k", t.rule1.k},
                              {"max_abs_deviation", t.rule1.max_abs},
                              {"theta2", t.rule2.value},
                              {"rule2_max", t.rule2.max},
                              {"rule2_margin", t.rule2.margin},
                              {"samples", t.rule1.samples}});
    }
    std::size_t nominal_cycles = cycles.size() - options.reference_cycles;
    for (const auto& r : other_runs) nominal_cycles += r.complete_cycles().size();
    json summary = {{"recording", recording_id},
                          {"window", profile.window},
                          {"reference_cycles", options.reference_cycles},
                          {"reference_coverage", profile.calibration.at("reference_coverage")},
                          {"reference_samples", profile.reference.size()},
                          {"nominal_cycles", nominal_cycles},
                          {"unit", to_string(profile.unit)},
                          {"detector", to_string(profile.detector)},
                          {"thresholds", thresholds}};
    if (profile.phase) {
        const auto& ph = *profile.phase;
        json joints = json::array();
        for (std::size_t j = 0; j < ph.rule1.size(); ++j) {
            std::vector<double> v = ph.rule1[j];
            std::sort(v.begin(), v.end());
            joints.push_back({{"joint", j + 1}, {"min", v.front()}, {"median", v[v.size() / 2]}, {"max", v.back()}});
        }
        summary["phase_aware"] = {{"margin", ph.margin},
                                  {"persistence", ph.persistence},
                                  {"cusum_reference", ph.cusum_reference},
                                  {"cusum_limit", ph.cusum_limit},
                                  {"drift_rate", ph.drift_rate},
                                  {"derivation", ph.derivation},
                                  {"joints", joints}};
    }
    // What the default detector does about speed override and a declared payload, as calibration said.
    if (profile.calibration.contains("speed_model")) summary["speed_model"] = profile.calibration.at("speed_model");
    if (profile.calibration.contains("payload_model")) summary["payload_model"] = profile.calibration.at("payload_model");
    if (interrupted) summary["interruptions"] = profile.calibration.at("interruptions");
    // The override the reference ran at, as the robot reported it: a stream starts at the speed
    // its first report gives.
    if (std::isfinite(profile.reference.speed_override)) summary["reference_override"] = profile.reference.speed_override;
    if (profile.arm) {
        summary["arm_model"] = {{"dry_run", dry_id},
                                {"excitation", excitation_id},
                                {"fitted_on", dry_id != 0 ? "dry run" : "task recording"},
                                {"payload", profile.arm->derivation.value("payload", std::string())},
                                {"dependent_joints", profile.arm->derivation.value("dependent_joints", json::array())},
                                {"samples", profile.arm->derivation.value("samples", 0)},
                                {"causal_order", profile.arm->causal_order},
                                {"causal_samples", profile.arm->causal_samples},
                                {"joints", profile.arm->derivation.value("joints", json::array())}};
    }
    if (!profile.arm && profile.calibration.contains("arm_model")) {
        summary["arm_model_not_fitted"] = profile.calibration.at("arm_model").value("not_fitted", std::string());
    }
    const std::int64_t id = c.store.add_profile(session->id(), recording_id, summary, to_json(profile).dump());
    EventRecord e;
    e.robot = session->id();
    e.kind = "profile";
    e.reason = fmt::format("profile {} calibrated from recording {} ({} reference cycles, {} nominal cycles, window {})", id, recording_id,
                           options.reference_cycles, cycles.size() - options.reference_cycles, profile.window);
    c.store.add_event(e);
    spdlog::info("robot {}: {}", e.robot, e.reason);
    json out = {{"profile", id}, {"summary", summary}};
    if (arg<bool>(request, "activate", false)) out["status"] = session->activate(id, profile, arg<std::string>(request, "by", "control API"));
    return out;
}

}  // namespace

json handle_command(DaemonContext& c, const json& request) {
    const auto cmd = required<std::string>(request, "cmd");
    const std::string by = arg<std::string>(request, "by", "control API");
    if (cmd == "ping") return {{"pong", true}};
    if (cmd == "robots") {
        json list = json::array();
        for (const auto& s : c.registry.all()) list.push_back(s->status());
        return {{"robots", list}};
    }
    if (cmd == "robot") return robot(c, request)->status();
    if (cmd == "add_robot") {
        if (!request.contains("config")) throw CommandError("'config' is missing (id, address, vendor, signal, unit, joints)");
        const RobotConfig config = robot_config_from_json(request.at("config"), "config");
        if (c.registry.find(config.id)) throw CommandError(fmt::format("robot '{}' exists already", config.id));
        c.store.put_robot(config.id, to_json(config));
        c.registry.add(c.make_session(config));
        spdlog::info("robot {} added by {}", config.id, by);
        return c.registry.find(config.id)->status();
    }
    if (cmd == "remove_robot") {
        auto s = robot(c, request);
        if (s->status().at("connected").get<bool>()) throw CommandError(fmt::format("robot '{}' is connected; stop its task first", s->id()));
        const auto stored = c.store.robots();
        const bool api = std::any_of(stored.begin(), stored.end(), [&](const json& j) { return j.at("id") == s->id(); });
        if (!api) throw CommandError(fmt::format("robot '{}' comes from the configuration file; remove it there", s->id()));
        c.store.remove_robot(s->id());
        c.registry.remove(s->id());
        return {{"removed", s->id()}};
    }
    if (cmd == "record_start") return robot(c, request)->start_recording(by);
    if (cmd == "record_stop") return robot(c, request)->stop_recording(by);
    if (cmd == "recordings") return {{"recordings", c.store.recordings(arg<std::string>(request, "robot", ""))}};
    if (cmd == "calibrate") return calibrate_command(c, request);
    if (cmd == "profiles") return {{"profiles", c.store.profiles(arg<std::string>(request, "robot", ""))}};
    if (cmd == "activate") {
        auto s = robot(c, request);
        const auto id = required<std::int64_t>(request, "profile");
        std::string owner;
        const auto text = c.store.profile_json(id, &owner);
        if (!text) throw CommandError(fmt::format("profile {} does not exist", id));
        if (owner != s->id()) throw CommandError(fmt::format("profile {} belongs to robot '{}', not '{}'", id, owner, s->id()));
        return s->activate(id, profile_from_json(json::parse(*text)), by);
    }
    if (cmd == "mode") return robot(c, request)->set_mode(parse_mode(required<std::string>(request, "mode")), by);
    if (cmd == "resume") return robot(c, request)->resume(by);
    if (cmd == "events") {
        return {{"events", c.store.events(arg<std::string>(request, "robot", ""), arg<std::int64_t>(request, "after", 0),
                                          arg<std::size_t>(request, "limit", 100), arg<std::string>(request, "kind", ""))}};
    }
    if (cmd == "event") {
        const auto id = required<std::int64_t>(request, "id");
        const auto e = c.store.event(id);
        if (!e) throw CommandError(fmt::format("event {} does not exist", id));
        return *e;
    }
    if (cmd == "reference") return {{"reference", robot(c, request)->reference_summary()}};
    if (cmd == "identify_start") {
        std::optional<double> flange;
        if (request.contains("flange_offset")) flange = required<double>(request, "flange_offset");
        return robot(c, request)->arm_identification(flange, by);
    }
    if (cmd == "set_model") {
        // A preset or a model identified elsewhere (warpguard identify dh): stored like an identified one.
        auto s = robot(c, request);
        if (!request.contains("model") || !request["model"].is_object()) throw CommandError("'model' must be a kinematic model object");
        DhModel m = dh_model_from_json(request["model"]);
        if (m.dof() != s->joints()) {
            throw CommandError(fmt::format("the model has {} joints; robot '{}' has {}", m.dof(), s->id(), s->joints()));
        }
        const std::int64_t model_id = c.store.add_model(s->id(), request["model"]);
        s->note_model(model_id, by);
        return {{"model_id", model_id}};
    }
    if (cmd == "identification") {
        auto s = robot(c, request);
        json out = s->identification_status();
        if (const auto m = c.store.latest_model(s->id())) out["latest_model"] = *m;
        return out;
    }
    if (cmd == "script") {
        scripts::ScriptOptions o;
        o.host = required<std::string>(request, "host");
        o.port = static_cast<std::uint16_t>(arg<int>(request, "port", c.robot_port));
        o.robot_id = required<std::string>(request, "robot");
        auto s = c.registry.find(o.robot_id);
        if (s) {
            o.joints = s->config().joints;
            o.signal = s->config().signal;
            o.unit = s->config().unit;
            o.linear = s->config().linear;
            // The script must send what the robot's configuration makes the handshake require (until
            // 2026-12-06 the payload was left out: the script's handshake was then refused).
            o.payload = s->config().payload;
            o.speed_override = s->config().speed_override;
        }
        const std::string vendor = arg<std::string>(request, "vendor", s ? protocol::to_string(s->config().vendor) : "ur");
        std::vector<scripts::ScriptFile> files;
        if (arg<bool>(request, "identify", false)) {
            scripts::IdentifyScriptOptions id;
            id.points = arg<std::size_t>(request, "points", id.points);
            id.span_deg = arg<double>(request, "span_deg", id.span_deg);
            id.span_mm = arg<double>(request, "span_mm", id.span_mm);
            const auto tp = arg<std::vector<double>>(request, "tracked_point", {id.tracked[0], id.tracked[1], id.tracked[2]});
            if (tp.size() != 3) throw CommandError(fmt::format("'tracked_point' has {} values; expected [x, y, z] in m", tp.size()));
            for (std::size_t k = 0; k < 3; ++k) id.tracked[k] = tp[k];
            id.tool_number = arg<int>(request, "tool_number", id.tool_number);
            files.push_back(scripts::render_identification(scripts::parse_script_vendor(vendor), o, id));
        } else {
            files = scripts::render(scripts::parse_script_vendor(vendor), o);
        }
        json out = json::array();
        for (const auto& f : files) out.push_back({{"name", f.name}, {"text", f.text}});
        return {{"files", out}};
    }
    throw CommandError(fmt::format("unknown command '{}' (known: ping, robots, robot, add_robot, remove_robot, record_start, record_stop, "
                                   "recordings, calibrate, profiles, activate, mode, resume, events, event, reference, script, identify_start, "
                                   "identification, set_model, subscribe)",
                                   cmd));
}

class ControlConnection : public std::enable_shared_from_this<ControlConnection> {
public:
    ControlConnection(tcp::socket socket, DaemonContext& context)
        : socket_(std::move(socket)), timer_(socket_.get_executor()), context_(context) {}

    void start() {
        boost::system::error_code ec;
        const auto e = socket_.remote_endpoint(ec);
        remote_ = ec ? "unknown" : fmt::format("{}:{}", e.address().to_string(), e.port());
        read();
    }

    void send(json message) {
        asio::post(socket_.get_executor(), [self = shared_from_this(), text = message.dump() + "\n"]() mutable {
            if (self->closed_) return;
            self->queue_.push_back(std::move(text));
            if (self->queue_.size() == 1) self->write();
        });
    }

    void event(const json& e) {
        if (events_) send({{"event", e}});
    }

private:
    void read() {
        asio::async_read_until(socket_, input_, '\n', [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
            if (ec) {
                self->close();
                return;
            }
            std::string line(asio::buffers_begin(self->input_.data()), asio::buffers_begin(self->input_.data()) + static_cast<std::ptrdiff_t>(n));
            self->input_.consume(n);
            while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
            if (!line.empty()) self->handle(line);
            if (!self->closed_) self->read();
        });
    }

    void write() {
        asio::async_write(socket_, asio::buffer(queue_.front()), [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
            if (ec) {
                self->close();
                return;
            }
            self->queue_.pop_front();
            if (!self->queue_.empty()) self->write();
        });
    }

    void handle(const std::string& line) {
        json request;
        try {
            request = json::parse(line);
        } catch (const json::exception& e) {
            send({{"ok", false}, {"error", fmt::format("not valid JSON: {}", e.what())}});
            return;
        }
        // Requests may carry "req" (any JSON value); the answer repeats it so clients can pair them.
        json id = request.is_object() && request.contains("req") ? request.at("req") : json();
        auto answer = [&](json body) {
            body["ok"] = true;
            if (!id.is_null()) body["req"] = id;
            send(std::move(body));
        };
        auto fail = [&](const std::string& error) {
            json body = {{"ok", false}, {"error", error}};
            if (!id.is_null()) body["req"] = id;
            send(std::move(body));
        };
        if (!request.is_object() || !request.contains("cmd") || !request.at("cmd").is_string()) {
            fail("a request is a JSON object with a string 'cmd'");
            return;
        }
        const std::string cmd = request.at("cmd").get<std::string>();
        if (!authenticated_) {
            if (cmd != "hello") {
                fail("send {\"cmd\":\"hello\",\"token\":\"...\"} first");
                return;
            }
            const std::string token = request.value("token", "");
            if (token != context_.token) {
                spdlog::warn("control: wrong token from {} refused", remote_);
                fail("wrong token");
                close_after_write_ = true;
                asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close_when_flushed(); });
                return;
            }
            authenticated_ = true;
            client_ = request.value("client", "unknown");
            spdlog::info("control: {} connected from {}", client_, remote_);
            answer({{"version", WARPGUARD_VERSION}, {"robot_port", context_.robot_port}});
            return;
        }
        if (cmd == "subscribe") {
            events_ = request.value("events", events_.load());
            feed_.clear();
            feed_all_ = false;
            if (request.contains("feed")) {
                const json& f = request.at("feed");
                if (f.is_string() && f.get<std::string>() == "all") {
                    // Every robot, also the ones added after this subscription (refreshed each tick).
                    feed_all_ = true;
                    for (const auto& s : context_.registry.all()) feed_.insert(s->id());
                } else if (f.is_array()) {
                    for (const auto& r : f) {
                        if (!r.is_string() || !context_.registry.find(r.get<std::string>())) {
                            fail(fmt::format("feed: unknown robot {} (known: {})", r.dump(), context_.registry.ids()));
                            return;
                        }
                        feed_.insert(r.get<std::string>());
                    }
                }
            }
            decimate_ = std::max<std::size_t>(1, request.value("decimate", std::size_t{10}));
            last_.clear();
            answer({{"events", events_.load()}, {"feed", std::vector<std::string>(feed_.begin(), feed_.end())}, {"decimate", decimate_}});
            if ((feed_all_ || !feed_.empty()) && !timer_running_) {
                timer_running_ = true;
                tick();
            }
            return;
        }
        if (cmd == "calibrate") {
            // Seconds of work: run it beside the I/O and answer when done.
            std::thread([self = shared_from_this(), request, answer_id = id] {
                lower_thread_priority();  // never compete with the robots' replies
                json body;
                try {
                    body = handle_command(self->context_, request);
                    body["ok"] = true;
                } catch (const std::exception& e) {
                    body = {{"ok", false}, {"error", e.what()}};
                }
                if (!answer_id.is_null()) body["req"] = answer_id;
                self->send(std::move(body));
            }).detach();
            return;
        }
        json with_by = request;
        if (!with_by.contains("by")) with_by["by"] = fmt::format("{} ({})", client_, remote_);
        try {
            answer(handle_command(context_, with_by));
        } catch (const std::exception& e) {
            fail(e.what());
        }
    }

    void tick() {
        timer_.expires_after(std::chrono::milliseconds(100));
        timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
            if (ec || self->closed_ || (!self->feed_all_ && self->feed_.empty())) {
                self->timer_running_ = false;
                return;
            }
            if (self->feed_all_) {
                self->feed_.clear();
                for (const auto& s : self->context_.registry.all()) self->feed_.insert(s->id());
            }
            std::vector<FeedPoint> points;
            for (const auto& id : self->feed_) {
                auto s = self->context_.registry.find(id);
                if (!s) continue;
                points.clear();
                const auto it = self->last_.find(id);
                const std::uint64_t after = it == self->last_.end() ? UINT64_MAX : it->second;
                self->last_[id] = s->feed(after, self->decimate_, points);
                json list = json::array();
                for (const auto& p : points) list.push_back(feed_point(p));
                const json status = s->status();
                self->send({{"feed", id},
                            {"state", status.at("state")},
                            {"mode", status.at("mode")},
                            {"latched", status.at("latched")},
                            {"cycle", status.at("cycle")},
                            {"points", std::move(list)}});
            }
            self->tick();
        });
    }

    void close_when_flushed() {
        if (!queue_.empty()) {
            asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close_when_flushed(); });
            return;
        }
        close();
    }

    void close() {
        if (closed_) return;
        closed_ = true;
        boost::system::error_code ec;
        timer_.cancel();
        socket_.close(ec);
        if (authenticated_) spdlog::info("control: {} from {} disconnected", client_, remote_);
    }

    tcp::socket socket_;
    asio::steady_timer timer_;
    DaemonContext& context_;
    asio::streambuf input_{1 << 20};
    std::deque<std::string> queue_;
    std::string remote_, client_;
    bool authenticated_ = false;
    bool closed_ = false;
    bool close_after_write_ = false;
    std::atomic<bool> events_{false};
    bool timer_running_ = false;
    std::set<std::string> feed_;
    bool feed_all_ = false;
    std::map<std::string, std::uint64_t> last_;
    std::size_t decimate_ = 10;
};

ControlServer::ControlServer(asio::io_context& io, const Endpoint& listen, DaemonContext& context)
    : io_(io), acceptor_(open_acceptor(io, listen)), context_(context) {
    accept();
}

void ControlServer::accept() {
    acceptor_.async_accept(asio::make_strand(io_), [this](const boost::system::error_code& ec, tcp::socket socket) {
        if (ec) {
            if (ec != asio::error::operation_aborted) accept();
            return;
        }
        auto c = std::make_shared<ControlConnection>(std::move(socket), context_);
        {
            std::lock_guard lock(mutex_);
            std::erase_if(connections_, [](const auto& w) { return w.expired(); });
            connections_.push_back(c);
        }
        c->start();
        accept();
    });
}

void ControlServer::publish_event(const json& event) {
    std::vector<std::shared_ptr<ControlConnection>> live;
    {
        std::lock_guard lock(mutex_);
        for (const auto& w : connections_) {
            if (auto c = w.lock()) live.push_back(std::move(c));
        }
    }
    for (const auto& c : live) c->event(event);
}

void ControlServer::stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
}

}  // namespace warpguard::daemon
