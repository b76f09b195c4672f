#include "control_client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace warpguard::cli {

ControlClient::ControlClient(const std::string& host, std::uint16_t port, const std::string& token, const std::string& client) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
        throw std::runtime_error(fmt::format("cannot resolve the daemon's address '{}'", host));
    }
    fd_ = ::socket(found->ai_family, SOCK_STREAM, 0);
    const int rc = fd_ < 0 ? -1 : ::connect(fd_, found->ai_addr, found->ai_addrlen);
    ::freeaddrinfo(found);
    if (rc != 0) {
        const std::string why = std::strerror(errno);
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        throw std::runtime_error(fmt::format("cannot connect to warpguardd's control API at {}:{}: {} (is the daemon running?)", host, port, why));
    }
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    call({{"cmd", "hello"}, {"token", token}, {"client", client}}, 10.0);
}

ControlClient::~ControlClient() {
    if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> ControlClient::line(double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
    while (true) {
        const auto nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            std::string out = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return out;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return std::nullopt;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
        char chunk[65536];
        const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
        if (n <= 0) throw std::runtime_error("warpguardd closed the control connection");
        buffer_.append(chunk, static_cast<std::size_t>(n));
    }
}

nlohmann::json ControlClient::call(nlohmann::json request, double timeout_s) {
    const std::int64_t id = next_id_++;
    request["req"] = id;
    const std::string text = request.dump() + "\n";
    if (::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(text.size())) {
        throw std::runtime_error("cannot send to warpguardd (connection lost)");
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
    while (true) {
        const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
        const auto l = line(std::max(0.0, left));
        if (!l) throw std::runtime_error(fmt::format("no answer from warpguardd to '{}' within {} s", request.value("cmd", "?"), timeout_s));
        nlohmann::json answer = nlohmann::json::parse(*l);
        if (answer.contains("event") || answer.contains("feed")) {
            pushed_.push_back(std::move(answer));
            continue;
        }
        if (answer.contains("req") && answer.at("req") != id) continue;
        if (!answer.value("ok", false)) throw std::runtime_error(answer.value("error", std::string("request refused")));
        return answer;
    }
}

std::optional<nlohmann::json> ControlClient::next(double timeout_s) {
    if (!pushed_.empty()) {
        nlohmann::json j = std::move(pushed_.front());
        pushed_.erase(pushed_.begin());
        return j;
    }
    const auto l = line(timeout_s);
    if (!l) return std::nullopt;
    return nlohmann::json::parse(*l);
}

}  // namespace warpguard::cli
