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

#if defined(__AVX512F__)
// Eight lanes in one AVX-512 register.
using Native = double __attribute__((vector_size(8 * sizeof(double))));
using NativeMask = long long __attribute__((vector_size(8 * sizeof(long long))));

struct Mask {
    NativeMask v;
    Mask operator&(const Mask& o) const { return {v & o.v}; }
    bool operator[](std::size_t k) const { return v[k] != 0; }
};

inline bool any(const Mask& m) {
    return _mm512_test_epi64_mask(reinterpret_cast<__m512i>(m.v), reinterpret_cast<__m512i>(m.v)) != 0;
}

}  // namespace

struct StreamingMdtw::Lanes {
    Native v;
    double operator[](std::size_t k) const { return v[k]; }
    void set(std::size_t k, double x) { v[k] = x; }
};

namespace {

using Lanes = StreamingMdtw::Lanes;

inline Lanes broadcast(double x) { return {Native{x, x, x, x, x, x, x, x}}; }
inline Lanes operator-(const Lanes& a, const Lanes& b) { return {a.v - b.v}; }
inline Lanes operator+(const Lanes& a, const Lanes& b) { return {a.v + b.v}; }
inline Mask operator<=(const Lanes& a, const Lanes& b) { return {a.v <= b.v}; }
inline Mask operator<(const Lanes& a, const Lanes& b) { return {a.v < b.v}; }
inline Lanes select(const Mask& m, const Lanes& a, const Lanes& b) { return {m.v ? a.v : b.v}; }
// |x| by clearing the sign bit: the same result as std::abs, also for -0.0.
inline Lanes abs_lanes(const Lanes& x) {
    NativeMask bits;
    __builtin_memcpy(&bits, &x.v, sizeof bits);
    bits &= 0x7fffffffffffffffLL;
    Lanes out;
    __builtin_memcpy(&out.v, &bits, sizeof bits);
    return out;
}
// Exact minimum; inputs are never NaN here.
inline Lanes min_lanes(const Lanes& a, const Lanes& b) { return {a.v < b.v ? a.v : b.v}; }

#else
// Eight lanes as two native 4 x double vectors: GCC lowers each operation to one instruction per
// half (an 8-wide vector extension type would be split element by element without AVX-512), and
// the two halves form independent dependency chains.
using Half = double __attribute__((vector_size(4 * sizeof(double))));
using HalfMask = long long __attribute__((vector_size(4 * sizeof(long long))));

struct Mask {
    HalfMask lo, hi;
    Mask operator&(const Mask& o) const { return {lo & o.lo, hi & o.hi}; }
    bool operator[](std::size_t k) const { return (k < 4 ? lo[k] : hi[k - 4]) != 0; }
};

inline bool any(const Mask& m) {
#if defined(__AVX__)
    return _mm256_movemask_pd(_mm256_or_pd(reinterpret_cast<__m256d>(m.lo), reinterpret_cast<__m256d>(m.hi))) != 0;
#else
    const HalfMask r = m.lo | m.hi;
    return (r[0] | r[1] | r[2] | r[3]) != 0;
#endif
}

}  // namespace

struct StreamingMdtw::Lanes {
    Half lo, hi;
    double operator[](std::size_t k) const { return k < 4 ? lo[k] : hi[k - 4]; }
    void set(std::size_t k, double v) { (k < 4 ? lo[k] : hi[k - 4]) = v; }
};

namespace {

using Lanes = StreamingMdtw::Lanes;

inline Lanes broadcast(double v) { return {Half{v, v, v, v}, Half{v, v, v, v}}; }
inline Lanes operator-(const Lanes& a, const Lanes& b) { return {a.lo - b.lo, a.hi - b.hi}; }
inline Lanes operator+(const Lanes& a, const Lanes& b) { return {a.lo + b.lo, a.hi + b.hi}; }
inline Mask operator<=(const Lanes& a, const Lanes& b) { return {a.lo <= b.lo, a.hi <= b.hi}; }
inline Mask operator<(const Lanes& a, const Lanes& b) { return {a.lo < b.lo, a.hi < b.hi}; }
inline Lanes select(const Mask& m, const Lanes& a, const Lanes& b) { return {m.lo ? a.lo : b.lo, m.hi ? a.hi : b.hi}; }

// |x| by clearing the sign bit: the same result as std::abs, also for -0.0.
inline Half abs_half(Half x) {
    constexpr long long kNoSign = 0x7fffffffffffffffLL;
    HalfMask bits;
    __builtin_memcpy(&bits, &x, sizeof bits);
    bits &= HalfMask{kNoSign, kNoSign, kNoSign, kNoSign};
    __builtin_memcpy(&x, &bits, sizeof x);
    return x;
}
inline Lanes abs_lanes(const Lanes& x) { return {abs_half(x.lo), abs_half(x.hi)}; }

// Exact minimum; inputs are never NaN here.
inline Lanes min_lanes(const Lanes& a, const Lanes& b) { return {a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi}; }
#endif

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
            for (std::size_t k = 0; k < g.lanes; ++k) v.set(k, references_[first + k][j]);
            g.reference[j] = v;
        }
        groups_.push_back(std::move(g));
    }
    for (auto& r : results_) r.path.reserve(m_ + n_);
    arena_.reset(new Lanes[arena_capacity_]);  // not value-initialised: pages are touched only when used
    lanes_window_.reset(new Lanes[m_]);
}

