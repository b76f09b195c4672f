#include "warpguard/streaming_mdtw.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "mdtw_sweeps.hpp"

namespace warpguard {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Rule (8)/(9) for one column, scalar form: the published first row.
inline double first_row(std::span<const double> a, std::span<const double> b, std::size_t j) {
    if (j + 1 < b.size()) {
        return std::abs(a[0] - b[j]) + std::min({std::abs(a[1] - b[j + 1]), std::abs(a[1] - b[j]), std::abs(a[0] - b[j + 1])});
    }
    return std::abs(a[0] - b[j]) + std::abs(a[1] - b[j]);
}

// The published backtracking (12)-(13) from the last cell of a segment of w columns from `start`,
// whose values at(i, x) are those of a recursion over the segment only.
template <class At>
void backtrack(std::size_t m, std::size_t start, std::size_t w, const At& at, MatchResult& out) {
    auto& path = out.path;
    path.clear();
    std::size_t i = m - 1;
    std::size_t x = w - 1;
    path.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(start + x)});
    while (i > 0) {
        if (x == 0) {
            --i;  // (13); at the segment's first column the vertical step is the only one inside it
        } else {
            switch (back_step(at(i - 1, x - 1), at(i - 1, x), at(i, x - 1))) {  // (12)
                case BackStep::Diagonal: --i, --x; break;
                case BackStep::Vertical: --i; break;
                case BackStep::Horizontal: --x; break;
            }
        }
        path.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(start + x)});
    }
    std::reverse(path.begin(), path.end());
    out.start = start + x;
    out.end = start + w - 1;
}

}  // namespace

StreamingMdtw::StreamingMdtw(std::size_t window, std::span<const std::vector<double>> references)
    : joints_(references.size()),
      m_(window),
      n_(references.empty() ? 0 : references[0].size()),
      references_(references.begin(), references.end()),
      results_(references.size()),
      tracked_(references.size(), false) {
    if (joints_ == 0) throw std::invalid_argument("the streaming matcher needs at least one reference");
    if (m_ < 2) throw std::invalid_argument(fmt::format("mDTW window must be >= 2 samples, got {}", m_));
    if (n_ < 1) throw std::invalid_argument("mDTW reference must have at least 1 sample, got 0");
    for (std::size_t k = 0; k < joints_; ++k) {
        if (references_[k].size() != n_) {
            throw std::invalid_argument(fmt::format("reference {} has {} samples; the first has {}", k + 1,
                                                    references_[k].size(), n_));
        }
    }
    for (auto& r : results_) r.path.reserve(m_ + n_);
    lockstep_ = std::make_unique<sweeps::Lockstep>(m_, references_);
    // A match spans about m reference samples at the recorded speed; four times that covers a task
    // run at a quarter of it. Wider segments are traced alone (rebuild_path).
    segments_ = std::make_unique<sweeps::SegmentRecursion>(m_, references_, std::min(n_, 4 * m_));
    wavefront_ = std::make_unique<sweeps::Wavefront>(m_, references_);
    wavefront_float_ = std::make_unique<sweeps::WavefrontFloat>(m_, references_);
    lockstep_float_ = std::make_unique<sweeps::LockstepFloat>(m_, references_);
    bounds_.resize(joints_);
    found_.resize(joints_);
    settled_.assign(joints_, false);
    float_bounds_.resize(joints_);
    ties_.resize(joints_);
    candidates_.resize(joints_);
    for (const auto& r : references_) {
        double mx = 0;
        for (const double x : r) mx = std::max(mx, std::abs(x));
        ref_max_abs_.push_back(mx);
    }
    // The segment rebuild needs at most m x n cells; only the rows and columns of the matched
    // segment are touched, so the pages of a long reference stay untouched unless a match spans it.
    region_.reset(new double[m_ * n_]);
    row_lo_.reset(new std::size_t[m_]);
    row_hi_.reset(new std::size_t[m_]);
}

StreamingMdtw::~StreamingMdtw() = default;

void StreamingMdtw::reset() { std::fill(tracked_.begin(), tracked_.end(), false); }

void StreamingMdtw::set_kernel(SweepKernel kernel) {
    kernel_ = kernel;
    if (kernel != SweepKernel::Auto) next_ = kernel;
}

void StreamingMdtw::set_rest_bound(bool on) { wavefront_float_->set_rest_bound(on); }

