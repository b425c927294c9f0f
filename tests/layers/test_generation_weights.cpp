// GenerateOptions::weights: a generation's step reads its weights in bfloat16 or int8. With int8
// the activations stay float, so the step must give what the same model at float gives with each
// product's weight replaced by its int8 rounding, computed here by formula (each output column's
// largest magnitude / 127 as its scale, every weight to the nearest multiple of it); bfloat16 also
// rounds the rows each weight multiplies, so it is checked for stream invariance and closeness to
// float. An item alone draws what it draws in a batch at every precision; a double model computes
// in double whatever the precision asked. GenerateOptions::cache keeps the key/value cache in
// bfloat16: the same checks of stream invariance and closeness.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "core/cpu.hpp"
#include "core/gemm.hpp"
#include "test_support.hpp"

using namespace loom;

namespace {

constexpr std::size_t vocabulary = 11;

layers::TransformerOptions small_lm() {
    return {.model_dim = 32,
            .heads = 4,
            .feedforward_dim = 64,
            .dropout = 0.0,
            .norm_first = true,
            .epsilon = 1e-5,
            .activation = layers::FeedForwardActivation::gelu,
            .decoder_layers = 2,
            .positions = layers::PositionalEncoding::learned,
            .max_positions = 24,
            .tie_embeddings = false,
            .scale_embedding = false,
            .name = "gpt"};
}

// Every parameter from one stream, large enough that the choices vary from step to step.
void set_parameters(const std::vector<Parameter>& ps, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> noise(0.0f, 0.3f);
    for (const Parameter& p : ps)
        for (float& x : p.data<float>()) x = noise(rng);
}

// The weights of the step's products: the matrices [model_dim or feedforward_dim, out] (the
// embedding [vocabulary, 32] and position [24, 32] tables are read by rows, not multiplied).
bool product_weight(const Parameter& p) {
    const Shape& s = p.shape();
    return s.rank() == 2 && (s[0] == 32 || s[0] == 64);
}

// W [k, n] with each column on its int8 grid: scale = largest magnitude / 127, nearest multiple.
void round_to_int8_grid(const Parameter& p) {
    std::span<float> w = p.data<float>();
    const std::size_t k = p.shape()[0], n = p.shape()[1];
    for (std::size_t j = 0; j < n; ++j) {
        double largest = 0;
        for (std::size_t i = 0; i < k; ++i) largest = std::max(largest, double(std::abs(w[i * n + j])));
        const double scale = float(largest / 127);
        for (std::size_t i = 0; i < k; ++i) w[i * n + j] = float(std::nearbyint(w[i * n + j] / scale) * scale);
    }
}

const std::vector<std::vector<std::size_t>> prompts{{3, 1, 4}, {1}, {5, 9, 2, 6}, {5, 3}, {5},
                                                    {8, 9, 7}, {9}, {3, 2, 3, 8}, {4, 6}};

layers::Generated greedy(layers::TransformerLM& lm, WeightPrecision weights,
                         const std::vector<std::vector<std::size_t>>& items,
                         CachePrecision cache = CachePrecision::float32) {
    layers::Generator generator(lm.decoder(), {});
    layers::GenerateOptions o{.max_length = 14, .start_symbol = 0, .end_symbol = layers::no_symbol};
    o.weights = weights;
    o.cache = cache;
    return generator.generate(o, {.prompts = items});
}

}  // namespace

TEST_CASE("generation weights: int8 gives the model whose product weights are rounded to int8 by formula") {
    layers::TransformerLM lm(vocabulary, small_lm());
    set_parameters(lm.parameters(), 3);
    layers::TransformerLM rounded(vocabulary, small_lm());
    set_parameters(rounded.parameters(), 3);
    std::size_t products = 0;
    for (const Parameter& p : rounded.parameters())
        if (product_weight(p)) round_to_int8_grid(p), ++products;
    CHECK(products == 2 * 6 + 1);  // per block q, k, v, out, and the feed-forward's two; the head

    // The widening kernels (activations as they are: the weights alone rounded); where vdpbf16ps
    // runs, the rows are rounded to bfloat16 too, which the last check below allows for.
    const layers::Generated got = [&] {
        const Bf16ProductsScope widening(Bf16Products::never);
        return greedy(lm, WeightPrecision::int8, prompts);
    }();
    const layers::Generated want = greedy(rounded, WeightPrecision::float32, prompts);
    const layers::Generated full = greedy(lm, WeightPrecision::float32, prompts);
    REQUIRE(got.items.size() == prompts.size());
    double largest_change = 0;
    for (std::size_t n = 0; n < prompts.size(); ++n) {
        INFO("item " << n);
        // the same symbols; the sums differ only in float's rounding (the scale applied once per
        // column instead of to every weight)
        CHECK(got.items[n][0].symbols == want.items[n][0].symbols);
        CHECK(got.items[n][0].log_probability == doctest::Approx(want.items[n][0].log_probability).epsilon(1e-4));
        largest_change =
            std::max(largest_change, std::abs(got.items[n][0].log_probability - full.items[n][0].log_probability));
    }
    // and int8 is not float: some log-probability moved
    CHECK(largest_change > 1e-4);
    if (cpu_supports_bf16()) {
        const Bf16ProductsScope pairs(Bf16Products::always);
        const layers::Generated paired = greedy(lm, WeightPrecision::int8, prompts);
        for (std::size_t n = 0; n < prompts.size(); ++n)
            CHECK(std::abs(paired.items[n][0].log_probability - want.items[n][0].log_probability) <
                  0.05 * (1 + std::abs(want.items[n][0].log_probability)));
    }
}