StreamingMdtw::~StreamingMdtw() = default;

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
    long prev_hi = -1;  // last live row (some lane <= UB) of the previous column, -1 if none
    const Lanes* prev = nullptr;
    std::size_t open_lanes = 0;
    for (std::size_t k = 0; k < kLanes; ++k) open_lanes += ub[k] >= 0.0;
    Lanes* scratch = arena_.get() + arena_capacity_ - m_;  // the second column of a pair, before it is placed

    // Rule (8) (or (9) in the last column): the first row, where every column may begin a match.
    auto first_row_at = [&](std::size_t j) {
        const Lanes bj = ref[j];
        if (j + 1 < n_) {
            const Lanes bj1 = ref[j + 1];
            return abs_lanes(a0 - bj) + min_lanes(min_lanes(abs_lanes(a1 - bj1), abs_lanes(a1 - bj)), abs_lanes(a0 - bj1));
        }
        return abs_lanes(a0 - bj) + abs_lanes(a1 - bj);
    };
    // Below the rows it shares with its left neighbour a column can only grow its vertical chain
    // (10)/(11) with one predecessor; it goes on while that chain is <= UB. Returns rows computed.
    auto vertical_tail = [&](Lanes* col, std::size_t i, const Lanes& bj) {
        Lanes up = col[i - 1];
        if (!any(up <= ub)) return i;
        for (; i < m_; ++i) {
            up = abs_lanes(a[i] - bj) + up;
            col[i] = up;
            if (!any(up <= ub)) return i + 1;
        }
        return i;
    };
    auto last_live_row = [&](const Lanes* col, std::size_t rows) {
        long r = static_cast<long>(rows) - 1;
        while (r >= 0 && !any(col[r] <= ub)) --r;
        return r;
    };
    // Registers a finished column and its end candidate. Returns true when every lane is answered
    // (early-exit mode).
    auto finish_column = [&](std::size_t j, const Lanes* col, long last_live) {
        column_offset_[j] = static_cast<std::uint32_t>(col - arena_.get());
        column_rows_[j] = static_cast<std::uint16_t>(last_live + 1);
        column_stamp_[j] = stamp_;
        if (last_live != static_cast<long>(m_) - 1) return false;
        // Candidate ends; strict '<' keeps the earliest end on ties, as the published argmin.
        const Lanes end_value = col[m_ - 1];
        const Mask better = (end_value < best) & (end_value <= ub);
        if (!any(better)) return false;
        best = select(better, end_value, best);
        for (std::size_t k = 0; k < g.lanes; ++k) {
            if (better[k]) best_end[k] = j;
        }
        ub = select(better, end_value, ub);  // UB tightens to the best end so far
        if (!stop_at_first) return false;
        for (std::size_t k = 0; k < g.lanes; ++k) {
            if (better[k]) {
                ub.set(k, -1.0);  // this lane is answered: let its cells die
                --open_lanes;
            }
        }
        return open_lanes == 0;
    };

    // Cells over UB keep their computed value instead of being set to infinity: that keeps the
    // compare off the row-to-row dependency chain. A value computed from a subset of the
    // predecessors is never below the true one, and every cell whose true value is <= UB has its
    // best predecessor computed, so kept cells <= UB are exact and cells over UB never win.
    for (std::size_t j = 0; j < n_; ++j) {
        if (prev_hi < 0 && !any(abs_lanes(a0 - ref[j]) <= ub)) continue;  // (8) >= |a1 - bj| > UB
        const Lanes d0 = first_row_at(j);
        if (prev_hi < 0 && !any(d0 <= ub)) continue;
        if (used + 2 * m_ > arena_capacity_ - m_) return false;

        // Column A = j and, fused in the same loop, column B = j + 1: B's row i needs A's rows i-1
        // and i, so the two dependency chains run side by side.
        const bool pair = j + 1 < n_;
        const Lanes bA = ref[j];
        const Lanes bB = pair ? ref[j + 1] : inf;
        Lanes* colA = arena_.get() + used;
        Lanes* colB = scratch;
        colA[0] = d0;
        Lanes upA = d0;
        Lanes upB = pair ? first_row_at(j + 1) : inf;
        colB[0] = upB;
        const std::size_t reach = std::min<std::size_t>(static_cast<std::size_t>(prev_hi + 2), m_);
        std::size_t i = 1;
        for (; i < reach; ++i) {
            const Lanes left = static_cast<long>(i) <= prev_hi ? prev[i] : inf;
            const Lanes diagB = upA;
            upA = abs_lanes(a[i] - bA) + min_lanes(min_lanes(prev[i - 1], left), upA);  // (10)/(11)
            colA[i] = upA;
            upB = abs_lanes(a[i] - bB) + min_lanes(min_lanes(diagB, upA), upB);
            colB[i] = upB;
        }
        const std::size_t rows_a = i < reach ? i : vertical_tail(colA, i, bA);
        cells_ += rows_a;
        const long live_a = last_live_row(colA, rows_a);
        used += static_cast<std::size_t>(live_a + 1);
        prev = colA;
        prev_hi = live_a;
        if (finish_column(j, colA, live_a)) break;
        if (!pair) continue;

        // Column B: rows beside A's computed rows, then its own vertical chain.
        const bool b_needed = live_a >= 0 || any(colB[0] <= ub);
        if (!b_needed) continue;
        for (i = reach; i <= rows_a && i < m_; ++i) {
            const Lanes left = i < rows_a ? colA[i] : inf;
            upB = abs_lanes(a[i] - bB) + min_lanes(min_lanes(colA[i - 1], left), upB);
            colB[i] = upB;
        }
        const std::size_t rows_b = vertical_tail(colB, std::max<std::size_t>(i, 1), bB);
        cells_ += rows_b;
        const long live_b = last_live_row(colB, rows_b);
        Lanes* placed = arena_.get() + used;
        for (long r = 0; r <= live_b; ++r) {
            placed[r] = colB[r];
            asm("" ::: "memory");  // a short copy: keep it inline instead of a call to memmove
        }
        used += static_cast<std::size_t>(live_b + 1);
        prev = placed;
        prev_hi = live_b;
        ++j;
        if (finish_column(j, placed, live_b)) break;
    }
    for (std::size_t k = 0; k < kLanes; ++k) best_cost[k] = best[k];
    return true;
}

