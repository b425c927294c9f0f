// The Transformer's layers and its generation with a key/value cache: at every step the cached
// step's logits equal the teacher-forced graph's on the same prefix (float and double); greedy and
// beam hypotheses carry the teacher-forced log-probabilities of their symbols (a cache reordered
// wrongly by parent breaks them); a wide beam equals brute force on a tiny vocabulary; a
// decoder-only model continues its prompt on a toy task after training; gradients in double on
// ragged batches; batch invariance; the shape errors name the layer and the sizes.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>

#include "gradcheck.hpp"
#include "test_support.hpp"

using namespace loom;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

namespace {

using Matrix = xt::xarray<double>;

layers::TransformerOptions tiny(bool norm_first = true) {
    return {.model_dim = 8, .heads = 2, .feedforward_dim = 12, .dropout = 0.0, .norm_first = norm_first};
}

using Ids = std::vector<std::size_t>;

// Source sequences of ids below 6 of the given lengths, drawn from `seed`.
std::vector<Ids> random_sources(const std::vector<std::size_t>& lengths, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<Ids> out;
    for (std::size_t n : lengths) {
        out.emplace_back();
        for (std::size_t t = 0; t < n; ++t) out.back().push_back(rng() % 6);
    }
    return out;
}

// An encoder-decoder model of the tiny sizes: sources are ids over 6 symbols, targets ids over V = 5
// (0 ends); one encoder layer, two decoder layers.
struct Seq2Seq {
    static constexpr std::size_t vocabulary = 5;
    layers::Seq2SeqTransformer model{6, vocabulary, [] {
                                         layers::TransformerOptions o = tiny();
                                         o.encoder_layers = 1;
                                         o.decoder_layers = 2;
                                         return o;
                                     }()};
    Variable source = sequence::input_variable({1}, "source");
    Variable previous = sequence::input_variable({1}, "previous");
    Variable encoded = model.encode(source);
    Variable logits = model.decode(previous, encoded);
    std::vector<Variable> memory = model.memory(encoded);

