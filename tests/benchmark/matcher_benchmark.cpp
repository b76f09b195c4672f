// Per-sample matching time of the published mDTW and the streaming matcher, measured in the same
// run on the same streams: m in {32, 64, 128}, n in {1,000, 10,000, 20,000}, 6 joints; smooth,
// periodic (several near-identical cycles: the optimum jumps between them) and collision streams.
// Every published result is compared with the streaming one: cost bit for bit, start and end
// (mismatches must be 0). The streaming matcher runs over the whole stream first, the published
// algorithm afterwards on the kept windows of the first samples.
//
//   warpguard-bench-matcher [--quick] [--twice] [--json FILE] [--m M] [--n N]
//                           [--kernel auto|lockstep|wavefront|float|lockstep-float] [--no-rest-bound]
//                           [--trace DIR]
//   (--m/--n: only that size; --kernel: force one of the streaming matcher's sweeps; `float` is the
//   wavefront in float lanes, `lockstep-float` the lockstep sweep in float lanes, which `auto` takes
//   where it would take the double sweep, when built;
//   --no-rest-bound: the float wavefront without its coarse rest bound on the first row, to measure
//   what the bound does;
//   --twice: time the streaming pass a second time with a fresh matcher and report how much of the
//   p99 the same samples repeat;
//   --trace DIR: per configuration a CSV in DIR (an existing folder), one line per measured sample
//   of the first streaming pass: its time in µs, the cells the sweeps computed, the joints that took
//   the rest bound, the recursions swept for it, the sweep (StreamingMdtw::SweepKernel as a number)
//   and the impact it holds)
// Before and after the streams it reads the clock in a loop for a second and reports how often the
// machine paused the program (gaps over 2 µs between two readings): on a virtual machine the host
// takes the CPU away now and then, and a sample that holds such a pause is that much slower, which
// the p99 shows whatever the matcher does.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warpguard/mdtw.hpp"
#include "warpguard/streaming_mdtw.hpp"

using namespace warpguard;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kJoints = 6;

enum class Kind { Smooth, Periodic, Collision, Standstill };
const char* name(Kind k) {
    switch (k) {
        case Kind::Smooth: return "smooth";
        case Kind::Periodic: return "periodic";
        case Kind::Collision: return "collision";
        case Kind::Standstill: return "standstill";
    }
    return "?";
}

// Standstill: a pick-and-place-like cycle of eight equal slots, moves (even slots, the motion's
// phase advancing by a quarter cycle with a smooth start and stop) and waits (odd slots, the phase
// held). Position in the cycle in slots [0, 8) -> the motion's phase in cycles [0, 1).
double slot_phase(double slots) {
    const double slot = std::floor(slots);
    const double r = slots - slot;
    const double moves_done = std::floor((slot + 1.0) / 2.0);  // moves completed before this slot
    if (static_cast<int>(slot) % 2 == 1) return moves_done / 4.0;  // waiting
    return (moves_done + r * r * (3.0 - 2.0 * r)) / 4.0;          // moving (smoothstep)
}

// A random Fourier series per joint: robot-like torque over a task cycle.
struct Motion {
    std::vector<std::vector<double>> a, b;  // [joint][harmonic]
    Motion(std::mt19937_64& rng) : a(kJoints), b(kJoints) {
        std::normal_distribution<double> g(0.0, 1.0);
        for (std::size_t k = 0; k < kJoints; ++k) {
            for (int h = 1; h <= 8; ++h) {
                a[k].push_back(g(rng) * 10.0 / h);
                b[k].push_back(g(rng) * 10.0 / h);
            }
        }
    }
    double value(std::size_t joint, double phase) const {  // phase in cycles
        double v = 0;
        for (std::size_t h = 0; h < a[joint].size(); ++h) {
            const double w = 2 * M_PI * static_cast<double>(h + 1) * phase;
            v += a[joint][h] * std::cos(w) + b[joint][h] * std::sin(w);
        }
        return v;
    }
};

struct Stream {
    std::vector<std::vector<double>> reference;  // [joint][n]
    std::vector<std::vector<double>> samples;    // [sample][joint]
    std::vector<double> impact;                  // [sample]: the impact added to one joint (collision)
};

