#include "warpguard/dynamics.hpp"

#include "warpguard/profile.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include <Eigen/Dense>
#include <fmt/format.h>

namespace warpguard {

DynamicsRegressor::DynamicsRegressor(DhModel model, Eigen::Vector3d gravity) : model_(std::move(model)), gravity_(gravity) {}

void DynamicsRegressor::compute(std::span<const double> q, std::span<const double> qd, std::span<const double> qdd,
                                bool gravity, Eigen::Ref<Eigen::MatrixXd> y) const {
    const std::size_t n = dof();
    if (q.size() != n || qd.size() != n || qdd.size() != n) {
        throw std::invalid_argument(fmt::format("the dynamics regressor needs {} joint values, got {}/{}/{}", n, q.size(), qd.size(), qdd.size()));
    }
    if (static_cast<std::size_t>(y.rows()) != n || static_cast<std::size_t>(y.cols()) != columns()) {
        throw std::invalid_argument(fmt::format("the regressor is {} x {}; got a {} x {} matrix", n, columns(), y.rows(), y.cols()));
    }
    std::array<Eigen::Isometry3d, kMaxDhJoints + 2> frames;
    model_.forward(q, std::span(frames).first(n + 2));
    // Velocities and accelerations in the base frame, outwards. Frame k's origin o_k lies on the
    // axis of joint k+1 (z_k); joint k (1-based) moves link k about / along z_{k-1}. The base's
    // acceleration is -g, which puts gravity into every link's acceleration (the usual trick).
    std::array<Eigen::Vector3d, kMaxDhJoints> w, dw, a, z, o;
    Eigen::Vector3d w_prev = Eigen::Vector3d::Zero(), dw_prev = Eigen::Vector3d::Zero();
    Eigen::Vector3d a_prev = gravity ? Eigen::Vector3d(-gravity_) : Eigen::Vector3d::Zero();
    for (std::size_t k = 0; k < n; ++k) {
        const Eigen::Vector3d axis = frames[k].linear().col(2);
        const Eigen::Vector3d r = frames[k + 1].translation() - frames[k].translation();
        z[k] = axis;
        o[k] = frames[k].translation();  // a point on joint k+1's axis (0-based joint k)
        if (model_.joints()[k].type == JointType::Revolute) {
            w[k] = w_prev + axis * qd[k];
            dw[k] = dw_prev + axis * qdd[k] + w_prev.cross(axis * qd[k]);
            a[k] = a_prev + dw[k].cross(r) + w[k].cross(w[k].cross(r));
        } else {
            w[k] = w_prev;
            dw[k] = dw_prev;
            a[k] = a_prev + dw[k].cross(r) + w[k].cross(w[k].cross(r)) + 2.0 * w[k].cross(axis * qd[k]) + axis * qdd[k];
        }
        w_prev = w[k], dw_prev = dw[k], a_prev = a[k];
    }
    y.setZero();
    // Link k's wrench about its frame origin for a unit parameter, projected on every joint j <= k:
    // a revolute joint takes the moment about a point of its axis, a prismatic one the force.
    const auto project = [&](std::size_t k, std::size_t column, const Eigen::Vector3d& f, const Eigen::Vector3d& nm) {
        const Eigen::Vector3d origin = frames[k + 1].translation();
        for (std::size_t j = 0; j <= k; ++j) {
            const double v = model_.joints()[j].type == JointType::Revolute ? z[j].dot(nm + (origin - o[j]).cross(f)) : z[j].dot(f);
            y(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(column)) = v;
        }
    };
    for (std::size_t k = 0; k < n; ++k) {
        const Eigen::Matrix3d& rot = frames[k + 1].linear();
        const Eigen::Vector3d wl = rot.transpose() * w[k], dwl = rot.transpose() * dw[k];
        // Mass: F = m a.
        project(k, link_column(k, 0), a[k], Eigen::Vector3d::Zero());
        // First moments h (frame k): F = dw x h + w x (w x h), N = h x a.
        for (int c = 0; c < 3; ++c) {
            const Eigen::Vector3d h = rot.col(c);
            project(k, link_column(k, 1 + static_cast<std::size_t>(c)), dw[k].cross(h) + w[k].cross(w[k].cross(h)), h.cross(a[k]));
        }
        // Inertia about the origin (frame k): N = I dw + w x (I w), for each symmetric unit tensor.
        static constexpr std::array<std::array<int, 2>, 6> kEntries{{{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}}};
        for (std::size_t e = 0; e < kEntries.size(); ++e) {
            Eigen::Matrix3d unit = Eigen::Matrix3d::Zero();
            unit(kEntries[e][0], kEntries[e][1]) = 1.0;
            unit(kEntries[e][1], kEntries[e][0]) = 1.0;
            const Eigen::Vector3d nl = unit * dwl + wl.cross(unit * wl);
            project(k, link_column(k, 4 + e), Eigen::Vector3d::Zero(), rot * nl);
        }
    }
    for (std::size_t j = 0; j < n; ++j) {
        const auto row = static_cast<Eigen::Index>(j);
        y(row, static_cast<Eigen::Index>(joint_column(j, 0))) = qdd[j];
        y(row, static_cast<Eigen::Index>(joint_column(j, 1))) = qd[j];
        y(row, static_cast<Eigen::Index>(joint_column(j, 2))) = qd[j] / (std::abs(qd[j]) + kCoulombSmoothing);
        y(row, static_cast<Eigen::Index>(joint_column(j, 3))) = 1.0;
    }
}

Eigen::VectorXd DynamicsRegressor::parameters(const std::vector<LinkDynamics>& links) const {
    if (links.size() != dof()) throw std::invalid_argument(fmt::format("{} links described; the model has {} joints", links.size(), dof()));
    Eigen::VectorXd pi = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(columns()));
    for (std::size_t k = 0; k < dof(); ++k) {
        const LinkDynamics& l = links[k];
        const Eigen::Vector3d c = l.com;
        // Parallel-axis theorem: I_o = I_c + m (|c|^2 E - c c^T).
        const Eigen::Matrix3d io = Eigen::Matrix3d(l.inertia.asDiagonal()) + l.mass * (c.squaredNorm() * Eigen::Matrix3d::Identity() - c * c.transpose());
        const auto col = [&](std::size_t p) { return static_cast<Eigen::Index>(link_column(k, p)); };
        pi(col(0)) = l.mass;
        for (int i = 0; i < 3; ++i) pi(col(1 + static_cast<std::size_t>(i))) = l.mass * c(i);
        pi(col(4)) = io(0, 0), pi(col(5)) = io(0, 1), pi(col(6)) = io(0, 2);
        pi(col(7)) = io(1, 1), pi(col(8)) = io(1, 2), pi(col(9)) = io(2, 2);
        pi(static_cast<Eigen::Index>(joint_column(k, 0))) = l.armature;
        pi(static_cast<Eigen::Index>(joint_column(k, 1))) = l.viscous;
        pi(static_cast<Eigen::Index>(joint_column(k, 2))) = l.coulomb;
    }
    return pi;
}

std::string DynamicsRegressor::column_name(std::size_t c) const {
    static constexpr const char* kLink[] = {"mass",       "first moment x", "first moment y", "first moment z", "inertia xx",
                                            "inertia xy", "inertia xz",     "inertia yy",     "inertia yz",     "inertia zz"};
    static constexpr const char* kJoint[] = {"armature", "viscous friction", "Coulomb friction", "offset"};
    const std::size_t links = kLinkParameters * dof();
    if (c < links) return fmt::format("link {} {}", c / kLinkParameters + 1, kLink[c % kLinkParameters]);
    return fmt::format("joint {} {}", (c - links) / kJointParameters + 1, kJoint[(c - links) % kJointParameters]);
}

void smooth_derivatives(std::span<const double> t, std::span<const double> q, std::size_t half_width, std::span<double> qd,
                        std::span<double> qdd) {
    const std::size_t n = q.size();
    if (t.size() != n || qd.size() != n || qdd.size() != n) {
        throw std::invalid_argument(fmt::format("derivatives: {} times, {} angles, {}/{} outputs", t.size(), n, qd.size(), qdd.size()));
    }
    std::fill(qd.begin(), qd.end(), 0.0);
    std::fill(qdd.begin(), qdd.end(), 0.0);
    if (n < 3) return;
    const std::size_t h = std::max<std::size_t>(1, std::min(half_width, (n - 1) / 2));
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t lo = i < h ? 0 : std::min(i - h, n - 1 - 2 * h);
        const std::size_t hi = lo + 2 * h;
        // q(t) ~ c0 + c1 (t - t_i) + c2 (t - t_i)^2 by least squares over [lo, hi].
        Eigen::Matrix3d ata = Eigen::Matrix3d::Zero();
        Eigen::Vector3d atb = Eigen::Vector3d::Zero();
        for (std::size_t k = lo; k <= hi; ++k) {
            const double d = t[k] - t[i];
            const Eigen::Vector3d row(1.0, d, d * d);
            ata += row * row.transpose();
            atb += row * q[k];
        }
        const Eigen::Vector3d c = ata.ldlt().solve(atb);
        if (c.allFinite()) {
            qd[i] = c(1);
            qdd[i] = 2.0 * c(2);
        }
    }
}

void tool_point_jacobian(const DhModel& model, std::span<const double> q, std::span<Eigen::Isometry3d> frames,
                         std::span<Eigen::Vector3d> columns) {
    const std::size_t n = model.dof();
    if (columns.size() < n) throw std::invalid_argument(fmt::format("tool point Jacobian: {} columns, expected {}", columns.size(), n));
    model.forward(q, frames);
    const Eigen::Vector3d p = frames[n + 1].translation();
    for (std::size_t i = 0; i < n; ++i) {
        const Eigen::Vector3d z = frames[i].linear().col(2);
        columns[i] = model.joints()[i].type == JointType::Revolute ? Eigen::Vector3d(z.cross(p - frames[i].translation())) : z;
    }
}

std::vector<Eigen::Vector3d> tool_point_acceleration(const DhModel& model, std::span<const double> t,
                                                     const std::vector<std::vector<double>>& q) {
    const std::size_t size = t.size();
    if (q.size() != model.dof()) {
        throw std::invalid_argument(fmt::format("tool point acceleration: {} joints, the model has {}", q.size(), model.dof()));
    }
    std::array<std::vector<double>, 3> position;
    for (auto& c : position) c.resize(size);
    std::vector<double> qk(model.dof());
    for (std::size_t k = 0; k < size; ++k) {
        for (std::size_t j = 0; j < model.dof(); ++j) qk[j] = q[j][k];
        const Eigen::Vector3d p = model.tool_pose(qk).translation();
        for (int c = 0; c < 3; ++c) position[static_cast<std::size_t>(c)][k] = p[c];
    }
    std::vector<Eigen::Vector3d> out(size, Eigen::Vector3d::Zero());
    std::vector<double> velocity(size), acceleration(size);
    for (int c = 0; c < 3; ++c) {
        smooth_derivatives(t, position[static_cast<std::size_t>(c)], kDerivativeHalfWidth, velocity, acceleration);
        for (std::size_t k = 0; k < size; ++k) out[k][c] = acceleration[k];
    }
    return out;
}

nlohmann::json to_json(const PayloadModel& model) {
    nlohmann::json centre = nlohmann::json::array();
    for (const auto& u : model.centre_uncertainty) centre.push_back({u.x(), u.y(), u.z()});
    return {{"model", to_json(model.model)},
            {"gravity", {model.gravity.x(), model.gravity.y(), model.gravity.z()}},
            {"signal_per_nm", model.signal_per_nm},
            {"relative_error", model.relative_error},
            {"centre_uncertainty", centre},
            {"beyond_reference_part", model.beyond_reference_part},
            {"derivation", model.derivation}};
}

PayloadModel payload_model_from_json(const nlohmann::json& j, std::size_t joints) {
    if (!j.is_object() || !j.contains("model") || !j.contains("signal_per_nm")) {
        throw std::invalid_argument("payload_model needs 'model' and 'signal_per_nm'");
    }
    PayloadModel m;
    m.model = dh_model_from_json(j.at("model"));
    if (m.model.dof() != joints) {
        throw std::invalid_argument(fmt::format("payload_model: the kinematic model has {} joints; the profile has {}", m.model.dof(), joints));
    }
    try {
        m.signal_per_nm = j.at("signal_per_nm").get<std::vector<double>>();
        m.relative_error = j.value("relative_error", std::vector<double>(joints, 0.0));
        m.beyond_reference_part = j.value("beyond_reference_part", false);
        if (j.contains("gravity")) {
            const auto g = j.at("gravity").get<std::vector<double>>();
            if (g.size() != 3) throw std::invalid_argument(fmt::format("payload_model.gravity has {} numbers; expected 3", g.size()));
            m.gravity = Eigen::Vector3d(g[0], g[1], g[2]);
        }
    } catch (const nlohmann::json::exception&) {
        throw std::invalid_argument("payload_model.signal_per_nm and gravity must be arrays of numbers");
    }
    if (j.contains("centre_uncertainty")) {
        const auto& list = j.at("centre_uncertainty");
        if (!list.is_array() || list.size() > 3) {
            throw std::invalid_argument(fmt::format("payload_model.centre_uncertainty is {}; expected up to 3 vectors [x, y, z] in m",
                                                    list.dump()));
        }
        for (const auto& v : list) {
            if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() || !v[2].is_number()) {
                throw std::invalid_argument(fmt::format("payload_model.centre_uncertainty entry {} is not a vector [x, y, z] in m", v.dump()));
            }
            const Eigen::Vector3d u(v[0].get<double>(), v[1].get<double>(), v[2].get<double>());
            if (!u.allFinite()) {
                throw std::invalid_argument(fmt::format("payload_model.centre_uncertainty entry {} is not finite", v.dump()));
            }
            m.centre_uncertainty.push_back(u);
        }
    }
    if (m.relative_error.size() != joints) {
        throw std::invalid_argument(fmt::format("payload_model.relative_error has {} values; expected {}", m.relative_error.size(), joints));
    }
    for (double e : m.relative_error) {
        if (!(e >= 0 && e <= 1)) throw std::invalid_argument(fmt::format("payload_model.relative_error {} is not in [0, 1]", e));
    }
    if (m.signal_per_nm.size() != joints) {
        throw std::invalid_argument(fmt::format("payload_model.signal_per_nm has {} values; expected {}", m.signal_per_nm.size(), joints));
    }
    for (std::size_t i = 0; i < joints; ++i) {
        if (!std::isfinite(m.signal_per_nm[i])) {
            throw std::invalid_argument(fmt::format("payload_model.signal_per_nm[{}] is {}; expected a finite number", i, m.signal_per_nm[i]));
        }
    }
    if (j.contains("derivation")) m.derivation = j.at("derivation");
    return m;
}