std::uint64_t StreamingMdtw::rest_bound_sweeps() const { return wavefront_float_->rest_bound_sweeps(); }

std::uint64_t StreamingMdtw::rest_bound_recursions() const { return wavefront_float_->rest_bound_recursions(); }

std::uint64_t StreamingMdtw::cells() const {
    return lockstep_->cells() + wavefront_->cells() + wavefront_float_->cells() + lockstep_float_->cells();
}

bool StreamingMdtw::float_sweep_built() { return sweeps::WavefrontFloat::built(); }

bool StreamingMdtw::float_lockstep_built() { return sweeps::LockstepFloat::built(); }

double StreamingMdtw::float_error_bound(std::size_t window, std::size_t max_width, double max_abs_a, double max_abs_b,
                                       double bound) {
    // Unit roundoffs of float and double.
    const double uf = std::ldexp(1.0, -24), ud = std::ldexp(1.0, -53);
    const double mag = max_abs_a + max_abs_b;
    // The local costs a path adds: one per cell (rule (11) adds one for a horizontal step too),
    // at most window + max_width - 1 cells over max_width columns, and the first row adds two.
    const double terms = static_cast<double>(window + max_width);
    // The values that matter stay below v: the bound plus the error itself (which is far smaller).
    const double v = 2.0 * (bound + terms * 3.0 * uf * mag);
    // Per local cost, a float cell differs from the exact sum by the cost's error (two roundings
    // to float and one of the subtraction: <= 2.0001 uf (|a| + |b|)) plus the addition's rounding
    // (<= uf v); the published double values differ from the exact sum by the same in doubles. Min
    // and |x| are exact. A quarter more for safety.
    return 1.25 * terms * (2.0001 * uf * mag + uf * v + ud * (2.0 * mag + v));
}

void StreamingMdtw::run_sweep(std::span<const double> windows, bool stop_at_first) {
    // The double sweep: forced, or Auto's choice from the last double sweep's work (below).
    const bool lockstep = next_ == SweepKernel::Lockstep || next_ == SweepKernel::LockstepFloat;
    // The float sweep, where it is built and the references fit floats: forced, or under Auto the
    // wavefront outside a pause; never for an early exit. Auto takes the float wavefront whatever
    // the work: measured on recordings of simulated robots (docs/performance.md, "Why two sweeps")
    // it beat both lockstep sweeps also where the rows live in some joint cover two thirds of the
    // matrix, where the double wavefront lost to the lockstep sweep; it loses where ties send
    // joints to the exact sweep, which the pauses below catch.
    bool use_float = false;
    bool float_lockstep = false;
    if (!stop_at_first) {
        if (kernel_ == SweepKernel::LockstepFloat) {
            use_float = lockstep_float_->usable();
            float_lockstep = true;
        } else if (kernel_ == SweepKernel::WavefrontFloat || (kernel_ == SweepKernel::Auto && float_pause_ == 0)) {
            use_float = wavefront_float_->usable();
        }
    }
    const std::uint64_t before = cells();
    std::fill(settled_.begin(), settled_.end(), false);
    SweepKernel used;
    if (use_float) {
        const std::uint64_t fallbacks = float_fallbacks_;
        run_float_sweep(windows, float_lockstep, lockstep);
        used = float_lockstep ? SweepKernel::LockstepFloat : SweepKernel::WavefrontFloat;
        // Windows whose ends tie within the float error (flat stretches of quantised readings)
        // send their joints to the exact sweep, which then costs more than it alone would: after a
        // sample where more than a quarter of the joints went there, Auto sweeps in doubles for a
        // while before it tries the float sweep again; for twice as long if that try fails too.
        if ((float_fallbacks_ - fallbacks) * 4 > joints_) {
            float_pause_ = float_pause_next_;
            float_pause_next_ = std::min(2 * float_pause_next_, kFloatPauseMax);
            ++float_pauses_;
        } else if (float_pause_next_ > kFloatPause) {
            --float_pause_next_;
        }
    } else {
        // Doubles: chosen, in a pause, an early exit, or a float sweep not usable here.
        if (!stop_at_first && float_pause_ > 0) {
            --float_pause_;
            ++float_paused_samples_;
        }
        used = lockstep ? SweepKernel::Lockstep : SweepKernel::Wavefront;
        run_double_sweep(windows, lockstep, stop_at_first);
    }
    // An early exit (exists_within) is not a match: it neither counts as the last match's sweep nor
    // says much about the next sample's work.
    if (stop_at_first) return;
    last_ = used;
    if (kernel_ != SweepKernel::Auto || use_float) return;
    // The next double sweep is chosen by this one's work, as a fraction of the full matrices of
    // the lanes it ran (the windows of consecutive samples overlap in all but one sample; a float
    // sweep's 16-lane steps count differently and are left out). The lockstep sweep pays for the
    // union of the joints' live cells, the wavefront for each joint's own plus the ends of its
    // blocks, at about 1.5 times the work per step (shifts between lanes). Where most cells of
    // every joint are alive (standstills of quantised torques), the union is hardly larger than
    // one joint's share and the lockstep sweep wins; where few are alive they lie in different
    // places for different joints and the wavefront wins (docs/performance.md: both kernels on
    // both kinds of stream). The two thresholds leave a band between them so that the choice does
    // not flip at every sample.
    const double full = static_cast<double>(joints_) * static_cast<double>(m_) * static_cast<double>(n_);
    const double work = static_cast<double>(cells() - before) / full;
    if (!lockstep && work > kToLockstep) next_ = SweepKernel::Lockstep;
    if (lockstep && work < kToWavefront) next_ = SweepKernel::Wavefront;
}

