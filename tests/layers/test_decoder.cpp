// Decoders that attend over another axis inside their loop, and generate: the attention family over
// an AttentionMemory (values against a step-by-step computation written here, gradients by finite
// differences in double on ragged batches, batch invariance), teacher forcing and generation from
// one step function, greedy decoding and beam search on a bigram model worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "gradcheck.hpp"
#include "test_support.hpp"

using namespace loom;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

namespace {

using Matrix = xt::xarray<double>;
using Vector = std::vector<double>;

const std::vector<std::size_t> source_lengths{4, 1, 3}, target_lengths{2, 3, 1};
constexpr std::size_t d = 3, e = 2;

Vector row_times(const Vector& v, const Matrix& w) {  // v [k] x w [k, m]
    Vector out(w.shape()[1], 0.0);
    for (std::size_t i = 0; i < v.size(); ++i)
        for (std::size_t j = 0; j < out.size(); ++j) out[j] += v[i] * w(i, j);
    return out;
}
double dot(const Vector& a, const Vector& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}
Vector row(const Matrix& m, std::size_t i) {
    Vector r(m.shape()[1]);
    for (std::size_t j = 0; j < r.size(); ++j) r[j] = m(i, j);
    return r;
}
Vector softmax(const Vector& s) {
    double top = -1e300, sum = 0;
    for (double v : s) top = std::max(top, v);
    Vector w(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) sum += (w[i] = std::exp(s[i] - top));
    for (double& v : w) v /= sum;
    return w;
}

enum class Kind { dot, scaled, general, additive, local };
const char* name(Kind k) {
    const char* names[] = {"dot", "scaled", "general", "additive", "local-p"};
    return names[static_cast<int>(k)];
}

// A decoder loop h_t = tanh(x_t Wx + h~_{t-1} Wf), c_t = attention(h_t) over the source,
// h~_t = tanh([c_t; h_t] Wc) (Luong's input feeding: h~ goes into the next step).
struct Model {
    Variable source, x, h, context, feed, weights;
    std::vector<Parameter> params;
    std::function<std::vector<double>(const Vector& h, const Matrix& src, Vector& weights)> attend;
};

Model build(Kind kind) {
    Model m;
    m.source = sequence::input_variable({d}, "source");
    m.x = sequence::input_variable({e}, "x");
    Parameter wx = parameter({e, d}, glorot_uniform(), "Wx", DType::f64);
    Parameter wf = parameter({d, d}, glorot_uniform(), "Wf", DType::f64);
    Parameter wc = parameter({2 * d, d}, glorot_uniform(), "Wc", DType::f64);
    const auto memory = layers::attention_memory(m.source);
    Variable feed_in = placeholder({d});
    m.h = tanh(times(m.x, wx) + times(past_value(feed_in), wf), "h");
    layers::Attention a;
    switch (kind) {
        case Kind::dot:
            a = layers::dot_product_attention(m.h, memory);
            break;
        case Kind::scaled:
            a = layers::dot_product_attention(m.h, memory, true);
            break;
        case Kind::general: {
            layers::GeneralAttention g;
            a = g(m.h, memory);
            m.params = g.parameters();
            break;
        }
        case Kind::additive: {
            layers::AdditiveAttention g(2);
            a = g(m.h, memory);
            m.params = g.parameters();
            break;
        }
        case Kind::local: {
            layers::LocalAttention g(2.0);
            a = g(m.h, memory);
            m.params = g.parameters();
            break;
        }
    }
    m.context = a.context;
    m.weights = a.weights;
    m.feed = tanh(times(splice({a.context, m.h}), wc), "feed");
    m.feed.replace_placeholders({{feed_in, m.feed}});
    m.params.insert(m.params.end(), {wx, wf, wc});
    to_precision(m.params, DType::f64);  // the attention's own parameters are made at its call, in float
    return m;
}

// The attention of one query over one item's source rows, written from the formulas.
Vector reference_attention(Kind kind, const Model& m, const Vector& h, const Matrix& src, Vector& w) {
    const std::size_t len = src.shape()[0];
    Vector scores(len);
    auto p = [&](std::size_t i) { return m.params[i].value<double>(); };
    double pt = 0;
    for (std::size_t s = 0; s < len; ++s) {
        const Vector k = row(src, s);
        switch (kind) {
            case Kind::dot:
                scores[s] = dot(h, k);
                break;
            case Kind::scaled:
                scores[s] = dot(h, k) / std::sqrt(double(d));
                break;
            case Kind::general:
                scores[s] = dot(row_times(h, p(0)), k);
                break;
            case Kind::additive: {  // parameters: W_k, W_q, v
                const Vector kp = row_times(k, p(0)), qp = row_times(h, p(1));
                const auto v = p(2);
                for (std::size_t j = 0; j < kp.size(); ++j) scores[s] += v(j) * std::tanh(kp[j] + qp[j]);
                break;
            }
            case Kind::local:
                scores[s] = dot(h, k);
                break;
        }
    }
    w = softmax(scores);
    if (kind == Kind::local) {  // parameters: W_p, v_p; p_t = S sigmoid(v_p . tanh(h W_p)), sigma = D / 2 = 1
        const Vector hid = row_times(h, p(0));
        const auto vp = p(1);
        double z = 0;
        for (std::size_t j = 0; j < hid.size(); ++j) z += vp(j) * std::tanh(hid[j]);
        pt = double(len) / (1.0 + std::exp(-z));
        for (std::size_t s = 0; s < len; ++s) w[s] *= std::exp(-(double(s) - pt) * (double(s) - pt) / 2.0);
    }
    Vector c(d, 0.0);
    for (std::size_t s = 0; s < len; ++s)
        for (std::size_t k = 0; k < d; ++k) c[k] += w[s] * src(s, k);
    return c;
}

struct Data {
    std::vector<Matrix> source, x;
    Bindings bind(const Model& m) const { return {{m.source, Value::sequences(source)}, {m.x, Value::sequences(x)}}; }
};
Data data() { return {random_sequences({d}, source_lengths, 21), random_sequences({e}, target_lengths, 22)}; }

}  // namespace

