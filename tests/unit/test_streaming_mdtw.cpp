// The streaming matcher against the published mDTW oracle, sample by sample, on randomised streams:
// smooth, periodic (the optimum jumps between cycles), quantised (many exact ties) and plateaued
// references; measurements resampled irregularly, with noise and with collisions.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "warpguard/mdtw.hpp"
#include "warpguard/streaming_mdtw.hpp"

using namespace warpguard;

namespace {

enum class Shape { Smooth, Periodic, Quantised, Plateaus };

struct Signal {
    // Continuous-time signal for one joint, defined over phase x in [0, cycles).
    Shape shape;
    double f1, f2, p1, p2, amp;
    double operator()(double x) const {
        const double base = amp * (std::sin(f1 * x + p1) + 0.4 * std::sin(f2 * x + p2));
        switch (shape) {
            case Shape::Smooth: return base + 0.3 * amp * x;
            case Shape::Periodic: return amp * (std::sin(2 * M_PI * x + p1) + 0.5 * std::sin(4 * M_PI * x + p2));
            case Shape::Quantised: return std::round(base * 4.0) / 4.0;
            case Shape::Plateaus: {
                const double s = std::sin(2 * M_PI * x + p1);
                return amp * (s > 0.5 ? 1.0 : s < -0.5 ? -1.0 : 2.0 * s);
            }
        }
        return 0;
    }
};

struct Scenario {
    Shape shape;
    std::size_t joints, m, n, samples;
    double cycles;     // reference covers this many cycles (periodic: the optimum can jump between them)
    double noise;
    bool collisions;
    double offset = 0;  // added to every value (large: float roundings near the differences' size)
};

std::string name(Shape s) {
    switch (s) {
        case Shape::Smooth: return "smooth";
        case Shape::Periodic: return "periodic";
        case Shape::Quantised: return "quantised";
        case Shape::Plateaus: return "plateaus";
    }
    return "?";
}

struct Counts {
    std::size_t windows = 0;
    std::uint64_t cells = 0;        // cells the sweeps computed
    std::uint64_t full_cells = 0;   // cells of the published algorithm's matrices
    std::size_t jumps = 0;  // the optimal end moved by more than m reference samples between samples
    std::size_t lockstep = 0, wavefront = 0, wavefront_float = 0, lockstep_float = 0;  // samples swept by each kernel
    std::uint64_t float_fallbacks = 0;  // joints the float sweep handed to the exact one
    std::uint64_t float_pauses = 0;     // Auto: times it swept in doubles for a while after many fallbacks
    std::uint64_t float_paused_samples = 0;  // ... and the samples it swept in doubles then
    std::uint64_t rest_bound_sweeps = 0;     // joint sweeps that took the coarse rest bound
    std::uint64_t rest_bound_recursions = 0;  // the recursions swept for it
    std::uint64_t most_recursions = 0;        // the most in one sample once the window has filled
};

std::size_t& samples_of(Counts& counts, StreamingMdtw::SweepKernel kernel) {
    switch (kernel) {
        case StreamingMdtw::SweepKernel::Lockstep: return counts.lockstep;
        case StreamingMdtw::SweepKernel::WavefrontFloat: return counts.wavefront_float;
        case StreamingMdtw::SweepKernel::LockstepFloat: return counts.lockstep_float;
        default: return counts.wavefront;
    }
}

using Kernel = StreamingMdtw::SweepKernel;

void run(const Scenario& sc, std::uint64_t seed, Counts& counts, Kernel kernel = Kernel::Auto, bool rest_bound = true) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::normal_distribution<double> gauss(0.0, 1.0);
    std::vector<Signal> sig;
    for (std::size_t k = 0; k < sc.joints; ++k) {
        sig.push_back({sc.shape, 3 + 5 * u(rng), 7 + 11 * u(rng), 6 * u(rng), 6 * u(rng), 1 + 9 * u(rng)});
    }
    // Reference: n samples over `cycles` phases, small noise, quantised like a controller's value.
    std::vector<std::vector<double>> refs(sc.joints, std::vector<double>(sc.n));
    for (std::size_t k = 0; k < sc.joints; ++k) {
        for (std::size_t j = 0; j < sc.n; ++j) {
            const double x = sc.cycles * static_cast<double>(j) / static_cast<double>(sc.n);
            refs[k][j] = std::round((sc.offset + sig[k](x) + sc.noise * gauss(rng)) * 1000.0) / 1000.0;
        }
    }
    StreamingMdtw streaming(sc.m, refs);
    streaming.set_kernel(kernel);
    streaming.set_rest_bound(rest_bound);
    PublishedMdtw oracle(sc.m, sc.n);

