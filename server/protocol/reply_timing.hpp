// Robot-side timing of replies, shared by the simulated robot and the daemon load benchmark.
//
// A robot's controller judges its reply timeout in real time. The programs that play robots on the
// cell PC do not run in real time (they share the cores with the daemon), so they take the time a
// reply *arrived* from the kernel (SO_TIMESTAMPNS on the socket, CLOCK_REALTIME) instead of the
// time their own thread happened to wake up and read it.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <cstddef>
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

// recv() of up to n bytes with `flags` (MSG_DONTWAIT: only what is there now); `arrival` gets the
// kernel's arrival time of the data, or the present time if the socket carries no stamp.
inline ssize_t receive_stamped(int fd, char* out, std::size_t n, int flags, double& arrival) {
    iovec iov{out, n};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
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
