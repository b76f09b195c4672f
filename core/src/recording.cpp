#include "warpguard/recording.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace warpguard {

std::string to_string(SignalKind kind) { return kind == SignalKind::Torque ? "torque" : "current"; }

std::string to_string(SignalUnit unit) {
    switch (unit) {
        case SignalUnit::Nm: return "Nm";
        case SignalUnit::A: return "A";
        case SignalUnit::Percent: return "percent";
    }
    return "?";
}

SignalKind parse_signal_kind(const std::string& text) {
    if (text == "torque") return SignalKind::Torque;
    if (text == "current") return SignalKind::Current;
    throw std::invalid_argument(fmt::format("signal '{}' is not known; expected torque or current", text));
}

SignalUnit parse_signal_unit(const std::string& text) {
    if (text == "Nm") return SignalUnit::Nm;
    if (text == "A") return SignalUnit::A;
    if (text == "percent" || text == "%") return SignalUnit::Percent;
    throw std::invalid_argument(fmt::format("unit '{}' is not known; expected Nm, A or percent", text));
}

Recording::Recording(std::size_t joints, RecordingInfo info)
    : tau(joints), q(joints), joints_(joints), info_(std::move(info)) {
    if (joints == 0) throw std::invalid_argument("a recording needs at least one joint, got 0");
}

void Recording::append(const Sample& s) {
    if (s.tau.size() != joints_ || s.q.size() != joints_) {
        throw std::invalid_argument(fmt::format("sample has {} signal and {} angle values; expected {} each",
                                                s.tau.size(), s.q.size(), joints_));
    }
    const bool declared = std::isfinite(s.payload);
    if (declared && s.payload < 0) {
        throw std::invalid_argument(fmt::format("declared payload must be >= 0 kg, got {}", s.payload));
    }
    if (declared != declares_payload() && !t.empty()) {
        throw std::invalid_argument(declared ? fmt::format("sample {} declares a payload ({} kg) in a recording whose earlier samples "
                                                           "declare none; a recording declares it in every sample or in none",
                                                           t.size(), s.payload)
                                             : fmt::format("sample {} declares no payload in a recording whose earlier samples do",
                                                           t.size()));
    }
    const bool reported = std::isfinite(s.speed_override);
    if (reported && !(s.speed_override >= 0.0 && s.speed_override <= 1.0)) {
        throw std::invalid_argument(fmt::format("reported speed override must lie in [0, 1] (1 = 100 %), got {}", s.speed_override));
    }
    if (reported != reports_override() && !t.empty()) {
        throw std::invalid_argument(reported ? fmt::format("sample {} reports a speed override ({}) in a recording whose earlier samples "
                                                           "report none; a recording reports it in every sample or in none",
                                                           t.size(), s.speed_override)
                                             : fmt::format("sample {} reports no speed override in a recording whose earlier samples do",
                                                           t.size()));
    }
    if (declared) payload.push_back(s.payload);
    if (reported) speed_override.push_back(s.speed_override);
    t.push_back(s.t);
    seq.push_back(s.seq);
    cycle.push_back(s.cycle);
    mode.push_back(s.mode);
    for (std::size_t j = 0; j < joints_; ++j) {
        tau[j].push_back(s.tau[j]);
        q[j].push_back(s.q[j]);
    }
}

Sample Recording::sample(std::size_t i, std::span<double> scratch_tau, std::span<double> scratch_q) const {
    for (std::size_t j = 0; j < joints_; ++j) {
        scratch_tau[j] = tau[j][i];
        scratch_q[j] = q[j][i];
    }
    Sample s{t[i], seq[i], cycle[i], mode[i], scratch_tau.first(joints_), scratch_q.first(joints_)};
    if (declares_payload()) s.payload = payload[i];
    if (reports_override()) s.speed_override = speed_override[i];
    return s;
}

std::vector<CycleSpan> Recording::cycles() const {
    std::vector<CycleSpan> spans;
    std::size_t begin = 0;
    for (std::size_t i = 1; i <= size(); ++i) {
        if (i == size() || cycle[i] != cycle[begin]) {
            spans.push_back(CycleSpan{cycle[begin], begin, i, false});
            begin = i;
        }
    }
    // Only a run that starts at a counter change and ends at the next one is known to be whole:
    // a recording may start or stop in the middle of a cycle.
    for (std::size_t k = 1; k + 1 < spans.size(); ++k) spans[k].complete = true;
    return spans;
}

