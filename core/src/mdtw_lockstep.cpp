// Step 2 of the streaming matcher, for joints whose live cells overlap: up to eight joints share one
// sweep in the lanes of an 8 x double vector, column by column (two adjacent columns fused); with
// AVX2 but not AVX-512 also in 8 float lanes (LockstepFloat), through the same column loop.
#include "mdtw_sweeps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace warpguard::sweeps {

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

struct Lockstep::Lanes {
    Native v;
    double operator[](std::size_t k) const { return v[k]; }
    void set(std::size_t k, double x) { v[k] = x; }
};

namespace {

using Lanes = Lockstep::Lanes;

inline Lanes broadcast(double x) { return {Native{x, x, x, x, x, x, x, x}}; }
inline Lanes operator-(const Lanes& a, const Lanes& b) { return {a.v - b.v}; }
inline Lanes operator+(const Lanes& a, const Lanes& b) { return {a.v + b.v}; }
inline Mask operator<=(const Lanes& a, const Lanes& b) { return {a.v <= b.v}; }
inline Mask operator<(const Lanes& a, const Lanes& b) { return {a.v < b.v}; }
inline Mask operator==(const Lanes& a, const Lanes& b) { return {a.v == b.v}; }
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

struct Lockstep::Lanes {
    Half lo, hi;
    double operator[](std::size_t k) const { return k < 4 ? lo[k] : hi[k - 4]; }
    void set(std::size_t k, double v) { (k < 4 ? lo[k] : hi[k - 4]) = v; }
};

namespace {

using Lanes = Lockstep::Lanes;

inline Lanes broadcast(double v) { return {Half{v, v, v, v}, Half{v, v, v, v}}; }
inline Lanes operator-(const Lanes& a, const Lanes& b) { return {a.lo - b.lo, a.hi - b.hi}; }
inline Lanes operator+(const Lanes& a, const Lanes& b) { return {a.lo + b.lo, a.hi + b.hi}; }
inline Mask operator<=(const Lanes& a, const Lanes& b) { return {a.lo <= b.lo, a.hi <= b.hi}; }
inline Mask operator<(const Lanes& a, const Lanes& b) { return {a.lo < b.lo, a.hi < b.hi}; }
inline Mask operator==(const Lanes& a, const Lanes& b) { return {a.lo == b.lo, a.hi == b.hi}; }
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

}  // namespace

Lockstep::Lockstep(std::size_t window, std::span<const std::vector<double>> references)
    : joints_(references.size()), m_(window), n_(references[0].size()) {
    for (std::size_t first = 0; first < joints_; first += kLanes) {
        Group g;
        g.first_joint = first;
        g.lanes = std::min(kLanes, joints_ - first);
        g.reference.reset(new Lanes[n_]);
        for (std::size_t j = 0; j < n_; ++j) {
            Lanes v = broadcast(0.0);
            for (std::size_t k = 0; k < g.lanes; ++k) v.set(k, references[first + k][j]);
            g.reference[j] = v;
        }
        groups_.push_back(std::move(g));
    }
    columns_.reset(new Lanes[3 * m_]);
    starts_.reset(new Lanes[3 * m_]);
    lanes_window_.reset(new Lanes[m_]);
}

Lockstep::~Lockstep() = default;

void Lockstep::sweep(std::span<const double> windows, const double* bound, bool stop_at_first, Found* found) {
    for (const Group& g : groups_) {
        Lanes ub = broadcast(-1.0);  // padding lanes and joints not asked for never live
        bool open = false;
        for (std::size_t k = 0; k < g.lanes; ++k) {
            ub.set(k, bound[g.first_joint + k]);
            open = open || bound[g.first_joint + k] >= 0.0;
        }
        if (!open) continue;
        for (std::size_t i = 0; i < m_; ++i) {
            Lanes v = broadcast(0.0);
            for (std::size_t k = 0; k < g.lanes; ++k) v.set(k, windows[(g.first_joint + k) * m_ + i]);
            lanes_window_[i] = v;
        }
        double best_cost[kLanes];
        std::size_t best_end[kLanes] = {};
        std::size_t best_start[kLanes] = {};
        sweep_group(g, lanes_window_.get(), ub, stop_at_first, best_cost, best_end, best_start);
        for (std::size_t k = 0; k < g.lanes; ++k) {
            if (bound[g.first_joint + k] >= 0.0) found[g.first_joint + k] = {best_cost[k], best_end[k], best_start[k]};
        }
    }
}

namespace {

// One cell of rule (11) with the start of the path the published backtracking (12) would follow
// from it. The value is the exact minimum (min is exact, so it does not matter which predecessor
// supplies it); the start follows back_step's tie-breaking: diagonal if it is <= both others (it
// equals their minimum), else vertical if it is <= horizontal, else horizontal. The masks are off
// the value's dependency chain.
struct Step {
    Lanes value, start;
};

inline Step cell_step(const Lanes& cost, const Lanes& diag, const Lanes& sdiag, const Lanes& up, const Lanes& sup,
                      const Lanes& left, const Lanes& sleft) {
    const Lanes best = min_lanes(min_lanes(diag, left), up);
    const Lanes s1 = select(up <= left, sup, sleft);
    return {cost + best, select(diag == best, sdiag, s1)};
}

inline Lanes broadcast_like(const Lanes&, double x) { return broadcast(x); }

// The column loop of both lockstep sweeps, for lanes L (doubles, or floats in LockstepFloat):
// every cell of a column whose value can be <= `ub` (per lane; `finish` may lower it), the path
// starts carried by `cell` (a CellStep: value and start from the cost and the three predecessors),
// and each finished column handed to `finish(j, column, starts, last live row)`, which returns
// true to end the sweep (early exit). Three column slots of m cells rotate in `columns`/`starts`.
//
// Cells over UB keep their computed value instead of being set to infinity: that keeps the
// compare off the row-to-row dependency chain. A value computed from a subset of the
// predecessors is never below the true one, and every cell whose true value is <= UB has its
// best predecessor computed, so kept cells <= UB are exact and cells over UB never win (nor
// tie with a cell of an optimal path, so the carried starts of those cells are exact too).
template <class L, class CellStep, class Finish>
void sweep_columns(std::size_t m, std::size_t n, std::size_t lanes, const L* ref, const L* a, const L& ub, L* columns,
                   L* starts, std::uint64_t& cells, const CellStep& cell, const Finish& finish) {
    const L inf = broadcast_like(a[0], kInf);
    const L a0 = a[0], a1 = a[1];
    long prev_hi = -1;  // last live row (some lane <= UB) of the previous column, -1 if none
    std::size_t prev_slot = 0;
    auto values = [&](std::size_t slot) { return columns + slot * m; };
    auto starts_of = [&](std::size_t slot) { return starts + slot * m; };
    // Rule (8) (or (9) in the last column): the first row, where every column may begin a match.
    auto first_row_at = [&](std::size_t j) {
        const L bj = ref[j];
        if (j + 1 < n) {
            const L bj1 = ref[j + 1];
            return abs_lanes(a0 - bj) + min_lanes(min_lanes(abs_lanes(a1 - bj1), abs_lanes(a1 - bj)), abs_lanes(a0 - bj1));
        }
        return abs_lanes(a0 - bj) + abs_lanes(a1 - bj);
    };
    // Below the rows it shares with its left neighbour a column can only grow its vertical chain
    // (10)/(11) with one predecessor; it goes on while that chain is <= UB. Returns rows computed.
    auto vertical_tail = [&](L* col, L* col_s, std::size_t i, const L& bj) {
        L up = col[i - 1];
        const L s = col_s[i - 1];
        if (!any(up <= ub)) return i;
        for (; i < m; ++i) {
            up = abs_lanes(a[i] - bj) + up;
            col[i] = up;
            col_s[i] = s;
            if (!any(up <= ub)) return i + 1;
        }
        return i;
    };
    auto last_live_row = [&](const L* col, std::size_t rows) {
        long r = static_cast<long>(rows) - 1;
        while (r >= 0 && !any(col[r] <= ub)) --r;
        return r;
    };
    for (std::size_t j = 0; j < n; ++j) {
        if (prev_hi < 0 && !any(abs_lanes(a0 - ref[j]) <= ub)) continue;  // (8) >= |a0 - bj| > UB
        const L d0 = first_row_at(j);
        if (prev_hi < 0 && !any(d0 <= ub)) continue;
        const L* prev = values(prev_slot);
        const L* prev_s = starts_of(prev_slot);
        const std::size_t slot_a = (prev_slot + 1) % 3, slot_b = (prev_slot + 2) % 3;

        // Column A = j and, fused in the same loop, column B = j + 1: B's row i needs A's rows i-1
        // and i, so the two dependency chains run side by side.
        const bool pair = j + 1 < n;
        const L bA = ref[j];
        const L bB = pair ? ref[j + 1] : inf;
        L* colA = values(slot_a);
        L* sA = starts_of(slot_a);
        L* colB = values(slot_b);
        L* sB = starts_of(slot_b);
        colA[0] = d0;
        sA[0] = broadcast_like(d0, static_cast<double>(j));
        auto upA = cell.first(d0, sA[0]);
        auto upB = cell.first(pair ? first_row_at(j + 1) : inf, broadcast_like(d0, static_cast<double>(j + 1)));
        colB[0] = upB.value;
        sB[0] = upB.start;
        const std::size_t reach = std::min<std::size_t>(static_cast<std::size_t>(prev_hi + 2), m);
        std::size_t i = 1;
        for (; i < reach; ++i) {
            const L left = static_cast<long>(i) <= prev_hi ? prev[i] : inf;
            const auto diagB = upA;
            upA = cell(abs_lanes(a[i] - bA), prev[i - 1], prev_s[i - 1], upA.value, upA.start, left, prev_s[i]);  // (10)/(11)
            colA[i] = upA.value;
            sA[i] = upA.start;
            upB = cell(abs_lanes(a[i] - bB), diagB.value, diagB.start, upB.value, upB.start, upA.value, upA.start);
            colB[i] = upB.value;
            sB[i] = upB.start;
        }
        const std::size_t rows_a = i < reach ? i : vertical_tail(colA, sA, i, bA);
        cells += rows_a * lanes;
        const long live_a = last_live_row(colA, rows_a);
        prev_slot = slot_a;
        prev_hi = live_a;
        if (finish(j, colA, sA, live_a)) return;
        if (!pair) continue;

        // Column B: rows beside A's computed rows, then its own vertical chain.
        const bool b_needed = live_a >= 0 || any(colB[0] <= ub);
        if (!b_needed) continue;
        for (i = reach; i <= rows_a && i < m; ++i) {
            const L left = i < rows_a ? colA[i] : inf;
            upB = cell(abs_lanes(a[i] - bB), colA[i - 1], sA[i - 1], upB.value, upB.start, left, sA[i]);
            colB[i] = upB.value;
            sB[i] = upB.start;
        }
        const std::size_t rows_b = vertical_tail(colB, sB, std::max<std::size_t>(i, 1), bB);
        cells += rows_b * lanes;
        const long live_b = last_live_row(colB, rows_b);
        prev_slot = slot_b;
        prev_hi = live_b;
        ++j;
        if (finish(j, colB, sB, live_b)) return;
    }
}

// Lockstep's cell: exact, with back_step's tie-breaking.
struct ExactCell {
    Step first(const Lanes& value, const Lanes& start) const { return {value, start}; }
    Step operator()(const Lanes& cost, const Lanes& diag, const Lanes& sdiag, const Lanes& up, const Lanes& sup,
                    const Lanes& left, const Lanes& sleft) const {
        return cell_step(cost, diag, sdiag, up, sup, left, sleft);
    }
};

}  // namespace

void Lockstep::sweep_group(const Group& g, const Lanes* a, Lanes ub, bool stop_at_first, double* best_cost,
                           std::size_t* best_end, std::size_t* best_start) {
    Lanes best = broadcast(kInf);
    Lanes best_s = broadcast(0.0);
    std::size_t open_lanes = 0;
    for (std::size_t k = 0; k < kLanes; ++k) open_lanes += ub[k] >= 0.0;
    // Registers a finished column's end candidate. Returns true when every lane is answered
    // (early-exit mode).
    auto finish_column = [&](std::size_t j, const Lanes* col, const Lanes* col_s, long last_live) {
        if (last_live != static_cast<long>(m_) - 1) return false;
        // Candidate ends; strict '<' keeps the earliest end on ties, as the published argmin.
        const Lanes end_value = col[m_ - 1];
        const Mask better = (end_value < best) & (end_value <= ub);
        if (!any(better)) return false;
        best = select(better, end_value, best);
        best_s = select(better, col_s[m_ - 1], best_s);
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
    sweep_columns(m_, n_, g.lanes, g.reference.get(), a, ub, columns_.get(), starts_.get(), cells_, ExactCell{},
                  finish_column);
    for (std::size_t k = 0; k < kLanes; ++k) {
        best_cost[k] = best[k];
        best_start[k] = std::isfinite(best[k]) ? static_cast<std::size_t>(best_s[k]) : 0;
    }
}

// ---- The lockstep sweep in float lanes (AVX2 builds without AVX-512) ----

#if defined(__AVX2__) && !defined(__AVX512F__)
namespace {

// Eight float lanes in one AVX2 register, one per joint of a group, with the operations
// sweep_columns uses under the names the double lanes have; comparisons give lane masks.
struct FLanes {
    __m256 v;
};
struct FMask {
    __m256 m;
};
inline FLanes fbroadcast(float x) { return {_mm256_set1_ps(x)}; }
inline FLanes broadcast_like(const FLanes&, double x) { return fbroadcast(static_cast<float>(x)); }
inline FLanes operator+(FLanes a, FLanes b) { return {_mm256_add_ps(a.v, b.v)}; }
inline FLanes operator-(FLanes a, FLanes b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline FLanes abs_lanes(FLanes x) { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x.v)}; }
inline FLanes min_lanes(FLanes a, FLanes b) { return {_mm256_min_ps(a.v, b.v)}; }
inline FMask operator<=(FLanes a, FLanes b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LE_OQ)}; }
inline bool any(FMask m) { return _mm256_movemask_ps(m.m) != 0; }
inline FLanes fselect(FMask m, FLanes yes, FLanes no) { return {_mm256_blendv_ps(no.v, yes.v, m.m)}; }
// min(a, b) where m is set, src elsewhere.
inline FLanes fmin_where(FLanes src, FMask m, FLanes a, FLanes b) { return {_mm256_blendv_ps(src.v, _mm256_min_ps(a.v, b.v), m.m)}; }

