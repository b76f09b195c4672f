#include "warpguard/streaming_mdtw.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace warpguard {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Lanes = double __attribute__((vector_size(StreamingMdtw::kLanes * sizeof(double))));
using Mask = long long __attribute__((vector_size(StreamingMdtw::kLanes * sizeof(long long))));

inline Lanes broadcast(double v) { return Lanes{v, v, v, v}; }

// |x| by clearing the sign bit: the same result as std::abs, also for -0.0.
inline Lanes abs_lanes(Lanes x) {
    constexpr long long kNoSign = 0x7fffffffffffffffLL;
    Mask bits;
    __builtin_memcpy(&bits, &x, sizeof bits);
    bits &= Mask{kNoSign, kNoSign, kNoSign, kNoSign};
    __builtin_memcpy(&x, &bits, sizeof x);
    return x;
}

// Exact minimum; inputs are never NaN here.
inline Lanes min_lanes(Lanes a, Lanes b) { return a < b ? a : b; }

inline bool any(Mask m) {
#if defined(__AVX__)
    return _mm256_movemask_pd(reinterpret_cast<__m256d>(m)) != 0;  // one instruction for four sign bits
#else
    return (m[0] | m[1] | m[2] | m[3]) != 0;
#endif
}

// Rule (8)/(9) for one column, scalar form: the published first row.
inline double first_row(std::span<const double> a, std::span<const double> b, std::size_t j) {
    if (j + 1 < b.size()) {
        return std::abs(a[0] - b[j]) + std::min({std::abs(a[1] - b[j + 1]), std::abs(a[1] - b[j]), std::abs(a[0] - b[j + 1])});
    }
    return std::abs(a[0] - b[j]) + std::abs(a[1] - b[j]);
}

}  // namespace

StreamingMdtw::StreamingMdtw(std::size_t window, std::span<const std::vector<double>> references, std::size_t arena_cells)
    : joints_(references.size()),
      m_(window),
      n_(references.empty() ? 0 : references[0].size()),
      references_(references.begin(), references.end()),
      results_(references.size()),
      tracked_(references.size(), false),
      arena_capacity_(arena_cells ? arena_cells : 16 * window * 256),
      column_offset_(n_),
      column_rows_(n_),
      column_stamp_(n_, 0),
      fallback_(std::max<std::size_t>(window, 2), std::max<std::size_t>(n_, 1)) {
    if (joints_ == 0) throw std::invalid_argument("the streaming matcher needs at least one reference");
    if (m_ < 2) throw std::invalid_argument(fmt::format("mDTW window must be >= 2 samples, got {}", m_));
    if (m_ > 65535) throw std::invalid_argument(fmt::format("mDTW window of {} samples is too long (max 65535)", m_));
    if (n_ < 1) throw std::invalid_argument("mDTW reference must have at least 1 sample, got 0");
    if (arena_capacity_ < m_) throw std::invalid_argument("the arena must hold at least one column");
    for (std::size_t k = 0; k < joints_; ++k) {
        if (references_[k].size() != n_) {
            throw std::invalid_argument(fmt::format("reference {} has {} samples; the first has {}", k + 1,
                                                    references_[k].size(), n_));
        }
    }
    for (std::size_t first = 0; first < joints_; first += kLanes) {
        Group g;
        g.first_joint = first;
        g.lanes = std::min(kLanes, joints_ - first);
        g.reference.reset(new Lanes[n_]);
        for (std::size_t j = 0; j < n_; ++j) {
            Lanes v = broadcast(0.0);
            for (std::size_t k = 0; k < g.lanes; ++k) v[k] = references_[first + k][j];
            g.reference[j] = v;
        }
        groups_.push_back(std::move(g));
    }
    for (auto& r : results_) r.path.reserve(m_ + n_);
    arena_.reset(new Lanes[arena_capacity_]);  // not value-initialised: pages are touched only when used
    lanes_window_.reset(new Lanes[m_]);
}

void StreamingMdtw::reset() { std::fill(tracked_.begin(), tracked_.end(), false); }

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

