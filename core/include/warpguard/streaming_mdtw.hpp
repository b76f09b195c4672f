// Exact mDTW at every sample, fast: the streaming matcher.
//
// Returns exactly what PublishedMdtw returns (bit-identical cost, the same end, start and warping
// path, with the same tie-breaking) for every joint's newest window, at a fraction of the cost:
//
// 1. Upper bound from the previous sample. The new window is the old one shifted by one sample, so
//    the old warping path minus its first row, plus the new sample paired with the old end or the
//    next reference sample, is a valid path for the new window. Its cost is an upper bound UB on the
//    optimum (O(m + span), no matrix).
// 2. Exact pruned sweep of the whole reference, joint by joint. The reference is cut into blocks of
//    W adjacent columns (W = the doubles of one vector register: 8 with AVX-512, 4 otherwise); a
//    block is swept as a wavefront, lane k holding column j0 + k one row behind lane k - 1, so the
//    W cells of a step are independent and the row-to-row dependency chain of one column is shared
//    by W columns. A cell whose cumulative value exceeds UB can never lie on an optimal path (local
//    costs are >= 0): a block with no live cell in its left neighbour and none in its first row is
//    skipped, a block starts at the first live row of its left neighbour, jumps over rows where
//    neither it nor its neighbour has a live cell and ends when neither has one left; UB tightens to
//    the best end found so far. Every cell that is kept has exactly the value the full matrix has, so
//    the cost, the earliest best end and every tie-break agree with the published algorithm. Each
//    cell also carries the reference index at which the path the published backtracking would follow
//    from it begins (the same tie-breaking), so only the block's own steps are ever stored.
// 3. The warping path is rebuilt with the published recursion over the matched segment
//    [start, end] only, and per row only over cells that can still be <= the optimum; every cell
//    of the optimal path gets exactly its full-matrix value there, so the path and its ties are
//    the published ones.
// A stream's first sample has no bound: its sweep keeps every cell, which is still exact.
//
// Early exit: `exists_within(tau)` answers only "is there a match with cost <= tau?" per joint; it
// returns as soon as the shifted path or a found end proves it, and otherwise prunes with tau.
//
// All storage is allocated in the constructor; match() does not allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "warpguard/mdtw.hpp"

namespace warpguard {

class StreamingMdtw {
public:
    // `references` holds one reference per joint, all of the same length n >= 1; they are copied.
    StreamingMdtw(std::size_t window, std::span<const std::vector<double>> references);
    ~StreamingMdtw();
    StreamingMdtw(const StreamingMdtw&) = delete;
    StreamingMdtw& operator=(const StreamingMdtw&) = delete;

    std::size_t joints() const { return joints_; }
    std::size_t window() const { return m_; }
    std::size_t reference_size() const { return n_; }

    // `windows` holds joints() windows of window() samples each, joint after joint, oldest first.
    // The result of each joint is then available through result(joint).
    void match(std::span<const double> windows);
    const MatchResult& result(std::size_t joint) const { return results_[joint]; }

    // Per joint: is there a match with cost <= tau[joint]? Writes one answer per joint into `out`.
    // Does not update result() or the tracking state.
    void exists_within(std::span<const double> windows, std::span<const double> tau, std::span<bool> out);

    // Forget the previous matches (a new stream begins): the next match() runs without a bound.
    void reset();

    // Statistics for benchmarks and diagnostics: cells computed by sweeps so far (every lane of
    // every wavefront step, including the lanes outside the matrix at a block's two ends).
    std::uint64_t cells() const { return cells_; }

private:
    struct Found {
        double cost = 0;  // +inf if no end <= the bound
        std::size_t end = 0, start = 0;
    };
    // Upper bound for joint `joint` from its previous path; +inf if there is none.
    double shifted_path_bound(std::size_t joint, std::span<const double> a) const;
    // Step 2 for the given joints (two sweeps at a time, interleaved step by step) with bounds
    // ub[k] for joints[k]: found[k] = the best cost, its earliest end and the start of its path.
    // `stop_at_first` ends a joint's sweep at its first end <= its bound (early-exit mode).
    void sweep(std::span<const std::size_t> joints, std::span<const double> windows, const double* ub,
               bool stop_at_first, Found* found);
    // Step 3 for one joint.
    void rebuild_path(std::span<const double> a, const std::vector<double>& b, std::size_t start, std::size_t end,
                      double cost, MatchResult& out);

    std::size_t joints_;
    std::size_t m_;
    std::size_t n_;
    std::vector<std::vector<double>> references_;
    std::vector<std::unique_ptr<double[]>> padded_;  // per joint: the reference, then +inf
    std::vector<MatchResult> results_;
    std::vector<bool> tracked_;

    std::vector<std::vector<double>> chunk_lo_, chunk_hi_;  // per joint: value range of each 64 columns
    std::vector<std::size_t> all_joints_, open_joints_;  // per-sample lists, allocated once
    std::vector<double> bounds_;
    std::vector<Found> found_;
    struct Scratch;  // per interleaved sweep: the window backwards and the blocks' wavefront steps
    std::unique_ptr<Scratch> scratch_;
    std::unique_ptr<double[]> region_;  // the matched segment's cells for the path rebuild
    std::unique_ptr<std::size_t[]> row_lo_, row_hi_;  // its live cells per row
    std::uint64_t cells_ = 0;
};

}  // namespace warpguard