TEST_CASE("attention over a memory inside a decoder loop: every kind against a step-by-step computation") {
    for (Kind kind : {Kind::dot, Kind::scaled, Kind::general, Kind::additive, Kind::local}) {
        INFO(name(kind));
        Model m = build(kind);
        const Data in = data();
        auto out = evaluate({m.context, m.weights, m.feed}, in.bind(m));
        const std::size_t np = m.params.size();
        const auto wx = m.params[np - 3].value<double>(), wf = m.params[np - 2].value<double>(),
                   wc = m.params[np - 1].value<double>();
        for (std::size_t n = 0; n < target_lengths.size(); ++n) {
            auto ctx = out[m.context].sequence<double>(n), weights = out[m.weights].sequence<double>(n);
            REQUIRE(weights.shape()[1] == *std::max_element(source_lengths.begin(), source_lengths.end()));
            Vector feed(d, 0.0);
            for (std::size_t t = 0; t < target_lengths[n]; ++t) {
                Vector h = row_times(row(in.x[n], t), wx);
                const Vector f = row_times(feed, wf);
                for (std::size_t k = 0; k < d; ++k) h[k] = std::tanh(h[k] + f[k]);
                Vector w;
                const Vector c = reference_attention(kind, m, h, in.source[n], w);
                for (std::size_t k = 0; k < d; ++k) CHECK(ctx(t, k) == doctest::Approx(c[k]).epsilon(1e-12));
                for (std::size_t s = 0; s < weights.shape()[1]; ++s)
                    CHECK(weights(t, s) == doctest::Approx(s < w.size() ? w[s] : 0.0).epsilon(1e-12));
                Vector both = c;
                both.insert(both.end(), h.begin(), h.end());
                feed = row_times(both, wc);
                for (double& v : feed) v = std::tanh(v);
            }
        }
    }
}