    // Measurement: the same motion sampled irregularly at 0.5x..2x the reference rate, with noise
    // and, sometimes, collision bumps.
    std::vector<std::vector<double>> fifo(sc.joints);
    std::vector<double> windows(sc.joints * sc.m);
    double x = sc.cycles * u(rng);
    const double rate = (0.5 + 1.5 * u(rng)) * sc.cycles / static_cast<double>(sc.n);
    double bump = 0.0;
    std::vector<std::size_t> last_end(sc.joints, 0);
    for (std::size_t s = 0; s < sc.samples; ++s) {
        x += rate * (0.6 + 0.8 * u(rng));
        if (sc.collisions && u(rng) < 0.01) bump = 5.0 + 20.0 * u(rng);
        bump *= 0.8;
        for (std::size_t k = 0; k < sc.joints; ++k) {
            const double value = std::round((sc.offset + sig[k](std::fmod(x, sc.cycles)) + sc.noise * gauss(rng) +
                                             (k % 2 ? bump : -bump)) * 1000.0) / 1000.0;
            auto& f = fifo[k];
            if (f.empty()) f.assign(sc.m, value);  // the thesis's start: m copies of the first sample
            f.erase(f.begin());
            f.push_back(value);
            std::copy(f.begin(), f.end(), windows.begin() + static_cast<std::ptrdiff_t>(k * sc.m));
        }
        const std::uint64_t recursions0 = streaming.rest_bound_recursions();
        streaming.match(windows);
        if (s >= sc.m) counts.most_recursions = std::max(counts.most_recursions, streaming.rest_bound_recursions() - recursions0);
        samples_of(counts, streaming.last_kernel()) += 1;
        for (std::size_t k = 0; k < sc.joints; ++k) {
            const auto& expected = oracle.match(fifo[k], refs[k]);
            const auto& got = streaming.result(k);
            INFO(name(sc.shape) << " seed " << seed << " m " << sc.m << " n " << sc.n << " sample " << s << " joint " << k);
            REQUIRE(got.cost == expected.cost);  // bit-identical
            REQUIRE(got.end == expected.end);
            REQUIRE(got.start == expected.start);
            REQUIRE(got.path == expected.path);
            if (s > 0 && (expected.end > last_end[k] + sc.m || expected.end + sc.m < last_end[k])) ++counts.jumps;
            last_end[k] = expected.end;
            ++counts.windows;
        }
    }
    counts.full_cells += sc.samples * sc.m * sc.n * sc.joints;
    counts.cells += streaming.cells();
    counts.float_fallbacks += streaming.float_fallbacks();
    counts.float_pauses += streaming.float_pauses();
    counts.float_paused_samples += streaming.float_paused_samples();
    counts.rest_bound_sweeps += streaming.rest_bound_sweeps();
    counts.rest_bound_recursions += streaming.rest_bound_recursions();
}

}  // namespace

TEST_CASE("the streaming matcher returns exactly the published mDTW on 10,000+ random windows", "[streaming]") {
    Counts counts;
    std::uint64_t seed = 1000;
    const Scenario scenarios[] = {
        {Shape::Smooth, 6, 16, 400, 300, 1.0, 0.02, false},
        {Shape::Smooth, 3, 30, 900, 300, 1.0, 0.05, true},
        {Shape::Periodic, 6, 20, 600, 300, 4.0, 0.01, false},
        {Shape::Periodic, 5, 32, 1200, 250, 6.0, 0.02, true},
        {Shape::Quantised, 4, 12, 300, 300, 1.0, 0.0, false},
        {Shape::Quantised, 7, 24, 500, 200, 2.0, 0.0, true},
        {Shape::Plateaus, 2, 8, 250, 400, 3.0, 0.0, false},
        {Shape::Plateaus, 6, 40, 700, 200, 3.0, 0.01, true},
        {Shape::Smooth, 1, 2, 100, 400, 1.0, 0.05, true},
        {Shape::Periodic, 6, 64, 1000, 150, 5.0, 0.0, true},
    };
    for (const auto& sc : scenarios) run(sc, seed++, counts);
    INFO("windows " << counts.windows << ", optimum jumps " << counts.jumps);
    CHECK(counts.windows >= 10000);
    CHECK(counts.jumps >= 20);  // the periodic streams really made the optimum jump between cycles
    // The automatic choice used the lockstep sweep where the quantised and plateaued windows keep
    // most cells alive.
    INFO("samples swept: lockstep " << counts.lockstep << ", wavefront " << counts.wavefront << ", float wavefront "
                                    << counts.wavefront_float << ", float lockstep " << counts.lockstep_float
                                    << "; float fallbacks " << counts.float_fallbacks << ", float pauses "
                                    << counts.float_pauses << " (" << counts.float_paused_samples << " samples)");
    CHECK(counts.lockstep >= 100);
    CHECK(counts.lockstep_float == 0u);  // Auto never takes it (docs/performance.md, "Why two sweeps")
    if (StreamingMdtw::float_sweep_built()) {
        // Auto takes the float wavefront, except for a while after a sample whose ties sent many
        // joints to the exact sweep: every double sample lies in such a pause, and each pause
        // followed at least one fallback.
        CHECK(counts.wavefront_float >= 100);
        CHECK(counts.lockstep + counts.wavefront == counts.float_paused_samples);
        CHECK(counts.float_paused_samples <= counts.float_pauses * StreamingMdtw::float_pause_max_samples());
        CHECK(counts.float_pauses <= counts.float_fallbacks);
    } else {
        CHECK(counts.wavefront >= 100);
        CHECK(counts.float_paused_samples == 0u);
    }
    // ... and pruned: the sweeps computed a fraction of the full matrices.
    INFO("cells " << counts.cells << " of " << counts.full_cells);
    CHECK(counts.cells * 2 < counts.full_cells);
}