// The bound as a float, rounded up (a float bound below the double one would drop cells).
inline float float_up(double x) {
    const double capped = std::min(x, static_cast<double>(std::numeric_limits<float>::max()));
    float f = static_cast<float>(capped);
    if (static_cast<double>(f) < capped) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    return f;
}

struct FStep {
    FLanes value, start;
};

// One cell of rule (11) in floats with the least start over the predecessors within `tie` of the
// minimum (WavefrontFloat's rule: no larger than the start of the published path from the cell).
struct FloatCell {
    FLanes tie, inf;
    FStep first(FLanes value, FLanes start) const { return {value, start}; }
    FStep operator()(FLanes cost, FLanes diag, FLanes sdiag, FLanes up, FLanes sup, FLanes left, FLanes sleft) const {
        const FLanes best = min_lanes(min_lanes(diag, up), left);
        const FLanes near = best + tie;
        FLanes s = fselect(left <= near, sleft, inf);
        s = fmin_where(s, up <= near, s, sup);
        s = fmin_where(s, diag <= near, s, sdiag);
        return {cost + best, s};
    }
};

}  // namespace

struct LockstepFloat::Impl {
    static constexpr std::size_t kLanes = 8;
    struct Group {
        std::size_t first_joint = 0, lanes = 0;
        std::unique_ptr<FLanes[]> reference;  // n entries
    };
    std::size_t joints, m, n;
    std::vector<Group> groups;
    std::unique_ptr<FLanes[]> columns, starts, window;  // 3 x m, 3 x m, m
    std::uint64_t cells = 0;
    CandidateList lists[kLanes];

