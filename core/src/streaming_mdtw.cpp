#include "warpguard/streaming_mdtw.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace warpguard {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

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

inline double lane(Vec v, std::size_t k) {
    double x[W];
    store(x, v);
    return x[k];
}

// Rule (8)/(9) for one column, scalar form: the published first row.
inline double first_row(std::span<const double> a, std::span<const double> b, std::size_t j) {
    if (j + 1 < b.size()) {
        return std::abs(a[0] - b[j]) + std::min({std::abs(a[1] - b[j + 1]), std::abs(a[1] - b[j]), std::abs(a[0] - b[j + 1])});
    }
    return std::abs(a[0] - b[j]) + std::abs(a[1] - b[j]);
}


}  // namespace

// One block's wavefront: step t holds lane k's cell of row t - k. Values and carried starts, for
// the m + W - 1 steps of a block; two of them alternate (the block and its left neighbour).
struct StreamingMdtw::Steps {
    explicit Steps(std::size_t steps) : value{std::vector<double>(steps * W), std::vector<double>(steps * W)},
                                        start{std::vector<double>(steps * W), std::vector<double>(steps * W)} {}
    std::vector<double> value[2], start[2];
};

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
    // +inf after the last column: a block's lanes beyond it, and b(j + 1) of rule (8) in the last
    // column, which turns (8) into (9) exactly (min(inf, |a1 - bj|, inf) = |a1 - bj|).
    for (const auto& r : references_) {
        std::unique_ptr<double[]> p(new double[n_ + W + 1]);
        std::copy(r.begin(), r.end(), p.get());
        std::fill(p.get() + n_, p.get() + n_ + W + 1, kInf);
        padded_.push_back(std::move(p));
    }
    for (auto& r : results_) r.path.reserve(m_ + n_);
    reversed_.reset(new double[m_ + 2 * W]);
    steps_ = std::make_unique<Steps>(m_ + W);
    // The segment rebuild needs at most m x n cells; only the rows and columns of the matched
    // segment are touched, so the pages of a long reference stay untouched unless a match spans it.
    region_.reset(new double[m_ * n_]);
    row_lo_.reset(new std::size_t[m_]);
    row_hi_.reset(new std::size_t[m_]);
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

namespace {

// One cell of rule (11) for W lanes, with the start of the path the published backtracking (12)
// would follow from it. The value is the exact minimum (min is exact, so it does not matter which
// predecessor supplies it); the start follows back_step's tie-breaking: diagonal if it is <= both
// others, else vertical if it is <= horizontal, else horizontal.
struct Cell {
    Vec value, start;
};

inline Cell cell_step(Vec cost, Vec diag, Vec sdiag, Vec up, Vec sup, Vec left, Vec sleft) {
    const Mask vertical = le(up, left);
    const Vec v1 = select(vertical, up, left);
    const Vec s1 = select(vertical, sup, sleft);
    return {add(cost, vmin(vmin(diag, left), up)), select(le(diag, v1), sdiag, s1)};
}

}  // namespace

