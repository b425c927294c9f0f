// A regression pin of generated text: greedy decoding, beam search and sampling (with seeds) over a
// tiny TransformerLM (without and with a context it runs past) and a tiny Seq2SeqTransformer, long
// enough that every hypothesis reads many rows of its key/value cache and beam search reorders
// them. The expected symbols were recorded from the Generator as it was before its key/value cache
// became integer page lists the attention op reads (the gather_rows form); they are not computed
// independently here (the other Generator tests do that): they pin that the redesign of the cache
// changed no generated symbol. The models run in double, so the symbols do not hang on a float
// rounding of one machine's kernels.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "test_support.hpp"

using namespace loom;

namespace {

using Symbols = std::vector<std::vector<std::size_t>>;

layers::TransformerOptions tiny_options(std::size_t decoder_layers, std::size_t max_positions) {
    return {.model_dim = 8,
            .heads = 2,
            .feedforward_dim = 16,
            .dropout = 0.0,
            .norm_first = true,
            .activation = layers::FeedForwardActivation::gelu,
            .encoder_layers = 1,
            .decoder_layers = decoder_layers,
            .positions = layers::PositionalEncoding::learned,
            .max_positions = max_positions,
            .name = "pin"};
}

// Every parameter set from one stream (not from the model's own initialization, which may change),
// large enough that the choices vary from step to step.
void set_parameters(const std::vector<Parameter>& ps, std::uint64_t seed) {
    to_precision(ps, DType::f64);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0.0, 0.35);
    for (const Parameter& p : ps)
        for (double& x : p.data<double>()) x = noise(rng);
}

// Every hypothesis's symbols and log-probability, item after item, hypothesis after hypothesis.
struct Pinned {
    Symbols symbols;
    std::vector<double> log_probabilities;
};

std::string shown(const layers::Generated& g) {
    std::ostringstream out;
    out.precision(17);
    out << "{{";
    for (const auto& item : g.items)
        for (const layers::Hypothesis& h : item) {
            out << "{";
            for (std::size_t i = 0; i < h.symbols.size(); ++i) out << (i ? ", " : "") << h.symbols[i];
            out << "}, ";
        }
    out << "}, {";
    for (const auto& item : g.items)
        for (const layers::Hypothesis& h : item) out << h.log_probability << ", ";
    out << "}}";
    return out.str();
}

// The symbols exactly; the log-probabilities (sums in double) to 1e-9 relative.
void check_pinned(const layers::Generated& g, const Pinned& want) {
    INFO("generated: " << shown(g));
    Symbols symbols;
    std::vector<double> log_probabilities;
    for (const auto& item : g.items)
        for (const layers::Hypothesis& h : item)
            symbols.push_back(h.symbols), log_probabilities.push_back(h.log_probability);
    CHECK(symbols == want.symbols);
    CHECK(log_probabilities.size() == want.log_probabilities.size());
    for (std::size_t i = 0; i < std::min(log_probabilities.size(), want.log_probabilities.size()); ++i)
        CHECK(log_probabilities[i] == doctest::Approx(want.log_probabilities[i]).epsilon(1e-9));
}

}  // namespace