namespace {

struct NormalEquations {
    Eigen::MatrixXd ata;
    Eigen::VectorXd atb;
    double bb = 0, b_sum = 0;
    std::size_t rows = 0;
};

// Minimum-norm least squares over the directions the data excite: columns scaled to unit norm, the
// eigen-directions of the scaled normal matrix below `relative` of the largest are dropped.
Eigen::VectorXd solve_truncated(const NormalEquations& ne, double relative, std::size_t& rank) {
    const Eigen::Index c = ne.ata.rows();
    Eigen::VectorXd scale(c);
    for (Eigen::Index i = 0; i < c; ++i) scale(i) = ne.ata(i, i) > 0 ? 1.0 / std::sqrt(ne.ata(i, i)) : 0.0;
    const Eigen::MatrixXd scaled = scale.asDiagonal() * ne.ata * scale.asDiagonal();
    const Eigen::VectorXd rhs = scale.asDiagonal() * ne.atb;
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(scaled);
    const Eigen::VectorXd& values = eig.eigenvalues();
    const double top = values.maxCoeff();
    Eigen::VectorXd x = Eigen::VectorXd::Zero(c);
    rank = 0;
    for (Eigen::Index i = 0; i < c; ++i) {
        if (!(values(i) > relative * top)) continue;
        const auto v = eig.eigenvectors().col(i);
        x += v * (v.dot(rhs) / values(i));
        ++rank;
    }
    return scale.asDiagonal() * x;
}

// Directions excited less than this fraction (in eigenvalue; 1e-3 in singular value, a condition
// number of 1,000 for the column-scaled regressor) of the best-excited one are not trusted: with a
// signal noise of about 1 % of its range, such a direction's coefficient is not determined to better
// than ten times its effect. (Measured on the UR5e-like pick-and-place at 70 % override: a cut of
// 1e-8 let per-stretch loads take inertial parts several times the signal; 1e-6 and 1e-4 gave the
// same false stops.)
constexpr double kRelativeEigenvalue = 1e-6;
// Gauss-Newton steps for the per-joint factors of a signal in percent (it stops earlier once a
// step gains less than 1e-10 of the residual).
constexpr std::size_t kScaleSteps = 50;
// A current in A: a joint whose own fit explains less than this share of its signal's variance keeps
// its own copy of the parameters. On the three arms measured (docs/detection.md) the joints fall
// into two groups, 0.94-1.00 (the arm's own dynamics) and 0.14-0.68 (a process torque, a wrist
// near its noise): any value between the groups splits them the same way; 0.9 lies between.
constexpr double kOwnFitShared = 0.9;

// Calls fn(i) for every stride-th sample i of `rec` at least kDerivativeHalfWidth samples from its
// ends, with y = Y(q, qd, qdd) there (velocities and accelerations from local quadratic fits).
template <typename Fn>
void for_each_regressor_row(const DynamicsRegressor& regressor, const Recording& rec, std::size_t stride, Eigen::MatrixXd& y, Fn&& fn) {
    const std::size_t n = regressor.dof(), h = kDerivativeHalfWidth;
    if (rec.size() < 2 * h + 1) return;
    std::vector<std::vector<double>> vel(n, std::vector<double>(rec.size())), acc(n, std::vector<double>(rec.size()));
    for (std::size_t j = 0; j < n; ++j) smooth_derivatives(rec.t, rec.q[j], h, vel[j], acc[j]);
    std::vector<double> q(n), qd(n), qdd(n);
    for (std::size_t i = h; i + h < rec.size(); i += stride) {
        for (std::size_t j = 0; j < n; ++j) q[j] = rec.q[j][i], qd[j] = vel[j][i], qdd[j] = acc[j][i];
        regressor.compute(q, qd, qdd, true, y);
        fn(i);
    }
}

struct FittedParameters {
    std::vector<Eigen::VectorXd> pi;  // per joint, in that joint's signal units
    std::vector<std::size_t> ranks;
    std::vector<double> scales;       // per joint (percent): signal units per common unit; 1 otherwise
    std::size_t scale_reference = 0, scale_steps = 0;
    bool shared = false, percent = false;
    std::vector<std::size_t> own_copy;  // 1-based: joints (a current in A) kept out of the shared set
    std::vector<double> weights;        // per joint in the shared set: 1 / variance of its own fit (0: not in it)
    Eigen::VectorXd common;             // the shared set's parameters in the common unit (empty when not shared)
    std::string method() const {
        return shared && !percent ? "rigid-body regressor, one parameter set for all joints (Nm)"
               : percent          ? "rigid-body regressor, one parameter set for all joints and a scale per joint (percent or A)"
                                  : "rigid-body regressor per joint (signals in per-joint units)";
    }
};

// A regressor row's summed squared joint velocity (the viscous columns hold the joint velocities):
// the measure of motion that tells the samples at rest from the moving ones.
double row_motion(const DynamicsRegressor& regressor, const Eigen::MatrixXd& y) {
    double motion = 0;
    for (Eigen::Index j = 0; j < y.rows(); ++j) {
        const double v = y(j, static_cast<Eigen::Index>(regressor.joint_column(static_cast<std::size_t>(j), 1)));
        motion += v * v;
    }
    return motion;
}

// A joint that does not move in the task (held still, moved only by servo error) has friction
// and armature columns of pure noise: a coefficient fitted to them is meaningless and can be
// huge. Those columns are dropped: RMS speed under 0.1 % of the fastest joint's (the suite's held
// joints: 0.001-0.01 %; a wrist turning slowly through a contact task, IRB120-like joint 4: 0.8 %,
// whose dry friction, dropped at 1 % until 2026-11-29, then had no band and at 70 % override 3
// stop events in 50 cycles against 0). Returns which
// joints are still; `rms_speed` receives every joint's RMS speed.
std::vector<bool> drop_still_joints(const DynamicsRegressor& regressor, std::vector<NormalEquations>& ne, std::vector<double>& rms_speed) {
    const std::size_t n = ne.size();
    rms_speed.assign(n, 0.0);
    for (std::size_t j = 0; j < n; ++j) {
        const double vv = ne[j].ata(static_cast<Eigen::Index>(regressor.joint_column(j, 1)), static_cast<Eigen::Index>(regressor.joint_column(j, 1)));
        rms_speed[j] = std::sqrt(vv / std::max<double>(1.0, static_cast<double>(ne[j].rows)));  // RMS speed
    }
    const double fastest = *std::max_element(rms_speed.begin(), rms_speed.end());
    std::vector<bool> still(n, false);
    for (std::size_t j = 0; j < n; ++j) {
        if (!(rms_speed[j] >= 0.001 * fastest)) {
            still[j] = true;
            for (std::size_t p = 0; p < 3; ++p) {
                const auto c = static_cast<Eigen::Index>(regressor.joint_column(j, p));
                ne[j].ata.row(c).setZero();
                ne[j].ata.col(c).setZero();
                ne[j].atb(c) = 0.0;
            }
        }
    }
    return still;
}

// Joint pairs whose velocities are (nearly) proportional over all the dry runs: their inertias
// cannot be told apart, only what their joint motion takes (a pick-and-place that turns the wrist
// with the base to keep the tool's heading: joints 1 and 6 of every robot of the suite). The model
// then mispredicts a motion of one without the other, such as a contact's jolt (UR5e-like contact
// task: the wrist jolted alone at 122 rad/s^2 and the model expected 260 Nm on joints 1 and 6
// where the torque moved by 1.5 Nm). Velocities from the local quadratic fits the parameters are
// fitted with; joints that do not move are left out. The documented default |correlation| >= 0.99 leaves under 2 % of either joint's
// velocity variance (1 - r^2) independent of the other's.
constexpr double kDependentCorrelation = 0.99;

nlohmann::json dependent_joint_pairs(std::span<const Recording* const> runs, const std::vector<bool>& still) {
    const std::size_t n = still.size();
    Eigen::MatrixXd cross = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(n));
    double count = 0;
    Eigen::VectorXd v(static_cast<Eigen::Index>(n));
    std::vector<std::vector<double>> vel(n), acc(n);
    const std::size_t h = kDerivativeHalfWidth;
    for (const Recording* run : runs) {
        if (run->size() < 2 * h + 1) continue;
        for (std::size_t j = 0; j < n; ++j) {
            vel[j].resize(run->size()), acc[j].resize(run->size());
            smooth_derivatives(run->t, run->q[j], h, vel[j], acc[j]);
        }
        for (std::size_t i = h; i + h < run->size(); ++i) {
            for (std::size_t j = 0; j < n; ++j) v(static_cast<Eigen::Index>(j)) = vel[j][i];
            cross.noalias() += v * v.transpose();
            sum += v;
            count += 1;
        }
    }
    nlohmann::json pairs = nlohmann::json::array();
    if (count < 2) return pairs;
    const Eigen::MatrixXd cov = (cross - sum * sum.transpose() / count) / (count - 1);
    for (std::size_t a = 0; a < n; ++a) {
        for (std::size_t b = a + 1; b < n; ++b) {
            if (still[a] || still[b]) continue;
            const auto ia = static_cast<Eigen::Index>(a), ib = static_cast<Eigen::Index>(b);
            const double r = cov(ia, ib) / std::sqrt(cov(ia, ia) * cov(ib, ib));
            if (std::abs(r) >= kDependentCorrelation) pairs.push_back({{"joints", {a + 1, b + 1}}, {"velocity_correlation", r}});
        }
    }
    return pairs;
}

