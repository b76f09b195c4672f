#include "warpguard/json_file.hpp"

#include <fstream>

#include <fmt/format.h>

namespace warpguard {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(fmt::format("{}: cannot open the {}", path, what));
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(fmt::format("{}: not valid JSON: {}", path, e.what()));
    }
}

}  // namespace warpguard
