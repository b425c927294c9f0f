// Writes the checkpoint fuzz target's seeds into the directory given: checkpoints of the target's
// model saved by save_checkpoint, as the target reads them (first byte 1 and the payload, or
// first byte 0 and the whole file).
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "core/serialization.hpp"
#include "graph/variable.hpp"
#include "training/checkpoint.hpp"
#include "training/learners.hpp"

namespace {

void write_seed(const std::string& path, char mode, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << mode << bytes;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: make_checkpoint_seeds DIR\n";
        return 2;
    }
    const std::string dir = argv[1];
    loom::Parameter w = loom::parameter(xt::xarray<float>({{1, 2}, {3, 4}, {5, 6}}), "w");
    loom::Parameter b = loom::parameter(xt::xarray<float>({0.5f, -0.5f}), "b");
    auto adam = loom::adam({w, b}, loom::constant_rate(0.01));
    const std::string scratch = dir + "/scratch.ckpt";
    auto seed_from = [&](const std::string& name) {
        std::ifstream in(scratch, std::ios::binary);
        const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        write_seed(dir + "/" + name + "_payload", 1, loom::unpack_checked_bytes(file, scratch));
        write_seed(dir + "/" + name + "_file", 0, file);
    };
    loom::save_checkpoint(scratch, {w, b}, adam.get(), {2, 7, 140, "reader"}, {{"best", "0.5"}});
    seed_from("adam_extras");
    loom::save_checkpoint(scratch, {w, b}, nullptr);
    seed_from("parameters_only");
    loom::Parameter empty = loom::parameter(xt::xarray<float>::from_shape({0}), "empty");
    loom::save_checkpoint(scratch, {w, empty}, nullptr);
    seed_from("empty_parameter");
    std::remove(scratch.c_str());
    return 0;
}
