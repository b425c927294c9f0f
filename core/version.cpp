#include "core/version.hpp"

namespace loom {

// LOOM_VERSION is the CMake project's version, set on this file alone (CMakeLists.txt), so that
// moving the version recompiles one file.
std::string_view version() { return LOOM_VERSION; }

}  // namespace loom