    std::vector<Parameter> parameters() const { return model.parameters(); }
    std::vector<Value> memory_values(const std::vector<Ids>& sources) const {
        auto values = evaluate(memory, {{source, Value::index_sequences(sources)}});
        std::vector<Value> out;
        for (const auto& m : memory) out.push_back(values[m]);
        return out;
    }
    // log-softmax of the teacher-forced logits for each item's symbols fed after the start symbol 0.
    std::vector<Matrix> teacher_forced(const std::vector<Ids>& sources, const std::vector<Ids>& fed) const {
        Variable lp = log_softmax(logits);
        auto v =
            evaluate({lp}, {{source, Value::index_sequences(sources)}, {previous, Value::index_sequences(fed)}})[lp];
        std::vector<Matrix> out;
        for (std::size_t n = 0; n < fed.size(); ++n) out.push_back(v.sequence<double>(n));
        return out;
    }
};

// The log-probability the teacher-forced graph gives a hypothesis (its symbols, then the end symbol
// 0 when it ended).
double teacher_forced_log_probability(const Seq2Seq& m, const Ids& source, const layers::Hypothesis& h) {
    std::vector<std::size_t> fed{0};
    fed.insert(fed.end(), h.symbols.begin(), h.symbols.end());
    std::vector<std::size_t> emitted = h.symbols;
    if (h.ended) emitted.push_back(0);
    fed.resize(emitted.size());
    const Matrix lp = m.teacher_forced({source}, {fed})[0];
    double sum = 0;
    for (std::size_t t = 0; t < emitted.size(); ++t) sum += lp(t, emitted[t]);
    return sum;
}

template <class T>
void incremental_equals_teacher_forced(double tolerance) {
    Seq2Seq m;
    if (std::is_same_v<T, double>) to_precision(m.parameters(), DType::f64);
    const auto sources = random_sources({4, 1, 6}, 3);
    const std::vector<std::vector<std::size_t>> fed{{0, 3, 1, 4, 2, 2}, {0, 1, 1, 3, 4, 2}, {0, 4, 3, 2, 1, 1}};
    const auto want = m.teacher_forced(sources, fed);

    // The cached step, driven by hand: the previous symbol, position and caches in, logits and caches out.
    layers::Decoder d = m.model.decoder();
    Variable previous = input_variable({1}, "previous_symbol");
    std::vector<Variable> states;
    for (const Shape& s : d.state_shapes()) states.push_back(input_variable(s, "state"));
    const std::vector<Variable> memory_inputs = m.model.memory_inputs();
    layers::DecoderOutput out = d.step()(previous, states, memory_inputs);
    std::vector<Variable> outputs{out.logits};
    outputs.insert(outputs.end(), out.states.begin(), out.states.end());
    Session step(outputs);
    const auto memory = m.memory_values(sources);

    std::vector<Value> state_values{Value::batch(xt::xarray<T>(xt::zeros<T>({std::size_t{3}, std::size_t{1}})))};
    for (std::size_t i = 1; i < states.size(); ++i)
        state_values.push_back(
            Value::batch(xt::xarray<T>(xt::zeros<T>({std::size_t{3}, std::size_t{0}, std::size_t{8}}))));
    for (std::size_t t = 0; t < fed[0].size(); ++t) {
        xt::xarray<float> ids = xt::zeros<float>({std::size_t{3}, std::size_t{1}});
        for (std::size_t n = 0; n < 3; ++n) ids(n, 0) = static_cast<float>(fed[n][t]);
        Bindings in{{previous, Value::batch(ids)}};
        for (std::size_t i = 0; i < states.size(); ++i) in.emplace(states[i], state_values[i]);
        for (std::size_t i = 0; i < memory.size(); ++i) in.emplace(memory_inputs[i], memory[i]);
        step.forward(in);
        const Value logits = step.value(out.logits);
        const auto got = logits.rows<double>();
        for (std::size_t n = 0; n < 3; ++n) {
            // log-softmax of the step's logits against the teacher-forced log-probabilities of step t
            double top = -1e300, sum = 0;
            for (std::size_t v = 0; v < Seq2Seq::vocabulary; ++v) top = std::max(top, got(n, v));
            for (std::size_t v = 0; v < Seq2Seq::vocabulary; ++v) sum += std::exp(got(n, v) - top);
            for (std::size_t v = 0; v < Seq2Seq::vocabulary; ++v) {
                INFO("step " << t << " item " << n << " symbol " << v);
                CHECK(got(n, v) - top - std::log(sum) == doctest::Approx(want[n](t, v)).epsilon(tolerance));
            }
        }
        // A replaced state is the step's output; an appended one (the caches) grows by the rows the
        // step returns, this step's key or value.
        for (std::size_t i = 0; i < states.size(); ++i) {
            const Value next = step.value(out.states[i]);
            if (d.state_updates()[i] == layers::StateUpdate::replace) {
                state_values[i] = next;
                continue;
            }
            REQUIRE(next.sample_shape() == Shape{1, 8});
            state_values[i] =
                Value::batch(xt::xarray<T>(xt::concatenate(xt::xtuple(state_values[i].data<T>(), next.data<T>()), 1)));
        }
        CHECK(state_values[1].sample_shape() == Shape{t + 1, 8});  // the cache grew by one row
    }
}

}  // namespace

TEST_CASE("a Transformer decoder's cached step gives the teacher-forced logits at every step") {
    SUBCASE("float") { incremental_equals_teacher_forced<float>(1e-5); }
    SUBCASE("double") { incremental_equals_teacher_forced<double>(1e-12); }
}

TEST_CASE("greedy and beam hypotheses of the cached decoder carry the teacher-forced log-probabilities") {
    Seq2Seq m;
    layers::Generator generator(m.model.decoder(), m.model.memory_inputs());
    const auto sources = random_sources({5, 2, 3, 1}, 9);
    for (std::size_t beam : {1, 4}) {
        const auto g = generator.generate(m.memory_values(sources), {beam, 6, 0, 0});
        REQUIRE(g.items.size() == sources.size());
        for (std::size_t n = 0; n < sources.size(); ++n) {
            REQUIRE(!g.items[n].empty());
            CHECK(g.items[n].size() <= beam);
            for (const auto& h : g.items[n]) {
                INFO("beam " << beam << " item " << n << " hypothesis of " << h.symbols.size() << " symbols");
                CHECK(h.log_probability ==
                      doctest::Approx(teacher_forced_log_probability(m, sources[n], h)).epsilon(1e-5));
            }
        }
    }
    SUBCASE("in double, to 1e-10, after to_precision between two calls") {
        to_precision(m.parameters(), DType::f64);
        const auto g = generator.generate(m.memory_values(sources), {3, 5, 0, 0});
        for (std::size_t n = 0; n < sources.size(); ++n)
            for (const auto& h : g.items[n])
                CHECK(h.log_probability ==
                      doctest::Approx(teacher_forced_log_probability(m, sources[n], h)).epsilon(1e-10));
    }
}