// The parameters from every joint's (symmetric) normal equations.
// `own_copy` (1-based), when given, names the joints a current in A keeps out of the shared set
// instead of the rule on their own fits.
FittedParameters solve_parameters(const std::vector<NormalEquations>& ne, const std::vector<bool>& still, SignalUnit unit,
                                  ParameterSharing sharing, const std::vector<std::size_t>* own_copy = nullptr) {
    const std::size_t n = ne.size();
    FittedParameters fitted;
    std::vector<Eigen::VectorXd>& pi = fitted.pi;
    pi.resize(n);
    // Torques in one physical unit (Nm): one set of parameters explains every joint at once, as
    // in the standard identification of a robot's dynamics. A link's inertia shows in the torque
    // of every joint below it, and that coupling is what tells the parts that scale with the speed
    // from those that do not; fitted joint by joint, each joint's copy of the parameters is free to
    // trade its gravity, friction and inertial terms along the one repeated path, and the split
    // comes out wrong (measured on the simulated robots against their true parameters:
    // tests/sim/test_robot_cell.cpp). Signals in per-joint units (percent of each joint's rated
    // torque) have no common scale and are fitted joint by joint.
    // Each joint's rows are weighted by the inverse variance of what its own fit leaves unexplained
    // (noise and quantisation differ by orders of magnitude between a base joint and a wrist
    // joint; unweighted, the wrist would not count).
    // Percent of each joint's rated torque is torque times an unknown factor s_j per joint: the
    // model b_j = s_j Y_j pi with one parameter set pi in a common (torque) unit. Gauss-Newton on
    // (pi, s) together, the factor of one joint held at 1 (the overall scale is free), each step
    // halved until the weighted residual drops, and pi solved exactly for the factors reached.
    // (Fitting pi and the factors alternately was tried: 200 rounds and still creeping.) A motor
    // current in A is the motor's torque over its torque constant and gear: the joint's torque
    // times an unknown factor too, fitted the same way, except that a joint whose own fit explains
    // less than kOwnFitShared of its signal keeps its own copy (it carries what the model lacks - a
    // process torque, a wrist near its noise - which shared parameters would spread over the other
    // joints: the held-out LR Mate-like's screwdriver joint 6, 68 %, stopped 32 times in 100
    // cycles at 80 % override shared, 0 with its own copy; docs/detection.md). An unknown unit
    // keeps a copy of the parameters per joint.
    const bool by_unit = sharing == ParameterSharing::ByUnit;
    const bool amps = by_unit && unit == SignalUnit::A;
    const bool percent = fitted.percent = by_unit && (unit == SignalUnit::Percent || amps);
    const bool shared = fitted.shared = by_unit && (unit == SignalUnit::Nm || percent);
    std::vector<std::size_t>& ranks = fitted.ranks;
    ranks.assign(n, 0);
    std::vector<double>& scales = fitted.scales;
    scales.assign(n, 1.0);
    std::size_t& scale_reference = fitted.scale_reference;
    std::size_t& scale_steps = fitted.scale_steps;
    for (std::size_t j = 0; j < n; ++j) pi[j] = solve_truncated(ne[j], kRelativeEigenvalue, ranks[j]);
    if (shared) {
        std::vector<double> weight(n);  // 1 / variance of each joint's own fit, in signal units
        std::vector<double> explained(n, 0.0);
        for (std::size_t j = 0; j < n; ++j) {
            const double rss = std::max(0.0, ne[j].bb - 2.0 * pi[j].dot(ne[j].atb) + pi[j].dot(ne[j].ata * pi[j]));
            const double rows = static_cast<double>(ne[j].rows);
            weight[j] = 1.0 / std::max(rss / rows, 1e-12);
            const double mean = ne[j].b_sum / rows;
            explained[j] = 1.0 - rss / std::max(ne[j].bb - rows * mean * mean, 1e-300);
        }
        // Kept out of the shared set (a current's poorly explained joints): weight 0, own parameters.
        for (std::size_t j = 0; amps && j < n; ++j) {
            const bool out = own_copy ? std::find(own_copy->begin(), own_copy->end(), j + 1) != own_copy->end() : explained[j] < kOwnFitShared;
            if (out) weight[j] = 0.0, fitted.own_copy.push_back(j + 1);
        }
        fitted.weights = weight;
        const auto c = ne[0].ata.rows();
        std::size_t rank = 0;
        // The parameters for given factors, and the weighted residual they leave.
        const auto solve_parameters = [&](const std::vector<double>& f) {
            NormalEquations all;
            all.ata = Eigen::MatrixXd::Zero(c, c);
            all.atb = Eigen::VectorXd::Zero(c);
            for (std::size_t j = 0; j < n; ++j) all.ata += weight[j] * f[j] * f[j] * ne[j].ata, all.atb += weight[j] * f[j] * ne[j].atb;
            return solve_truncated(all, kRelativeEigenvalue, rank);
        };
        const auto residual = [&](const std::vector<double>& f, const Eigen::VectorXd& p) {
            double r = 0;
            for (std::size_t j = 0; j < n; ++j) r += weight[j] * (ne[j].bb - 2.0 * f[j] * p.dot(ne[j].atb) + f[j] * f[j] * p.dot(ne[j].ata * p));
            return r;
        };
        Eigen::VectorXd common = solve_parameters(scales);
        if (percent) {
            // The reference joint: the moving joint its own fit explains best.
            for (std::size_t j = 0; j < n; ++j) {
                if (!still[j] && (still[scale_reference] || explained[j] > explained[scale_reference])) scale_reference = j;
            }
            const auto s_index = [&](std::size_t j) { return c + static_cast<Eigen::Index>(j < scale_reference ? j : j - 1); };
            double current = residual(scales, common);
            for (scale_steps = 0; scale_steps < kScaleSteps; ++scale_steps) {
                // Normal equations of the linearised residual b_j - s_j Y_j pi in (d pi, d s).
                NormalEquations gn;
                gn.ata = Eigen::MatrixXd::Zero(c + static_cast<Eigen::Index>(n) - 1, c + static_cast<Eigen::Index>(n) - 1);
                gn.atb = Eigen::VectorXd::Zero(gn.ata.rows());
                for (std::size_t j = 0; j < n; ++j) {
                    const double w = weight[j], f = scales[j];
                    const Eigen::VectorXd ap = ne[j].ata * common;
                    const double pap = common.dot(ap), pab = common.dot(ne[j].atb);
                    gn.ata.topLeftCorner(c, c) += w * f * f * ne[j].ata;
                    gn.atb.head(c) += w * f * (ne[j].atb - f * ap);
                    if (j == scale_reference) continue;
                    const auto k = s_index(j);
                    gn.ata.block(0, k, c, 1) += w * f * ap;
                    gn.ata.block(k, 0, 1, c) += w * f * ap.transpose();
                    gn.ata(k, k) += w * pap;
                    gn.atb(k) += w * (pab - f * pap);
                }
                std::size_t step_rank = 0;
                const Eigen::VectorXd delta = solve_truncated(gn, kRelativeEigenvalue, step_rank);
                bool improved = false;
                for (double step = 1.0; step > 1e-3 && !improved; step *= 0.5) {
                    std::vector<double> trial = scales;
                    for (std::size_t j = 0; j < n; ++j) {
                        if (j != scale_reference) trial[j] += step * delta(s_index(j));
                    }
                    if (std::any_of(trial.begin(), trial.end(), [](double v) { return !(v > 0); })) continue;
                    const Eigen::VectorXd p = solve_parameters(trial);
                    const double r = residual(trial, p);
                    if (r < current) improved = true, scales = trial, common = p;
                    if (improved && current - r < 1e-10 * current) scale_steps = kScaleSteps;  // converged
                    if (improved) current = r;
                }
                if (!improved) break;
            }
        }
        for (std::size_t j = 0; j < n; ++j) {
            if (weight[j] > 0.0) pi[j] = scales[j] * common, ranks[j] = rank;
        }
        fitted.common = std::move(common);
    }
    return fitted;
}

// An own-copy joint's fallback (a current in A): the shared set's physics, which the other joints
// determine, times one factor, plus the joint's own armature, viscous and dry friction and offset -
// five parameters fitted to the joint's own signal where its own copy has one per column of the
// regressor (307 for six links and six stretches) along one repeated path. Empty when there is no
// shared set.
Eigen::VectorXd shared_backed_copy(const DynamicsRegressor& regressor, const NormalEquations& ne, const Eigen::VectorXd& common, std::size_t j,
                                   std::size_t& rank) {
    if (common.size() == 0) return {};
    const Eigen::Index c = ne.ata.rows();
    Eigen::MatrixXd t = Eigen::MatrixXd::Zero(c, 5);
    t.col(0) = common;
    for (std::size_t p = 0; p < 4; ++p) {
        const auto col = static_cast<Eigen::Index>(regressor.joint_column(j, p));
        t(col, 0) = 0.0;
        t(col, static_cast<Eigen::Index>(p) + 1) = 1.0;
    }
    NormalEquations reduced;
    reduced.ata = t.transpose() * ne.ata * t;
    reduced.atb = t.transpose() * ne.atb;
    return t * solve_truncated(reduced, kRelativeEigenvalue, rank);
}

// Per joint: rank, residual RMS, signal SD and the share of the signal's variance explained.
nlohmann::json joint_fit_report(const std::vector<NormalEquations>& ne, const FittedParameters& fitted) {
    const std::size_t n = ne.size();
    const std::vector<Eigen::VectorXd>& pi = fitted.pi;
    const std::vector<std::size_t>& ranks = fitted.ranks;
    nlohmann::json joints = nlohmann::json::array();
    for (std::size_t j = 0; j < n; ++j) {
        const std::size_t rank = ranks[j];
        // Residual from the normal equations: |b - Y pi|^2 = bb - 2 pi.atb + pi' ata pi.
        const double rss = std::max(0.0, ne[j].bb - 2.0 * pi[j].dot(ne[j].atb) + pi[j].dot(ne[j].ata * pi[j]));
        const double rows = static_cast<double>(ne[j].rows);
        const double mean = ne[j].b_sum / rows;
        const double tss = std::max(ne[j].bb - rows * mean * mean, 1e-300);
        joints.push_back({{"joint", j + 1},
                          {"rank", rank},
                          {"residual_rms", std::sqrt(rss / rows)},
                          {"signal_sd", std::sqrt(tss / rows)},
                          {"explained", 1.0 - rss / tss}});
    }
    return joints;
}

}  // namespace