double StreamingMdtw::cell(std::size_t j, std::size_t i, std::size_t lane) const {
    if (column_stamp_[j] != stamp_ || i >= column_rows_[j]) return kInf;
    return arena_[column_offset_[j] + i][lane];
}

void StreamingMdtw::backtrack(std::size_t lane, std::size_t end, MatchResult& out) {
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
            // (12), with the published implementation's tie-breaking.
            switch (back_step(cell(j - 1, i - 1, lane), cell(j, i - 1, lane), cell(j - 1, i, lane))) {
                case BackStep::Diagonal: --i, --j; break;
                case BackStep::Vertical: --i; break;
                case BackStep::Horizontal: --j; break;
            }
        }
        path.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    }
    std::reverse(path.begin(), path.end());
    out.start = j;
    out.end = end;
}

void StreamingMdtw::load_lanes(const Group& g, std::span<const double> windows) {
    for (std::size_t i = 0; i < m_; ++i) {
        Lanes v = broadcast(0.0);
        for (std::size_t k = 0; k < g.lanes; ++k) v.set(k, windows[(g.first_joint + k) * m_ + i]);
        lanes_window_[i] = v;
    }
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
            ub.set(k, shifted_path_bound(g.first_joint + k, a));
            bounded = bounded && std::isfinite(ub[k]);
        }
        load_lanes(g, windows);
        double best_cost[kLanes];
        std::size_t best_end[kLanes] = {};
        bool exact = bounded && sweep(g, lanes_window_.get(), ub, false, best_cost, best_end);
        for (std::size_t k = 0; exact && k < g.lanes; ++k) exact = std::isfinite(best_cost[k]);
        for (std::size_t k = 0; k < g.lanes; ++k) {
            const std::size_t joint = g.first_joint + k;
            const auto a = windows.subspan(joint * m_, m_);
            if (exact) {
                backtrack(k, best_end[k], results_[joint]);
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
                ub.set(k, tau[joint]);
                open = true;
            }
        }
        if (!open) continue;
        load_lanes(g, windows);
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
