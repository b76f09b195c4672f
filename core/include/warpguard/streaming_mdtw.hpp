// Exact mDTW at every sample, fast: the streaming matcher.
//
// Returns exactly what PublishedMdtw returns (bit-identical cost, the same end, start and warping
// path, with the same tie-breaking) for every joint's newest window, at a fraction of the cost:
//
// 1. Upper bound from the previous sample. The new window is the old one shifted by one sample, so
//    the old warping path minus its first row, plus the new sample paired with the old end or the
//    next reference sample, is a valid path for the new window. Its cost is an upper bound UB on the
//    optimum (O(m + span), no matrix).
// 2. Exact pruned sweep of the whole reference. A cell whose cumulative value exceeds UB can never
//    lie on an optimal path (local costs are >= 0), so it is dropped, and a stretch of the
//    reference where nothing is live is passed over; UB tightens to the best end found so far.
//    Every cell that is kept has exactly the value the full matrix has, so the cost, the earliest
//    best end and every tie-break agree with the published algorithm. Each cell also carries the
//    reference index at which the path the published backtracking would follow from it begins
//    (the same tie-breaking), so only a few columns are ever stored. Two sweeps lay the work into
//    vector lanes differently (src/mdtw_sweeps.hpp): all joints side by side, one per lane, column
//    by column (fast where most cells of every joint are alive), or per joint in wavefront blocks
//    of adjacent columns, two joints interleaved (fast where few cells are alive and they lie
//    elsewhere for each joint). Each sample uses the one the previous sample's work points to.
//    Where the build has AVX2 or AVX-512, the wavefront runs in float lanes instead (twice as many
//    per vector): every float value on a path over at most 4m columns (the widest segment step 3
//    takes) is within E of the double one (float_error_bound), so the float
//    sweep prunes over UB + E, keeps every end within 2E of its best, and carries per cell the least
//    start over predecessors within 2E of the minimum: no larger than the published path's start.
//    The kept ends are grouped into clusters whose segments [start, end] overlap (one per cycle of
//    a periodic reference that matches about equally well). Step 3 over each cluster's [least
//    start, last end] then has every candidate end's published path in it, and the least exact
//    value over the clusters (the earliest on ties) is the published optimum. A joint whose kept
//    ends are too many, in more than 8 clusters or in a cluster too wide, is swept again exactly.
// 3. The warping path is rebuilt with the published recursion over the matched segment
//    [start, end] only (up to eight joints side by side in vector lanes); every cell of the
//    optimal path gets exactly its full-matrix value there, every other cell one no smaller, so
//    the path and its ties are the published ones.
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

namespace sweeps {
class Lockstep;
class SegmentRecursion;
class Wavefront;
class WavefrontFloat;
class LockstepFloat;
struct Found;
struct Candidates;
}  // namespace sweeps

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

    // Statistics for benchmarks and diagnostics: cells computed by sweeps so far, per joint (the
    // wavefront counts every lane of its steps, also those outside the matrix at a block's ends).
    std::uint64_t cells() const;

    // Which sweep step 2 uses: Auto (the default) takes the wavefront in float lanes where that is
    // built (AVX2 or AVX-512) and the sample has a bound; in doubles (a stream's first sample, a
    // pause after ties, a build without it) it chooses between the lockstep sweep and the
    // wavefront per sample from the previous double sweep's work. The others force one, for tests
    // and benchmarks (the float ones still sweep a stream's first sample, which has no bound, in
    // doubles; the lockstep sweep in float lanes is built with AVX2 but not AVX-512). Results are
    // identical either way.
    enum class SweepKernel { Auto, Lockstep, Wavefront, WavefrontFloat, LockstepFloat };
    void set_kernel(SweepKernel kernel);
    SweepKernel last_kernel() const { return last_; }  // the sweep the last match() used
    // Joints the float sweep handed to the exact double sweep so far (an end too uncertain or a
    // segment too wide to settle from the float values).
    std::uint64_t float_fallbacks() const { return float_fallbacks_; }
    // The float wavefront's coarse rest bound on the first row (on by default; the answers are
    // identical either way): a joint's sweep drops the first-row cells whose value plus a lower
    // bound of the rest of any path from them (the reference in coarse columns of 16 samples with
    // their value ranges) exceeds the bound. The lower bound comes from a recursion over the coarse
    // columns, swept anew every 8 samples, the joints in turn; a joint takes it for m samples after
    // a sweep that cost more than about half a recursion, and where it alone rules out under a
    // quarter of the coarse columns, goes without it for m samples (docs/performance.md). Off: for
    // benchmarks and tests.
    void set_rest_bound(bool on);
    std::uint64_t rest_bound_sweeps() const;      // joint sweeps that took it so far
    std::uint64_t rest_bound_recursions() const;  // the recursions it swept so far
    // Times Auto paused the float sweep after a sample whose ties sent over a quarter of the joints
    // to the exact sweep, and the samples it swept in doubles in those pauses. A pause lasts
    // float_pause_samples(), twice the last one if the float sweep failed again at once (up to
    // float_pause_max_samples()), one sample shorter after each sample the float sweep settled.
    std::uint64_t float_pauses() const { return float_pauses_; }
    std::uint64_t float_paused_samples() const { return float_paused_samples_; }
    static constexpr std::size_t float_pause_samples() { return kFloatPause; }
    static constexpr std::size_t float_pause_max_samples() { return kFloatPauseMax; }
    // Whether this build has the float sweep (it needs AVX2 or AVX-512 on the build host).
    static bool float_sweep_built();
    // Whether this build has the lockstep sweep in float lanes (AVX2 without AVX-512).
    static bool float_lockstep_built();

    // E: a bound on |float value - double value| of every cell the float sweep must keep, for a
    // window whose values are at most max_abs_a and a reference at most max_abs_b in magnitude,
    // when the cells that matter are <= bound and lie on paths over at most max_width reference
    // columns (docs/performance.md derives it: each cell of a path adds a rounding, and a path
    // over w columns of m rows has at most m + w - 1 cells).
    static double float_error_bound(std::size_t window, std::size_t max_width, double max_abs_a, double max_abs_b,
                                    double bound);