    Impl(std::size_t window_, std::span<const std::vector<double>> references)
        : joints(references.size()), m(window_), n(references[0].size()) {
        for (std::size_t first = 0; first < joints; first += kLanes) {
            Group g;
            g.first_joint = first;
            g.lanes = std::min(kLanes, joints - first);
            g.reference.reset(new FLanes[n]);
            for (std::size_t j = 0; j < n; ++j) {
                alignas(32) float x[kLanes] = {};
                for (std::size_t k = 0; k < g.lanes; ++k) x[k] = static_cast<float>(references[first + k][j]);
                g.reference[j].v = _mm256_load_ps(x);
            }
            groups.push_back(std::move(g));
        }
        columns.reset(new FLanes[3 * m]);
        starts.reset(new FLanes[3 * m]);
        window.reset(new FLanes[m]);
    }

    void sweep(std::span<const double> windows, const double* bound, const double* tie, Candidates* out) {
        for (const Group& g : groups) {
            bool open = false;
            alignas(32) float ubs[kLanes], ties[kLanes];
            for (std::size_t k = 0; k < kLanes; ++k) {
                const bool swept = k < g.lanes && bound[g.first_joint + k] >= 0.0;
                ubs[k] = swept ? float_up(bound[g.first_joint + k]) : -1.0f;  // padding never lives
                ties[k] = swept ? float_up(tie[g.first_joint + k]) : 0.0f;
                lists[k].reset(swept ? tie[g.first_joint + k] : 0.0);
                open = open || swept;
            }
            if (!open) continue;
            for (std::size_t i = 0; i < m; ++i) {
                alignas(32) float x[kLanes] = {};
                for (std::size_t k = 0; k < g.lanes; ++k) x[k] = static_cast<float>(windows[(g.first_joint + k) * m + i]);
                window[i].v = _mm256_load_ps(x);
            }
            sweep_group(g, ubs, bound + g.first_joint, _mm256_load_ps(ties));
            for (std::size_t k = 0; k < g.lanes; ++k) {
                if (bound[g.first_joint + k] >= 0.0) lists[k].clusters(out[g.first_joint + k]);
            }
        }
    }