Stream make_stream(Kind kind, std::size_t n, std::size_t count, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0.0, 0.05);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const Motion motion(rng);
    // Smooth: one long motion (0.37 of a slow period over the reference, so nothing repeats).
    // Periodic and collision: 5 near-identical cycles in the reference. Standstill: 2 cycles with
    // waits, torques quantised to 0.5 units like a controller's coarse readings: at rest a flat
    // window matches every flat stretch of the reference about equally well.
    const double cycles = kind == Kind::Smooth ? 0.37 : kind == Kind::Standstill ? 2.0 : 5.0;
    const bool standstill = kind == Kind::Standstill;
    auto reading = [&](std::size_t joint, double phase_or_slots) {
        if (!standstill) return motion.value(joint, phase_or_slots) + noise(rng);
        const double cycle = std::floor(phase_or_slots / 8.0);
        const double phase = cycle + slot_phase(phase_or_slots - 8.0 * cycle);
        return std::round((motion.value(joint, phase) + noise(rng)) * 2.0) / 2.0;
    };
    // The reference's clock: phase in cycles, or for standstill position in slots.
    const double span = standstill ? 8.0 * cycles : cycles;
    Stream s;
    s.reference.assign(kJoints, std::vector<double>(n));
    for (std::size_t j = 0; j < n; ++j) {
        const double x = span * static_cast<double>(j) / static_cast<double>(n);
        for (std::size_t k = 0; k < kJoints; ++k) s.reference[k][j] = reading(k, x);
    }
    // The measurement: same motion, irregular sampling at about the reference's rate; for
    // standstill every wait lasts 0.6-1.4 times the reference's.
    double x = 0.05 * span;
    const double step = span / static_cast<double>(n);
    double bump = 0;
    std::size_t bump_joint = 0;
    double wait_scale = 1.0;
    long wait_slot = -1;
    for (std::size_t i = 0; i < count; ++i) {
        double dx = step * (0.75 + 0.5 * u(rng));
        if (standstill) {
            const long slot = static_cast<long>(std::floor(x));
            if (slot % 2 == 1 && slot != wait_slot) {
                wait_slot = slot;
                wait_scale = 0.6 + 0.8 * u(rng);
            }
            if (slot % 2 == 1) dx /= wait_scale;
        }
        x += dx;
        if (kind == Kind::Smooth && x > 0.95 * span) x = 0.05 * span;
        if (kind == Kind::Collision && u(rng) < 1.0 / 250.0) {
            bump = 15.0 + 30.0 * u(rng);
            bump_joint = static_cast<std::size_t>(u(rng) * kJoints);
        }
        bump *= 0.85;
        std::vector<double> row(kJoints);
        for (std::size_t k = 0; k < kJoints; ++k) row[k] = reading(k, std::fmod(x, span)) + (k == bump_joint ? bump : 0.0);
        s.samples.push_back(row);
        s.impact.push_back(bump);
    }
    return s;
}

struct Timing {
    double mean_us = 0, p99_us = 0, max_us = 0;
    std::size_t samples = 0;
};

// The machine's pauses: the clock read in a loop for `seconds`; every gap over 2 µs between two
// readings is time the program did not run.
struct Pauses {
    double per_second = 0, median_us = 0, p90_us = 0, max_us = 0, share = 0;
};
Pauses measure_pauses(double seconds) {
    std::vector<double> gaps;
    const auto start = Clock::now();
    auto previous = start;
    while (std::chrono::duration<double>(previous - start).count() < seconds) {
        const auto now = Clock::now();
        const double us = std::chrono::duration<double, std::micro>(now - previous).count();
        if (us > 2.0) gaps.push_back(us);
        previous = now;
    }
    Pauses p;
    const double elapsed = std::chrono::duration<double>(previous - start).count();
    p.per_second = static_cast<double>(gaps.size()) / elapsed;
    if (gaps.empty()) return p;
    std::sort(gaps.begin(), gaps.end());
    double total = 0;
    for (const double g : gaps) total += g;
    p.median_us = gaps[gaps.size() / 2];
    p.p90_us = gaps[gaps.size() * 9 / 10];
    p.max_us = gaps.back();
    p.share = total * 1e-6 / elapsed;
    return p;
}

void print_pauses(const char* when, const Pauses& p) {
    std::printf("machine pauses %s (1 s of reading the clock): %.0f per second over 2 µs, median %.1f µs, p90 %.1f µs, "
                "max %.1f µs, %.1f %% of the time\n",
                when, p.per_second, p.median_us, p.p90_us, p.max_us, 100.0 * p.share);
}

nlohmann::json pauses_json(const Pauses& p) {
    return {{"per_second", p.per_second}, {"median_us", p.median_us}, {"p90_us", p.p90_us}, {"max_us", p.max_us}, {"share", p.share}};
}

Timing summarise(std::vector<double> us) {
    Timing t;
    t.samples = us.size();
    if (us.empty()) return t;
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double v : us) sum += v;
    t.mean_us = sum / static_cast<double>(us.size());
    t.p99_us = us[std::min(us.size() - 1, static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(us.size()))) - 1)];
    t.max_us = us.back();
    return t;
}

