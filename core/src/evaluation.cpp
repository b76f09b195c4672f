#include "warpguard/evaluation.hpp"

#include "warpguard/detector.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace warpguard {

std::optional<double> percentile(std::vector<double> values, double p) {
    if (values.empty()) return std::nullopt;
    std::sort(values.begin(), values.end());
    const double pos = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, values.size() - 1);
    return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

std::vector<ForceBin> default_force_bins() {
    return {{0.0, 50.0, 0, 0}, {50.0, 100.0, 0, 0}, {100.0, 200.0, 0, 0}, {200.0, INFINITY, 0, 0}};
}

namespace {

struct Counted {
    std::vector<StopEvent> events;
    std::size_t stop_samples = 0;
    std::size_t clean_cycles = 0;
    std::size_t clean_cycles_flagged = 0;
    std::optional<GroundTruthSummary> truth;
};

// Every count of the evaluation for one "this sample says STOP" predicate.
template <typename Fires>
Counted count(const Recording& rec, const std::vector<Decision>& decisions, std::size_t window, Fires fires) {
    Counted out;
    for (std::size_t i = 0; i < decisions.size(); ++i) {
        if (!fires(decisions[i])) continue;
        ++out.stop_samples;
        if (i == 0 || !fires(decisions[i - 1])) out.events.push_back(StopEvent{i, i + 1, rec.t[i], decisions[i]});
        out.events.back().end_index = i + 1;
    }
    const auto* gt = rec.has_ground_truth() ? &*rec.ground_truth : nullptr;
    for (const auto& c : rec.complete_cycles()) {
        const bool contact = gt && std::any_of(gt->contact.begin() + static_cast<std::ptrdiff_t>(c.begin),
                                               gt->contact.begin() + static_cast<std::ptrdiff_t>(c.end),
                                               [](auto v) { return v != 0; });
        if (contact) continue;
        ++out.clean_cycles;
        bool flagged = false;
        for (std::size_t i = c.begin; i < c.end && !flagged; ++i) flagged = fires(decisions[i]);
        if (flagged) ++out.clean_cycles_flagged;
    }
    if (!gt) return out;

    GroundTruthSummary summary;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        if (!gt->contact[i] || (i > 0 && gt->contact[i - 1])) continue;
        CollisionOutcome c;
        c.onset_index = i;
        // The contact began before the first sample that carries it, by its recorded age.
        c.onset_t = rec.t[i] - (gt->contact_age.empty() ? 0.0 : gt->contact_age[i]);
        std::size_t k = i;
        for (; k < rec.size() && gt->contact[k]; ++k) {
            if (gt->contact_force[k] > c.peak_force) {
                c.peak_force = gt->contact_force[k];
                c.link = gt->contact_link[k];
            }
        }
        c.end_index = k;
        if (c.link == 0) c.link = gt->contact_link[i];
        const std::size_t until = std::min(rec.size(), k + window);
        for (std::size_t s = i; s < until; ++s) {
            if (fires(decisions[s])) {
                c.detected = true;
                c.detection_index = s;
                c.delay = rec.t[s] - c.onset_t;
                c.force_at_detection = gt->contact[s] ? gt->contact_force[s] : 0.0;
                break;
            }
        }
        summary.collisions.push_back(c);
    }
    std::vector<double> delays;
    for (const auto& c : summary.collisions) {
        if (c.detected) {
            ++summary.detected;
            delays.push_back(c.delay);
        } else {
            ++summary.missed;
        }
    }
    for (const auto& e : out.events) {
        const bool explained = std::any_of(summary.collisions.begin(), summary.collisions.end(), [&](const auto& c) {
            return e.index >= c.onset_index && e.index < c.end_index + window;
        });
        if (!explained) ++summary.false_stop_events;
    }
    summary.delay_median = percentile(delays, 50.0);
    summary.delay_p95 = percentile(delays, 95.0);
    out.truth = std::move(summary);
    return out;
}

RuleSummary rule_summary(const std::string& name, const Counted& c) {
    RuleSummary r;
    r.name = name;
    r.stop_events = c.events.size();
    r.clean_cycles_flagged = c.clean_cycles_flagged;
    r.bins = default_force_bins();
    if (c.truth) {
        r.collisions = c.truth->collisions.size();
        r.detected = c.truth->detected;
        r.false_stop_events = c.truth->false_stop_events;
        for (const auto& col : c.truth->collisions) {
            if (col.detected) r.delays.push_back(col.delay);
            for (auto& bin : r.bins) {
                if (col.peak_force >= bin.low && col.peak_force < bin.high) {
                    ++bin.collisions;
                    bin.detected += col.detected;
                }
            }
        }
    } else {
        r.false_stop_events = c.events.size();
    }
    return r;
}

constexpr std::uint8_t bit(Rule r) { return static_cast<std::uint8_t>(1u << static_cast<int>(r)); }

}  // namespace