TEST_CASE("each sweep alone returns exactly the published mDTW", "[streaming]") {
    const Scenario scenarios[] = {
        {Shape::Smooth, 6, 16, 400, 150, 1.0, 0.02, true},
        {Shape::Periodic, 5, 32, 1200, 120, 6.0, 0.02, true},
        {Shape::Quantised, 7, 24, 500, 100, 2.0, 0.0, true},
        {Shape::Plateaus, 6, 40, 700, 100, 3.0, 0.01, true},
        {Shape::Smooth, 1, 2, 100, 200, 1.0, 0.05, true},
        {Shape::Periodic, 9, 20, 300, 100, 4.0, 0.01, false},  // two lane groups in the lockstep sweep
        {Shape::Smooth, 3, 6, 1, 40, 1.0, 0.05, true},          // references shorter than a vector
        {Shape::Quantised, 2, 4, 5, 40, 1.0, 0.0, true},
        {Shape::Periodic, 4, 9, 9, 40, 2.0, 0.01, true},
        {Shape::Plateaus, 2, 12, 70, 40, 1.0, 0.0, true},     // one value-range chunk and a bit
    };
    for (const Kernel kernel : {Kernel::Lockstep, Kernel::Wavefront, Kernel::WavefrontFloat, Kernel::LockstepFloat}) {
        if (kernel == Kernel::WavefrontFloat && !StreamingMdtw::float_sweep_built()) continue;
        if (kernel == Kernel::LockstepFloat && !StreamingMdtw::float_lockstep_built()) continue;
        Counts counts;
        std::uint64_t seed = 2000;
        for (const auto& sc : scenarios) run(sc, seed++, counts, kernel);
        INFO(static_cast<int>(kernel) << ": windows " << counts.windows << ", float fallbacks " << counts.float_fallbacks);
        CHECK(counts.windows == 150 * 6 + 120 * 5 + 100 * 7 + 100 * 6 + 200 + 100 * 9 + 40 * (3 + 2 + 4 + 2));
        CHECK(samples_of(counts, kernel) == 150 + 120 + 100 + 100 + 200 + 100 + 4 * 40);
        if (kernel == Kernel::WavefrontFloat || kernel == Kernel::LockstepFloat) {
            // The float sweep settles most joints itself; the exact sweep takes the rest.
            CHECK(counts.float_fallbacks * 10 < counts.windows);
        }
    }
}

