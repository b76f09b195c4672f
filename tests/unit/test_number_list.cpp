#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "warpguard/number_list.hpp"

using namespace warpguard;

namespace {
std::string error_of(const std::string& text) {
    try {
        parse_number_list(text, "--home");
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "no error";
}
}  // namespace

TEST_CASE("a command line's list of numbers is read item by item", "[cli]") {
    const auto v = parse_number_list("0.05,0,-2e-3,1.5707963267948966", "--home");
    REQUIRE(v.size() == 4);
    CHECK(v[0] == 0.05);
    CHECK(v[1] == 0.0);
    CHECK(v[2] == -0.002);
    CHECK(v[3] == 1.5707963267948966);
    CHECK(parse_number_list("7", "--q") == std::vector<double>{7.0});
    CHECK(parse_number_list("1, 2", "--q") == std::vector<double>{1.0, 2.0});  // as std::stod, space before a number
}

TEST_CASE("a list with an item that is not a finite number names the option, the text and the item", "[cli]") {
    CHECK(error_of("0,abc,1") == "--home '0,abc,1': 'abc' is not a number");
    CHECK(error_of("1.5x") == "--home '1.5x': '1.5x' is not a number");
    CHECK(error_of("1,,2") == "--home '1,,2': '' is not a number");
    CHECK(error_of("1,2,") == "--home '1,2,': '' is not a number");
    CHECK(error_of("") == "--home '': '' is not a number");
    CHECK(error_of("1 ,2") == "--home '1 ,2': '1 ' is not a number");
    CHECK(error_of("1e999") == "--home '1e999': '1e999' is not a number");
    CHECK(error_of("0,nan") == "--home '0,nan': 'nan' is not finite");
    CHECK(error_of("-inf") == "--home '-inf': '-inf' is not finite");
}

TEST_CASE("a point x,y,z takes exactly three numbers", "[cli]") {
    const Eigen::Vector3d p = parse_xyz("0.05,0,0.02", "--tracked-point");
    CHECK(p.x() == 0.05);
    CHECK(p.y() == 0.0);
    CHECK(p.z() == 0.02);
    CHECK_THROWS_WITH(parse_xyz("1,2", "--tracked-point"), "--tracked-point '1,2' has 2 values; expected x,y,z");
    CHECK_THROWS_WITH(parse_xyz("1,2,3,4", "--force"), "--force '1,2,3,4' has 4 values; expected x,y,z");
    CHECK_THROWS_WITH(parse_xyz("1,y,3", "--force"), "--force '1,y,3': 'y' is not a number");
}
