// Robot-side timing of replies, shared by the simulated robot and the daemon load benchmark.
//
// A robot's controller judges its reply timeout in real time. The programs that play robots on the
// cell PC do not run in real time (they share the cores with the daemon), so they take the time a
// reply *arrived* from the kernel (SO_TIMESTAMPNS on the socket, CLOCK_REALTIME) instead of the
// time their own thread happened to wake up and read it. Likewise the time a sample was *sent*:
// the kernel's transmit time of its last byte (SO_TIMESTAMPING, software transmit stamps), not the
// time before the send() call, which a descheduled program can return from many milliseconds
// later than the bytes left.
#pragma once

#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace warpguard::protocol {

inline double realtime_now() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Asks the kernel to stamp every received segment with its arrival time.
inline bool enable_arrival_times(int fd) {
    const int one = 1;
    return ::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) == 0;
}

// Asks the kernel to stamp the transmission of every sent byte range with its time; the stamps
// come back on the socket's error queue keyed by the offset of the range's last byte, counted
// from the bytes sent after this call (read them with sent_time()). False where the kernel refuses.
inline bool enable_send_times(int fd) {
    const int flags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
    return ::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) == 0;
}

// Reads every transmit stamp queued on the socket's error queue (never blocks) and sets `sent` to
// the one of the byte range ending at offset `key` (enable_send_times()); true if that one was
// among them. Stamps of other ranges are dropped: each sample asks for its own right after it.
inline bool sent_time(int fd, std::uint32_t key, double& sent) {
    bool found = false;
    while (true) {
        alignas(cmsghdr) char control[256];
        char none[1];
        iovec iov{none, sizeof none};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        if (::recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return found;
        double stamp = -1;
        bool ours = false;
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
                scm_timestamping ts{};
                std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
                stamp = static_cast<double>(ts.ts[0].tv_sec) + 1e-9 * static_cast<double>(ts.ts[0].tv_nsec);
            } else if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) || (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) {
                sock_extended_err e{};
                std::memcpy(&e, CMSG_DATA(c), sizeof e);
                ours = e.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && e.ee_data == key;
            }
        }
        if (ours && stamp > 0) {
            sent = stamp;
            found = true;
        }
    }
}

// recv() of up to n bytes with `flags` (MSG_DONTWAIT: only what is there now); `arrival` gets the
// kernel's arrival time of the data, or the present time if the socket carries no stamp.
inline ssize_t receive_stamped(int fd, char* out, std::size_t n, int flags, double& arrival) {
    iovec iov{out, n};
    // Room for SO_TIMESTAMPNS and, on a socket with enable_send_times(), the SCM_TIMESTAMPING the
    // kernel adds to received data too.
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec)) + CMSG_SPACE(3 * sizeof(timespec)) + 64];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(fd, &msg, flags);
    arrival = realtime_now();
    if (got > 0) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
                timespec ts{};
                std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
                arrival = static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
            }
        }
    }
    return got;
}

}  // namespace warpguard::protocol