TEST_CASE("the coarse rest bound on the first row keeps every answer exact and prunes collision windows", "[streaming]") {
    if (!StreamingMdtw::float_sweep_built()) return;  // the bound belongs to the float sweep
    // Collisions: windows with no cheap match anywhere, whose sweeps compute most of their
    // matrices until the bound drops the first-row cells that cannot afford the impact later on.
    const Scenario scenarios[] = {
        {Shape::Periodic, 6, 32, 2000, 400, 5.0, 0.01, true},
        {Shape::Smooth, 4, 48, 3000, 300, 1.0, 0.02, true},
        {Shape::Plateaus, 3, 24, 1500, 300, 4.0, 0.01, true},
        {Shape::Quantised, 5, 16, 800, 300, 2.0, 0.0, true},
    };
    Counts with, without;
    std::uint64_t seed = 4000;
    for (const auto& sc : scenarios) {
        run(sc, seed, with, Kernel::Auto, true);  // every window compared with the published mDTW
        run(sc, seed++, without, Kernel::Auto, false);
    }
    INFO("joint sweeps with the bound " << with.rest_bound_sweeps << ", its recursions " << with.rest_bound_recursions
                                        << " (at most " << with.most_recursions << " in a sample); cells " << with.cells
                                        << " with it, " << without.cells << " without");
    CHECK(without.rest_bound_sweeps == 0u);
    CHECK(without.rest_bound_recursions == 0u);
    CHECK(with.rest_bound_sweeps >= 100);
    // A recursion serves a joint's next 8 sweeps, and the joints take their turns at different
    // samples: no sample of these streams (3-6 joints) sweeps more than one at a joint's turn and
    // one off it (a joint that comes back to the bound, or the first sweeps after a pause).
    CHECK(with.rest_bound_recursions * 6 <= with.rest_bound_sweeps);
    CHECK(with.most_recursions <= 2u);
    CHECK(with.windows == without.windows);
    CHECK(with.cells * 10 < without.cells * 9);  // at least 10 % fewer cells over the same windows
}

TEST_CASE("the float sweep settles ends that tie in several identical cycles without the exact sweep", "[streaming]") {
    if (!StreamingMdtw::float_sweep_built()) return;  // nothing to check: the build has no float sweep
    // A reference of 5 bit-identical cycles: every window matches each cycle equally well, so its
    // candidate ends lie a cycle (150 samples, wider than step 3's 4m = 64 columns) apart. Each
    // cycle's ends form their own cluster, step 3 runs over each and the earliest optimum wins.
    const std::size_t m = 16, cycle = 150, cycles = 5, joints = 3;
    std::mt19937_64 rng(31);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::normal_distribution<double> gauss(0.0, 1.0);
    std::vector<std::vector<double>> refs(joints, std::vector<double>(cycle * cycles));
    for (std::size_t k = 0; k < joints; ++k) {
        const double p = 6.0 * u(rng), amp = 2.0 + 3.0 * u(rng);
        for (std::size_t j = 0; j < cycle * cycles; ++j) {
            refs[k][j] = amp * std::sin(2 * M_PI * static_cast<double>(j % cycle) / static_cast<double>(cycle) + p);
        }
    }
    StreamingMdtw streaming(m, refs);
    streaming.set_kernel(StreamingMdtw::SweepKernel::WavefrontFloat);
    PublishedMdtw oracle(m, cycle * cycles);
    std::vector<std::vector<double>> fifo(joints);
    std::vector<double> windows(joints * m);
    double x = 0;
    std::size_t windows_checked = 0, in_first_cycle = 0;
    for (std::size_t s = 0; s < 400; ++s) {
        x += 0.8 + 0.4 * u(rng);
        for (std::size_t k = 0; k < joints; ++k) {
            const double value = refs[k][static_cast<std::size_t>(x) % cycle] + 0.05 * gauss(rng);
            auto& f = fifo[k];
            if (f.empty()) f.assign(m, value);
            f.erase(f.begin());
            f.push_back(value);
            std::copy(f.begin(), f.end(), windows.begin() + static_cast<std::ptrdiff_t>(k * m));
        }
        streaming.match(windows);
        for (std::size_t k = 0; k < joints; ++k) {
            const auto& expected = oracle.match(fifo[k], refs[k]);
            const auto& got = streaming.result(k);
            INFO("sample " << s << " joint " << k);
            REQUIRE(got.cost == expected.cost);
            REQUIRE(got.end == expected.end);
            REQUIRE(got.start == expected.start);
            REQUIRE(got.path == expected.path);
            in_first_cycle += expected.end < cycle;  // the earliest of the tied cycles
            ++windows_checked;
        }
    }
    CHECK(windows_checked == 1200);
    CHECK(in_first_cycle > 1000);
    // Before the clusters, every one of these joints went to the exact sweep.
    CHECK(streaming.float_fallbacks() == 0);
}

