#include "warpguard/number_list.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace warpguard {

std::vector<double> parse_number_list(const std::string& text, const std::string& option) {
    std::vector<double> values;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        std::size_t used = 0;
        double x = 0;
        try {
            x = std::stod(item, &used);
        } catch (const std::exception&) {
            used = 0;  // not a number at all, or out of double's range
        }
        if (used == 0 || used != item.size()) {
            throw std::invalid_argument(fmt::format("{} '{}': '{}' is not a number", option, text, item));
        }
        if (!std::isfinite(x)) throw std::invalid_argument(fmt::format("{} '{}': '{}' is not finite", option, text, item));
        values.push_back(x);
        if (comma == std::string::npos) return values;
        start = comma + 1;
    }
}

Eigen::Vector3d parse_xyz(const std::string& text, const std::string& option) {
    const std::vector<double> v = parse_number_list(text, option);
    if (v.size() != 3) {
        throw std::invalid_argument(fmt::format("{} '{}' has {} values; expected x,y,z", option, text, v.size()));
    }
    return {v[0], v[1], v[2]};
}

}  // namespace warpguard