    // Lockstep::sweep_group's column loop (sweep_columns) in floats: cells over the lane's bound
    // keep their values (they never win, and no cell <= the bound depends on them).
    void sweep_group(const Group& g, float* ubs, const double* bound, __m256 tie_v) {
        FLanes ub{_mm256_load_ps(ubs)};
        double live_bound[kLanes];
        for (std::size_t k = 0; k < kLanes; ++k) live_bound[k] = k < g.lanes ? bound[k] : -1.0;
        // A finished column's ends: every live lane's end goes to its joint's candidate list; a new
        // best tightens that lane's bound to best + tie (every end that can be the optimum is
        // within `tie` of it).
        auto finish_column = [&](std::size_t j, const FLanes* col, const FLanes* col_s, long last_live) {
            if (last_live != static_cast<long>(m) - 1) return false;
            unsigned live = static_cast<unsigned>(_mm256_movemask_ps((col[m - 1] <= ub).m));
            if (live == 0) return false;
            alignas(32) float v[kLanes], st[kLanes];
            _mm256_store_ps(v, col[m - 1].v);
            _mm256_store_ps(st, col_s[m - 1].v);
            bool tightened = false;
            for (; live != 0; live &= live - 1) {
                const auto k = static_cast<std::size_t>(__builtin_ctz(live));
                const double value = static_cast<double>(v[k]);
                if (lists[k].offer(value, j, static_cast<std::size_t>(st[k]))) {
                    live_bound[k] = std::min(live_bound[k], value + lists[k].tie);
                    ubs[k] = float_up(live_bound[k]);
                    tightened = true;
                }
            }
            if (tightened) ub.v = _mm256_load_ps(ubs);
            return false;
        };
        sweep_columns(m, n, g.lanes, g.reference.get(), window.get(), ub, columns.get(), starts.get(), cells,
                      FloatCell{{tie_v}, fbroadcast(std::numeric_limits<float>::infinity())}, finish_column);
    }
};
constexpr bool kFloatLockstep = true;
#else
struct LockstepFloat::Impl {};  // not built (see mdtw_sweeps.hpp)
constexpr bool kFloatLockstep = false;
#endif

