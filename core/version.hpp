#pragma once
/// \file
/// The version of the loom library: the CMake project's (CMakeLists.txt), the one
/// `find_package(loom 0.2)` checks; CHANGELOG.md says what changed in each.
#include <string_view>

namespace loom {

/// \return the version of the loom library linked, "major.minor.patch" (e.g. "0.2.0").
std::string_view version();

}  // namespace loom
