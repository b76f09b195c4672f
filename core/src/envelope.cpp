#include "warpguard/envelope.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "warpguard/evaluation.hpp"
#include "warpguard/mdtw.hpp"

namespace warpguard {

namespace {

std::vector<double> resample(std::span<const double> x, std::size_t n) {
    std::vector<double> out(n);
    if (x.size() == 1 || n == 1) {
        std::fill(out.begin(), out.end(), x[0]);
        return out;
    }
    const double scale = static_cast<double>(x.size() - 1) / static_cast<double>(n - 1);
    for (std::size_t k = 0; k < n; ++k) {
        const double pos = static_cast<double>(k) * scale;
        const auto lo = std::min(static_cast<std::size_t>(pos), x.size() - 2);
        const double frac = pos - static_cast<double>(lo);
        out[k] = x[lo] + (x[lo + 1] - x[lo]) * frac;
    }
    return out;
}

double robust_noise_sigma(std::span<const double> x) {
    // Third differences cancel signal up to quadratic; for white noise Var(d3) = 20 sigma^2. The
    // median absolute value (x 1.4826 for a normal distribution) ignores the fast edges.
    if (x.size() < 4) return 0.0;
    std::vector<double> d3;
    d3.reserve(x.size() - 3);
    for (std::size_t k = 3; k < x.size(); ++k) d3.push_back(std::abs(x[k] - 3 * x[k - 1] + 3 * x[k - 2] - x[k - 3]));
    const double mad = *percentile(d3, 50.0);
    return 1.4826 * mad / std::sqrt(20.0);
}

double round_up_if(bool round_up, double value) { return round_up ? std::floor(value) + 1.0 : value; }

}  // namespace

EnvelopeLimits derive_envelope(const Recording& rec, const std::string& source, const EnvelopeOptions& options) {
    // Cycles in which the robot stood held or samples were lost are no cycles of its task.
    const auto cycles = rec.unbroken_cycles();
    if (cycles.size() < 2) {
        const std::size_t complete = rec.complete_cycles().size();
        throw std::invalid_argument(fmt::format(
            "{}: the envelope needs >= 2 complete cycles (bounded by cycle-counter changes), found {}{}", source, cycles.size(),
            complete > cycles.size() ? fmt::format(" ({} more interrupted: the robot held, or samples missing)", complete - cycles.size())
                                     : std::string()));
    }
    EnvelopeLimits lim;
    lim.robot = rec.info().robot;
    lim.source = source;
    lim.unit = rec.info().unit;
    lim.cycles = cycles.size();

    double mean_len = 0;
    for (const auto& c : cycles) mean_len += static_cast<double>(c.size());
    mean_len /= static_cast<double>(cycles.size());
    lim.period = options.period.value_or(static_cast<std::size_t>(std::lround(mean_len)));
    if (lim.period < 2) throw std::invalid_argument(fmt::format("{}: period of {} samples is too short", source, lim.period));
    const std::size_t n = lim.period;

    auto closest = std::min_element(cycles.begin(), cycles.end(), [&](const auto& a, const auto& b) {
        const auto da = std::abs(static_cast<double>(a.size()) - static_cast<double>(n));
        const auto db = std::abs(static_cast<double>(b.size()) - static_cast<double>(n));
        return da < db;
    });
    lim.representative_cycle = static_cast<std::size_t>(closest - cycles.begin());
    const CycleSpan rep = *closest;

    auto cycle_values = [&](std::size_t j, const CycleSpan& c) {
        return std::span<const double>(rec.tau[j]).subspan(c.begin, c.size());
    };
    std::vector<std::vector<double>> representative(rec.joints());
    for (std::size_t j = 0; j < rec.joints(); ++j) representative[j] = resample(cycle_values(j, rep), n);

    // Time shift of other cycles against the representative, measured where the signal is dynamic.
    if (options.shift) {
        lim.shift = *options.shift;
    } else {
        std::size_t aligned = 0;
        for (std::size_t c = 0; c < cycles.size() && aligned < options.max_shift_cycles; ++c) {
            if (c == lim.representative_cycle) continue;
            std::size_t cycle_shift = 0;
            for (std::size_t j = 0; j < rec.joints(); ++j) {
                const auto& r = representative[j];
                std::vector<double> step(n - 1);
                for (std::size_t k = 0; k + 1 < n; ++k) step[k] = std::abs(r[k + 1] - r[k]);
                const double dynamic = *percentile(step, 50.0);
                const auto dtw = dtw_match(cycle_values(j, cycles[c]), r);
                for (const auto& s : dtw.path) {
                    if (s.j + 1 < n && step[s.j] > dynamic) {
                        const auto shift = static_cast<std::size_t>(std::abs(static_cast<long>(s.i) - static_cast<long>(s.j)));
                        cycle_shift = std::max(cycle_shift, shift);
                    }
                }
            }
            lim.cycle_shifts.push_back(cycle_shift);
            ++aligned;
        }
        double mean = 0, var = 0;
        for (auto s : lim.cycle_shifts) mean += static_cast<double>(s);
        mean /= static_cast<double>(lim.cycle_shifts.size());
        for (auto s : lim.cycle_shifts) var += (static_cast<double>(s) - mean) * (static_cast<double>(s) - mean);
        const double sigma = lim.cycle_shifts.size() > 1 ? std::sqrt(var / static_cast<double>(lim.cycle_shifts.size() - 1)) : 0.0;
        const auto seen = *std::max_element(lim.cycle_shifts.begin(), lim.cycle_shifts.end());
        lim.shift = std::max(seen, static_cast<std::size_t>(std::ceil(mean + options.shift_sigma * sigma)));
    }
    const auto s = static_cast<long>(std::min(lim.shift, n - 1));

    for (std::size_t j = 0; j < rec.joints(); ++j) {
        JointEnvelope env;
        const auto& r = representative[j];
        env.upper.resize(n);
        env.lower.resize(n);
        for (std::size_t k = 0; k < n; ++k) {
            double hi = -INFINITY, lo = INFINITY;
            for (long d = -s; d <= s; ++d) {
                const auto idx = static_cast<std::size_t>((static_cast<long>(k) + d + static_cast<long>(n)) % static_cast<long>(n));
                hi = std::max(hi, r[idx]);
                lo = std::min(lo, r[idx]);
            }
            env.upper[k] = hi;
            env.lower[k] = lo;
        }
        // Excursions and neighbour differences of every recorded complete cycle, indexed from its trigger.
        double sum_sq_step = 0;
        std::size_t steps = 0;
        std::vector<double> noise;
        for (const auto& c : cycles) {
            const auto x = cycle_values(j, c);
            for (std::size_t k = 0; k < x.size(); ++k) {
                const std::size_t idx = k % n;
                env.max_excursion = std::max({env.max_excursion, x[k] - env.upper[idx], env.lower[idx] - x[k]});
            }
            noise.push_back(robust_noise_sigma(x));
        }
        for (std::size_t k = 1; k < rec.size(); ++k) {
            const double step = rec.tau[j][k] - rec.tau[j][k - 1];
            sum_sq_step += step * step;
            env.step_max_seen = std::max(env.step_max_seen, std::abs(step));
            ++steps;
        }
        env.noise = *percentile(noise, 50.0);
        env.tolerance = round_up_if(options.round_up,
                                    std::max(options.tolerance_margin * env.max_excursion, options.noise_sigma * env.noise));
        env.step_sigma = steps ? std::sqrt(sum_sq_step / static_cast<double>(steps)) : 0.0;
        env.max_step = round_up_if(options.round_up,
                                   std::max(options.step_sigma * env.step_sigma, options.step_margin * env.step_max_seen));
        lim.joints.push_back(std::move(env));
    }
    return lim;
}

nlohmann::json to_json(const EnvelopeLimits& lim) {
    nlohmann::json joints = nlohmann::json::array();
    for (std::size_t j = 0; j < lim.joints.size(); ++j) {
        const auto& e = lim.joints[j];
        joints.push_back({{"joint", j + 1},
                          {"upper", e.upper},
                          {"lower", e.lower},
                          {"tolerance", e.tolerance},
                          {"max_excursion", e.max_excursion},
                          {"noise", e.noise},
                          {"max_step", e.max_step},
                          {"step_sigma", e.step_sigma},
                          {"step_max_seen", e.step_max_seen}});
    }
    return {{"format", "warpguard-envelope"}, {"version", 1},         {"robot", lim.robot},
            {"source", lim.source},           {"unit", to_string(lim.unit)},
            {"period", lim.period},           {"shift", lim.shift},   {"cycle_shifts", lim.cycle_shifts},
            {"cycles", lim.cycles},           {"representative_cycle", lim.representative_cycle},
            {"joints", joints}};
}

EnvelopeLimits envelope_from_json(const nlohmann::json& j) {
    if (!j.is_object() || j.value("format", "") != "warpguard-envelope") {
        throw std::invalid_argument("not a WarpGuard envelope (expected \"format\": \"warpguard-envelope\")");
    }
    try {
        EnvelopeLimits lim;
        lim.robot = j.at("robot").get<std::string>();
        lim.source = j.at("source").get<std::string>();
        lim.unit = parse_signal_unit(j.at("unit").get<std::string>());
        lim.period = j.at("period").get<std::size_t>();
        lim.shift = j.at("shift").get<std::size_t>();
        lim.cycle_shifts = j.at("cycle_shifts").get<std::vector<std::size_t>>();
        lim.cycles = j.at("cycles").get<std::size_t>();
        lim.representative_cycle = j.at("representative_cycle").get<std::size_t>();
        for (const auto& e : j.at("joints")) {
            JointEnvelope env;
            env.upper = e.at("upper").get<std::vector<double>>();
            env.lower = e.at("lower").get<std::vector<double>>();
            env.tolerance = e.at("tolerance").get<double>();
            env.max_excursion = e.value("max_excursion", 0.0);
            env.noise = e.value("noise", 0.0);
            env.max_step = e.at("max_step").get<double>();
            env.step_sigma = e.value("step_sigma", 0.0);
            env.step_max_seen = e.value("step_max_seen", 0.0);
            if (env.upper.size() != lim.period || env.lower.size() != lim.period) {
                throw std::invalid_argument(fmt::format("envelope joint has {} limits; expected period {}",
                                                        env.upper.size(), lim.period));
            }
            lim.joints.push_back(std::move(env));
        }
        return lim;
    } catch (const nlohmann::json::exception& e) {
        throw std::invalid_argument(fmt::format("envelope JSON: {}", e.what()));
    }
}

EnvelopeChecker::EnvelopeChecker(EnvelopeLimits limits) : limits_(std::move(limits)), previous_(limits_.joints.size()) {
    if (limits_.joints.empty() || limits_.period < 2) throw std::invalid_argument("envelope limits are empty");
}

void EnvelopeChecker::reset() {
    armed_ = false;
    have_previous_ = false;
    have_cycle_ = false;
    phase_ = 0;
}

Decision EnvelopeChecker::update(const Sample& sample) {
    const std::size_t n = limits_.joints.size();
    Decision decision;
    if (sample.tau.size() != n) {
        decision.verdict = Verdict::Stop;
        decision.rule = Rule::Fault;
        decision.fired = 1u << static_cast<int>(Rule::Fault);
        decision.value = static_cast<double>(sample.tau.size());
        decision.threshold = static_cast<double>(n);
        return decision;
    }
    if (have_cycle_ && sample.cycle != cycle_) {
        armed_ = true;  // trigger from the main program: a new period starts here
        phase_ = 0;
    } else if (armed_) {
        phase_ = (phase_ + 1) % limits_.period;
    }
    cycle_ = sample.cycle;
    have_cycle_ = true;

    double worst_ratio = 1.0;
    std::uint8_t fired = 0;
    for (std::size_t j = 0; j < n; ++j) {
        const double x = sample.tau[j];
        if (!std::isfinite(x)) {
            return Decision{Verdict::Stop, j + 1, Rule::Fault, x, 0.0, phase_, phase_, 1u << static_cast<int>(Rule::Fault)};
        }
        const auto& env = limits_.joints[j];
        // `scale` makes the excess of different joints and rules comparable.
        auto consider = [&](Rule rule, double excess, double value, double threshold, double scale) {
            if (!(excess > 0)) return;
            fired = static_cast<std::uint8_t>(fired | (1u << static_cast<int>(rule)));
            const double ratio = scale > 0 ? 1.0 + excess / scale : INFINITY;
            if (decision.verdict == Verdict::Continue || ratio > worst_ratio) {
                worst_ratio = ratio;
                decision = Decision{Verdict::Stop, j + 1, rule, value, threshold, phase_, phase_};
            }
        };
        if (armed_) {
            const double hi = env.upper[phase_] + env.tolerance;
            const double lo = env.lower[phase_] - env.tolerance;
            if (x > hi) consider(Rule::EnvelopeLimit, x - hi, x, hi, env.tolerance);
            if (x < lo) consider(Rule::EnvelopeLimit, lo - x, x, lo, env.tolerance);
            if (have_previous_) {
                const double step = std::abs(x - previous_[j]);
                consider(Rule::NeighbourDifference, step - env.max_step, step, env.max_step, env.max_step);
            }
        }
        previous_[j] = x;
    }
    have_previous_ = true;
    decision.fired = fired;
    return decision;
}

}  // namespace warpguard