bool LockstepFloat::built() { return kFloatLockstep; }

LockstepFloat::LockstepFloat(std::size_t window, std::span<const std::vector<double>> references) {
    usable_ = kFloatLockstep && references_fit_floats(references);
#if defined(__AVX2__) && !defined(__AVX512F__)
    if (usable_) impl_ = std::make_unique<Impl>(window, references);
#else
    (void)window;
#endif
}

LockstepFloat::~LockstepFloat() = default;

std::uint64_t LockstepFloat::cells() const {
#if defined(__AVX2__) && !defined(__AVX512F__)
    if (impl_) return impl_->cells;
#endif
    return 0;
}

void LockstepFloat::sweep(std::span<const double> windows, const double* bound, const double* tie, Candidates* out) {
#if defined(__AVX2__) && !defined(__AVX512F__)
    impl_->sweep(windows, bound, tie, out);
#else
    (void)windows, (void)bound, (void)tie, (void)out;
    throw std::logic_error("the float lockstep sweep is not built (it needs AVX2 without AVX-512)");
#endif
}

SegmentRecursion::SegmentRecursion(std::size_t window, std::span<const std::vector<double>> references,
                                   std::size_t max_width)
    : m_(window),
      n_(references[0].size()),
      max_width_(max_width),
      references_(references),
      values_(new Lanes[window * max_width]),
      segment_(new Lanes[max_width + 1]),
      window_(new Lanes[window]) {}