private:
    // Auto: wavefront -> lockstep above this share of the full matrices, back below the other.
    static constexpr double kToLockstep = 0.25;
    static constexpr double kToWavefront = 0.10;
    // Auto: samples swept in doubles after the float sweep sent over a quarter of the joints to the
    // exact sweep (a documented default: a retry costs at most 1/32 of the samples' float sweeps),
    // doubled while every retry fails, up to kFloatPauseMax (about 2-4 s of a 250-500 Hz robot, a
    // long wait of quantised readings: one failed retry in it then costs at most 1/1024).
    static constexpr std::size_t kFloatPause = 32;
    static constexpr std::size_t kFloatPauseMax = 1024;

    // Upper bound for joint `joint` from its previous path; +inf if there is none.
    double shifted_path_bound(std::size_t joint, std::span<const double> a) const;
    // Step 2 with bounds_ (< 0: joint not swept) into found_, and (for a match, not an early exit)
    // the choice of the next sample's sweep.
    void run_sweep(std::span<const double> windows, bool stop_at_first);
    // Step 2 in float lanes: joints it settles keep their clusters of candidate ends in
    // candidates_; the rest are swept exactly.
    // `exact_lockstep` chooses the double sweep for the joints it cannot settle.
    void run_float_sweep(std::span<const double> windows, bool lockstep, bool exact_lockstep);
    // The exact sweep in doubles of every joint with bounds_[joint] >= 0, into found_.
    void run_double_sweep(std::span<const double> windows, bool lockstep, bool stop_at_first);
    // Step 3 for one joint alone, over the cells of its segment that can be <= the optimum.
    void rebuild_path(std::span<const double> a, const std::vector<double>& b, std::size_t start, std::size_t end,
                      double cost, MatchResult& out);

    std::size_t joints_;
    std::size_t m_;
    std::size_t n_;
    std::vector<std::vector<double>> references_;
    std::vector<MatchResult> results_;
    std::vector<bool> tracked_;

    std::unique_ptr<sweeps::Lockstep> lockstep_;
    std::unique_ptr<sweeps::Wavefront> wavefront_;
    std::unique_ptr<sweeps::WavefrontFloat> wavefront_float_;
    std::unique_ptr<sweeps::LockstepFloat> lockstep_float_;
    std::unique_ptr<sweeps::SegmentRecursion> segments_;
    SweepKernel kernel_ = SweepKernel::Auto;
    SweepKernel next_ = SweepKernel::Wavefront;
    SweepKernel last_ = SweepKernel::Wavefront;
    std::vector<double> bounds_;  // per joint, per sample: the sweep's bound (allocated once)
    std::vector<sweeps::Found> found_;
    // Per joint, per sample: whether the float sweep settled the joint (its cost and end then come
    // from step 3, which chooses among the ends of its clusters in candidates_), and its state.
    std::vector<bool> settled_;
    std::vector<double> float_bounds_, ties_, ref_max_abs_;
    std::vector<sweeps::Candidates> candidates_;
    std::uint64_t float_fallbacks_ = 0;
    std::uint64_t float_pauses_ = 0;
    std::size_t float_pause_ = 0;  // Auto: samples left before the float sweep is tried again
    std::size_t float_pause_next_ = kFloatPause;  // the next pause's length
    std::uint64_t float_paused_samples_ = 0;
    std::unique_ptr<double[]> region_;  // the matched segment's cells for the path rebuild
    std::unique_ptr<std::size_t[]> row_lo_, row_hi_;  // its live cells per row
};

}  // namespace warpguard
