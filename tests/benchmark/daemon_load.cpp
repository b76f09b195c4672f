// warpguard-bench-daemon: N robots stream a recorded task to a running warpguardd at a fixed rate,
// each over its own TCP connection exactly as the URScript task does (handshake, one ASCII line per
// period, wait for the 4-byte reply), and the sample -> reply latency is measured on the robot side.
// Used by scripts/benchmark-daemon.sh; not a timed test.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "warpguard/recording_csv.hpp"
#include "reply_timing.hpp"
#include "wire_protocol.hpp"

using namespace warpguard;
using Clock = std::chrono::steady_clock;

namespace {
// Reads exactly n bytes; `arrival` gets the kernel's arrival time of the last of them.
bool read_exact(int fd, char* p, std::size_t n, double& arrival) {
    std::size_t have = 0;
    while (have < n) {
        const ssize_t r = protocol::receive_stamped(fd, p + have, n - have, 0, arrival);
        if (r <= 0) return false;
        have += static_cast<std::size_t>(r);
    }
    return true;
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Load benchmark of warpguardd: N robots at a fixed rate, sample -> reply latency"};
    int port = 7700, robots = 1;
    double seconds = 20, rate = 500;
    std::string recording, prefix = "load-", out;
    app.add_option("--port", port, "warpguardd's robot port")->required();
    app.add_option("--robots", robots, "Robots streaming at once")->capture_default_str();
    app.add_option("--seconds", seconds, "Duration")->capture_default_str();
    app.add_option("--rate", rate, "Samples per second per robot")->capture_default_str();
    app.add_option("--recording", recording, "Recording replayed by every robot (each from another offset)")->required();
    app.add_option("--prefix", prefix, "Robot ids are PREFIX1..PREFIXN")->capture_default_str();
    app.add_option("--out", out, "JSON result");
    CLI11_PARSE(app, argc, argv);

    const Recording rec = read_recording(recording);
    std::vector<std::vector<double>> latencies(static_cast<std::size_t>(robots)), woken(static_cast<std::size_t>(robots));
    std::vector<std::size_t> stops(static_cast<std::size_t>(robots), 0), errors(static_cast<std::size_t>(robots), 0), late(static_cast<std::size_t>(robots), 0);
    std::vector<std::size_t> stamped(static_cast<std::size_t>(robots), 0);
    std::vector<double> send_stall(static_cast<std::size_t>(robots), 0.0);  // longest time from calling send() to the transmit stamp
    std::atomic<int> ready{0};
    const auto start = Clock::now() + std::chrono::milliseconds(500);
    std::vector<std::thread> threads;
    for (int r = 0; r < robots; ++r) {
        threads.emplace_back([&, r] {
            const auto k = static_cast<std::size_t>(r);
            const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in addr{};
            addr.sin_family = AF_INET;
            addr.sin_port = htons(static_cast<std::uint16_t>(port));
            ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
            if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
                ++errors[k];
                return;
            }
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            protocol::enable_arrival_times(fd);
            protocol::Handshake h;
            h.robot_id = prefix + std::to_string(r + 1);
            h.joints = rec.joints();
            h.unit = rec.info().unit;
            h.signal = rec.info().signal;
            h.period = 1.0 / rate;
            h.timeout = 0.020;
            const std::string hello = protocol::encode_handshake(h);
            char reply[4];
            double arrival = 0;
            if (::send(fd, hello.data(), hello.size(), 0) != static_cast<ssize_t>(hello.size()) || !read_exact(fd, reply, 4, arrival)) {
                ++errors[k];
                ::close(fd);
                return;
            }
            ++ready;
            // From here on every sample's latency starts at the kernel's transmit time of its last
            // byte (a controller sends in real time; this client can be descheduled inside send()).
            const bool stamps = protocol::enable_send_times(fd);
            std::uint32_t sent_bytes = 0;
            const std::size_t total = static_cast<std::size_t>(seconds * rate);
            latencies[k].reserve(total);
            woken[k].reserve(total);
            const std::size_t offset = (k * 997) % rec.size();
            std::vector<double> tau(rec.joints()), q(rec.joints());
            const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate));
            // Robots start spread over one period, as independent controllers would.
            auto due = start + period * r / std::max(1, robots);
            for (std::size_t i = 0; i < total; ++i) {
                std::this_thread::sleep_until(due);
                if (Clock::now() - due > period) ++late[k];  // the client itself fell behind
                due += period;
                const std::size_t row = (offset + i) % rec.size();
                protocol::SampleFrame f;
                f.seq = static_cast<std::int64_t>(i);
                f.cycle = rec.cycle[row];
                f.t = static_cast<double>(i) / rate;
                f.joints = rec.joints();
                for (std::size_t j = 0; j < f.joints; ++j) {
                    f.signal[j] = rec.tau[j][row];
                    f.angle[j] = rec.q[j][row];
                }
                const std::string line = protocol::encode_sample_ascii(f, protocol::AngleUnit::Rad);
                double t0 = protocol::realtime_now();
                if (::send(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()) || !read_exact(fd, reply, 4, arrival)) {
                    ++errors[k];
                    break;
                }
                sent_bytes += static_cast<std::uint32_t>(line.size());
                double tx = 0;
                if (stamps && protocol::sent_time(fd, sent_bytes - 1, tx)) {
                    ++stamped[k];
                    send_stall[k] = std::max(send_stall[k], tx - t0);
                    t0 = std::max(t0, tx);
                }
                latencies[k].push_back(arrival - t0);  // the sample's transmission -> the reply's arrival at this socket
                woken[k].push_back(protocol::realtime_now() - t0);  // ... -> this thread has read it
                if (reply[3] == 1) ++stops[k];
            }
            ::close(fd);
        });
    }
    for (auto& t : threads) t.join();
    std::vector<double> all, all_woken;
    std::size_t stop_count = 0, error_count = 0, late_count = 0, stamped_count = 0;
    double send_stall_max = 0;
    for (int r = 0; r < robots; ++r) {
        all.insert(all.end(), latencies[static_cast<std::size_t>(r)].begin(), latencies[static_cast<std::size_t>(r)].end());
        all_woken.insert(all_woken.end(), woken[static_cast<std::size_t>(r)].begin(), woken[static_cast<std::size_t>(r)].end());
        stop_count += stops[static_cast<std::size_t>(r)];
        error_count += errors[static_cast<std::size_t>(r)];
        late_count += late[static_cast<std::size_t>(r)];
        stamped_count += stamped[static_cast<std::size_t>(r)];
        send_stall_max = std::max(send_stall_max, send_stall[static_cast<std::size_t>(r)]);
    }
    std::sort(all.begin(), all.end());
    std::sort(all_woken.begin(), all_woken.end());
    auto pct_of = [](const std::vector<double>& v, double p) {
        return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size())))];
    };
    auto pct = [&](double p) { return pct_of(all, p); };
    const nlohmann::json result = {{"robots", robots},
                                   {"rate_hz", rate},
                                   {"seconds", seconds},
                                   {"samples", all.size()},
                                   {"median_ms", pct(50) * 1e3},
                                   {"p99_ms", pct(99) * 1e3},
                                   {"p999_ms", pct(99.9) * 1e3},
                                   {"max_ms", all.empty() ? 0.0 : all.back() * 1e3},
                                   {"over_20ms", std::count_if(all.begin(), all.end(), [](double v) { return v > 0.020; })},
                                   {"stop_replies", stop_count},
                                   {"errors", error_count},
                                   {"client_late", late_count},
                                   // Samples timed from the kernel's transmit stamp (the others from before send()),
                                   // and the longest this client took from calling send() to that stamp.
                                   {"transmit_stamped", stamped_count},
                                   {"send_stall_max_ms", send_stall_max * 1e3},
                                   // The same, to when this client's thread had read the reply (its own wake-up included).
                                   {"read_median_ms", pct_of(all_woken, 50) * 1e3},
                                   {"read_p99_ms", pct_of(all_woken, 99) * 1e3},
                                   {"read_max_ms", all_woken.empty() ? 0.0 : all_woken.back() * 1e3}};
    std::printf("%2d robots x %.0f Hz, %zu samples (%zu timed from their transmit stamp): median %.3f ms, p99 %.3f ms, p99.9 %.3f ms, "
                "max %.3f ms, %lld over 20 ms, %zu errors; longest send() before its transmit stamp %.3f ms\n",
                robots, rate, all.size(), stamped_count, result["median_ms"].get<double>(), result["p99_ms"].get<double>(),
                result["p999_ms"].get<double>(), result["max_ms"].get<double>(),
                static_cast<long long>(result["over_20ms"].get<std::ptrdiff_t>()), error_count, send_stall_max * 1e3);
    if (!out.empty()) {
        std::FILE* f = std::fopen(out.c_str(), "w");
        if (f) {
            std::fprintf(f, "%s\n", result.dump(2).c_str());
            std::fclose(f);
        }
    }
    return error_count == 0 ? 0 : 1;
}