void StreamingMdtw::run_float_sweep(std::span<const double> windows, bool lockstep, bool exact_lockstep) {
    // The float sweep keeps every cell whose double value is <= UB (its bound is UB + E) and
    // reports the ends that can be the optimum. A joint without a finite bound (a stream's first
    // sample) has no E and goes to the exact sweep at once.
    bool any = false;
    for (std::size_t joint = 0; joint < joints_; ++joint) {
        const double ub = bounds_[joint];
        float_bounds_[joint] = -1.0;
        if (!(ub >= 0.0) || !std::isfinite(ub)) continue;
        const auto a = windows.subspan(joint * m_, m_);
        double max_a = 0;
        for (const double x : a) max_a = std::max(max_a, std::abs(x));
        if (!std::isfinite(max_a) || max_a >= 1e30) continue;
        const double e = float_error_bound(m_, segments_->max_width(), max_a, ref_max_abs_[joint], ub);
        float_bounds_[joint] = ub + e;
        ties_[joint] = 2.0 * e;
        any = true;
    }
    if (any && lockstep) lockstep_float_->sweep(windows, float_bounds_.data(), ties_.data(), candidates_.data());
    if (any && !lockstep) wavefront_float_->sweep(windows, float_bounds_.data(), ties_.data(), candidates_.data());
    // Settled: the candidate ends and the least start fit the segment recursion of step 3, which
    // then finds the exact optimum among them. Otherwise the exact sweep, with the bound the float
    // one proved (the best float end is within E of its double value).
    bool exact = false;
    for (std::size_t joint = 0; joint < joints_; ++joint) {
        if (float_bounds_[joint] < 0.0) {
            exact = exact || bounds_[joint] >= 0.0;
            continue;
        }
        const sweeps::Candidates& c = candidates_[joint];
        const double e = ties_[joint] / 2.0;
        bool fits = std::isfinite(c.best) && !c.overflow && c.clusters >= 1 && c.clusters <= sweeps::Candidates::kMaxClusters;
        for (std::size_t k = 0; fits && k < c.clusters; ++k) {
            const auto& cl = c.cluster[k];
            fits = cl.end_hi >= cl.start && cl.end_hi - cl.start + 1 <= segments_->max_width();
        }
        if (fits) {
            settled_[joint] = true;
            found_[joint] = {c.best, c.cluster[c.clusters - 1].end_hi, c.cluster[0].start};
            bounds_[joint] = -1.0;  // not swept again
            continue;
        }
        ++float_fallbacks_;
        if (std::isfinite(c.best)) bounds_[joint] = std::min(bounds_[joint], c.best + e);
        exact = true;
    }
    if (exact) run_double_sweep(windows, exact_lockstep, false);
}

void StreamingMdtw::run_double_sweep(std::span<const double> windows, bool lockstep, bool stop_at_first) {
    if (lockstep) {
        lockstep_->sweep(windows, bounds_.data(), stop_at_first, found_.data());
    } else {
        wavefront_->sweep(windows, bounds_.data(), stop_at_first, found_.data());
    }
}