std::vector<CycleSpan> Recording::complete_cycles() const {
    auto all = cycles();
    std::vector<CycleSpan> out;
    std::copy_if(all.begin(), all.end(), std::back_inserter(out), [](const CycleSpan& c) { return c.complete; });
    return out;
}

UnbrokenRuns Recording::unbroken_runs() const {
    UnbrokenRuns out;
    std::size_t run_begin = 0;
    bool in_run = false;
    auto close_run = [&](std::size_t end) {
        if (in_run && end > run_begin) out.runs.emplace_back(run_begin, end);
        in_run = false;
    };
    std::size_t i = 0;
    while (i < size()) {
        if (mode[i] & kModeHeld) {  // as the daemon tells a held robot (the self-stop bit only says why)
            const std::size_t from = i;
            while (i < size() && (mode[i] & kModeHeld)) ++i;
            close_run(from);
            const double seconds = (i < size() ? t[i] : t.back()) - t[from];
            out.interruptions.push_back({from, i, fmt::format("robot held for {} samples ({:.3f} s{})", i - from, seconds,
                                                              (mode[from] & kModeSelfStop) ? ", stopped by its own reply timeout" : "")});
            continue;
        }
        if (in_run && i > 0) {
            const std::int64_t before = seq[i - 1], now = seq[i];
            const bool follows = now == before + 1 || (now == 0 && (before == 0x7fffffffLL || before == 0xffffffffLL));
            std::string what;
            if (!follows) {
                what = now > before + 1 ? fmt::format("sequence {} -> {}: {} samples missing", before, now, now - before - 1)
                                        : fmt::format("sequence {} -> {}: the robot's sample counter started again", before, now);
            } else if (t[i] < t[i - 1]) {
                // (An equal time is no break: a coarse robot clock repeats — RAPID sends ClkRead as
                // a float32, 2 ms steps after 4.5 h.)
                what = fmt::format("robot clock {} s -> {} s goes back", t[i - 1], t[i]);
            }
            if (!what.empty()) {
                close_run(i);
                out.interruptions.push_back({i, i, std::move(what)});
            }
        }
        if (!in_run) {
            in_run = true;
            run_begin = i;
        }
        ++i;
    }
    close_run(size());
    return out;
}

std::vector<CycleSpan> Recording::unbroken_cycles() const {
    const auto interruptions = unbroken_runs().interruptions;
    std::vector<CycleSpan> out;
    for (const auto& c : complete_cycles()) {
        const bool touched = std::any_of(interruptions.begin(), interruptions.end(), [&](const Interruption& i) {
            return i.begin == i.end ? (i.begin >= c.begin && i.begin <= c.end) : (i.begin < c.end && i.end > c.begin);
        });
        if (!touched) out.push_back(c);
    }
    return out;
}

Recording Recording::slice(std::size_t begin, std::size_t end) const {
    if (begin > end || end > size()) {
        throw std::out_of_range(fmt::format("slice [{}, {}) outside recording of {} samples", begin, end, size()));
    }
    Recording out(joints_, info_);
    auto copy = [&](const auto& from, auto& to) { to.assign(from.begin() + begin, from.begin() + end); };
    copy(t, out.t);
    copy(seq, out.seq);
    copy(cycle, out.cycle);
    copy(mode, out.mode);
    if (declares_payload()) copy(payload, out.payload);
    if (reports_override()) copy(speed_override, out.speed_override);
    for (std::size_t j = 0; j < joints_; ++j) {
        copy(tau[j], out.tau[j]);
        copy(q[j], out.q[j]);
    }
    if (ground_truth) {
        GroundTruth gt;
        copy(ground_truth->contact, gt.contact);
        copy(ground_truth->contact_force, gt.contact_force);
        copy(ground_truth->contact_link, gt.contact_link);
        if (!ground_truth->contact_age.empty()) copy(ground_truth->contact_age, gt.contact_age);
        out.ground_truth = std::move(gt);
    }
    return out;
}

}  // namespace warpguard