struct Row {
    Kind kind;
    std::size_t m, n;
    Timing published, streaming;
    std::size_t compared = 0, mismatches = 0;
    std::uint64_t cells = 0;  // cells the streaming sweeps computed
    std::size_t lockstep_samples = 0;  // samples the automatic choice swept with the lockstep sweep
    std::size_t float_samples = 0;     // ... with the float wavefront
    std::size_t float_lockstep_samples = 0;  // ... with the float lockstep sweep
    std::uint64_t float_fallbacks = 0;  // joints the float wavefront handed to the exact sweep
    std::uint64_t rest_bound_sweeps = 0;  // joint sweeps that took the coarse rest bound
    // --twice: the second streaming pass, the p99 of the faster of a sample's two timings, and how
    // many of the slowest 1 % of the first pass's samples are among the second pass's slowest 1 %.
    Timing again;
    double faster_p99_us = 0;
    std::size_t slowest_count = 0, slowest_shared = 0;
};

bool g_rest_bound = true;  // --no-rest-bound clears it
std::string g_trace_dir;    // --trace DIR: one CSV per configuration, a line per measured sample

Row run(Kind kind, std::size_t m, std::size_t n, bool quick, StreamingMdtw::SweepKernel kernel, bool twice) {
    const std::size_t stream_samples = quick ? 400 : 2000;
    // Enough published samples for a p99, within about 1.5 s of matching per configuration.
    const double published_cells = static_cast<double>(m * n * kJoints);
    const std::size_t published_samples =
        std::clamp<std::size_t>(static_cast<std::size_t>(1.5e9 / 1.2 / published_cells), 100, quick ? 100 : 400);
    const Stream s = make_stream(kind, n, stream_samples + m, 1000 + m * 7 + n + static_cast<std::size_t>(kind));

    PublishedMdtw published(m, n);
    std::vector<double> t_pub;
    Row row{};
    row.kind = kind;
    row.m = m;
    row.n = n;
    // The streaming pass over the whole stream, as the daemon runs it. The windows of the first
    // measured samples and the streaming results for them are kept for the published pass after
    // it: run between the streaming samples, the published algorithm's matrices (m x n doubles
    // per joint) would evict the matcher's data from the caches, which nothing in the daemon does
    // (docs/performance.md measured what that costs).
    std::vector<std::vector<double>> kept;
    struct Kept {
        double cost;
        std::size_t start, end;
    };
    std::vector<Kept> kept_results;
    // One streaming pass with a fresh matcher: per measured sample its time in µs; `keep` keeps
    // the windows and results for the published pass.
    const auto stream_pass = [&](StreamingMdtw& streaming, bool keep) {
        std::vector<double> times, windows(kJoints * m);
        std::vector<std::vector<double>> fifo(kJoints);
        std::ofstream trace;
        if (keep && !g_trace_dir.empty()) {
            trace.open(g_trace_dir + "/" + name(kind) + "-m" + std::to_string(m) + "-n" + std::to_string(n) + ".csv");
            trace << "sample,us,cells,rest_bound_sweeps,rest_bound_recursions,kernel,impact\n";
        }
        for (std::size_t i = 0; i < s.samples.size(); ++i) {
            for (std::size_t k = 0; k < kJoints; ++k) {
                auto& f = fifo[k];
                if (f.empty()) f.assign(m, s.samples[i][k]);
                f.erase(f.begin());
                f.push_back(s.samples[i][k]);
                std::copy(f.begin(), f.end(), windows.begin() + static_cast<std::ptrdiff_t>(k * m));
            }
            const bool tracing = trace.is_open() && i >= m;
            const std::uint64_t cells0 = tracing ? streaming.cells() : 0;
            const std::uint64_t bound0 = tracing ? streaming.rest_bound_sweeps() : 0;
            const std::uint64_t recursions0 = tracing ? streaming.rest_bound_recursions() : 0;
            const auto t0 = Clock::now();
            streaming.match(windows);
            const auto t1 = Clock::now();
            if (tracing) {
                trace << i << ',' << std::chrono::duration<double, std::micro>(t1 - t0).count() << ','
                      << streaming.cells() - cells0 << ',' << streaming.rest_bound_sweeps() - bound0 << ','
                      << streaming.rest_bound_recursions() - recursions0 << ','
                      << static_cast<int>(streaming.last_kernel()) << ',' << s.impact[i] << '\n';
            }
            if (keep && streaming.last_kernel() == StreamingMdtw::SweepKernel::Lockstep) ++row.lockstep_samples;
            if (keep && streaming.last_kernel() == StreamingMdtw::SweepKernel::WavefrontFloat) ++row.float_samples;
            if (keep && streaming.last_kernel() == StreamingMdtw::SweepKernel::LockstepFloat) ++row.float_lockstep_samples;
            if (i < m) continue;  // the window has not filled with real samples yet
            times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
            if (keep && kept.size() < published_samples) {
                kept.push_back(windows);
                for (std::size_t k = 0; k < kJoints; ++k) {
                    const MatchResult& r = streaming.result(k);
                    kept_results.push_back({r.cost, r.start, r.end});
                }
            }
        }
        return times;
    };
    StreamingMdtw streaming(m, s.reference);
    streaming.set_kernel(kernel);
    streaming.set_rest_bound(g_rest_bound);
    const std::vector<double> t_stream = stream_pass(streaming, true);
    if (twice) {
        // The same stream again with a fresh matcher: the same windows and the same work, so what
        // differs between the two timings of a sample is the machine, not the window.
        StreamingMdtw again(m, s.reference);
        again.set_kernel(kernel);
        again.set_rest_bound(g_rest_bound);
        const std::vector<double> t_again = stream_pass(again, false);
        row.again = summarise(t_again);
        std::vector<double> faster(t_stream.size());
        for (std::size_t i = 0; i < faster.size(); ++i) faster[i] = std::min(t_stream[i], t_again[i]);
        row.faster_p99_us = summarise(faster).p99_us;
        row.slowest_count = std::max<std::size_t>(1, t_stream.size() / 100);
        const auto slowest = [&](const std::vector<double>& t) {
            std::vector<std::size_t> idx(t.size());
            for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
            std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(row.slowest_count), idx.end(),
                              [&](std::size_t a, std::size_t b) { return t[a] > t[b]; });
            idx.resize(row.slowest_count);
            std::sort(idx.begin(), idx.end());
            return idx;
        };
        const auto a = slowest(t_stream), b = slowest(t_again);
        std::vector<std::size_t> common;
        std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
        row.slowest_shared = common.size();
    }
    // The published pass over the kept windows, compared result for result.
    for (std::size_t w = 0; w < kept.size(); ++w) {
        double cost[kJoints];
        std::size_t start[kJoints], end[kJoints];
        const auto p0 = Clock::now();
        for (std::size_t k = 0; k < kJoints; ++k) {
            const auto& r = published.match(std::span<const double>(kept[w]).subspan(k * m, m), s.reference[k]);
            cost[k] = r.cost;
            start[k] = r.start;
            end[k] = r.end;
        }
        const auto p1 = Clock::now();
        t_pub.push_back(std::chrono::duration<double, std::micro>(p1 - p0).count());
        for (std::size_t k = 0; k < kJoints; ++k) {
            const Kept& got = kept_results[w * kJoints + k];
            ++row.compared;
            if (cost[k] != got.cost || start[k] != got.start || end[k] != got.end) ++row.mismatches;
        }
    }
    row.published = summarise(t_pub);
    row.streaming = summarise(t_stream);
    row.cells = streaming.cells();
    row.float_fallbacks = streaming.float_fallbacks();
    row.rest_bound_sweeps = streaming.rest_bound_sweeps();
    return row;
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false, twice = false;
    std::string json_path;
    std::size_t only_m = 0, only_n = 0;
    auto kernel = StreamingMdtw::SweepKernel::Auto;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (std::strcmp(argv[i], "--twice") == 0) {
            twice = true;
        } else if (std::strcmp(argv[i], "--no-rest-bound") == 0) {
            g_rest_bound = false;
        } else if (std::strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
            g_trace_dir = argv[++i];
            if (!std::filesystem::is_directory(g_trace_dir)) {
                std::fprintf(stderr, "--trace needs an existing folder, got '%s'\n", g_trace_dir.c_str());
                return 2;
            }
        } else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            json_path = argv[++i];
        } else if ((std::strcmp(argv[i], "--m") == 0 || std::strcmp(argv[i], "--n") == 0) && i + 1 < argc) {
            const bool is_m = argv[i][2] == 'm';
            const long v = std::strtol(argv[++i], nullptr, 10);
            if (v <= 0) {
                std::fprintf(stderr, "%s must be a positive size, got '%s'\n", is_m ? "--m" : "--n", argv[i]);
                return 2;
            }
            (is_m ? only_m : only_n) = static_cast<std::size_t>(v);
        } else if (std::strcmp(argv[i], "--kernel") == 0 && i + 1 < argc) {
            const std::string k = argv[++i];
            if (k == "auto") {
                kernel = StreamingMdtw::SweepKernel::Auto;
            } else if (k == "lockstep") {
                kernel = StreamingMdtw::SweepKernel::Lockstep;
            } else if (k == "wavefront") {
                kernel = StreamingMdtw::SweepKernel::Wavefront;
            } else if (k == "float") {
                kernel = StreamingMdtw::SweepKernel::WavefrontFloat;
            } else if (k == "lockstep-float") {
                kernel = StreamingMdtw::SweepKernel::LockstepFloat;
            } else {
                std::fprintf(stderr, "--kernel must be auto, lockstep, wavefront, float or lockstep-float, got '%s'\n", k.c_str());
                return 2;
            }
        } else {
            std::fprintf(stderr, "usage: %s [--quick] [--twice] [--json FILE] [--m M] [--n N] [--kernel auto|lockstep|wavefront|float|lockstep-float] [--no-rest-bound] [--trace DIR]\n",
                         argv[0]);
            return 2;
        }
    }
    const Pauses before = measure_pauses(1.0);
    print_pauses("before", before);
    std::printf("\n");
    std::printf("| stream | m | n | published mean µs | published p99 µs | streaming mean µs | streaming p99 µs | "
                "speed-up (mean) | speed-up (p99) | compared | mismatches |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    nlohmann::json rows = nlohmann::json::array();
    std::size_t total_mismatches = 0;
    for (Kind kind : {Kind::Smooth, Kind::Periodic, Kind::Collision, Kind::Standstill}) {
        for (std::size_t m : {32, 64, 128}) {
            for (std::size_t n : {1000, 10000, 20000}) {
                if ((only_m != 0 && m != only_m) || (only_n != 0 && n != only_n)) continue;
                const Row r = run(kind, m, n, quick, kernel, twice);
                total_mismatches += r.mismatches;
                std::printf("| %s | %zu | %zu | %.1f | %.1f | %.1f | %.1f | %.0fx | %.0fx | %zu | %zu |\n", name(kind), m, n,
                            r.published.mean_us, r.published.p99_us, r.streaming.mean_us, r.streaming.p99_us,
                            r.published.mean_us / r.streaming.mean_us, r.published.p99_us / r.streaming.p99_us,
                            r.compared, r.mismatches);
                if (twice) {
                    std::printf("|   again | | | | | %.1f | %.1f | slowest 1 %% (%zu samples): %zu shared | faster of the two: p99 %.1f | | |\n",
                                r.again.mean_us, r.again.p99_us, r.slowest_count, r.slowest_shared, r.faster_p99_us);
                }
                std::fflush(stdout);
                rows.push_back({{"stream", name(kind)},
                                {"m", m},
                                {"n", n},
                                {"joints", kJoints},
                                {"published", {{"mean_us", r.published.mean_us}, {"p99_us", r.published.p99_us},
                                               {"max_us", r.published.max_us}, {"samples", r.published.samples}}},
                                {"streaming", {{"mean_us", r.streaming.mean_us}, {"p99_us", r.streaming.p99_us},
                                               {"max_us", r.streaming.max_us}, {"samples", r.streaming.samples}}},
                                {"compared", r.compared},
                                {"mismatches", r.mismatches},
                                {"streaming_cells_per_sample", static_cast<double>(r.cells) / static_cast<double>(r.streaming.samples + m)},
                                {"lockstep_samples", r.lockstep_samples},
                                {"float_samples", r.float_samples},
                                {"float_lockstep_samples", r.float_lockstep_samples},
                                {"float_fallbacks", r.float_fallbacks},
                                {"rest_bound_sweeps", r.rest_bound_sweeps}});
                if (twice) {
                    rows.back()["again"] = {{"mean_us", r.again.mean_us}, {"p99_us", r.again.p99_us}, {"max_us", r.again.max_us}};
                    rows.back()["faster_of_two_p99_us"] = r.faster_p99_us;
                    rows.back()["slowest_percent"] = {{"samples", r.slowest_count}, {"shared_with_again", r.slowest_shared}};
                }
            }
        }
    }
    std::printf("\n");
    const Pauses after = measure_pauses(1.0);
    print_pauses("after", after);
    if (!json_path.empty()) {
        std::ofstream(json_path) << nlohmann::json{{"rows", rows},
                                                   {"machine_pauses", {{"before", pauses_json(before)}, {"after", pauses_json(after)}}}}
                                        .dump(1)
                                 << '\n';
    }
    std::printf("\nmismatches against the published algorithm: %zu\n", total_mismatches);
    return total_mismatches == 0 ? 0 : 1;
}
