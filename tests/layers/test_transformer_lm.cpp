// The decoder-only Transformer language model (layers::TransformerLM, GPT's shape): its logits equal
// a GPT forward written here in plain double loops from the parameters by name (embedding plus
// learned positions, pre-norm blocks of causal multi-head attention and a GELU feed-forward, final
// norm, the tied embedding as the output projection), on ragged sequences; its cached step gives the
// teacher-forced log-probabilities at every step; gradients in double; the names PyTorch weights are
// mapped to; a GPT trained by the PyTorch peer and saved as safetensors gives PyTorch's logits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "core/packed_gemm.hpp"
#include "gradcheck.hpp"
#include "test_support.hpp"

using namespace loom;
using loom::testing::require_gradients;

namespace {

using Matrix = xt::xarray<double>;

// nanoGPT's GPT of tiny sizes over a vocabulary of 7 (tiny_vocabulary): 2 layers of 8, 2 heads, 6 positions.
constexpr std::size_t tiny_vocabulary = 7;
layers::TransformerOptions tiny_lm(bool tie = true) {
    return {.model_dim = 8,
            .heads = 2,
            .feedforward_dim = 16,
            .dropout = 0.0,
            .norm_first = true,
            .epsilon = 1e-5,
            .activation = layers::FeedForwardActivation::gelu,
            .decoder_layers = 2,
            .positions = layers::PositionalEncoding::learned,
            .max_positions = 6,
            .tie_embeddings = tie,
            .scale_embedding = false,
            .name = "gpt"};
}

// Every parameter's value by name, in double.
std::map<std::string, Matrix> by_name(const std::vector<Parameter>& ps) {
    std::map<std::string, Matrix> m;
    for (const Parameter& p : ps) m[p.name()] = p.data<double>();
    return m;
}

// x W + b for each row of x [T, in].
Matrix affine_rows(const Matrix& x, const Matrix& w, const Matrix& b) {
    Matrix y = xt::zeros<double>({x.shape(0), w.shape(1)});
    for (std::size_t t = 0; t < x.shape(0); ++t)
        for (std::size_t o = 0; o < w.shape(1); ++o) {
            double s = b.size() ? b(o) : 0.0;
            for (std::size_t i = 0; i < w.shape(0); ++i) s += x(t, i) * w(i, o);
            y(t, o) = s;
        }
    return y;
}

Matrix layer_norm_rows(const Matrix& x, const Matrix& scale, const Matrix& bias) {
    Matrix y = x;
    const std::size_t d = x.shape(1);
    for (std::size_t t = 0; t < x.shape(0); ++t) {
        double mean = 0, var = 0;
        for (std::size_t i = 0; i < d; ++i) mean += x(t, i) / double(d);
        for (std::size_t i = 0; i < d; ++i) var += (x(t, i) - mean) * (x(t, i) - mean) / double(d);
        for (std::size_t i = 0; i < d; ++i) y(t, i) = (x(t, i) - mean) / std::sqrt(var + 1e-5) * scale(i) + bias(i);
    }
    return y;
}

// The GPT forward of one sequence of ids, in double: [T, V] logits.
Matrix gpt_logits(std::map<std::string, Matrix>& p, const std::vector<std::size_t>& ids, std::size_t layers,
                  std::size_t heads, bool tied) {
    const Matrix& table = p["gpt.embedding"];
    const std::size_t T = ids.size(), d = table.shape(1), dk = d / heads;
    Matrix h = xt::zeros<double>({T, d});
    for (std::size_t t = 0; t < T; ++t)
        for (std::size_t i = 0; i < d; ++i) h(t, i) = table(ids[t], i) + p["gpt.positions.table"](t, i);
    for (std::size_t l = 0; l < layers; ++l) {
        const std::string n = "gpt.layers." + std::to_string(l) + ".";
        const Matrix a = layer_norm_rows(h, p[n + "norm1.scale"], p[n + "norm1.bias"]);
        const Matrix q = affine_rows(a, p[n + "self_attn.q.W"], p[n + "self_attn.q.b"]);
        const Matrix k = affine_rows(a, p[n + "self_attn.k.W"], p[n + "self_attn.k.b"]);
        const Matrix v = affine_rows(a, p[n + "self_attn.v.W"], p[n + "self_attn.v.b"]);
        Matrix o = xt::zeros<double>({T, d});
        for (std::size_t head = 0; head < heads; ++head)
            for (std::size_t i = 0; i < T; ++i) {
                std::vector<double> w(i + 1);  // causal: keys 0 .. i
                double top = -1e300, sum = 0;
                for (std::size_t j = 0; j <= i; ++j) {
                    double s = 0;
                    for (std::size_t c = head * dk; c < (head + 1) * dk; ++c) s += q(i, c) * k(j, c);
                    w[j] = s / std::sqrt(double(dk));
                    top = std::max(top, w[j]);
                }
                for (double& x : w) sum += (x = std::exp(x - top));
                for (std::size_t j = 0; j <= i; ++j)
                    for (std::size_t c = head * dk; c < (head + 1) * dk; ++c) o(i, c) += w[j] / sum * v(j, c);
            }
        h += affine_rows(o, p[n + "self_attn.out.W"], p[n + "self_attn.out.b"]);
        const Matrix b = layer_norm_rows(h, p[n + "norm3.scale"], p[n + "norm3.bias"]);
        Matrix f = affine_rows(b, p[n + "linear1.W"], p[n + "linear1.b"]);
        for (double& x : f) x = 0.5 * x * std::erfc(-x / std::sqrt(2.0));  // GELU
        h += affine_rows(f, p[n + "linear2.W"], p[n + "linear2.b"]);
    }
    const Matrix last = layer_norm_rows(h, p["gpt.norm.scale"], p["gpt.norm.bias"]);
    return tied ? affine_rows(last, xt::transpose(table), Matrix{})
                : affine_rows(last, p["gpt.project.W"], p["gpt.project.b"]);
}

// Parameters moved away from their initial values (biases, norms' scales 1 and biases 0 would hide
// a swapped or missing term).
void perturb(const std::vector<Parameter>& ps, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0.0, 0.3);
    for (const Parameter& p : ps)
        for (double& x : p.data<double>()) x += noise(rng);
}

}  // namespace

