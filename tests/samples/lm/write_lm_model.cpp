// Writes a model file of the language-model sample whose every weight is one number, for the
// sample's end-to-end test (tests/samples/lm_check.cmake) to feed it what no training writes:
//   write_lm_model OUT transformer|lstm VALUE        (the alphabet "abc\n", tiny sizes)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lm/model.hpp"

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: write_lm_model OUT transformer|lstm VALUE\n");
        return 2;
    }
    const std::string architecture = argv[2];
    const lm::Settings sizes{
        .architecture = architecture == "lstm" ? lm::Architecture::lstm : lm::Architecture::transformer,
        .layers = 1,
        .heads = 2,
        .width = 8,
        .block = 16};
    const loom::Alphabet alphabet = loom::Alphabet::of(U"abc\n");
    lm::Model m(sizes, alphabet.size());
    const float value = std::strtof(argv[3], nullptr);
    for (const loom::Parameter& p : m.parameters()) {
        xt::xarray<float> weights = p.data<float>();
        weights.fill(value);
        p.set_value(weights);
    }
    lm::save_model(argv[1], m, alphabet);
    return 0;
}