SpeedModel fit_speed_model(const DhModel& model, const Reference& reference, SignalKind signal, SignalUnit unit,
                           std::span<const SpeedModelSource> nominal, const Eigen::Vector3d& gravity, std::size_t max_rows,
                           ParameterSharing sharing, RestSamples rest) {
    const std::size_t n = model.dof();
    if (reference.tau.size() != n) {
        throw std::invalid_argument(fmt::format("the kinematic model has {} joints; the reference has {}", n, reference.tau.size()));
    }
    if (signal != SignalKind::Torque) {
        throw std::invalid_argument("the speed model needs a signed torque signal; a motor-current magnitude has no sign to split");
    }
    if (nominal.empty()) throw std::invalid_argument("the speed model needs nominal recordings");
    const DynamicsRegressor regressor(model, gravity);
    const std::size_t base = regressor.columns();
    // The reference's joint velocities and accelerations, and its stretches: maximal runs of
    // motion and of standstill (summed squared joint velocity above / below 0.1 % of its 95th
    // percentile; runs under 5 samples join the run before). A load can only change between them
    // (a part is grasped or released while the robot stands).
    const std::size_t m = reference.size();
    std::vector<std::vector<double>> ref_vel(n, std::vector<double>(m)), ref_acc(n, std::vector<double>(m));
    for (std::size_t j = 0; j < n; ++j) smooth_derivatives(reference.t, reference.q[j], kDerivativeHalfWidth, ref_vel[j], ref_acc[j]);
    std::vector<std::uint32_t> stretch(m, 0);
    std::size_t stretches = 1;
    double moving = 0;  // summed squared joint velocity above which the robot moves
    {
        std::vector<double> motion(m, 0.0);
        for (std::size_t k = 0; k < m; ++k) {
            for (std::size_t j = 0; j < n; ++j) motion[k] += ref_vel[j][k] * ref_vel[j][k];
        }
        std::vector<double> sorted = motion;
        const auto at = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() * 95 / 100);
        std::nth_element(sorted.begin(), at, sorted.end());
        moving = 1e-3 * *at;
        std::size_t run_start = 0;
        bool state = m > 0 && motion[0] > moving;
        std::uint32_t id = 0;
        for (std::size_t k = 0; k < m; ++k) {
            const bool here = motion[k] > moving;
            if (here != state && k - run_start >= 5) {
                ++id;
                run_start = k;
                state = here;
            } else if (here != state) {
                state = here;  // a short run joins the run before
            }
            stretch[k] = id;
        }
        stretches = static_cast<std::size_t>(id) + 1;
    }
    const std::size_t per_load = 4;  // mass and first moments of a load on the last link
    const std::size_t cols = base + per_load * stretches;
    std::vector<std::size_t> stretch_rows(stretches, 0);
    std::vector<NormalEquations> ne(n);
    for (auto& e : ne) e.ata = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(cols), static_cast<Eigen::Index>(cols)), e.atb = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(cols));
    std::size_t total = 0;
    for (const auto& src : nominal) total += src.recording ? src.recording->size() : 0;
    if (total == 0) throw std::invalid_argument("the speed model's nominal recordings have no samples");
    const std::size_t stride = std::max<std::size_t>(1, (total + max_rows - 1) / max_rows);
    std::size_t resting_rows = 0;  // rows left out: the robot at rest
    Eigen::MatrixXd y(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(base));
    std::vector<double> q(n), qd(n), qdd(n);
    const auto load_column = [&](std::size_t p) { return regressor.link_column(n - 1, p); };
    for (const auto& src : nominal) {
        const Recording& rec = *src.recording;
        if (rec.joints() != n) {
            throw std::invalid_argument(fmt::format("{}: {} joints; the kinematic model has {}", src.name, rec.joints(), n));
        }
        if (!src.partners.empty() && src.partners.size() != rec.size()) {
            throw std::invalid_argument(fmt::format("{}: {} partners for {} samples", src.name, src.partners.size(), rec.size()));
        }
        for_each_regressor_row(regressor, rec, stride, y, [&](std::size_t i) {
            // RestSamples::LeaveOut: only samples where the robot moves (the reference's criterion
            // above): at rest the inertial and viscous parts are 0 whatever the parameters, and
            // what a robot at rest reads beyond gravity is the task's own (a press, a
            // screwdriver's reaction), which no parameter of the arm explains; fitted along, such
            // samples bend the shared parameters and with them the split of the moves (measured,
            // docs/detection.md).
            if (rest == RestSamples::LeaveOut && !(row_motion(regressor, y) > moving)) {
                ++resting_rows;
                return;
            }
            const std::size_t load = src.partners.empty() ? 0 : stretch[std::min<std::size_t>(src.partners[i], m - 1)];
            const auto block = static_cast<Eigen::Index>(base + per_load * load);
            ++stretch_rows[load];
            for (std::size_t j = 0; j < n; ++j) {
                const auto yj = y.row(static_cast<Eigen::Index>(j));
                const double b = rec.tau[j][i];
                auto& e = ne[j];
                // Dense part (the base columns) and the one active load block: a sparse rank update.
                e.ata.topLeftCorner(static_cast<Eigen::Index>(base), static_cast<Eigen::Index>(base))
                    .selfadjointView<Eigen::Lower>()
                    .rankUpdate(yj.transpose());
                Eigen::Matrix<double, 4, 1> yl;
                for (std::size_t p = 0; p < per_load; ++p) yl(static_cast<Eigen::Index>(p)) = yj(static_cast<Eigen::Index>(load_column(p)));
                e.ata.block(block, 0, 4, static_cast<Eigen::Index>(base)) += yl * yj;
                e.ata.block(block, block, 4, 4) += yl * yl.transpose();
                e.atb.head(static_cast<Eigen::Index>(base)) += yj.transpose() * b;
                e.atb.segment(block, 4) += yl * b;
                e.bb += b * b;
                e.b_sum += b;
                ++e.rows;
            }
        });
    }
    std::vector<double> rms_speed;
    const std::vector<bool> still = drop_still_joints(regressor, ne, rms_speed);
    // A stretch that few calibration samples were matched to cannot carry its own load: column
    // scaling would make its few rows look as informative as any other column. Under 100 samples
    // (a fraction of a second of data) its load columns are dropped.
    std::size_t thin_stretches = 0;
    for (std::size_t b = 0; b < stretches; ++b) {
        if (stretch_rows[b] >= 100) continue;
        ++thin_stretches;
        for (std::size_t j = 0; j < n; ++j) {
            const auto c = static_cast<Eigen::Index>(base + per_load * b);
            ne[j].ata.middleRows(c, 4).setZero();
            ne[j].ata.middleCols(c, 4).setZero();
            ne[j].atb.segment(c, 4).setZero();
        }
    }
    if (ne[0].rows < cols) {
        throw std::invalid_argument(rest == RestSamples::LeaveOut
                                        ? fmt::format("the speed model needs at least {} nominal samples where the robot moves, got {} "
                                                      "({} at rest left out)",
                                                      cols, ne[0].rows, resting_rows)
                                        : fmt::format("the speed model needs at least {} nominal samples, got {}", cols, ne[0].rows));
    }

    SpeedModel out;
    out.inertial.assign(n, std::vector<double>(reference.size()));
    out.viscous.assign(n, std::vector<double>(reference.size()));
    out.speed_change.assign(n, std::vector<double>(reference.size()));
    out.coulomb.assign(n, 0.0);
    std::vector<double> still_qd(n, 0.0);
    for (std::size_t j = 0; j < n; ++j) ne[j].ata = ne[j].ata.selfadjointView<Eigen::Lower>();
    FittedParameters fitted = solve_parameters(ne, still, unit, sharing);
    std::vector<Eigen::VectorXd>& pi = fitted.pi;
    // The split along the reference: motion-dependent part without gravity (link parameters and
    // armature, all scaling with s^2) and the viscous term (s).
    Eigen::VectorXd inertial_mask = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(base));
    inertial_mask.head(static_cast<Eigen::Index>(kLinkParameters * n)).setOnes();
    for (std::size_t j = 0; j < n; ++j) inertial_mask(static_cast<Eigen::Index>(regressor.joint_column(j, 0))) = 1.0;
    std::vector<double> largest(n, 0.0);
    // What the fitted model leaves unexplained of the reference itself (reference less the whole
    // model: gravity, the stretch's load, friction and offset included).
    std::vector<std::vector<double>> residual(n, std::vector<double>(m, 0.0));
    // Joint j's torque of the load of the stretch whose parameters start at `block`.
    const auto load_part = [&](const auto& yj, std::size_t j, Eigen::Index block) {
        double value = 0;
        for (std::size_t p = 0; p < per_load; ++p) value += yj(static_cast<Eigen::Index>(load_column(p))) * pi[j](block + static_cast<Eigen::Index>(p));
        return value;
    };
    // The split of the reference by pi, for the joints in `which`.
    const auto split = [&](const std::vector<bool>& which) {
        for (std::size_t j = 0; j < n; ++j) {
            if (which[j]) largest[j] = 0.0;
        }
        for (std::size_t k = 0; k < m; ++k) {
            for (std::size_t j = 0; j < n; ++j) q[j] = reference.q[j][k], qd[j] = ref_vel[j][k], qdd[j] = ref_acc[j][k];
            const auto block = static_cast<Eigen::Index>(base + per_load * stretch[k]);
            regressor.compute(q, qd, qdd, true, y);
            for (std::size_t j = 0; j < n; ++j) {
                if (!which[j]) continue;
                const auto yj = y.row(static_cast<Eigen::Index>(j)).transpose();
                residual[j][k] = reference.tau[j][k] - yj.dot(pi[j].head(static_cast<Eigen::Index>(base))) - load_part(yj, j, block);
            }
            regressor.compute(q, qd, qdd, false, y);
            for (std::size_t j = 0; j < n; ++j) {
                if (!which[j]) continue;
                const auto yj = y.row(static_cast<Eigen::Index>(j)).transpose();
                const double value = yj.cwiseProduct(inertial_mask).dot(pi[j].head(static_cast<Eigen::Index>(base))) + load_part(yj, j, block);
                out.inertial[j][k] = value;
                out.viscous[j][k] = pi[j](static_cast<Eigen::Index>(regressor.joint_column(j, 1))) * qd[j];
                largest[j] = std::max(largest[j], std::abs(value));
            }
            // The torque of a change of speed: an acceleration of qd_ref at rest, no gravity.
            std::fill(still_qd.begin(), still_qd.end(), 0.0);
            regressor.compute(q, still_qd, qd, false, y);
            for (std::size_t j = 0; j < n; ++j) {
                if (!which[j]) continue;
                const auto yj = y.row(static_cast<Eigen::Index>(j)).transpose();
                out.speed_change[j][k] = yj.cwiseProduct(inertial_mask).dot(pi[j].head(static_cast<Eigen::Index>(base))) + load_part(yj, j, block);
            }
        }
    };
    // Safety net: a split that says the speed changes a joint's signal by more than the signal's
    // whole range in the reference is not physics but a poorly determined fit.
    const auto plausible = [&](std::size_t j) {
        const auto [lo, hi] = std::minmax_element(reference.tau[j].begin(), reference.tau[j].end());
        const double range = m > 0 ? *hi - *lo : 0.0;
        double viscous_largest = 0;
        for (double v : out.viscous[j]) viscous_largest = std::max(viscous_largest, std::abs(v));
        return largest[j] <= range && viscous_largest <= range;
    };
    split(std::vector<bool>(n, true));
    // An own copy (a current's poorly explained joint) whose split fails the net takes the shared
    // set's physics with its own factor and friction instead (shared_backed_copy): the held-out
    // IRB 1600-like as a current, whose wrist joint 5 (78 % explained, own copy at rank 231) put
    // 0.28 A of inertial part on a signal of 0.03 A SD and so had no speed model (docs/detection.md).
    std::vector<bool> backed(n, false);
    for (std::size_t j : fitted.own_copy) {
        const std::size_t i = j - 1;
        if (plausible(i)) continue;
        std::size_t rank = 0;
        Eigen::VectorXd candidate = shared_backed_copy(regressor, ne[i], fitted.common, i, rank);
        if (candidate.size() == 0) continue;
        pi[i] = std::move(candidate);
        fitted.ranks[i] = rank;
        backed[i] = true;
    }
    if (std::any_of(backed.begin(), backed.end(), [](bool b) { return b; })) split(backed);
    nlohmann::json joints = joint_fit_report(ne, fitted);
    // Smoothed over the derivative window (+- kDerivativeHalfWidth samples): the measurement noise
    // of single samples is not a part of the dynamics.
    out.unexplained.assign(n, std::vector<double>(m, 0.0));
    for (std::size_t j = 0; j < n; ++j) {
        double sum = 0;
        std::size_t lo = 0, hi = 0;  // window [lo, hi)
        for (std::size_t k = 0; k < m; ++k) {
            const std::size_t want_lo = k >= kDerivativeHalfWidth ? k - kDerivativeHalfWidth : 0;
            const std::size_t want_hi = std::min(m, k + kDerivativeHalfWidth + 1);
            while (hi < want_hi) sum += residual[j][hi++];
            while (lo < want_lo) sum -= residual[j][lo++];
            out.unexplained[j][k] = sum / static_cast<double>(hi - lo);
        }
    }
    // A split that still fails the safety net: that joint keeps no speed model (it is compared as
    // recorded) rather than a wrong one.
    for (std::size_t j = 0; j < n; ++j) {
        const bool implausible = !plausible(j);
        joints[j]["dropped"] = implausible;
        joints[j]["shared_backed"] = backed[j];
        const double coulomb = pi[j](static_cast<Eigen::Index>(regressor.joint_column(j, 2)));
        joints[j]["coulomb_coefficient"] = coulomb;
        // A negative dry friction is not physics (the fit traded it against another term): no band.
        out.coulomb[j] = still[j] || implausible ? 0.0 : std::max(0.0, coulomb);
        if (implausible) {
            std::fill(out.inertial[j].begin(), out.inertial[j].end(), 0.0);
            std::fill(out.viscous[j].begin(), out.viscous[j].end(), 0.0);
            std::fill(out.speed_change[j].begin(), out.speed_change[j].end(), 0.0);
            std::fill(out.unexplained[j].begin(), out.unexplained[j].end(), 0.0);
        }
    }
    for (std::size_t j = 0; j < n; ++j) {
        joints[j]["largest_inertial"] = largest[j];
        joints[j]["viscous_coefficient"] = pi[j](static_cast<Eigen::Index>(regressor.joint_column(j, 1)));
        joints[j]["rms_speed"] = rms_speed[j];
        joints[j]["still"] = still[j];
    }
    out.derivation = {{"method", fitted.method() +
                                     " (10 parameters per link; armature, viscous, Coulomb, offset per joint; "
                                     "a load on the last link per stretch of the reference), "
                                     "truncated least squares on the nominal recordings"},
                      {"shared_parameters", fitted.shared},
                      {"joint_scales", fitted.percent ? nlohmann::json(fitted.scales) : nlohmann::json(nullptr)},
                      {"own_copy_joints", fitted.own_copy},
                      {"scale_reference_joint", fitted.percent ? nlohmann::json(fitted.scale_reference + 1) : nlohmann::json(nullptr)},
                      {"scale_steps", fitted.scale_steps},
                      {"samples", ne[0].rows},
                      {"resting_samples_left_out", rest == RestSamples::LeaveOut ? nlohmann::json(resting_rows) : nlohmann::json(nullptr)},
                      {"load_stretches", stretches},
                      {"thin_stretches", thin_stretches},
                      {"stride", stride},
                      {"relative_eigenvalue_cut", kRelativeEigenvalue},
                      {"gravity", {gravity.x(), gravity.y(), gravity.z()}},
                      {"joints", joints}};
    return out;
}

namespace {
// Chooses arm.causal_order and causal_samples on the dry runs (defined below, after the filter).
void choose_causal_estimator(ArmDynamics& arm, std::span<const Recording* const> dry_runs);
}  // namespace

double rest_motion_bound(std::span<const Recording* const> runs, std::vector<std::vector<double>>* motion) {
    std::vector<double> all;
    if (motion) motion->assign(runs.size(), {});
    for (std::size_t r = 0; r < runs.size(); ++r) {
        const Recording& rec = *runs[r];
        std::vector<double> sum(rec.size(), 0.0), vel(rec.size()), acc(rec.size());
        for (std::size_t j = 0; j < rec.joints() && rec.size() > 2 * kDerivativeHalfWidth; ++j) {
            smooth_derivatives(rec.t, rec.q[j], kDerivativeHalfWidth, vel, acc);
            for (std::size_t i = 0; i < rec.size(); ++i) sum[i] += vel[i] * vel[i];
        }
        all.insert(all.end(), sum.begin(), sum.end());
        if (motion) (*motion)[r] = std::move(sum);
    }
    if (all.empty()) return -1.0;
    const auto at = all.begin() + static_cast<std::ptrdiff_t>(all.size() * 95 / 100);
    std::nth_element(all.begin(), at, all.end());
    return 1e-3 * *at;
}