TEST_CASE("TransformerLM's logits equal a GPT forward in double loops, tied and untied, ragged") {
    for (bool tied : {true, false}) {
        CAPTURE(tied);
        layers::TransformerLM lm(tiny_vocabulary, tiny_lm(tied));
        to_precision(lm.parameters(), DType::f64);
        perturb(lm.parameters(), tied ? 5 : 6);
        Variable x = sequence::input_variable({1}, "x");
        Variable logits = lm(x);
        const std::vector<std::vector<std::size_t>> seqs{{3, 1, 4, 1, 5, 6}, {2}, {6, 0, 2}};
        const Value got = evaluate({logits}, {{x, Value::index_sequences(seqs)}})[logits];
        auto p = by_name(lm.parameters());
        CHECK(p.count("gpt.project.W") == (tied ? 0u : 1u));
        for (std::size_t n = 0; n < seqs.size(); ++n) {
            const Matrix want = gpt_logits(p, seqs[n], 2, 2, tied);
            const Matrix have = got.sequence<double>(n);
            REQUIRE(have.shape(0) == seqs[n].size());
            for (std::size_t t = 0; t < want.shape(0); ++t)
                for (std::size_t v = 0; v < want.shape(1); ++v) {
                    INFO("item " << n << " step " << t << " symbol " << v);
                    CHECK(have(t, v) == doctest::Approx(want(t, v)).epsilon(1e-11));
                }
        }
    }
}

TEST_CASE("TransformerLM's cached step gives the teacher-forced log-probabilities at every step") {
    layers::TransformerLM lm(tiny_vocabulary, tiny_lm());
    to_precision(lm.parameters(), DType::f64);
    perturb(lm.parameters(), 9);
    Variable x = sequence::input_variable({1}, "x");
    Variable lp = log_softmax(lm(x));
    const std::vector<std::vector<std::size_t>> fed{{3, 1, 4, 1, 5, 6}, {2, 2, 0, 6, 1, 3}};
    const Value want = evaluate({lp}, {{x, Value::index_sequences(fed)}})[lp];

    layers::Decoder d = lm.decoder();
    Variable previous = input_variable({1}, "previous_symbol");
    std::vector<Variable> states;
    for (const Shape& s : d.state_shapes()) states.push_back(input_variable(s, "state"));
    layers::DecoderOutput out = d.step()(previous, states, {});
    std::vector<Variable> outputs{log_softmax(out.logits)};
    outputs.insert(outputs.end(), out.states.begin(), out.states.end());
    Session step(outputs);
    std::vector<Value> values{Value::batch(Matrix(xt::zeros<double>({std::size_t{2}, std::size_t{1}})))};
    for (std::size_t i = 1; i < states.size(); ++i)
        values.push_back(Value::batch(Matrix(xt::zeros<double>({std::size_t{2}, std::size_t{0}, std::size_t{8}}))));
    for (std::size_t t = 0; t < fed[0].size(); ++t) {
        Matrix ids = xt::zeros<double>({std::size_t{2}, std::size_t{1}});
        for (std::size_t n = 0; n < 2; ++n) ids(n, 0) = double(fed[n][t]);
        Bindings in{{previous, Value::batch(ids)}};
        for (std::size_t i = 0; i < states.size(); ++i) in.emplace(states[i], values[i]);
        step.forward(in);
        const Matrix got = step.value(outputs[0]).rows<double>();
        for (std::size_t n = 0; n < 2; ++n)
            for (std::size_t v = 0; v < 7; ++v) {
                INFO("step " << t << " item " << n << " symbol " << v);
                CHECK(got(n, v) == doctest::Approx(want.sequence<double>(n)(t, v)).epsilon(1e-12));
            }
        for (std::size_t i = 0; i < states.size(); ++i) {
            const Value next = step.value(out.states[i]);
            values[i] = d.state_updates()[i] == layers::StateUpdate::replace
                            ? next
                            : Value::batch(Matrix(
                                  xt::concatenate(xt::xtuple(values[i].data<double>(), next.data<double>()), 1)));
        }
    }
}