TEST_CASE("beam search with a beam wider than every hypothesis equals brute force on a tiny vocabulary") {
    Seq2Seq m;
    to_precision(m.parameters(), DType::f64);
    layers::Generator generator(m.model.decoder(), m.model.memory_inputs());
    const auto source = random_sources({4}, 17);
    constexpr std::size_t max_length = 3;
    // Every output: symbols 1..4 of length < max_length then the end symbol 0, or max_length symbols.
    std::vector<double> scores;
    std::function<void(std::vector<std::size_t>)> enumerate = [&](std::vector<std::size_t> s) {
        layers::Hypothesis ended{s, 0, 0, true};
        if (s.size() < max_length) {
            scores.push_back(teacher_forced_log_probability(m, source[0], ended) / static_cast<double>(s.size() + 1));
            for (std::size_t v = 1; v < Seq2Seq::vocabulary; ++v) {
                auto longer = s;
                longer.push_back(v);
                enumerate(longer);
            }
        } else {
            layers::Hypothesis stopped{s, 0, 0, false};
            scores.push_back(teacher_forced_log_probability(m, source[0], stopped) / static_cast<double>(s.size()));
        }
    };
    enumerate({});
    std::sort(scores.rbegin(), scores.rend());
    const auto g = generator.generate(m.memory_values(source), {scores.size(), max_length, 0, 0});
    REQUIRE(g.items[0].size() == scores.size());
    for (std::size_t i = 0; i < scores.size(); ++i)
        CHECK(g.items[0][i].score == doctest::Approx(scores[i]).epsilon(1e-10));
}

namespace {

// The same decoder, its step given memory that is not a pick of the generator's per-item memory
// (identity of it): its attention then reads one copy of the memory per row, as generation did
// before it read the memory per item.
layers::Decoder copying_memory(const layers::Decoder& d) {
    layers::DecoderStep step = d.step();
    return layers::Decoder(
        [step](const Variable& previous, const std::vector<Variable>& states, const std::vector<Variable>& memory) {
            std::vector<Variable> copied;
            for (const Variable& m : memory) copied.push_back(identity(m));
            return step(previous, states, copied);
        },
        d.state_shapes(), d.state_updates());
}

template <class T>
void per_item_equals_per_row() {
    Seq2Seq m;
    if (std::is_same_v<T, double>) to_precision(m.parameters(), DType::f64);
    layers::Generator per_item(m.model.decoder(), m.model.memory_inputs());
    layers::Generator per_row(copying_memory(m.model.decoder()), m.model.memory_inputs());
    const auto sources = random_sources({5, 2, 7, 1}, 23);
    for (std::size_t beam : {1, 3, 8}) {
        const auto a = per_item.generate(m.memory_values(sources), {beam, 6, 0, 0});
        const auto b = per_row.generate(m.memory_values(sources), {beam, 6, 0, 0});
        REQUIRE(a.items.size() == b.items.size());
        for (std::size_t n = 0; n < a.items.size(); ++n) {
            REQUIRE(a.items[n].size() == b.items[n].size());
            for (std::size_t h = 0; h < a.items[n].size(); ++h) {
                INFO("beam " << beam << " item " << n << " hypothesis " << h);
                CHECK(a.items[n][h].symbols == b.items[n][h].symbols);
                CHECK(a.items[n][h].log_probability == b.items[n][h].log_probability);  // bit for bit
                CHECK(a.items[n][h].score == b.items[n][h].score);
            }
        }
    }
}

}  // namespace

