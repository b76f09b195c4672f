// Modified Dynamic Time Warping exactly as published: thesis §3.2.2, rules (8)-(13).
//
// a = measurement window (length m >= 2), b = reference (length n >= 1). The measurement window is
// matched with open begin and open end to the most similar section of the reference; no sample of
// either signal is skipped.
//
// Tie-breaking (the thesis leaves it open; fixed here so every implementation agrees):
//   - best end: the smallest j with the minimal d(m, j)            (earliest end wins)
//   - backtracking (12): diagonal d(i-1,j-1), then vertical d(i-1,j), then horizontal d(i,j-1)
// Indices in this API are 0-based: row i = a[i], column j = b[j].
//
// Cost: d(m, end) as published. Note that (8) adds a look-ahead term to the first row, so the cost
// contains one deviation more than the path has pairs; it is kept because the thesis's thresholds
// and reported errors use this d.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace warpguard {

struct PathStep {
    std::uint32_t i;  // measurement index (row)
    std::uint32_t j;  // reference index (column)
    bool operator==(const PathStep&) const = default;
};

// One backtracking step of (5)/(12), with the tie-breaking every matcher here uses: the diagonal
// predecessor wins ties, then the vertical one, then the horizontal one.
enum class BackStep { Diagonal, Vertical, Horizontal };
inline BackStep back_step(double diagonal, double vertical, double horizontal) {
    if (diagonal <= vertical && diagonal <= horizontal) return BackStep::Diagonal;
    return vertical <= horizontal ? BackStep::Vertical : BackStep::Horizontal;
}

struct MatchResult {
    double cost = 0.0;       // d(m, end)
    std::size_t start = 0;   // reference index where the path reaches row 1
    std::size_t end = 0;     // reference index of the best end, argmin_j d(m, j)
    std::vector<PathStep> path;  // from (0, start) to (m-1, end), in order
};

// The published algorithm with its full m x n matrix. Storage is allocated once for the largest
// window and reference it will see; match() itself does not allocate.
class PublishedMdtw {
public:
    PublishedMdtw(std::size_t max_window, std::size_t max_reference);

    // Throws std::invalid_argument if m < 2, n < 1 or a size exceeds the capacity given at construction.
    const MatchResult& match(std::span<const double> a, std::span<const double> b);

    // d(i, j) of the last match (0-based), for inspection and plots.
    double cell(std::size_t i, std::size_t j) const { return d_[i * n_ + j]; }
    std::size_t rows() const { return m_; }
    std::size_t columns() const { return n_; }

private:
    std::size_t max_window_;
    std::size_t max_reference_;
    std::size_t m_ = 0;
    std::size_t n_ = 0;
    std::vector<double> d_;
    MatchResult result_;
};

// Convenience: one match with a temporary matcher (allocates).
MatchResult mdtw_match(std::span<const double> a, std::span<const double> b);

// Classic DTW, thesis (1)-(7): both signals matched whole, from (1,1) to (m,n). Used to report the
// "realistic" matching error of a span chosen by another matcher (§4.5). Tie order as for mDTW.
// Allocates; not for the per-sample path.
struct DtwResult {
    double cost = 0.0;  // d(m, n)
    std::vector<PathStep> path;
};
DtwResult dtw_match(std::span<const double> a, std::span<const double> b);

// The same recursion over any local cost, cost(i, j) >= 0 for row i < rows and column j < cols
// (e.g. several signals at once): d(rows, cols) and the path, with the tie order of back_step.
// Keeps one byte per cell (the step taken into it) and two rows of d. Allocates.
template <class Cost>
DtwResult dtw_path(std::size_t rows, std::size_t cols, Cost&& cost) {
    std::vector<std::uint8_t> step(rows * cols);  // into each cell: 0 diagonal, 1 vertical, 2 horizontal
    std::vector<double> prev(cols), cur(cols);
    for (std::size_t i = 0; i < rows; ++i) {
        if (i == 0) {
            cur[0] = cost(0, 0), step[0] = 0;  // (1)
            for (std::size_t j = 1; j < cols; ++j) cur[j] = cost(0, j) + cur[j - 1], step[j] = 2;  // (2)
        } else {
            cur[0] = cost(i, 0) + prev[0], step[i * cols] = 1;  // (3)
            double left = cur[0];
            std::uint8_t* into = step.data() + i * cols;
            for (std::size_t j = 1; j < cols; ++j) {  // (4), (5)
                const double c = cost(i, j);
                const double diagonal = prev[j - 1], vertical = prev[j];
                // back_step without branches (the tie order is the same: diagonal, vertical, then
                // horizontal), which the processor cannot predict on noisy costs; the least of
                // the three is the predecessor back_step picks (equal values are the same double).
                const bool by_diagonal = (diagonal <= vertical) & (diagonal <= left);
                const bool by_vertical = vertical <= left;
                into[j] = static_cast<std::uint8_t>(static_cast<unsigned>(!by_diagonal) * (1u + static_cast<unsigned>(!by_vertical)));
                left = c + std::min(std::min(diagonal, vertical), left);
                cur[j] = left;
            }
        }
        std::swap(prev, cur);
    }
    DtwResult result;
    result.cost = prev[cols - 1];
    std::size_t i = rows - 1, j = cols - 1;
    result.path.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    while (i > 0 || j > 0) {
        switch (static_cast<BackStep>(step[i * cols + j])) {  // (6), (7) in the first row and column
            case BackStep::Diagonal: --i, --j; break;
            case BackStep::Vertical: --i; break;
            case BackStep::Horizontal: --j; break;
        }
        result.path.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    }
    std::reverse(result.path.begin(), result.path.end());
    return result;
}

}  // namespace warpguard