TEST_CASE("Auto pauses the float sweep after ties, twice as long each time a retry ties again", "[streaming]") {
    if (!StreamingMdtw::float_sweep_built()) return;  // nothing to check: the build has no float sweep
    // A flat reference and a flat window, as a robot at rest with quantised readings: every end
    // ties exactly, more than the float sweep can settle, so every float try sends every joint to
    // the exact sweep. Auto then sweeps in doubles for 32 samples, and after each failed retry for
    // twice as long, up to float_pause_max_samples().
    const std::size_t m = 8, n = 120, joints = 4;
    std::vector<std::vector<double>> refs(joints, std::vector<double>(n, 1.5));
    StreamingMdtw streaming(m, refs);
    PublishedMdtw oracle(m, n);
    const std::vector<double> window(m, 1.5), windows(joints * m, 1.5);
    // The model: the first sample has no bound (swept exactly, not a tie); then float tries and pauses.
    std::size_t pause = 0, next = StreamingMdtw::float_pause_samples();
    std::uint64_t pauses = 0, paused = 0;
    const std::size_t samples = 1 + 32 + 64 + 128 + 256 + 512 + 1024 + 1024 + 8;
    for (std::size_t s = 0; s < samples; ++s) {
        streaming.match(windows);
        const bool tried = s > 0 && pause == 0;
        if (tried) {
            ++pauses;
            pause = next;
            next = std::min(2 * next, StreamingMdtw::float_pause_max_samples());
        } else if (s > 0) {
            --pause;
            ++paused;
        }
        INFO("sample " << s);
        const bool float_sweep = streaming.last_kernel() == StreamingMdtw::SweepKernel::WavefrontFloat;
        REQUIRE(float_sweep == (s == 0 || tried));
        REQUIRE(streaming.float_pauses() == pauses);
        REQUIRE(streaming.float_paused_samples() == paused);
        const auto& expected = oracle.match(window, refs[0]);
        for (std::size_t k = 0; k < joints; ++k) {
            REQUIRE(streaming.result(k).cost == expected.cost);
            REQUIRE(streaming.result(k).end == expected.end);
            REQUIRE(streaming.result(k).start == expected.start);
        }
    }
    CHECK(pauses == 8);  // 32, 64, 128, 256, 512, 1024, 1024, and the last try's
    CHECK(streaming.float_fallbacks() == pauses * joints);
}

TEST_CASE("the streaming matcher stays exact on windows that keep most cells alive", "[streaming]") {
    // Flat, quantised windows over a plateaued reference: the optimum is ambiguous almost
    // everywhere, the bound prunes little, and every first sample of a stream runs unbounded.
    Counts counts;
    run({Shape::Plateaus, 4, 10, 200, 60, 3.0, 0.0, true}, 77, counts);
    run({Shape::Quantised, 4, 10, 200, 60, 1.0, 0.0, true}, 78, counts);
    CHECK(counts.windows == 480);
    INFO("cells " << counts.cells << " of " << counts.full_cells);
    CHECK(counts.cells > 0);
}

TEST_CASE("exists_within answers whether a match with cost <= tau exists, exactly", "[streaming]") {
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const std::size_t m = 24, n = 800, joints = 6;
    std::vector<std::vector<double>> refs(joints, std::vector<double>(n));
    for (std::size_t k = 0; k < joints; ++k) {
        const double kd = static_cast<double>(k);
        for (std::size_t j = 0; j < n; ++j) refs[k][j] = std::sin(0.02 * static_cast<double>(j) * (1 + 0.1 * kd)) * (3 + kd);
    }
    StreamingMdtw streaming(m, refs);
    PublishedMdtw oracle(m, n);
    std::vector<double> windows(joints * m), tau(joints);
    bool answers[joints];
    std::size_t yes = 0, no = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const std::size_t at = 100 + static_cast<std::size_t>(u(rng) * 600);
        for (std::size_t k = 0; k < joints; ++k) {
            for (std::size_t i = 0; i < m; ++i) windows[k * m + i] = refs[k][at + i] + 0.3 * (u(rng) - 0.5) + (trial % 5 == 0 ? 2.0 : 0.0);
        }
        if (trial % 3 == 0) streaming.match(windows);  // sometimes with a tracked previous match
        if (trial % 7 == 0) streaming.reset();
        std::vector<double> exact(joints);
        for (std::size_t k = 0; k < joints; ++k) {
            exact[k] = oracle.match(std::span<const double>(windows).subspan(k * m, m), refs[k]).cost;
            tau[k] = exact[k] * (0.5 + u(rng));
        }
        streaming.exists_within(windows, tau, std::span<bool>(answers, joints));
        for (std::size_t k = 0; k < joints; ++k) {
            INFO("trial " << trial << " joint " << k << " cost " << exact[k] << " tau " << tau[k]);
            REQUIRE(answers[k] == (exact[k] <= tau[k]));
            (answers[k] ? yes : no) += 1;
        }
    }
    CHECK(yes > 100);
    CHECK(no > 100);
}

