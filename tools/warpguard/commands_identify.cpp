// `warpguard identify dh|tcp|camera|tool-angles` and `warpguard fk`: kinematic self-identification
// (thesis §4.2-4.3) from what the controller reports, and forward kinematics of a model.
// `warpguard identify dynamics` and `warpguard deviation`: the arm's own dynamics from a dry run of
// the task, and a recording's deviation from them (thesis §4.5.1's signal for KA-mDTW).
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "warpguard/dynamics.hpp"
#include "warpguard/identification.hpp"
#include "warpguard/json_file.hpp"
#include "warpguard/number_list.hpp"
#include "warpguard/recording_csv.hpp"

namespace warpguard::cli {

namespace {

constexpr double kRadToDeg = 180.0 / M_PI;

void write_json(const std::string& path, const nlohmann::json& j) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", path));
    out << j.dump(2) << "\n";
    if (!out) throw std::runtime_error(fmt::format("writing '{}' failed", path));
}

// ---------------------------------------------------------------------------------------------

struct DhArgs {
    std::string points, out;
    double flange_offset = 0;
    std::vector<std::size_t> prismatic;
    bool no_refine = false;
};

void run_identify_dh(const DhArgs& args, bool flange_given) {
    const auto samples = read_tracked_points_csv(args.points);
    DhIdentifyOptions options;
    if (flange_given) options.flange_offset = args.flange_offset;
    options.prismatic = args.prismatic;
    options.refine = !args.no_refine;
    const DhIdentification id = identify_dh(samples, options);
    write_json(args.out, to_json(id));

    std::printf("DH identification from %zu points (thesis 4.2); home q = [", samples.size());
    for (std::size_t k = 0; k < id.home.size(); ++k) std::printf("%s%.6g", k ? ", " : "", id.home[k]);
    std::printf("]\n\n");
    std::printf("%-5s %-4s %-24s %-26s %-24s %-26s %9s\n", "joint", "type", "z axis", "circle centre [mm]", "x axis",
                "origin [mm]", "fit [mm]");
    const auto v3 = [](const Eigen::Vector3d& v, double scale) {
        return fmt::format("({:.3f}, {:.3f}, {:.3f})", v.x() * scale, v.y() * scale, v.z() * scale);
    };
    for (std::size_t k = 0; k < id.axes.size(); ++k) {
        const auto& f = id.frames[k];
        std::printf("%-5zu %-4s %-24s %-26s %-24s %-26s %9.4f\n", k + 1,
                    id.axes[k].type == JointType::Revolute ? "R" : "P", v3(f.z, 1).c_str(), v3(f.centre, 1e3).c_str(),
                    v3(f.x, 1).c_str(), v3(f.origin, 1e3).c_str(), id.axes[k].rms_residual * 1e3);
    }
    std::printf("\n%-5s %12s %12s %12s %12s %16s\n", "joint", "a [mm]", "d [mm]", "alpha [deg]", "theta [deg]",
                "theta at home");
    for (std::size_t k = 0; k < id.model.dof(); ++k) {
        const auto& p = id.model.joints()[k];
        std::printf("%-5zu %12.4f %12.4f %12.4f %12.4f %16.4f\n", k + 1, p.a * 1e3, p.d * 1e3, p.alpha * kRadToDeg,
                    p.theta * kRadToDeg, id.frames[k].theta_at_home * kRadToDeg);
    }
    const auto& tp = id.tracked_point;
    std::printf("\ntracked point in the flange frame: (%.4f, %.4f, %.4f) mm\n", tp.x() * 1e3, tp.y() * 1e3, tp.z() * 1e3);
    if (!id.base_aligned) std::printf("base frame: joint 1's axis is not the base z axis; the model carries a base transform\n");
    std::printf("model vs. every point: rms %.4f mm, max %.4f mm (joint by joint %.4f mm rms)\n", id.fk_rms * 1e3,
                id.fk_max * 1e3, id.fk_rms_before_refinement * 1e3);
    for (const auto& w : id.warnings) std::printf("warning: %s\n", w.c_str());
    std::printf("model written to %s\n", args.out.c_str());
}

struct TcpArgs {
    std::string poses, out, method = "both", known_point;
};

void run_identify_tcp(const TcpArgs& args) {
    const auto poses = read_flange_poses_csv(args.poses);
    nlohmann::json report;
    Eigen::Vector3d tcp = Eigen::Vector3d::Zero();
    if (!args.known_point.empty()) {
        // (39): one pose at a point of known base coordinates (the last pose in the file).
        const Eigen::Vector3d point = parse_xyz(args.known_point, "--known-point");
        tcp = tcp_from_known_point(poses.back(), point);
        report["method"] = "known point (39)";
        std::printf("TCP from the last pose at the known point (%.4f, %.4f, %.4f) m (thesis (39))\n", point.x(), point.y(), point.z());
    } else {
        const auto show = [](const char* name, const TcpResult& r) {
            std::printf("%-22s TCP (%.4f, %.4f, %.4f) mm, touched point (%.4f, %.4f, %.4f) mm, residual rms %.4f mm max %.4f mm\n",
                        name, r.tcp.x() * 1e3, r.tcp.y() * 1e3, r.tcp.z() * 1e3, r.point.x() * 1e3, r.point.y() * 1e3,
                        r.point.z() * 1e3, r.rms_residual * 1e3, r.max_residual * 1e3);
        };
        const auto result_json = [](const TcpResult& r) {
            return nlohmann::json{{"tcp_m", {r.tcp.x(), r.tcp.y(), r.tcp.z()}},
                                  {"point_m", {r.point.x(), r.point.y(), r.point.z()}},
                                  {"rms_residual_m", r.rms_residual},
                                  {"max_residual_m", r.max_residual}};
        };
        std::printf("TCP from %zu flange poses touching one point (thesis 4.3)\n", poses.size());
        if (args.method == "lsq" || args.method == "both") {
            const TcpResult r = identify_tcp_lsq(poses);
            show("least squares:", r);
            report["least_squares"] = result_json(r);
            report["least_squares"]["condition"] = r.condition;
            tcp = r.tcp;
        }
        if (args.method == "grid" || args.method == "both") {
            const TcpResult r = identify_tcp_grid(poses);
            show("grid search (38):", r);
            report["grid_search"] = result_json(r);
            report["grid_search"]["iterations"] = r.iterations;
            if (args.method == "grid") tcp = r.tcp;
        }
        report["method"] = args.method == "grid" ? "grid search (38)" : "least squares";
        if (poses.size() < 4) std::printf("warning: %zu poses; 4 or more with different orientations are recommended\n", poses.size());
    }
    nlohmann::json out = {{"translation", {tcp.x(), tcp.y(), tcp.z()}},
                          {"rotation", {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}},
                          {"identification", report}};
    write_json(args.out, out);
    std::printf("tool written to %s\n", args.out.c_str());
}

struct FkArgs {
    std::string model, tool, q;
};

void run_fk(const FkArgs& args) {
    DhModel model = load_dh_model(args.model);
    if (!args.tool.empty()) {
        const DhModel with_tool = load_json_file(args.tool, "tool", [&](const nlohmann::json& j) {
            nlohmann::json m = {{"joints", {{{"a", 0.0}}}}, {"tool", j}};
            if (j.contains("identification")) m["tool"].erase("identification");
            return dh_model_from_json(m);
        });
        model.set_tool(with_tool.tool());
    }
    const auto q = parse_number_list(args.q, "--q");
    if (q.size() != model.dof()) {
        throw std::invalid_argument(fmt::format("--q has {} values; the model has {} joints", q.size(), model.dof()));
    }
    const Eigen::Isometry3d pose = model.tool_pose(q);
    const auto& t = pose.translation();
    std::printf("%.9f %.9f %.9f\n", t.x(), t.y(), t.z());
    for (int r = 0; r < 3; ++r) {
        std::printf("%.9f %.9f %.9f\n", pose.linear()(r, 0), pose.linear()(r, 1), pose.linear()(r, 2));
    }
}

struct CameraArgs {
    std::string move_x, move_y, move_z, point_camera, point_base;
};

void run_identify_camera(const CameraArgs& a) {
    const CameraAlignment al = align_camera_frame(parse_xyz(a.move_x, "--move-x"), parse_xyz(a.move_y, "--move-y"),
                                                  parse_xyz(a.move_z, "--move-z"), parse_xyz(a.point_camera, "--point-camera"),
                                                  parse_xyz(a.point_base, "--point-base"));
    std::printf("T_cb (camera <- base), C_c = T_cb (C_b - V_cb), thesis (26)-(36):\n");
    for (int r = 0; r < 3; ++r) std::printf("  %10.6f %10.6f %10.6f\n", al.t_cb(r, 0), al.t_cb(r, 1), al.t_cb(r, 2));
    std::printf("V_cb = (%.6f, %.6f, %.6f)\n", al.v_cb.x(), al.v_cb.y(), al.v_cb.z());
    std::printf("Euler X-Y-Z (33)-(35): Rx %.4f deg, Ry %.4f deg, Rz %.4f deg\n", al.euler.x() * kRadToDeg,
                al.euler.y() * kRadToDeg, al.euler.z() * kRadToDeg);
    std::printf("orthogonality error of the measured moves: %.3g (same unit as the moves)\n", al.orthogonality_error);
}

void run_tool_angles(double alpha_deg, double beta_deg) {
    const auto c = true_tool_angles(alpha_deg / kRadToDeg, beta_deg / kRadToDeg);
    std::printf("apparent: alpha' %.4f deg (yz view), beta' %.4f deg (xz view); true angles, thesis (23)-(25):\n", alpha_deg, beta_deg);
    std::printf("  rotation about x first: alpha %.4f deg, beta %.4f deg\n", c[0].alpha * kRadToDeg, c[0].beta * kRadToDeg);
    std::printf("  rotation about y first: alpha %.4f deg, beta %.4f deg\n", c[1].alpha * kRadToDeg, c[1].beta * kRadToDeg);
}

struct DynamicsArgs {
    std::vector<std::string> dry_runs;
    std::string model, out, gravity = "0,0,-9.81";
};

void run_identify_dynamics(const DynamicsArgs& a) {
    const DhModel model = load_dh_model(a.model);
    std::vector<Recording> runs;
    for (const auto& path : a.dry_runs) runs.push_back(read_recording(path));
    std::vector<const Recording*> pointers;
    for (const auto& r : runs) pointers.push_back(&r);
    const ArmDynamics arm = fit_arm_dynamics(model, pointers, parse_xyz(a.gravity, "--gravity"));
    write_json(a.out, to_json(arm));
    std::printf("%s\n", arm.derivation.at("method").get<std::string>().c_str());
    std::printf("%zu samples of %zu dry run(s)\n", arm.derivation.at("samples").get<std::size_t>(), runs.size());
    std::printf("joint  residual rms  signal sd  explained  rank\n");
    for (const auto& j : arm.derivation.at("joints")) {
        std::printf("%5d  %12.4g  %9.4g  %9.4f  %4d%s\n", j.at("joint").get<int>(), j.at("residual_rms").get<double>(),
                    j.at("signal_sd").get<double>(), j.at("explained").get<double>(), j.at("rank").get<int>(),
                    j.at("still").get<bool>() ? "  (does not move: no friction fitted)" : "");
    }
    for (const auto& pair : arm.derivation.at("dependent_joints")) {
        const auto joints = pair.at("joints");
        std::printf("warning: joints %d and %d move together in every run (velocity correlation %.3f): the model cannot tell "
                    "their inertias apart and will mispredict a motion of one without the other, such as a contact's jolt; "
                    "add a run that moves them separately (docs/identification.md, excitation run)\n",
                    joints[0].get<int>(), joints[1].get<int>(), pair.at("velocity_correlation").get<double>());
    }
    const auto& chosen = arm.derivation.at("causal_derivatives").at("chosen");
    std::printf("in operation (no look-ahead): velocities and accelerations from a polynomial of order %zu over the newest %zu "
                "samples; its deviation of the dry runs is %.3g x the offline one's (mean over joints)\n",
                arm.causal_order, arm.causal_samples, chosen.at("relative").get<double>());
    std::printf("arm model written to %s (%s)\n", a.out.c_str(), to_string(arm.unit).c_str());
}

struct DeviationArgs {
    std::string arm, in, out;
    bool no_payload = false;
    bool causal = false;
};

void run_deviation(const DeviationArgs& a) {
    const ArmDynamics arm = load_json_file(a.arm, "arm model", arm_dynamics_from_json);
    const Recording in = read_recording(a.in);
    Recording out = a.causal ? causal_arm_deviation(arm, in) : arm_deviation(arm, in);
    if (a.no_payload) out.payload.clear();
    write_recording(out, a.out);
    std::printf("%s: %zu samples, RMS deviation per joint:", a.out.c_str(), out.size());
    for (std::size_t j = 0; j < out.joints(); ++j) {
        double sum = 0;
        for (double v : out.tau[j]) sum += v * v;
        std::printf(" %.4g", out.size() > 0 ? std::sqrt(sum / static_cast<double>(out.size())) : 0.0);
    }
    std::printf(" %s\n", to_string(arm.unit).c_str());
}

}  // namespace