TEST_CASE("Generator with start_symbol no_symbol starts each item from its own prompt's first symbol") {
    layers::TransformerLM lm(tiny_vocabulary, tiny_lm());
    to_precision(lm.parameters(), DType::f64);
    perturb(lm.parameters(), 13);
    layers::Generator generator(lm.decoder(), {});
    const std::vector<std::vector<std::size_t>> prompts{{3, 1}, {5}, {0, 6, 2}};
    const layers::Generated together = generator.generate(
        {}, {.max_length = 3, .start_symbol = layers::no_symbol, .end_symbol = layers::no_symbol}, {}, prompts);
    REQUIRE(together.items.size() == 3);
    for (std::size_t n = 0; n < 3; ++n) {
        // The same item alone, its first symbol as the start symbol and the rest as its prompt.
        const std::vector<std::size_t> rest(prompts[n].begin() + 1, prompts[n].end());
        const layers::Generated alone = generator.generate(
            {}, {.max_length = 3, .start_symbol = prompts[n][0], .end_symbol = layers::no_symbol}, {}, {rest});
        CHECK(together.items[n][0].symbols == alone.items[0][0].symbols);
        CHECK(together.items[n][0].log_probability == doctest::Approx(alone.items[0][0].log_probability));
        CHECK(together.items[n][0].symbols.size() == 3);
    }
    CHECK_THROWS_WITH_AS(generator.generate({}, {.max_length = 3, .start_symbol = layers::no_symbol}, {}, {{1}, {}}),
                         doctest::Contains("prompt 1 is empty"), UserError);
}

