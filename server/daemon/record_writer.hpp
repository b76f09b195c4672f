// A recording's CSV writer. The robot's link thread only copies each sample into a ring that was
// allocated when the recording started (no system call, no allocation, no lock shared with anyone);
// the writer's own thread formats the lines and writes them, so a slow or throttled disk can never
// delay a reply to the robot. A sample that finds the ring full is lost and counted, and the
// recording then refuses to be committed (a calibration must not learn from a recording with holes).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "wire_protocol.hpp"

namespace warpguard::daemon {

class RecordWriter {
public:
    // Takes `file` (header already written) and its stdio buffer; starts the writer thread.
    // `payload`, `speed_override`: the header has those columns (the robot's handshake options).
    RecordWriter(std::FILE* file, std::unique_ptr<char[]> buffer, std::string path, bool payload, bool speed_override,
                 std::size_t capacity);
    ~RecordWriter();  // finish() if not done
    RecordWriter(const RecordWriter&) = delete;
    RecordWriter& operator=(const RecordWriter&) = delete;

    // The robot's thread (one producer). False when the ring is full: the sample is lost (counted).
    bool push(const protocol::SampleFrame& frame) noexcept;

    struct Result {
        std::size_t written = 0;
        std::size_t lost = 0;
        std::string error;  // empty: every pushed sample is on the disk (flushed and fsync'ed)
    };
    // Writes what is queued, stops the thread, flushes, fsyncs and closes the file. Call once, off
    // the robot's thread (it waits for the disk).
    Result finish();

    std::size_t capacity() const { return ring_.size(); }
    std::size_t lost() const { return lost_.load(std::memory_order_relaxed); }

private:
    void run();
    void drain();  // writes everything queued now

    std::vector<protocol::SampleFrame> ring_;
    std::atomic<std::size_t> head_{0};  // next slot the producer fills (monotonic)
    std::atomic<std::size_t> tail_{0};  // next slot the writer reads (monotonic)
    std::atomic<std::size_t> lost_{0};
    std::atomic<bool> stop_{false};
    std::FILE* file_;
    std::unique_ptr<char[]> buffer_;  // the file's stdio buffer: lives until fclose
    std::string path_;
    bool payload_;
    bool override_;
    std::size_t written_ = 0;
    int write_errno_ = 0;  // first failed write
    bool finished_ = false;
    std::thread thread_;
};

}  // namespace warpguard::daemon