TEST_CASE("attention over a memory inside a decoder loop: gradients in double and batch invariance") {
    for (Kind kind : {Kind::dot, Kind::scaled, Kind::general, Kind::additive, Kind::local}) {
        INFO(name(kind));
        Model m = build(kind);
        const Data in = data();
        std::vector<Variable> wrt = loom::testing::as_variables(m.params);
        wrt.insert(wrt.end(), {m.source, m.x});
        require_gradients(name(kind), m.feed, in.bind(m), wrt);
        const auto report = check_batch_invariance({m.feed}, in.bind(m));
        INFO(report.str());
        CHECK(report.ok);
    }
}

TEST_CASE("attention over a memory: a keys sequence that is not a batch value is refused by name") {
    Variable q = sequence::input_variable({d}, "q"), k = sequence::input_variable({d}, "k");
    layers::AttentionMemory wrong{k, k, k, k, k};
    CHECK_THROWS_WITH_AS(layers::dot_product_attention(q, wrong), doctest::Contains("batch value"), UserError);
}

// ---- generation ----

namespace {

// A bigram model: logits = log p(next | previous), a table lookup; one state counts the steps.
// Symbols: 0 end, 1 start, 2 'a', 3 'b'.
//   start -> a 0.55, b 0.45 - 1e-6, end 1e-6;  a -> a 0.45, b 0.35, end 0.2;  b -> end 0.9, a 0.05, b 0.05.
Matrix bigram_log_probs() {
    Matrix p = {
        {0.25, 0.25, 0.25, 0.25}, {1e-6, 0.0, 0.55, 0.45 - 1e-6}, {0.2, 0.0, 0.45, 0.35}, {0.9, 0.0, 0.05, 0.05}};
    Matrix lp = xt::log(p + 1e-30);
    return lp;
}

layers::Decoder bigram_decoder(const Parameter& table) {
    return layers::Decoder(
        [table](const Variable& previous, const std::vector<Variable>& states, const std::vector<Variable>&) {
            return layers::DecoderOutput{embedding(previous, table), {states[0] + constant(1.0)}};
        },
        {Shape{1}});
}

Value counters(std::size_t n) { return Value::batch(xt::xarray<float>(xt::zeros<float>({n, std::size_t{1}}))); }

}  // namespace

TEST_CASE("greedy decoding on a bigram model: always the likeliest next symbol, stopped at max_length and said so") {
    Parameter table = parameter(xt::xarray<float>(bigram_log_probs()), "bigram");
    layers::Generator gen(bigram_decoder(table), {});
    CHECK(gen.vocabulary() == 4);
    const auto g = gen.generate({}, {1, 6, 1, 0}, {counters(2)});
    REQUIRE(g.items.size() == 2);
    CHECK(g.unfinished == 2);  // a -> a forever: the end symbol never wins
    for (const auto& item : g.items) {
        REQUIRE(item.size() == 1);
        CHECK(item[0].symbols == std::vector<std::size_t>{2, 2, 2, 2, 2, 2});
        CHECK_FALSE(item[0].ended);
        const double lp = std::log(0.55) + 5 * std::log(0.45);
        CHECK(item[0].log_probability == doctest::Approx(lp).epsilon(1e-5));
        CHECK(item[0].score == doctest::Approx(lp / 6).epsilon(1e-5));
    }
}