TEST_CASE("Generator with a context starts each item over from its last half, as teacher forcing over the crops") {
    // tiny_lm() has 6 positions: a text of 2 + 14 symbols is drawn in rounds. What each symbol must
    // be, computed here from the teacher-forced graph alone: the likeliest after the round's window,
    // the first round's the prompt's last 6 symbols at most, each later one's the text's last 3,
    // each round drawing until its window would hold a 7th symbol.
    layers::TransformerLM lm(tiny_vocabulary, tiny_lm());
    to_precision(lm.parameters(), DType::f64);
    perturb(lm.parameters(), 21);
    Variable x = sequence::input_variable({1}, "x");
    Variable lp = log_softmax(lm(x));
    Session teacher({lp});
    const auto likeliest_after = [&](const std::vector<std::size_t>& window, double& log_probability) {
        teacher.forward({{x, Value::index_sequences({window})}});
        const Matrix scores = teacher.value(lp).sequence<double>(0);
        std::size_t best = 0;  // the likeliest, the lower id of equals
        for (std::size_t v = 1; v < tiny_vocabulary; ++v)
            if (scores(window.size() - 1, v) > scores(window.size() - 1, best)) best = v;
        log_probability += scores(window.size() - 1, best);
        return best;
    };
    const std::vector<std::vector<std::size_t>> prompts{{3, 1}, {5}, {0, 6, 2, 4, 1, 3, 2, 5}};
    const std::size_t max_length = 14;
    layers::Generator generator(lm.decoder(), {});
    const layers::GenerateOptions options{
        .max_length = max_length, .start_symbol = layers::no_symbol, .end_symbol = layers::no_symbol, .context = 6};
    const layers::Generated got = generator.generate(options, {.prompts = prompts});
    for (std::size_t n = 0; n < prompts.size(); ++n) {
        std::vector<std::size_t> text = prompts[n], want;
        double want_log_probability = 0;
        for (std::size_t at_most = 6; want.size() < max_length; at_most = 3) {
            std::vector<std::size_t> window(text.end() - static_cast<std::ptrdiff_t>(std::min(text.size(), at_most)),
                                            text.end());
            while (window.size() <= 6 && want.size() < max_length) {
                const std::size_t s = likeliest_after(window, want_log_probability);
                window.push_back(s), text.push_back(s), want.push_back(s);
            }
        }
        INFO("item " << n);
        CHECK(got.items[n][0].symbols == want);
        CHECK(got.items[n][0].log_probability == doctest::Approx(want_log_probability).epsilon(1e-10));
    }
    // Sampling: item n of a batch draws what it draws alone with seed + n (its stream runs on across
    // rounds), and a context that never fills changes nothing.
    layers::GenerateOptions sampled = options;
    sampled.sample = true, sampled.seed = 40, sampled.temperature = 1.5;
    const layers::Generated batch = generator.generate(sampled, {.prompts = prompts});
    for (std::size_t n = 0; n < prompts.size(); ++n) {
        layers::GenerateOptions alone = sampled;
        alone.seed = 40 + n;
        CHECK(generator.generate(alone, {.prompts = {prompts[n]}}).items[0][0].symbols == batch.items[n][0].symbols);
    }
    sampled.max_length = 3, sampled.context = 0;
    const layers::Generated unbounded = generator.generate(sampled, {.prompts = {prompts[0]}});
    sampled.context = 5;  // the prompt and 2 of the 3 drawn are fed: 4, never 5
    CHECK(generator.generate(sampled, {.prompts = {prompts[0]}}).items[0][0].symbols == unbounded.items[0][0].symbols);
    layers::GenerateOptions beams = options;
    beams.beam_width = 2;
    CHECK_THROWS_WITH_AS(generator.generate(beams, {.prompts = prompts}),
                         doctest::Contains("context 6 with beam_width 2"), UserError);
}

TEST_CASE("Generator with a context packs the step's weights once for all its rounds") {
    // Seen by breaking set_parameters_fixed's promise on purpose: the products' weights are negated
    // as the second round starts. The rounds read the weights packed for the first, so the text is
    // the unchanged model's, while the model negated from the start draws another.
    if (!packed_gemm_vectorized()) return;  // the portable kernels pack nothing
    layers::TransformerLM lm(tiny_vocabulary, tiny_lm());
    to_precision(lm.parameters(), DType::f64);
    perturb(lm.parameters(), 25);
    const auto negate_products = [&] {  // q, k, v, the attention's output and the feed-forward's two
        for (const Parameter& p : lm.parameters())
            if (p.shape().rank() == 2 && (p.shape()[0] == 8 || p.shape()[0] == 16))
                for (double& x : p.data<double>()) x = -x;
    };
    layers::Generator generator(lm.decoder(), {});
    layers::GenerateOptions o{
        .max_length = 20, .start_symbol = layers::no_symbol, .end_symbol = layers::no_symbol, .context = 6};
    const std::vector<std::vector<std::size_t>> prompts{{3, 1}, {5}, {0, 6, 2}};
    const layers::Generated before = generator.generate(o, {.prompts = prompts});
    std::size_t rounds = 0;
    o.on_step = [&](std::size_t pass) {
        if (pass == 0 && ++rounds == 2) negate_products();
    };
    const layers::Generated changed = generator.generate(o, {.prompts = prompts});
    CHECK(rounds >= 4);
    o.on_step = nullptr;
    const layers::Generated negated = generator.generate(o, {.prompts = prompts});
    std::size_t differ = 0;
    for (std::size_t n = 0; n < prompts.size(); ++n) {
        INFO("item " << n);
        CHECK(changed.items[n][0].symbols == before.items[n][0].symbols);
        differ += negated.items[n][0].symbols != before.items[n][0].symbols;
    }
    CHECK(differ > 0);
}

