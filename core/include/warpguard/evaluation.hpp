// Offline evaluation of a detector on a recording: stop events and, where the recording carries
// ground truth, what happened to every collision.
//
// Definitions (also in docs/evaluation.md):
//   stop event   a maximal run of consecutive STOP decisions (offline the stop is not latched, so
//                every run is reported); its time is the time of its first sample.
//   collision    a maximal run of samples with contact = 1.
//   detected     a STOP decision at a sample from the collision's onset up to `window` samples after
//                its last contact sample (rule 2 still sees a contact for m samples, §3.2.3).
//   delay        t(first such STOP) - t(onset); the onset is the contact's own, the first contact
//                sample's t less its contact_age (the contact began between two samples), or that
//                sample's t in recordings without contact_age.
//   false stop   a stop event that starts outside every collision's detection interval.
//   clean cycle  a complete cycle without any contact sample; it is "flagged" when any STOP falls in it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpguard/decision.hpp"
#include "warpguard/recording.hpp"

namespace warpguard {

struct StopEvent {
    std::size_t index = 0;      // first STOP sample
    std::size_t end_index = 0;  // one past the last STOP sample of the run
    double t = 0.0;
    Decision decision;          // decision at the first sample
};

struct CollisionOutcome {
    std::size_t onset_index = 0;  // the first sample that carries the contact
    std::size_t end_index = 0;  // one past the last contact sample
    double onset_t = 0.0;       // robot time the contact began (at or before that sample)
    double peak_force = 0.0;    // N
    int link = 0;
    bool detected = false;
    std::size_t detection_index = 0;
    double delay = 0.0;         // s
    // Contact force at the detecting sample, N (0 when the STOP came after the contact had ended):
    // for a push that ramps up, how far the force had risen when WarpGuard stopped the robot.
    double force_at_detection = 0.0;
};

struct GroundTruthSummary {
    std::vector<CollisionOutcome> collisions;
    std::size_t detected = 0;
    std::size_t missed = 0;
    std::size_t false_stop_events = 0;
    std::optional<double> delay_median;  // s, over detected collisions
    std::optional<double> delay_p95;
};

// Collisions and detections with peak force in [low, high) N.
struct ForceBin {
    double low = 0.0;
    double high = 0.0;
    std::size_t collisions = 0;
    std::size_t detected = 0;
};
// Bins of issue 8: < 50 N, 50-100 N, 100-200 N, >= 200 N.
std::vector<ForceBin> default_force_bins();

// The same counts as the main evaluation for one rule (or rule set) alone, as the thesis's Table 3
// reports rule 1, rule 2 and both combined.
struct RuleSummary {
    std::string name;  // "rule 1", "rule 2", "combined"
    std::size_t stop_events = 0;
    std::size_t clean_cycles_flagged = 0;
    std::size_t collisions = 0;
    std::size_t detected = 0;
    std::size_t false_stop_events = 0;
    std::vector<double> delays;  // s, of detected collisions
    std::vector<ForceBin> bins;
};

struct RunEvaluation {
    std::string name;
    std::size_t samples = 0;
    std::size_t stop_samples = 0;
    std::vector<StopEvent> events;
    std::size_t clean_cycles = 0;          // complete cycles without contact
    std::size_t clean_cycles_flagged = 0;  // ... in which the detector said STOP at least once
    std::optional<GroundTruthSummary> truth;
    std::vector<RuleSummary> by_rule;  // rule 1 alone, rule 2 alone, combined
};

// Builds the evaluation from one decision per sample. `window` is the detector's window length.
RunEvaluation evaluate_decisions(const std::string& name, const Recording& recording,
                                 const std::vector<Decision>& decisions, std::size_t window);

// One decision per sample of `recording` as the daemon makes them in operation: `update(sample)`
// judges a sample; a row the robot sent while it stood held (mode bit 0: stopped by a STOP or by its
// own timeout) is not judged (CONTINUE), and at the first row after a hold `restart()` starts the
// detector afresh, as the daemon does when the robot moves again.
template <typename Update, typename Restart>
std::vector<Decision> decide_as_in_operation(const Recording& recording, Update update, Restart restart) {
    std::vector<Decision> decisions;
    decisions.reserve(recording.size());
    std::vector<double> tau(recording.joints()), q(recording.joints());
    bool held = false;
    for (std::size_t i = 0; i < recording.size(); ++i) {
        if (recording.mode[i] & kModeHeld) {
            held = true;
            decisions.push_back(Decision{});
            continue;
        }
        if (held) {
            held = false;
            restart();
        }
        decisions.push_back(update(recording.sample(i, tau, q)));
    }
    return decisions;
}

class Detector;
// Runs `detector` over every sample of `recording` as a new stream (reset first), as in operation
// (decide_as_in_operation), and evaluates its decisions; the detector keeps its state afterwards
// (speed ratio, drift) for inspection.
RunEvaluation evaluate_detector(const std::string& name, const Recording& recording, Detector& detector);

// Linear-interpolated percentile (p in [0, 100]) of unsorted values; empty input gives nullopt.
std::optional<double> percentile(std::vector<double> values, double p);

nlohmann::json to_json(const RunEvaluation& run);
nlohmann::json to_json(const RuleSummary& summary);
// Adds b's counts, delays and bins to a (same name, same bins).
void accumulate(RuleSummary& a, const RuleSummary& b);

}  // namespace warpguard
