#include "warpguard/calibration.hpp"
#include "warpguard/lever_length.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include <Eigen/Eigenvalues>
#include <fmt/format.h>

#include "warpguard/detector.hpp"
#include "warpguard/mdtw.hpp"

namespace warpguard {

std::vector<std::uint8_t> calibration_halves(std::size_t cycles) {
    constexpr std::uint32_t kLongestPeriod = 8;
    // count[p][r][h]: cycles c = r mod p in half h so far (p = 1: all cycles).
    std::vector<std::vector<std::array<long, 2>>> count(kLongestPeriod + 1);
    for (std::uint32_t p = 1; p <= kLongestPeriod; ++p) count[p].assign(p, {0, 0});
    std::vector<std::uint8_t> half(cycles);
    for (std::size_t c = 0; c < cycles; ++c) {
        long score[2] = {0, 0};  // growth of the sum of squared imbalances if c went to that half
        for (int h = 0; h < 2; ++h) {
            for (std::uint32_t p = 1; p <= kLongestPeriod; ++p) {
                const auto& k = count[p][c % p];
                const long before = k[0] - k[1], after = before + (h == 0 ? 1 : -1);
                score[h] += after * after - before * before;
            }
        }
        half[c] = score[1] < score[0] ? 1 : 0;
        for (std::uint32_t p = 1; p <= kLongestPeriod; ++p) ++count[p][c % p][half[c]];
    }
    return half;
}

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
    for (std::size_t k = 0; k < cycles; ++k) {
        ref.cycles.push_back(complete[k].counter);
        ref.cycle_begins.push_back(complete[k].begin - begin);
    }
    ref.t.assign(rec.t.begin() + static_cast<std::ptrdiff_t>(begin), rec.t.begin() + static_cast<std::ptrdiff_t>(end));
    for (std::size_t j = 0; j < rec.joints(); ++j) {
        ref.tau.emplace_back(rec.tau[j].begin() + static_cast<std::ptrdiff_t>(begin),
                             rec.tau[j].begin() + static_cast<std::ptrdiff_t>(end));
        ref.q.emplace_back(rec.q[j].begin() + static_cast<std::ptrdiff_t>(begin),
                           rec.q[j].begin() + static_cast<std::ptrdiff_t>(end));
    }
    if (rec.declares_payload()) {
        ref.payload.assign(rec.payload.begin() + static_cast<std::ptrdiff_t>(begin), rec.payload.begin() + static_cast<std::ptrdiff_t>(end));
    }
    // The override the cycles ran at, if the robot reported one and it stayed put (changes under a
    // thousandth are the report's rounding, as for the detector's turns).
    if (rec.reports_override()) {
        const auto [lo, hi] = std::minmax_element(rec.speed_override.begin() + static_cast<std::ptrdiff_t>(begin),
                                                  rec.speed_override.begin() + static_cast<std::ptrdiff_t>(end));
        if (*lo > 0.0 && *hi / *lo - 1.0 < 1e-3) ref.speed_override = *hi;
    }
    return ref;
}

namespace {

// Poses along samples [begin, end) of a recording's joint path: the first, then each one at least
// `spacing` (rad, largest joint) from the last one kept, and the last. Joint-major: joints x count.
struct PathPoints {
    std::size_t joints = 0;
    std::vector<double> q;  // point p, joint j at q[p * joints + j]
    std::size_t size() const { return joints ? q.size() / joints : 0; }
};

PathPoints path_points(const Recording& rec, std::size_t begin, std::size_t end, double spacing) {
    PathPoints out;
    out.joints = rec.joints();
    std::size_t last = begin;
    const auto keep = [&](std::size_t i) {
        for (std::size_t j = 0; j < out.joints; ++j) out.q.push_back(rec.q[j][i]);
        last = i;
    };
    if (begin >= end) return out;
    keep(begin);
    for (std::size_t i = begin + 1; i < end; ++i) {
        double d = 0;
        for (std::size_t j = 0; j < out.joints; ++j) d = std::max(d, std::abs(rec.q[j][i] - rec.q[j][last]));
        if (d >= spacing || i + 1 == end) keep(i);
    }
    return out;
}

// Distance (largest joint) from pose `x` to the nearest point of `path`, and that point's worst joint.
std::pair<double, std::size_t> nearest(const double* x, const PathPoints& path) {
    double best = std::numeric_limits<double>::infinity();
    std::size_t best_joint = 0;
    for (std::size_t p = 0; p < path.size(); ++p) {
        const double* y = &path.q[p * path.joints];
        double d = 0;
        std::size_t joint = 0;
        for (std::size_t j = 0; j < path.joints && d < best; ++j) {
            const double e = std::abs(x[j] - y[j]);
            if (e > d) d = e, joint = j;
        }
        if (d < best) best = d, best_joint = joint;
    }
    return {best, best_joint};
}

}  // namespace

nlohmann::json ReferenceCoverage::to_json() const {
    return {{"reference_cycles", reference_cycles}, {"automatic", automatic}, {"available_cycles", available_cycles},
            {"tolerance_rad", tolerance},           {"cycles", cycles},       {"uncovered", uncovered},
            {"worst_distance_rad", worst_distance},  {"worst_joint", worst_joint}, {"worst_cycle", worst_cycle},
            {"note", note}};
}

