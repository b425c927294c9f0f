// Fuzz target: the model file reader (training/model_file.cpp), then what a program does with what
// it read: its settings as sizes and numbers, and its parameters assigned to a small model. As for
// checkpoints, the first byte chooses: odd, the rest is a payload that gets a correct header (the
// records are fuzzed); even, the rest is the whole file (the header is fuzzed).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "graph/variable.hpp"
#include "training/model_file.hpp"

namespace {

struct Model {
    loom::Parameter w = loom::parameter(xt::xarray<float>({{1, 2}, {3, 4}, {5, 6}}), "w");
    loom::Parameter b = loom::parameter(xt::xarray<float>({0.5f, -0.5f}), "b");
    // The reader reads a file: in memory (/dev/shm) when there is one, for the executions per second.
    std::string path = ((std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                   : std::filesystem::temp_directory_path()) /
                        ("loom_fuzz_model_file_" + std::to_string(::getpid()) + ".loom"))
                           .string();
    ~Model() { std::filesystem::remove(path); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static Model model;
    if (size == 0) return 0;
    const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    {
        std::ofstream out(model.path, std::ios::binary | std::ios::trunc);
        out << (data[0] % 2 == 1 ? loom::checked_bytes(rest) : rest);
    }
    try {
        const loom::ModelFile f = loom::read_model_file(model.path);
        try {
            (void)f.whole_setting("embed", 1, 4096);
            (void)f.setting("lambda", 0, 1000);
        } catch (const loom::Error&) {
        }
        loom::assign_parameters(f, {model.w, model.b});
    } catch (const loom::Error&) {
    }
    return 0;
}
