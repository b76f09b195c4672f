#include "warpguard/model_residual.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace warpguard {

namespace {

// The time step along q' over which J' q' is taken as a difference of the Jacobian, s.
constexpr double kJacobianStep = 1e-3;

void check_fits(const ArmDynamics& arm, const std::optional<PayloadModel>& payload, const Recording& rec,
                const std::string& source) {
    const std::size_t n = arm.model.dof();
    if (rec.joints() != n) {
        throw std::invalid_argument(fmt::format("{}: has {} joints; the arm model has {}", source, rec.joints(), n));
    }
    if (rec.info().signal != SignalKind::Torque || rec.info().unit != arm.unit) {
        throw std::invalid_argument(fmt::format("{}: signal {} in {}; the arm model expects a torque in {}", source,
                                                to_string(rec.info().signal), to_string(rec.info().unit), to_string(arm.unit)));
    }
    if (payload && !rec.declares_payload()) {
        throw std::invalid_argument(fmt::format("{}: declares no payload; the payload model takes off the payload each sample "
                                                "declares",
                                                source));
    }
}

}  // namespace

ResidualChecker::ResidualChecker(ResidualLimits limits)
    : limits_(std::move(limits)), filter_(limits_.arm) {
    const std::size_t n = limits_.arm.model.dof();
    if (limits_.joints.size() != n) {
        throw std::invalid_argument(fmt::format("residual limits: {} joint bands for an arm model of {} joints",
                                                limits_.joints.size(), n));
    }
    if (limits_.payload) {
        if (limits_.payload->beyond_reference_part) {
            throw std::invalid_argument("residual limits: the payload model takes off only the part beyond the reference's "
                                        "(KA-mDTW or --keep-payload); the residual needs the whole declared payload's torque");
        }
        if (limits_.payload->model.dof() != n || limits_.payload->signal_per_nm.size() != n) {
            throw std::invalid_argument(fmt::format("residual limits: the payload model has {} joints; the arm model {}",
                                                    limits_.payload->model.dof(), n));
        }
    }
    residual_.assign(n, 0.0);
    outside_.assign(n, 0);
    frames_.resize(n + 2);
    columns_.resize(n);
    moved_columns_.resize(n);
    moved_q_.assign(n, 0.0);
}

void ResidualChecker::check_recording(const Recording& recording, const std::string& source) const {
    check_fits(limits_.arm, limits_.payload, recording, source);
}

void ResidualChecker::reset() {
    filter_.reset();
    std::fill(outside_.begin(), outside_.end(), 0);
}

bool ResidualChecker::compute(const Sample& sample) {
    const std::size_t n = residual_.size();
    filter_.apply(sample.t, sample.q, sample.tau, residual_);
    if (limits_.payload && std::isfinite(sample.payload) && sample.payload > 0.0) {
        const PayloadModel& pm = *limits_.payload;
        const auto qd = filter_.velocity();
        const auto qdd = filter_.acceleration();
        tool_point_jacobian(pm.model, sample.q, frames_, columns_);
        for (std::size_t j = 0; j < n; ++j) moved_q_[j] = sample.q[j] + kJacobianStep * qd[j];
        tool_point_jacobian(pm.model, moved_q_, frames_, moved_columns_);
        Eigen::Vector3d accel = Eigen::Vector3d::Zero();
        for (std::size_t j = 0; j < n; ++j) {
            accel += columns_[j] * qdd[j] + (moved_columns_[j] - columns_[j]) * (qd[j] / kJacobianStep);
        }
        const Eigen::Vector3d force = sample.payload * (accel - pm.gravity);
        for (std::size_t j = 0; j < n; ++j) residual_[j] -= pm.signal_per_nm[j] * columns_[j].dot(force);
    }
    return filter_.samples() >= limits_.arm.causal_samples;
}

Decision ResidualChecker::update(const Sample& sample) {
    const std::size_t n = residual_.size();
    Decision decision;
    const auto fault = [&](std::size_t joint, double value, double expected) {
        return Decision{Verdict::Stop, joint, Rule::Fault, value, expected, 0, 0, static_cast<std::uint8_t>(1u << static_cast<int>(Rule::Fault))};
    };
    if (sample.tau.size() != n || sample.q.size() != n) return fault(0, static_cast<double>(sample.tau.size()), static_cast<double>(n));
    for (std::size_t j = 0; j < n; ++j) {
        if (!std::isfinite(sample.tau[j])) return fault(j + 1, sample.tau[j], 0.0);
        if (!std::isfinite(sample.q[j])) return fault(j + 1, sample.q[j], 0.0);
    }
    if (!compute(sample)) {
        std::fill(outside_.begin(), outside_.end(), 0);  // a gap breaks a run of samples outside
        return decision;
    }
    double worst = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        const ResidualBand& band = limits_.joints[j];
        const double r = residual_[j];
        const double excess = std::max(r - band.upper, band.lower - r);
        if (!(excess > 0.0)) {
            outside_[j] = 0;
            continue;
        }
        ++outside_[j];
        decision.fired = static_cast<std::uint8_t>(decision.fired | (1u << static_cast<int>(Rule::ResidualLimit)));
        if (outside_[j] < limits_.persistence) continue;
        // The joint furthest over its band, in units of the band's half-width, decides.
        const double half = 0.5 * (band.upper - band.lower);
        const double ratio = half > 0.0 ? excess / half : INFINITY;
        if (decision.verdict == Verdict::Continue || ratio > worst) {
            worst = ratio;
            const std::uint8_t fired = decision.fired;
            decision = Decision{Verdict::Stop, j + 1, Rule::ResidualLimit, r, r > band.upper ? band.upper : band.lower, 0, 0, fired};
        }
    }
    return decision;
}

