#include "warpguard/mdtw.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace warpguard {

PublishedMdtw::PublishedMdtw(std::size_t max_window, std::size_t max_reference)
    : max_window_(max_window), max_reference_(max_reference), d_(max_window * max_reference) {
    if (max_window < 2) throw std::invalid_argument(fmt::format("mDTW window must be >= 2 samples, got {}", max_window));
    if (max_reference < 1) throw std::invalid_argument("mDTW reference must have at least 1 sample, got 0");
    // Longest path: every row once plus every reference step of the matched span.
    result_.path.reserve(max_window + max_reference);
}

const MatchResult& PublishedMdtw::match(std::span<const double> a, std::span<const double> b) {
    const std::size_t m = a.size();
    const std::size_t n = b.size();
    if (m < 2) throw std::invalid_argument(fmt::format("mDTW needs a window of >= 2 samples, got {}", m));
    if (n < 1) throw std::invalid_argument("mDTW needs a reference of >= 1 sample, got 0");
    if (m > max_window_ || n > max_reference_) {
        throw std::invalid_argument(fmt::format("mDTW sizes {}x{} exceed the capacity {}x{}", m, n, max_window_,
                                                max_reference_));
    }
    m_ = m;
    n_ = n;
    double* d = d_.data();

    // Row 1: rules (8) and (9). Not cumulative: every column may begin a match.
    for (std::size_t j = 0; j + 1 < n; ++j) {
        const double look_ahead =
            std::min({std::abs(a[1] - b[j + 1]), std::abs(a[1] - b[j]), std::abs(a[0] - b[j + 1])});
        d[j] = std::abs(a[0] - b[j]) + look_ahead;  // (8)
    }
    d[n - 1] = std::abs(a[0] - b[n - 1]) + std::abs(a[1] - b[n - 1]);  // (9)

    // Rows 2..m: rules (10) and (11).
    for (std::size_t i = 1; i < m; ++i) {
        const double* up = d + (i - 1) * n;
        double* row = d + i * n;
        const double ai = a[i];
        row[0] = std::abs(ai - b[0]) + up[0];  // (10)
        for (std::size_t j = 1; j < n; ++j) {
            row[j] = std::abs(ai - b[j]) + std::min({up[j - 1], row[j - 1], up[j]});  // (11)
        }
    }

    // Best end: argmin of the last row, earliest on ties.
    const double* last = d + (m - 1) * n;
    const std::size_t end = static_cast<std::size_t>(std::min_element(last, last + n) - last);

    // Backtracking (12)-(13) from (m, end) until row 1 is reached.
    auto& path = result_.path;
    path.clear();
    std::size_t i = m - 1;
    std::size_t j = end;
    path.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    while (i > 0) {
        if (j == 0) {
            --i;  // (13)
        } else {
            switch (back_step(d[(i - 1) * n + j - 1], d[(i - 1) * n + j], d[i * n + j - 1])) {  // (12)
                case BackStep::Diagonal: --i, --j; break;
                case BackStep::Vertical: --i; break;
                case BackStep::Horizontal: --j; break;
            }
        }
        path.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    }
    std::reverse(path.begin(), path.end());

    result_.cost = last[end];
    result_.start = j;
    result_.end = end;
    return result_;
}

MatchResult mdtw_match(std::span<const double> a, std::span<const double> b) {
    PublishedMdtw matcher(a.size(), std::max<std::size_t>(b.size(), 1));
    return matcher.match(a, b);
}

DtwResult dtw_match(std::span<const double> a, std::span<const double> b) {
    if (a.empty() || b.empty()) throw std::invalid_argument(fmt::format("DTW needs two non-empty signals, got {} and {}", a.size(), b.size()));
    return dtw_path(a.size(), b.size(), [&](std::size_t i, std::size_t j) { return std::abs(a[i] - b[j]); });
}

}  // namespace warpguard