TEST_CASE("beam search on a bigram model: the hypotheses worked out by hand, length-normalized") {
    Parameter table = parameter(xt::xarray<float>(bigram_log_probs()), "bigram");
    layers::Generator gen(bigram_decoder(table), {});
    // Width 2. Step 1: a (.55), b (.45). Step 2: b,end .405 ends ([b], log(.405)/2 = -0.452); live a,a
    // (.2475) and a,b (.1925). Step 3: a,b,end .17325 ends ([a,b], log/3 = -0.584); live a,a,a (.111)
    // and a,a,b (.0866); the best live so far, log(.111)/4 = -0.550, beats -0.584: go on. Step 4:
    // a,a,b,end .07794 ends (log/4 = -0.638); best live a,a,a,a log(.04995)/5 = -0.600 < -0.584: done.
    const auto g = gen.generate({}, {2, 10, 1, 0}, {counters(3)});
    REQUIRE(g.items.size() == 3);
    CHECK(g.unfinished == 0);
    for (const auto& item : g.items) {
        REQUIRE(item.size() == 2);
        CHECK(item[0].symbols == std::vector<std::size_t>{3});
        CHECK(item[0].ended);
        CHECK(item[0].log_probability == doctest::Approx(std::log(0.45 * 0.9)).epsilon(1e-5));
        CHECK(item[0].score == doctest::Approx(std::log(0.45 * 0.9) / 2).epsilon(1e-5));
        CHECK(item[1].symbols == std::vector<std::size_t>{2, 3});
        CHECK(item[1].score == doctest::Approx(std::log(0.55 * 0.35 * 0.9) / 3).epsilon(1e-5));
    }
    const Value best = g.best_sequences(0);
    CHECK(best.layout().length(0) == 2);  // b, end
}

TEST_CASE("beam search with an absurd width (2^63) keeps every candidate instead of wrapping 2K around") {
    Parameter table = parameter(xt::xarray<float>(bigram_log_probs()), "bigram");
    layers::Generator gen(bigram_decoder(table), {});
    const std::size_t huge = std::size_t{1} << 63;
    const auto wide = gen.generate({}, {huge, 3, 1, 0}, {counters(2)});
    const auto exact = gen.generate({}, {64, 3, 1, 0}, {counters(2)});  // wider than every hypothesis here
    REQUIRE(wide.items.size() == 2);
    for (std::size_t n = 0; n < 2; ++n) {
        REQUIRE(!wide.items[n].empty());
        REQUIRE(wide.items[n].size() == exact.items[n].size());
        for (std::size_t k = 0; k < exact.items[n].size(); ++k) {
            CHECK(wide.items[n][k].symbols == exact.items[n][k].symbols);
            CHECK(wide.items[n][k].score == doctest::Approx(exact.items[n][k].score));
        }
    }
}

TEST_CASE("generation: bad options are UserErrors before any step") {
    Parameter table = parameter(xt::xarray<float>(bigram_log_probs()), "bigram");
    layers::Generator gen(bigram_decoder(table), {});
    CHECK_THROWS_WITH_AS(gen.generate({}, {0, 5, 1, 0}, {counters(1)}), doctest::Contains("beam_width"), UserError);
    CHECK_THROWS_WITH_AS(gen.generate({}, {1, 0, 1, 0}, {counters(1)}), doctest::Contains("max_length"), UserError);
    CHECK_THROWS_WITH_AS(gen.generate({}, {1, 5, 1, 4}, {counters(1)}), doctest::Contains("end_symbol 4"), UserError);
    CHECK_THROWS_WITH_AS(gen.generate({}, {1, 5, 7, 0}, {counters(1)}), doctest::Contains("start_symbol 7"), UserError);
}

namespace {

// An attention decoder over a source sequence, written once: embedding of the previous symbol,
// an LSTM-like state update fed by the previous h~, general attention over the memory, h~, logits.
struct Seq2Seq {
    std::size_t vocab = 5;
    Parameter emb = parameter({5, 2}, glorot_uniform(), "emb");
    Parameter w = parameter({2 + d, d}, glorot_uniform(), "W");
    Parameter wc = parameter({2 * d, d}, glorot_uniform(), "Wc");
    Parameter wo = parameter({d, 5}, glorot_uniform(), "Wo");
    layers::GeneralAttention attention;
    layers::Decoder decoder() const {
        Seq2Seq self = *this;
        return layers::Decoder(
            [self](const Variable& previous, const std::vector<Variable>& states, const std::vector<Variable>& memory) {
                Variable h = tanh(times(splice({embedding(previous, self.emb), states[1]}), self.w));
                const auto a = self.attention(h, layers::AttentionMemory::from_list(memory));
                Variable feed = tanh(times(splice({a.context, h}), self.wc));
                return layers::DecoderOutput{times(feed, self.wo), {h, feed}};
            },
            {Shape{d}, Shape{d}});
    }
};

}  // namespace