SegmentRecursion::~SegmentRecursion() = default;

double SegmentRecursion::at(std::size_t i, std::size_t x, std::size_t c) const { return values_[i * stride_ + x][c]; }

void SegmentRecursion::compute(std::span<const double> windows, const std::size_t* joints, const std::size_t* start,
                               const std::size_t* width, std::size_t count) {
    std::size_t w = 0;
    for (std::size_t c = 0; c < count; ++c) w = std::max(w, width[c]);
    stride_ = w;
    // Lane c's reference from its segment's start, one column past its end (rule (8) looks one
    // column ahead; +inf past the reference turns (8) into (9)); lanes without a joint hold zeros.
    for (std::size_t x = 0; x <= w; ++x) {
        Lanes v = broadcast(0.0);
        for (std::size_t c = 0; c < count; ++c) {
            const std::size_t j = start[c] + x;
            v.set(c, j < n_ ? references_[joints[c]][j] : kInf);
        }
        segment_[x] = v;
    }
    for (std::size_t i = 0; i < m_; ++i) {
        Lanes v = broadcast(0.0);
        for (std::size_t c = 0; c < count; ++c) v.set(c, windows[joints[c] * m_ + i]);
        window_[i] = v;
    }
    const Lanes* b = segment_.get();
    const Lanes* a = window_.get();
    Lanes* d = values_.get();
    auto row = [&](std::size_t i) { return d + i * w; };
    // Row 1: (8)/(9).
    for (std::size_t x = 0; x < w; ++x) {
        row(0)[x] = abs_lanes(a[0] - b[x]) +
                    min_lanes(min_lanes(abs_lanes(a[1] - b[x + 1]), abs_lanes(a[1] - b[x])), abs_lanes(a[0] - b[x + 1]));
    }
    // Rows 2..m, two at a time: row i at column x beside row i + 1 at column x - 1, whose
    // predecessors are all computed one step earlier, so the two rows' chains run side by side.
    // (11): cost + min(diag, up, left); at the segment's first column only the cell above (10).
    // Each row's left neighbour stays in registers (li, ln; and row i's last two cells for row
    // i + 1): read back from the row just stored, every cell of both chains waited on the store.
    auto first = [&](std::size_t i, const Lanes& up) { return abs_lanes(a[i] - b[0]) + up; };  // (10)
    auto cell = [&](std::size_t i, std::size_t x, const Lanes& diag, const Lanes& up, const Lanes& left) {
        return abs_lanes(a[i] - b[x]) + min_lanes(min_lanes(diag, up), left);  // (11)
    };
    auto next = [&](std::size_t i, std::size_t x, const Lanes& left) {
        const Lanes* up = row(i - 1);
        return cell(i, x, up[x - 1], up[x], left);
    };
    std::size_t i = 1;
    for (; i + 1 < m_; i += 2) {
        Lanes* ri = row(i);
        Lanes* rn = row(i + 1);
        Lanes li = first(i, row(i - 1)[0]);
        ri[0] = li;
        Lanes ln = first(i + 1, li);
        if (w == 1) {
            rn[0] = ln;
            continue;
        }
        Lanes before = li;  // row i at column x - 2, then li at x - 1
        li = next(i, 1, li);
        ri[1] = li;
        rn[0] = ln;
        for (std::size_t x = 2; x < w; ++x) {
            const Lanes diag = before;  // row i, column x - 2: the diagonal of row i + 1 at x - 1
            const Lanes up = li;        // row i, column x - 1
            before = li;
            li = next(i, x, li);
            ri[x] = li;
            ln = cell(i + 1, x - 1, diag, up, ln);
            rn[x - 1] = ln;
        }
        ln = cell(i + 1, w - 1, before, li, ln);
        rn[w - 1] = ln;
    }
    if (i < m_) {
        Lanes* ri = row(i);
        Lanes li = first(i, row(i - 1)[0]);
        ri[0] = li;
        for (std::size_t x = 1; x < w; ++x) {
            li = next(i, x, li);
            ri[x] = li;
        }
    }
}

}  // namespace warpguard::sweeps