void register_identify(CLI::App& app) {
    auto* identify = app.add_subcommand("identify", "Kinematic self-identification: DH parameters, tool centre point, cameras (thesis 4.2-4.3)");
    identify->require_subcommand(1);
    {
        auto args = std::make_shared<DhArgs>();
        auto* c = identify->add_subcommand("dh", "DH parameters from a tracked point while one joint at a time moves");
        c->add_option("--points", args->points, "CSV: joint,q1..qN,x,y,z (moving joint 1-based, rad, m)")->required()->check(CLI::ExistingFile);
        c->add_option("--out", args->out, "Model JSON to write")->required();
        auto* fo = c->add_option("--flange-offset", args->flange_offset,
                                 "Flange distance beyond the last wrist frame along the last axis, m (a drawing value)");
        c->add_option("--prismatic", args->prismatic, "Joints (1-based) that are prismatic; others are detected")->delimiter(',');
        c->add_flag("--no-refine", args->no_refine, "Keep the joint-by-joint solution (no whole-chain adjustment)");
        c->callback([args, fo] { run_identify_dh(*args, fo->count() > 0); });
    }
    {
        auto args = std::make_shared<TcpArgs>();
        auto* c = identify->add_subcommand("tcp", "Tool centre point from flange poses with the tool tip at one point");
        c->add_option("--poses", args->poses, "CSV: x,y,z,rx,ry,rz (flange, m; X-Y-Z angles about the fixed base axes, rad)")
            ->required()->check(CLI::ExistingFile);
        c->add_option("--out", args->out, "Tool JSON to write")->required();
        c->add_option("--method", args->method, "lsq, grid (the thesis's search (38)) or both")->capture_default_str()
            ->check(CLI::IsMember({"lsq", "grid", "both"}));
        c->add_option("--known-point", args->known_point, "x,y,z in m: the tip is at this known point in the last pose (39)");
        c->callback([args] { run_identify_tcp(*args); });
    }
    {
        auto args = std::make_shared<DynamicsArgs>();
        auto* c = identify->add_subcommand("dynamics", "The arm's own dynamics (rigid-body parameters) from dry runs of the task: no part, nothing to press");
        c->add_option("--dry-run", args->dry_runs, "Recording CSV of the task without its force (repeat for more runs)")->required()->check(CLI::ExistingFile);
        c->add_option("--model", args->model, "Kinematic model JSON (warpguard identify dh)")->required()->check(CLI::ExistingFile);
        c->add_option("--gravity", args->gravity, "Gravity in the model's base frame, m/s^2")->capture_default_str();
        c->add_option("--out", args->out, "Arm model JSON to write")->required();
        c->callback([args] { run_identify_dynamics(*args); });
    }
    {
        auto args = std::make_shared<CameraArgs>();
        auto* c = identify->add_subcommand("camera", "Camera/robot frame alignment from unit moves along the base axes");
        c->add_option("--move-x", args->move_x, "Tip displacement seen by the cameras for +1 unit along base x")->required();
        c->add_option("--move-y", args->move_y, "... along base y")->required();
        c->add_option("--move-z", args->move_z, "... along base z")->required();
        c->add_option("--point-camera", args->point_camera, "One point in camera coordinates")->required();
        c->add_option("--point-base", args->point_base, "The same point in base coordinates")->required();
        c->callback([args] { run_identify_camera(*args); });
    }
    {
        struct CheckArgs {
            std::string model, tool, points;
            double max_mm = -1;
        };
        auto args = std::make_shared<CheckArgs>();
        auto* c = identify->add_subcommand("check", "How well a model reproduces measured tracked points (exit 1 above --max-mm)");
        c->add_option("--model", args->model, "Model JSON")->required()->check(CLI::ExistingFile);
        c->add_option("--points", args->points, "CSV: joint,q1..qN,x,y,z (the joint column is ignored)")->required()->check(CLI::ExistingFile);
        c->add_option("--max-mm", args->max_mm, "Fail (exit 1) if any point is further than this, mm");
        c->callback([args] {
            const DhModel model = load_dh_model(args->model);
            const auto points = read_tracked_points_csv(args->points);
            const ModelCheck check = check_model(model, points);
            std::printf("model %s against %zu points: rms %.6f mm, max %.6f mm (line %zu)\n", args->model.c_str(), check.points,
                        check.rms * 1e3, check.max * 1e3, points[check.worst].line);
            if (args->max_mm >= 0 && check.max * 1e3 > args->max_mm) {
                throw std::runtime_error(fmt::format("the model misses a point by {:.6f} mm; allowed {:.6f} mm", check.max * 1e3, args->max_mm));
            }
        });
    }
    {
        auto alpha = std::make_shared<double>(0), beta = std::make_shared<double>(0);
        auto* c = identify->add_subcommand("tool-angles", "True tool angles from the apparent angles in two orthogonal views");
        c->add_option("--alpha", *alpha, "Apparent angle in the yz view, deg")->required();
        c->add_option("--beta", *beta, "Apparent angle in the xz view, deg")->required();
        c->callback([alpha, beta] { run_tool_angles(*alpha, *beta); });
    }
}