TEST_CASE("Generator with keep_symbols false streams the same text and keeps only the last context symbols") {
    // tiny_lm() has 6 positions. Streamed with keep_symbols false, each item's callback receives
    // what it receives with every symbol kept (the same seed), the log-probabilities and scores are
    // the same, and what the result holds is the last 6 symbols, however long the text: its memory
    // does not grow with max_length.
    layers::TransformerLM lm(tiny_vocabulary, tiny_lm());
    to_precision(lm.parameters(), DType::f64);
    perturb(lm.parameters(), 23);
    layers::Generator generator(lm.decoder(), {});
    const std::vector<std::vector<std::size_t>> prompts{{3, 1}, {5, 0, 6, 2, 4, 1, 3, 2}};
    for (const std::size_t length : {std::size_t{5}, std::size_t{40}, std::size_t{400}}) {
        for (const bool sample : {true, false}) {
            layers::GenerateOptions o{
                .max_length = length, .start_symbol = layers::no_symbol, .end_symbol = layers::no_symbol, .context = 6};
            if (sample) o.sample = true, o.seed = 9, o.temperature = 1.5;
            std::vector<std::vector<std::size_t>> streamed(2), kept_streamed(2);
            o.on_symbol = [&](std::size_t n, std::size_t symbol) { kept_streamed[n].push_back(symbol); };
            const layers::Generated all = generator.generate(o, {.prompts = prompts});
            o.keep_symbols = false;
            o.on_symbol = [&](std::size_t n, std::size_t symbol) { streamed[n].push_back(symbol); };
            const layers::Generated last = generator.generate(o, {.prompts = prompts});
            for (std::size_t n = 0; n < 2; ++n) {
                INFO("length " << length << ", item " << n << (sample ? ", sampled" : ", greedy"));
                const std::vector<std::size_t>& text = all.items[n][0].symbols;
                REQUIRE(text.size() == length);
                CHECK(streamed[n] == text);
                CHECK(kept_streamed[n] == text);
                const std::vector<std::size_t>& tail = last.items[n][0].symbols;
                CHECK(tail.size() == std::min<std::size_t>(length, 6));
                CHECK(std::equal(tail.begin(), tail.end(), text.end() - static_cast<std::ptrdiff_t>(tail.size())));
                CHECK(last.items[n][0].log_probability == all.items[n][0].log_probability);
                CHECK(last.items[n][0].score == all.items[n][0].score);
            }
        }
    }
    // Without a callback nothing would hold the text: refused.
    layers::GenerateOptions silent{
        .max_length = 3, .start_symbol = layers::no_symbol, .end_symbol = layers::no_symbol, .context = 6};
    silent.keep_symbols = false;
    CHECK_THROWS_WITH_AS(generator.generate(silent, {.prompts = prompts}), doctest::Contains("give on_symbol"),
                         UserError);
}

TEST_CASE(
    "TransformerOptions::gpt is nanoGPT's GPTConfig: GELU, 4 x width, learned positions, tied, dropout not in the "
    "MLP") {
    const layers::TransformerOptions g = layers::TransformerOptions::gpt(3, 2, 8, 16, 0.25);
    CHECK(g.decoder_layers == 3);
    CHECK(g.heads == 2);
    CHECK(g.model_dim == 8);
    CHECK(g.feedforward_dim == 32);
    CHECK(g.max_positions == 16);
    CHECK(g.positions == layers::PositionalEncoding::learned);
    CHECK(g.activation == layers::FeedForwardActivation::gelu);
    CHECK(g.norm_first);
    CHECK(g.tie_embeddings);
    CHECK_FALSE(g.scale_embedding);
    CHECK(g.dropout == 0.25);
    CHECK(g.attention_dropout == 0.25);
    CHECK(g.feedforward_dropout == 0.0);
    CHECK(g.name == "gpt");
    // The model it makes is the tiny GPT of the tests above with a 4 x 8 feed-forward, parameter for parameter.
    layers::TransformerOptions tiny = tiny_lm();
    tiny.feedforward_dim = 32;
    const layers::TransformerLM a(tiny_vocabulary, layers::TransformerOptions::gpt(2, 2, 8, 6));
    const layers::TransformerLM b(tiny_vocabulary, tiny);
    REQUIRE(a.parameters().size() == b.parameters().size());
    for (std::size_t i = 0; i < a.parameters().size(); ++i) {
        CHECK(a.parameters()[i].name() == b.parameters()[i].name());
        CHECK(a.parameters()[i].shape() == b.parameters()[i].shape());
    }
}

TEST_CASE("TransformerLM: gradients in double on ragged sequences") {
    layers::TransformerLM lm(tiny_vocabulary, tiny_lm());
    to_precision(lm.parameters(), DType::f64);
    perturb(lm.parameters(), 11);
    Variable x = sequence::input_variable({1}, "x");
    const Bindings in{{x, Value::index_sequences({{3, 1, 4}, {2}, {6, 0, 2, 5, 1}})}};
    require_gradients("TransformerLM", tanh(lm(x)), in, loom::testing::as_variables(lm.parameters()),
                      {.max_elements = 30});
}