double StreamingMdtw::shifted_path_bound(std::size_t joint, std::span<const double> a) const {
    if (!tracked_[joint]) return kInf;
    const auto& path = results_[joint].path;
    const auto& b = references_[joint];
    // The last cell of the old second row becomes the new first-row cell (a path has one cell in row 1).
    std::size_t k = 1;
    while (k + 1 < path.size() && path[k + 1].i == 1) ++k;
    double cost = first_row(a, b, path[k].j);
    for (++k; k < path.size(); ++k) cost += std::abs(a[path[k].i - 1] - b[path[k].j]);
    // The new sample continues vertically at the old end or diagonally to the next reference sample.
    const std::size_t e = path.back().j;
    const double newest = a[m_ - 1];
    double step = std::abs(newest - b[e]);
    if (e + 1 < n_) step = std::min(step, std::abs(newest - b[e + 1]));
    return cost + step;
}

void StreamingMdtw::rebuild_path(std::span<const double> a, const std::vector<double>& b, std::size_t start,
                                 std::size_t end, double cost, MatchResult& out) {
    // The published recursion over the matched segment [start, end] only, and in each row only
    // over the cells that can still be <= the optimum `cost`. Every cell of the optimal path has
    // its optimal prefix inside the segment and is <= cost, so it gets exactly its full-matrix
    // value; every other cell is either exact, larger than there, or over cost and read as
    // infinite, which never changes a back_step decision on the path.
    const std::size_t w = end - start + 1;
    double* d = region_.get();
    std::size_t* lo = row_lo_.get();
    std::size_t* hi = row_hi_.get();  // row i: its cells <= cost lie in [lo, hi); empty if lo == hi
    auto live_bounds = [&](std::size_t i, std::size_t from, std::size_t to) {
        const double* row = d + i * w;
        std::size_t l = from, h = to;
        while (l < to && !(row[l] <= cost)) ++l;
        while (h > l && !(row[h - 1] <= cost)) --h;
        lo[i] = l;
        hi[i] = h;
    };
    for (std::size_t x = 0; x < w; ++x) d[x] = first_row(a, b, start + x);  // (8)/(9)
    live_bounds(0, 0, w);
    for (std::size_t i = 1; i < m_; ++i) {
        const double* up = d + (i - 1) * w;
        double* row = d + i * w;
        const double ai = a[i];
        const std::size_t ul = lo[i - 1], uh = hi[i - 1];
        std::size_t x = ul;
        if (x >= uh) {  // no cell above is <= cost, so none in this row is (cannot happen on the path's rows)
            lo[i] = hi[i] = 0;
            continue;
        }
        // (10)/(11), written as min(c + min(diag, up), c + left) so that the horizontal chain is one
        // addition and one min (rounding is monotone: the same value as c + min(diag, up, left)).
        // Cells left of the first live one above are all over cost, so the first cell has only its
        // upper neighbour; beyond the last live one above only the horizontal one is left.
        const double* bs = b.data() + start;
        double left = std::abs(ai - bs[x]) + up[x];
        row[x] = left;
        for (++x; x < uh; ++x) {
            const double c = std::abs(ai - bs[x]);
            left = std::min(c + std::min(up[x - 1], up[x]), c + left);
            row[x] = left;
        }
        if (x < w) {  // diagonal from the last live cell above
            const double c = std::abs(ai - bs[x]);
            left = std::min(c + up[x - 1], c + left);
            row[x] = left;
            for (++x; x < w && left <= cost; ++x) {
                left += std::abs(ai - bs[x]);
                row[x] = left;
            }
        }
        live_bounds(i, ul, x);
    }
    backtrack(m_, start, w, [&](std::size_t i, std::size_t x) { return x >= lo[i] && x < hi[i] ? d[i * w + x] : kInf; },
              out);
}