TEST_CASE("one step function: greedy generation agrees with the teacher-forced graph on its own output") {
    Seq2Seq model;
    const auto decoder = model.decoder();
    Variable source = sequence::input_variable({d}, "source");
    const auto memory = layers::attention_memory(source);
    const auto src = random_sequences({d}, source_lengths, 31, -2, 2);
    // The memory evaluated once, bound to the generator's inputs.
    const auto mem = memory.list();
    auto values = evaluate(mem, {{source, Value::sequences(src)}});
    std::vector<Value> memory_values;
    for (const auto& v : mem) memory_values.push_back(values[v]);
    layers::Generator gen(decoder, layers::attention_memory_inputs(d, d).list());
    const auto g = gen.generate(memory_values, {1, 8, 1, 0});
    // Teacher forcing on the generated symbols: the same distributions, so each step's argmax is
    // the generated symbol and the log-probabilities add up to the hypothesis'.
    std::vector<std::vector<std::size_t>> previous;
    for (const auto& item : g.items) {
        previous.push_back({1});
        const auto& s = item[0].symbols;
        previous.back().insert(previous.back().end(), s.begin(), s.end());
        if (!item[0].ended) previous.back().pop_back();
    }
    Variable prev = sequence::input_variable({1}, "previous");
    const auto out = decoder.unfold(prev, mem);
    Variable lp = log_softmax(out.logits);
    auto v = evaluate({lp}, {{source, Value::sequences(src)}, {prev, Value::index_sequences(previous)}});
    for (std::size_t n = 0; n < g.items.size(); ++n) {
        const auto& h = g.items[n][0];
        auto l = v[lp].sequence<double>(n);
        double sum = 0;
        for (std::size_t t = 0; t < previous[n].size(); ++t) {
            std::size_t best = 0;
            for (std::size_t k = 1; k < 5; ++k)
                if (l(t, k) > l(t, best)) best = k;
            const std::size_t emitted = t < h.symbols.size() ? h.symbols[t] : 0;
            CHECK(best == emitted);
            sum += l(t, emitted);
        }
        CHECK(sum == doctest::Approx(h.log_probability).epsilon(1e-4));
    }
}

TEST_CASE("generation: a memory value its input refuses is named by its position and the input, before any step") {
    Seq2Seq model;
    layers::Generator gen(model.decoder(), layers::attention_memory_inputs(d, d).list());
    Variable source = sequence::input_variable({d}, "source");
    const auto mem = layers::attention_memory(source).list();
    auto values = evaluate(mem, {{source, Value::sequences(random_sequences({d}, source_lengths, 31, -2, 2))}});
    std::vector<Value> memory_values;
    for (const auto& v : mem) memory_values.push_back(values[v]);
    CHECK_NOTHROW(gen.generate(memory_values, {1, 3, 1, 0}));
    // The first memory value (the keys) one column wider.
    const xt::xarray<float> first = memory_values[0].rows();
    std::vector<std::size_t> wider(first.shape().begin(), first.shape().end());
    wider.back() += 1;
    memory_values[0] = Value::batch(xt::xarray<float>(xt::zeros<float>(wider)));
    std::string message = "nothing thrown";
    try {
        gen.generate(memory_values, {1, 3, 1, 0});
    } catch (const UserError& e) {
        message = e.what();
    }
    const std::string input = layers::attention_memory_inputs(d, d).keys.name();
    CHECK_MESSAGE(message.rfind("Generator::generate: memory value 0 (for the memory input '" + input + "')", 0) == 0,
                  message);
    CHECK_MESSAGE(message.find("has sample shape [4, 4]; the input takes [any, 3]") != std::string::npos, message);
}