ReferenceCoverage choose_reference_cycles(const NamedRecording& reference, std::span<const NamedRecording> nominal,
                                          std::size_t given, bool same_recording, std::size_t min_nominal_cycles,
                                          double tolerance) {
    if (!(tolerance > 0)) throw std::invalid_argument(fmt::format("coverage tolerance must be > 0 rad, got {}", tolerance));
    const Recording& ref = *reference.recording;
    const auto ref_cycles = ref.complete_cycles();
    ReferenceCoverage out;
    out.tolerance = tolerance;
    out.available_cycles = ref_cycles.size();
    // The candidates: `given`, or kMinReferenceCycles up to all (the daemon's single recording keeps
    // min_nominal_cycles of its cycles for the thresholds when it can).
    std::size_t lo = given, hi = given;
    if (given == 0) {
        out.automatic = true;
        lo = kMinReferenceCycles;
        hi = ref_cycles.size();
        if (same_recording) hi = ref_cycles.size() > min_nominal_cycles ? ref_cycles.size() - min_nominal_cycles : 0;
        hi = std::max(hi, std::min<std::size_t>(lo, ref_cycles.size()));
    }
    if (ref_cycles.size() < lo || (same_recording && ref_cycles.size() < lo + 1)) {
        throw std::invalid_argument(fmt::format(
            "{}: the reference needs {} complete cycles (each bounded by cycle-counter changes){}, found {}; record more cycles",
            reference.name, lo, same_recording ? " and at least 1 more for the thresholds" : "", ref_cycles.size()));
    }
    const double spacing = tolerance / 4;
    std::vector<PathPoints> ref_paths;
    for (std::size_t c = 0; c < hi; ++c) ref_paths.push_back(path_points(ref, ref_cycles[c].begin, ref_cycles[c].end, spacing));
    // Per nominal cycle and point: the distance to each candidate reference cycle's path.
    struct NominalCycle {
        std::string name;
        std::size_t index_in_reference;  // its place among the reference recording's cycles (same_recording), else npos
        PathPoints points;
        std::vector<double> distance;       // point x reference cycle
        std::vector<std::size_t> joint;
    };
    std::vector<NominalCycle> cycles;
    const auto add = [&](const Recording& rec, const std::string& name, const CycleSpan& span, std::size_t index) {
        NominalCycle c{fmt::format("{}, cycle {}", name, span.counter), index, path_points(rec, span.begin, span.end, spacing), {}, {}};
        for (std::size_t p = 0; p < c.points.size(); ++p) {
            for (const auto& path : ref_paths) {
                const auto [d, j] = nearest(&c.points.q[p * c.points.joints], path);
                c.distance.push_back(d);
                c.joint.push_back(j);
            }
        }
        cycles.push_back(std::move(c));
    };
    if (same_recording) {
        for (std::size_t k = lo; k < ref_cycles.size(); ++k) add(ref, reference.name, ref_cycles[k], k);
    }
    for (const auto& nom : nominal) {
        for (const auto& span : nom.recording->complete_cycles()) add(*nom.recording, nom.name, span, std::string::npos);
    }
    // Coverage with the first k reference cycles.
    const auto judge = [&](std::size_t k) {
        ReferenceCoverage r = out;
        r.reference_cycles = k;
        for (const auto& c : cycles) {
            if (same_recording && c.index_in_reference < k) continue;  // part of the reference
            ++r.cycles;
            double worst = 0;
            std::size_t worst_joint = 0;
            for (std::size_t p = 0; p < c.points.size(); ++p) {
                double d = std::numeric_limits<double>::infinity();
                std::size_t joint = 0;
                for (std::size_t q = 0; q < k; ++q) {
                    const std::size_t at = p * ref_paths.size() + q;
                    if (c.distance[at] < d) d = c.distance[at], joint = c.joint[at];
                }
                if (d > worst) worst = d, worst_joint = joint;
            }
            if (worst > tolerance) ++r.uncovered;
            if (worst > r.worst_distance) {
                r.worst_distance = worst;
                r.worst_joint = worst_joint + 1;
                r.worst_cycle = c.name;
            }
        }
        return r;
    };
    ReferenceCoverage best = judge(lo);
    for (std::size_t k = lo + 1; k <= hi && best.uncovered > 0; ++k) {
        ReferenceCoverage r = judge(k);
        if (r.uncovered < best.uncovered) best = r;
    }
    if (best.uncovered == 0) {
        best.note = fmt::format("the reference's {} cycles cover all {} nominal cycles (every pose within {} rad){}", best.reference_cycles,
                                best.cycles, tolerance, best.automatic ? " — the fewest that do" : "");
    } else {
        best.note = fmt::format(
            "{} of {} nominal cycles go where the reference's {} cycles never do (farthest: {}, joint {} {:.3f} rad away; tolerance {} rad): "
            "the task has variants the reference lacks, and those cycles' deviations widen every threshold. {}",
            best.uncovered, best.cycles, best.reference_cycles, best.worst_cycle, best.worst_joint, best.worst_distance, tolerance,
            best.automatic && best.reference_cycles == ref_cycles.size()
                ? "Record a reference with every variant of the task, or use KA-mDTW for a task that varies."
                : best.automatic ? "More reference cycles covered no more of them; record a reference with every variant, or use KA-mDTW."
                                 : "Give more reference cycles (or leave the number to calibration), or use KA-mDTW for a task that varies.");
    }
    return best;
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

struct PhaseObservation {
    std::uint32_t partner;
    float deviation;
};
constexpr std::uint32_t kNoCycle = std::numeric_limits<std::uint32_t>::max();


// Per reference sample: the largest |deviation| of the selected cycles at that phase (in every
// reference cycle, `twins`) within +- w samples. With `half` >= 0 only cycles of that half
// (`halves`) count.
std::vector<double> pooled_maximum(const std::vector<PhaseObservation>& obs, const std::vector<std::uint32_t>& cycle_of,
                                   const std::vector<std::uint8_t>& halves, std::size_t n, std::size_t w, int half, double floor,
                                   const CycleTwins& twins) {
    std::vector<double> local(n, -1.0);  // -1: never matched
    for (std::size_t s = 0; s < obs.size(); ++s) {
        if (cycle_of[s] == kNoCycle || (half >= 0 && halves[cycle_of[s]] != half)) continue;
        local[obs[s].partner] = std::max(local[obs[s].partner], static_cast<double>(std::abs(obs[s].deviation)));
    }
    if (!twins.empty()) {
        std::vector<double> own(local);
        for (std::size_t p = 0; p < n; ++p) {
            for (std::size_t c = 0; c < twins.cycles; ++c) {
                for (std::uint32_t t = twins.lo[p * twins.cycles + c]; t <= twins.hi[p * twins.cycles + c]; ++t) {
                    local[p] = std::max(local[p], own[t]);
                }
            }
        }
    }
    // Sliding maximum over +- w (monotone deque).
    std::vector<double> out(n, 0.0);
    std::vector<std::size_t> dq;
    std::size_t head = 0;
    std::size_t next = 0;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t hi = std::min(n - 1, k + w);
        for (; next <= hi; ++next) {
            while (dq.size() > head && local[dq.back()] <= local[next]) dq.pop_back();
            dq.push_back(next);
        }
        while (dq[head] + w < k) ++head;
        out[k] = local[dq[head]];
    }
    // Phases with no matched sample within +- w get the median of the others.
    std::vector<double> seen;
    for (double v : out) {
        if (v >= 0) seen.push_back(v);
    }
    if (seen.empty()) throw std::invalid_argument("no calibration sample was matched to the reference");
    std::nth_element(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(seen.size() / 2), seen.end());
    const double fill = std::max(seen[seen.size() / 2], 1e-12);
    for (double& v : out) v = std::max(v >= 0 ? v : fill, floor);
    return out;
}

}  // namespace

ExtremeFit fit_cycle_maxima(const std::vector<double>& maxima, double cycles_per_exceedance) {
    if (maxima.size() < 2) {
        throw std::invalid_argument(fmt::format("an extreme-value fit needs >= 2 per-cycle maxima, got {}", maxima.size()));
    }
    if (!(cycles_per_exceedance > 1)) {
        throw std::invalid_argument(fmt::format("cycles per exceedance must be > 1, got {}", cycles_per_exceedance));
    }
    ExtremeFit e;
    const std::size_t n = maxima.size();
    const double count = static_cast<double>(n);
    for (double v : maxima) e.mean += v;
    e.mean /= count;
    double sq = 0;
    for (double v : maxima) sq += (v - e.mean) * (v - e.mean);
    e.sd = std::sqrt(sq / (count - 1));
    e.largest = *std::max_element(maxima.begin(), maxima.end());
    const double p = 1.0 / cycles_per_exceedance;
    // Gumbel by the method of moments, with the scale taken at its one-sided 95 % upper confidence
    // bound (sd * (1 + 1.645 / sqrt(2 (n - 1))), the large-sample spread of a standard deviation): a
    // short recording (the wizard accepts 10 nominal cycles) gives a wider margin instead of an
    // optimistic one; with many cycles the factor tends to 1. Measured: without it, 15 recorded
    // cycles of a live UR5e-like run gave 5 would-stop events in ~43 clean cycles for one seed.
    e.gumbel_scale_factor = 1.0 + 1.6448536 / std::sqrt(2.0 * (count - 1));
    e.gumbel_beta = e.sd * std::sqrt(6.0) / M_PI * e.gumbel_scale_factor;
    e.gumbel_mu = e.mean - 0.5772156649 * e.gumbel_beta;
    e.gumbel_quantile = e.gumbel_mu - e.gumbel_beta * std::log(-std::log(1.0 - p));
    // Peaks over threshold. The moments fit follows the bulk of the maxima (an ordinary cycle's
    // largest noise); the rare cycles that set the tail come from another cause (the shared partner
    // a few samples off for a stretch) and lie farther out than the bulk's Gumbel predicts
    // (benchmark suite, 2026-11-25: held-out nominal CUSUM maxima of 2.01, 2.77 and 2.62 over Gumbel
    // limits of 1.97, 2.51 and 2.56). So the largest k maxima (the top fifth, at least 10 or all but
    // one: enough excesses to estimate a scale, few enough to stay in the tail) are fitted on their
    // own: excesses over the next largest maximum u, exponential with mean sigma (the tail of the
    // Gumbel's domain; its scale taken at the 95 % upper bound sigma * (1 + 1.645 / sqrt(k)));
    // P(max > x) = k/n * exp(-(x - u) / sigma).
    std::vector<double> sorted(maxima);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const std::size_t k = std::max<std::size_t>((n + 4) / 5, std::min<std::size_t>(10, n - 1));
    e.tail_exceedances = k;
    e.tail_threshold = sorted[k];
    for (std::size_t i = 0; i < k; ++i) e.tail_scale += sorted[i] - e.tail_threshold;
    e.tail_scale /= static_cast<double>(k);
    e.tail_scale_factor = 1.0 + 1.6448536 / std::sqrt(static_cast<double>(k));
    e.tail_quantile =
        e.tail_threshold + e.tail_scale * e.tail_scale_factor * std::max(0.0, std::log(static_cast<double>(k) / (count * p)));
    return e;
}

