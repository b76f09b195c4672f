// Reading JSON documents from files, with errors that name the file.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace warpguard {

// Throws std::runtime_error "PATH: cannot open the WHAT" or "PATH: not valid JSON: ...".
nlohmann::json read_json_file(const std::string& path, const std::string& what);

// Reads the file and converts it with `parse`; a std::invalid_argument from `parse` (a field that is
// wrong) becomes std::runtime_error "PATH: message".
template <typename Parse>
auto load_json_file(const std::string& path, const std::string& what, Parse parse) {
    const nlohmann::json document = read_json_file(path, what);
    try {
        return parse(document);
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error(path + ": " + e.what());
    }
}

}  // namespace warpguard