TEST_CASE("teacher-forced seq2seq decoder: gradients in double on ragged batches, batch invariance") {
    Seq2Seq model;
    const auto decoder = model.decoder();
    Variable source = sequence::input_variable({d}, "source");
    Variable prev = sequence::input_variable({1}, "previous");
    const auto out = decoder.unfold(prev, layers::attention_memory(source).list());
    std::vector<Parameter> params{model.emb, model.w, model.wc, model.wo};
    layers::append_unique(params, model.attention.parameters());
    to_precision(params, DType::f64);
    const Bindings in{{source, Value::sequences(random_sequences({d}, source_lengths, 41))},
                      {prev, Value::index_sequences({{1, 2}, {1, 3, 4}, {1}})}};
    std::vector<Variable> wrt = loom::testing::as_variables(params);
    wrt.push_back(source);
    require_gradients("seq2seq", out.logits, in, wrt);
    InvarianceOptions options;
    options.wrt = wrt;
    const auto report = check_batch_invariance({out.logits}, in, options);
    INFO(report.str());
    CHECK(report.ok);
}

TEST_CASE("beam search is batch invariant: each item's hypotheses alone equal those inside the batch") {
    Seq2Seq model;
    const auto decoder = model.decoder();
    Variable source = sequence::input_variable({d}, "source");
    const auto mem = layers::attention_memory(source).list();
    layers::Generator gen(decoder, layers::attention_memory_inputs(d).list());
    const auto src = random_sequences({d}, {5, 1, 3, 2}, 51, -2, 2);
    auto generate = [&](const std::vector<Matrix>& items) {
        auto values = evaluate(mem, {{source, Value::sequences(items)}});
        std::vector<Value> memory_values;
        for (const auto& v : mem) memory_values.push_back(values[v]);
        return gen.generate(memory_values, {3, 6, 1, 0});
    };
    const auto batch = generate(src);
    REQUIRE(batch.items.size() == 4);
    for (std::size_t n = 0; n < src.size(); ++n) {
        const auto alone = generate({src[n]});
        REQUIRE(alone.items[0].size() == batch.items[n].size());
        for (std::size_t k = 0; k < alone.items[0].size(); ++k) {
            CHECK(alone.items[0][k].symbols == batch.items[n][k].symbols);
            CHECK(alone.items[0][k].ended == batch.items[n][k].ended);
            CHECK(alone.items[0][k].score == doctest::Approx(batch.items[n][k].score).epsilon(1e-5));
        }
    }
}

TEST_CASE(
    "a generator made over the encoder's outputs runs the encoder itself: the hypotheses of the memory given by hand") {
    Seq2Seq model;
    const auto decoder = model.decoder();
    Variable source = sequence::input_variable({d}, "source");
    const auto mem = layers::attention_memory(source).list();
    const auto src = random_sequences({d}, source_lengths, 61, -2, 2);
    // By hand: memory inputs of sizes worked out by the caller, the memory evaluated and bound.
    layers::Generator by_hand(decoder, layers::attention_memory_inputs(d, d).list());
    auto values = evaluate(mem, {{source, Value::sequences(src)}});
    std::vector<Value> memory_values;
    for (const auto& v : mem) memory_values.push_back(values[v]);
    const auto want = by_hand.generate(memory_values, {3, 6, 1, 0});
    // Over the encoder's outputs: sizes from their shapes, the source bound.
    layers::Generator over_encoder(decoder, mem);
    for (int pass = 0; pass < 2; ++pass) {  // the encoder's session is kept for the next call
        const auto got = over_encoder.generate_from({{source, Value::sequences(src)}}, {3, 6, 1, 0});
        REQUIRE(got.items.size() == want.items.size());
        for (std::size_t n = 0; n < want.items.size(); ++n) {
            REQUIRE(got.items[n].size() == want.items[n].size());
            for (std::size_t k = 0; k < want.items[n].size(); ++k) {
                CHECK(got.items[n][k].symbols == want.items[n][k].symbols);
                CHECK(got.items[n][k].ended == want.items[n][k].ended);
                CHECK(got.items[n][k].log_probability ==
                      doctest::Approx(want.items[n][k].log_probability).epsilon(1e-6));
            }
        }
    }
    // The source is what the encoder reads: a missing binding is named after the call made.
    CHECK_THROWS_WITH_AS(over_encoder.generate_from({}, {1, 6, 1, 0}), doctest::Contains("Generator::generate_from"),
                         UserError);
    CHECK_THROWS_WITH_AS(by_hand.generate_from({{source, Value::sequences(src)}}, {1, 6, 1, 0}),
                         doctest::Contains("made over memory inputs"), UserError);
    std::vector<Variable> mixed = layers::attention_memory_inputs(d, d).list();
    mixed[0] = mem[0];
    CHECK_THROWS_WITH_AS(layers::Generator(decoder, mixed), doctest::Contains("mixes inputs"), UserError);
}