RunEvaluation evaluate_decisions(const std::string& name, const Recording& rec, const std::vector<Decision>& decisions,
                                 std::size_t window) {
    if (decisions.size() != rec.size()) {
        throw std::invalid_argument(fmt::format("{}: {} decisions for {} samples", name, decisions.size(), rec.size()));
    }
    const Counted combined = count(rec, decisions, window, [](const Decision& d) { return d.stop(); });
    RunEvaluation run;
    run.name = name;
    run.samples = rec.size();
    run.stop_samples = combined.stop_samples;
    run.events = combined.events;
    run.clean_cycles = combined.clean_cycles;
    run.clean_cycles_flagged = combined.clean_cycles_flagged;
    run.truth = combined.truth;
    const std::uint8_t rule1 = bit(Rule::AbsoluteDifference) | bit(Rule::EnvelopeLimit) | bit(Rule::ResidualLimit);
    const std::uint8_t rule2 = bit(Rule::Eigenvalue) | bit(Rule::NeighbourDifference) | bit(Rule::Accumulated);
    run.by_rule.push_back(rule_summary("rule 1", count(rec, decisions, window, [&](const Decision& d) { return (d.fired & rule1) != 0; })));
    run.by_rule.push_back(rule_summary("rule 2", count(rec, decisions, window, [&](const Decision& d) { return (d.fired & rule2) != 0; })));
    run.by_rule.push_back(rule_summary("combined", combined));
    return run;
}

void accumulate(RuleSummary& a, const RuleSummary& b) {
    if (a.name.empty()) {
        a = b;
        return;
    }
    a.stop_events += b.stop_events;
    a.clean_cycles_flagged += b.clean_cycles_flagged;
    a.collisions += b.collisions;
    a.detected += b.detected;
    a.false_stop_events += b.false_stop_events;
    a.delays.insert(a.delays.end(), b.delays.begin(), b.delays.end());
    for (std::size_t k = 0; k < a.bins.size() && k < b.bins.size(); ++k) {
        a.bins[k].collisions += b.bins[k].collisions;
        a.bins[k].detected += b.bins[k].detected;
    }
}

nlohmann::json to_json(const RuleSummary& r) {
    using nlohmann::json;
    auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    json bins = json::array();
    for (const auto& b : r.bins) {
        bins.push_back({{"low", b.low}, {"high", std::isfinite(b.high) ? json(b.high) : json(nullptr)},
                        {"collisions", b.collisions}, {"detected", b.detected}});
    }
    return {{"rule", r.name},
            {"stop_events", r.stop_events},
            {"clean_cycles_flagged", r.clean_cycles_flagged},
            {"collisions", r.collisions},
            {"detected", r.detected},
            {"false_stop_events", r.false_stop_events},
            {"delay_median", opt(percentile(r.delays, 50.0))},
            {"delay_p95", opt(percentile(r.delays, 95.0))},
            {"by_peak_force", bins}};
}

nlohmann::json to_json(const RunEvaluation& run) {
    using nlohmann::json;
    json events = json::array();
    for (const auto& e : run.events) {
        events.push_back({{"t", e.t},
                          {"index", e.index},
                          {"samples", e.end_index - e.index},
                          {"joint", e.decision.joint},
                          {"rule", to_string(e.decision.rule)},
                          {"value", e.decision.value},
                          {"threshold", e.decision.threshold},
                          {"reference_span", {e.decision.ref_start, e.decision.ref_end}}});
    }
    json out = {{"file", run.name},
                {"samples", run.samples},
                {"stop_samples", run.stop_samples},
                {"stop_events", events},
                {"clean_cycles", run.clean_cycles},
                {"clean_cycles_flagged", run.clean_cycles_flagged}};
    json rules = json::array();
    for (const auto& r : run.by_rule) rules.push_back(to_json(r));
    out["by_rule"] = rules;
    if (run.truth) {
        const auto& s = *run.truth;
        json collisions = json::array();
        for (const auto& c : s.collisions) {
            json item = {{"onset_t", c.onset_t},   {"onset_index", c.onset_index}, {"samples", c.end_index - c.onset_index},
                         {"peak_force", c.peak_force}, {"link", c.link},           {"detected", c.detected}};
            if (c.detected) {
                item["delay"] = c.delay;
                item["detection_index"] = c.detection_index;
                item["force_at_detection"] = c.force_at_detection;
            }
            collisions.push_back(item);
        }
        auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
        out["summary"] = {{"collisions", s.collisions.size()},
                          {"detected", s.detected},
                          {"missed", s.missed},
                          {"false_stop_events", s.false_stop_events},
                          {"delay_median", opt(s.delay_median)},
                          {"delay_p95", opt(s.delay_p95)},
                          {"collision_details", collisions}};
    }
    return out;
}

RunEvaluation evaluate_detector(const std::string& name, const Recording& recording, Detector& detector) {
    detector.reset();
    const auto decisions = decide_as_in_operation(
        recording, [&](const Sample& s) { return detector.update(s); }, [&] { detector.reset(); });
    return evaluate_decisions(name, recording, decisions, detector.window_length());
}

}  // namespace warpguard
