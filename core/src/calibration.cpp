#include "warpguard/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "warpguard/detector.hpp"

namespace warpguard {

Reference cut_reference(const Recording& rec, const std::string& source, std::size_t cycles) {
    if (cycles < 1) throw std::invalid_argument("the reference needs at least 1 cycle, got 0");
    const auto complete = rec.complete_cycles();
    if (complete.size() < cycles) {
        throw std::invalid_argument(fmt::format(
            "{}: the reference needs {} complete cycles (each bounded by cycle-counter changes), found {}; "
            "record from before one cycle start until after {} more",
            source, cycles, complete.size(), cycles));
    }
    const std::size_t begin = complete.front().begin;
    const std::size_t end = complete[cycles - 1].end;
    Reference ref;
    ref.source = source;
    ref.first_sample = begin;
    for (std::size_t k = 0; k < cycles; ++k) ref.cycles.push_back(complete[k].counter);
    ref.t.assign(rec.t.begin() + static_cast<std::ptrdiff_t>(begin), rec.t.begin() + static_cast<std::ptrdiff_t>(end));
    for (std::size_t j = 0; j < rec.joints(); ++j) {
        ref.tau.emplace_back(rec.tau[j].begin() + static_cast<std::ptrdiff_t>(begin),
                             rec.tau[j].begin() + static_cast<std::ptrdiff_t>(end));
        ref.q.emplace_back(rec.q[j].begin() + static_cast<std::ptrdiff_t>(begin),
                           rec.q[j].begin() + static_cast<std::ptrdiff_t>(end));
    }
    return ref;
}

namespace {

void check_compatible(const NamedRecording& ref, const NamedRecording& other) {
    const Recording& a = *ref.recording;
    const Recording& b = *other.recording;
    if (a.joints() != b.joints()) {
        throw std::invalid_argument(fmt::format("{}: has {} joints but the reference {} has {}", other.name, b.joints(),
                                                ref.name, a.joints()));
    }
    if (a.info().signal != b.info().signal || a.info().unit != b.info().unit) {
        throw std::invalid_argument(fmt::format("{}: signal {} in {} but the reference {} has {} in {}", other.name,
                                                to_string(b.info().signal), to_string(b.info().unit), ref.name,
                                                to_string(a.info().signal), to_string(a.info().unit)));
    }
}

struct Moments {
    double sum = 0.0;
    double sum_sq = 0.0;
    double max_abs = 0.0;
    double max = -std::numeric_limits<double>::infinity();
    std::size_t count = 0;

    void add(double x) {
        sum += x;
        sum_sq += x * x;
        max_abs = std::max(max_abs, std::abs(x));
        max = std::max(max, x);
        ++count;
    }
    double mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
    double sigma() const {
        if (count < 2) return 0.0;
        const double n = static_cast<double>(count);
        return std::sqrt(std::max(0.0, (sum_sq - sum * sum / n) / (n - 1.0)));
    }
};

}  // namespace

Profile calibrate(const NamedRecording& reference, std::span<const NamedRecording> nominal,
                  const CalibrationOptions& options) {
    if (!reference.recording) throw std::invalid_argument("no reference recording given");
    if (nominal.empty()) {
        throw std::invalid_argument("calibration needs at least one held-out nominal recording besides the reference");
    }
    if (!(options.k_sigma > 0)) throw std::invalid_argument(fmt::format("k must be > 0, got {}", options.k_sigma));
    if (!(options.rule2_margin >= 1)) {
        throw std::invalid_argument(fmt::format("rule-2 margin must be >= 1, got {}", options.rule2_margin));
    }
    const Recording& ref_rec = *reference.recording;
    for (const auto& nom : nominal) check_compatible(reference, nom);

    Profile profile;
    profile.robot = ref_rec.info().robot;
    profile.joints = ref_rec.joints();
    profile.signal = ref_rec.info().signal;
    profile.unit = ref_rec.info().unit;
    profile.window = options.window;
    profile.method = options.method;
    profile.kinematics = options.kinematics;
    profile.reference = cut_reference(ref_rec, reference.name, options.reference_cycles);
    if (options.method == MatchingMethod::KaMdtw && !options.kinematics) {
        throw std::invalid_argument("KA-mDTW needs a kinematic model and a force direction");
    }

    // Run the detector with open thresholds over every nominal sample, as in operation.
    profile.thresholds.assign(profile.joints, JointThresholds{});
    for (auto& th : profile.thresholds) {
        th.rule1.value = std::numeric_limits<double>::infinity();
        th.rule2.value = std::numeric_limits<double>::infinity();
    }
    Detector detector(profile);
    std::vector<Moments> rule1(profile.joints), rule2(profile.joints);
    std::vector<double> tau(profile.joints), q(profile.joints);
    nlohmann::json files = nlohmann::json::array();
    std::size_t windows = 0;
    for (const auto& nom : nominal) {
        const Recording& rec = *nom.recording;
        if (rec.size() == 0) throw std::invalid_argument(fmt::format("{}: has no samples", nom.name));
        detector.reset();
        for (std::size_t i = 0; i < rec.size(); ++i) {
            const Decision d = detector.update(rec.sample(i, tau, q));
            if (d.rule == Rule::Fault) {
                throw std::invalid_argument(fmt::format("{}: sample {} cannot be judged (joint {})", nom.name, i, d.joint));
            }
            const auto evs = detector.evaluations();
            for (std::size_t j = 0; j < profile.joints; ++j) {
                rule1[j].add(evs[j].rule1.deviation);
                rule2[j].add(evs[j].rule2);
            }
        }
        windows += rec.size();
        files.push_back({{"file", nom.name}, {"samples", rec.size()}, {"complete_cycles", rec.complete_cycles().size()}});
    }

    for (std::size_t j = 0; j < profile.joints; ++j) {
        auto& th = profile.thresholds[j];
        th.rule1.k = options.k_sigma;
        th.rule1.rounded_up = options.round_up;
        th.rule1.sigma = rule1[j].sigma();
        th.rule1.mean = rule1[j].mean();
        th.rule1.max_abs = rule1[j].max_abs;
        th.rule1.samples = rule1[j].count;
        const double raw = options.k_sigma * th.rule1.sigma;
        th.rule1.value = options.round_up ? std::floor(raw) + 1.0 : raw;  // "first integer higher than"
        th.rule2.margin = options.rule2_margin;
        th.rule2.max = rule2[j].max;
        th.rule2.mean = rule2[j].mean();
        th.rule2.windows = rule2[j].count;
        th.rule2.value = options.rule2_margin * rule2[j].max;
    }
    profile.calibration = {{"nominal", files},
                           {"windows", windows},
                           {"reference_cycles", options.reference_cycles},
                           {"window", options.window},
                           {"k_sigma", options.k_sigma},
                           {"round_up", options.round_up},
                           {"rule2_margin", options.rule2_margin},
                           {"clamped_levers", detector.clamped_levers()}};
    profile.validate();
    return profile;
}

}  // namespace warpguard
