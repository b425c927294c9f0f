// Fuzz target: the checkpoint loader (training/checkpoint.cpp) on a small model with an Adam
// learner. The file's checksum would stop almost every mutation at the header, so the first byte
// chooses: odd, the rest is a payload that gets a correct header (the records are fuzzed); even,
// the rest is the whole file (the header is fuzzed). Build the seeds with make_checkpoint_seeds.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "graph/variable.hpp"
#include "training/checkpoint.hpp"
#include "training/learners.hpp"

namespace {

struct Model {
    loom::Parameter w = loom::parameter(xt::xarray<float>({{1, 2}, {3, 4}, {5, 6}}), "w");
    loom::Parameter b = loom::parameter(xt::xarray<float>({0.5f, -0.5f}), "b");
    std::unique_ptr<loom::Learner> adam = loom::adam({w, b}, loom::constant_rate(0.01));
    // The loader reads a file: in memory (/dev/shm) when there is one, for the executions per second.
    std::string path = ((std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                   : std::filesystem::temp_directory_path()) /
                        ("loom_fuzz_checkpoint_" + std::to_string(::getpid()) + ".ckpt"))
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
        (void)loom::load_checkpoint(model.path, {model.w, model.b}, model.adam.get());
    } catch (const loom::Error&) {
    }
    try {
        (void)loom::load_checkpoint(model.path, {model.w, model.b}, nullptr);
    } catch (const loom::Error&) {
    }
    return 0;
}
