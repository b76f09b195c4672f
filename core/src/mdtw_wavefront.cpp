// Step 2 of the streaming matcher, for joints whose live cells are few and lie apart: per joint,
// wavefront blocks of W adjacent reference columns, two joints' sweeps interleaved step by step.
#include "mdtw_sweeps.hpp"

#include <algorithm>
#include <limits>

#if defined(__AVX2__)
// GCC 12's AVX-512 intrinsics pass a deliberately undefined vector as the unused source of their
// masked forms, which -Wmaybe-uninitialized reports at every inlined use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace warpguard::sweeps {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::size_t kChunk = 64;  // columns per entry of the reference's value-range summary

// One vector of W doubles: lane k is column j0 + k of a block. Only the handful of operations the
// wavefront needs; every one is exact (min picks one of its inputs, |x| clears the sign bit).
#if defined(__AVX512F__)
constexpr std::size_t W = 8;
using Vec = __m512d;
using Mask = __mmask8;
inline Vec load(const double* p) { return _mm512_loadu_pd(p); }
inline void store(double* p, Vec v) { _mm512_storeu_pd(p, v); }
inline Vec broadcast(double x) { return _mm512_set1_pd(x); }
inline Vec add(Vec a, Vec b) { return _mm512_add_pd(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm512_sub_pd(a, b); }
inline Vec vabs(Vec x) { return _mm512_abs_pd(x); }
inline Vec vmin(Vec a, Vec b) { return _mm512_min_pd(a, b); }
inline Mask le(Vec a, Vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
inline Mask eq(Vec a, Vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ); }
inline Vec select(Mask m, Vec yes, Vec no) { return _mm512_mask_blend_pd(m, no, yes); }
inline unsigned bits(Mask m) { return m; }
inline Mask lane_mask(std::size_t k) { return static_cast<Mask>(1u << k); }
// [h[W-1], v[0], ..., v[W-2]]: the left neighbour of every lane, lane 0's from h.
inline Vec shift_in(Vec v, Vec h) {
    return _mm512_castsi512_pd(_mm512_alignr_epi64(_mm512_castpd_si512(v), _mm512_castpd_si512(h), 7));
}
#elif defined(__AVX2__)
constexpr std::size_t W = 4;
using Vec = __m256d;
using Mask = __m256d;
inline Vec load(const double* p) { return _mm256_loadu_pd(p); }
inline void store(double* p, Vec v) { _mm256_storeu_pd(p, v); }
inline Vec broadcast(double x) { return _mm256_set1_pd(x); }
inline Vec add(Vec a, Vec b) { return _mm256_add_pd(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm256_sub_pd(a, b); }
inline Vec vabs(Vec x) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), x); }
inline Vec vmin(Vec a, Vec b) { return _mm256_min_pd(a, b); }
inline Mask le(Vec a, Vec b) { return _mm256_cmp_pd(a, b, _CMP_LE_OQ); }
inline Mask eq(Vec a, Vec b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
inline Vec select(Mask m, Vec yes, Vec no) { return _mm256_blendv_pd(no, yes, m); }
inline unsigned bits(Mask m) { return static_cast<unsigned>(_mm256_movemask_pd(m)); }
inline Mask lane_mask(std::size_t k) {
    const long long x[4] = {k == 0 ? -1LL : 0, k == 1 ? -1LL : 0, k == 2 ? -1LL : 0, k == 3 ? -1LL : 0};
    return _mm256_castsi256_pd(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}
inline Vec shift_in(Vec v, Vec h) {
    const Vec vr = _mm256_permute4x64_pd(v, _MM_SHUFFLE(2, 1, 0, 3));  // [v3, v0, v1, v2]
    const Vec hr = _mm256_permute4x64_pd(h, _MM_SHUFFLE(2, 1, 0, 3));  // [h3, h0, h1, h2]
    return _mm256_blend_pd(vr, hr, 0b0001);
}
#else
// Portable: GCC vector extensions (SSE2 pairs on x86-64).
constexpr std::size_t W = 4;
using Vec = double __attribute__((vector_size(W * sizeof(double))));
using Mask = long long __attribute__((vector_size(W * sizeof(long long))));
inline Vec load(const double* p) {
    Vec v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
inline void store(double* p, Vec v) { __builtin_memcpy(p, &v, sizeof v); }
inline Vec broadcast(double x) { return Vec{x, x, x, x}; }
inline Vec add(Vec a, Vec b) { return a + b; }
inline Vec sub(Vec a, Vec b) { return a - b; }
inline Vec vabs(Vec x) {
    Mask m;
    __builtin_memcpy(&m, &x, sizeof m);
    m &= 0x7fffffffffffffffLL;
    __builtin_memcpy(&x, &m, sizeof x);
    return x;
}
inline Vec vmin(Vec a, Vec b) { return a < b ? a : b; }
inline Mask le(Vec a, Vec b) { return a <= b; }
inline Mask eq(Vec a, Vec b) { return a == b; }
inline Vec select(Mask m, Vec yes, Vec no) { return m ? yes : no; }
inline unsigned bits(Mask m) {
    unsigned r = 0;
    for (std::size_t k = 0; k < W; ++k) r |= (m[k] != 0 ? 1u : 0u) << k;
    return r;
}
inline Mask lane_mask(std::size_t k) {
    return Mask{k == 0 ? -1LL : 0, k == 1 ? -1LL : 0, k == 2 ? -1LL : 0, k == 3 ? -1LL : 0};
}
inline Vec shift_in(Vec v, Vec h) { return __builtin_shuffle(v, h, Mask{7, 0, 1, 2}); }
#endif

// dst[0] = v[W - 1].
#if defined(__AVX512F__)
inline void store_last(double* dst, Vec v) { _mm512_mask_storeu_pd(dst - (W - 1), static_cast<__mmask8>(0x80), v); }
#elif defined(__AVX2__)
inline void store_last(double* dst, Vec v) { _mm_storeh_pd(dst, _mm256_extractf128_pd(v, 1)); }
#else
inline void store_last(double* dst, Vec v) { dst[0] = v[W - 1]; }
#endif

inline double lane(Vec v, std::size_t k) {
    double x[W];
    store(x, v);
    return x[k];
}

// One cell of rule (11) for W lanes, with the start of the path the published backtracking (12)
// would follow from it. The value is the exact minimum (min is exact, so it does not matter which
// predecessor supplies it); the start follows back_step's tie-breaking: diagonal if it is <= both
// others, else vertical if it is <= horizontal, else horizontal.
struct Cell {
    Vec value, start;
};

inline Cell cell_step(Vec cost, Vec diag, Vec sdiag, Vec up, Vec sup, Vec left, Vec sleft) {
    const Vec best = vmin(vmin(diag, up), left);
    // back_step's order: the diagonal if it is <= both others, i.e. if it is their minimum;
    // else the vertical if it is <= the horizontal.
    const Vec s1 = select(le(up, left), sup, sleft);
    return {add(cost, best), select(eq(diag, best), sdiag, s1)};
}

}  // namespace

namespace {

// Rows -2W .. m + W - 1 of a column, rounded up to whole vectors.
inline std::size_t column_buffer_size(std::size_t m) { return (m + 3 * W + W - 1) / W * W; }

// One joint's pruned sweep (step 2), advanced one wavefront step at a time so that the sweeps of
// two joints can run interleaved: their dependency chains are independent, and one step alone
// waits on its own chain (a shift, an addition and a min per step) most of the time.
//
// A block hands its last column to the next block through a column buffer (row r at index
// r + 2W, +inf where the block computed nothing); two buffers alternate.
struct Cursor {
    // The joint.
    const double* b = nullptr;          // reference, +inf after column n - 1
    const double* chunk_lo = nullptr;   // min and max of b over each kChunk columns
    const double* chunk_hi = nullptr;
    const double* rev = nullptr;        // the window backwards, +inf outside it
    double* col_values[2] = {};         // the previous block's last column and this block's (then starts)
    std::size_t n = 0, m = 0, last_step = 0, col_size = 0;
    bool stop_at_first = false;
    // The bound and the answer.
    double a0s = 0;
    double live_bound = 0;  // live: <= UB and finite
    Vec ubv, a0, a1, inf, iota, zero;
    double best_cost = kInf;
    std::size_t best_end = 0, best_start = 0;
    std::uint64_t cells = 0;
    // The block.
    std::size_t j0 = 0;
    int cur = 0;
    bool fresh = true;   // no left neighbour: the next block begins where a first row is live
    long left_from = 0;  // the first row the left neighbour computed
    Vec d0, bv, j0v;
    long t = 0, first_step = 0, skipped = 0;
    Vec v, s, diag, sdiag;
    std::size_t starts_offset = 0;  // from a column buffer's values to its starts

    static constexpr std::size_t kRow0 = 2 * W;  // index of row 0 in a column buffer

    __attribute__((always_inline)) void start(const double* ref, const double* lo, const double* hi, double* window_rev,
                                              double* const* vals, std::size_t n_, std::size_t m_,
                                              std::span<const double> a, double ub, bool first_only) {
        b = ref;
        chunk_lo = lo;
        chunk_hi = hi;
        n = n_;
        m = m_;
        last_step = m + W - 2;  // the step at which the last lane reaches row m - 1
        col_size = column_buffer_size(m);
        starts_offset = col_size;
        // At step t, lane k's row t - k is rev[last_step - t + k]; rows outside the window read
        // +inf, so a lane that has not begun or is past the window holds +inf.
        for (std::size_t y = 0; y < m + 2 * W; ++y) {
            const long i = static_cast<long>(last_step) - static_cast<long>(y);
            window_rev[y] = i >= 0 && i < static_cast<long>(m) ? a[static_cast<std::size_t>(i)] : kInf;
        }
        rev = window_rev;
        for (int k = 0; k < 2; ++k) col_values[k] = vals[k];  // values, then starts
        stop_at_first = first_only;
        a0s = a[0];
        a0 = broadcast(a[0]);
        a1 = broadcast(a[1]);
        inf = broadcast(kInf);
        zero = broadcast(0.0);
        double x[W];
        for (std::size_t k = 0; k < W; ++k) x[k] = static_cast<double>(k);
        iota = load(x);
        live_bound = std::min(ub, std::numeric_limits<double>::max());  // UB = +inf prunes nothing
        ubv = broadcast(live_bound);
        best_cost = kInf;
        best_end = best_start = 0;
        cells = 0;
        j0 = 0;
        cur = 0;
        fresh = true;
    }

    // Rule (8), or (9) in the last column, for the W columns from j (+inf beyond the reference).
    __attribute__((always_inline)) Vec first_row_at(std::size_t j) const {
        const Vec bj = load(b + j), bj1 = load(b + j + 1);
        return add(vabs(sub(a0, bj)), vmin(vmin(vabs(sub(a1, bj1)), vabs(sub(a1, bj))), vabs(sub(a0, bj1))));
    }

    // First row in [r, m) at which column buffer `col` is live; -1 if none.
    long first_live_row(const double* col, long r) const {
        for (; r < static_cast<long>(m); r += static_cast<long>(W)) {
            const unsigned live = bits(le(load(col + kRow0 + static_cast<std::size_t>(r)), ubv));
            if (live != 0) {
                const long row = r + __builtin_ctz(live);
                return row < static_cast<long>(m) ? row : -1;
            }
        }
        return -1;
    }

    // The block right of the last one, if anything in it can be live: rows above the first live one
    // (of its first row or of its left neighbour) are all over UB. False when the sweep is over
    // (j0 >= n) or nothing enters it (then `fresh`: the next block needs a search).
    __attribute__((always_inline)) bool continue_block() {
        if (fresh || j0 >= n) return false;
        d0 = first_row_at(j0);
        long first = 0;
        if (bits(le(d0, ubv)) == 0) {
            first = first_live_row(col_values[1 - cur], left_from);
            if (first < 0) {
                fresh = true;
                return false;
            }
        }
        open_block(first);
        return true;
    }

    // Positions the cursor at the next block to sweep; false when the sweep is over.
    __attribute__((always_inline)) bool begin_block() {
        if (continue_block()) return true;
        if (!fresh) return false;
        // Nothing enters from the left: find the next column whose first row is live and start the
        // block there. (8) is >= |a0 - bj|: whole chunks of the reference whose values are all
        // farther than UB from a0 are passed over, then W columns at a time.
        unsigned row0_live = 0;
        for (;; j0 += W) {
            if (j0 >= n) return false;
            const std::size_t c = j0 / kChunk;
            if (a0s - live_bound > chunk_hi[c] || a0s + live_bound < chunk_lo[c]) {
                j0 = (c + 1) * kChunk - W;  // the loop adds W
                continue;
            }
            if (bits(le(vabs(sub(a0, load(b + j0))), ubv)) == 0) continue;
            row0_live = bits(le(first_row_at(j0), ubv));
            if (row0_live != 0) break;
        }
        j0 += static_cast<std::size_t>(__builtin_ctz(row0_live));
        d0 = first_row_at(j0);
        // The previous block, if any, is not this one's neighbour: nothing enters from the left.
        double* left = col_values[1 - cur];
        for (std::size_t x = 0; x < col_size; x += W) store(left + x, inf);
        open_block(0);
        return true;
    }

    // Sets up the block at j0 (d0 computed) from step `first`.
    __attribute__((always_inline)) void open_block(long first) {
        bv = load(b + j0);
        j0v = add(broadcast(static_cast<double>(j0)), iota);
        t = first;
        first_step = t;
        skipped = 0;
        double* out = col_values[cur];
        for (std::size_t x = 0; x < col_size; x += W) store(out + x, inf);
        v = inf;
        s = zero;
        diag = inf;  // the previous step's left neighbours
        sdiag = zero;
    }

    // The running state of a block, kept in registers by whoever steps it: the last step's values
    // and starts, the left neighbours of the step before, the bound, the step and pointers to the
    // step's row of the left column (read), of this block's column (written) and of the window.
    struct Regs {
        Vec v, s, diag, sdiag, ubv;
        long t;
        const double* left;  // row t of the left neighbour's values; its starts `so` further on
        double* out;         // row t - W + 1 of this block's values
        const double* win;   // rev + last_step - t
    };

    __attribute__((always_inline)) Regs regs() const {
        const std::size_t ti = static_cast<std::size_t>(t);
        return {v, s, diag, sdiag, ubv, t, col_values[1 - cur] + kRow0 + ti, col_values[cur] + kRow0 + ti + 1 - W,
                rev + last_step - ti};
    }
    __attribute__((always_inline)) void save(const Regs& r) {
        v = r.v, s = r.s, diag = r.diag, sdiag = r.sdiag, t = r.t;
    }

    // One wavefront step: lane k computes row t - k of column j0 + k. False when the block is done.
    template <bool kFirstRows>
    __attribute__((always_inline)) bool step_at(Vec& v_, Vec& s_, Vec& diag_, Vec& sdiag_, Vec& ubv_, long& t_,
                                                const double*& left_, double*& out_, const double*& win_) {
        const Vec left = shift_in(v_, broadcast(left_[0]));
        const Vec sleft = shift_in(s_, broadcast(left_[starts_offset]));
        const Vec cost = vabs(sub(load(win_), bv));
        Cell c = cell_step(cost, diag_, sdiag_, v_, s_, left, sleft);  // (10)/(11)
        if (kFirstRows) {
            // Lane t reaches row 1, which is not cumulative: (8)/(9), live or not.
            const Mask here = lane_mask(static_cast<std::size_t>(t_));
            c.value = select(here, d0, c.value);
            c.start = select(here, j0v, c.start);
        }
        diag_ = left;
        sdiag_ = sleft;
        v_ = c.value;
        s_ = c.start;
        // The last lane, row t - W + 1, goes to the column buffer.
        store_last(out_, v_);
        store_last(out_ + starts_offset, s_);

        if (t_ >= static_cast<long>(m) - 1) {
            // Lane k = t - (m - 1) reaches the last row: an end candidate. Strict '<' keeps the
            // earliest end on ties, as the published argmin.
            const std::size_t k_end = static_cast<std::size_t>(t_) + 1 - m;
            if (k_end < W && ((bits(le(v_, ubv_)) >> k_end) & 1u) != 0) {
                const double value = lane(v_, k_end);
                if (value < best_cost) {
                    best_cost = value;
                    best_end = j0 + k_end;
                    best_start = static_cast<std::size_t>(lane(s_, k_end));
                    if (stop_at_first) {
                        j0 = n;  // answered: no further block
                        return false;
                    }
                    live_bound = value;  // UB tightens to the best end so far
                    ubv = broadcast(live_bound);
                    ubv_ = ubv;
                }
            }
            if (t_ == static_cast<long>(last_step)) return false;
        }
        if (!kFirstRows && bits(le(vmin(v_, diag_), ubv_)) == 0) {
            // No lane is live, nor any diagonal predecessor of the next step, and every first row
            // has been read: nothing in this block is live until its left neighbour is again,
            // and the cells there have only dead predecessors besides it.
            const long next = first_live_row(col_values[1 - cur], t_ + 1);
            if (next < 0) return false;
            const long skip = next - 1 - t_;
            skipped += skip;
            t_ += skip;
            left_ += skip;
            out_ += skip;
            win_ -= skip;
            v_ = inf;
            diag_ = inf;
        }
        ++t_;
        ++left_;
        ++out_;
        --win_;
        return true;
    }

    // One step; at the end of a block the next block right of it opens in place when something can
    // be live in it. False when the cursor needs begin_block(): a search, or the sweep is over.
    __attribute__((always_inline)) bool step(Regs& r) {
        const bool go = r.t < static_cast<long>(W)
                            ? step_at<true>(r.v, r.s, r.diag, r.sdiag, r.ubv, r.t, r.left, r.out, r.win)
                            : step_at<false>(r.v, r.s, r.diag, r.sdiag, r.ubv, r.t, r.left, r.out, r.win);
        if (go) return true;
        t = r.t;
        end_block();
        if (!continue_block()) return false;
        r = regs();
        return true;
    }

    // Steps blocks until the cursor needs begin_block(). Their state lives in locals (registers).
    __attribute__((always_inline)) void run_blocks() {
        Regs r = regs();
        while (step(r)) {
        }
    }

    __attribute__((always_inline)) void end_block() {
        cells += static_cast<std::uint64_t>(t - first_step + 1 - skipped) * W;
        left_from = std::max(0L, first_step - static_cast<long>(W) + 1);  // the first row it wrote
        fresh = false;
        cur = 1 - cur;
        j0 += W;
    }
};

}  // namespace

struct Wavefront::Scratch {
    explicit Scratch(std::size_t m) {
        for (int c = 0; c < 2; ++c) {
            reversed[c].assign(m + 2 * W, 0.0);
            for (int k = 0; k < 2; ++k) columns[c][k].assign(2 * column_buffer_size(m), kInf);
        }
    }
    std::vector<double> reversed[2];
    std::vector<double> columns[2][2];  // per cursor: two column buffers, values then starts
};

Wavefront::Wavefront(std::size_t window, std::span<const std::vector<double>> references)
    : joints_(references.size()), m_(window), n_(references[0].size()), joints_to_sweep_(references.size()) {
    // +inf after the last column: a block's lanes beyond it, and b(j + 1) of rule (8) in the last
    // column, which turns (8) into (9) exactly (min(inf, |a1 - bj|, inf) = |a1 - bj|).
    for (const auto& r : references) {
        std::unique_ptr<double[]> p(new double[n_ + W + 1]);
        std::copy(r.begin(), r.end(), p.get());
        std::fill(p.get() + n_, p.get() + n_ + W + 1, kInf);
        padded_.push_back(std::move(p));
        std::vector<double> lo, hi;
        for (std::size_t c = 0; c < n_; c += kChunk) {
            const auto [mn, mx] = std::minmax_element(r.begin() + static_cast<std::ptrdiff_t>(c),
                                                      r.begin() + static_cast<std::ptrdiff_t>(std::min(n_, c + kChunk)));
            lo.push_back(*mn);
            hi.push_back(*mx);
        }
        chunk_lo_.push_back(std::move(lo));
        chunk_hi_.push_back(std::move(hi));
    }
    scratch_ = std::make_unique<Scratch>(m_);
}

Wavefront::~Wavefront() = default;

void Wavefront::sweep(std::span<const double> windows, const double* bound, bool stop_at_first, Found* found) {
    std::size_t count = 0;
    for (std::size_t joint = 0; joint < joints_; ++joint) {
        if (bound[joint] >= 0.0) joints_to_sweep_[count++] = joint;
    }
    const std::span<const std::size_t> joints(joints_to_sweep_.data(), count);
    // Two cursors take the joints in turn: whenever one's sweep is over it takes the next joint,
    // so both step side by side until the last sweep runs alone.
    Cursor cursor[2];
    std::size_t slot[2] = {0, 0};  // the cursor's position in `joints`
    std::size_t next = 0;
    auto finish = [&](int c) {
        found[joints[slot[c]]] = {cursor[c].best_cost, cursor[c].best_end, cursor[c].best_start};
        cells_ += cursor[c].cells;
    };
    // Starts the next joint on cursor c at its first block; false when no joint is left.
    auto launch = [&](int c) {
        while (next < joints.size()) {
            slot[c] = next;
            const std::size_t joint = joints[next++];
            double* cols[2] = {scratch_->columns[c][0].data(), scratch_->columns[c][1].data()};
            cursor[c].start(padded_[joint].get(), chunk_lo_[joint].data(), chunk_hi_[joint].data(),
                            scratch_->reversed[c].data(), cols, n_, m_, windows.subspan(joint * m_, m_), bound[joint],
                            stop_at_first);
            if (cursor[c].begin_block()) return true;
            finish(c);  // nothing in it is live
        }
        return false;
    };
    // After step() returned false: the next block after a search, or the next joint.
    auto next_block = [&](int c) {
        if (cursor[c].begin_block()) return true;
        finish(c);
        return launch(c);
    };
    Cursor& x = cursor[0];
    Cursor& y = cursor[1];
    bool bx = launch(0), by = launch(1);
    while (bx && by) {
        // The blocks' running states live in locals (registers) while both step.
        Cursor::Regs rx = x.regs(), ry = y.regs();
        bool gx = true, gy = true;
        while (gx && gy) {
            gx = x.step(rx);
            gy = y.step(ry);
        }
        if (gx) x.save(rx);
        if (gy) y.save(ry);
        if (!gx) bx = next_block(0);
        if (!gy) by = next_block(1);
    }
    for (int c = 0; c < 2; ++c) {
        bool busy = c == 0 ? bx : by;
        while (busy) {
            cursor[c].run_blocks();
            busy = next_block(c);
        }
    }
}

}  // namespace warpguard::sweeps