TEST_CASE("a Transformer decoder's step is not unfolded: its growing caches are refused by name") {
    Seq2Seq m;
    CHECK_THROWS_WITH_AS(m.model.decoder().unfold(m.previous, m.memory),
                         doctest::Contains("state 1 of shape [any, 8] grows step by step"), UserError);
}

TEST_CASE("Generator reading the memory per item gives what a per-row copy of it gives, float and double") {
    SUBCASE("float") { per_item_equals_per_row<float>(); }
    SUBCASE("double") { per_item_equals_per_row<double>(); }
}

TEST_CASE("Generator copies no memory per hypothesis: a beam of 32 over a long memory takes no more memory") {
    Seq2Seq m;
    layers::Generator generator(m.model.decoder(), m.model.memory_inputs());
    // 8 items of a memory of 3000 steps: per layer keys and values [3000, 8] and a mask [3000], 408 KB
    // an item over both layers. One copy per row of a beam of 32 (256 rows) would be 104 MB.
    constexpr std::size_t items = 8, steps = 3000;
    std::vector<Value> memory;
    for (const Variable& input : m.model.memory_inputs()) {
        const bool mask = input.shape().rank() == 1;
        xt::xarray<float> a = mask ? xt::xarray<float>(xt::ones<float>({items, steps}))
                                   : xt::xarray<float>(testing::random_tensor({items, steps, 8}, 5, -1, 1));
        memory.push_back(Value::batch(std::move(a)));
    }
    const std::size_t copies_kib = 32 * items * steps * (2 * 8 + 1) * 2 * sizeof(float) / 1024;
    generator.generate(memory, {1, 5, 0, 0});  // the memory's own pages, and the session's
    const long before = testing::peak_rss_kib();
    const auto g = generator.generate(memory, {32, 5, 0, 0});
    CHECK(g.items.size() == items);
    testing::check_peak_growth(before, static_cast<long>(copies_kib / 8), "an eighth of the per-row copies");
}

TEST_CASE("a decoder-only Transformer trained to count continues its prompt through the cache") {
    // Symbols 1..7; a sequence counts up from any of them to 7, then ends (0). Teacher forcing feeds
    // the start symbol 0 then the sequence; generation is given the first one or two as a prompt.
    set_seed(5);
    layers::TransformerLM decoder(
        8, {.model_dim = 16, .heads = 2, .feedforward_dim = 32, .dropout = 0.0, .decoder_layers = 1});
    const SequenceAxis steps;
    Variable previous = sequence::input_variable({1}, "previous", steps);
    Variable next = sequence::input_variable({1}, "next", steps);
    Variable loss = sequence::reduce_sum(cross_entropy_with_softmax(decoder(previous), one_hot(next, 8)));
    std::vector<std::vector<std::size_t>> fed, targets;
    for (std::size_t a = 1; a <= 7; ++a) {
        fed.push_back({0});
        targets.push_back({});
        for (std::size_t s = a; s <= 7; ++s) {
            fed.back().push_back(s);
            targets.back().push_back(s);
        }
        targets.back().push_back(0);
    }
    Trainer trainer(loss, Variable(), adam(decoder.parameters(), 0.02));
    const Bindings batch{{previous, Value::index_sequences(fed)}, {next, Value::index_sequences(targets)}};
    double first = 0, last = 0;
    for (int i = 0; i < 150; ++i) {
        last = trainer.train_minibatch(batch).average_loss();
        if (i == 0) first = last;
    }
    // The first symbol of a sequence is any of 7 (log 7 per sequence, which no model can remove);
    // everything after it is determined.
    INFO("loss " << first << " -> " << last);
    REQUIRE(first > 3 * std::log(7.0));
    REQUIRE(last < std::log(7.0) + 0.05);
    layers::Generator generator(decoder.decoder(), {});
    const auto g = generator.generate({}, {2, 10, 0, 0}, {}, {{3}, {5, 6}, {1}});
    REQUIRE(g.items.size() == 3);
    CHECK(g.items[0][0].symbols == std::vector<std::size_t>{4, 5, 6, 7});
    CHECK(g.items[1][0].symbols == std::vector<std::size_t>{7});
    CHECK(g.items[2][0].symbols == std::vector<std::size_t>{2, 3, 4, 5, 6, 7});
    for (const auto& item : g.items) CHECK(item[0].ended);
}

