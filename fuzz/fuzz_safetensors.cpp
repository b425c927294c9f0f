// Fuzz target: the safetensors reader (training/safetensors.cpp), then what a program does with what
// it read: its tensors assigned by name to a small model, with extra tensors refused and ignored.
// The first byte chooses the reader: odd, the rest is parsed in memory (parse_safetensors, many
// executions per second); even, it is written to a file and read from there (read_safetensors, which
// reads the header and each tensor's bytes on its own).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/errors.hpp"
#include "graph/variable.hpp"
#include "training/safetensors.hpp"

namespace {

struct Model {
    loom::Parameter w = loom::parameter(xt::xarray<float>({{1, 2}, {3, 4}, {5, 6}}), "w");
    loom::Parameter b = [] {
        loom::Parameter p = loom::parameter(xt::xarray<float>({0.5f, -0.5f}), "b");
        loom::to_precision({p}, loom::DType::f64);
        return p;
    }();
    // In memory (/dev/shm) when there is one, for the executions per second.
    std::string path = ((std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                   : std::filesystem::temp_directory_path()) /
                        ("loom_fuzz_safetensors_" + std::to_string(::getpid()) + ".safetensors"))
                           .string();
    ~Model() { std::filesystem::remove(path); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static Model model;
    if (size == 0) return 0;
    const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        loom::SafetensorsFile f;
        if (data[0] % 2 == 1) {
            f = loom::parse_safetensors(rest, "fuzz");
        } else {
            std::ofstream(model.path, std::ios::binary | std::ios::trunc) << rest;
            f = loom::read_safetensors(model.path);
        }
        for (const auto& [name, tensor] : f.tensors) (void)tensor.shape();
        try {
            loom::assign_safetensors(f, {model.w, model.b});
        } catch (const loom::Error&) {
        }
        loom::assign_safetensors(f, {model.w, model.b}, loom::ExtraTensors::ignore);
    } catch (const loom::Error&) {
    }
    return 0;
}
