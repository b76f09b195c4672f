// The two exact pruned sweeps behind StreamingMdtw (step 2 in streaming_mdtw.hpp), and their float
// forms that narrow the work where the build has the vector units for them (WavefrontFloat with AVX2
// or AVX-512, LockstepFloat with AVX2 but not AVX-512; below); internal to core.
//
// Both return, per joint, exactly the published optimum's cost, its earliest end and the start of
// the path the published backtracking follows, pruning every cell over the joint's bound (a cell
// whose cumulative value exceeds an upper bound of the optimum cannot lie on an optimal path; local
// costs are >= 0). Cells that are kept have exactly their full-matrix values; each carries the
// start of its path with back_step's tie-breaking. They differ in how they lay the work into
// vector lanes, and each is the faster one where the other wastes its lanes:
// - Lockstep: up to eight joints share one sweep, one joint per lane, column by column. Every
//   lane does useful work where the joints' live cells overlap: windows that keep most cells alive
//   (standstills of quantised torques match every flat stretch of the reference).
// - Wavefront: per joint, blocks of W adjacent reference columns swept as a wavefront (lane k one
//   row behind lane k - 1), two joints interleaved. Where each joint's live cells are few and lie
//   elsewhere than the other joints', the lanes of a lockstep sweep would mostly wait.
// Storage is allocated in the constructors; sweep() does not allocate.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

namespace warpguard::sweeps {

struct Found {
    double cost = 0;  // +inf if no end <= the bound
    std::size_t end = 0, start = 0;
};

// `windows`: joints x m samples, joint after joint. bound[j] < 0: joint j is not swept and found[j]
// is left as it is. `stop_at_first` ends a joint's sweep at its first end <= its bound (early exit).

class Lockstep {
public:
    static constexpr std::size_t kLanes = 8;
    Lockstep(std::size_t window, std::span<const std::vector<double>> references);
    ~Lockstep();
    void sweep(std::span<const double> windows, const double* bound, bool stop_at_first, Found* found);
    std::uint64_t cells() const { return cells_; }  // per cell of a group's sweep, one per joint in it

    struct Lanes;  // kLanes doubles, one per joint of a group

private:
    struct Group {
        std::size_t first_joint = 0;
        std::size_t lanes = 0;  // joints in this group (the rest of the lanes are padding)
        std::unique_ptr<Lanes[]> reference;  // n entries, lane k = joint first_joint + k
    };
    void sweep_group(const Group& g, const Lanes* a, Lanes ub, bool stop_at_first, double* best_cost,
                     std::size_t* best_end, std::size_t* best_start);

    std::size_t joints_, m_, n_;
    std::vector<Group> groups_;
    // Three rotating column slots of m cells: values and carried path starts.
    std::unique_ptr<Lanes[]> columns_;
    std::unique_ptr<Lanes[]> starts_;
    std::unique_ptr<Lanes[]> lanes_window_;  // m entries
    std::uint64_t cells_ = 0;
};

class Wavefront {
public:
    Wavefront(std::size_t window, std::span<const std::vector<double>> references);
    ~Wavefront();
    void sweep(std::span<const double> windows, const double* bound, bool stop_at_first, Found* found);
    std::uint64_t cells() const;  // lane-cells: every lane of every wavefront step

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// What the float sweep found for one joint: the ends within `tie` of the best, in clusters whose
// candidates' segments [start, end] overlap (a periodic reference has one cluster per cycle that
// matches about equally well).
struct Candidates {
    static constexpr std::size_t kMaxClusters = 8;  // one step-3 lane each
    struct Cluster {
        std::size_t start = 0;               // no larger than the start of any of its ends' published paths
        std::size_t end_lo = 0, end_hi = 0;  // its candidate ends lie in [end_lo, end_hi]
    };
    double best = 0;                  // the least float end value; +inf if no end <= the bound
    Cluster cluster[kMaxClusters];    // by start, disjoint
    std::size_t clusters = 0;         // more than kMaxClusters: too scattered, use the exact sweep
    bool overflow = false;            // too many candidate ends at once: use the exact sweep
};

// The float sweeps' list of one joint's candidate ends: every end within `tie` of the best so far,
// each with its least start. When the list is full, ends that have fallen out of reach of the best
// are dropped; if none has, it overflows (the joint then needs the exact sweep).
struct CandidateList {
    static constexpr std::size_t kMax = 32;
    struct End {
        double value;
        std::size_t end, start;
    };
    End ends[kMax];
    std::size_t count = 0;
    bool overflow = false;
    double best = 0, tie = 0;