TEST_CASE("Transformer layers: gradients in double on ragged batches, pre-norm and post-norm") {
    Variable x = sequence::input_variable({8}, "x"), y = sequence::input_variable({8}, "y");
    const Bindings in{{x, Value::sequences(random_sequences({8}, {1, 3, 5}, 61))},
                      {y, Value::sequences(random_sequences({8}, {4, 2, 1}, 62))}};
    for (bool norm_first : {true, false}) {
        layers::TransformerEncoderLayer encoder(tiny(norm_first), "enc");
        layers::TransformerDecoderLayer decoder(tiny(norm_first), true, "dec");
        Variable out = decoder(x, encoder(y));
        auto params = encoder.parameters();
        layers::append_unique(params, decoder.parameters());
        to_precision(params, DType::f64);
        auto wrt = loom::testing::as_variables(params);
        wrt.insert(wrt.end(), {x, y});
        require_gradients(norm_first ? "pre-norm" : "post-norm", tanh(out), in, wrt, {.max_elements = 40});
    }
}

TEST_CASE("the teacher-forced Transformer is batch invariant") {
    Seq2Seq m;
    const Bindings in{{m.source, Value::index_sequences(random_sources({4, 1, 6, 2}, 71))},
                      {m.previous, Value::index_sequences({{0, 3, 1}, {0}, {0, 4, 4, 2, 1}, {0, 2}})}};
    InvarianceOptions options;
    options.wrt = loom::testing::as_variables(m.parameters());
    to_precision(m.parameters(), DType::f64);
    const auto report = check_batch_invariance({m.logits}, in, options);
    INFO(report.str());
    CHECK(report.ok);
}

TEST_CASE("Transformer layers refuse bad sizes, naming the layer and the sizes") {
    CHECK_THROWS_WITH_AS(layers::TransformerEncoderLayer({.model_dim = 6, .heads = 4}, "enc"),
                         doctest::Contains("enc: model_dim 6 must be a positive multiple of heads (4)"), UserError);
    CHECK_THROWS_WITH_AS(layers::TransformerDecoder(1, {.model_dim = 10, .heads = 4}),
                         doctest::Contains("model_dim 10"), UserError);
    layers::TransformerEncoderLayer layer(tiny(), "enc");
    Variable wrong = sequence::input_variable({5}, "wrong");
    CHECK_THROWS_WITH_AS(layer(wrong), doctest::Contains("sample shape [5]; the layer takes [8]"), UserError);
    layers::TransformerDecoderLayer only(tiny(), false, "dec");
    CHECK_THROWS_WITH_AS(only(sequence::input_variable({8}), sequence::input_variable({8})),
                         doctest::Contains("no cross-attention"), UserError);
    layers::Layer positions = layers::LearnedPositionalEncoding(4, 8);
    Variable p = sequence::input_variable({1}, "p");
    Variable e = positions(p);
    CHECK_THROWS_WITH_AS(
        evaluate({e}, {{p, Value::index_sequences({{0, 1, 2, 3, 4}})}}),
        doctest::Contains("a sequence of 5 steps is longer than its learned positions (max_positions 4)"), UserError);
    CHECK_THROWS_WITH_AS(layers::sinusoidal_positional_encoding(p, 7), doctest::Contains("must be even"), UserError);
}

TEST_CASE("sinusoidal positional encoding: sin and cos of position / 10000^(2i/d)") {
    Variable p = sequence::input_variable({1}, "p");
    Variable e = layers::sinusoidal_positional_encoding(p, 4);
    const auto v = evaluate({e}, {{p, Value::index_sequences({{0, 1, 7}})}}, DType::f64)[e].sequence<double>(0);
    for (std::size_t t : {0, 1, 2}) {
        const double pos = t == 2 ? 7.0 : static_cast<double>(t);
        CHECK(v(t, 0) == doctest::Approx(std::sin(pos)));
        CHECK(v(t, 1) == doctest::Approx(std::cos(pos)));
        CHECK(v(t, 2) == doctest::Approx(std::sin(pos / 100.0)));
        CHECK(v(t, 3) == doctest::Approx(std::cos(pos / 100.0)));
    }
}
