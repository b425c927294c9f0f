#pragma once
/// \file
/// The precision a fixed weight is read in by the products that pack it once and multiply it many
/// times: a generating step's (layers::GenerateOptions::weights, Session::set_parameters_fixed).
/// Generating a symbol multiplies every weight of the model by a few rows only (one per stream),
/// so the step reads the whole model from memory once per symbol and waits on it: fewer bytes per
/// weight is what makes it faster (llama.cpp's weights in 8 and 4 bits), not faster arithmetic.
#include <string_view>

namespace loom {

/// How a fixed weight's elements are kept for the per-step products (core/quantized_gemm.hpp).
enum class WeightPrecision {
    float32,   ///< the weight as it is: 4 bytes an element (the default)
    bfloat16,  ///< weight and the rows it multiplies rounded to bfloat16 (to nearest, ties to even),
               ///< products summed in float, as MatmulPrecision::medium: 2 bytes an element
    int8,      ///< each output column's weights as int8 times one float scale (its largest
               ///< magnitude / 127, rounded to nearest), the rows it multiplies as they are (weight
               ///< only, as llama.cpp's Q8_0 with one scale per column): 1 byte an element
};

/// "float", "bfloat16" or "int8".
const char* weight_precision_name(WeightPrecision precision);
/// The precision named "float" (or "float32"), "bfloat16" or "int8"; UserError naming the choices
/// for anything else.
WeightPrecision parse_weight_precision(std::string_view name);

/// How a generating decoder's key/value cache keeps its rows (layers::GenerateOptions::cache). At
/// long contexts a step reads more bytes of cache than of weights (block 1,024, 8 streams of a
/// 4 x 256 GPT: about 33 MB of float rows a step on average), so that its rows' bytes bound the step.
enum class CachePrecision {
    float32,   ///< as the step computes them (the default)
    bfloat16,  ///< rounded to bfloat16 (to nearest, ties to even) as stored, the step's own row too:
               ///< half the bytes; the attention's arithmetic stays float
};

/// "float" or "bfloat16".
const char* cache_precision_name(CachePrecision precision);
/// The precision named "float" (or "float32") or "bfloat16"; UserError naming the choices for
/// anything else.
CachePrecision parse_cache_precision(std::string_view name);

}  // namespace loom