namespace {

// A fit's numbers in a profile's derivation, under `prefix` ("" for the margin's, "cusum_" for
// the CUSUM limit's).
void put_fit(nlohmann::json& d, const std::string& prefix, const ExtremeFit& f) {
    const std::pair<const char*, double> values[] = {
        {"cycle_max_mean", f.mean},           {"cycle_max_sd", f.sd},
        {"cycle_max_largest", f.largest},     {"gumbel_mu", f.gumbel_mu},
        {"gumbel_beta", f.gumbel_beta},       {"gumbel_scale_factor", f.gumbel_scale_factor},
        {"gumbel_quantile", f.gumbel_quantile}, {"tail_threshold", f.tail_threshold},
        {"tail_scale", f.tail_scale},         {"tail_scale_factor", f.tail_scale_factor},
        {"tail_quantile", f.tail_quantile}};
    for (const auto& [key, value] : values) d[prefix + key] = value;
    d[prefix + "tail_exceedances"] = f.tail_exceedances;  // a count: stays an integer in the file
}

// The calibration cycles that set the margin and the CUSUM limit: the three with the largest
// split-half maxima of each, named by file and the robot's cycle counter, largest CUSUM first, so
// that a user can look at what happened in them (on a live UR5e-like recording of 20 cycles, four
// cycles with one- to three-sample torque jumps set a CUSUM limit of 5.10 where the suite's 100
// cycles of the task give 2.30; docs/detection.md).
nlohmann::json widest_cycles(const nlohmann::json& derivation, const std::vector<std::pair<std::string, std::int64_t>>& names) {
    const auto ratio = derivation.at("cycle_maxima").get<std::vector<double>>();
    const auto cusum = derivation.at("cusum_cycle_maxima").get<std::vector<double>>();
    std::vector<std::size_t> by_ratio(ratio.size()), by_cusum(cusum.size());
    for (std::size_t c = 0; c < ratio.size(); ++c) by_ratio[c] = by_cusum[c] = c;
    const std::size_t k = std::min<std::size_t>(3, ratio.size());
    std::partial_sort(by_ratio.begin(), by_ratio.begin() + static_cast<std::ptrdiff_t>(k), by_ratio.end(),
                      [&](std::size_t a, std::size_t b) { return ratio[a] > ratio[b]; });
    std::partial_sort(by_cusum.begin(), by_cusum.begin() + static_cast<std::ptrdiff_t>(k), by_cusum.end(),
                      [&](std::size_t a, std::size_t b) { return cusum[a] > cusum[b]; });
    std::vector<std::size_t> chosen(by_cusum.begin(), by_cusum.begin() + static_cast<std::ptrdiff_t>(k));
    for (std::size_t i = 0; i < k; ++i) {
        if (std::find(chosen.begin(), chosen.end(), by_ratio[i]) == chosen.end()) chosen.push_back(by_ratio[i]);
    }
    nlohmann::json out = nlohmann::json::array();
    for (const std::size_t c : chosen) {
        out.push_back({{"file", names.at(c).first}, {"cycle", names.at(c).second}, {"ratio", ratio[c]}, {"cusum", cusum[c]}});
    }
    return out;
}

PhaseAwareSettings calibrate_phase_aware(const Profile& profile, const CalibrationOptions& options,
                                         const std::vector<std::vector<PhaseObservation>>& observed,
                                         const std::vector<std::uint32_t>& cycle_of, std::uint32_t cycles,
                                         const std::vector<double>& floors, const CycleTwins& twins) {
    if (cycles < 10) {
        throw std::invalid_argument(fmt::format("the phase-aware detector needs >= 10 complete nominal cycles to calibrate "
                                                "its margin, got {}; record more cycles", cycles));
    }
    const std::size_t n = profile.reference.size();
    const std::size_t joints = profile.joints;
    PhaseAwareSettings s;
    s.neighbourhood = options.neighbourhood ? options.neighbourhood : profile.window;
    s.persistence = options.persistence;

    // Split halves (calibration_halves): each half's thresholds judge the other half's cycles. Per cycle, over all joints: the largest
    // ratio held for `persistence` samples in a row, and the largest CUSUM of the ratio.
    s.cusum_reference = options.cusum_reference;
    std::vector<double> cycle_max(cycles, 0.0), cycle_cusum(cycles, 0.0);
    const std::vector<std::uint8_t> halves = calibration_halves(cycles);
    for (int half = 0; half < 2; ++half) {
        for (std::size_t j = 0; j < joints; ++j) {
            const auto th = pooled_maximum(observed[j], cycle_of, halves, n, s.neighbourhood, half, floors[j], twins);
            std::vector<double> recent(s.persistence, 0.0);
            std::size_t filled = 0;
            double cusum = 0;
            std::uint32_t current = kNoCycle;
            for (std::size_t k = 0; k < observed[j].size(); ++k) {
                const std::uint32_t c = cycle_of[k];
                if (c == kNoCycle || halves[c] == half) {
                    filled = 0;
                    cusum = 0;
                    continue;
                }
                if (c != current) filled = 0, cusum = 0, current = c;
                const double r = std::abs(observed[j][k].deviation) / th[observed[j][k].partner];
                recent[filled % s.persistence] = r;
                ++filled;
                if (filled >= s.persistence) {
                    cycle_max[c] = std::max(cycle_max[c], *std::min_element(recent.begin(), recent.end()));
                }
                cusum = std::max(0.0, cusum + r - s.cusum_reference);
                cycle_cusum[c] = std::max(cycle_cusum[c], cusum);
            }
        }
    }
    // Each rule gets half of the false-stop budget.
    const ExtremeFit ratio_fit = fit_cycle_maxima(cycle_max, 2 * options.target_cycles_per_false_stop);
    const ExtremeFit cusum_fit = fit_cycle_maxima(cycle_cusum, 2 * options.target_cycles_per_false_stop);
    s.margin = ratio_fit.limit(1.0);
    s.cusum_limit = options.cusum_reference > 0 ? cusum_fit.limit(1e-9) : 0.0;

    s.rule1.resize(joints);
    std::size_t updates = 0;
    for (std::size_t j = 0; j < joints; ++j) {
        s.rule1[j] = pooled_maximum(observed[j], cycle_of, halves, n, s.neighbourhood, -1, floors[j], twins);
        for (double& v : s.rule1[j]) v *= s.margin;
    }
    for (auto c : cycle_of) updates += c != kNoCycle;
    // Drift: the friction model forgets with a time constant of `drift_cycles` cycles of samples.
    const double per_cycle = static_cast<double>(updates) / cycles;
    s.drift_rate = options.drift_cycles > 0 ? std::min(0.5, 1.0 / (options.drift_cycles * std::max(per_cycle, 1.0))) : 0.0;
    s.derivation = {{"method", "per reference sample: largest nominal |deviation| within +- neighbourhood, times margin"},
                    {"cycles", cycles},
                    {"split", "halves kept even over every class of cycles c mod 2..8 (calibration_halves); each half judges the other"},
                    {"target_cycles_per_false_stop", options.target_cycles_per_false_stop},
                    {"cusum_reference", s.cusum_reference},
                    {"cycle_maxima", cycle_max},
                    {"cusum_cycle_maxima", cycle_cusum},
                    {"drift_cycles", options.drift_cycles},
                    {"samples_per_cycle", per_cycle}};
    put_fit(s.derivation, "", ratio_fit);
    put_fit(s.derivation, "cusum_", cusum_fit);
    return s;
}

// The declared-payload model from the jumps of the signal where the declared payload changes while
// the robot stands (a part grasped or released): there joint j's signal changes by
//   k_j x (z_j x (p - o_j)) . f,   f = -g x (change of mass),   p = o_n + R_n c
// and nothing else changes. Linear in the part's centre of mass c (in the last DH frame):
// a_j + b_j . c with a_j = (z_j x (o_n - o_j)) . f and b_j = R_n^T (f x z_j). With the signal in Nm
// (k_j = 1) c is a linear least-squares fit over every joint and change; in percent of rated torque
// the scale k_j per joint is fitted too (alternating least squares; a joint keeps its scale only when
// it is known to 25 %).
PayloadModel fit_payload_model(const DhModel& model, std::span<const NamedRecording* const> recordings, SignalUnit unit,
                               const Eigen::Vector3d& gravity) {
    // Documented defaults: the robot stands when no joint moves more than 1e-5 rad between samples
    // (a few encoder counts) from 5 samples before the change to 5 after it; the level before is the
    // median of the 5 samples before, the level after the median of the 5 samples after. A change
    // the motion follows at once is left out: the start of the move adds its own torque (measured on
    // the IRB120-like pick-and-place: the grasp, with the lift starting a sample later, jumped
    // 1.8x the part's weight on joint 2; the releases within 3 %).
    constexpr std::size_t kBefore = 5, kAfter = 5;
    constexpr double kStill = 1e-5;
    const std::size_t n = model.dof();
    struct Change {
        Eigen::VectorXd jump, a;
        Eigen::MatrixXd b;  // n x 3
    };
    std::vector<Change> changes;
    std::vector<Eigen::Isometry3d> frames(n + 2);
    std::vector<double> q(n), window;
    const auto median = [&](const std::vector<double>& values, std::size_t from, std::size_t to) {
        window.assign(values.begin() + static_cast<std::ptrdiff_t>(from), values.begin() + static_cast<std::ptrdiff_t>(to));
        std::nth_element(window.begin(), window.begin() + static_cast<std::ptrdiff_t>(window.size() / 2), window.end());
        return window[window.size() / 2];
    };
    for (const NamedRecording* named : recordings) {
        const Recording& rec = *named->recording;
        if (!rec.declares_payload()) continue;
        for (std::size_t i = kBefore + 1; i + kAfter < rec.size(); ++i) {
            const double dm = rec.payload[i] - rec.payload[i - 1];
            if (dm == 0.0) continue;
            bool still = true;
            for (std::size_t j = 0; j < n && still; ++j) {
                for (std::size_t k = i - kBefore; k <= i + kAfter && still; ++k) still = std::abs(rec.q[j][k] - rec.q[j][k - 1]) <= kStill;
            }
            if (!still) continue;
            for (std::size_t j = 0; j < n; ++j) q[j] = rec.q[j][i];
            model.forward(q, frames);
            const Eigen::Vector3d f = -gravity * dm;
            const Eigen::Vector3d on = frames[n].translation();
            const Eigen::Matrix3d rn = frames[n].linear();
            Change c{Eigen::VectorXd(n), Eigen::VectorXd(n), Eigen::MatrixXd::Zero(n, 3)};
            for (std::size_t j = 0; j < n; ++j) {
                const Eigen::Vector3d z = frames[j].linear().col(2);
                const auto row = static_cast<Eigen::Index>(j);
                if (model.joints()[j].type == JointType::Revolute) {
                    c.a(row) = z.cross(on - frames[j].translation()).dot(f);
                    c.b.row(row) = (rn.transpose() * f.cross(z)).transpose();
                } else {
                    c.a(row) = z.dot(f);
                }
                c.jump(row) = median(rec.tau[j], i + 1, i + kAfter + 1) - median(rec.tau[j], i - kBefore, i);
            }
            changes.push_back(std::move(c));
        }
    }
    PayloadModel out;
    out.gravity = gravity;
    const bool nm = unit == SignalUnit::Nm;
    std::vector<double> scale(n, 1.0), error(n, 0.0);
    std::vector<bool> believed(n, nm);
    const Eigen::Vector3d prior(0.0, 0.0, model.tool().translation().z());
    Eigen::Vector3d centre = prior;
    std::array<double, 3> singular{0.0, 0.0, 0.0};
    std::array<bool, 3> fitted{false, false, false};
    Eigen::Matrix3d directions = Eigen::Matrix3d::Identity();
    int excited = 0;
    double rms = 0;
    const auto fit_centre = [&] {
        // min over c of sum (jump - k (a + b c))^2 over the joints whose scale is believed.
        Eigen::Matrix3d ata = Eigen::Matrix3d::Zero();
        Eigen::Vector3d atb = Eigen::Vector3d::Zero();
        for (const auto& c : changes) {
            for (std::size_t j = 0; j < n; ++j) {
                if (!believed[j]) continue;
                const auto row = static_cast<Eigen::Index>(j);
                const Eigen::Vector3d x = scale[j] * c.b.row(row).transpose();
                ata += x * x.transpose();
                atb += x * (c.jump(row) - scale[j] * c.a(row));
            }
        }
        // Only the directions the changes excite: moving the mass along the line of its weight
        // changes no torque at a standstill, so a robot that always grasps and releases with the
        // tool pointing down cannot tell how far along its axis the part hangs. Directions with a
        // singular value under 1 % of the largest keep the prior: the foot of the model's tool
        // point on the last joint's axis (a gripped part hangs on the flange's axis; the model's
        // tool point is the TCP, or the identification's tracked point).
        const Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> eig(ata);
        const double top = eig.eigenvalues().maxCoeff();
        centre = prior;
        const Eigen::Vector3d rest = atb - ata * prior;
        excited = 0;
        directions = eig.eigenvectors();
        for (int k = 0; k < 3; ++k) {
            const double lambda = eig.eigenvalues()(k);
            singular[static_cast<std::size_t>(k)] = std::sqrt(std::max(lambda, 0.0));
            fitted[static_cast<std::size_t>(k)] = top > 0 && lambda >= 1e-4 * top;
            if (!fitted[static_cast<std::size_t>(k)]) continue;
            const Eigen::Vector3d v = eig.eigenvectors().col(k);
            centre += v * (v.dot(rest) / lambda);
            ++excited;
        }
    };
    const auto fit_scales = [&] {
        for (std::size_t j = 0; j < n; ++j) {
            double su = 0, uu = 0, ss = 0;
            for (const auto& c : changes) {
                const auto row = static_cast<Eigen::Index>(j);
                const double u = c.a(row) + c.b.row(row).dot(centre);
                su += c.jump(row) * u, uu += u * u, ss += c.jump(row) * c.jump(row);
            }
            if (changes.size() < 2 || !(uu > 0)) {
                believed[j] = nm;
                continue;
            }
            const double k = su / uu;
            error[j] = std::sqrt(std::max(0.0, ss - k * su) / static_cast<double>(changes.size() - 1) / uu);
            if (!nm) {
                scale[j] = k;
                believed[j] = k > 0 && error[j] <= 0.25 * k;
            } else {
                scale[j] = 1.0;
                error[j] = error[j];
            }
        }
    };
    std::vector<double> measured(n, 0.0);
    std::vector<bool> modelled(n, false);  // the model gives the joint a torque at some change
    std::size_t usable = 0;
    if (changes.size() >= 2) {
        if (!nm) {
            // Start from the centre at the last frame's origin, every joint believed at its own fit.
            std::fill(believed.begin(), believed.end(), true);
            fit_scales();
            for (int iteration = 0; iteration < 20; ++iteration) {
                fit_centre();
                fit_scales();
            }
        } else {
            fit_centre();
            fit_scales();
        }
        // The residual after the fit, and each joint's own scale at the fitted centre (a check in Nm).
        double sum = 0;
        std::size_t count = 0;
        for (std::size_t j = 0; j < n; ++j) {
            double su = 0, uu = 0;
            for (const auto& c : changes) {
                const auto row = static_cast<Eigen::Index>(j);
                const double u = c.a(row) + c.b.row(row).dot(centre);
                su += c.jump(row) * u, uu += u * u;
                if (believed[j]) {
                    const double r = c.jump(row) - scale[j] * u;
                    sum += r * r, ++count;
                }
            }
            measured[j] = uu > 0 ? su / uu : 0.0;
            modelled[j] = uu > 0;
            usable += believed[j] ? 1 : 0;
        }
        rms = count ? std::sqrt(sum / static_cast<double>(count)) : 0.0;
    }
    for (std::size_t j = 0; j < n; ++j) out.signal_per_nm.push_back(believed[j] && changes.size() >= 2 ? scale[j] : 0.0);
    // A joint whose jumps show its scale (known to 25 %, as a scale in percent must be) has its own
    // relative error. One they cannot show (the model gives it no torque at any change, or too
    // little to tell its scale: the vertical base axis, about which a weight has no torque; a
    // wrist axis the part hangs on) is still given the same point mass at the same centre:
    // it takes the largest relative error of the joints that show one (the declared mass and the
    // kinematics are the same for every joint), and the centre's uncertainty below adds what it
    // does to that joint. Without any such joint, or without the centre's uncertainty: 1, the
    // whole difference forgiven (measured, UR5e-like: base and wrist joints came out at 1.0,
    // standard errors of their scale 437 / 2.1 / 1064 against 0.006-0.008 on joints 2-4).
    std::vector<bool> shows(n, false);
    double largest = -1.0;
    for (std::size_t j = 0; j < n; ++j) {
        double e = 1.0;
        if (out.signal_per_nm[j] > 0) {
            e = nm ? std::abs(measured[j] - 1.0) + 2.0 * error[j] : 2.0 * error[j] / out.signal_per_nm[j];
        }
        e = std::clamp(std::isfinite(e) ? e : 1.0, 0.0, 1.0);
        shows[j] = modelled[j] && out.signal_per_nm[j] > 0 && std::isfinite(error[j]) && error[j] <= 0.25 * out.signal_per_nm[j];
        if (shows[j]) largest = std::max(largest, e);
        out.relative_error.push_back(e);
    }
    // The centre's uncertainty: along each direction the changes excite, two standard errors of
    // the fit (the jump residual over the square root of that direction's eigenvalue); along one
    // they cannot see, the distance from the last joint's axis point to the prior centre (the part
    // hangs from the tool; how far beyond it its centre lies is not known, and the last link is the
    // scale of a tool and its part). Only with a residual from at least 3 changes.
    if (changes.size() >= 3 && excited > 0 && n >= 1) {
        std::vector<double> zero(n, 0.0);
        std::vector<Eigen::Isometry3d> at_zero(n + 2);
        model.forward(zero, at_zero);
        const double link = (at_zero[n] * prior - at_zero[n - 1].translation()).norm();
        for (int k = 0; k < 3; ++k) {
            const auto kk = static_cast<std::size_t>(k);
            const double reach = fitted[kk] ? 2.0 * rms / singular[kk] : link;
            out.centre_uncertainty.push_back(directions.col(k) * reach);
        }
        if (largest >= 0) {
            for (std::size_t j = 0; j < n; ++j) {
                if (!shows[j] && out.signal_per_nm[j] > 0) out.relative_error[j] = largest;
            }
        }
    }
    const bool ok = changes.size() >= 3 && usable > 0;
    Eigen::Isometry3d tool = Eigen::Isometry3d::Identity();
    tool.translation() = centre;
    out.model = DhModel(model.joints(), tool, model.base());
    out.derivation = {{"method", "a point mass at c (last DH frame): torques J_p(q)^T m (a - g); c (and the signal per Nm unless "
                                 "the signal is in Nm) fitted to the signal's jumps at declared payload changes while the robot stands"},
                      {"payload_changes_while_standing", changes.size()},
                      {"centre_of_mass", {centre.x(), centre.y(), centre.z()}},
                      {"centre_prior", {prior.x(), prior.y(), prior.z()}},
                      {"centre_singular_values", singular},
                      {"centre_directions_fitted", excited},
                      {"jump_rms_residual", rms},
                      {"measured_signal_per_nm", measured},
                      {"standard_error", error},
                      {"relative_error", out.relative_error},
                      {"error_shown_by_joints", [&] {
                           std::vector<std::size_t> joints;
                           for (std::size_t j = 0; j < n; ++j) {
                               if (shows[j]) joints.push_back(j + 1);
                           }
                           return joints;
                       }()},
                      {"centre_uncertainty_m", [&] {
                           std::vector<double> reach;
                           for (const auto& u : out.centre_uncertainty) reach.push_back(u.norm());
                           return reach;
                       }()},
                      {"usable", ok},
                      {"note", ok ? fmt::format("fitted from {} payload changes while standing: centre of mass ({:.4f}, {:.4f}, {:.4f}) m in the "
                                                "last frame, {} of {} joints compensated, jump residual {:.3g}",
                                                changes.size(), centre.x(), centre.y(), centre.z(), usable, n, rms)
                                  : fmt::format("not modelled: {} payload changes while the robot stands (needs >= 3 that give a scale)",
                                                changes.size())}};
    return out;
}

}  // namespace