ArmDynamics fit_arm_dynamics(const DhModel& model, std::span<const Recording* const> dry_runs, const Eigen::Vector3d& gravity,
                             std::size_t max_rows, RestSamples rest) {
    const std::size_t n = model.dof();
    if (dry_runs.empty()) throw std::invalid_argument("the arm model needs at least one dry run of the task");
    const SignalUnit unit = dry_runs.front()->info().unit;
    std::size_t total = 0;
    for (const Recording* run : dry_runs) {
        const Recording& rec = *run;
        if (rec.joints() != n) {
            throw std::invalid_argument(fmt::format("a dry run has {} joints; the kinematic model has {}", rec.joints(), n));
        }
        if (rec.info().signal != SignalKind::Torque) {
            throw std::invalid_argument(fmt::format("the arm model needs a signed torque signal; a dry run has '{}'", to_string(rec.info().signal)));
        }
        if (rec.info().unit != unit) {
            throw std::invalid_argument(fmt::format("the dry runs' units differ: '{}' and '{}'", to_string(unit), to_string(rec.info().unit)));
        }
        total += rec.size();
    }
    const DynamicsRegressor regressor(model, gravity);
    const std::size_t cols = regressor.columns();
    std::vector<NormalEquations> ne(n);
    for (auto& e : ne) e.ata = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(cols), static_cast<Eigen::Index>(cols)), e.atb = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(cols));
    const std::size_t stride = std::max<std::size_t>(1, (total + max_rows - 1) / std::max<std::size_t>(max_rows, 1));
    Eigen::MatrixXd y(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(cols));
    // RestSamples::LeaveOut: the summed squared joint velocity at or below which a sample is at rest.
    const double rest_motion = rest == RestSamples::LeaveOut ? rest_motion_bound(dry_runs) : -1.0;
    std::size_t resting_rows = 0;
    for (const Recording* run : dry_runs) {
        const Recording& rec = *run;
        for_each_regressor_row(regressor, rec, stride, y, [&](std::size_t i) {
            if (rest_motion >= 0 && !(row_motion(regressor, y) > rest_motion)) {
                ++resting_rows;
                return;
            }
            for (std::size_t j = 0; j < n; ++j) {
                const auto yj = y.row(static_cast<Eigen::Index>(j));
                const double b = rec.tau[j][i];
                auto& e = ne[j];
                e.ata.selfadjointView<Eigen::Lower>().rankUpdate(yj.transpose());
                e.atb += yj.transpose() * b;
                e.bb += b * b;
                e.b_sum += b;
                ++e.rows;
            }
        });
    }
    if (ne[0].rows < cols) {
        throw std::invalid_argument(rest_motion >= 0 ? fmt::format("the arm model needs at least {} samples where the robot moves, got {} "
                                                                   "({} at rest left out)",
                                                                   cols, ne[0].rows, resting_rows)
                                                     : fmt::format("the arm model needs at least {} samples of dry runs, got {}", cols, ne[0].rows));
    }
    std::vector<double> rms_speed;
    const std::vector<bool> still = drop_still_joints(regressor, ne, rms_speed);
    for (std::size_t j = 0; j < n; ++j) ne[j].ata = ne[j].ata.selfadjointView<Eigen::Lower>();
    const FittedParameters fitted = solve_parameters(ne, still, unit, ParameterSharing::ByUnit);
    nlohmann::json joints = joint_fit_report(ne, fitted);
    for (std::size_t j = 0; j < n; ++j) joints[j]["still"] = still[j];
    ArmDynamics arm;
    arm.model = model;
    arm.gravity = gravity;
    arm.unit = unit;
    arm.parameters = fitted.pi;
    arm.derivation = {{"method", fitted.method() + " (10 parameters per link; armature, viscous, Coulomb, offset per joint), "
                                                   "truncated least squares on dry runs of the task"},
                      {"joint_scales", fitted.percent ? nlohmann::json(fitted.scales) : nlohmann::json(nullptr)},
                      {"samples", ne[0].rows},
                      {"resting_samples_left_out", rest_motion >= 0 ? nlohmann::json(resting_rows) : nlohmann::json(nullptr)},
                      {"dry_runs", dry_runs.size()},
                      {"stride", stride},
                      {"relative_eigenvalue_cut", kRelativeEigenvalue},
                      {"joints", joints},
                      {"dependent_joints", dependent_joint_pairs(dry_runs, still)},
                      {"dependent_correlation", kDependentCorrelation}};
    choose_causal_estimator(arm, dry_runs);
    return arm;
}

double arm_coulomb(const ArmDynamics& arm, std::size_t joint) {
    const auto column = static_cast<Eigen::Index>(joint_parameter_column(arm.model.dof(), joint, 2));
    if (joint >= arm.parameters.size() || column >= arm.parameters[joint].size()) return 0.0;
    return std::max(0.0, arm.parameters[joint](column));
}

namespace {

void check_causal_estimator(std::size_t samples, std::size_t order) {
    if (order < 2 || order > kMaxCausalOrder || samples < order + 1 || samples > kMaxCausalSamples) {
        throw std::invalid_argument(fmt::format("arm model: causal derivatives of order {} over {} samples; expected order 2..{} over "
                                                "order + 1..{} samples",
                                                order, samples, kMaxCausalOrder, kMaxCausalSamples));
    }
}

// Per joint, the RMS over the dry runs (from each run's kMaxCausalSamples-th sample on, so that
// every estimator is judged on the same samples) of their deviation from the arm model: with the
// offline derivatives, or with the arm's causal estimator.
std::vector<double> dry_run_deviation_rms(const ArmDynamics& arm, std::span<const Recording* const> runs, bool causal) {
    std::vector<double> sum(arm.model.dof(), 0.0);
    std::size_t count = 0;
    for (const Recording* run : runs) {
        const Recording dev = causal ? causal_arm_deviation(arm, *run) : arm_deviation(arm, *run);
        for (std::size_t j = 0; j < sum.size(); ++j) {
            for (std::size_t i = kMaxCausalSamples; i < dev.size(); ++i) sum[j] += dev.tau[j][i] * dev.tau[j][i];
        }
        count += dev.size() > kMaxCausalSamples ? dev.size() - kMaxCausalSamples : 0;
    }
    for (double& v : sum) v = count > 0 ? std::sqrt(v / static_cast<double>(count)) : 0.0;
    return sum;
}

void check_arm_recording(const ArmDynamics& arm, const Recording& recording) {
    const std::size_t n = arm.model.dof();
    if (recording.joints() != n) {
        throw std::invalid_argument(fmt::format("the recording has {} joints; the arm model has {}", recording.joints(), n));
    }
    if (recording.info().signal != SignalKind::Torque || recording.info().unit != arm.unit) {
        throw std::invalid_argument(fmt::format("the recording's signal is '{}' in '{}'; the arm model was fitted to a torque in '{}'",
                                                to_string(recording.info().signal), to_string(recording.info().unit), to_string(arm.unit)));
    }
}

}  // namespace

Recording unload_payload(const PayloadModel& payload, const Recording& recording) {
    const std::size_t n = payload.model.dof();
    if (recording.joints() != n || payload.signal_per_nm.size() != n) {
        throw std::invalid_argument(fmt::format("the recording has {} joints; the payload model has {}", recording.joints(), n));
    }
    if (!recording.declares_payload()) throw std::invalid_argument("the recording declares no payload (no 'payload' column)");
    Recording out = recording;
    const std::vector<Eigen::Vector3d> acceleration = tool_point_acceleration(payload.model, recording.t, recording.q);
    std::vector<Eigen::Isometry3d> frames(n + 2);
    std::vector<Eigen::Vector3d> columns(n, Eigen::Vector3d::Zero());
    std::vector<double> q(n);
    for (std::size_t k = 0; k < recording.size(); ++k) {
        const double mass = recording.payload[k];
        if (mass == 0.0) continue;
        for (std::size_t j = 0; j < n; ++j) q[j] = recording.q[j][k];
        tool_point_jacobian(payload.model, q, frames, columns);
        const Eigen::Vector3d f = mass * (acceleration[k] - payload.gravity);
        for (std::size_t j = 0; j < n; ++j) out.tau[j][k] -= payload.signal_per_nm[j] * columns[j].dot(f);
    }
    return out;
}

Recording arm_deviation(const ArmDynamics& arm, const Recording& recording) {
    check_arm_recording(arm, recording);
    const std::size_t n = arm.model.dof();
    Recording out = recording;
    const DynamicsRegressor regressor(arm.model, arm.gravity);
    std::vector<std::vector<double>> vel(n, std::vector<double>(recording.size())), acc(n, std::vector<double>(recording.size()));
    if (recording.size() >= 2 * kDerivativeHalfWidth + 1) {
        for (std::size_t j = 0; j < n; ++j) smooth_derivatives(recording.t, recording.q[j], kDerivativeHalfWidth, vel[j], acc[j]);
    }
    Eigen::MatrixXd y(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(regressor.columns()));
    std::vector<double> q(n), qd(n), qdd(n);
    for (std::size_t i = 0; i < recording.size(); ++i) {
        for (std::size_t j = 0; j < n; ++j) q[j] = recording.q[j][i], qd[j] = vel[j][i], qdd[j] = acc[j][i];
        regressor.compute(q, qd, qdd, true, y);
        for (std::size_t j = 0; j < n; ++j) out.tau[j][i] -= y.row(static_cast<Eigen::Index>(j)).dot(arm.parameters[j]);
    }
    return out;
}

ArmDeviationFilter::ArmDeviationFilter(ArmDynamics arm)
    : arm_(std::move(arm)),
      regressor_(arm_.model, arm_.gravity),
      y_(static_cast<Eigen::Index>(arm_.model.dof()), static_cast<Eigen::Index>(regressor_.columns())),
      still_(arm_.model.dof(), 0.0),
      t_(arm_.causal_samples, 0.0),
      q_(arm_.causal_samples * arm_.model.dof(), 0.0),
      qd_(arm_.model.dof(), 0.0),
      qdd_(arm_.model.dof(), 0.0) {
    if (arm_.parameters.size() != arm_.model.dof()) {
        throw std::invalid_argument(fmt::format("arm model: {} parameter vectors for {} joints", arm_.parameters.size(), arm_.model.dof()));
    }
    for (const auto& p : arm_.parameters) {
        if (static_cast<std::size_t>(p.size()) != regressor_.columns()) {
            throw std::invalid_argument(fmt::format("arm model: {} parameters per joint, expected {}", p.size(), regressor_.columns()));
        }
    }
    check_causal_estimator(arm_.causal_samples, arm_.causal_order);
    kink_response_ = causal_kink_response(arm_.causal_samples, arm_.causal_order);
}

double causal_kink_response(std::size_t samples, std::size_t order) {
    check_causal_estimator(samples, order);
    // Samples at t = -(samples - 1) .. 0 (unit spacing), the fit as ArmDeviationFilter's; the true
    // acceleration max(0, t - k) (positions (t - k)^3 / 6 after the kink at k), for k over a fine
    // grid from before the span's start to its newest sample.
    const auto count = static_cast<Eigen::Index>(samples), columns = static_cast<Eigen::Index>(order + 1);
    const double span = static_cast<double>(samples - 1);
    Eigen::MatrixXd a(count, columns);
    for (Eigen::Index i = 0; i < count; ++i) {
        double v = 1.0;
        for (Eigen::Index p = 0; p < columns; ++p, v *= (static_cast<double>(i) - span) / span) a(i, p) = v;
    }
    const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(a);
    constexpr int kSteps = 2000;
    double worst = 0.0;
    Eigen::VectorXd x(count);
    for (int g = 0; g <= kSteps; ++g) {
        const double kink = -span - 1.0 + (span + 1.0) * g / kSteps;
        for (Eigen::Index i = 0; i < count; ++i) {
            const double d = std::max(0.0, static_cast<double>(i) - span - kink);
            x(i) = d * d * d / 6.0;
        }
        const Eigen::VectorXd c = qr.solve(x);
        const double estimate = 2.0 * c(2) / (span * span), truth = std::max(0.0, -kink);
        worst = std::max(worst, std::abs(estimate - truth) / span);
    }
    return worst;
}

void ArmDeviationFilter::differentiate(double t, std::span<const double> q) {
    const std::size_t n = arm_.model.dof();
    const std::size_t size = t_.size();
    if (count_ > 0) {
        const double last = t_[(head_ + size - 1) % size];
        const double spacing = count_ > 1 ? last - t_[(head_ + size - 2) % size] : 0.0;
        if (!(t > last) || (count_ > 1 && t - last > kCausalGapFactor * spacing)) count_ = 0;
    }
    if (count_ == 0) head_ = 0;
    t_[head_] = t;
    std::copy(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(n), q_.begin() + static_cast<std::ptrdiff_t>(head_ * n));
    head_ = (head_ + 1) % size;
    count_ = std::min(count_ + 1, size);

    std::fill(qd_.begin(), qd_.end(), 0.0);
    std::fill(qdd_.begin(), qdd_.end(), 0.0);
    if (count_ < 2) return;
    // q(t_k) ~ sum_p c_p u_k^p with u_k = (t_k - t) / span, over the ring, of the order the samples
    // allow; one system for all joints. Unused orders are pinned to 0 by an identity row.
    const std::size_t order = std::min(arm_.causal_order, count_ - 1);
    const double span = t - t_[(head_ + size - count_) % size];
    using Matrix = Eigen::Matrix<double, kMaxCausalOrder + 1, kMaxCausalOrder + 1>;
    using Vector = Eigen::Matrix<double, kMaxCausalOrder + 1, 1>;
    // The fit's rows, newest first (built once per sample, shared by every joint).
    std::array<Vector, kMaxCausalSamples> rows;
    std::array<std::size_t, kMaxCausalSamples> slots;
    Matrix ata = Matrix::Zero();
    for (std::size_t i = 0; i < count_; ++i) {
        slots[i] = (head_ + size - 1 - i) % size;
        const double u = (t_[slots[i]] - t) / span;
        rows[i] = Vector::Zero();
        double v = 1.0;
        for (std::size_t p = 0; p <= order; ++p, v *= u) rows[i](static_cast<Eigen::Index>(p)) = v;
        ata += rows[i] * rows[i].transpose();
    }
    for (std::size_t p = order + 1; p <= kMaxCausalOrder; ++p) ata(static_cast<Eigen::Index>(p), static_cast<Eigen::Index>(p)) = 1.0;
    const Eigen::LDLT<Matrix> solver(ata);
    for (std::size_t j = 0; j < n; ++j) {
        Vector atb = Vector::Zero();
        for (std::size_t i = 0; i < count_; ++i) atb += rows[i] * q_[slots[i] * n + j];
        const Vector c = solver.solve(atb);
        if (c.allFinite()) qd_[j] = c(1) / span, qdd_[j] = 2.0 * c(2) / (span * span);
    }
}

void ArmDeviationFilter::apply(double t, std::span<const double> q, std::span<const double> tau, std::span<double> out) {
    differentiate(t, q);
    regressor_.compute(q, qd_, qdd_, true, y_);
    for (std::size_t j = 0; j < arm_.model.dof(); ++j) out[j] = tau[j] - y_.row(static_cast<Eigen::Index>(j)).dot(arm_.parameters[j]);
}