bool StreamingMdtw::sweep(const Group& g, const Lanes* a, Lanes ub, bool stop_at_first, double* best_cost,
                          std::size_t* best_end) {
    ++stamp_;
    const Lanes inf = broadcast(kInf);
    const Lanes a0 = a[0], a1 = a[1];
    const Lanes* ref = g.reference.get();
    Lanes best = inf;
    std::size_t used = 0;
    long prev_hi = -1;  // last live row of the previous column, -1 if it has none
    const Lanes* prev = nullptr;
    std::size_t open_lanes = 0;
    for (std::size_t k = 0; k < kLanes; ++k) open_lanes += ub[k] >= 0.0;

    for (std::size_t j = 0; j < n_; ++j) {
        const Lanes bj = ref[j];
        const Lanes d_first = abs_lanes(a0 - bj);
        if (prev_hi < 0 && !any(d_first <= ub)) continue;  // rule (8) value >= |a1 - bj| > UB
        Lanes d0;
        if (j + 1 < n_) {
            const Lanes bj1 = ref[j + 1];
            d0 = d_first + min_lanes(min_lanes(abs_lanes(a1 - bj1), abs_lanes(a1 - bj)), abs_lanes(a0 - bj1));  // (8)
        } else {
            d0 = d_first + abs_lanes(a1 - bj);  // (9)
        }
        const Mask live0 = d0 <= ub;
        if (prev_hi < 0 && !any(live0)) continue;
        if (used + m_ > arena_capacity_) return false;

        Lanes* cur = arena_.get() + used;
        cur[0] = live0 ? d0 : inf;
        long last_live = any(live0) ? 0 : -1;
        std::size_t i = 1;
        for (; i < m_; ++i) {
            const Lanes up = cur[i - 1];
            const long row = static_cast<long>(i);
            if (row > prev_hi + 1 && last_live < row - 1) break;  // nothing above or to the left lives
            const Lanes diag = row - 1 <= prev_hi ? prev[i - 1] : inf;
            const Lanes left = row <= prev_hi ? prev[i] : inf;
            const Lanes v = abs_lanes(a[i] - bj) + min_lanes(min_lanes(diag, left), up);  // (10)/(11)
            const Mask live = v <= ub;
            cur[i] = live ? v : inf;
            if (any(live)) last_live = row;
        }
        cells_ += i;
        const std::size_t rows = static_cast<std::size_t>(last_live + 1);
        column_offset_[j] = static_cast<std::uint32_t>(used);
        column_rows_[j] = static_cast<std::uint16_t>(rows);
        column_stamp_[j] = stamp_;
        used += rows;
        prev = cur;
        prev_hi = last_live;

        if (last_live == static_cast<long>(m_) - 1) {
            // Candidate ends; strict '<' keeps the earliest end on ties, as the published argmin.
            const Lanes end_value = cur[m_ - 1];
            const Mask better = end_value < best;
            if (any(better)) {
                best = better ? end_value : best;
                for (std::size_t k = 0; k < g.lanes; ++k) {
                    if (better[k]) best_end[k] = j;
                }
                ub = better ? end_value : ub;  // UB tightens to the best end so far
                if (stop_at_first) {
                    for (std::size_t k = 0; k < g.lanes; ++k) {
                        if (better[k]) {
                            ub[k] = -1.0;  // this lane is answered: let its cells die
                            --open_lanes;
                        }
                    }
                    if (open_lanes == 0) break;
                }
            }
        }
    }
    for (std::size_t k = 0; k < kLanes; ++k) best_cost[k] = best[k];
    return true;
}

double StreamingMdtw::cell(std::size_t j, std::size_t i, std::size_t lane) const {
    if (column_stamp_[j] != stamp_ || i >= column_rows_[j]) return kInf;
    return arena_[column_offset_[j] + i][lane];
}

