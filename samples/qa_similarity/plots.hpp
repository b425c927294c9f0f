#pragma once
// Pictures of a training run, as SVG text: the training curve, and the seed's attention weights over
// a question's and an answer's tokens with the words written under their cells.
#include <string>
#include <vector>

#include <loom.hpp>

namespace plots {

struct Epoch {
    double loss, held_out_map, dev_map;
};
void write_curve(const std::string& path, const std::vector<Epoch>& epochs);

struct Attention {
    loom::QaPair pair;
    xt::xarray<float> question, answer;  // one weight per token, [length, 1]
};
void write_attention(const std::string& path, const Attention& a);

}  // namespace plots