void ArmDeviationFilter::inertial_torque(std::span<const double> q, std::span<const double> a, std::span<double> out) {
    regressor_.compute(q, still_, a, false, y_);
    for (std::size_t j = 0; j < arm_.model.dof(); ++j) {
        const auto& p = arm_.parameters[j];
        out[j] = y_.row(static_cast<Eigen::Index>(j)).dot(p) - p(static_cast<Eigen::Index>(regressor_.joint_column(j, 3)));
    }
}

namespace {

void choose_causal_estimator(ArmDynamics& arm, std::span<const Recording* const> dry_runs) {
    // Candidates: quadratics and cubics over a few to kMaxCausalSamples samples. The score is the
    // mean over the joints of the causal deviation's RMS relative to the offline one's (each joint
    // counts alike whatever its torque): 1 is as good as looking ahead.
    static constexpr std::array<std::pair<std::size_t, std::size_t>, 10> kCandidates = {
        {{2, 3}, {2, 5}, {2, 7}, {2, 9}, {2, 11}, {3, 5}, {3, 7}, {3, 9}, {3, 11}, {3, 15}}};
    const std::vector<double> offline = dry_run_deviation_rms(arm, dry_runs, false);
    nlohmann::json table = nlohmann::json::array();
    double best = std::numeric_limits<double>::infinity();
    std::size_t best_order = arm.causal_order, best_samples = arm.causal_samples;
    for (const auto& [order, samples] : kCandidates) {
        ArmDynamics candidate = arm;
        candidate.causal_order = order;
        candidate.causal_samples = samples;
        const std::vector<double> causal = dry_run_deviation_rms(candidate, dry_runs, true);
        double score = 0.0;
        std::size_t joints = 0;
        for (std::size_t j = 0; j < causal.size(); ++j) {
            if (offline[j] > 0) score += causal[j] / offline[j], ++joints;
        }
        score = joints > 0 ? score / static_cast<double>(joints) : 1.0;
        table.push_back({{"order", order}, {"samples", samples}, {"rms", causal}, {"relative", score}});
        if (score < best) best = score, best_order = order, best_samples = samples;
    }
    arm.causal_order = best_order;
    arm.causal_samples = best_samples;
    arm.derivation["causal_derivatives"] = {
        {"rule", "the candidate whose deviation of the dry runs comes closest to the offline one (mean over joints of RMS ratios)"},
        {"offline_rms", offline},
        {"candidates", table},
        {"chosen", {{"order", best_order}, {"samples", best_samples}, {"relative", best}}}};
}

}  // namespace

Recording causal_arm_deviation(const ArmDynamics& arm, const Recording& recording) {
    check_arm_recording(arm, recording);
    const std::size_t n = arm.model.dof();
    Recording out = recording;
    ArmDeviationFilter filter(arm);
    std::vector<double> q(n), tau(n), dev(n);
    for (std::size_t i = 0; i < recording.size(); ++i) {
        for (std::size_t j = 0; j < n; ++j) q[j] = recording.q[j][i], tau[j] = recording.tau[j][i];
        filter.apply(recording.t[i], q, tau, dev);
        for (std::size_t j = 0; j < n; ++j) out.tau[j][i] = dev[j];
    }
    return out;
}

nlohmann::json to_json(const ArmDynamics& arm) {
    nlohmann::json parameters = nlohmann::json::array();
    for (const auto& p : arm.parameters) parameters.push_back(std::vector<double>(p.data(), p.data() + p.size()));
    return {{"format", "warpguard-arm-dynamics"},
            {"version", 1},
            {"model", to_json(arm.model)},
            {"gravity", {arm.gravity.x(), arm.gravity.y(), arm.gravity.z()}},
            {"unit", to_string(arm.unit)},
            {"parameters", parameters},
            {"causal_derivatives", {{"samples", arm.causal_samples}, {"order", arm.causal_order}}},
            {"derivation", arm.derivation}};
}

ArmDynamics arm_dynamics_from_json(const nlohmann::json& j) {
    if (!j.is_object() || j.value("format", "") != "warpguard-arm-dynamics") {
        throw std::invalid_argument("not an arm model: expected \"format\": \"warpguard-arm-dynamics\" (written by 'warpguard identify dynamics')");
    }
    for (const char* key : {"model", "gravity", "unit", "parameters"}) {
        if (!j.contains(key)) throw std::invalid_argument(fmt::format("arm model: '{}' is missing", key));
    }
    ArmDynamics arm;
    arm.model = dh_model_from_json(j.at("model"));
    const auto g = j.at("gravity").get<std::vector<double>>();
    if (g.size() != 3) throw std::invalid_argument(fmt::format("arm model: gravity has {} numbers; expected 3", g.size()));
    arm.gravity = Eigen::Vector3d(g[0], g[1], g[2]);
    arm.unit = parse_signal_unit(j.at("unit").get<std::string>());
    const std::size_t n = arm.model.dof();
    const std::size_t cols = DynamicsRegressor(arm.model, arm.gravity).columns();
    const auto& p = j.at("parameters");
    if (!p.is_array() || p.size() != n) {
        throw std::invalid_argument(fmt::format("arm model: 'parameters' needs {} rows (one per joint), got {}", n, p.is_array() ? p.size() : 0));
    }
    for (std::size_t k = 0; k < n; ++k) {
        const auto row = p.at(k).get<std::vector<double>>();
        if (row.size() != cols) {
            throw std::invalid_argument(fmt::format("arm model: joint {} has {} parameters; the model needs {}", k + 1, row.size(), cols));
        }
        for (double v : row) {
            if (!std::isfinite(v)) throw std::invalid_argument(fmt::format("arm model: joint {} has a parameter {}; expected finite numbers", k + 1, v));
        }
        arm.parameters.emplace_back(Eigen::Map<const Eigen::VectorXd>(row.data(), static_cast<Eigen::Index>(row.size())));
    }
    if (j.contains("causal_derivatives")) {
        const auto& c = j.at("causal_derivatives");
        arm.causal_samples = c.value("samples", arm.causal_samples);
        arm.causal_order = c.value("order", arm.causal_order);
        check_causal_estimator(arm.causal_samples, arm.causal_order);
    }
    if (j.contains("derivation")) arm.derivation = j.at("derivation");
    return arm;
}

nlohmann::json to_json(const SpeedModel& model) {
    const auto rounded = [](const std::vector<std::vector<double>>& rows) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& row : rows) {
            nlohmann::json values = nlohmann::json::array();
            for (double v : row) values.push_back(std::stod(fmt::format("{:.6g}", v)));
            out.push_back(std::move(values));
        }
        return out;
    };
    nlohmann::json out = {{"inertial", rounded(model.inertial)}, {"viscous", rounded(model.viscous)}, {"coulomb", model.coulomb},
                          {"derivation", model.derivation}};
    if (!model.unexplained.empty()) out["unexplained"] = rounded(model.unexplained);
    if (!model.uncertain_split.empty()) out["uncertain_split"] = model.uncertain_split;
    if (!model.speed_change.empty()) out["speed_change"] = rounded(model.speed_change);
    if (std::isfinite(model.speed_change_floor)) out["speed_change_floor"] = model.speed_change_floor;
    if (std::isfinite(model.same_speed_tolerance)) out["same_speed_tolerance"] = model.same_speed_tolerance;
    return out;
}

SpeedModel speed_model_from_json(const nlohmann::json& j, std::size_t joints, std::size_t reference_size) {
    SpeedModel out;
    const auto table = [&](const char* key) {
        if (!j.is_object() || !j.contains(key)) throw std::invalid_argument(fmt::format("speed_model has no '{}'", key));
        std::vector<std::vector<double>> rows;
        try {
            rows = j.at(key).get<std::vector<std::vector<double>>>();
        } catch (const nlohmann::json::exception&) {
            throw std::invalid_argument(fmt::format("speed_model.{} must be one array of numbers per joint", key));
        }
        if (rows.size() != joints) throw std::invalid_argument(fmt::format("speed_model.{} has {} joints; expected {}", key, rows.size(), joints));
        for (std::size_t r = 0; r < rows.size(); ++r) {
            if (rows[r].size() != reference_size) {
                throw std::invalid_argument(fmt::format("speed_model.{}[{}] has {} values; the reference has {} samples", key, r, rows[r].size(), reference_size));
            }
            for (double v : rows[r]) {
                if (!std::isfinite(v)) throw std::invalid_argument(fmt::format("speed_model.{}[{}] holds a value that is not finite", key, r));
            }
        }
        return rows;
    };
    out.inertial = table("inertial");
    out.viscous = table("viscous");
    // Profiles from before the unexplained part was kept have none: no model-error band.
    if (j.contains("unexplained")) out.unexplained = table("unexplained");
    // Profiles from before the speed-change part was kept have neither entry: no speed-change band.
    if (j.contains("speed_change")) out.speed_change = table("speed_change");
    if (j.contains("speed_change_floor")) {
        const auto& v = j.at("speed_change_floor");
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
            throw std::invalid_argument(fmt::format("speed_model.speed_change_floor is {}; expected a finite number >= 0 (1/s)", v.dump()));
        }
        out.speed_change_floor = v.get<double>();
    }
    // One value per joint under `key`, of type T (`what` names it in the error).
    const auto per_joint = [&]<typename T>(const char* key, const char* what, T) {
        std::vector<T> values;
        try {
            values = j.at(key).get<std::vector<T>>();
        } catch (const nlohmann::json::exception&) {
            throw std::invalid_argument(fmt::format("speed_model.{} must be an array of {}, one per joint", key, what));
        }
        if (values.size() != joints) {
            throw std::invalid_argument(fmt::format("speed_model.{} has {} values; expected {} (one per joint)", key, values.size(), joints));
        }
        return values;
    };
    // Profiles from before the split's uncertainty was kept: every split trusted.
    if (j.contains("uncertain_split")) out.uncertain_split = per_joint("uncertain_split", "true/false", bool{});
    // Profiles from before the still-joint band was kept have neither entry: no band.
    out.coulomb.assign(joints, 0.0);
    if (j.contains("coulomb")) {
        std::vector<double> values = per_joint("coulomb", "numbers", double{});
        for (std::size_t r = 0; r < values.size(); ++r) {
            if (!(std::isfinite(values[r]) && values[r] >= 0)) {
                throw std::invalid_argument(fmt::format("speed_model.coulomb[{}] is {}; expected a finite value >= 0", r, values[r]));
            }
        }
        out.coulomb = std::move(values);
    }
    if (j.contains("same_speed_tolerance")) {
        const auto& v = j.at("same_speed_tolerance");
        if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>())) {
            throw std::invalid_argument(fmt::format("speed_model.same_speed_tolerance is {}; expected a finite number >= 0", v.dump()));
        }
        out.same_speed_tolerance = v.get<double>();
    }
    if (j.contains("derivation")) out.derivation = j.at("derivation");
    return out;
}