void StreamingMdtw::backtrack(const Group&, std::size_t lane, std::span<const double> a, std::size_t end, MatchResult& out) {
    (void)a;
    auto& path = out.path;
    path.clear();
    std::size_t i = m_ - 1;
    std::size_t j = end;
    out.cost = cell(j, i, lane);
    path.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    while (i > 0) {
        if (j == 0) {
            --i;  // (13)
        } else {
            const double diag = cell(j - 1, i - 1, lane);
            const double vert = cell(j, i - 1, lane);
            const double horiz = cell(j - 1, i, lane);
            if (diag <= vert && diag <= horiz) {  // (12), ties as the published implementation
                --i;
                --j;
            } else if (vert <= horiz) {
                --i;
            } else {
                --j;
            }
        }
        path.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    }
    std::reverse(path.begin(), path.end());
    out.start = j;
    out.end = end;
}

void StreamingMdtw::match(std::span<const double> windows) {
    if (windows.size() != joints_ * m_) {
        throw std::invalid_argument(fmt::format("{} window values given; expected {} joints x {} samples", windows.size(),
                                                joints_, m_));
    }
    for (const Group& g : groups_) {
        Lanes ub = broadcast(-1.0);  // padding lanes never live
        bool bounded = true;
        for (std::size_t k = 0; k < g.lanes; ++k) {
            const auto a = windows.subspan((g.first_joint + k) * m_, m_);
            ub[k] = shifted_path_bound(g.first_joint + k, a);
            bounded = bounded && std::isfinite(ub[k]);
        }
        for (std::size_t i = 0; i < m_; ++i) {
            Lanes v = broadcast(0.0);
            for (std::size_t k = 0; k < g.lanes; ++k) v[k] = windows[(g.first_joint + k) * m_ + i];
            lanes_window_[i] = v;
        }
        double best_cost[kLanes];
        std::size_t best_end[kLanes] = {};
        bool exact = bounded && sweep(g, lanes_window_.get(), ub, false, best_cost, best_end);
        for (std::size_t k = 0; exact && k < g.lanes; ++k) exact = std::isfinite(best_cost[k]);
        for (std::size_t k = 0; k < g.lanes; ++k) {
            const std::size_t joint = g.first_joint + k;
            const auto a = windows.subspan(joint * m_, m_);
            if (exact) {
                backtrack(g, k, a, best_end[k], results_[joint]);
            } else {
                const MatchResult& r = fallback_.match(a, references_[joint]);
                results_[joint].cost = r.cost;
                results_[joint].start = r.start;
                results_[joint].end = r.end;
                results_[joint].path.assign(r.path.begin(), r.path.end());
            }
            tracked_[joint] = true;
        }
        if (!exact) ++fallbacks_;
    }
}

void StreamingMdtw::exists_within(std::span<const double> windows, std::span<const double> tau, std::span<bool> out) {
    if (windows.size() != joints_ * m_ || tau.size() != joints_ || out.size() != joints_) {
        throw std::invalid_argument(fmt::format("exists_within needs {} x {} window values, {} bounds and {} answers",
                                                joints_, m_, joints_, joints_));
    }
    for (const Group& g : groups_) {
        Lanes ub = broadcast(-1.0);
        bool open = false;
        for (std::size_t k = 0; k < g.lanes; ++k) {
            const std::size_t joint = g.first_joint + k;
            const auto a = windows.subspan(joint * m_, m_);
            if (shifted_path_bound(joint, a) <= tau[joint]) {
                out[joint] = true;  // the shifted path itself is a match within tau
            } else {
                ub[k] = tau[joint];
                open = true;
            }
        }
        if (!open) continue;
        for (std::size_t i = 0; i < m_; ++i) {
            Lanes v = broadcast(0.0);
            for (std::size_t k = 0; k < g.lanes; ++k) v[k] = windows[(g.first_joint + k) * m_ + i];
            lanes_window_[i] = v;
        }
        double best_cost[kLanes];
        std::size_t best_end[kLanes] = {};
        const bool exact = sweep(g, lanes_window_.get(), ub, true, best_cost, best_end);
        for (std::size_t k = 0; k < g.lanes; ++k) {
            if (!(ub[k] >= 0.0)) continue;
            const std::size_t joint = g.first_joint + k;
            if (exact) {
                out[joint] = best_cost[k] <= tau[joint];
            } else {
                out[joint] = fallback_.match(windows.subspan(joint * m_, m_), references_[joint]).cost <= tau[joint];
            }
        }
        if (!exact) ++fallbacks_;
    }
}

}  // namespace warpguard