namespace {

// The deviation of a recording from the arm model, as the detector computes it; an error names the file.
Recording arm_deviation_of(const ArmDynamics& arm, const NamedRecording& named) {
    try {
        return causal_arm_deviation(arm, *named.recording);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(fmt::format("{}: {}", named.name, e.what()));
    }
}

// calibrate() with an arm model: everything measured on the recordings' deviation from it.
Profile calibrate_on_arm_deviation(const NamedRecording& reference, std::span<const NamedRecording> nominal,
                                   const CalibrationOptions& options) {
    const ArmDynamics& arm = *options.arm;
    const Recording reference_deviation = arm_deviation_of(arm, reference);
    std::vector<Recording> deviations;
    deviations.reserve(nominal.size());
    for (const auto& nom : nominal) {
        if (!nom.recording) throw std::invalid_argument(fmt::format("{}: no recording", nom.name));
        deviations.push_back(arm_deviation_of(arm, nom));
    }
    std::vector<NamedRecording> named;
    for (std::size_t k = 0; k < nominal.size(); ++k) named.push_back({nominal[k].name, &deviations[k]});
    CalibrationOptions inner = options;
    inner.arm.reset();
    inner.removed_coulomb.resize(arm.model.dof(), 0.0);
    for (std::size_t j = 0; j < inner.removed_coulomb.size(); ++j) inner.removed_coulomb[j] += arm_coulomb(arm, j);
    Profile profile = calibrate({reference.name, &reference_deviation}, named, inner);
    profile.arm = arm;
    profile.calibration["arm_model"] = {
        {"signal", fmt::format("deviation from the arm model: the signal less the arm's expected {} at the sample's angles, "
                               "with velocities and accelerations from a polynomial of order {} fitted to the newest {} samples",
                               to_string(arm.unit), arm.causal_order, arm.causal_samples)},
        {"dry_run_samples", arm.derivation.value("samples", 0)},
        {"dry_runs", arm.derivation.value("dry_runs", 0)}};
    profile.validate();
    return profile;
}

// A process force at rest shows as an arm deviation at rest far larger than in motion. Measured with
// the arm fitted on the moving samples (largest ratio over the joints): the suite's contact tasks
// 6.8 / 13.0 / 11.2 (UR5e- / IRB120- / VP-6242-like; the pressing and screwing joints), their
// pick-and-places 1.4 / 2.7 / 2.0 (at rest the model holds no dry friction, which the joints do).
// 4 is the default, between the two.
constexpr double kRestForceRatio = 4.0;

// Per joint: the rms arm deviation over the samples at rest, over that in motion (the rest criterion
// of fit_arm_dynamics: summed squared joint velocity at most 10^-3 of its 95th percentile).
std::vector<double> rest_to_motion_deviation(const ArmDynamics& arm, std::span<const Recording* const> runs) {
    const std::size_t n = arm.model.dof();
    std::vector<std::vector<double>> motion;
    const double moving = rest_motion_bound(runs, &motion);
    std::vector<double> ratio(n, 0.0);
    if (moving < 0) return ratio;
    std::vector<double> rest_sq(n, 0.0), move_sq(n, 0.0);
    std::size_t rest_count = 0, move_count = 0;
    for (std::size_t r = 0; r < runs.size(); ++r) {
        const Recording dev = arm_deviation(arm, *runs[r]);
        for (std::size_t i = 0; i < dev.size(); ++i) {
            const bool at_rest = !(motion[r][i] > moving);
            for (std::size_t j = 0; j < n; ++j) (at_rest ? rest_sq : move_sq)[j] += dev.tau[j][i] * dev.tau[j][i];
            ++(at_rest ? rest_count : move_count);
        }
    }
    if (rest_count == 0 || move_count == 0) return ratio;
    for (std::size_t j = 0; j < n; ++j) {
        const double move_rms = std::sqrt(move_sq[j] / static_cast<double>(move_count));
        ratio[j] = move_rms > 0 ? std::sqrt(rest_sq[j] / static_cast<double>(rest_count)) / move_rms : 0.0;
    }
    return ratio;
}

// calibrate() with the arm model fitted on the nominal recordings (CalibrationOptions::arm_from_nominal).
Profile calibrate_with_arm_from_nominal(const NamedRecording& reference, std::span<const NamedRecording> nominal,
                                        const CalibrationOptions& options) {
    if (!options.dynamics_model && !options.kinematics) {
        throw std::invalid_argument("fitting the arm model on the nominal recordings needs the robot's kinematic model (--model)");
    }
    const DhModel& model = options.dynamics_model ? *options.dynamics_model : options.kinematics->model;
    const Recording& ref_rec = *reference.recording;
    if (ref_rec.info().signal != SignalKind::Torque) {
        throw std::invalid_argument(fmt::format("the arm model needs a signed torque signal; {} has '{}'", reference.name,
                                                to_string(ref_rec.info().signal)));
    }
    for (const auto& nom : nominal) {
        if (!nom.recording) throw std::invalid_argument(fmt::format("{}: no recording", nom.name));
        check_compatible(reference, nom);
    }
    // The declared payload's torque off first: the arm model has no load per stretch, and a part
    // carried in half the cycle would otherwise be spread over the links' parameters. A load the
    // recordings do not declare, or one whose changes cannot be modelled, is unknown: the arm model
    // cannot follow it, and the signal is matched as recorded (measured on a live UR5e-like
    // recording whose program did not declare its part: CUSUM limit 4.89 on the deviation against
    // 1.82 on the torques; docs/detection.md, *The arm model from the calibration recordings*).
    const auto as_recorded = [&](const std::string& why) {
        CalibrationOptions inner = options;
        inner.arm_from_nominal = false;
        Profile profile = calibrate(reference, nominal, inner);
        profile.calibration["arm_model"] = {{"fitted_on", nullptr}, {"not_fitted", why}};
        return profile;
    };
    if (!ref_rec.declares_payload()) {
        return as_recorded("the recordings do not declare the payload: a part the robot carries is unknown to an arm model, so the "
                           "signal is matched as recorded");
    }
    const auto varies = [&](const Recording& r) {
        return std::any_of(r.payload.begin(), r.payload.end(), [&](double m) { return m != ref_rec.payload.front(); });
    };
    bool changes = varies(ref_rec);
    for (const auto& nom : nominal) {
        if (!nom.recording->declares_payload()) {
            return as_recorded(fmt::format("{} does not declare the payload: a part the robot carries is unknown to an arm model, so the "
                                           "signal is matched as recorded",
                                           nom.name));
        }
        changes = changes || varies(*nom.recording);
    }
    std::string payload_note = fmt::format("the declared payload never changes ({} kg): the arm model carries it", ref_rec.payload.front());
    std::optional<PayloadModel> payload;
    if (changes) {
        std::vector<const NamedRecording*> recordings{&reference};
        for (const auto& nom : nominal) recordings.push_back(&nom);
        PayloadModel fitted = fit_payload_model(model, recordings, ref_rec.info().unit, options.gravity);
        if (!fitted.derivation.value("usable", false)) {
            return as_recorded(fmt::format("the declared payload changes but its torque cannot be modelled ({}), so the signal is matched "
                                           "as recorded",
                                           fitted.derivation.value("note", std::string("not usable"))));
        }
        payload = std::move(fitted);
        payload_note = "each recording less its declared payload's torque (the payload model fitted on their jumps)";
    }
    std::vector<Recording> unloaded;
    unloaded.reserve(nominal.size());
    for (const auto& nom : nominal) {
        unloaded.push_back(payload ? unload_payload(*payload, *nom.recording) : *nom.recording);  // every one declares it (above)
    }
    std::vector<const Recording*> runs;
    for (const auto& r : unloaded) runs.push_back(&r);
    CalibrationOptions inner = options;
    inner.arm_from_nominal = false;
    // The recordings are the task's own: where the robot stands it may hold a process force (a
    // press, a screw) that no arm parameter explains, or nothing but the arm (a pick-and-place's
    // waits). So the arm is fitted where it moves first (RestSamples, dynamics.hpp), and asked what
    // it makes of the rest: where every joint's deviation at rest stays within kRestForceRatio of
    // its deviation in motion (rms), the rest holds nothing but the arm and is fitted too (on the
    // moving samples alone the IRB120-like pick-and-place calibrated on 12 cycles stopped twice in 4
    // nominal cycles, CUSUM 3.56 and 3.70 against 3.52, a joint resting at the cycle's end).
    inner.arm = fit_arm_dynamics(model, runs, options.gravity, 60000, RestSamples::LeaveOut);
    {
        const std::vector<double> ratio = rest_to_motion_deviation(*inner.arm, runs);
        const bool process_force = std::any_of(ratio.begin(), ratio.end(), [](double r) { return !(r <= kRestForceRatio); });
        if (!process_force) inner.arm = fit_arm_dynamics(model, runs, options.gravity, 60000, RestSamples::Keep);
        inner.arm->derivation["rest_to_motion_deviation"] = ratio;
        inner.arm->derivation["rest_samples"] =
            process_force ? fmt::format("left out: a joint deviates at rest by over {} times its deviation in motion (a process force)", kRestForceRatio)
                          : fmt::format("fitted: every joint deviates at rest by at most {} times its deviation in motion", kRestForceRatio);
    }
    inner.arm->derivation["fitted_on"] = fmt::format("the {} nominal recording(s) of the calibration, not a dry run", nominal.size());
    inner.arm->derivation["payload"] = payload_note;
    Profile profile = calibrate(reference, nominal, inner);
    profile.calibration["arm_model"]["fitted_on"] = inner.arm->derivation["fitted_on"];
    profile.calibration["arm_model"]["payload"] = payload_note;
    return profile;
}

}  // namespace

