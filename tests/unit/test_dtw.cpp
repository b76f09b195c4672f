// Classic DTW, thesis (1)-(7).
#include <vector>

#include <catch2/catch.hpp>

#include "warpguard/mdtw.hpp"

using namespace warpguard;

TEST_CASE("classic DTW matrix and path of a small case match the hand computation of (1)-(7)", "[dtw]") {
    // a = 1 3 4, b = 1 2 4.   d:  row1 (2): 0 1 4   row2 (3)/(4): 2 1 2   row3: 5 3 1
    const std::vector<double> a{1, 3, 4};
    const std::vector<double> b{1, 2, 4};
    const auto r = dtw_match(a, b);
    CHECK(r.cost == 1.0);
    // (5): from (3,3) the minimum predecessor is (2,2) = 1, then (1,1) = 0.
    const std::vector<PathStep> expected{{0, 0}, {1, 1}, {2, 2}};
    CHECK(r.path == expected);
}

TEST_CASE("classic DTW walks the first row and column with rules (6) and (7)", "[dtw]") {
    const std::vector<double> a{0};
    const std::vector<double> b{0, 1, 2};
    const auto r = dtw_match(a, b);
    CHECK(r.cost == 3.0);  // (2): 0 + 1 + 2
    const std::vector<PathStep> row{{0, 0}, {0, 1}, {0, 2}};
    CHECK(r.path == row);

    const auto c = dtw_match(b, a);
    CHECK(c.cost == 3.0);  // (3)
    const std::vector<PathStep> column{{0, 0}, {1, 0}, {2, 0}};
    CHECK(c.path == column);
}

TEST_CASE("classic DTW forces both ends to match, unlike mDTW", "[dtw]") {
    // The window equals the middle of the reference: mDTW finds it at cost 0, DTW must pay for the ends.
    const std::vector<double> ref{9, 9, 1, 2, 3, 9, 9};
    const std::vector<double> win{1, 2, 3};
    CHECK(mdtw_match(win, ref).cost == 0.0);
    const auto whole = dtw_match(win, ref);
    CHECK(whole.cost == 8.0 + 8.0 + 0.0 + 0.0 + 0.0 + 6.0 + 6.0);
    CHECK(dtw_match(win, std::span<const double>(ref).subspan(2, 3)).cost == 0.0);
}
