#include "warpguard/evaluation.hpp"

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

RunEvaluation evaluate_decisions(const std::string& name, const Recording& rec, const std::vector<Decision>& decisions,
                                 std::size_t window) {
    if (decisions.size() != rec.size()) {
        throw std::invalid_argument(fmt::format("{}: {} decisions for {} samples", name, decisions.size(), rec.size()));
    }
    RunEvaluation run;
    run.name = name;
    run.samples = rec.size();
    for (std::size_t i = 0; i < decisions.size(); ++i) {
        if (!decisions[i].stop()) continue;
        ++run.stop_samples;
        if (i == 0 || !decisions[i - 1].stop()) run.events.push_back(StopEvent{i, i + 1, rec.t[i], decisions[i]});
        run.events.back().end_index = i + 1;
    }

    const auto* gt = rec.has_ground_truth() ? &*rec.ground_truth : nullptr;
    for (const auto& c : rec.complete_cycles()) {
        const bool contact = gt && std::any_of(gt->contact.begin() + static_cast<std::ptrdiff_t>(c.begin),
                                               gt->contact.begin() + static_cast<std::ptrdiff_t>(c.end),
                                               [](auto v) { return v != 0; });
        if (contact) continue;
        ++run.clean_cycles;
        const bool flagged = std::any_of(decisions.begin() + static_cast<std::ptrdiff_t>(c.begin),
                                         decisions.begin() + static_cast<std::ptrdiff_t>(c.end),
                                         [](const Decision& d) { return d.stop(); });
        if (flagged) ++run.clean_cycles_flagged;
    }
    if (!gt) return run;

    GroundTruthSummary summary;
    for (std::size_t i = 0; i < rec.size(); ++i) {
        if (!gt->contact[i] || (i > 0 && gt->contact[i - 1])) continue;
        CollisionOutcome c;
        c.onset_index = i;
        c.onset_t = rec.t[i];
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
            if (decisions[s].stop()) {
                c.detected = true;
                c.detection_index = s;
                c.delay = rec.t[s] - c.onset_t;
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
    for (const auto& e : run.events) {
        const bool explained = std::any_of(summary.collisions.begin(), summary.collisions.end(), [&](const auto& c) {
            return e.index >= c.onset_index && e.index < c.end_index + window;
        });
        if (!explained) ++summary.false_stop_events;
    }
    summary.delay_median = percentile(delays, 50.0);
    summary.delay_p95 = percentile(delays, 95.0);
    run.truth = std::move(summary);
    return run;
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
    if (run.truth) {
        const auto& s = *run.truth;
        json collisions = json::array();
        for (const auto& c : s.collisions) {
            json item = {{"onset_t", c.onset_t},   {"onset_index", c.onset_index}, {"samples", c.end_index - c.onset_index},
                         {"peak_force", c.peak_force}, {"link", c.link},           {"detected", c.detected}};
            if (c.detected) {
                item["delay"] = c.delay;
                item["detection_index"] = c.detection_index;
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

}  // namespace warpguard