bool arm_from_nominal_applies(const CalibrationOptions& options, const Recording& reference) {
    return (options.dynamics_model || options.kinematics) && options.detector == DetectorKind::PhaseAware &&
           reference.info().signal == SignalKind::Torque;
}

std::pair<std::size_t, std::size_t> reference_run(const NamedRecording& reference, const UnbrokenRuns& runs, std::size_t cycles,
                                                  std::size_t extra) {
    const Recording& rec = *reference.recording;
    const std::size_t wanted = std::max(cycles, kMinReferenceCycles) + extra;
    std::pair<std::size_t, std::size_t> best{0, 0};
    std::size_t best_cycles = 0;
    for (const auto& run : runs.runs) {
        // Complete cycles inside the run: those between two of its counter changes.
        std::size_t changes = 0;
        for (std::size_t i = run.first + 1; i < run.second; ++i) changes += rec.cycle[i] != rec.cycle[i - 1];
        const std::size_t complete = changes > 0 ? changes - 1 : 0;
        if (cycles > 0 && complete >= wanted) return run;
        if (complete > best_cycles) best = run, best_cycles = complete;
    }
    if (cycles == 0 && best_cycles >= wanted) return best;
    std::string list;
    for (const auto& i : runs.interruptions) {
        if (list.size() > 600) {
            list += "; …";
            break;
        }
        list += fmt::format("{}rows {}: {}", list.empty() ? "" : "; ", i.begin, i.what);
    }
    throw std::invalid_argument(fmt::format("{}: the reference needs {} complete cycles{} in one unbroken stretch of the recording; the "
                                            "longest has {} (interrupted at {}); record again without stops or lost samples",
                                            reference.name, std::max(cycles, kMinReferenceCycles),
                                            extra > 0 ? fmt::format(" and {} more for the thresholds", extra) : std::string(), best_cycles,
                                            list.empty() ? "no row" : list));
}

