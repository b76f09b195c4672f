#include "warpguard/detector.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "warpguard/lever_length.hpp"

namespace warpguard {

std::string to_string(Rule rule) {
    switch (rule) {
        case Rule::None: return "none";
        case Rule::AbsoluteDifference: return "absolute-difference";
        case Rule::Eigenvalue: return "eigenvalue";
        case Rule::EnvelopeLimit: return "envelope-limit";
        case Rule::NeighbourDifference: return "neighbour-difference";
        case Rule::Fault: return "fault";
    }
    return "?";
}

std::string to_string(Verdict verdict) { return verdict == Verdict::Stop ? "STOP" : "CONTINUE"; }

namespace {

// Lever-scaled reference, thesis §4.4: b(j) / l_b(j), divided once before any matching.
std::vector<std::vector<double>> scaled_reference(const Profile& p) {
    if (p.method == MatchingMethod::Mdtw) return p.reference.tau;
    const auto& k = *p.kinematics;
    std::vector<std::vector<double>> out(p.joints, std::vector<double>(p.reference.size()));
    std::vector<double> q(p.joints), lever(p.joints);
    for (std::size_t s = 0; s < p.reference.size(); ++s) {
        for (std::size_t j = 0; j < p.joints; ++j) q[j] = p.reference.q[j][s];
        equivalent_lever_lengths(k.model, q, k.force, lever);
        for (std::size_t j = 0; j < p.joints; ++j) {
            if (lever[j] < k.min_lever) throw NearZeroLeverError(j + 1, s, lever[j], k.min_lever);
            out[j][s] = p.reference.tau[j][s] / lever[j];
        }
    }
    return out;
}

}  // namespace

Detector::Detector(Profile profile, MatcherKind matcher)
    : profile_((profile.validate(), std::move(profile))),
      references_(scaled_reference(profile_)),
      rings_(profile_.joints, std::vector<double>(profile_.window)),
      windows_(profile_.joints * profile_.window),
      evaluations_(profile_.joints),
      levers_(profile_.joints) {
    if (matcher == MatcherKind::Streaming) {
        streaming_ = std::make_unique<StreamingMdtw>(profile_.window, references_);
    } else {
        published_ = std::make_unique<PublishedMdtw>(profile_.window, profile_.reference.size());
        paths_.resize(profile_.joints);
        for (auto& path : paths_) path.reserve(profile_.window + profile_.reference.size());
    }
}

void Detector::reset() {
    updates_ = 0;
    head_ = 0;
    if (streaming_) streaming_->reset();
}

Decision Detector::fault(const Sample& sample) const {
    Decision d;
    d.verdict = Verdict::Stop;
    d.rule = Rule::Fault;
    d.fired = 1u << static_cast<int>(Rule::Fault);
    d.value = static_cast<double>(sample.tau.size());
    d.threshold = static_cast<double>(profile_.joints);
    return d;
}

Decision Detector::update(const Sample& sample) {
    const std::size_t n = profile_.joints;
    const std::size_t m = profile_.window;
    if (sample.tau.size() != n || sample.q.size() != n) return fault(sample);
    for (std::size_t j = 0; j < n; ++j) {
        if (!std::isfinite(sample.tau[j]) || !std::isfinite(sample.q[j])) {
            Decision d = fault(sample);
            d.joint = j + 1;
            return d;
        }
    }

    // KA-mDTW scales only the newest sample (thesis §4.4: the rest of the window is reused).
    const bool scaled = profile_.method == MatchingMethod::KaMdtw;
    if (scaled) {
        const auto& k = *profile_.kinematics;
        equivalent_lever_lengths(k.model, sample.q, k.force, levers_);
        for (std::size_t j = 0; j < n; ++j) {
            if (levers_[j] < k.min_lever) {
                levers_[j] = k.min_lever;
                ++clamped_levers_;
            }
        }
    }

    // FIFO update; the first sample of a stream fills the whole window.
    for (std::size_t j = 0; j < n; ++j) {
        const double value = scaled ? sample.tau[j] / levers_[j] : sample.tau[j];
        auto& ring = rings_[j];
        if (updates_ == 0) {
            std::fill(ring.begin(), ring.end(), value);
        } else {
            ring[head_] = value;  // overwrite the oldest
        }
    }
    if (updates_ > 0) head_ = (head_ + 1) % m;
    ++updates_;

    // Time-ordered windows, joint after joint.
    for (std::size_t j = 0; j < n; ++j) {
        const auto& ring = rings_[j];
        const auto out = windows_.begin() + static_cast<std::ptrdiff_t>(j * m);
        std::copy(ring.begin() + static_cast<std::ptrdiff_t>(head_), ring.end(), out);
        std::copy(ring.begin(), ring.begin() + static_cast<std::ptrdiff_t>(head_), out + static_cast<std::ptrdiff_t>(m - head_));
    }
    if (streaming_) streaming_->match(windows_);

    Decision decision;
    std::uint8_t fired = 0;
    double worst_ratio = 1.0;  // a joint must exceed its threshold (ratio > 1) to stop
    for (std::size_t j = 0; j < n; ++j) {
        const auto window = this->window(j);
        const auto& ref = references_[j];
        const MatchResult* match = nullptr;
        if (streaming_) {
            match = &streaming_->result(j);
        } else {
            match = &published_->match(window, ref);
            paths_[j].assign(match->path.begin(), match->path.end());  // capacity reserved: no allocation
        }
        const auto path = this->path(j);

        JointEvaluation& ev = evaluations_[j];
        ev.cost = match->cost;
        ev.ref_start = match->start;
        ev.ref_end = match->end;
        ev.rule1 = absolute_difference(window, ref, path);
        ev.rule2 = second_eigenvalue(window, ref, path);

        const auto& th = profile_.thresholds[j];
        auto consider = [&](Rule rule, double value, double threshold) {
            if (!(value > threshold)) return;
            fired = static_cast<std::uint8_t>(fired | (1u << static_cast<int>(rule)));
            const double ratio = threshold > 0 ? value / threshold : INFINITY;
            if (decision.verdict == Verdict::Continue || ratio > worst_ratio) {
                worst_ratio = ratio;
                decision = Decision{Verdict::Stop, j + 1, rule, value, threshold, ev.ref_start, ev.ref_end};
            }
        };
        consider(Rule::AbsoluteDifference, ev.rule1.magnitude(), th.rule1.value);
        consider(Rule::Eigenvalue, ev.rule2, th.rule2.value);
    }
    decision.fired = fired;
    return decision;
}

}  // namespace warpguard
