// mDTW as published, thesis (8)-(13): hand-computed matrices, self-matching, resampled matching.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "warpguard/mdtw.hpp"

using namespace warpguard;

namespace {

std::vector<PathStep> steps(std::initializer_list<std::pair<int, int>> list) {
    std::vector<PathStep> out;
    for (auto [i, j] : list) out.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    return out;
}

}  // namespace

TEST_CASE("mDTW matrix of a small case matches the hand computation of (8)-(11)", "[mdtw]") {
    // a = measurement (m = 3), b = reference (n = 5).
    const std::vector<double> a{1, 3, 2};
    const std::vector<double> b{0, 1, 3, 2, 5};
    PublishedMdtw mdtw(3, 5);
    const auto& r = mdtw.match(a, b);

    // Row 1, rule (8): |a1-bj| + min(|a2-b(j+1)|, |a2-bj|, |a1-b(j+1)|); rule (9) for j = n.
    CHECK(mdtw.cell(0, 0) == 1 + 0);  // |1-0| + min(|3-1|=2, |3-0|=3, |1-1|=0)
    CHECK(mdtw.cell(0, 1) == 0 + 0);  // |1-1| + min(|3-3|=0, |3-1|=2, |1-3|=2)
    CHECK(mdtw.cell(0, 2) == 2 + 0);  // |1-3| + min(|3-2|=1, |3-3|=0, |1-2|=1)
    CHECK(mdtw.cell(0, 3) == 1 + 1);  // |1-2| + min(|3-5|=2, |3-2|=1, |1-5|=4)
    CHECK(mdtw.cell(0, 4) == 4 + 2);  // (9): |1-5| + |3-5|
    // Row 2: (10) down the first column, (11) elsewhere.
    CHECK(mdtw.cell(1, 0) == 3 + 1);      // |3-0| + d(1,1)
    CHECK(mdtw.cell(1, 1) == 2 + 0);      // |3-1| + min(d11=1, d21=4, d12=0)
    CHECK(mdtw.cell(1, 2) == 0 + 0);      // |3-3| + min(d12=0, d22=2, d13=2)
    CHECK(mdtw.cell(1, 3) == 1 + 0);      // |3-2| + min(d13=2, d23=0, d14=2)
    CHECK(mdtw.cell(1, 4) == 2 + 1);      // |3-5| + min(d14=2, d24=1, d15=6)
    // Row 3.
    CHECK(mdtw.cell(2, 0) == 2 + 4);      // |2-0| + d(2,1)
    CHECK(mdtw.cell(2, 1) == 1 + 2);      // |2-1| + min(d21=4, d31=6, d22=2)
    CHECK(mdtw.cell(2, 2) == 1 + 0);      // |2-3| + min(d22=2, d32=3, d23=0)
    CHECK(mdtw.cell(2, 3) == 0 + 0);      // |2-2| + min(d23=0, d33=1, d24=1)
    CHECK(mdtw.cell(2, 4) == 3 + 0);      // |2-5| + min(d24=1, d34=0, d25=3)

    // Best end = argmin of the last row = column 4 (index 3); backtracking (12) goes diagonal twice.
    CHECK(r.cost == 0.0);
    CHECK(r.end == 3);
    CHECK(r.start == 1);
    CHECK(r.path == steps({{0, 1}, {1, 2}, {2, 3}}));
}

TEST_CASE("mDTW backtracking uses rule (13) in the first column and stops at row 1", "[mdtw]") {
    // The reference's first sample fits every measurement best: the path must climb column 1.
    const std::vector<double> a{5, 5, 5, 5};
    const std::vector<double> b{5, 9, 9};
    const auto r = mdtw_match(a, b);
    CHECK(r.end == 0);
    CHECK(r.start == 0);
    CHECK(r.path == steps({{0, 0}, {1, 0}, {2, 0}, {3, 0}}));
    // Cost: row 1 (8) |5-5| + min(|5-9|, |5-5|, |5-9|) = 0, then 0 added per row.
    CHECK(r.cost == 0.0);
}

TEST_CASE("mDTW backtracking takes horizontal steps inside a row when they are cheapest", "[mdtw]") {
    // The reference dwells on a plateau that the measurement passes in one sample: a(2) = 5 pairs
    // with three reference samples. Hand-computed matrix:
    //   row 1: 0 5 5 5 15     row 2: 5 0 0 0 5     row 3: 15 5 5 5 0
    const std::vector<double> a{0, 5, 10};
    const std::vector<double> b{0, 5, 5, 5, 10};
    PublishedMdtw mdtw(3, 5);
    const auto& r = mdtw.match(a, b);
    const double expected[3][5] = {{0, 5, 5, 5, 15}, {5, 0, 0, 0, 5}, {15, 5, 5, 5, 0}};
    for (std::size_t i = 0; i < 3; ++i) {
        for (std::size_t j = 0; j < 5; ++j) CHECK(mdtw.cell(i, j) == expected[i][j]);
    }
    CHECK(r.end == 4);
    CHECK(r.cost == 0.0);
    CHECK(r.start == 0);
    CHECK(r.path == steps({{0, 0}, {1, 1}, {1, 2}, {1, 3}, {2, 4}}));
}

