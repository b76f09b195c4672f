// Step 2 of the streaming matcher, for joints whose live cells are few and lie apart: per joint,
// wavefront blocks of W adjacent reference columns, two joints' sweeps interleaved step by step.
#include "mdtw_sweeps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

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

// The lanes: one vector of W values, lane k is column j0 + k of a block. Only the handful of
// operations the wavefront needs; every one is exact (min picks one of its inputs, |x| clears the
// sign bit). F64 holds doubles (the exact sweep); F32 floats, twice as many lanes, for the float
// sweep (AVX-512 or AVX2), whose results StreamingMdtw makes exact again (streaming_mdtw.hpp).
#if defined(__AVX512F__)
struct F64 {
    using T = double;
    using Vec = __m512d;
    using Mask = __mmask8;
    static constexpr std::size_t W = 8;
    static Vec load(const T* p) { return _mm512_loadu_pd(p); }
    static void store(T* p, Vec v) { _mm512_storeu_pd(p, v); }
    static Vec broadcast(T x) { return _mm512_set1_pd(x); }
    static Vec add(Vec a, Vec b) { return _mm512_add_pd(a, b); }
    static Vec mul(Vec a, Vec b) { return _mm512_mul_pd(a, b); }
    static Vec sub(Vec a, Vec b) { return _mm512_sub_pd(a, b); }
    static Vec vabs(Vec x) { return _mm512_abs_pd(x); }
    static Vec vmin(Vec a, Vec b) { return _mm512_min_pd(a, b); }
    static Vec vmax(Vec a, Vec b) { return _mm512_max_pd(a, b); }  // b if either is NaN
    static Mask le(Vec a, Vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
    static Mask eq(Vec a, Vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ); }
    static Vec select(Mask m, Vec yes, Vec no) { return _mm512_mask_blend_pd(m, no, yes); }
    static unsigned bits(Mask m) { return m; }
    static Mask lane_mask(std::size_t k) { return static_cast<Mask>(1u << k); }
    // [h, v[0], ..., v[W-2]]: the left neighbour of every lane, lane 0's the scalar h.
    static Vec shift_in(Vec v, T h) {
        return _mm512_castsi512_pd(_mm512_alignr_epi64(_mm512_castpd_si512(v), _mm512_castpd_si512(broadcast(h)), 7));
    }
    // dst[0] = v[W - 1].
    static void store_last(T* dst, Vec v) { _mm512_mask_storeu_pd(dst - (W - 1), static_cast<__mmask8>(0x80), v); }
};
struct F32 {
    using T = float;
    using Vec = __m512;
    using Mask = __mmask16;
    static constexpr std::size_t W = 16;
    static Vec load(const T* p) { return _mm512_loadu_ps(p); }
    static void store(T* p, Vec v) { _mm512_storeu_ps(p, v); }
    static Vec broadcast(T x) { return _mm512_set1_ps(x); }
    static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
    static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
    static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
    static Vec vabs(Vec x) { return _mm512_abs_ps(x); }
    static Vec vmin(Vec a, Vec b) { return _mm512_min_ps(a, b); }
    static Vec vmax(Vec a, Vec b) { return _mm512_max_ps(a, b); }  // b if either is NaN
    static Mask le(Vec a, Vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
    static Vec select(Mask m, Vec yes, Vec no) { return _mm512_mask_blend_ps(m, no, yes); }
    // min(a, b) where m is set, `src` elsewhere.
    static Vec min_where(Vec src, Mask m, Vec a, Vec b) { return _mm512_mask_min_ps(src, m, a, b); }
    static unsigned bits(Mask m) { return m; }
    static Mask lane_mask(std::size_t k) { return static_cast<Mask>(1u << k); }
    static Vec shift_in(Vec v, T h) {
        return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(v), _mm512_castps_si512(broadcast(h)), 15));
    }
    static void store_last(T* dst, Vec v) { _mm512_mask_storeu_ps(dst - (W - 1), static_cast<__mmask16>(0x8000), v); }
};
constexpr bool kFloatSweep = true;
#elif defined(__AVX2__)
struct F64 {
    using T = double;
    using Vec = __m256d;
    using Mask = __m256d;
    static constexpr std::size_t W = 4;
    static Vec load(const T* p) { return _mm256_loadu_pd(p); }
    static void store(T* p, Vec v) { _mm256_storeu_pd(p, v); }
    static Vec broadcast(T x) { return _mm256_set1_pd(x); }
    static Vec add(Vec a, Vec b) { return _mm256_add_pd(a, b); }
    static Vec mul(Vec a, Vec b) { return _mm256_mul_pd(a, b); }
    static Vec sub(Vec a, Vec b) { return _mm256_sub_pd(a, b); }
    static Vec vabs(Vec x) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), x); }
    static Vec vmin(Vec a, Vec b) { return _mm256_min_pd(a, b); }
    static Vec vmax(Vec a, Vec b) { return _mm256_max_pd(a, b); }  // b if either is NaN
    static Mask le(Vec a, Vec b) { return _mm256_cmp_pd(a, b, _CMP_LE_OQ); }
    static Mask eq(Vec a, Vec b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
    static Vec select(Mask m, Vec yes, Vec no) { return _mm256_blendv_pd(no, yes, m); }
    static unsigned bits(Mask m) { return static_cast<unsigned>(_mm256_movemask_pd(m)); }
    // Compared in registers: a mask written to the stack and loaded back as a vector cannot be
    // forwarded from the store, and the first W steps of a block that begins at row 0 waited on it.
    static Mask lane_mask(std::size_t k) {
        const __m256i lanes = _mm256_setr_epi64x(0, 1, 2, 3);
        return _mm256_castsi256_pd(_mm256_cmpeq_epi64(lanes, _mm256_set1_epi64x(static_cast<long long>(k))));
    }
    static Vec shift_in(Vec v, T h) {
        const Vec vr = _mm256_permute4x64_pd(v, _MM_SHUFFLE(2, 1, 0, 3));  // [v3, v0, v1, v2]
        return _mm256_blend_pd(vr, broadcast(h), 0b0001);
    }
    static void store_last(T* dst, Vec v) { _mm_storeh_pd(dst, _mm256_extractf128_pd(v, 1)); }
};
// AVX2 floats: 8 lanes, as many as AVX-512's doubles (the comparisons give lane masks as vectors).
struct F32 {
    using T = float;
    using Vec = __m256;
    using Mask = __m256;
    static constexpr std::size_t W = 8;
    static Vec load(const T* p) { return _mm256_loadu_ps(p); }
    static void store(T* p, Vec v) { _mm256_storeu_ps(p, v); }
    static Vec broadcast(T x) { return _mm256_set1_ps(x); }
    static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
    static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
    static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
    static Vec vabs(Vec x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
    static Vec vmin(Vec a, Vec b) { return _mm256_min_ps(a, b); }
    static Vec vmax(Vec a, Vec b) { return _mm256_max_ps(a, b); }  // b if either is NaN
    static Mask le(Vec a, Vec b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
    static Vec select(Mask m, Vec yes, Vec no) { return _mm256_blendv_ps(no, yes, m); }
    static Vec min_where(Vec src, Mask m, Vec a, Vec b) { return _mm256_blendv_ps(src, _mm256_min_ps(a, b), m); }
    static unsigned bits(Mask m) { return static_cast<unsigned>(_mm256_movemask_ps(m)); }
    static Mask lane_mask(std::size_t k) {  // in registers, as F64's
        const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        return _mm256_castsi256_ps(_mm256_cmpeq_epi32(lanes, _mm256_set1_epi32(static_cast<int>(k))));
    }
    // [h, v[0], ..., v[6]]: one permutation across the two halves of v (the scalar needs none).
    static Vec shift_in(Vec v, T h) {
        const __m256i rotate = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
        return _mm256_blend_ps(_mm256_permutevar8x32_ps(v, rotate), broadcast(h), 0b00000001);
    }
    static void store_last(T* dst, Vec v) {
        const __m128 high = _mm256_extractf128_ps(v, 1);
        _mm_store_ss(dst, _mm_shuffle_ps(high, high, _MM_SHUFFLE(3, 3, 3, 3)));
    }
};
constexpr bool kFloatSweep = true;
#else
// Portable: GCC vector extensions (SSE2 pairs on x86-64).
struct F64 {
    using T = double;
    static constexpr std::size_t W = 4;
    using Vec = double __attribute__((vector_size(W * sizeof(double))));
    using Mask = long long __attribute__((vector_size(W * sizeof(long long))));
    static Vec load(const T* p) {
        Vec v;
        __builtin_memcpy(&v, p, sizeof v);
        return v;
    }
    static void store(T* p, Vec v) { __builtin_memcpy(p, &v, sizeof v); }
    static Vec broadcast(T x) { return Vec{x, x, x, x}; }
    static Vec add(Vec a, Vec b) { return a + b; }
    static Vec mul(Vec a, Vec b) { return a * b; }
    static Vec sub(Vec a, Vec b) { return a - b; }
    static Vec vabs(Vec x) {
        Mask m;
        __builtin_memcpy(&m, &x, sizeof m);
        m &= 0x7fffffffffffffffLL;
        __builtin_memcpy(&x, &m, sizeof x);
        return x;
    }
    static Vec vmin(Vec a, Vec b) { return a < b ? a : b; }
    static Vec vmax(Vec a, Vec b) { return a > b ? a : b; }  // b if either is NaN
    static Mask le(Vec a, Vec b) { return a <= b; }
    static Mask eq(Vec a, Vec b) { return a == b; }
    static Vec select(Mask m, Vec yes, Vec no) { return m ? yes : no; }
    static unsigned bits(Mask m) {
        unsigned r = 0;
        for (std::size_t k = 0; k < W; ++k) r |= (m[k] != 0 ? 1u : 0u) << k;
        return r;
    }
    static Mask lane_mask(std::size_t k) {
        return Mask{k == 0 ? -1LL : 0, k == 1 ? -1LL : 0, k == 2 ? -1LL : 0, k == 3 ? -1LL : 0};
    }
    static Vec shift_in(Vec v, T h) { return __builtin_shuffle(v, broadcast(h), Mask{7, 0, 1, 2}); }
    static void store_last(T* dst, Vec v) { dst[0] = v[W - 1]; }
};
constexpr bool kFloatSweep = false;
#endif

// One cell of rule (11) for W lanes, with the start of the path the published backtracking (12)
// would follow from it. The value is the exact minimum (min is exact, so it does not matter which
// predecessor supplies it); the start follows back_step's tie-breaking: diagonal if it is <= both
// others, else vertical if it is <= horizontal, else horizontal.
//
// The float sweep cannot see the published ties: its values are within E of the double ones, so
// the predecessor the published backtracking takes is within 2E ("tie") of the float minimum. Its
// cells carry instead the least start over every predecessor within `tie` of the minimum: no
// larger than the start of the published path from the cell (by induction over the rows), so the
// segment from it to the end holds the whole published path.
template <class O>
struct Cell {
    typename O::Vec value, start;
};

template <class O>
inline Cell<O> cell_step(typename O::Vec cost, typename O::Vec diag, typename O::Vec sdiag, typename O::Vec up,
                         typename O::Vec sup, typename O::Vec left, typename O::Vec sleft) {
    const auto best = O::vmin(O::vmin(diag, up), left);
    const auto s1 = O::select(O::le(up, left), sup, sleft);
    return {O::add(cost, best), O::select(O::eq(diag, best), sdiag, s1)};
}

template <class O>
inline Cell<O> cell_step_tolerant(typename O::Vec cost, typename O::Vec diag, typename O::Vec sdiag,
                                  typename O::Vec up, typename O::Vec sup, typename O::Vec left,
                                  typename O::Vec sleft, typename O::Vec tie, typename O::Vec inf) {
    const auto best = O::vmin(O::vmin(diag, up), left);
    const auto near = O::add(best, tie);
    auto s = O::select(O::le(left, near), sleft, inf);
    s = O::min_where(s, O::le(up, near), s, sup);
    s = O::min_where(s, O::le(diag, near), s, sdiag);
    return {O::add(cost, best), s};
}

// The bound as the lanes' type, rounded up (a float bound below the double one would drop cells).
template <class T>
inline T bound_up(double x) {
    const double capped = std::min(x, static_cast<double>(std::numeric_limits<T>::max()));
    T t = static_cast<T>(capped);
    if (static_cast<double>(t) < capped) t = std::nextafter(t, std::numeric_limits<T>::infinity());
    return t;
}

// x as T, rounded down (a lower bound stays one).
template <class T>
inline T round_down(double x) {
    T t = static_cast<T>(x);
    if (static_cast<double>(t) > x) t = std::nextafter(t, -std::numeric_limits<T>::infinity());
    return t;
}

template <class O>
inline typename O::T lane(typename O::Vec v, std::size_t k) {
    typename O::T x[O::W];
    O::store(x, v);
    return x[k];
}

// Rows -2W .. m + W - 1 of a column, rounded up to whole vectors.
template <class O>
inline std::size_t column_buffer_size(std::size_t m) {
    constexpr std::size_t W = O::W;
    return (m + 3 * W + W - 1) / W * W;
}


// One joint's pruned sweep (step 2), advanced one wavefront step at a time so that the sweeps of
// two joints can run interleaved: their dependency chains are independent, and one step alone
// waits on its own chain (a shift, an addition and a min per step) most of the time.
//
// A block hands its last column to the next block through a column buffer (row r at index
// r + 2W, +inf where the block computed nothing); two buffers alternate.
//
// F64: exact (cost, earliest end, the published start). F32 ("tolerant"): the float values, and
// every end within `tie` of the best one (the candidates), each with its least start (above).
template <class O>
struct Cursor {
    using T = typename O::T;
    using Vec = typename O::Vec;
    using Mask = typename O::Mask;
    static constexpr std::size_t W = O::W;
    static constexpr bool kTolerant = sizeof(T) == sizeof(float);

    // The joint.
    const T* b = nullptr;               // reference, +inf after column n - 1
    const double* chunk_lo = nullptr;   // min and max of b over each kChunk columns
    const double* chunk_hi = nullptr;
    const T* rev = nullptr;             // the window backwards, +inf outside it
    T* col_values[2] = {};              // the previous block's last column and this block's (then starts)
    std::size_t n = 0, m = 0, last_step = 0, col_size = 0;
    bool stop_at_first = false;
    // The bound and the answer.
    double a0s = 0;
    double live_bound = 0;  // live: <= UB and finite
    double chunk_slack = 1;  // F32: the chunk test's margin for the float |a0 - b|
    Vec ubv, a0, a1, inf, iota, zero;
    double best_cost = kInf;
    std::size_t best_end = 0, best_start = 0;
    std::uint64_t cells = 0;
    // Optional: per column, a lower bound of the rest of any path after its first-row cell
    // (Engine::coarse_first_row); first-row cells whose value plus it exceed the bound are dropped.
    const T* e0 = nullptr;
    Vec ub0v;
    // F32: the candidate ends.
    double tie = 0;
    Vec tiev;
    CandidateList candidates;
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
    // The first-row test with a rest bound adds two values in the lanes' type: it compares with
    // the bound raised by more than that addition's rounding.
    static constexpr double kSumSlack = 1.0 + 1.0 / (1 << 20);

    __attribute__((always_inline)) void start(const T* ref, const double* lo, const double* hi, T* window_rev,
                                              T* const* vals, std::size_t n_, std::size_t m_,
                                              std::span<const double> a, double ub, double tie_, bool first_only) {
        b = ref;
        chunk_lo = lo;
        chunk_hi = hi;
        n = n_;
        m = m_;
        last_step = m + W - 2;  // the step at which the last lane reaches row m - 1
        col_size = column_buffer_size<O>(m);
        starts_offset = col_size;
        // At step t, lane k's row t - k is rev[last_step - t + k]; rows outside the window read
        // +inf, so a lane that has not begun or is past the window holds +inf.
        const T tinf = std::numeric_limits<T>::infinity();
        for (std::size_t y = 0; y < m + 2 * W; ++y) {
            const long i = static_cast<long>(last_step) - static_cast<long>(y);
            window_rev[y] = i >= 0 && i < static_cast<long>(m) ? static_cast<T>(a[static_cast<std::size_t>(i)]) : tinf;
        }
        rev = window_rev;
        for (int k = 0; k < 2; ++k) col_values[k] = vals[k];  // values, then starts
        stop_at_first = first_only;
        a0s = static_cast<double>(static_cast<T>(a[0]));
        a0 = O::broadcast(static_cast<T>(a[0]));
        a1 = O::broadcast(static_cast<T>(a[1]));
        inf = O::broadcast(tinf);
        zero = O::broadcast(T(0));
        T x[W];
        for (std::size_t k = 0; k < W; ++k) x[k] = static_cast<T>(k);
        iota = O::load(x);
        live_bound = ub;  // UB = +inf prunes nothing: the lanes' bound is the largest finite value
        ubv = O::broadcast(bound_up<T>(live_bound));
        ub0v = O::broadcast(bound_up<T>(live_bound * kSumSlack));
        // A float |a0 - b| rounds down by at most half an ulp: the chunk test asks for that much more.
        chunk_slack = kTolerant ? 1.0 + std::ldexp(1.0, -22) : 1.0;
        tie = tie_;
        tiev = O::broadcast(bound_up<T>(tie));
        candidates.reset(tie);
        best_cost = kInf;
        best_end = best_start = 0;
        cells = 0;
        j0 = 0;
        cur = 0;
        fresh = true;
    }

    // Rule (8), or (9) in the last column, for the W columns from j (+inf beyond the reference).
    __attribute__((always_inline)) Vec first_row_at(std::size_t j) const {
        const Vec bj = O::load(b + j), bj1 = O::load(b + j + 1);
        return O::add(O::vabs(O::sub(a0, bj)),
                      O::vmin(O::vmin(O::vabs(O::sub(a1, bj1)), O::vabs(O::sub(a1, bj))), O::vabs(O::sub(a0, bj1))));
    }

    // The first row's cells at j (d = first_row_at(j)) that can lie on a path within the bound.
    __attribute__((always_inline)) Mask row0_keep(Vec d, std::size_t j) const {
        if (e0 == nullptr) return O::le(d, ubv);
        return O::le(O::add(d, O::load(e0 + j)), ub0v);
    }
    __attribute__((always_inline)) Vec row0_at(std::size_t j) const {
        const Vec d = first_row_at(j);
        return e0 == nullptr ? d : O::select(row0_keep(d, j), d, inf);
    }

    // First row in [r, m) at which column buffer `col` is live; -1 if none.
    long first_live_row(const T* col, long r) const {
        for (; r < static_cast<long>(m); r += static_cast<long>(W)) {
            const unsigned live = O::bits(O::le(O::load(col + kRow0 + static_cast<std::size_t>(r)), ubv));
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
        d0 = row0_at(j0);
        long first = 0;
        if (O::bits(O::le(d0, ubv)) == 0) {
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
        // F32: also a margin for the rounding of this test in doubles when |a0| dwarfs the bound.
        const double reach = kTolerant ? live_bound * chunk_slack + std::abs(a0s) * std::ldexp(1.0, -40) : live_bound;
        for (;; j0 += W) {
            if (j0 >= n) return false;
            const std::size_t c = j0 / kChunk;
            if (a0s - reach > chunk_hi[c] || a0s + reach < chunk_lo[c]) {
                j0 = (c + 1) * kChunk - W;  // the loop adds W
                continue;
            }
            if (O::bits(O::le(O::vabs(O::sub(a0, O::load(b + j0))), ubv)) == 0) continue;
            row0_live = O::bits(row0_keep(first_row_at(j0), j0));
            if (row0_live != 0) break;
        }
        j0 += static_cast<std::size_t>(__builtin_ctz(row0_live));
        d0 = row0_at(j0);
        // The previous block, if any, is not this one's neighbour: nothing enters from the left.
        T* left = col_values[1 - cur];
        for (std::size_t x = 0; x < col_size; x += W) O::store(left + x, inf);
        open_block(0);
        return true;
    }

    // Sets up the block at j0 (d0 computed) from step `first`.
    __attribute__((always_inline)) void open_block(long first) {
        bv = O::load(b + j0);
        j0v = O::add(O::broadcast(static_cast<T>(j0)), iota);
        t = first;
        first_step = t;
        skipped = 0;
        T* out = col_values[cur];
        for (std::size_t x = 0; x < col_size; x += W) O::store(out + x, inf);
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
        const T* left;  // row t of the left neighbour's values; its starts `so` further on
        T* out;         // row t - W + 1 of this block's values
        const T* win;   // rev + last_step - t
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
                                                const T*& left_, T*& out_, const T*& win_) {
        const Vec left = O::shift_in(v_, left_[0]);
        const Vec sleft = O::shift_in(s_, left_[starts_offset]);
        const Vec cost = O::vabs(O::sub(O::load(win_), bv));
        Cell<O> c;  // (10)/(11)
        if constexpr (kTolerant) {
            c = cell_step_tolerant<O>(cost, diag_, sdiag_, v_, s_, left, sleft, tiev, inf);
        } else {
            c = cell_step<O>(cost, diag_, sdiag_, v_, s_, left, sleft);
        }
        if (kFirstRows) {
            // Lane t reaches row 1, which is not cumulative: (8)/(9), live or not.
            const Mask here = O::lane_mask(static_cast<std::size_t>(t_));
            c.value = O::select(here, d0, c.value);
            c.start = O::select(here, j0v, c.start);
        }
        diag_ = left;
        sdiag_ = sleft;
        v_ = c.value;
        s_ = c.start;
        // The last lane, row t - W + 1, goes to the column buffer.
        O::store_last(out_, v_);
        O::store_last(out_ + starts_offset, s_);

        if (t_ >= static_cast<long>(m) - 1) {
            // Lane k = t - (m - 1) reaches the last row: an end candidate. Strict '<' keeps the
            // earliest end on ties, as the published argmin.
            const std::size_t k_end = static_cast<std::size_t>(t_) + 1 - m;
            if (k_end < W && ((O::bits(O::le(v_, ubv_)) >> k_end) & 1u) != 0) {
                const double value = static_cast<double>(lane<O>(v_, k_end));
                const std::size_t end = j0 + k_end;
                const auto start_col = static_cast<std::size_t>(lane<O>(s_, k_end));
                if (kTolerant) {
                    if (candidates.offer(value, end, start_col)) {
                        best_cost = value;  // the candidates carry the ends and starts
                        // Every end whose double value can be the optimum is within `tie` of it.
                        live_bound = std::min(live_bound, value + tie);
                        ubv = O::broadcast(bound_up<T>(live_bound));
                        ub0v = O::broadcast(bound_up<T>(live_bound * kSumSlack));
                        ubv_ = ubv;
                    }
                } else if (value < best_cost) {
                    best_cost = value;
                    best_end = end;
                    best_start = start_col;
                    if (stop_at_first) {
                        j0 = n;  // answered: no further block
                        return false;
                    }
                    live_bound = value;  // UB tightens to the best end so far
                    ubv = O::broadcast(bound_up<T>(live_bound));
                    ub0v = O::broadcast(bound_up<T>(live_bound * kSumSlack));
                    ubv_ = ubv;
                }
            }
            if (t_ == static_cast<long>(last_step)) return false;
        }
        if (!kFirstRows && O::bits(O::le(O::vmin(v_, diag_), ubv_)) == 0) {
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

// The sweep of several joints with two interleaved cursors, for either lane type: the padded
// references in the lanes' type, their value ranges per chunk, and the cursors' scratch.
template <class O>
struct Engine {
    using T = typename O::T;
    static constexpr std::size_t W = O::W;

    std::size_t joints, m, n;
    std::vector<std::unique_ptr<T[]>> padded;           // per joint: the reference, then +inf
    std::vector<std::vector<double>> chunk_lo, chunk_hi;  // per joint: value range of each 64 columns
    std::vector<std::size_t> joints_to_sweep;
    std::vector<std::uint64_t> joint_cells;  // per joint: the cells of its last sweep
    // Per joint: samples left with the coarse rest bound, and samples left without it after it
    // ruled out too few columns to pay for itself.
    std::vector<std::size_t> coarse_hold;
    std::vector<std::size_t> coarse_cooldown;
    std::vector<T> reversed[2];
    std::vector<T> columns[2][2];  // per cursor: two column buffers, values then starts
    std::uint64_t cells = 0;
    // The coarse rest bound (coarse_recursion, coarse_first_row): per joint the value range of
    // each kCoarse columns, last column first (rounded outwards to T; +-inf in the padding); per
    // cursor the first row's bound per column, and the recursion's scratch.
    static constexpr std::size_t kCoarse = 16;
    std::size_t coarse_n = 0, coarse_padded = 0;
    std::vector<std::unique_ptr<T[]>> coarse_lo, coarse_hi;
    std::vector<double> max_abs_b;
    std::vector<T> rest0[2];
    std::vector<T> coarse_window, coarse_columns[2][2];  // per chain of coarse_recursion: two column buffers
    // Per joint: the recursion's rows for samples 0 .. kept_rows of the window it was swept for
    // (one row per sample, the coarse columns last first), that window, and the sweep() call it
    // was made in. A window s samples later
    // shares all but its newest s samples with it: L of those rows still bounds the rest of a path
    // up to its sample m - 1 - s, hence up to the end (costs are >= 0), so the recursion is swept
    // anew only every kStale samples (8: against 4, a recursion per joint half as often for
    // 1-2 % more cells; docs/performance.md). The joints take their turns at different samples
    // (joint k at the sweeps whose number + k is a multiple of kStale), so that a sample pays for
    // about joints / kStale recursions, not all of them at once.
    static constexpr std::size_t kStale = 8;
    std::size_t kept_rows = 0;
    std::vector<std::vector<T>> coarse_kept;  // per joint: row r at r * (coarse_padded + W), column k at + W + k
    std::vector<T> coarse_steps[2];            // per chain: one block's kept wavefront steps, before they are laid into rows
    std::vector<std::vector<double>> coarse_kept_window;
    std::vector<std::uint64_t> coarse_kept_at;
    std::vector<double> coarse_kept_bound;  // per joint: the sweep's bound when its recursion was swept
    std::vector<bool> coarse_kept_valid;
    std::uint64_t sweeps_done = 0;
    // Taken by a joint for m samples after a sweep of it computed more lane-cells than half of
    // one recursion's steps (coarse_threshold: (m + W - 1) x coarse_padded / 2). A recursion step
    // costs about half a sweep step (about 7 us for 50,000 lane-cells at m = 64, n = 10,000 on a
    // 2.6 GHz core, against 0.24 ns per lane-cell of the sweep), swept every kStale samples: under
    // a tenth of its lane-cells per sample, which the 30-45 % of a sweep's cells the bound drops
    // on the benchmark's streams pay for from about a third of them on; half leaves a margin
    // (measured with recursions every 4 samples: taken at every sweep, from half and from one
    // whole recursion's lane-cells, half was as fast as every sweep at m = 64, n = 10,000 and
    // faster at n = 20,000).
    // Given up for m samples where it rules out under a quarter of the coarse columns by itself
    // (a window that matches cheaply all over a short reference: there it prunes about what it
    // costs; docs/performance.md, "The coarse rest bound on the first row").
    bool coarse_on = false;       // built for this lane type
    bool coarse_enabled = true;   // StreamingMdtw::set_rest_bound
    std::uint64_t coarse_threshold = 0;
    std::uint64_t coarse_uses = 0;        // joint sweeps that took the coarse rest bound
    std::uint64_t coarse_recursions = 0;  // coarse_recursion() calls

    Engine(std::size_t window, std::span<const std::vector<double>> references)
        : joints(references.size()), m(window), n(references[0].size()), joints_to_sweep(references.size()),
          joint_cells(references.size(), 0), coarse_hold(references.size(), 0),
          coarse_cooldown(references.size(), 0) {
        // +inf after the last column: a block's lanes beyond it, and b(j + 1) of rule (8) in the
        // last column, which turns (8) into (9) exactly (min(inf, |a1 - bj|, inf) = |a1 - bj|).
        for (const auto& r : references) {
            std::unique_ptr<T[]> p(new T[n + W + 1]);
            for (std::size_t j = 0; j < n; ++j) p[j] = static_cast<T>(r[j]);
            std::fill(p.get() + n, p.get() + n + W + 1, std::numeric_limits<T>::infinity());
            std::vector<double> lo, hi;
            for (std::size_t c = 0; c < n; c += kChunk) {
                const auto [mn, mx] = std::minmax_element(p.get() + c, p.get() + std::min(n, c + kChunk));
                lo.push_back(static_cast<double>(*mn));
                hi.push_back(static_cast<double>(*mx));
            }
            padded.push_back(std::move(p));
            chunk_lo.push_back(std::move(lo));
            chunk_hi.push_back(std::move(hi));
        }
        coarse_on = sizeof(T) == sizeof(float);  // the float sweep; the exact sweeps run without it
        coarse_n = (n + kCoarse - 1) / kCoarse;
        coarse_padded = (coarse_n + W - 1) / W * W;
        coarse_threshold = (m + W - 1) * coarse_padded / 2;
        for (const auto& r : references) {
            if (!coarse_on) break;
            std::unique_ptr<T[]> lo(new T[coarse_padded]), hi(new T[coarse_padded]);
            double mx = 0;
            for (std::size_t k = 0; k < coarse_padded; ++k) {
                lo[k] = -std::numeric_limits<T>::infinity();
                hi[k] = std::numeric_limits<T>::infinity();
                if (k >= coarse_n) continue;
                const std::size_t c = coarse_n - 1 - k;
                const auto [mn, mxe] = std::minmax_element(r.begin() + static_cast<long>(c * kCoarse),
                                                           r.begin() + static_cast<long>(std::min(n, (c + 1) * kCoarse)));
                lo[k] = round_down<T>(*mn);
                hi[k] = bound_up<T>(*mxe);
                mx = std::max({mx, std::abs(*mn), std::abs(*mxe)});
            }
            coarse_lo.push_back(std::move(lo));
            coarse_hi.push_back(std::move(hi));
            max_abs_b.push_back(mx);
        }
        for (int c = 0; c < 2 && coarse_on; ++c) {
            rest0[c].assign(coarse_n * kCoarse + W + 1, T(0));
            for (int k = 0; k < 2; ++k) coarse_columns[c][k].assign(m + 3 * W, T(0));
        }
        if (coarse_on) {
            coarse_window.assign(m + 2 * W, T(0));
            kept_rows = std::min(kStale, m - 1);
            // Columns -W .. -1 read +inf (column C + 1 of the last coarse column does not exist).
            coarse_kept.assign(joints, std::vector<T>((kept_rows + 1) * (coarse_padded + W), std::numeric_limits<T>::infinity()));
            for (int c = 0; c < 2; ++c) coarse_steps[c].assign((kept_rows + W) * W, T(0));
            coarse_kept_window.assign(joints, std::vector<double>(m, 0.0));
            coarse_kept_at.assign(joints, 0);
            coarse_kept_bound.assign(joints, 0.0);
            coarse_kept_valid.assign(joints, false);
        }
        for (int c = 0; c < 2; ++c) {
            reversed[c].assign(m + 2 * W, T(0));
            for (int k = 0; k < 2; ++k) {
                columns[c][k].assign(2 * column_buffer_size<O>(m), std::numeric_limits<T>::infinity());
            }
        }
    }

    // The coarse rest bound: a lower bound of the rest of every path after a first-row cell.
    // The reference in coarse columns of kCoarse samples with their value ranges: g(i, C) = the
    // distance of window sample i from column C's range is <= the local cost of any of its cells,
    // and a path from row i onwards visits the coarse cells of a coarse path in that order, so
    // L(i, C) = g(i, C) + min(L(i + 1, C), L(i, C + 1), L(i + 1, C + 1)), L(m - 1, C) = g(m - 1, C)
    // bounds the rest from the first cell it enters in C; the first row is not cumulative, so
    // after a first-row cell in C the rest enters row 1, in C or C + 1: E0(C) = min(L(1, C),
    // L(1, C + 1)) (until 2026-12-06 also L(0, C + 1), which only loosened it).
    //
    // L is swept as the recursion of rule (11) in reverse (the newest row first, the last coarse
    // column first; the newest row has no predecessor: L(m - 1, C) = g): wavefront blocks of W
    // coarse columns as the cursor's, without pruning, in the lanes' type. Rows outside the window
    // read NaN, which the max in g turns into 0: a lane that has not begun holds 0, the value the
    // newest row needs from the row before it. It keeps the rows of samples 0 .. kept_rows.
    //
    // One chain of blocks alone waits on its own latency (a shift, a min and an addition per step),
    // so two stretches of coarse columns are swept side by side: the right one from the last
    // coarse column to the split, the left one from kSplitLead coarse columns right of the split
    // on to the first, beginning with L = 0 in the column before it (no more than the rest of any
    // path, so its values are lower bounds still, and the whole sweep's wherever the cheapest rest
    // ends before that column); it keeps only what it computes left of the split.
    static constexpr std::size_t kSplitLead = 2 * W;
    struct CoarseChain {
        std::size_t k0 = 0, end = 0, keep_from_k = 0;  // next block, past the last, first block kept
        T* left_col = nullptr;
        T* out_col = nullptr;
        T* steps = nullptr;
        typename O::Vec lov, hiv, v, diag;
    };
    void coarse_recursion(std::size_t joint, std::span<const double> a) {
        const T nan = std::numeric_limits<T>::quiet_NaN();
        const long last_step = static_cast<long>(m + W - 2);
        // win[y] = row' last_step - y of the reversed window, row' r = sample m - 1 - r.
        T* win = coarse_window.data();
        for (std::size_t y = 0; y < m + 2 * W; ++y) {
            const long r = last_step - static_cast<long>(y);
            win[y] = r >= 0 && r < static_cast<long>(m) ? static_cast<T>(a[m - 1 - static_cast<std::size_t>(r)]) : nan;
        }
        const T* lo = coarse_lo[joint].get();
        const T* hi = coarse_hi[joint].get();
        T* kept = coarse_kept[joint].data();
        const std::size_t row_size = coarse_padded + W;
        const typename O::Vec zero = O::broadcast(T(0));
        const long keep_from = static_cast<long>(m - 1 - kept_rows);  // lane 0 at sample kept_rows
        // The split, in blocks of the reversed coarse columns: each chain about half the blocks.
        // Column buffers: row' r at index r + 2W; the right chain's first block has no left
        // neighbour (+inf), the left chain's begins with 0.
        CoarseChain chain[2];
        std::size_t split = coarse_padded;
        if (coarse_padded >= 4 * kSplitLead) split = (coarse_padded + kSplitLead) / 2 / W * W;
        chain[0].end = split;
        chain[1].k0 = split - (split < coarse_padded ? kSplitLead : 0);
        chain[1].keep_from_k = split;
        chain[1].end = split < coarse_padded ? coarse_padded : chain[1].k0;
        for (int c = 0; c < 2; ++c) {
            chain[c].left_col = coarse_columns[c][0].data();
            chain[c].out_col = coarse_columns[c][1].data();
            chain[c].steps = coarse_steps[c].data();
            std::fill(chain[c].left_col, chain[c].left_col + m + 3 * W, c == 0 ? std::numeric_limits<T>::infinity() : T(0));
        }
        const auto begin = [&](CoarseChain& ch) __attribute__((always_inline)) {
            ch.lov = O::load(lo + ch.k0);
            ch.hiv = O::load(hi + ch.k0);
            ch.v = zero;
            ch.diag = zero;
        };
        const auto step = [&](CoarseChain& ch, long t) __attribute__((always_inline)) {
            const typename O::Vec av = O::load(win + (last_step - t));
            const typename O::Vec g = O::vmax(O::vmax(O::sub(ch.lov, av), O::sub(av, ch.hiv)), zero);
            const typename O::Vec up_diag = O::vmin(ch.v, ch.diag);
            const typename O::Vec left = O::shift_in(ch.v, ch.left_col[t + static_cast<long>(2 * W)]);
            ch.v = O::add(g, O::vmin(up_diag, left));
            ch.diag = left;
            O::store_last(ch.out_col + t + W + 1, ch.v);  // lane W - 1 is at row' t - W + 1
            if (t >= keep_from) O::store(ch.steps + static_cast<std::size_t>(t - keep_from) * W, ch.v);
        };
        // Lane k is at sample r (row' m - 1 - r) at step m - 1 - r + k: kept step kept_rows - r + k.
        const auto finish = [&](CoarseChain& ch) {
            if (ch.k0 >= ch.keep_from_k) {
                for (std::size_t r = 0; r <= kept_rows; ++r) {
                    for (std::size_t k = 0; k < W; ++k) kept[r * row_size + W + ch.k0 + k] = ch.steps[(kept_rows - r + k) * W + k];
                }
            }
            std::swap(ch.left_col, ch.out_col);
            ch.k0 += W;
        };
        while (chain[0].k0 < chain[0].end && chain[1].k0 < chain[1].end) {
            begin(chain[0]);
            begin(chain[1]);
            for (long t = 0; t <= last_step; ++t) {
                step(chain[0], t);
                step(chain[1], t);
            }
            finish(chain[0]);
            finish(chain[1]);
        }
        for (CoarseChain& ch : chain) {
            while (ch.k0 < ch.end) {
                begin(ch);
                for (long t = 0; t <= last_step; ++t) step(ch, t);
                finish(ch);
            }
        }
        std::copy(a.begin(), a.end(), coarse_kept_window[joint].begin());
        coarse_kept_at[joint] = sweeps_done;
        coarse_kept_valid[joint] = true;
    }

    // The joint's window now, `a`, and the kept recursion's: the number of samples it moved on
    // since (0 .. kept_rows - 1), or -1 if it is not the kept window moved on by that many
    // (another stream, a reset, a gap, or too old).
    long kept_shift(std::size_t joint, std::span<const double> a) const {
        if (!coarse_kept_valid[joint]) return -1;
        const std::uint64_t s = sweeps_done - coarse_kept_at[joint];
        if (s >= kept_rows) return -1;
        const double* old = coarse_kept_window[joint].data();
        for (std::size_t i = 0; i + s < m; ++i) {
            if (!(a[i] == old[i + s])) return -1;
        }
        return static_cast<long>(s);
    }

    // rest0[c][j]: a lower bound of the rest of every path after the first-row cell at column j,
    // from the joint's kept recursion, whose window is this one's moved on by s samples: the
    // first row here is its sample s, and a path after it enters sample s + 1 in C or C + 1:
    // E0(C) = min(L(s + 1, C), L(s + 1, C + 1)).
    // Returns the number of coarse columns whose bound alone exceeds `ub`.
    std::size_t coarse_first_row(std::size_t joint, std::size_t s, std::span<const double> a, double ub, int c) {
        // The float values may exceed the exact ones by the roundings of |a| (a few units of u
        // times max |a| per cell) and of the additions (u per addition, relative): over a path of
        // at most m + coarse_n cells, taken off with room to spare.
        double max_a = 0;
        for (const double x : a) max_a = std::max(max_a, std::abs(x));
        const double u = std::ldexp(1.0, -std::numeric_limits<T>::digits);
        const double cells_on_path = static_cast<double>(m + coarse_n + 1);
        const double rel = 1.0 - 3.0 * cells_on_path * u;
        const double abs_slack = 3.0 * cells_on_path * u * (max_a + max_abs_b[joint]);
        const T* below = coarse_kept[joint].data() + (s + 1) * (coarse_padded + W) + W;  // sample s + 1
        const auto relv = O::broadcast(static_cast<T>(rel));
        // The float product and difference round too: a further 2^-20 of the value off.
        const auto absv = O::broadcast(bound_up<T>(abs_slack));
        const auto margin = O::broadcast(static_cast<T>(1.0 - std::ldexp(1.0, -20)));
        const auto zero = O::broadcast(T(0));
        const auto ubv = O::broadcast(round_down<T>(ub));
        T* e = rest0[c].data();
        std::size_t ruled_out = 0;
        T lanes[W];
        for (std::size_t k0 = 0; k0 < coarse_n; k0 += W) {
            const auto e0 = O::vmin(O::load(below + k0), O::load(below + k0 - 1));
            const auto bound = O::vmax(O::mul(O::sub(O::mul(e0, relv), absv), margin), zero);
            const std::size_t valid = std::min(W, coarse_n - k0);
            ruled_out += static_cast<std::size_t>(__builtin_popcount(O::bits(O::le(ubv, bound)) & ((1u << valid) - 1u)));
            O::store(lanes, bound);
            for (std::size_t k = 0; k < valid; ++k) {
                T* col = e + (coarse_n - 1 - (k0 + k)) * kCoarse;
                const auto x = O::broadcast(lanes[k]);
                for (std::size_t y = 0; y < kCoarse; y += W) O::store(col + y, x);
            }
        }
        return ruled_out;
    }

    // Sweeps every joint with bound[joint] >= 0; finish(cursor, joint) takes each joint's answer.
    template <class Finish>
    void sweep(std::span<const double> windows, const double* bound, const double* tie, bool stop_at_first,
               const Finish& finish_joint) {
        ++sweeps_done;
        std::size_t count = 0;
        for (std::size_t joint = 0; joint < joints; ++joint) {
            if (bound[joint] >= 0.0) joints_to_sweep[count++] = joint;
        }
        // The heaviest sweeps first (by the cells each joint's sweep took last time: consecutive
        // windows share all but one sample): a joint whose window has no cheap match (a collision)
        // then runs beside the others instead of alone after them.
        // (An insertion sort of a few joints: in place, stable, no allocation on the per-sample path.)
        for (std::size_t k = 1; k < count; ++k) {
            const std::size_t joint = joints_to_sweep[k];
            std::size_t at = k;
            for (; at > 0 && joint_cells[joints_to_sweep[at - 1]] < joint_cells[joint]; --at) joints_to_sweep[at] = joints_to_sweep[at - 1];
            joints_to_sweep[at] = joint;
        }
        const std::span<const std::size_t> todo(joints_to_sweep.data(), count);
        // Two cursors take the joints in turn: whenever one's sweep is over it takes the next joint,
        // so both step side by side until the last sweep runs alone.
        Cursor<O> cursor[2];
        std::size_t slot[2] = {0, 0};  // the cursor's position in `todo`
        bool recursion_off_turn = false;  // a joint's coarse recursion was swept off its turn
        std::size_t next = 0;
        auto finish = [&](int c) {
            finish_joint(cursor[c], todo[slot[c]]);
            cells += cursor[c].cells;
            const std::size_t j = todo[slot[c]];
            joint_cells[j] = cursor[c].cells;
            if (cursor[c].e0 == nullptr && coarse_cooldown[j] > 0) {
                --coarse_cooldown[j];
            } else if (cursor[c].cells > coarse_threshold) {
                coarse_hold[j] = m;
            }
        };
        // Starts the next joint on cursor c at its first block; false when no joint is left.
        auto launch = [&](int c) {
            while (next < todo.size()) {
                slot[c] = next;
                const std::size_t joint = todo[next++];
                T* cols[2] = {columns[c][0].data(), columns[c][1].data()};
                cursor[c].start(padded[joint].get(), chunk_lo[joint].data(), chunk_hi[joint].data(),
                                reversed[c].data(), cols, n, m, windows.subspan(joint * m, m), bound[joint],
                                tie != nullptr ? tie[joint] : 0.0, stop_at_first);
                cursor[c].e0 = nullptr;
                const auto a = windows.subspan(joint * m, m);
                long shift = -1;
                if (coarse_on && coarse_enabled && coarse_hold[joint] > 0) {
                    // Swept anew at the joint's turn; off its turn by one joint per sample at
                    // most, the heaviest, while the others wait for their turns without the
                    // bound: where its kept rows are too old or not its window's (it has just
                    // taken the bound, or the float sweep paused), or where the bound has more
                    // than doubled since them (an impact has come in: the kept rows predate the
                    // window's newest samples and leave their cost out).
                    const bool turn = (sweeps_done + joint) % kStale == 0;
                    shift = kept_shift(joint, a);
                    if (shift > 0 && (turn || bound[joint] > 2.0 * coarse_kept_bound[joint])) shift = -1;
                    if (shift < 0 && (turn || !recursion_off_turn)) {
                        recursion_off_turn = recursion_off_turn || !turn;
                        coarse_recursion(joint, a);
                        coarse_kept_bound[joint] = bound[joint];
                        ++coarse_recursions;
                        shift = 0;
                    }
                }
                if (shift >= 0) {
                    --coarse_hold[joint];
                    // Where it rules out under a quarter of the coarse columns by itself (E0 over
                    // the bound: windows with cheap matches all over a short reference), it
                    // prunes about what it costs: given up for m samples.
                    const std::size_t ruled_out = coarse_first_row(joint, static_cast<std::size_t>(shift), a, bound[joint], c);
                    if (ruled_out * 4 >= coarse_n) {
                        cursor[c].e0 = rest0[c].data();
                        ++coarse_uses;
                    } else {
                        coarse_hold[joint] = 0;
                        coarse_cooldown[joint] = m;
                    }
                }
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
        Cursor<O>& x = cursor[0];
        Cursor<O>& y = cursor[1];
        bool bx = launch(0), by = launch(1);
        while (bx && by) {
            // The blocks' running states live in locals (registers) while both step.
            typename Cursor<O>::Regs rx = x.regs(), ry = y.regs();
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
};

}  // namespace

struct Wavefront::Impl : Engine<F64> {
    using Engine<F64>::Engine;
};

Wavefront::Wavefront(std::size_t window, std::span<const std::vector<double>> references)
    : impl_(std::make_unique<Impl>(window, references)) {}

Wavefront::~Wavefront() = default;

std::uint64_t Wavefront::cells() const { return impl_->cells; }

void Wavefront::sweep(std::span<const double> windows, const double* bound, bool stop_at_first, Found* found) {
    impl_->sweep(windows, bound, nullptr, stop_at_first, [&](const Cursor<F64>& c, std::size_t joint) {
        found[joint] = {c.best_cost, c.best_end, c.best_start};
    });
}

#if defined(__AVX2__)
struct WavefrontFloat::Impl : Engine<F32> {
    using Engine<F32>::Engine;
};
#else
struct WavefrontFloat::Impl {};  // not built: the float sweep needs AVX2 or AVX-512
#endif

void CandidateList::clusters(Candidates& r) const {
    r.best = best;
    r.overflow = overflow;
    r.clusters = 0;
    // The candidates' segments [start, end] by start, merged where they overlap: each end's
    // published path lies in its own cluster.
    using Seg = Candidates::Cluster;
    Seg segs[kMax];
    std::size_t n = 0;
    for (std::size_t k = 0; k < count; ++k) {
        if (ends[k].value <= best + tie) segs[n++] = {ends[k].start, ends[k].end, ends[k].end};
    }
    std::sort(segs, segs + n, [](const Seg& x, const Seg& y) { return x.start < y.start; });
    for (std::size_t k = 0; k < n; ++k) {
        if (r.clusters > 0 && r.clusters <= Candidates::kMaxClusters && segs[k].start <= r.cluster[r.clusters - 1].end_hi) {
            Seg& last = r.cluster[r.clusters - 1];
            last.end_lo = std::min(last.end_lo, segs[k].end_lo);
            last.end_hi = std::max(last.end_hi, segs[k].end_hi);
            continue;
        }
        if (r.clusters < Candidates::kMaxClusters) r.cluster[r.clusters] = segs[k];
        ++r.clusters;  // past kMaxClusters only counted: the joint goes to the exact sweep
    }
}

bool WavefrontFloat::built() { return kFloatSweep; }

WavefrontFloat::WavefrontFloat(std::size_t window, std::span<const std::vector<double>> references) {
    usable_ = kFloatSweep && references_fit_floats(references);
#if defined(__AVX2__)
    if (usable_) impl_ = std::make_unique<Impl>(window, references);
#else
    (void)window;
#endif
}

WavefrontFloat::~WavefrontFloat() = default;

void WavefrontFloat::set_rest_bound(bool on) {
#if defined(__AVX2__)
    if (impl_) impl_->coarse_enabled = on;
#else
    (void)on;
#endif
}

std::uint64_t WavefrontFloat::rest_bound_sweeps() const {
#if defined(__AVX2__)
    if (impl_) return impl_->coarse_uses;
#endif
    return 0;
}

std::uint64_t WavefrontFloat::rest_bound_recursions() const {
#if defined(__AVX2__)
    if (impl_) return impl_->coarse_recursions;
#endif
    return 0;
}

std::uint64_t WavefrontFloat::cells() const {
#if defined(__AVX2__)
    if (impl_) return impl_->cells;
#endif
    return 0;
}

void WavefrontFloat::sweep(std::span<const double> windows, const double* bound, const double* tie,
                           Candidates* out) {
#if defined(__AVX2__)
    impl_->sweep(windows, bound, tie, false, [&](const Cursor<F32>& c, std::size_t joint) {
        c.candidates.clusters(out[joint]);
    });
#else
    (void)windows, (void)bound, (void)tie, (void)out;
    throw std::logic_error("the float sweep is not built (it needs AVX2 or AVX-512)");
#endif
}

}  // namespace warpguard::sweeps