TEST_CASE("generation weights: an item alone draws what it draws in a batch, at every precision") {
    layers::TransformerLM lm(vocabulary, small_lm());
    set_parameters(lm.parameters(), 5);
    const layers::Generated full = greedy(lm, WeightPrecision::float32, prompts);
    for (WeightPrecision weights : {WeightPrecision::float32, WeightPrecision::bfloat16, WeightPrecision::int8}) {
        INFO(weight_precision_name(weights));
        const layers::Generated batch = greedy(lm, weights, prompts);
        for (std::size_t n = 0; n < prompts.size(); ++n) {
            const layers::Generated alone = greedy(lm, weights, {prompts[n]});
            INFO("item " << n);
            CHECK(alone.items[0][0].symbols == batch.items[n][0].symbols);
            CHECK(alone.items[0][0].log_probability == batch.items[n][0].log_probability);
            // near float's: 14 symbols, each log-probability off by a rounding of the weights
            CHECK(std::abs(batch.items[n][0].log_probability - full.items[n][0].log_probability) <
                  0.05 * (1 + std::abs(full.items[n][0].log_probability)));
        }
    }
    // Sampling: item n of a batch draws what it draws alone with seed + n, at int8 too.
    layers::Generator generator(lm.decoder(), {});
    layers::GenerateOptions sampled{.max_length = 14,
                                    .start_symbol = 0,
                                    .end_symbol = layers::no_symbol,
                                    .sample = true,
                                    .temperature = 0.9,
                                    .seed = 40};
    sampled.weights = WeightPrecision::int8;
    const layers::Generated batch = generator.generate(sampled, {.prompts = prompts});
    for (std::size_t n = 0; n < prompts.size(); ++n) {
        layers::GenerateOptions alone = sampled;
        alone.seed = 40 + n;
        CHECK(generator.generate(alone, {.prompts = {prompts[n]}}).items[0][0].symbols == batch.items[n][0].symbols);
    }
}

TEST_CASE("generation weights: a double model computes in double whatever the precision asked") {
    layers::TransformerLM lm(vocabulary, small_lm());
    set_parameters(lm.parameters(), 7);
    to_precision(lm.parameters(), DType::f64);
    const layers::Generated full = greedy(lm, WeightPrecision::float32, prompts);
    for (WeightPrecision weights : {WeightPrecision::bfloat16, WeightPrecision::int8}) {
        const layers::Generated got = greedy(lm, weights, prompts);
        for (std::size_t n = 0; n < prompts.size(); ++n) {
            CHECK(got.items[n][0].symbols == full.items[n][0].symbols);
            CHECK(got.items[n][0].log_probability == full.items[n][0].log_probability);
        }
    }
}

TEST_CASE("generation cache: kept in bfloat16, an item alone draws what it draws in a batch, near float's") {
    // GenerateOptions::cache: every key and value row rounded as stored (a double model keeps its
    // rows whole). Heads of 8: the kernel's element-by-element path; the layers' tests read the
    // 16-lane one.
    layers::TransformerLM lm(vocabulary, small_lm());
    set_parameters(lm.parameters(), 9);
    const layers::Generated full = greedy(lm, WeightPrecision::float32, prompts);
    for (WeightPrecision weights : {WeightPrecision::float32, WeightPrecision::int8}) {
        INFO(weight_precision_name(weights));
        const layers::Generated batch = greedy(lm, weights, prompts, CachePrecision::bfloat16);
        double moved = 0;
        for (std::size_t n = 0; n < prompts.size(); ++n) {
            INFO("item " << n);
            const layers::Generated alone = greedy(lm, weights, {prompts[n]}, CachePrecision::bfloat16);
            CHECK(alone.items[0][0].symbols == batch.items[n][0].symbols);
            CHECK(alone.items[0][0].log_probability == batch.items[n][0].log_probability);
            const double off = std::abs(batch.items[n][0].log_probability - full.items[n][0].log_probability);
            CHECK(off < 0.05 * (1 + std::abs(full.items[n][0].log_probability)));
            moved = std::max(moved, off);
        }
        CHECK(moved > 1e-5);  // the rows were rounded
    }
    to_precision(lm.parameters(), DType::f64);
    const layers::Generated whole = greedy(lm, WeightPrecision::float32, prompts);
    const layers::Generated asked = greedy(lm, WeightPrecision::float32, prompts, CachePrecision::bfloat16);
    for (std::size_t n = 0; n < prompts.size(); ++n) {
        CHECK(asked.items[n][0].symbols == whole.items[n][0].symbols);
        CHECK(asked.items[n][0].log_probability == whole.items[n][0].log_probability);
    }
}
