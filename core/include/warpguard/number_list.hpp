// Lists of numbers given as one command-line value ("0.05,0,0.02"), with errors that name the option,
// its text and the item that is not a number.
#pragma once

#include <string>
#include <vector>

#include <Eigen/Core>

namespace warpguard {

// The comma-separated numbers of `text`, every one finite. Throws std::invalid_argument
// "OPTION 'TEXT': 'ITEM' is not a number" for an item that is not (an empty one too: "1,,2", "1,2,",
// ""), or "OPTION 'TEXT': 'ITEM' is not finite" for nan or inf.
std::vector<double> parse_number_list(const std::string& text, const std::string& option);

// Exactly three of them: otherwise std::invalid_argument "OPTION 'TEXT' has N values; expected x,y,z".
Eigen::Vector3d parse_xyz(const std::string& text, const std::string& option);

}  // namespace warpguard