namespace {

// Least squares with some coefficients held >= 0: the residual sum of squares of min |b - Y x|^2
// given the normal equations (N = Y'Y, r = Y'b, bb = b'b) over x with x[c] >= 0 for c in `nonnegative`.
// Every subset of those held at 0 is solved and the best feasible one kept (two columns: four
// solves).
double nonnegative_residual(const Eigen::MatrixXd& normal, const Eigen::VectorXd& rhs, double bb,
                            std::span<const std::size_t> nonnegative) {
    const auto cols = normal.rows();
    double least = std::numeric_limits<double>::infinity();
    for (std::size_t zero = 0; zero < (std::size_t{1} << nonnegative.size()); ++zero) {
        std::vector<Eigen::Index> keep;
        for (Eigen::Index c = 0; c < cols; ++c) {
            bool held = false;
            for (std::size_t i = 0; i < nonnegative.size(); ++i) held |= (zero >> i & 1) && static_cast<Eigen::Index>(nonnegative[i]) == c;
            if (!held) keep.push_back(c);
        }
        const Eigen::MatrixXd reduced = normal(keep, keep);
        const Eigen::VectorXd r = rhs(keep);
        const Eigen::VectorXd x = reduced.ldlt().solve(r);
        bool feasible = true;
        for (std::size_t a = 0; a < keep.size(); ++a) {
            for (const std::size_t c : nonnegative) feasible &= !(keep[a] == static_cast<Eigen::Index>(c) && x(static_cast<Eigen::Index>(a)) < 0);
        }
        if (feasible) least = std::min(least, bb - x.dot(r));
    }
    return least;
}

// One sign per joint is free: the fit absorbs it. It is set by physics: friction opposes the
// motion, so the joint's fitted viscous and Coulomb coefficients must not be negative. Fitted under
// that constraint in either orientation, the wrong one has to give up a friction term the data
// wants, so it leaves more unexplained: true when the other orientation leaves less. Against
// torque twins of the simulated arms (docs/detection.md) it was right on every joint that moves in
// its task, also where the sign of the fitted friction's power was not (the UR5e-like's slow
// assembly moves); a joint that stays still gives both the same residual and keeps the sign it has
// (it gets no speed model either). `kept` and `other` receive the two residuals.
bool other_orientation_fits_better(const DynamicsRegressor& regressor, std::size_t j, const Eigen::MatrixXd& normal, const Eigen::VectorXd& rhs,
                                   double bb, double& kept, double& other) {
    const std::array<std::size_t, 2> friction{regressor.joint_column(j, 1), regressor.joint_column(j, 2)};
    kept = nonnegative_residual(normal, rhs, bb, friction);
    other = nonnegative_residual(normal, -rhs, bb, friction);
    return other < kept;
}

// The joints together. A joint's own copy of the rigid-body parameters can fit a sign pattern that
// is wrong over whole moves (inertia, gravity and friction trade along one repeated path): the
// VP-6242-like's joint 3 as a current, rising against gravity, came out inverted over stretches of
// every cycle, 20 % of its current, with a residual as low as the torque's own sign gives. One
// parameter set for all joints with a factor per joint (the model the speed model fits to a
// current, solve_parameters) cannot: a link's inertia and mass show in every joint below it. So
// runs of equal sign are flipped where that shared fit explains the currents better: the factors,
// the weights and the parameters' directions held as fitted, each candidate's residual is
// bb - r' P r with P the truncated inverse and r the right-hand side one flip changes by a known
// vector; the best flip of all joints' runs is taken, again until none lowers the residual by 1e-9
// of it, and the whole fit (factors included) redone for another round, at most kSharedRounds. A
// joint its own fit explains poorly (under kOwnFitShared: a process torque, a wrist near its
// noise) keeps its own copy and is left as it is, decided once on the first round's signs (decided
// again each round, the VP-6242-like's joint 3 left the set after its first flips and stayed wrong
// on 16.7 % of its current); so is a joint that does not move; a run over the whole reference is a
// joint's free sign, not searched; with fewer than two joints in the set there is no search (one
// joint alone is its own fit, whose least residual is not the torque's sign). Against torque twins
// of seven arm-task pairs and three recordings each, and the held-out check's reference
// (docs/detection.md): the VP-6242-like's joint 3 from 19.6-20.4 % of its current wrong to
// 2.2-4.1 %, the LR Mate-like's joint 1 3.9-5.8 -> 2.5-2.7 %, no joint worse by more than 0.2 % of
// its current.
constexpr int kSharedRounds = 5;
constexpr int kSharedFlips = 400;  // per round

struct SharedSearch {
    nlohmann::json rounds = nlohmann::json::array();  // per round: joints in the fit, residuals, flipped runs
    std::vector<std::size_t> runs_flipped;            // per joint
    std::vector<bool> in_fit;                         // per joint: in the first round's shared set
    std::vector<bool> still;                          // per joint: does not move (drop_still_joints)
};

SharedSearch flip_runs_by_shared_fit(const DynamicsRegressor& regressor, const std::vector<Eigen::MatrixXd>& rows,
                                     const std::vector<Eigen::VectorXd>& magnitude, std::vector<std::vector<std::int8_t>>& sign) {
    const std::size_t n = rows.size(), size = static_cast<std::size_t>(magnitude[0].size());
    const auto c = rows[0].cols();
    SharedSearch out;
    out.runs_flipped.assign(n, 0);
    out.in_fit.assign(n, false);
    std::vector<Eigen::MatrixXd> gram(n);  // Y'Y: the same whatever the signs
    for (std::size_t j = 0; j < n; ++j) gram[j] = rows[j].transpose() * rows[j];
    std::vector<Eigen::VectorXd> b(n);
    std::vector<std::size_t> kept_out;
    for (int round = 0; round < kSharedRounds; ++round) {
        std::vector<NormalEquations> ne(n);
        for (std::size_t j = 0; j < n; ++j) {
            b[j] = magnitude[j];
            for (std::size_t k = 0; k < size; ++k) b[j](static_cast<Eigen::Index>(k)) *= sign[j][k];
            ne[j].ata = gram[j];
            ne[j].atb = rows[j].transpose() * b[j];
            ne[j].bb = b[j].squaredNorm();
            ne[j].b_sum = b[j].sum();
            ne[j].rows = size;
        }
        std::vector<double> rms_speed;
        const std::vector<bool> still = drop_still_joints(regressor, ne, rms_speed);
        if (round == 0) out.still = still;
        // (SignalUnit::A: a factor per joint, the poorly explained joints kept out - those of the
        // first round's signs: a joint whose flips its own copy fits less well stays in the set)
        const FittedParameters fitted = solve_parameters(ne, still, SignalUnit::A, ParameterSharing::ByUnit, round == 0 ? nullptr : &kept_out);
        if (round == 0) kept_out = fitted.own_copy;
        // With the factors f and weights w held: A = sum w f^2 Y'Y, r = sum w f Y'b, and the
        // residual of the best parameters bb - r' P r.
        Eigen::MatrixXd a = Eigen::MatrixXd::Zero(c, c);
        Eigen::VectorXd r = Eigen::VectorXd::Zero(c);
        double bb = 0;
        std::vector<double> wf(n, 0.0);
        for (std::size_t j = 0; j < n; ++j) {
            const double w = fitted.weights[j], f = fitted.scales[j];
            if (!(w > 0) || still[j]) continue;
            wf[j] = w * f;
            a += w * f * f * ne[j].ata;
            r += w * f * ne[j].atb;
            bb += w * ne[j].bb;
        }
        Eigen::VectorXd scale(c);
        for (Eigen::Index i = 0; i < c; ++i) scale(i) = a(i, i) > 0 ? 1.0 / std::sqrt(a(i, i)) : 0.0;
        const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(scale.asDiagonal() * a * scale.asDiagonal());
        const double top = eig.eigenvalues().maxCoeff();
        Eigen::MatrixXd p = Eigen::MatrixXd::Zero(c, c);
        for (Eigen::Index i = 0; i < c; ++i) {
            if (!(eig.eigenvalues()(i) > kRelativeEigenvalue * top)) continue;
            const Eigen::VectorXd v = scale.asDiagonal() * eig.eigenvectors().col(i);
            p += v * v.transpose() / eig.eigenvalues()(i);
        }
        const auto residual = [&](const Eigen::VectorXd& rhs) { return bb - rhs.dot(p * rhs); };
        const auto members = static_cast<std::size_t>(std::count_if(wf.begin(), wf.end(), [](double v) { return v != 0.0; }));
        const double before = residual(r);
        double current = before;
        nlohmann::json flips = nlohmann::json::array();
        for (int step = 0; members >= 2 && step < kSharedFlips; ++step) {
            double best = current;
            std::size_t best_joint = n, first = 0, end = 0;
            Eigen::VectorXd best_r;
            for (std::size_t j = 0; j < n; ++j) {
                if (wf[j] == 0.0) continue;
                for (std::size_t from = 0; from < size;) {
                    std::size_t to = from;
                    while (to < size && sign[j][to] == sign[j][from]) ++to;
                    if (to - from == size) break;  // the joint's free sign
                    const auto len = static_cast<Eigen::Index>(to - from);
                    const Eigen::VectorXd trial = r - 2.0 * wf[j] * (rows[j].middleRows(static_cast<Eigen::Index>(from), len).transpose() *
                                                                     b[j].segment(static_cast<Eigen::Index>(from), len));
                    const double value = residual(trial);
                    if (value < best) best = value, best_joint = j, first = from, end = to, best_r = trial;
                    from = to;
                }
            }
            if (best_joint == n || current - best < 1e-9 * current) break;
            for (std::size_t k = first; k < end; ++k) {
                sign[best_joint][k] = static_cast<std::int8_t>(-sign[best_joint][k]);
                b[best_joint](static_cast<Eigen::Index>(k)) = -b[best_joint](static_cast<Eigen::Index>(k));
            }
            r = best_r;
            current = best;
            ++out.runs_flipped[best_joint];
            flips.push_back({{"joint", best_joint + 1}, {"samples", {first, end - 1}}});
        }
        const bool done = flips.empty();
        nlohmann::json joints = nlohmann::json::array();
        for (std::size_t j = 0; j < n; ++j) {
            if (wf[j] == 0.0) continue;
            joints.push_back(j + 1);
            if (round == 0) out.in_fit[j] = true;
        }
        out.rounds.push_back({{"joints", std::move(joints)}, {"residual", before}, {"after", current}, {"flipped_runs", std::move(flips)}});
        if (done) break;
    }
    return out;
}

}  // namespace