void StreamingMdtw::match(std::span<const double> windows) {
    if (windows.size() != joints_ * m_) {
        throw std::invalid_argument(fmt::format("{} window values given; expected {} joints x {} samples", windows.size(),
                                                joints_, m_));
    }
    for (std::size_t joint = 0; joint < joints_; ++joint) {
        bounds_[joint] = shifted_path_bound(joint, windows.subspan(joint * m_, m_));  // +inf on a stream's first sample
    }
    run_sweep(windows, false);
    // Step 3: the segments' values, up to eight at a time in lanes, then each path. A joint the
    // float sweep settled has one segment per cluster of candidate ends, all in one batch; a
    // segment wider than the lanes' buffer (a match far slower than the reference) is traced alone.
    std::size_t lane_joint[8], lane_start[8], lane_width[8], lane_end_lo[8];
    std::size_t lanes = 0;
    auto trace_lanes = [&] {
        segments_->compute(windows, lane_joint, lane_start, lane_width, lanes);
        const sweeps::SegmentRecursion& seg = *segments_;
        for (std::size_t c = 0; c < lanes;) {
            const std::size_t joint = lane_joint[c];
            std::size_t last = c + 1;  // the joint's lanes are [c, last)
            while (last < lanes && lane_joint[last] == joint) ++last;
            std::size_t lane = c, w = lane_width[c];
            if (settled_[joint]) {
                // The float sweep's candidate ends: the least exact value among them, the earliest
                // on ties, is the published optimum (each cluster's segment holds the published
                // path of every candidate end in it, and no end's value there is below its own).
                // The clusters are disjoint and in order, so the ends come in order: strict '<'
                // keeps the earliest.
                double best_value = kInf;
                std::size_t best_end = 0;
                for (std::size_t l = c; l < last; ++l) {
                    for (std::size_t x = lane_end_lo[l] - lane_start[l]; x < lane_width[l]; ++x) {
                        const double v = seg.at(m_ - 1, x, l);
                        if (v < best_value) {
                            best_value = v;
                            best_end = lane_start[l] + x;
                            lane = l;
                        }
                    }
                }
                w = best_end - lane_start[lane] + 1;
                results_[joint].cost = best_value;
            }
            backtrack(m_, lane_start[lane], w, [&](std::size_t i, std::size_t x) { return seg.at(i, x, lane); },
                      results_[joint]);
            c = last;
        }
        lanes = 0;
    };
    for (std::size_t joint = 0; joint < joints_; ++joint) {
        const sweeps::Found& f = found_[joint];
        MatchResult& r = results_[joint];
        tracked_[joint] = std::isfinite(f.cost);
        if (!tracked_[joint]) {
            // Only a window with a non-finite value gets here (every finite window has a match
            // <= its bound). Report it as such; callers validate samples before matching.
            r.cost = kInf;
            r.start = r.end = 0;
            r.path.clear();
            continue;
        }
        r.cost = f.cost;
        if (settled_[joint]) {
            const sweeps::Candidates& cand = candidates_[joint];
            if (lanes + cand.clusters > 8) trace_lanes();
            for (std::size_t k = 0; k < cand.clusters; ++k) {
                const auto& cl = cand.cluster[k];
                lane_joint[lanes] = joint;
                lane_start[lanes] = cl.start;
                lane_width[lanes] = cl.end_hi - cl.start + 1;
                lane_end_lo[lanes] = cl.end_lo;
                ++lanes;
            }
            continue;
        }
        const std::size_t width = f.end - f.start + 1;
        if (width > segments_->max_width()) {
            rebuild_path(windows.subspan(joint * m_, m_), references_[joint], f.start, f.end, f.cost, r);
            continue;
        }
        if (lanes == 8) trace_lanes();
        lane_joint[lanes] = joint;
        lane_start[lanes] = f.start;
        lane_width[lanes] = width;
        lane_end_lo[lanes] = f.end;
        ++lanes;
    }
    if (lanes > 0) trace_lanes();
}

void StreamingMdtw::exists_within(std::span<const double> windows, std::span<const double> tau, std::span<bool> out) {
    if (windows.size() != joints_ * m_ || tau.size() != joints_ || out.size() != joints_) {
        throw std::invalid_argument(fmt::format("exists_within needs {} x {} window values, {} bounds and {} answers",
                                                joints_, m_, joints_, joints_));
    }
    bool any_open = false;
    for (std::size_t joint = 0; joint < joints_; ++joint) {
        const auto a = windows.subspan(joint * m_, m_);
        out[joint] = shifted_path_bound(joint, a) <= tau[joint];  // the shifted path itself is a match within tau
        const bool open = !out[joint] && tau[joint] >= 0.0;
        bounds_[joint] = open ? tau[joint] : -1.0;
        any_open = any_open || open;
    }
    if (!any_open) return;
    run_sweep(windows, true);
    for (std::size_t joint = 0; joint < joints_; ++joint) {
        if (bounds_[joint] >= 0.0) out[joint] = found_[joint].cost <= bounds_[joint];
    }
}

}  // namespace warpguard