nlohmann::json interruptions_to_json(const std::string& name, const UnbrokenRuns& runs) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& i : runs.interruptions) out.push_back({{"file", name}, {"row", i.begin}, {"rows", i.end - i.begin}, {"what", i.what}});
    return out;
}

nlohmann::json interruptions_record(const nlohmann::json& list, const std::string& reference_name, std::size_t reference_begin,
                                    std::size_t reference_end, std::size_t nominal_runs) {
    return {{"list", list},
            {"reference_run", {reference_begin, reference_end}},
            {"note", fmt::format("{} interruption(s) (the robot held, or samples missing): the reference was cut from the unbroken run "
                                 "at rows {}-{} of {}, "
                                 "and the thresholds learnt on {} unbroken run(s) of the nominal recordings, the detector started afresh "
                                 "at each as in operation after a stop or a reconnect",
                                 list.size(), reference_begin, reference_end - 1, reference_name, nominal_runs)}};
}

namespace {

// calibrate() on the unbroken runs of interrupted recordings (calibration.hpp).
Profile calibrate_unbroken(const NamedRecording& reference, const UnbrokenRuns& ref_runs, std::span<const NamedRecording> nominal,
                           const std::vector<UnbrokenRuns>& nominal_runs, const CalibrationOptions& options) {
    const auto [ref_begin, ref_end] = reference_run(reference, ref_runs, options.reference_cycles);
    const Recording ref_piece = reference.recording->slice(ref_begin, ref_end);
    std::vector<Recording> pieces;
    std::vector<std::string> names;
    for (std::size_t k = 0; k < nominal.size(); ++k) {
        for (const auto& [b, e] : nominal_runs[k].runs) {
            pieces.push_back(nominal[k].recording->slice(b, e));
            names.push_back(nominal_runs[k].interruptions.empty() ? nominal[k].name : fmt::format("{} (rows {}-{})", nominal[k].name, b, e - 1));
        }
    }
    if (pieces.empty()) throw std::invalid_argument("the nominal recordings hold no sample the robot sent while it worked (every one is held)");
    std::vector<NamedRecording> named;
    for (std::size_t k = 0; k < pieces.size(); ++k) named.push_back({names[k], &pieces[k]});
    Profile profile = calibrate(NamedRecording{reference.name, &ref_piece}, named, options);
    profile.reference.first_sample += ref_begin;
    nlohmann::json list = interruptions_to_json(reference.name, ref_runs);
    for (std::size_t k = 0; k < nominal.size(); ++k) {
        for (auto& i : interruptions_to_json(nominal[k].name, nominal_runs[k])) {
            if (std::find(list.begin(), list.end(), i) == list.end()) list.push_back(std::move(i));  // a file given in both roles: once
        }
    }
    profile.calibration["interruptions"] = interruptions_record(list, reference.name, ref_begin, ref_end, pieces.size());
    return profile;
}

}  // namespace

