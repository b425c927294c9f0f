// Sampling from a decoder (Generator with GenerateOptions::sample): 10^5 draws from fixed logits
// against softmax(logits / T) restricted to the top k and the nucleus p, computed here in double,
// by a chi-square test; temperature 0 and top_k 1 are greedy decoding on a Transformer; seeds
// reproduce; an item's draws do not depend on the batch around it; on_symbol streams exactly the
// emitted symbols and on_step every pass (an exception from it stops any search); no end symbol;
// items without prompts; and the errors of options, a NaN
// parameter and a memory of the wrong size.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "gradcheck.hpp"
#include "test_support.hpp"

using namespace loom;
using loom::testing::expect_user_error;

namespace {

const std::vector<double> fixed_logits{1.5, 0.3, -0.2, 2.1, 0.9, -1.4, 0.0, 1.1};

// A decoder without states whose logits are `logits` whatever the previous symbol: a table of
// identical rows, looked up by it.
layers::Decoder fixed_decoder(const std::vector<double>& logits) {
    const std::size_t v = logits.size();
    xt::xarray<float> table = xt::zeros<float>({v, v});
    for (std::size_t r = 0; r < v; ++r)
        for (std::size_t c = 0; c < v; ++c) table(r, c) = static_cast<float>(logits[c]);
    Parameter p = parameter(table, "fixed_logits");
    return layers::Decoder(
        [p](const Variable& previous, const std::vector<Variable>&, const std::vector<Variable>&) {
            return layers::DecoderOutput{embedding(previous, p), {}};
        },
        {});
}

// The distribution sampling must draw from, by its definition: symbols ranked by logit (equal
// ones by id), the first k kept, softmax(logits / T) over them, then the fewest first ones whose
// mass reaches p (a symbol kept while the mass before it is below p), renormalized.
std::vector<double> expected_distribution(const std::vector<double>& logits, double temperature, std::size_t k,
                                          double p) {
    std::vector<std::size_t> order(logits.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
    if (k != 0 && k < order.size()) order.resize(k);
    std::vector<double> q(order.size());
    double total = 0;
    for (std::size_t j = 0; j < order.size(); ++j) total += q[j] = std::exp(logits[order[j]] / temperature);
    std::size_t kept = 0;
    for (double before = 0; kept < q.size() && before < p; ++kept) before += q[kept] / total;
    double mass = 0;
    for (std::size_t j = 0; j < kept; ++j) mass += q[j];
    std::vector<double> out(logits.size(), 0.0);
    for (std::size_t j = 0; j < kept; ++j) out[order[j]] = q[j] / mass;
    return out;
}

// Chi-square quantiles at a false-alarm rate of 1e-6, by degrees of freedom (1 ..= 7), from the
// regularized upper incomplete gamma function Q(df / 2, x / 2) = 1e-6.
constexpr double chi_square_1e6[] = {0, 23.93, 27.63, 30.66, 33.38, 35.89, 38.26, 40.52};

layers::GenerateOptions sampling(std::size_t max_length, double temperature, std::size_t k, double p,
                                 std::uint64_t seed) {
    layers::GenerateOptions o{1, max_length, 0, layers::no_symbol};
    o.sample = true;
    o.temperature = temperature;
    o.top_k = k;
    o.top_p = p;
    o.seed = seed;
    return o;
}

layers::TransformerOptions tiny(std::size_t layers = 1) {
    return {.model_dim = 8,
            .heads = 2,
            .feedforward_dim = 16,
            .dropout = 0.0,
            .encoder_layers = 1,
            .decoder_layers = layers};
}

double log_softmax_at(const std::vector<double>& logits, std::size_t s) {
    double top = *std::max_element(logits.begin(), logits.end()), sum = 0;
    for (double l : logits) sum += std::exp(l - top);
    return logits[s] - top - std::log(sum);
}

void check_same(const layers::Generated& a, const layers::Generated& b, bool exact_log_probability) {
    REQUIRE(a.items.size() == b.items.size());
    for (std::size_t n = 0; n < a.items.size(); ++n) {
        INFO("item " << n);
        REQUIRE(a.items[n].size() == 1);
        REQUIRE(b.items[n].size() == 1);
        CHECK(a.items[n][0].symbols == b.items[n][0].symbols);
        CHECK(a.items[n][0].ended == b.items[n][0].ended);
        if (exact_log_probability)
            CHECK(a.items[n][0].log_probability == b.items[n][0].log_probability);
        else
            CHECK(a.items[n][0].log_probability == doctest::Approx(b.items[n][0].log_probability).epsilon(1e-5));
    }
}

}  // namespace

TEST_CASE("sampling: 10^5 draws match softmax(logits / T) within the top k and the nucleus (chi-square)") {
    layers::Generator gen(fixed_decoder(fixed_logits), {});
    struct Case {
        double temperature;
        std::size_t k;
        double p;
    };
    // The nuclei hold 4, 4, 4 and 2 symbols, their boundaries at least 0.01 away from p.
    for (const Case c : {Case{1.0, 0, 1.0}, Case{0.6, 0, 1.0}, Case{2.0, 3, 1.0}, Case{1.0, 0, 0.75}, Case{0.8, 5, 0.9},
                         Case{1.3, 0, 0.5}, Case{0.5, 0, 0.95}}) {
        INFO("temperature " << c.temperature << " top_k " << c.k << " top_p " << c.p);
        // 1000 items of 100 symbols each, no end symbol: every step draws, from the same logits.
        layers::GenerateOptions o = sampling(100, c.temperature, c.k, c.p, 2024);
        o.items = 1000;
        const auto g = gen.generate({}, o);
        REQUIRE(g.items.size() == 1000);
        CHECK(g.unfinished == 1000);
        std::vector<double> counts(fixed_logits.size(), 0.0);
        for (const auto& item : g.items) {
            REQUIRE(item.size() == 1);
            REQUIRE(item[0].symbols.size() == 100);
            CHECK_FALSE(item[0].ended);
            double lp = 0;  // the model's log-probabilities, not the reshaped ones
            for (std::size_t s : item[0].symbols) {
                counts[s] += 1;
                lp += log_softmax_at(fixed_logits, s);
            }
            CHECK(item[0].log_probability == doctest::Approx(lp).epsilon(1e-5));
            CHECK(item[0].score == doctest::Approx(lp / 100).epsilon(1e-5));
        }
        const std::vector<double> q = expected_distribution(fixed_logits, c.temperature, c.k, c.p);
        double chi2 = 0;
        std::size_t kept = 0;
        for (std::size_t s = 0; s < q.size(); ++s) {
            INFO("symbol " << s << " drawn " << counts[s] << " times, expected " << q[s] * 1e5);
            if (q[s] == 0) {
                CHECK(counts[s] == 0);  // outside the top k or the nucleus: never drawn
                continue;
            }
            ++kept;
            const double e = q[s] * 1e5;
            chi2 += (counts[s] - e) * (counts[s] - e) / e;
        }
        REQUIRE(kept >= 2);
        INFO("chi-square " << chi2 << " with " << kept - 1 << " degrees of freedom");
        CHECK(chi2 < chi_square_1e6[kept - 1]);
    }
}

TEST_CASE("sampling: top_k keeps exactly k symbols, equal logits ranked by id") {
    // Symbols 1, 2 and 3 tie; the top 2 are 1 and 2, never 3.
    layers::Generator gen(fixed_decoder({0.5, 1.0, 1.0, 1.0}), {});
    layers::GenerateOptions o = sampling(50, 1.0, 2, 1.0, 7);
    o.items = 100;
    const auto g = gen.generate({}, o);
    std::vector<std::size_t> counts(4, 0);
    for (const auto& item : g.items)
        for (std::size_t s : item[0].symbols) ++counts[s];
    CHECK(counts[0] == 0);
    CHECK(counts[3] == 0);
    CHECK(counts[1] > 2000);  // 5000 draws, about half each
    CHECK(counts[2] > 2000);
}

TEST_CASE("sampling at temperature 0 or with top_k 1 is greedy decoding, whatever the seed (a Transformer)") {
    layers::TransformerLM d(6, tiny());
    layers::Generator gen(d.decoder(), {});
    const std::vector<std::vector<std::size_t>> prompts{{2}, {3, 1}, {4}};
    const auto want = gen.generate({}, {1, 8, 0, 0}, {}, prompts);
    auto sampled = [&](double temperature, std::size_t k, double p, std::uint64_t seed) {
        layers::GenerateOptions o = sampling(8, temperature, k, p, seed);
        o.end_symbol = 0;
        return gen.generate({}, o, {}, prompts);
    };
    for (std::uint64_t seed : {0, 1, 99}) {
        INFO("seed " << seed);
        check_same(sampled(0.0, 0, 1.0, seed), want, true);
        check_same(sampled(1.0, 1, 1.0, seed), want, true);
        check_same(sampled(2.5, 1, 0.9, seed), want, true);
    }
}

TEST_CASE("sampling: the same seed draws the same symbols, another seed others") {
    layers::Generator gen(fixed_decoder(fixed_logits), {});
    layers::GenerateOptions o = sampling(20, 1.0, 0, 1.0, 5);
    o.items = 3;
    const auto a = gen.generate({}, o), b = gen.generate({}, o);
    check_same(a, b, true);
    o.seed = 6;
    const auto c = gen.generate({}, o);
    std::size_t differ = 0;
    for (std::size_t n = 0; n < 3; ++n) differ += a.items[n][0].symbols != c.items[n][0].symbols;
    CHECK(differ == 3);  // 20 draws alike by chance: below 0.23^20
}

TEST_CASE("sampling is batch invariant: item i with seed s draws what it draws alone with seed s + i") {
    layers::TransformerLM d(6, tiny(2));
    layers::Generator gen(d.decoder(), {});
    // End symbol 0: items end at different steps, and stop costing work.
    auto run = [&](const std::vector<std::vector<std::size_t>>& prompts, std::uint64_t seed) {
        layers::GenerateOptions o = sampling(12, 1.0, 0, 1.0, seed);
        o.end_symbol = 0;
        return gen.generate({}, o, {}, prompts);
    };
    const std::vector<std::vector<std::size_t>> prompts{{2}, {3, 1}, {4, 4, 5}};
    for (std::uint64_t seed : {40, 41, 1000}) {
        INFO("seed " << seed);
        const auto batch = run(prompts, seed);
        for (std::size_t n = 0; n < prompts.size(); ++n) {
            INFO("item " << n);
            const auto alone = run({prompts[n]}, seed + n);
            CHECK(alone.items[0][0].symbols == batch.items[n][0].symbols);
            CHECK(alone.items[0][0].ended == batch.items[n][0].ended);
            CHECK(alone.items[0][0].log_probability ==
                  doctest::Approx(batch.items[n][0].log_probability).epsilon(1e-5));
        }
        // Item 1 among other items (second in one batch, first in another one seed later).
        const auto among = run({{5, 5}, prompts[1], {1}}, seed);
        const auto first = run({prompts[1], {2, 3, 4}, {3}}, seed + 1);
        CHECK(among.items[1][0].symbols == batch.items[1][0].symbols);
        CHECK(first.items[0][0].symbols == batch.items[1][0].symbols);
    }
}

TEST_CASE("on_symbol receives every emitted symbol in order, the end symbol included, never the prompt's") {
    layers::TransformerLM d(6, tiny());
    layers::Generator gen(d.decoder(), {});
    const std::vector<std::vector<std::size_t>> prompts{{2}, {3, 1}, {4}};
    for (bool sample : {false, true}) {
        INFO((sample ? "sampling" : "greedy"));
        std::vector<std::vector<std::size_t>> streamed(prompts.size());
        layers::GenerateOptions o = sample ? sampling(10, 1.0, 0, 1.0, 3) : layers::GenerateOptions{1, 10, 0, 0};
        o.end_symbol = 0;
        o.on_symbol = [&](std::size_t item, std::size_t symbol) {
            REQUIRE(item < streamed.size());
            streamed[item].push_back(symbol);
        };
        const auto g = gen.generate({}, o, {}, prompts);
        for (std::size_t n = 0; n < prompts.size(); ++n) {
            INFO("item " << n);
            std::vector<std::size_t> emitted = g.items[n][0].symbols;
            if (g.items[n][0].ended) emitted.push_back(0);
            CHECK(streamed[n] == emitted);
        }
    }
    layers::GenerateOptions beam{2, 10, 0, 0};
    beam.on_symbol = [](std::size_t, std::size_t) {};
    expect_user_error([&] { gen.generate({}, beam, {}, prompts); }, {"on_symbol", "beam_width 2"});
}

TEST_CASE("on_step sees every pass, prompts' included, and an exception it throws stops any search") {
    layers::TransformerLM d(6, tiny());
    layers::Generator gen(d.decoder(), {});
    // Without an end symbol every item runs its prompt then max_length symbols: the longest prompt
    // (2 symbols after the start) and 10 symbols are 12 passes, numbered 0 to 11.
    const std::vector<std::vector<std::size_t>> prompts{{2}, {3, 1}, {4}};
    std::vector<layers::GenerateOptions> searches{layers::GenerateOptions{1, 10, 0, layers::no_symbol},
                                                  layers::GenerateOptions{3, 10, 0, layers::no_symbol},
                                                  sampling(10, 1.0, 0, 1.0, 3)};
    searches[2].end_symbol = layers::no_symbol;
    struct Stopped {};
    for (layers::GenerateOptions& o : searches) {
        INFO("beam_width " << o.beam_width << ", sample " << o.sample);
        std::vector<std::size_t> passes;
        o.on_step = [&](std::size_t pass) { passes.push_back(pass); };
        const auto whole = gen.generate({}, o, {}, prompts);
        std::vector<std::size_t> expected(12);
        std::iota(expected.begin(), expected.end(), std::size_t{0});
        CHECK(passes == expected);
        passes.clear();
        o.on_step = [&](std::size_t pass) {
            passes.push_back(pass);
            if (pass == 3) throw Stopped{};
        };
        CHECK_THROWS_AS(gen.generate({}, o, {}, prompts), Stopped);
        CHECK(passes == std::vector<std::size_t>{0, 1, 2, 3});
        // The generator runs again after a stop, as before it.
        o.on_step = {};
        CHECK(gen.generate({}, o, {}, prompts).items[1][0].symbols == whole.items[1][0].symbols);
    }
}

TEST_CASE("no_symbol as the end symbol: every hypothesis runs max_length symbols, greedy, beam and sampled") {
    // The bigram of test_decoder.cpp would end; here no symbol ends anything.
    layers::TransformerLM d(6, tiny());
    layers::Generator gen(d.decoder(), {});
    for (const layers::GenerateOptions& o :
         {layers::GenerateOptions{1, 7, 0, layers::no_symbol}, layers::GenerateOptions{3, 7, 0, layers::no_symbol},
          sampling(7, 1.0, 0, 1.0, 11)}) {
        INFO("beam " << o.beam_width << " sample " << o.sample);
        const auto g = gen.generate({}, o, {}, {{1}, {2}});
        REQUIRE(g.items.size() == 2);
        CHECK(g.unfinished == 2);
        for (const auto& item : g.items)
            for (const auto& h : item) {
                CHECK(h.symbols.size() == 7);
                CHECK_FALSE(h.ended);
            }
        CHECK(g.best_sequences(layers::no_symbol).layout().length(0) == 7);
    }
}

TEST_CASE("options.items generates that many items without prompts, and with prompts it must agree") {
    layers::TransformerLM d(6, tiny());
    layers::Generator gen(d.decoder(), {});
    layers::GenerateOptions greedy{1, 6, 0, layers::no_symbol};
    greedy.items = 4;
    const auto g = gen.generate({}, greedy);
    REQUIRE(g.items.size() == 4);
    // The same start symbol and no prompt: greedy gives every item the same, that of one empty prompt.
    const auto one = gen.generate({}, {1, 6, 0, layers::no_symbol}, {}, {{}});
    for (const auto& item : g.items) CHECK(item[0].symbols == one.items[0][0].symbols);
    layers::GenerateOptions o = sampling(6, 1.0, 0, 1.0, 0);
    o.items = 4;
    CHECK(gen.generate({}, o).items.size() == 4);
    expect_user_error([&] { gen.generate({}, o, {}, {{1}, {2}}); }, {"options.items is 4", "2 items"});
    expect_user_error([&] { gen.generate({}, {1, 6, 0, 0}); }, {"options.items"});
}

TEST_CASE("sampling options out of range, or without sample, are UserErrors naming them") {
    layers::Generator gen(fixed_decoder(fixed_logits), {});
    layers::GenerateOptions o = sampling(5, 1.0, 0, 1.0, 0);
    o.items = 1;
    auto with = [&](auto change) {
        layers::GenerateOptions changed = o;
        change(changed);
        return [&gen, changed] { gen.generate({}, changed); };
    };
    expect_user_error(with([](auto& c) { c.beam_width = 3; }), {"sample", "beam_width 3"});
    expect_user_error(with([](auto& c) { c.temperature = -0.5; }), {"temperature -0.5"});
    expect_user_error(with([](auto& c) { c.temperature = std::nan(""); }), {"temperature nan"});
    expect_user_error(with([](auto& c) { c.top_p = 0; }), {"top_p 0"});
    expect_user_error(with([](auto& c) { c.top_p = 1.5; }), {"top_p 1.5"});
    expect_user_error(with([](auto& c) { c.sample = false, c.temperature = 0.7; }), {"temperature 0.7", "sample"});
    expect_user_error(with([](auto& c) { c.sample = false, c.top_k = 5; }), {"top_k 5", "sample"});
    expect_user_error(with([](auto& c) { c.end_symbol = 8; }), {"end_symbol 8"});
}

TEST_CASE("Generator refuses a parameter holding NaN before the first step, naming it and the element") {
    layers::TransformerLM d(6, tiny());
    Parameter p = d.parameters().back();
    xt::xarray<float> v = p.value();
    v.flat(0) = std::nanf("");
    p.set_value(v);
    layers::Generator gen(d.decoder(), {});
    const std::string name = "parameter '" + p.name() + "'";
    for (std::size_t beam : {1, 3}) {
        INFO("beam " << beam);
        expect_user_error([&] { gen.generate({}, {beam, 5, 0, 1}, {}, {{2}}); }, {name, "nan at element 0"});
    }
    v.flat(0) = 0.5f;
    p.set_value(v);
    CHECK(gen.generate({}, {1, 5, 0, 1}, {}, {{2}}).items.size() == 1);
}

TEST_CASE("Generator names a memory value of the wrong feature size by its position and its input") {
    layers::TransformerOptions named = tiny();
    named.name = "bad";
    layers::Seq2SeqTransformer d(6, 6, named);
    layers::Generator gen(d.decoder(), d.memory_inputs());
    auto zeros = [](std::vector<std::size_t> dims) { return Value::batch(xt::xarray<float>(xt::zeros<float>(dims))); };
    // Keys and values [T, 8] and the mask [T] per item; the values are one column short.
    const std::vector<Value> memory{zeros({2, 3, 8}), zeros({2, 3, 7}), zeros({2, 3})};
    expect_user_error(
        [&] {
            gen.generate(memory, {1, 4, 0, 1});
        },
        {"Generator::generate: memory value 1", "'bad.decoder.layers.0.cross_values'", "sample shape [3, 7]",
         "takes [any, 8]"});
}