StreamingMdtw::Best StreamingMdtw::sweep(std::size_t joint, std::span<const double> a, double ub, bool stop_at_first) {
    const double* b = padded_[joint].get();
    const std::size_t m = m_;
    const std::size_t last_step = m + W - 2;  // the step at which the last lane reaches row m - 1
    // The window backwards: at step t, lane k's row t - k is reversed[last_step - t + k]; rows
    // outside the window read +inf, so a lane that has not begun or is past the window holds +inf.
    double* rev = reversed_.get();
    for (std::size_t y = 0; y < m + 2 * W; ++y) {
        const long i = static_cast<long>(last_step) - static_cast<long>(y);
        rev[y] = i >= 0 && i < static_cast<long>(m) ? a[static_cast<std::size_t>(i)] : kInf;
    }
    const Vec inf = broadcast(kInf);
    const Vec a0 = broadcast(a[0]), a1 = broadcast(a[1]);
    // Live: <= UB and finite (the first sample of a stream has UB = +inf and prunes nothing).
    double live_bound = std::min(ub, std::numeric_limits<double>::max());
    Vec ubv = broadcast(live_bound);
    Best best{kInf, 0, 0};

    // Rule (8), or (9) in the last column, for the W columns from j0 (+inf beyond the reference).
    auto first_row_at = [&](std::size_t j0) {
        const Vec bj = load(b + j0), bj1 = load(b + j0 + 1);
        return add(vabs(sub(a0, bj)), vmin(vmin(vabs(sub(a1, bj1)), vabs(sub(a1, bj))), vabs(sub(a0, bj1))));
    };

    // The left neighbour of the current block: the previous block's last lane. Its row r was
    // computed at that block's step r + W - 1, within [left_lo, left_hi]; rows it has <= UB lie in
    // [left_first, left_last] (left_first = -1: none, the block begins afresh).
    int cur = 0;
    long left_lo = 0, left_hi = -1, left_first = -1, left_last = -1;
    auto left_live_from = [&](long r) {  // first row >= r where the left neighbour is live; m if none
        const double* v = steps_->value[1 - cur].data();
        for (; r <= left_last; ++r) {
            const long s = r + static_cast<long>(W) - 1;
            if (s >= left_lo && s <= left_hi && v[static_cast<std::size_t>(s) * W + W - 1] <= live_bound) return r;
        }
        return static_cast<long>(m);
    };

    std::size_t j0 = 0;
    while (j0 < n_) {
        Vec d0;
        unsigned row0_live;
        if (left_first < 0) {
            // Nothing enters from the left: find the next column whose first row is live ((8) is
            // >= |a0 - bj|, a cheap filter), and start the block there.
            for (;; j0 += W) {
                if (j0 >= n_) return best;
                if (bits(le(vabs(sub(a0, load(b + j0))), ubv)) == 0) continue;
                d0 = first_row_at(j0);
                row0_live = bits(le(d0, ubv));
                if (row0_live != 0) break;
            }
            j0 += static_cast<std::size_t>(__builtin_ctz(row0_live));
            d0 = first_row_at(j0);
            row0_live = bits(le(d0, ubv));
            left_lo = 0;  // the previous block, if any, is not this one's neighbour
            left_hi = -1;
        } else {
            d0 = first_row_at(j0);
            row0_live = bits(le(d0, ubv));
        }
        const Vec bv = load(b + j0);
        const Vec j0v = [&] {
            double s[W];
            for (std::size_t k = 0; k < W; ++k) s[k] = static_cast<double>(j0 + k);
            return load(s);
        }();

        // Rows above the first live one (of the first row or of the left neighbour) are all over UB.
        long t = row0_live != 0 ? 0 : left_first;
        const double* lv = steps_->value[1 - cur].data();
        const double* ls = steps_->start[1 - cur].data();
        double* ov = steps_->value[cur].data();
        double* os = steps_->start[cur].data();
        auto left_at = [&](long row, const double* base) {  // the vector whose last lane is the left cell
            const long s = row + static_cast<long>(W) - 1;
            return s >= left_lo && s <= left_hi ? load(base + static_cast<std::size_t>(s) * W) : inf;
        };
        Vec v = inf, s = broadcast(0.0);
        Vec diag = inf, sdiag = s;  // the previous step's left neighbours
        const long first_step = t;
        long out_first = -1, out_last = -1;  // live rows of this block's last lane
        for (;; ++t) {
            const Vec left = shift_in(v, left_at(t, lv));
            const Vec sleft = shift_in(s, left_at(t, ls));
            const Vec cost = vabs(sub(load(rev + last_step - static_cast<std::size_t>(t)), bv));
            Cell c = cell_step(cost, diag, sdiag, v, s, left, sleft);  // (10)/(11)
            if (t < static_cast<long>(W)) {
                // Lane t reaches row 1, which is not cumulative: (8)/(9), live or not.
                const Mask here = lane_mask(static_cast<std::size_t>(t));
                c.value = select(here, d0, c.value);
                c.start = select(here, j0v, c.start);
            }
            diag = left;
            sdiag = sleft;
            v = c.value;
            s = c.start;
            store(ov + static_cast<std::size_t>(t) * W, v);
            store(os + static_cast<std::size_t>(t) * W, s);
            cells_ += W;

            const unsigned live = bits(le(v, ubv));
            const long last_row = t - static_cast<long>(W) + 1;
            if ((live >> (W - 1)) & 1u) {
                if (out_first < 0 && last_row >= 0) out_first = last_row;
                if (last_row < static_cast<long>(m)) out_last = last_row;
            }
            // Lane k = t - (m - 1) reaches the last row: an end candidate. Strict '<' keeps the
            // earliest end on ties, as the published argmin.
            const long k_end = t - static_cast<long>(m) + 1;
            if (k_end >= 0 && ((live >> k_end) & 1u) != 0 && j0 + static_cast<std::size_t>(k_end) < n_) {
                const double value = ov[static_cast<std::size_t>(t) * W + static_cast<std::size_t>(k_end)];
                if (value < best.cost) {
                    best = {value, j0 + static_cast<std::size_t>(k_end),
                            static_cast<std::size_t>(os[static_cast<std::size_t>(t) * W + static_cast<std::size_t>(k_end)])};
                    if (stop_at_first) return best;
                    live_bound = value;  // UB tightens to the best end so far
                    ubv = broadcast(live_bound);
                }
            }
            if (t == static_cast<long>(last_step)) break;
            if (live == 0 && bits(le(diag, ubv)) == 0 && t >= static_cast<long>(W) - 1) {
                // No lane is live, nor any diagonal predecessor of the next step, and every first
                // row has been read: nothing in this block is live until its left neighbour is
                // again, and the cells there have only dead predecessors besides it.
                const long next = left_live_from(t + 1);
                if (next >= static_cast<long>(m)) break;
                for (long x = t + 1; x < next; ++x) store(ov + static_cast<std::size_t>(x) * W, inf);
                t = next - 1;
                v = inf;
                diag = inf;
            }
        }
        left_lo = first_step;
        left_hi = t;
        left_first = out_first;
        left_last = out_last;
        cur = 1 - cur;
        j0 += W;
    }
    return best;
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
        auto upper = [&](std::size_t x) { return x >= ul && x < uh ? up[x] : kInf; };
        std::size_t x = ul;
        if (x >= uh) {  // no cell above is <= cost, so none in this row is (cannot happen on the path's rows)
            lo[i] = hi[i] = 0;
            continue;
        }
        double left = kInf;  // cells left of the first live one above are all over cost
        for (; x < w; ++x) {
            if (x > uh && !(left <= cost)) break;  // only the horizontal predecessor is left, and it is over
            const double diag = x > 0 ? upper(x - 1) : kInf;
            left = std::abs(ai - b[start + x]) + std::min({diag, left, upper(x)});  // (10)/(11)
            row[x] = left;
        }
        live_bounds(i, ul, x);
    }
    auto at = [&](std::size_t i, std::size_t x) { return x >= lo[i] && x < hi[i] ? d[i * w + x] : kInf; };
    auto& path = out.path;
    path.clear();
    std::size_t i = m_ - 1;
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
    out.end = end;
}