Profile calibrate(const NamedRecording& reference, std::span<const NamedRecording> nominal,
                  const CalibrationOptions& options) {
    if (!reference.recording) throw std::invalid_argument("no reference recording given");
    if (nominal.empty()) {
        throw std::invalid_argument("calibration needs at least one held-out nominal recording besides the reference");
    }
    {
        const UnbrokenRuns ref_runs = reference.recording->unbroken_runs();
        bool interrupted = !ref_runs.interruptions.empty();
        std::vector<UnbrokenRuns> nominal_runs;
        for (const auto& nom : nominal) {
            if (!nom.recording) throw std::invalid_argument(fmt::format("{}: no recording given", nom.name));
            nominal_runs.push_back(nom.recording->unbroken_runs());
            interrupted = interrupted || !nominal_runs.back().interruptions.empty();
        }
        if (interrupted) return calibrate_unbroken(reference, ref_runs, nominal, nominal_runs, options);
    }
    if (!(options.k_sigma > 0)) throw std::invalid_argument(fmt::format("k must be > 0, got {}", options.k_sigma));
    if (!(options.rule2_margin >= 1)) {
        throw std::invalid_argument(fmt::format("rule-2 margin must be >= 1, got {}", options.rule2_margin));
    }
    if (options.arm) return calibrate_on_arm_deviation(reference, nominal, options);
    if (options.arm_from_nominal) return calibrate_with_arm_from_nominal(reference, nominal, options);
    const Recording& ref_rec = *reference.recording;
    if (!options.removed_coulomb.empty() && options.removed_coulomb.size() != ref_rec.joints()) {
        throw std::invalid_argument(fmt::format("removed dry friction has {} values; expected one per joint of {} ({})",
                                                options.removed_coulomb.size(), reference.name, ref_rec.joints()));
    }
    for (std::size_t j = 0; j < options.removed_coulomb.size(); ++j) {
        if (!(options.removed_coulomb[j] >= 0) || !std::isfinite(options.removed_coulomb[j])) {
            throw std::invalid_argument(
                fmt::format("joint {}: removed dry friction is {}; expected a finite value >= 0", j + 1, options.removed_coulomb[j]));
        }
    }
    for (const auto& nom : nominal) check_compatible(reference, nom);

    Profile profile;
    profile.robot = ref_rec.info().robot;
    profile.joints = ref_rec.joints();
    profile.signal = ref_rec.info().signal;
    profile.unit = ref_rec.info().unit;
    profile.window = options.window;
    profile.method = options.method;
    profile.kinematics = options.kinematics;
    // The reference cycles, and whether they cover the nominal cycles' joint paths. KA-mDTW is for
    // tasks that vary: it matches other variants by their lever lengths (thesis §4.4-4.5), so its
    // automatic reference is the minimum and cycles elsewhere are expected, not a fault.
    const bool ka = options.method == MatchingMethod::KaMdtw;
    ReferenceCoverage coverage =
        choose_reference_cycles(reference, nominal, options.reference_cycles == 0 && ka ? kMinReferenceCycles : options.reference_cycles);
    if (ka && coverage.uncovered > 0) {
        coverage.automatic = options.reference_cycles == 0;
        coverage.note = fmt::format("KA-mDTW: {} of {} nominal cycles go where the reference's {} cycles never do (farthest {:.3f} rad, joint {}) — "
                                    "expected for a task that varies; KA-mDTW matches them by their lever lengths",
                                    coverage.uncovered, coverage.cycles, coverage.reference_cycles, coverage.worst_distance, coverage.worst_joint);
    }
    profile.reference = cut_reference(ref_rec, reference.name, coverage.reference_cycles);
    if (options.method == MatchingMethod::KaMdtw && !options.kinematics) {
        throw std::invalid_argument("KA-mDTW needs a kinematic model and a force direction");
    }
    std::string ka_unscaled;
    if (options.method == MatchingMethod::KaMdtw && profile.kinematics->scaled_joints.empty()) {
        // Which joints the force direction gives a lever over the whole reference (§4.5).
        auto& k = *profile.kinematics;
        if (k.model.dof() != profile.joints) {
            throw std::invalid_argument(fmt::format("the kinematic model has {} joints; {} has {}", k.model.dof(), reference.name, profile.joints));
        }
        std::vector<double> q(profile.joints), lever(profile.joints), smallest(profile.joints, std::numeric_limits<double>::infinity());
        for (std::size_t s = 0; s < profile.reference.size(); ++s) {
            for (std::size_t j = 0; j < profile.joints; ++j) q[j] = profile.reference.q[j][s];
            equivalent_lever_lengths(k.model, q, k.force, lever);
            for (std::size_t j = 0; j < profile.joints; ++j) smallest[j] = std::min(smallest[j], lever[j]);
        }
        std::string unscaled;
        for (std::size_t j = 0; j < profile.joints; ++j) {
            if (smallest[j] >= k.min_lever) {
                k.scaled_joints.push_back(j);
            } else {
                unscaled += fmt::format("{}{} ({:.4f} m)", unscaled.empty() ? "" : ", ", j + 1, smallest[j]);
            }
        }
        if (k.scaled_joints.empty()) {
            throw std::invalid_argument(fmt::format("KA-mDTW: no joint of {} keeps a lever length above {} m over the whole reference "
                                                    "for this force direction; choose another direction or use mdtw",
                                                    reference.name, k.min_lever));
        }
        ka_unscaled = unscaled.empty() ? "none" : unscaled;
    }

    // Run the detector with open thresholds over every nominal sample, as in operation.
    profile.thresholds.assign(profile.joints, JointThresholds{});
    for (auto& th : profile.thresholds) {
        th.rule1.value = std::numeric_limits<double>::infinity();
        th.rule2.value = std::numeric_limits<double>::infinity();
    }
    if (options.detector == DetectorKind::PhaseAware && options.persistence < 1) {
        throw std::invalid_argument("persistence must be >= 1 sample");
    }
    if (!(options.target_cycles_per_false_stop > 1)) {
        throw std::invalid_argument(fmt::format("target cycles per false stop must be > 1, got {}", options.target_cycles_per_false_stop));
    }
    // Declared payload (dynamics.hpp): with the robot's kinematic model, a torque signal and a
    // reference that declares its payload, a sample declaring another payload is compared with the
    // reference plus the difference's torques. In the detector from the first pass on.
    // The robot's kinematic model for the default detector's dynamics (speed and payload models).
    const DhModel* dynamics = nullptr;
    if (options.detector == DetectorKind::PhaseAware && (options.dynamics_model || options.kinematics)) {
        dynamics = options.dynamics_model ? &*options.dynamics_model : &options.kinematics->model;
        if (dynamics->dof() != profile.joints) {
            throw std::invalid_argument(fmt::format("the kinematic model has {} joints; {} has {}", dynamics->dof(), reference.name, profile.joints));
        }
    }
    std::string payload_note = "no kinematic model given: a payload other than the reference's is an anomaly";
    if (dynamics) {
        const DhModel& model = *dynamics;
        if (profile.signal != SignalKind::Torque) {
            payload_note = "not modelled: the signal is a motor-current magnitude (unsigned)";
        } else if (profile.reference.payload.empty()) {
            payload_note = "not modelled: the reference declares no payload (no 'payload' column)";
        } else {
            // KA-mDTW matches the part's torque, scaled by the lever lengths (thesis 4.5.1), and
            // --keep-payload keeps it too: there only a part heavier or lighter than the
            // reference's is modelled, by its difference.
            const bool keep_part = options.method == MatchingMethod::KaMdtw || options.keep_payload;
            std::vector<const NamedRecording*> recordings{&reference};
            for (const auto& nom : nominal) recordings.push_back(&nom);
            auto fitted = fit_payload_model(model, recordings, profile.unit, options.gravity);
            const std::string fit_note = fitted.derivation.value("note", std::string("fitted"));
            const bool usable = fitted.derivation.value("usable", false);
            if (!keep_part) {
                payload_note = fit_note;
            } else {
                payload_note = fmt::format("{}: the declared payload's torque is matched as part of the signal; {}",
                                           options.method == MatchingMethod::KaMdtw
                                               ? "not taken off: KA-mDTW scales the part's force by the lever lengths (thesis 4.5.1)"
                                               : "not taken off (--keep-payload)",
                                           usable ? "a part of another mass than the reference's is taken off by its difference, " + fit_note
                                                  : "a part of another mass than the reference's is not modelled (" + fit_note + ")");
                fitted.beyond_reference_part = true;
            }
            if (usable) profile.payload = std::move(fitted);
        }
    }
    // The calibration pass: every nominal sample through the detector, as in operation.
    std::unique_ptr<Detector> detector;
    std::vector<Moments> rule1, rule2;
    // Phase-aware: every sample's matched reference sample and deviation, and its cycle.
    std::vector<std::vector<PhaseObservation>> observed;
    std::vector<std::uint32_t> cycle_of;  // per sample: calibration cycle index, or kNoCycle
    std::uint32_t cycles_seen = 0;
    std::vector<std::pair<std::string, std::int64_t>> cycle_names;  // per calibration cycle: file, cycle counter
    nlohmann::json files;
    std::size_t windows = 0;
    double speed_spread = 0;  // largest |speed ratio - 1| once the detector's estimate has settled
    std::vector<double> change_read;  // |s'| the detector estimated, likewise (every such sample)
    const auto run_pass = [&] {
        detector = std::make_unique<Detector>(profile);
        rule1.assign(profile.joints, Moments{});
        rule2.assign(profile.joints, Moments{});
        observed.assign(profile.joints, {});
        cycle_of.clear();
        cycles_seen = 0;
        cycle_names.clear();
        files = nlohmann::json::array();
        windows = 0;
        speed_spread = 0;
        change_read.clear();
        std::vector<double> tau(profile.joints), q(profile.joints);
        for (const auto& nom : nominal) {
            const Recording& rec = *nom.recording;
            if (rec.size() == 0) throw std::invalid_argument(fmt::format("{}: has no samples", nom.name));
            detector->reset();
            // Cycle of each sample (complete cycles only; the window's first m samples belong to none).
            std::vector<std::uint32_t> cycle_here(rec.size(), kNoCycle);
            for (const auto& c : rec.complete_cycles()) {
                for (std::size_t i = std::max(c.begin, options.window); i < c.end; ++i) cycle_here[i] = cycles_seen;
                ++cycles_seen;
                cycle_names.emplace_back(nom.name, c.counter);
            }
            for (std::size_t i = 0; i < rec.size(); ++i) {
                const Decision d = detector->update(rec.sample(i, tau, q));
                if (d.rule == Rule::Fault) {
                    throw std::invalid_argument(fmt::format("{}: sample {} cannot be judged (joint {})", nom.name, i, d.joint));
                }
                const auto evs = detector->evaluations();
                for (std::size_t j = 0; j < profile.joints; ++j) {
                    rule1[j].add(evs[j].rule1.deviation);
                    rule2[j].add(evs[j].rule2);
                    observed[j].push_back({static_cast<std::uint32_t>(evs[j].shared.partner), static_cast<float>(evs[j].shared.deviation)});
                }
                cycle_of.push_back(cycle_here[i]);
                if (detector->has_speed_model() && detector->speed_settled()) {
                    speed_spread = std::max(speed_spread, std::abs(detector->speed_ratio() - 1.0));
                    change_read.push_back(std::abs(detector->speed_change_rate()));
                }
            }
            windows += rec.size();
            files.push_back({{"file", nom.name}, {"samples", rec.size()}, {"complete_cycles", rec.complete_cycles().size()}});
        }
    };
    run_pass();
    // Speed model: the part of the reference that scales with the speed override, from the
    // robot's kinematics and its own nominal recordings (each sample placed in the task by the
    // pass's shared partner). The pass then runs again with it, so that the thresholds include
    // whatever the running speed estimate adds at the recorded speed.
    std::string speed_note = "no kinematic model given: the detector assumes the recorded speed";
    nlohmann::json current_sign_note;  // how an unsigned current's sign was rebuilt, if it was
    if (dynamics) {
        const DhModel& model = *dynamics;
        // An unsigned motor current (the phase-aware detector): its sign rebuilt from the
        // kinematics (dynamics.hpp), and the speed model fitted to sign * |signal|, each nominal
        // sample signed with its partner's sign as the detector will sign it.
        const bool rebuild_sign = profile.signal == SignalKind::Current && options.detector == DetectorKind::PhaseAware;
        if (profile.signal != SignalKind::Torque && !rebuild_sign) {
            speed_note = "not fitted: the signal is a motor-current magnitude (unsigned); recalibrate per override";
        } else {
            std::vector<SpeedModelSource> sources;
            std::size_t offset = 0;
            for (const auto& nom : nominal) {
                SpeedModelSource src{nom.name, nom.recording, {}};
                src.partners.reserve(nom.recording->size());
                for (std::size_t i = 0; i < nom.recording->size(); ++i) src.partners.push_back(observed[0][offset + i].partner);
                offset += nom.recording->size();
                sources.push_back(std::move(src));
            }
            Reference signed_reference;  // (with a rebuilt sign: the reference in sign * |signal|)
            std::vector<Recording> signed_nominal;
            if (rebuild_sign) {
                CurrentSign rebuilt = rebuild_current_sign(model, profile.reference, options.gravity);
                profile.current_sign = std::move(rebuilt.sign);
                current_sign_note = rebuilt.derivation;
                const auto sign = [&](std::vector<std::vector<double>>& tau, auto&& at) {
                    for (std::size_t j = 0; j < profile.joints; ++j) {
                        for (std::size_t k = 0; k < tau[j].size(); ++k) tau[j][k] = profile.current_sign[j][at(k)] * std::abs(tau[j][k]);
                    }
                };
                signed_reference = profile.reference;
                sign(signed_reference.tau, [](std::size_t k) { return k; });
                signed_nominal.reserve(sources.size());
                for (auto& src : sources) {
                    signed_nominal.push_back(*src.recording);
                    sign(signed_nominal.back().tau, [&](std::size_t i) { return src.partners[i]; });
                    src.recording = &signed_nominal.back();
                }
            }
            // (the rebuilt signed current is split like a torque; its sign was fitted over every
            // reference sample, so the speed model keeps every sample too: RestSamples, dynamics.hpp)
            profile.speed = fit_speed_model(model, rebuild_sign ? signed_reference : profile.reference,
                                            rebuild_sign ? SignalKind::Torque : profile.signal, profile.unit, sources, options.gravity,
                                            60000, ParameterSharing::ByUnit,
                                            rebuild_sign ? RestSamples::Keep : RestSamples::LeaveOut);
            // A rebuilt sign is not the torque's everywhere, and a split fitted to a wrong
            // stretch can be worse than none (the VP-6242-like as current: joint 5's split alone
            // set to zero took its 80 % override run from 2,304 stop events in 100 cycles to 252,
            // all joint 3's; docs/detection.md). Nothing in the recordings tells which joints'
            // splits are wrong, so every joint's is taken as uncertain: at another speed its
            // reference may read as recorded or as the model says (Detector: model-error band).
            if (rebuild_sign) profile.speed->uncertain_split.assign(profile.joints, true);
            if (!options.removed_coulomb.empty()) {
                // The still-joint band is the whole dry friction: what the speed model finds on
                // these recordings and what was taken off them before (the arm model's).
                for (std::size_t j = 0; j < profile.joints; ++j) profile.speed->coulomb[j] += options.removed_coulomb[j];
                profile.speed->derivation["coulomb_removed_before"] = options.removed_coulomb;
            }
            speed_note = rebuild_sign ? "fitted to the motor current with its sign rebuilt from the kinematics (calibration.current_sign)" : "fitted";
            run_pass();
            // What "the recorded speed" means for the still-joint friction band: the speed
            // estimate's largest excursion on these nominal recordings.
            profile.speed->same_speed_tolerance = speed_spread;
            // What the estimate of s' reads at one speed: only beyond it is the speed changing.
            // Its 99th percentile, not its largest: the estimate (a second difference of the
            // angles against the partner's acceleration) reads its largest values where the task's
            // acceleration changes fastest and the partner is half a sample off, a few samples per
            // cycle. Measured on the UR5e-like's calibration (100 cycles): 99th percentile 0.68 /s,
            // 99.9th 1.17, largest 2.08; a turned override reads up to about 4 /s at the
            // simulator's ramp, and with the largest as the floor the band hardly opened (UR5e-like
            // with turns: 26 false stop events in 100 cycles, 22 without the band; 4 with the 99th
            // percentile; docs/detection.md).
            if (!change_read.empty()) {
                const auto at = change_read.begin() + static_cast<std::ptrdiff_t>(0.99 * static_cast<double>(change_read.size() - 1));
                std::nth_element(change_read.begin(), at, change_read.end());
                profile.speed->speed_change_floor = *at;
            }
        }
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
    if (options.detector == DetectorKind::PhaseAware) {
        profile.detector = DetectorKind::PhaseAware;
        // No phase threshold below 3 x the joint's noise level (a phase where every nominal
        // deviation happened to be 0 must not stop on noise).
        std::vector<double> floors(profile.joints);
        for (std::size_t j = 0; j < profile.joints; ++j) floors[j] = 3.0 * detector->noise_scale(j);
        // The reference's cycles aligned with each other (mDTW: the task repeats; KA-mDTW's cycles
        // are variants of it, matched by their lever lengths, and keep their own thresholds).
        CycleTwins twins;
        if (options.method == MatchingMethod::Mdtw) {
            std::vector<std::size_t> bounds = profile.reference.cycle_begins;
            bounds.push_back(profile.reference.size());
            twins = align_reference_cycles(profile.reference, bounds, kCoverageTolerance);
        }
        profile.phase = calibrate_phase_aware(profile, options, observed, cycle_of, cycles_seen, floors, twins);
        profile.phase->derivation["reference_cycles_pooled"] =
            twins.empty() ? nlohmann::json(nullptr)
                          : nlohmann::json{{"cycles", twins.cycles},
                                           {"samples_in_every_cycle", twins.aligned},
                                           {"largest_pose_distance", twins.largest_pose_distance},
                                           {"aligned_pairs_moving_the_other_way", twins.opposite},
                                           {"method", fmt::format("each phase's largest nominal deviation over every reference cycle that passes "
                                                                  "through it: cycles aligned by DTW over joint angles and torques, twins "
                                                                  "within {} rad on every joint and no joint moving the other way "
                                                                  "(both faster than {} rad/s)", kCoverageTolerance, kCoulombSmoothing)}};
        profile.phase->derivation["widest_cycles"] = widest_cycles(profile.phase->derivation, cycle_names);
        // What the friction-drift model learns in nominal operation: the calibration recordings
        // once more through the phase-aware detector as it will run. Its largest Coulomb change
        // per joint is the level past which the friction has changed, and a resting joint then no
        // longer holds the reference's torque (Detector::friction_band_open).
        if (profile.speed && profile.phase->drift_rate > 0) {
            Detector phase_detector(profile);
            std::vector<double> learned(profile.joints, 0.0), tau(profile.joints), q(profile.joints);
            for (const auto& nom : nominal) {
                const Recording& rec = *nom.recording;
                phase_detector.reset();
                for (std::size_t i = 0; i < rec.size(); ++i) {
                    phase_detector.update(rec.sample(i, tau, q));
                    for (std::size_t j = 0; j < profile.joints; ++j) {
                        learned[j] = std::max(learned[j], phase_detector.coulomb_change(j));
                    }
                }
            }
            profile.phase->drift_coulomb_nominal = learned;
            profile.phase->derivation["drift_coulomb_nominal"] =
                "largest |Coulomb change| the drift model learned per joint (signed or, for a rebuilt current sign, in the magnitude) on these recordings, the phase-aware detector "
                "running as in operation; one over twice it in operation opens the friction band of a still joint";
        }
    }
    profile.calibration = {{"nominal", files},
                           {"windows", windows},
                           {"reference_cycles", coverage.reference_cycles},
                           {"reference_coverage", coverage.to_json()},
                           {"window", options.window},
                           {"k_sigma", options.k_sigma},
                           {"round_up", options.round_up},
                           {"rule2_margin", options.rule2_margin},
                           {"clamped_levers", detector->clamped_levers()}};
    if (!ka_unscaled.empty()) profile.calibration["ka_unscaled_joints"] = ka_unscaled;
    if (options.detector == DetectorKind::PhaseAware) profile.calibration["speed_model"] = speed_note;
    if (options.detector == DetectorKind::PhaseAware) profile.calibration["payload_model"] = payload_note;
    if (!current_sign_note.is_null()) profile.calibration["current_sign"] = current_sign_note;
    profile.validate();
    return profile;
}

}  // namespace warpguard