TEST_CASE("a step's other outputs come out of unfold as sequences on the symbols' axis") {
    // h_t = tanh(w x_t + h_{t-1}); the step also returns 2 h_t and h_t + x_t.
    Parameter w = parameter(Shape{1, 2}, constant_initializer(0.5), "w");
    const layers::Decoder decoder(
        [&](const Variable& x, const std::vector<Variable>& s, const std::vector<Variable>&) {
            Variable h = tanh(times(x, w) + s[0]);
            return layers::DecoderOutput{h, {h}, {h * 2.0, h + x}};
        },
        {Shape{2}});
    Variable x = sequence::input_variable({1}, "x");
    const auto out = decoder.unfold(x, {});
    REQUIRE(out.outputs.size() == 2);
    const std::vector<std::vector<double>> xs{{1, 2, 3}, {-1}};
    std::vector<Matrix> seqs;
    for (const auto& s : xs) {
        Matrix m = xt::zeros<double>({s.size(), std::size_t{1}});
        for (std::size_t t = 0; t < s.size(); ++t) m(t, 0) = s[t];
        seqs.push_back(m);
    }
    auto v = evaluate({out.outputs[0], out.outputs[1]}, {{x, Value::sequences(seqs)}});
    for (std::size_t n = 0; n < xs.size(); ++n) {
        const auto doubled = v[out.outputs[0]].sequence<double>(n), plus = v[out.outputs[1]].sequence<double>(n);
        double h = 0;  // both units of h are equal: w's two columns are 0.5
        for (std::size_t t = 0; t < xs[n].size(); ++t) {
            h = std::tanh(0.5 * xs[n][t] + h);
            for (std::size_t j = 0; j < 2; ++j) {
                CHECK(doubled(t, j) == doctest::Approx(2 * h).epsilon(1e-12));
                CHECK(plus(t, j) == doctest::Approx(h + xs[n][t]).epsilon(1e-12));
            }
        }
    }
}

TEST_CASE("an attention decoder's generation copies no memory per hypothesis: a beam of 32 takes no more memory") {
    // General attention over an AttentionMemory, one query per row: its context reads each row's
    // item of the memory in place. 8 items of 3000 steps: keys, values [3000, 3] and the mask, 84 KB
    // an item; one copy per row of a beam of 32 (256 rows) is 21 MB at every step.
    Seq2Seq model;
    layers::Generator gen(model.decoder(), layers::attention_memory_inputs(d, d).list());
    constexpr std::size_t items = 8, steps = 3000;
    const std::vector<Matrix> sources(items, Matrix(xt::ones<double>({steps, d}) * 0.01));
    Variable source = sequence::input_variable({d}, "source");
    const auto mem = layers::attention_memory(source).list();
    auto values = evaluate(mem, {{source, Value::sequences(sources)}}, DType::f32);
    std::vector<Value> memory;
    for (const auto& v : mem) memory.push_back(values[v]);
    gen.generate(memory, {1, 4, 1, 0});  // the memory's own pages, and the session's
    const long before = testing::peak_rss_kib();
    const auto g = gen.generate(memory, {32, 4, 1, 0});
    CHECK(g.items.size() == items);
    const long copies_kib = 32 * items * steps * (2 * d + 1) * sizeof(float) / 1024;
    testing::check_peak_growth(before, copies_kib / 8, "an eighth of the per-row copies");
}