// A GPT of options `o` (with some dropout) in double, its parameters perturbed by `seed`, and the
// same GPT without dropout holding the same values.
struct DroppingAndPlain {
    layers::TransformerLM dropping, plain;
    DroppingAndPlain(const layers::TransformerOptions& o, std::uint64_t seed)
        : dropping(tiny_vocabulary, o), plain(tiny_vocabulary, tiny_lm()) {
        to_precision(dropping.parameters(), DType::f64);
        perturb(dropping.parameters(), seed);
        to_precision(plain.parameters(), DType::f64);
        for (std::size_t i = 0; i < plain.parameters().size(); ++i)
            plain.parameters()[i].set_value(dropping.parameters()[i].data<double>());
    }
};

TEST_CASE("TransformerLM's attention_dropout drops weights in training only, and its generating step takes none") {
    auto o = tiny_lm();
    o.attention_dropout = 0.5;
    const DroppingAndPlain models(o, 12);
    const layers::TransformerLM &dropping = models.dropping, &plain = models.plain;
    Variable x = sequence::input_variable({1}, "x");
    const Bindings in{{x, Value::index_sequences({{3, 1, 4, 1, 5, 6}, {2, 6}})}};
    Variable a = dropping(x), b = plain(x);
    const Matrix inference = evaluate({a}, in)[a].sequence<double>(0);
    CHECK(xt::allclose(inference, evaluate({b}, in)[b].sequence<double>(0), 1e-15, 1e-15));
    {
        const TrainingScope training;
        const Matrix trained = evaluate({a}, in)[a].sequence<double>(0);
        // The first step sees one key, whose weight 1 is kept (x2) or dropped: either way it differs.
        CHECK_FALSE(xt::allclose(trained, inference, 1e-6, 1e-6));
    }
    // The generating step ignores attention_dropout (it is inference): greedy decoding runs.
    const auto out =
        layers::Generator(dropping.decoder(), {})
            .generate({}, {.max_length = 4, .start_symbol = 2, .end_symbol = layers::no_symbol, .items = 1});
    CHECK(out.items.at(0).at(0).symbols.size() == 4);
    o.attention_dropout = 1.0;
    CHECK_THROWS_WITH_AS(layers::TransformerLM(tiny_vocabulary, o), doctest::Contains("attention_dropout 1"),
                         UserError);
}

TEST_CASE("A Generator's step drops nothing, also in training mode: a GPT with dropout generates as without it") {
    auto o = tiny_lm();
    o.dropout = 0.5;  // on the embedding and every sublayer's output
    const DroppingAndPlain models(o, 13);
    const layers::TransformerLM &dropping = models.dropping, &plain = models.plain;
    const layers::GenerateOptions g{
        .beam_width = 1, .max_length = 5, .start_symbol = 2, .end_symbol = layers::no_symbol, .items = 3};
    const auto symbols = [&](const layers::Generated& out) {
        std::vector<std::vector<std::size_t>> all;
        for (const auto& item : out.items) all.push_back(item.at(0).symbols);
        return all;
    };
    const auto expected = symbols(layers::Generator(plain.decoder(), {}).generate(g, {}));
    CHECK(symbols(layers::Generator(dropping.decoder(), {}).generate(g, {})) == expected);
    const TrainingScope training;  // a program sampling between training steps
    CHECK(symbols(layers::Generator(dropping.decoder(), {}).generate(g, {})) == expected);
    // The teacher-forced graph, built outside a Generator, still drops in training mode.
    Variable x = sequence::input_variable({1}, "x");
    const Bindings in{{x, Value::index_sequences({{3, 1, 4, 1}})}};
    Variable a = dropping(x), b = plain(x);
    CHECK_FALSE(
        xt::allclose(evaluate({a}, in)[a].sequence<double>(0), evaluate({b}, in)[b].sequence<double>(0), 1e-6, 1e-6));
}

