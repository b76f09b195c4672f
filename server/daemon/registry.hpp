// The robots warpguardd knows: the configuration file's and those added through the control API.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "session.hpp"

namespace warpguard::daemon {

class Registry {
public:
    std::shared_ptr<RobotSession> find(const std::string& id) const {
        std::lock_guard lock(mutex_);
        const auto it = sessions_.find(id);
        return it == sessions_.end() ? nullptr : it->second;
    }
    std::vector<std::shared_ptr<RobotSession>> all() const {
        std::lock_guard lock(mutex_);
        std::vector<std::shared_ptr<RobotSession>> out;
        for (const auto& [id, s] : sessions_) out.push_back(s);
        return out;
    }
    std::string ids() const {
        std::lock_guard lock(mutex_);
        std::string out;
        for (const auto& [id, s] : sessions_) out += (out.empty() ? "" : ", ") + id;
        return out.empty() ? "none" : out;
    }
    // false if the id exists already.
    bool add(std::shared_ptr<RobotSession> session) {
        std::lock_guard lock(mutex_);
        return sessions_.emplace(session->id(), std::move(session)).second;
    }
    bool remove(const std::string& id) {
        std::lock_guard lock(mutex_);
        return sessions_.erase(id) > 0;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::shared_ptr<RobotSession>> sessions_;
};

}  // namespace warpguard::daemon