TEST_CASE("generation pin: a TransformerLM's greedy, beam and sampled text, with and without a context") {
    constexpr std::size_t vocabulary = 9;
    layers::TransformerLM lm(vocabulary, tiny_options(2, 16));
    set_parameters(lm.parameters(), 5);
    layers::Generator generator(lm.decoder(), {});
    const std::vector<std::vector<std::size_t>> prompts{{3, 1, 4}, {5}, {8, 2}};
    layers::GenerateOptions o{.max_length = 12, .start_symbol = layers::no_symbol, .end_symbol = layers::no_symbol};
    SUBCASE("greedy") {
        check_pinned(generator.generate(o, {.prompts = prompts}),
                     {{{5, 4, 5, 4, 4, 5, 4, 5, 6, 5, 4, 5},
                       {4, 5, 4, 5, 5, 4, 5, 0, 4, 5, 4, 5},
                       {5, 4, 5, 5, 4, 4, 5, 4, 5, 4, 5, 4}},
                      {-21.128489598585503, -21.453557908959336, -20.955072210118971}});
    }
    SUBCASE("beam search, ended by symbol 0") {
        o.beam_width = 3, o.end_symbol = 0;
        check_pinned(
            generator.generate(o, {.prompts = prompts}),
            {{{5, 4, 5, 5, 4, 5, 4, 5, 4, 5, 4, 5},
              {5, 4, 5, 4, 4, 5, 4, 5, 4, 5, 4, 5},
              {5, 4, 5, 5, 4, 5, 4, 5, 4, 5, 4, 4},
              {7, 5, 4, 4, 5},
              {7, 5, 4, 4, 5, 5, 4, 5, 4, 5, 4, 5},
              {7, 5, 4, 4, 5, 4, 4, 5, 4, 5, 4, 5},
              {5, 4, 4, 5},
              {5},
              {5, 4, 4, 5, 5, 4, 5, 4, 5, 4, 5, 4}},
             {-21.060883680090765, -21.062231203785053, -21.084853355017934, -10.349721885319287, -20.882551127463682,
              -20.922478729000375, -8.3185382725091728, -3.4196941653595334, -20.825325413047491}});
    }
    SUBCASE("sampling") {
        o.sample = true, o.seed = 11, o.temperature = 1.3;
        check_pinned(generator.generate(o, {.prompts = prompts}),
                     {{{3, 2, 5, 4, 1, 5, 0, 6, 3, 8, 1, 2},
                       {4, 7, 1, 7, 7, 3, 0, 6, 3, 1, 7, 5},
                       {6, 3, 5, 2, 7, 3, 5, 3, 1, 5, 4, 5}},
                      {-28.275688102037034, -25.693123335982861, -25.403433735189921}});
        o.top_k = 3, o.seed = 2;
        check_pinned(generator.generate(o, {.prompts = prompts}),
                     {{{4, 3, 4, 7, 5, 0, 7, 0, 4, 7, 5, 3},
                       {4, 4, 4, 5, 5, 0, 5, 7, 4, 3, 5, 0},
                       {4, 7, 0, 4, 4, 4, 7, 4, 5, 4, 7, 4}},
                      {-22.30015031338981, -22.099784434206992, -22.415767223781842}});
    }
    SUBCASE("past the context, greedy and sampled") {
        layers::TransformerLM short_lm(vocabulary, tiny_options(2, 6));
        set_parameters(short_lm.parameters(), 7);
        layers::Generator rounds(short_lm.decoder(), {});
        o.max_length = 20, o.context = 6;
        check_pinned(rounds.generate(o, {.prompts = prompts}),
                     {{{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
                       {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
                       {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
                      {-19.695780216370768, -19.467215717457247, -19.362924749954157}});
        o.sample = true, o.seed = 4;
        check_pinned(rounds.generate(o, {.prompts = prompts}),
                     {{{2, 7, 7, 3, 2, 3, 8, 2, 2, 2, 6, 6, 5, 5, 6, 7, 5, 2, 6, 0},
                       {2, 6, 1, 0, 2, 2, 8, 2, 2, 3, 2, 0, 7, 2, 8, 8, 6, 3, 0, 2},
                       {6, 3, 0, 0, 2, 6, 0, 2, 0, 7, 0, 2, 2, 7, 2, 0, 3, 3, 7, 2}},
                      {-37.120241451938142, -37.176872491841785, -37.108160408126651}});
    }
}

TEST_CASE("generation pin: a Seq2SeqTransformer's greedy, beam and sampled text") {
    layers::Seq2SeqTransformer model(6, 7, tiny_options(2, 32));
    set_parameters(model.parameters(), 9);
    Variable source = sequence::input_variable({1}, "source");
    const std::vector<Variable> memory = model.memory(model.encode(source));
    const std::vector<std::vector<std::size_t>> sources{{1, 4, 2, 5}, {3}, {0, 5, 5, 1, 2, 3}};
    auto values = evaluate(memory, {{source, Value::index_sequences(sources)}});
    std::vector<Value> memory_values;
    for (const Variable& m : memory) memory_values.push_back(values[m]);
    layers::Generator generator(model.decoder(), model.memory_inputs());
    layers::GenerateOptions o{.max_length = 10, .start_symbol = 1, .end_symbol = 0};
    SUBCASE("greedy") {
        check_pinned(generator.generate(o, {.memory = memory_values}),
                     {{{4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, {4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, {4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
                      {-15.441104606085339, -16.067990886046985, -15.549223086778678}});
    }
    SUBCASE("beam search") {
        o.beam_width = 4;
        check_pinned(generator.generate(o, {.memory = memory_values}),
                     {{{4, 4, 4, 4, 4, 4, 4, 4, 4, 4},
                       {4, 4, 4, 4, 4, 4, 4, 4, 4, 2},
                       {5, 4, 4, 4, 4, 4, 4, 4, 4, 4},
                       {3, 4, 4, 4, 4, 4, 4, 4, 4, 4},
                       {4, 4, 4, 4, 4, 4, 4, 4, 4, 4},
                       {4, 4, 4, 4, 4, 4, 4, 4, 4, 2},
                       {5, 4, 4, 4, 4, 4, 4, 4, 4, 4},
                       {3, 4, 4, 4, 4, 4, 4, 4, 4, 4},
                       {4, 4, 4, 4, 4, 4, 4, 4, 4, 4},
                       {4, 4, 4, 4, 4, 4, 4, 4, 4, 2},
                       {5, 4, 4, 4, 4, 4, 4, 4, 4, 4},
                       {3, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
                      {-15.441104606085339, -15.619063116911382, -15.739902598661894, -15.795356439113966,
                       -16.067990886046985, -16.168776046872249, -16.285481560935697, -16.324460141889002,
                       -15.549223086778678, -15.726829721182241, -15.812477481819482, -15.897256887843108}});
    }
    SUBCASE("sampling") {
        o.sample = true, o.seed = 3;
        check_pinned(generator.generate(o, {.memory = memory_values}),
                     {{{}, {3, 6, 5, 3, 2, 4, 6, 2, 1, 3}, {2, 5, 2}},
                      {-1.9955176692626611, -19.485373706580152, -7.8263991258909069}});
    }
}