TEST_CASE("TransformerLM names its parameters as GPT weights are mapped to, and refuses bad sizes") {
    layers::TransformerLM lm(tiny_vocabulary, tiny_lm());
    std::map<std::string, std::vector<std::size_t>> shapes;
    for (const Parameter& p : lm.parameters()) shapes[p.name()] = {p.shape().begin(), p.shape().end()};
    CHECK(shapes["gpt.embedding"] == std::vector<std::size_t>{7, 8});
    CHECK(shapes["gpt.positions.table"] == std::vector<std::size_t>{6, 8});
    CHECK(shapes["gpt.layers.1.self_attn.q.W"] == std::vector<std::size_t>{8, 8});
    CHECK(shapes["gpt.layers.0.linear1.W"] == std::vector<std::size_t>{8, 16});
    CHECK(shapes["gpt.layers.0.norm3.scale"] == std::vector<std::size_t>{8});
    CHECK(shapes["gpt.norm.bias"] == std::vector<std::size_t>{8});
    CHECK(shapes.size() == 2 + 2 * 16 + 2);  // embedding, positions, 16 per layer, the final norm's 2
    CHECK_THROWS_WITH_AS(layers::TransformerLM(0, tiny_lm()), doctest::Contains("gpt: the vocabulary"), UserError);
    auto bad = tiny_lm();
    bad.heads = 3;
    CHECK_THROWS_WITH_AS(layers::TransformerLM(tiny_vocabulary, bad), doctest::Contains("model_dim 8"), UserError);
}

TEST_CASE("TransformerLM reads a GPT the PyTorch peer trained (safetensors) and gives PyTorch's logits") {
    // tests/layers/gpt_peer/how_made.txt: bench/torch_lm.py's tiny GPT and its float32 logits.
    const std::string dir = std::string(LOOM_SOURCE_DIR) + "/tests/layers/gpt_peer/";
    const std::string text = "to be, or not to be: that is the question.\nwhether tis nobler in the mind to suffer\n";
    std::string alphabet;  // the text's characters in code-point order, as both engines number them
    for (char c : text)
        if (alphabet.find(c) == std::string::npos) alphabet += c;
    std::sort(alphabet.begin(), alphabet.end());
    REQUIRE(alphabet.size() == 22);
    layers::TransformerLM lm(alphabet.size(), {.model_dim = 8,
                                               .heads = 2,
                                               .feedforward_dim = 32,
                                               .dropout = 0.0,
                                               .activation = layers::FeedForwardActivation::gelu,
                                               .decoder_layers = 2,
                                               .positions = layers::PositionalEncoding::learned,
                                               .max_positions = 12,
                                               .tie_embeddings = true,
                                               .scale_embedding = false,
                                               .name = "gpt"});
    assign_safetensors(read_safetensors(dir + "gpt.safetensors"), lm.parameters());  // every name, no extra

    std::ifstream in(dir + "logits.txt");
    REQUIRE(in);
    std::string line;
    std::vector<std::vector<double>> want;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream row(line);
        want.emplace_back();
        for (double v; row >> v;) want.back().push_back(v);
    }
    const std::string prompt = "to be, or n";
    REQUIRE(want.size() == prompt.size());
    std::vector<std::size_t> ids;
    for (char c : prompt) ids.push_back(alphabet.find(c));
    Variable x = sequence::input_variable({1}, "x");
    Variable logits = lm(x);
    const Matrix got = evaluate({logits}, {{x, Value::index_sequences({ids})}})[logits].sequence<double>(0);
    for (std::size_t t = 0; t < want.size(); ++t) {
        REQUIRE(want[t].size() == alphabet.size());
        for (std::size_t v = 0; v < alphabet.size(); ++v) {
            INFO("position " << t << " symbol " << v);
            CHECK(std::abs(got(t, v) - want[t][v]) < 1e-5);
        }
    }
}

TEST_CASE(
    "TransformerLM's feedforward_dropout: GPT's 0 keeps the feed-forward whole in training, unset it is dropout's") {
    Variable x = sequence::input_variable({1}, "x");
    const Bindings in{{x, Value::index_sequences({{3, 1, 4, 1, 5, 6}, {2, 6}})}};
    // The feed-forward's dropout alone: training-mode logits change only where it is on.
    for (const std::optional<double> rate : {std::optional<double>{0.5}, std::optional<double>{0.0}}) {
        auto o = tiny_lm();
        o.feedforward_dropout = rate;
        layers::TransformerLM lm(tiny_vocabulary, o);
        to_precision(lm.parameters(), DType::f64);
        perturb(lm.parameters(), 13);
        Variable y = lm(x);
        const Matrix inference = evaluate({y}, in)[y].sequence<double>(0);
        const TrainingScope training;
        const Matrix trained = evaluate({y}, in)[y].sequence<double>(0);
        CAPTURE(*rate);
        CHECK(xt::allclose(trained, inference, 1e-6, 1e-6) == (*rate == 0.0));
    }
    // Unset, the block drops at `dropout`'s rate, as PyTorch's layers: with every other dropout of
    // the model at that rate too, the logits in training differ from GPT's (0) under the same seed.
    auto o = tiny_lm();
    o.dropout = 0.5;
    layers::TransformerLM pytorch_like(tiny_vocabulary, o);
    o.feedforward_dropout = 0.0;
    layers::TransformerLM gpt(tiny_vocabulary, o);
    for (std::size_t i = 0; i < gpt.parameters().size(); ++i)
        gpt.parameters()[i].set_value(pytorch_like.parameters()[i].value());
    Variable a = pytorch_like(x), b = gpt(x);
    const TrainingScope training;
    set_seed(3);
    const xt::xarray<float> with = evaluate({a}, in)[a].sequence(0);
    set_seed(3);
    const xt::xarray<float> without = evaluate({b}, in)[b].sequence(0);
    CHECK_FALSE(xt::allclose(with, without, 1e-6, 1e-6));
    o.feedforward_dropout = 1.0;
    CHECK_THROWS_WITH_AS(layers::TransformerLM(tiny_vocabulary, o), doctest::Contains("feedforward_dropout 1"),
                         UserError);
}