void register_deviation(CLI::App& app) {
    auto args = std::make_shared<DeviationArgs>();
    auto* c = app.add_subcommand("deviation", "A recording less what the arm model expects: the task's own force (thesis 4.5.1)");
    c->add_option("--arm", args->arm, "Arm model JSON (warpguard identify dynamics)")->required()->check(CLI::ExistingFile);
    c->add_option("recording", args->in, "Recording CSV (a signed torque in the arm model's unit)")->required()->check(CLI::ExistingFile);
    c->add_option("--out", args->out, "Recording CSV to write: the same samples, every joint's signal replaced by its deviation")->required();
    c->add_flag("--no-payload", args->no_payload, "Leave out the declared payload column (the load is then unknown, as in thesis 4.5)");
    c->add_flag("--causal", args->causal,
                "Derivatives from past samples only, as the detector computes them in operation (default: centred, +-3 samples)");
    c->callback([args] { run_deviation(*args); });
}

void register_fk(CLI::App& app) {
    auto args = std::make_shared<FkArgs>();
    auto* c = app.add_subcommand("fk", "Forward kinematics: prints the tool point x y z (m) and the rotation matrix rows");
    c->add_option("--model", args->model, "Model JSON (from 'identify dh' or a robot's kinematics)")->required()->check(CLI::ExistingFile);
    c->add_option("--tool", args->tool, "Tool JSON (from 'identify tcp'): replaces the model's tool")->check(CLI::ExistingFile);
    c->add_option("--q", args->q, "Joint values q1,...,qN (rad; m for prismatic joints)")->required();
    c->callback([args] { run_fk(*args); });
}

}  // namespace warpguard::cli