TEST_CASE("the streaming matcher refuses inconsistent input with a clear message", "[streaming]") {
    const std::vector<std::vector<double>> refs{{1, 2, 3}, {1, 2}};
    CHECK_THROWS_WITH(StreamingMdtw(4, refs), Catch::Contains("reference 2 has 2 samples; the first has 3"));
    const std::vector<std::vector<double>> ok{{1, 2, 3}};
    CHECK_THROWS_WITH(StreamingMdtw(1, ok), Catch::Contains("window must be >= 2"));
    StreamingMdtw s(2, ok);
    const std::vector<double> three{1, 2, 3};
    CHECK_THROWS_WITH(s.match(three), Catch::Contains("3 window values given; expected 1 joints x 2 samples"));
}

TEST_CASE("the float sweep stays exact where float roundings are as large as the differences", "[streaming]") {
    // Values near 2,000 on a 0.001 grid: a float holds them only to about 1e-4, the size of the
    // smallest differences, so many ends and predecessors lie within the error bound of each other.
    const Scenario scenarios[] = {
        {Shape::Smooth, 6, 32, 800, 200, 1.0, 0.01, true, 2000.0},
        {Shape::Periodic, 4, 24, 900, 200, 5.0, 0.0, true, -2000.0},
        {Shape::Quantised, 3, 16, 400, 200, 2.0, 0.0, false, 2000.0},
    };
    for (const Kernel kernel : {Kernel::WavefrontFloat, Kernel::LockstepFloat}) {
        Counts counts;
        std::uint64_t seed = 3000;
        for (const auto& sc : scenarios) run(sc, seed++, counts, kernel);
        INFO(static_cast<int>(kernel) << ": windows " << counts.windows << ", float fallbacks " << counts.float_fallbacks);
        CHECK(counts.windows == 200 * 6 + 200 * 4 + 200 * 3);
        // Where a float sweep is not built, forcing it sweeps in doubles; the results above were
        // checked against the oracle either way.
        const bool built = kernel == Kernel::WavefrontFloat ? StreamingMdtw::float_sweep_built()
                                                            : StreamingMdtw::float_lockstep_built();
        CHECK(samples_of(counts, kernel) == (built ? 600u : 0u));
    }
    // Float values: every one within E of the double one (paths over up to 4m = 128 columns, as
    // step 3 takes them), and E is small against the optimum here (several units).
    const double e = StreamingMdtw::float_error_bound(32, 128, 2010.0, 2010.0, 5.0);
    CHECK(e > 0.0);
    CHECK(e < 0.2);
}

TEST_CASE("the float error bound covers every local cost of a wide path, not one per row", "[streaming]") {
    // Rule (11) adds a local cost for a horizontal step too: a path over w columns of m rows adds up
    // to m + w - 1 of them (and the first row two), each with its own rounding. The worst case: the
    // window's value rounds down to float and the reference's up, by nearly half a float ulp each
    // (just above 2,048, where an ulp is the largest relative to the value), so every local cost's
    // float error has the same sign. The path: row 1 across all w columns, then down the last.
    const std::size_t m = 32, w = 128;
    const double ulp = std::ldexp(1.0, 11 - 23);  // float spacing in [2048, 4096)
    const double a = 2048.0 + 0.49 * ulp, b = 2048.25 + 0.51 * ulp;
    REQUIRE(static_cast<double>(static_cast<float>(a)) < a);
    REQUIRE(static_cast<double>(static_cast<float>(b)) > b);
    const float af = static_cast<float>(a), bf = static_cast<float>(b);
    double exact = 0.0;
    float in_float = 0.0f;
    const std::size_t cells = m + w - 1;
    for (std::size_t k = 0; k <= cells; ++k) {  // cells + 1 local costs: rule (8) adds two in row 1
        exact += std::abs(a - b);
        in_float = in_float + std::abs(af - bf);
    }
    const double error = std::abs(static_cast<double>(in_float) - exact);
    INFO("float " << in_float << ", double " << exact << ", error " << error);
    CHECK(error <= StreamingMdtw::float_error_bound(m, w, a, b, exact));
    // A bound with one local cost per row (paths of width 1) would not hold for this path.
    CHECK(error > StreamingMdtw::float_error_bound(m, 1, a, b, exact));
}