ResidualLimits derive_residual_limits(const ArmDynamics& arm, const std::optional<PayloadModel>& payload,
                                      const Recording& calibration, const std::string& source, double widening,
                                      std::size_t persistence) {
    check_fits(arm, payload, calibration, source);
    if (!(widening >= 0.0) || !std::isfinite(widening)) {
        throw std::invalid_argument(fmt::format("residual limits: widening {} (expected a share >= 0, e.g. 0.1)", widening));
    }
    if (persistence == 0) throw std::invalid_argument("residual limits: persistence 0 (expected at least 1 sample)");
    const std::size_t n = arm.model.dof();
    ResidualLimits limits;
    limits.robot = calibration.info().robot;
    limits.source = source;
    limits.unit = arm.unit;
    limits.arm = arm;
    limits.payload = payload;
    limits.widening = widening;
    limits.persistence = persistence;
    limits.joints.assign(n, ResidualBand{INFINITY, -INFINITY, 0.0, 0.0});
    ResidualChecker checker(limits);  // throws for a payload model it cannot use
    std::vector<double> tau(n), q(n);
    for (std::size_t i = 0; i < calibration.size(); ++i) {
        if (!checker.compute(calibration.sample(i, tau, q))) continue;
        ++limits.samples;
        for (std::size_t j = 0; j < n; ++j) {
            auto& band = limits.joints[j];
            band.least = std::min(band.least, checker.residual()[j]);
            band.largest = std::max(band.largest, checker.residual()[j]);
        }
    }
    if (limits.samples == 0) {
        throw std::invalid_argument(fmt::format("{}: {} samples, none past the estimator's span of {} (a residual band needs a "
                                                "collision-free recording of the task)",
                                                source, calibration.size(), arm.causal_samples));
    }
    for (auto& band : limits.joints) {
        const double centre = 0.5 * (band.least + band.largest), half = 0.5 * (band.largest - band.least) * (1.0 + widening);
        band.lower = centre - half;
        band.upper = centre + half;
    }
    return limits;
}

nlohmann::json to_json(const ResidualLimits& limits) {
    nlohmann::json joints = nlohmann::json::array();
    for (std::size_t j = 0; j < limits.joints.size(); ++j) {
        const auto& b = limits.joints[j];
        joints.push_back({{"joint", j + 1}, {"least", b.least}, {"largest", b.largest}, {"lower", b.lower}, {"upper", b.upper}});
    }
    nlohmann::json out{{"format", "warpguard-residual-limits"},
                       {"version", 1},
                       {"robot", limits.robot},
                       {"source", limits.source},
                       {"unit", to_string(limits.unit)},
                       {"widening", limits.widening},
                       {"persistence", limits.persistence},
                       {"samples", limits.samples},
                       {"joints", joints},
                       {"arm_model", to_json(limits.arm)}};
    out["payload_model"] = limits.payload ? to_json(*limits.payload) : nlohmann::json(nullptr);
    return out;
}

ResidualLimits residual_limits_from_json(const nlohmann::json& j) {
    if (j.value("format", std::string()) != "warpguard-residual-limits") {
        throw std::invalid_argument(fmt::format("residual limits: format '{}' (expected 'warpguard-residual-limits', written by "
                                                "'warpguard residual')",
                                                j.value("format", std::string())));
    }
    ResidualLimits limits;
    limits.robot = j.value("robot", std::string("unknown"));
    limits.source = j.value("source", std::string());
    limits.arm = arm_dynamics_from_json(j.at("arm_model"));
    limits.unit = limits.arm.unit;
    if (j.contains("payload_model") && !j.at("payload_model").is_null()) {
        limits.payload = payload_model_from_json(j.at("payload_model"), limits.arm.model.dof());
    }
    limits.widening = j.at("widening").get<double>();
    limits.persistence = j.at("persistence").get<std::size_t>();
    limits.samples = j.value("samples", std::size_t{0});
    for (const auto& b : j.at("joints")) {
        limits.joints.push_back({b.at("least").get<double>(), b.at("largest").get<double>(), b.at("lower").get<double>(),
                                 b.at("upper").get<double>()});
    }
    if (limits.persistence == 0) throw std::invalid_argument("residual limits: persistence 0 (expected at least 1 sample)");
    return limits;
}

}  // namespace warpguard
