// Step 2 of the streaming matcher, for joints whose live cells overlap: up to eight joints share one
// sweep in the lanes of an 8 x double vector, column by column (two adjacent columns fused).
#include "mdtw_sweeps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

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

}  // namespace

void Lockstep::sweep_group(const Group& g, const Lanes* a, Lanes ub, bool stop_at_first, double* best_cost,
                           std::size_t* best_end, std::size_t* best_start) {
    const Lanes inf = broadcast(kInf);
    const Lanes a0 = a[0], a1 = a[1];
    const Lanes* ref = g.reference.get();
    Lanes best = inf;
    Lanes best_s = broadcast(0.0);
    long prev_hi = -1;  // last live row (some lane <= UB) of the previous column, -1 if none
    std::size_t prev_slot = 0;
    std::size_t open_lanes = 0;
    for (std::size_t k = 0; k < kLanes; ++k) open_lanes += ub[k] >= 0.0;
    auto values = [&](std::size_t slot) { return columns_.get() + slot * m_; };
    auto starts = [&](std::size_t slot) { return starts_.get() + slot * m_; };

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
    auto vertical_tail = [&](Lanes* col, Lanes* col_s, std::size_t i, const Lanes& bj) {
        Lanes up = col[i - 1];
        const Lanes s = col_s[i - 1];
        if (!any(up <= ub)) return i;
        for (; i < m_; ++i) {
            up = abs_lanes(a[i] - bj) + up;
            col[i] = up;
            col_s[i] = s;
            if (!any(up <= ub)) return i + 1;
        }
        return i;
    };
    auto last_live_row = [&](const Lanes* col, std::size_t rows) {
        long r = static_cast<long>(rows) - 1;
        while (r >= 0 && !any(col[r] <= ub)) --r;
        return r;
    };
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

    // Cells over UB keep their computed value instead of being set to infinity: that keeps the
    // compare off the row-to-row dependency chain. A value computed from a subset of the
    // predecessors is never below the true one, and every cell whose true value is <= UB has its
    // best predecessor computed, so kept cells <= UB are exact and cells over UB never win (nor
    // tie with a cell of an optimal path, so the carried starts of those cells are exact too).
    // Only the previous column is needed: three column slots rotate (the previous one, A and B).
    for (std::size_t j = 0; j < n_; ++j) {
        if (prev_hi < 0 && !any(abs_lanes(a0 - ref[j]) <= ub)) continue;  // (8) >= |a1 - bj| > UB
        const Lanes d0 = first_row_at(j);
        if (prev_hi < 0 && !any(d0 <= ub)) continue;
        const Lanes* prev = values(prev_slot);
        const Lanes* prev_s = starts(prev_slot);
        const std::size_t slot_a = (prev_slot + 1) % 3, slot_b = (prev_slot + 2) % 3;

        // Column A = j and, fused in the same loop, column B = j + 1: B's row i needs A's rows i-1
        // and i, so the two dependency chains run side by side.
        const bool pair = j + 1 < n_;
        const Lanes bA = ref[j];
        const Lanes bB = pair ? ref[j + 1] : inf;
        Lanes* colA = values(slot_a);
        Lanes* sA = starts(slot_a);
        Lanes* colB = values(slot_b);
        Lanes* sB = starts(slot_b);
        colA[0] = d0;
        sA[0] = broadcast(static_cast<double>(j));
        Step upA{d0, sA[0]};
        Step upB{pair ? first_row_at(j + 1) : inf, broadcast(static_cast<double>(j + 1))};
        colB[0] = upB.value;
        sB[0] = upB.start;
        const std::size_t reach = std::min<std::size_t>(static_cast<std::size_t>(prev_hi + 2), m_);
        std::size_t i = 1;
        for (; i < reach; ++i) {
            const Lanes left = static_cast<long>(i) <= prev_hi ? prev[i] : inf;
            const Step diagB = upA;
            upA = cell_step(abs_lanes(a[i] - bA), prev[i - 1], prev_s[i - 1], upA.value, upA.start, left,
                            prev_s[i]);  // (10)/(11)
            colA[i] = upA.value;
            sA[i] = upA.start;
            upB = cell_step(abs_lanes(a[i] - bB), diagB.value, diagB.start, upB.value, upB.start, upA.value, upA.start);
            colB[i] = upB.value;
            sB[i] = upB.start;
        }
        const std::size_t rows_a = i < reach ? i : vertical_tail(colA, sA, i, bA);
        cells_ += rows_a * g.lanes;
        const long live_a = last_live_row(colA, rows_a);
        prev_slot = slot_a;
        prev_hi = live_a;
        if (finish_column(j, colA, sA, live_a)) break;
        if (!pair) continue;

        // Column B: rows beside A's computed rows, then its own vertical chain.
        const bool b_needed = live_a >= 0 || any(colB[0] <= ub);
        if (!b_needed) continue;
        for (i = reach; i <= rows_a && i < m_; ++i) {
            const Lanes left = i < rows_a ? colA[i] : inf;
            upB = cell_step(abs_lanes(a[i] - bB), colA[i - 1], sA[i - 1], upB.value, upB.start, left, sA[i]);
            colB[i] = upB.value;
            sB[i] = upB.start;
        }
        const std::size_t rows_b = vertical_tail(colB, sB, std::max<std::size_t>(i, 1), bB);
        cells_ += rows_b * g.lanes;
        const long live_b = last_live_row(colB, rows_b);
        prev_slot = slot_b;
        prev_hi = live_b;
        ++j;
        if (finish_column(j, colB, sB, live_b)) break;
    }
    for (std::size_t k = 0; k < kLanes; ++k) {
        best_cost[k] = best[k];
        best_start[k] = std::isfinite(best[k]) ? static_cast<std::size_t>(best_s[k]) : 0;
    }
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
    auto first = [&](std::size_t i) { row(i)[0] = abs_lanes(a[i] - b[0]) + row(i - 1)[0]; };
    auto next = [&](std::size_t i, std::size_t x) {
        const Lanes* up = row(i - 1);
        row(i)[x] = abs_lanes(a[i] - b[x]) + min_lanes(min_lanes(up[x - 1], up[x]), row(i)[x - 1]);
    };
    std::size_t i = 1;
    for (; i + 1 < m_; i += 2) {
        first(i);
        if (w == 1) {
            first(i + 1);
            continue;
        }
        next(i, 1);
        first(i + 1);
        for (std::size_t x = 2; x < w; ++x) {
            next(i, x);
            next(i + 1, x - 1);
        }
        next(i + 1, w - 1);
    }
    if (i < m_) {
        first(i);
        for (std::size_t x = 1; x < w; ++x) next(i, x);
    }
}

}  // namespace warpguard::sweeps