TEST_CASE(
    "TransformerLM model files keep feedforward_dropout, and a file without it (loom 0.4.0) reads it as dropout's") {
    auto o = tiny_lm();
    o.dropout = 0.2, o.feedforward_dropout = 0.0;
    layers::TransformerLM lm(tiny_vocabulary, o);
    const auto path = (std::filesystem::temp_directory_path() / "loom_test_feedforward_dropout.loom").string();
    lm.save(path);
    const auto back = layers::TransformerLM::load(path).options();
    REQUIRE(back.feedforward_dropout.has_value());
    CHECK(*back.feedforward_dropout == 0.0);
    CHECK(back.dropout == 0.2);
    // The same file with the setting taken out of the model's record, as 0.4.0 wrote it.
    ModelFile f = read_model_file(path);
    std::string& record = f.records.at("transformer");
    const std::size_t at = record.find("feedforward_dropout");
    REQUIRE(at != std::string::npos);
    const std::size_t value_end = record.find(' ', record.find(' ', at) + 1);  // "name value " (not the last)
    REQUIRE(value_end != std::string::npos);
    record.erase(at, value_end + 1 - at);
    save_model_file(path, f.kind, lm.parameters(), f.records);
    const auto old = layers::TransformerLM::load(path).options();
    CHECK_FALSE(old.feedforward_dropout.has_value());
    std::filesystem::remove(path);
}

TEST_CASE(
    "TransformerLM: a sequence past its learned positions is refused naming the model, the length and the table") {
    layers::TransformerLM lm(tiny_vocabulary, tiny_lm());  // max_positions 6
    const Variable x = sequence::input_variable({1}, "symbols");
    const Variable logits = lm(x);
    const char* says =
        "TransformerLM 'gpt': a sequence of 8 steps is longer than its learned positions "
        "(max_positions 6)";
    // The longest of a ragged batch is named, whichever item it is.
    CHECK_THROWS_WITH_AS(evaluate({logits}, {{x, Value::index_sequences({{3, 1}, {1, 2, 3, 4, 5, 6, 0, 1}})}}),
                         doctest::Contains(says), UserError);
    CHECK_THROWS_WITH_AS(evaluate({logits}, {{x, Value::index_sequences({{1, 2, 3, 4, 5, 6, 0}})}}),
                         doctest::Contains("a sequence of 7 steps is longer"), UserError);
    CHECK(evaluate({logits}, {{x, Value::index_sequences({{1, 2, 3, 4, 5, 6}})}})[logits].sequence(0).shape(0) == 6);
    // The generating step past the table says the same of the sequence it has made.
    layers::Generator generator(lm.decoder(), {});
    CHECK_THROWS_WITH_AS(
        generator.generate({.max_length = 9, .start_symbol = 1, .end_symbol = layers::no_symbol, .items = 1}),
        doctest::Contains("TransformerLM 'gpt': a sequence of 7 steps is longer"), UserError);
    // The layer alone names its table when no model is given.
    const layers::Layer table = layers::LearnedPositionalEncoding(2, 4, "pos");
    const Variable p = sequence::input_variable({1}, "p");
    CHECK_THROWS_WITH_AS(evaluate({table(p)}, {{p, Value::index_sequences({{0, 1, 2}})}}),
                         doctest::Contains("pos: a sequence of 3 steps is longer than its learned positions "
                                           "(max_positions 2)"),
                         UserError);
}