CurrentSign rebuild_current_sign(const DhModel& model, const Reference& reference, const Eigen::Vector3d& gravity) {
    const std::size_t n = model.dof(), size = reference.size();
    if (reference.tau.size() != n || reference.q.size() != n) {
        throw std::invalid_argument(fmt::format("the kinematic model has {} joints; the reference has {}", n, reference.tau.size()));
    }
    const DynamicsRegressor regressor(model, gravity);
    const std::size_t cols = regressor.columns();
    // A part the program declares it carries (column `payload`, kg) is a load on the last link that
    // comes and goes: the last link's mass and first moments times the declared mass are
    // kLoadColumns more columns (a load of the declared mass at a fitted centre).
    constexpr std::size_t kLoadColumns = 4;
    const bool carries = std::any_of(reference.payload.begin(), reference.payload.end(), [](double kg) { return kg > 0.0; });
    const std::size_t needed = 2 * (cols + (carries ? kLoadColumns : 0));
    if (size < needed) {
        throw std::invalid_argument(fmt::format("the reference has {} samples; rebuilding a current's sign needs at least {}", size, needed));
    }
    std::vector<std::vector<double>> qd(n, std::vector<double>(size)), qdd(n, std::vector<double>(size));
    for (std::size_t j = 0; j < n; ++j) smooth_derivatives(reference.t, reference.q[j], kDerivativeHalfWidth, qd[j], qdd[j]);
    // The regressor rows of every joint at every reference sample, and the load columns.
    std::vector<Eigen::MatrixXd> rows(n, Eigen::MatrixXd(static_cast<Eigen::Index>(size), static_cast<Eigen::Index>(cols)));
    std::vector<Eigen::MatrixXd> load(carries ? n : 0, Eigen::MatrixXd(static_cast<Eigen::Index>(size), static_cast<Eigen::Index>(kLoadColumns)));
    {
        Eigen::MatrixXd y(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(cols));
        std::vector<double> q(n), v(n), a(n);
        for (std::size_t k = 0; k < size; ++k) {
            for (std::size_t j = 0; j < n; ++j) q[j] = reference.q[j][k], v[j] = qd[j][k], a[j] = qdd[j][k];
            regressor.compute(q, v, a, true, y);
            const auto row = static_cast<Eigen::Index>(k);
            for (std::size_t j = 0; j < n; ++j) rows[j].row(row) = y.row(static_cast<Eigen::Index>(j));
            if (!carries) continue;
            const double kg = std::max(0.0, reference.payload[k]);
            for (std::size_t j = 0; j < n; ++j) {
                for (std::size_t p = 0; p < kLoadColumns; ++p) {
                    load[j](row, static_cast<Eigen::Index>(p)) = kg * y(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(regressor.link_column(n - 1, p)));
                }
            }
        }
    }
    constexpr double kClear = 0.05;   // a fitted value counts where it is clear of 5 % of the peak
    constexpr int kMaxIterations = 100;
    constexpr double kCoulombSteps[] = {0.0, 0.1, 0.3, 1.0, 3.0, 10.0};  // relative to the peak acceleration
    constexpr double kViscousShares[] = {0.3, 1.0, 3.0};                   // velocity over its peak, likewise
    CurrentSign out;
    out.sign.assign(n, std::vector<std::int8_t>(size, 1));
    out.derivation = {{"method", "rigid-body regressor fitted to sign * |signal|, signs from the fit, alternated; least residual of the starts "
                                 "(a joint they all leave at one sign: also one start per regressor column); "
                                 "then runs of equal sign flipped where one parameter set for all joints explains them better; "
                                 "a joint left out of that set refitted with the declared part as a load"},
                      {"clear_of_peak", kClear}};
    std::vector<Eigen::VectorXd> magnitudes(n);
    for (std::size_t j = 0; j < n; ++j) {
        magnitudes[j].resize(static_cast<Eigen::Index>(size));
        for (std::size_t k = 0; k < size; ++k) magnitudes[j](static_cast<Eigen::Index>(k)) = std::abs(reference.tau[j][k]);
    }
    // One joint's own fit: the sign of its current from the regressor rows `y` alone.
    struct OwnFit {
        std::vector<std::int8_t> sign;
        Eigen::MatrixXd normal;  // y'y with its ridge
        double residual_share = 0;
        nlohmann::json derivation;
    };
    const auto own_fit = [&](std::size_t j, const Eigen::MatrixXd& y) {
        const Eigen::VectorXd& magnitude = magnitudes[j];
        double peak = 0, peak_acc = 0, peak_vel = 0;
        for (std::size_t k = 0; k < size; ++k) {
            peak = std::max(peak, magnitude(static_cast<Eigen::Index>(k)));
            peak_acc = std::max(peak_acc, std::abs(qdd[j][k]));
            peak_vel = std::max(peak_vel, std::abs(qd[j][k]));
        }
        OwnFit fitted;
        // Ridge: the regressor's columns are not all identifiable from one joint's signal.
        Eigen::MatrixXd& normal = fitted.normal;
        normal = y.transpose() * y;
        normal.diagonal().array() += 1e-6 * normal.diagonal().maxCoeff() + 1e-12;
        const Eigen::LDLT<Eigen::MatrixXd> solver(normal);
        const double clear = kClear * peak;
        const auto refine = [&](Eigen::VectorXd& sign, int& iterations) {
            Eigen::VectorXd fit;
            iterations = 0;
            for (bool changed = true; changed && iterations < kMaxIterations; ++iterations) {
                fit = y * solver.solve(y.transpose() * sign.cwiseProduct(magnitude));
                changed = false;
                for (Eigen::Index k = 0; k < fit.size(); ++k) {
                    if (std::abs(fit(k)) <= clear) continue;
                    const double s = fit(k) > 0 ? 1.0 : -1.0;
                    if (s != sign(k)) sign(k) = s, changed = true;
                }
            }
            return (sign.cwiseProduct(magnitude) - fit).squaredNorm();
        };
        double best = std::numeric_limits<double>::infinity();
        std::string best_start;
        int best_iterations = 0;
        Eigen::VectorXd best_sign;
        const auto start = [&](const std::string& name, auto&& guess) {
            Eigen::VectorXd sign(static_cast<Eigen::Index>(size));
            for (std::size_t k = 0; k < size; ++k) sign(static_cast<Eigen::Index>(k)) = guess(k) >= 0 ? 1.0 : -1.0;
            int iterations = 0;
            const double residual = refine(sign, iterations);
            if (residual < best) best = residual, best_start = name, best_iterations = iterations, best_sign = sign;
        };
        // The Coulomb step: the sign of a velocity clearly off rest (a tenth of the smoothing velocity).
        const auto step = [&](std::size_t k) {
            constexpr double v = 0.1 * kCoulombSmoothing;
            return qd[j][k] > v ? 1.0 : qd[j][k] < -v ? -1.0 : 0.0;
        };
        start("all +1", [](std::size_t) { return 1.0; });
        start("velocity", [&](std::size_t k) { return qd[j][k]; });
        // With a viscous share too: a joint that decelerates against its friction reads a torque
        // whose sign is neither its acceleration's nor its velocity's (the IRB120-like's joint 1 as
        // a current: from these starts its sign error 5.7 -> 2.3 % of the current, and its 80 %
        // override run 464 -> 0 false stops in 100 cycles; docs/detection.md).
        for (const double c : kCoulombSteps) {
            start(fmt::format("acceleration + {} x Coulomb step", c),
                  [&](std::size_t k) { return qdd[j][k] / std::max(peak_acc, 1e-12) + c * step(k); });
            for (const double v : kViscousShares) {
                start(fmt::format("acceleration + {} x Coulomb step + {} x velocity", c, v), [&](std::size_t k) {
                    return qdd[j][k] / std::max(peak_acc, 1e-12) + c * step(k) + v * qd[j][k] / std::max(peak_vel, 1e-12);
                });
            }
        }
        // A joint that every start above left at one sign throughout either has a torque of one
        // sign (a shoulder holding the arm up) or one whose sign its own motion does not show: the
        // 7-axis arm's joint 3, turning the upper arm about its own axis, carries mostly what the
        // links beyond it weigh and do, and every start ended at all +1 (the torque twin's sign is -
        // on 76 % of the current; residual share 0.053 against 0.031 with the twin's sign; 10
        // false stops in 100 cycles at 80 % override). Such a joint gets starts from each
        // regressor column alone too: the sign of one parameter's own torque (a link's weight at
        // its frame, a first moment or inertia, a joint's friction; the declared part's columns).
        // The least residual decides as before (a shoulder's one sign stayed: on the arms
        // measured no column fitted better). Only here: on joints the own-motion starts gave a
        // pattern, these starts found lower residuals that were further from the torque's sign
        // (docs/detection.md, *Starts from single parameters*).
        if ((best_sign.array() == best_sign(0)).all()) {
            const double largest_column = y.colwise().squaredNorm().maxCoeff();
            for (Eigen::Index c = 0; c < y.cols(); ++c) {
                if (y.col(c).squaredNorm() <= 1e-12 * largest_column) continue;  // a link before the joint: no torque on it
                const auto column = static_cast<std::size_t>(c);  // past the regressor's: the declared part's
                start(column < cols ? regressor.column_name(column) : fmt::format("declared part column {}", column - cols + 1),
                      [&](std::size_t k) { return y(static_cast<Eigen::Index>(k), c); });
            }
        }
        // Where the fit is within the clear band the sign so far is the start's guess, and the fit,
        // fitted to it, follows it there. So those samples are left out of a last fit (the physics
        // of the clear ones carries across the gaps, a zero crossing included), its signs taken for
        // every sample and alternated with it until no sign changes (the left-out set fixed, so each
        // step lowers the same sum of squares). Against torque twins of seven arm-task pairs
        // (docs/detection.md) this halved the sign error of the LR Mate-like's joint 1 and of the
        // KR6-like's joint 5, cut the LR Mate-like's joint 2's five-fold, and made no joint worse by
        // more than 4 % of its signal.
        Eigen::VectorXd fit = y * solver.solve(y.transpose() * best_sign.cwiseProduct(magnitude));
        Eigen::VectorXd weight(static_cast<Eigen::Index>(size));
        for (Eigen::Index k = 0; k < weight.size(); ++k) weight(k) = std::abs(fit(k)) > clear ? 1.0 : 0.0;
        Eigen::MatrixXd clear_normal = y.transpose() * weight.asDiagonal() * y;
        clear_normal.diagonal().array() += 1e-6 * clear_normal.diagonal().maxCoeff() + 1e-12;
        const Eigen::LDLT<Eigen::MatrixXd> clear_solver(clear_normal);
        int gap_iterations = 0;
        for (bool changed = true; changed && gap_iterations < kMaxIterations; ++gap_iterations) {
            fit = y * clear_solver.solve(y.transpose() * weight.cwiseProduct(best_sign.cwiseProduct(magnitude)));
            changed = false;
            for (Eigen::Index k = 0; k < fit.size(); ++k) {
                const double s = fit(k) >= 0 ? 1.0 : -1.0;
                if (s != best_sign(k)) best_sign(k) = s, changed = true;
            }
        }
        // Whole segments flipped where that lowers the residual. A sign changes only where the
        // current passes through zero, so between two dips of |I| into the clear band the sign is
        // one: each such segment is flipped at a time, the one that lowers the fit's residual most,
        // until none does. The alternation above can settle on a segment of the wrong sign when the
        // regressor can shape a bump of either sign (the held-out GP8-like as a current: its
        // shoulder's move out of home, where acceleration outweighs a small gravity torque, kept
        // the rest's sign; residual share 0.0033 against 0.00072 with the torque twin's sign).
        int segment_flips = 0;
        double after_flips = 0;  // the fit's residual after them (ridge left out, as the shared search)
        {
            std::vector<std::pair<std::size_t, std::size_t>> segments;  // [first, end) with |I| over the band
            for (std::size_t k = 0; k < size;) {
                if (magnitude(static_cast<Eigen::Index>(k)) <= clear) {
                    ++k;
                    continue;
                }
                std::size_t e = k;
                while (e < size && magnitude(static_cast<Eigen::Index>(e)) > clear) ++e;
                segments.emplace_back(k, e);
                k = e;
            }
            const Eigen::MatrixXd inverse = solver.solve(Eigen::MatrixXd::Identity(normal.rows(), normal.cols()));
            Eigen::VectorXd b = best_sign.cwiseProduct(magnitude);
            const double bb = b.squaredNorm();
            Eigen::VectorXd r = y.transpose() * b;
            double current = bb - r.dot(inverse * r);
            std::vector<Eigen::VectorXd> part(segments.size());
            for (std::size_t g = 0; g < segments.size(); ++g) {
                const auto [first, end] = segments[g];
                const auto len = static_cast<Eigen::Index>(end - first);
                part[g] = y.middleRows(static_cast<Eigen::Index>(first), len).transpose() * b.segment(static_cast<Eigen::Index>(first), len);
            }
            constexpr int kMaxSegmentFlips = 200;
            while (segment_flips < kMaxSegmentFlips) {
                double best_value = current - 1e-9 * bb;
                std::size_t best_segment = segments.size();
                for (std::size_t g = 0; g < segments.size(); ++g) {
                    const Eigen::VectorXd trial = r - 2.0 * part[g];
                    const double value = bb - trial.dot(inverse * trial);
                    if (value < best_value) best_value = value, best_segment = g;
                }
                if (best_segment == segments.size()) break;
                const auto [first, end] = segments[best_segment];
                for (std::size_t k = first; k < end; ++k) {
                    best_sign(static_cast<Eigen::Index>(k)) = -best_sign(static_cast<Eigen::Index>(k));
                    b(static_cast<Eigen::Index>(k)) = -b(static_cast<Eigen::Index>(k));
                }
                r -= 2.0 * part[best_segment];
                part[best_segment] = -part[best_segment];
                current = best_value;
                ++segment_flips;
            }
            after_flips = current;
        }
        // The joint's free sign (other_orientation_fits_better).
        double kept = 0, flipped = 0;
        const bool flip = other_orientation_fits_better(regressor, j, normal, y.transpose() * best_sign.cwiseProduct(magnitude),
                                                        magnitude.squaredNorm(), kept, flipped);
        fitted.sign.resize(size);
        for (std::size_t k = 0; k < size; ++k) fitted.sign[k] = (best_sign(static_cast<Eigen::Index>(k)) > 0) != flip ? 1 : -1;
        const double total = magnitude.squaredNorm();
        fitted.residual_share = total > 0 ? best / total : 0.0;
        fitted.derivation = {{"joint", j + 1},
                             {"start", best_start},
                             {"iterations", best_iterations},
                             {"gap_iterations", gap_iterations},
                             {"segment_flips", segment_flips},
                             {"residual_share_after_segment_flips", total > 0 ? std::max(0.0, after_flips) / total : 0.0},
                             {"residual_share", fitted.residual_share},
                             {"friction_residual_share", total > 0 ? std::min(kept, flipped) / total : 0.0},
                             {"other_orientation_residual_share", total > 0 ? std::max(kept, flipped) / total : 0.0},
                             {"flipped", flip}};
        return fitted;
    };
    std::vector<Eigen::MatrixXd> normals(n);
    std::vector<double> own_residual(n);
    for (std::size_t j = 0; j < n; ++j) {
        OwnFit fitted = own_fit(j, rows[j]);
        out.sign[j] = std::move(fitted.sign);
        normals[j] = std::move(fitted.normal);
        own_residual[j] = fitted.residual_share;
        out.derivation["joints"].push_back(std::move(fitted.derivation));
    }
    // The joints together (flip_runs_by_shared_fit), then the free sign of each joint with a flipped
    // run again.
    SharedSearch search = flip_runs_by_shared_fit(regressor, rows, magnitudes, out.sign);
    for (std::size_t j = 0; j < n; ++j) {
        bool flip = false;
        if (search.runs_flipped[j] > 0) {
            Eigen::VectorXd signed_magnitude = magnitudes[j];
            for (std::size_t k = 0; k < size; ++k) signed_magnitude(static_cast<Eigen::Index>(k)) *= out.sign[j][k];
            double kept = 0, other = 0;
            flip = other_orientation_fits_better(regressor, j, normals[j], rows[j].transpose() * signed_magnitude, magnitudes[j].squaredNorm(),
                                                 kept, other);
            if (flip) {
                for (auto& s : out.sign[j]) s = static_cast<std::int8_t>(-s);
            }
        }
        out.derivation["joints"][j]["in_shared_fit"] = search.in_fit[j];
        out.derivation["joints"][j]["runs_flipped_by_shared_fit"] = search.runs_flipped[j];
        out.derivation["joints"][j]["flipped_after_shared_fit"] = flip;
    }
    // A joint the shared set leaves out that moves, where the program declares the part it carries:
    // its own fit again with the load columns, its signs taken where the load explains at least
    // kLoadExplains of what the fit without it left. Without a load that comes and goes with the
    // part no parameter follows it on and off, and a joint the part's swing dominates fits one sign
    // throughout: the IRB 1600-like's wrist joint 5 as a current (palletizing a 4 kg box) was
    // wrong on 36 % of its current, 1.6 % with the load (its own fit's residual share 0.21 -> 0.06),
    // and at 80 % override stopped 100 times in 100 cycles, 0 with it (docs/detection.md). Only for
    // a joint left out: given to every joint's own fit the load columns let the VP-6242-like's
    // joint 3, in the shared set, find an inverted pattern before the shared search (wrong on 4.1 ->
    // 20.4 % of its current). The share taken is a documented default: a quarter of what was left
    // unexplained, where the elbows and wrists the part dominates measured 69-100 % and the LR
    // Mate-like's wrists, whose 0.3 kg part is a detail of their signal, 3.5-4 % (taken,
    // their signs came out slightly worse: 26.7 -> 26.9 % and 18.9 -> 20.3 % wrong).
    constexpr double kLoadExplains = 0.25;
    for (std::size_t j = 0; carries && j < n; ++j) {
        if (search.in_fit[j] || search.still[j]) continue;
        Eigen::MatrixXd y(static_cast<Eigen::Index>(size), static_cast<Eigen::Index>(cols + kLoadColumns));
        y << rows[j], load[j];
        OwnFit fitted = own_fit(j, y);
        const bool taken = fitted.residual_share <= (1.0 - kLoadExplains) * own_residual[j];
        fitted.derivation["taken"] = taken;
        out.derivation["joints"][j]["with_declared_load"] = std::move(fitted.derivation);
        if (taken) out.sign[j] = std::move(fitted.sign);
    }
    out.derivation["shared_fit_rounds"] = std::move(search.rounds);
    return out;
}

}  // namespace warpguard
