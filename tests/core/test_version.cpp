// loom::version() (core/version.hpp): the CMake project's version, as the top-level CMakeLists.txt
// writes it, and one that CHANGELOG.md has an entry for.
#include <doctest/doctest.h>

#include <regex>
#include <string>

#include "core/version.hpp"
#include "test_support.hpp"

using namespace loom;

TEST_CASE("version: the project's version from CMakeLists.txt, with its CHANGELOG.md entry") {
    const std::string v(version());
    CHECK(std::regex_match(v, std::regex(R"([0-9]+\.[0-9]+\.[0-9]+)")));
    std::smatch m;
    // Joined to a named string: GCC 12 warns (-Warray-bounds, falsely) on a temporary one + "..."
    // when the checkout's path is short enough for the string's inline buffer.
    const std::string root = LOOM_SOURCE_DIR;
    const std::string cmake = loom::testing::read_bytes(root + "/CMakeLists.txt");
    REQUIRE(std::regex_search(cmake, m, std::regex(R"(project\(loom VERSION ([0-9.]+))")));
    CHECK(v == m[1].str());
    const std::string changelog = loom::testing::read_bytes(root + "/CHANGELOG.md");
    CHECK_MESSAGE(changelog.find("## [" + v + "]") != std::string::npos,
                  "CHANGELOG.md has no '## [" << v << "]' entry for the version");
    CHECK(changelog.find("## [Unreleased]") < changelog.find("## [" + v + "]"));
}