void StreamingMdtw::match(std::span<const double> windows) {
    if (windows.size() != joints_ * m_) {
        throw std::invalid_argument(fmt::format("{} window values given; expected {} joints x {} samples", windows.size(),
                                                joints_, m_));
    }
    for (std::size_t joint = 0; joint < joints_; ++joint) {
        const auto a = windows.subspan(joint * m_, m_);
        const Best best = sweep(joint, a, shifted_path_bound(joint, a), false);  // UB +inf on a stream's first sample
        MatchResult& r = results_[joint];
        if (!std::isfinite(best.cost)) {
            // Only a window with a non-finite value gets here (every finite window has a match
            // <= its bound). Report it as such; callers validate samples before matching.
            r.cost = kInf;
            r.start = r.end = 0;
            r.path.clear();
            tracked_[joint] = false;
            continue;
        }
        rebuild_path(a, references_[joint], best.start, best.end, best.cost, r);
        r.cost = best.cost;
        tracked_[joint] = true;
    }
}

void StreamingMdtw::exists_within(std::span<const double> windows, std::span<const double> tau, std::span<bool> out) {
    if (windows.size() != joints_ * m_ || tau.size() != joints_ || out.size() != joints_) {
        throw std::invalid_argument(fmt::format("exists_within needs {} x {} window values, {} bounds and {} answers",
                                                joints_, m_, joints_, joints_));
    }
    for (std::size_t joint = 0; joint < joints_; ++joint) {
        const auto a = windows.subspan(joint * m_, m_);
        if (shifted_path_bound(joint, a) <= tau[joint]) {
            out[joint] = true;  // the shifted path itself is a match within tau
            continue;
        }
        out[joint] = tau[joint] >= 0.0 && sweep(joint, a, tau[joint], true).cost <= tau[joint];
    }
}

}  // namespace warpguard