    void reset(double tie_) {
        count = 0;
        overflow = false;
        best = std::numeric_limits<double>::infinity();
        tie = tie_;
    }
    // An end of float value `value`: kept if within `tie` of the best; true if it is the new best.
    bool offer(double value, std::size_t end, std::size_t start) {
        if (value <= best + tie) add(value, end, start);
        if (!(value < best)) return false;
        best = value;
        return true;
    }
    // The clusters of the ends within `tie` of the final best, into `out`.
    void clusters(Candidates& out) const;

private:
    void add(double value, std::size_t end, std::size_t start) {
        if (count == kMax) {
            std::size_t kept = 0;
            for (std::size_t c = 0; c < count; ++c) {
                if (ends[c].value <= best + tie) ends[kept++] = ends[c];
            }
            count = kept;
            if (kept == kMax) {
                overflow = true;
                return;
            }
        }
        ends[count++] = {value, end, start};
    }
};

// Floats hold every reference value and column index exactly enough for the float sweeps: finite,
// far from overflow, and columns below 2^24 (the carried starts are floats).
inline bool references_fit_floats(std::span<const std::vector<double>> references) {
    if (references.empty() || references[0].size() >= (std::size_t{1} << 24)) return false;
    for (const auto& r : references) {
        for (const double x : r) {
            if (!std::isfinite(x) || std::abs(x) >= 1e30) return false;
        }
    }
    return true;
}

// The wavefront in float lanes (twice as many as doubles: 16 per AVX-512 vector, 8 per AVX2), not exact by itself:
// every value on a path over at most 4m columns is within E of the double one, E bounded by the caller from the values' magnitudes
// (StreamingMdtw::float_error_bound). It prunes over bound + E, carries per cell the least start
// over predecessors within `tie` = 2E of the minimum, and keeps every end within `tie` of the best
// one. StreamingMdtw then runs the exact double recursion over each cluster's [start, end_hi] and
// takes the least end there: exactly the published answer (streaming_mdtw.hpp).
class WavefrontFloat {
public:
    static bool built();  // compiled with AVX2 or AVX-512; otherwise never usable
    WavefrontFloat(std::size_t window, std::span<const std::vector<double>> references);
    ~WavefrontFloat();
    bool usable() const { return usable_; }  // built, and the references fit floats
    // bound[j] < 0: joint j is not swept. `tie`: per joint, 2E.
    void sweep(std::span<const double> windows, const double* bound, const double* tie, Candidates* out);
    std::uint64_t cells() const;
    // The coarse rest bound on the first row (on by default): a joint whose sweep computed more
    // lane-cells than half of the bound's recursion sweeps the next m samples with it, unless the
    // bound rules out under a quarter of the coarse columns by itself (mdtw_wavefront.cpp, Engine).
    void set_rest_bound(bool on);
    std::uint64_t rest_bound_sweeps() const;      // joint sweeps that took it
    std::uint64_t rest_bound_recursions() const;  // its recursions swept (one per joint every few samples)

    struct Impl;

private:
    bool usable_ = false;
    std::unique_ptr<Impl> impl_;
};

// The lockstep sweep in float lanes (8 joints per AVX2 vector instead of 4 doubles), under the same
// rules as WavefrontFloat: pruning over bound + E, the least start within `tie` of the minimum per
// cell, and every end within `tie` of the best, per joint. Built where the build has AVX2 but not
// AVX-512: with AVX-512 eight double lanes already fill one vector (built there too and measured on
// a Zen 4 core on 2026-12-04, docs/performance.md: not kept). The automatic choice never takes it
// since the float wavefront beat it on the recordings measured (streaming_mdtw.hpp); it runs when
// forced (`--kernel lockstep-float`, the tests).
class LockstepFloat {
public:
    static bool built();
    LockstepFloat(std::size_t window, std::span<const std::vector<double>> references);
    ~LockstepFloat();
    bool usable() const { return usable_; }  // built, and the references fit floats
    // bound[j] < 0: joint j is not swept. `tie`: per joint, 2E.
    void sweep(std::span<const double> windows, const double* bound, const double* tie, Candidates* out);
    std::uint64_t cells() const;

    struct Impl;

private:
    bool usable_ = false;
    std::unique_ptr<Impl> impl_;
};

// Step 3's values: the published recursion (8)-(11) over each joint's matched segment [start, end]
// only (a segment's first column has no left neighbour), every cell, up to eight joints side by
// side in the lanes (lane k's column x is reference column start_k + x). Every cell of an optimal
// path whose prefix lies in the segment gets exactly its full-matrix value; every other cell gets
// a value no smaller than that: enough for the published backtracking (12)-(13) to find the
// published path from the segment's last cell.
class SegmentRecursion {
public:
    SegmentRecursion(std::size_t window, std::span<const std::vector<double>> references, std::size_t max_width);
    ~SegmentRecursion();
    std::size_t max_width() const { return max_width_; }
    // Segments of joints[c] from start[c], width[c] <= max_width() columns, for c < count <= 8.
    void compute(std::span<const double> windows, const std::size_t* joints, const std::size_t* start,
                 const std::size_t* width, std::size_t count);
    // d(i, x) of lane c of the last compute().
    double at(std::size_t i, std::size_t x, std::size_t c) const;

private:
    std::size_t m_, n_, max_width_, stride_ = 0;
    std::span<const std::vector<double>> references_;
    std::unique_ptr<Lockstep::Lanes[]> values_;   // m x max_width
    std::unique_ptr<Lockstep::Lanes[]> segment_;  // max_width + 1 reference values per lane
    std::unique_ptr<Lockstep::Lanes[]> window_;   // m window values per lane
};

}  // namespace warpguard::sweeps
