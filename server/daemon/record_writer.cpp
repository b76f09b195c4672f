#include "record_writer.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace warpguard::daemon {

RecordWriter::RecordWriter(std::FILE* file, std::unique_ptr<char[]> buffer, std::string path, bool payload, bool speed_override,
                           std::size_t capacity)
    : ring_(std::max<std::size_t>(capacity, 2)),
      file_(file),
      buffer_(std::move(buffer)),
      path_(std::move(path)),
      payload_(payload),
      override_(speed_override) {
    thread_ = std::thread([this] { run(); });
}

RecordWriter::~RecordWriter() {
    if (!finished_) finish();
}

bool RecordWriter::push(const protocol::SampleFrame& frame) noexcept {
    const std::size_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) >= ring_.size()) {
        lost_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    ring_[head % ring_.size()] = frame;
    head_.store(head + 1, std::memory_order_release);
    return true;
}

void RecordWriter::drain() {
    const std::size_t head = head_.load(std::memory_order_acquire);
    std::size_t tail = tail_.load(std::memory_order_relaxed);
    const std::size_t count = head - tail;
    for (; tail != head; ++tail) {
        const protocol::SampleFrame& f = ring_[tail % ring_.size()];
        std::FILE* out = file_;
        int rc = std::fprintf(out, "%.17g,%lld,%lld,%u", f.t, static_cast<long long>(f.seq), static_cast<long long>(f.cycle), f.mode);
        for (std::size_t j = 0; j < f.joints && rc >= 0; ++j) rc = std::fprintf(out, ",%.17g", f.signal[j]);
        for (std::size_t j = 0; j < f.joints && rc >= 0; ++j) rc = std::fprintf(out, ",%.17g", f.angle[j]);
        if (payload_ && rc >= 0) rc = std::fprintf(out, ",%.17g", f.payload);
        if (override_ && rc >= 0) rc = std::fprintf(out, ",%.17g", f.speed_override);
        if (rc >= 0) rc = std::fputc('\n', out);
        if (rc < 0 && write_errno_ == 0) write_errno_ = errno ? errno : EIO;
        // The slot is free for the robot's thread once its line is in the stdio buffer.
        tail_.store(tail + 1, std::memory_order_release);
    }
    written_ += count;
}

void RecordWriter::run() {
    // Normal scheduling whatever thread started the recording (never the robots' real-time policy).
    sched_param normal{};
    ::pthread_setschedparam(::pthread_self(), SCHED_OTHER, &normal);
    while (!stop_.load(std::memory_order_acquire)) {
        drain();
        // 20 ms: a handful of samples per wake-up; the ring holds many seconds.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    drain();
}

RecordWriter::Result RecordWriter::finish() {
    Result r;
    if (finished_) {
        r.error = fmt::format("{}: the recording was already finished", path_);
        return r;
    }
    finished_ = true;
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
    drain();  // anything pushed between the thread's last drain and now (the session is no longer recording)
    if (std::fflush(file_) != 0 && write_errno_ == 0) write_errno_ = errno;
    if (::fsync(::fileno(file_)) != 0 && write_errno_ == 0) write_errno_ = errno;
    if (std::fclose(file_) != 0 && write_errno_ == 0) write_errno_ = errno;
    file_ = nullptr;
    buffer_.reset();
    r.written = written_;
    r.lost = lost_.load(std::memory_order_relaxed);
    if (write_errno_ != 0) {
        r.error = fmt::format("{}: writing the recording failed: {}", path_, std::strerror(write_errno_));
    } else if (r.lost > 0) {
        r.error = fmt::format("{}: {} of {} samples were lost: the disk did not take them as fast as the robot sent them (the "
                              "buffer holds {} samples); the recording is not committed — record again",
                              path_, r.lost, r.lost + r.written, ring_.size());
    }
    return r;
}

}  // namespace warpguard::daemon
