// The op interface (graph/op.hpp) and the node (graph/node.hpp) are the engine's own: outside graph/
// the library includes them only to implement an op. Read from the source tree.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {
std::vector<std::string> includers_outside_graph(const std::string& header) {
    namespace fs = std::filesystem;
    const fs::path root = LOOM_SOURCE_DIR;
    std::vector<std::string> found;
    for (const char* folder : {"core", "data", "text", "qa", "plot", "layers", "training", "distributed"})
        for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
            const std::string ext = entry.path().extension().string();
            if (ext != ".hpp" && ext != ".cpp") continue;
            std::ifstream in(entry.path());
            std::stringstream text;
            text << in.rdbuf();
            if (text.str().find("#include \"" + header + "\"") != std::string::npos)
                found.push_back(fs::relative(entry.path(), root).string());
        }
    return found;
}
std::string joined(const std::vector<std::string>& files) {
    std::string s;
    for (const auto& f : files) s += f + " ";
    return s;
}
}  // namespace

TEST_CASE("headers: no library file outside graph/ includes graph/op.hpp or graph/node.hpp") {
    const auto op = includers_outside_graph("graph/op.hpp");
    const auto node = includers_outside_graph("graph/node.hpp");
    INFO("op.hpp included by: " << joined(op));
    INFO("node.hpp included by: " << joined(node));
    CHECK(op.empty());
    CHECK(node.empty());
}
