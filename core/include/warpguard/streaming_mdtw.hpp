// Exact mDTW at every sample, fast: the streaming matcher.
//
// Returns exactly what PublishedMdtw returns (bit-identical cost, the same end, start and warping
// path, with the same tie-breaking) for every joint's newest window, at a fraction of the cost:
//
// 1. Upper bound from the previous sample. The new window is the old one shifted by one sample, so
//    the old warping path minus its first row, plus the new sample paired with the old end or the
//    next reference sample, is a valid path for the new window. Its cost is an upper bound UB on the
//    optimum (O(m + span), no matrix).
// 2. Exact pruned sweep of the whole reference. Columns are processed left to right; a cell whose
//    cumulative value exceeds UB can never lie on an optimal path (local costs are >= 0), so it is
//    dropped; a column whose left neighbour has no live cell and whose first-row value exceeds UB
//    is skipped after one comparison; UB tightens to the best end found so far. Every cell that is
//    kept has exactly the value the full matrix has, so the cost, the earliest best end and every
//    tie-break agree with the published algorithm.
// 3. The joints are matched together: up to eight joints share one sweep in the lanes of an
//    8 x double vector (GCC vector extensions: two AVX2 registers where the build host has them,
//    whose two independent dependency chains hide each other's latency).
// 4. The warping path is rebuilt by backtracking over the cells kept in step 2 only (an arena
//    that is reset every sample). If a sample needs more cells than the arena holds (the first
//    sample of a stream has no bound; a wild window can keep most cells alive), that joint group is
//    matched with the published algorithm instead: still exact, only slower. `fallbacks()` counts it.
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
    static constexpr std::size_t kLanes = 8;

    // `references` holds one reference per joint, all of the same length n >= 1; they are copied.
    // `arena_cells` bounds the columns' cells kept per joint group per sample (default: 16 x m x 256).
    StreamingMdtw(std::size_t window, std::span<const std::vector<double>> references, std::size_t arena_cells = 0);
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

    // Statistics for benchmarks and diagnostics.
    std::uint64_t fallbacks() const { return fallbacks_; }
    std::uint64_t cells() const { return cells_; }  // cells computed by sweeps so far (per lane group)

    struct Lanes;  // kLanes doubles, one per joint of a group

private:

    struct Group {
        std::size_t first_joint = 0;
        std::size_t lanes = 0;  // joints in this group (the rest of the lanes are padding)
        std::unique_ptr<Lanes[]> reference;  // n entries, lane k = joint first_joint + k
    };

    // Upper bound for joint `joint` from its previous path; +inf if there is none.
    double shifted_path_bound(std::size_t joint, std::span<const double> a) const;
    // Step 2 for one group. Returns false if the arena overflowed. `stop_at_first` ends a lane's
    // search at its first end <= ub (early-exit mode).
    bool sweep(const Group& g, const Lanes* a, Lanes ub, bool stop_at_first, double* best_cost,
               std::size_t* best_end);
    // The group's windows, sample by sample, one joint per lane.
    void load_lanes(const Group& g, std::span<const double> windows);
    void backtrack(std::size_t lane, std::size_t end, MatchResult& out);
    double cell(std::size_t j, std::size_t i, std::size_t lane) const;

    std::size_t joints_;
    std::size_t m_;
    std::size_t n_;
    std::vector<std::vector<double>> references_;
    std::vector<Group> groups_;
    std::vector<MatchResult> results_;
    std::vector<bool> tracked_;

    // Arena of the cells kept by the current sweep, column by column.
    std::unique_ptr<Lanes[]> arena_;
    std::size_t arena_capacity_;
    std::vector<std::uint32_t> column_offset_;
    std::vector<std::uint16_t> column_rows_;
    std::vector<std::uint64_t> column_stamp_;
    std::uint64_t stamp_ = 0;

    std::unique_ptr<Lanes[]> lanes_window_;  // m entries
    PublishedMdtw fallback_;
    std::uint64_t fallbacks_ = 0;
    std::uint64_t cells_ = 0;
};

}  // namespace warpguard