TEST_CASE("mDTW picks the earliest end when several ends tie", "[mdtw]") {
    // Row 3 is 19 8 0 0 0 5 (hand-computed): ends at columns 3, 4 and 5 tie at 0.
    const std::vector<double> a{0, 4, 4};
    const std::vector<double> b{9, 0, 4, 4, 4, 9};
    PublishedMdtw mdtw(3, 6);
    const auto& r = mdtw.match(a, b);
    CHECK(mdtw.cell(2, 2) == 0.0);
    CHECK(mdtw.cell(2, 3) == 0.0);
    CHECK(mdtw.cell(2, 4) == 0.0);
    CHECK(r.end == 2);
    CHECK(r.cost == 0.0);
    // From (2,2): diagonal 4, vertical 0, horizontal 8 -> vertical; then diagonal to row 1.
    CHECK(r.path == steps({{0, 1}, {1, 2}, {2, 2}}));
}

TEST_CASE("mDTW tie-breaking prefers diagonal, then vertical, then horizontal", "[mdtw]") {
    // Constant signals make every predecessor equal: the path must be the diagonal.
    const std::vector<double> a{1, 1, 1};
    const std::vector<double> b{1, 1, 1, 1};
    const auto r = mdtw_match(a, b);
    CHECK(r.end == 0);  // whole last row is 0: earliest end
    CHECK(r.path == steps({{0, 0}, {1, 0}, {2, 0}}));  // at j = 1 rule (13) only goes up

    const std::vector<double> c{2, 2, 2};
    const std::vector<double> d{0, 2, 2, 2};
    const auto s = mdtw_match(c, d);
    CHECK(s.end == 1);
    // From (2,1): diag (1,0)=2+..., up (1,1)=0, left (2,0) large -> vertical twice.
    CHECK(s.path == steps({{0, 1}, {1, 1}, {2, 1}}));
}

TEST_CASE("mDTW rejects a window shorter than 2 and sizes beyond its capacity", "[mdtw]") {
    const std::vector<double> one{1};
    const std::vector<double> b{1, 2, 3};
    CHECK_THROWS_WITH(mdtw_match(one, b), Catch::Contains(">= 2 samples, got 1"));
    PublishedMdtw small(2, 3);
    const std::vector<double> a3{1, 2, 3};
    CHECK_THROWS_WITH(small.match(a3, b), Catch::Contains("exceed the capacity"));
}

TEST_CASE("every window cut from the reference matches itself with cost 0 at the right span", "[mdtw]") {
    // A non-repeating reference so each span is unique.
    std::vector<double> ref(400);
    for (std::size_t k = 0; k < ref.size(); ++k) {
        const double t = static_cast<double>(k) * 0.02;
        ref[k] = std::sin(t) + 0.5 * std::sin(2.7 * t + 0.3) + 0.1 * t;
    }
    const std::size_t m = 30;
    PublishedMdtw mdtw(m, ref.size());
    for (std::size_t s = 0; s + m <= ref.size(); s += 7) {
        const std::span<const double> window(ref.data() + s, m);
        const auto& r = mdtw.match(window, ref);
        INFO("window start " << s);
        CHECK(r.cost == 0.0);
        CHECK(r.start == s);
        CHECK(r.end == s + m - 1);
        CHECK(r.path.size() == m);
    }
}

namespace {

// A trend with wiggles of varying size: no stretch of it repeats, even allowing for time warping.
double signal(double t) { return t + 0.4 * std::sin(6.0 * t) * (1.0 + 0.5 * std::sin(1.3 * t)); }

}  // namespace

TEST_CASE("a measurement sampled 3x faster or 3x slower is matched to the right span (§3.2.4)", "[mdtw]") {
    // Reference sampled at dt; measurement streams of the same motion at dt/3 and 3 dt.
    const double dt = 0.01;
    std::vector<double> ref(1200);
    for (std::size_t k = 0; k < ref.size(); ++k) ref[k] = signal(static_cast<double>(k) * dt);
    const std::size_t m = 60;
    PublishedMdtw mdtw(m, ref.size());

    for (const double factor : {3.0, 1.0 / 3.0}) {
        const double mdt = dt / factor;  // factor 3: measurement 3x faster
        // The span is determined to within two periods of the coarser sampling: no reference sample
        // may be skipped, so near a turning point of the signal a shorter end can be cheaper.
        const double tolerance = 2.0 * std::max(dt, mdt) + 1e-9;
        for (double t_end = 2.0; t_end < 11.5; t_end += 0.37) {
            std::vector<double> window(m);
            for (std::size_t i = 0; i < m; ++i) window[i] = signal(t_end - static_cast<double>(m - 1 - i) * mdt);
            const auto& r = mdtw.match(window, ref);
            const double t_start = t_end - static_cast<double>(m - 1) * mdt;
            INFO("factor " << factor << " window " << t_start << " .. " << t_end << " s, matched "
                           << static_cast<double>(r.start) * dt << " .. " << static_cast<double>(r.end) * dt);
            CHECK(std::abs(static_cast<double>(r.start) * dt - t_start) <= tolerance);
            CHECK(std::abs(static_cast<double>(r.end) * dt - t_end) <= tolerance);
        }
    }
}
