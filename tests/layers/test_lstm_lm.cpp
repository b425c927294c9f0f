// char-rnn's language model (layers::LstmLM): its logits equal stacked LSTMs written here in plain
// double loops from the parameters by name, on ragged sequences, from zero states and from given
// ones; the state carried over consecutive windows gives one long sequence; its generating step
// gives the teacher-forced log-probabilities; gradients in double; its model file round-trips and
// refuses settings that do not make the parameters it holds.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <random>

#include "gradcheck.hpp"
#include "test_support.hpp"

using namespace loom;
using loom::testing::require_gradients;

namespace {

using Matrix = xt::xarray<double>;

constexpr std::size_t tiny_vocabulary = 5, tiny_hidden = 3;
layers::LstmLMOptions tiny_lm() { return {.layers = 2, .hidden = tiny_hidden, .dropout = 0.0, .name = "lm"}; }

// Every parameter moved away from its initial value (zero biases would hide a missing term).
layers::LstmLM perturbed_lm(std::uint64_t seed) {
    layers::LstmLM lm(tiny_vocabulary, tiny_lm());
    to_precision(lm.parameters(), DType::f64);
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0.0, 0.4);
    for (const Parameter& p : lm.parameters())
        for (double& x : p.data<double>()) x += noise(rng);
    return lm;
}

// h, c of each of the two layers, as batch inputs.
std::vector<Variable> state_inputs() {
    std::vector<Variable> states;
    for (std::size_t i = 0; i < 4; ++i) states.push_back(input_variable({tiny_hidden}, "s" + std::to_string(i)));
    return states;
}

double sigmoid_of(double x) { return 1 / (1 + std::exp(-x)); }

// The logits [T, V] of one sequence from states h, c per layer (updated in place): the embedding's
// row, then per layer z = x W + b + h U, gates [input, forget, output, candidate], c = f c + i g,
// h = o tanh(c); the last layer's h projected.
Matrix lstm_logits(const std::vector<Parameter>& ps, const std::vector<std::size_t>& ids,
                   std::vector<std::vector<double>>& state) {
    std::map<std::string, Matrix> p;
    for (const Parameter& q : ps) p[q.name()] = q.data<double>();
    const std::size_t n = tiny_hidden, layers = state.size() / 2;
    Matrix logits = xt::zeros<double>({ids.size(), tiny_vocabulary});
    for (std::size_t t = 0; t < ids.size(); ++t) {
        std::vector<double> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = p["lm.embedding"](ids[t], i);
        for (std::size_t l = 0; l < layers; ++l) {
            const std::string name = "lm.layers." + std::to_string(l);
            std::vector<double>&h = state[2 * l], &c = state[2 * l + 1];
            std::vector<double> z(4 * n);
            for (std::size_t k = 0; k < 4 * n; ++k) {
                z[k] = p[name + ".b"](k);
                for (std::size_t i = 0; i < n; ++i) z[k] += x[i] * p[name + ".W"](i, k) + h[i] * p[name + ".U"](i, k);
            }
            for (std::size_t i = 0; i < n; ++i) {
                const double in = sigmoid_of(z[i]), forget = sigmoid_of(z[n + i]), out = sigmoid_of(z[2 * n + i]);
                c[i] = forget * c[i] + in * std::tanh(z[3 * n + i]);
                h[i] = out * std::tanh(c[i]);
            }
            x = h;
        }
        for (std::size_t v = 0; v < tiny_vocabulary; ++v) {
            logits(t, v) = p["lm.project.b"](v);
            for (std::size_t i = 0; i < n; ++i) logits(t, v) += x[i] * p["lm.project.W"](i, v);
        }
    }
    return logits;
}

}  // namespace

TEST_CASE("LstmLM's logits equal stacked LSTMs in double loops, ragged, from zeros and from given states") {
    const layers::LstmLM lm = perturbed_lm(3);
    Variable x = sequence::input_variable({1}, "x");
    const std::vector<Variable> initial = state_inputs();
    const layers::LstmLMOutput from_zeros = lm(x), from_given = lm(x, initial);
    const std::vector<std::vector<std::size_t>> ids{{3, 1, 4, 1}, {2}, {0, 4, 2}};
    Bindings in{{x, Value::index_sequences(ids)}};
    Matrix given = xt::zeros<double>({ids.size(), tiny_hidden});
    for (std::size_t i = 0; i < 4; ++i) {
        for (std::size_t n = 0; n < ids.size(); ++n)
            for (std::size_t k = 0; k < tiny_hidden; ++k)
                given(n, k) = 0.1 * double(i + 1) - 0.2 * double(n) + 0.05 * double(k);
        in.emplace(initial[i], Value::batch(given));
    }
    auto got = evaluate({from_zeros.logits, from_given.logits, from_given.last_states[2]}, in);
    for (std::size_t n = 0; n < ids.size(); ++n) {
        std::vector<std::vector<double>> zeros(4, std::vector<double>(tiny_hidden, 0.0)), state(4);
        for (std::size_t i = 0; i < 4; ++i)
            for (std::size_t k = 0; k < tiny_hidden; ++k)
                state[i].push_back(0.1 * double(i + 1) - 0.2 * double(n) + 0.05 * double(k));
        const Matrix want_zeros = lstm_logits(lm.parameters(), ids[n], zeros);
        const Matrix want_given = lstm_logits(lm.parameters(), ids[n], state);
        for (std::size_t t = 0; t < ids[n].size(); ++t)
            for (std::size_t v = 0; v < tiny_vocabulary; ++v) {
                INFO("item " << n << " step " << t << " symbol " << v);
                CHECK(got[from_zeros.logits].sequence<double>(n)(t, v) ==
                      doctest::Approx(want_zeros(t, v)).epsilon(1e-12));
                CHECK(got[from_given.logits].sequence<double>(n)(t, v) ==
                      doctest::Approx(want_given(t, v)).epsilon(1e-12));
            }
        // The second layer's h at the sequence's last step: what a next window starts from.
        for (std::size_t k = 0; k < tiny_hidden; ++k)
            CHECK(got[from_given.last_states[2]].rows<double>()(n, k) == doctest::Approx(state[2][k]).epsilon(1e-12));
    }
}

TEST_CASE("LstmLM: the state carried over consecutive windows gives one long sequence") {
    const layers::LstmLM lm = perturbed_lm(5);
    Variable x = sequence::input_variable({1}, "x");
    const std::vector<Variable> initial = state_inputs();
    const layers::LstmLMOutput whole = lm(x), window = lm(x, initial);
    const std::vector<std::size_t> text{0, 3, 1, 4, 1, 2, 2, 4, 0};
    const Value want = evaluate({whole.logits}, {{x, Value::index_sequences({text})}})[whole.logits];
    std::vector<Variable> outputs{window.logits};
    outputs.insert(outputs.end(), window.last_states.begin(), window.last_states.end());
    Session s(outputs);
    std::vector<Value> states(4, Value::batch(Matrix(xt::zeros<double>({std::size_t{1}, tiny_hidden}))));
    for (std::size_t w = 0; w < 3; ++w) {
        Bindings in{{x, Value::index_sequences({{text[3 * w], text[3 * w + 1], text[3 * w + 2]}})}};
        for (std::size_t i = 0; i < 4; ++i) in.emplace(initial[i], states[i]);
        s.forward(in);
        for (std::size_t t = 0; t < 3; ++t)
            for (std::size_t v = 0; v < tiny_vocabulary; ++v)
                CHECK(s.value(window.logits).sequence<double>(0)(t, v) ==
                      doctest::Approx(want.sequence<double>(0)(3 * w + t, v)).epsilon(1e-12));
        for (std::size_t i = 0; i < 4; ++i) states[i] = s.value(window.last_states[i]);
    }
}

TEST_CASE("LstmLM's generating step gives the teacher-forced log-probabilities at every step") {
    const layers::LstmLM lm = perturbed_lm(7);
    Variable x = sequence::input_variable({1}, "x");
    Variable lp = log_softmax(lm(x).logits);
    const std::vector<std::vector<std::size_t>> fed{{3, 1, 4, 1, 0}, {2, 2, 0, 4, 1}};
    const Value want = evaluate({lp}, {{x, Value::index_sequences(fed)}})[lp];
    const layers::Decoder d = lm.decoder();
    Variable previous = input_variable({1}, "previous_symbol");
    std::vector<Variable> states;
    for (const Shape& shape : d.state_shapes()) states.push_back(input_variable(shape, "state"));
    REQUIRE(states.size() == 4);
    const layers::DecoderOutput out = d.step()(previous, states, {});
    std::vector<Variable> outputs{log_softmax(out.logits)};
    outputs.insert(outputs.end(), out.states.begin(), out.states.end());
    Session step(outputs);
    std::vector<Value> values(4, Value::batch(Matrix(xt::zeros<double>({std::size_t{2}, tiny_hidden}))));
    for (std::size_t t = 0; t < fed[0].size(); ++t) {
        Matrix ids = xt::zeros<double>({std::size_t{2}, std::size_t{1}});
        for (std::size_t n = 0; n < 2; ++n) ids(n, 0) = double(fed[n][t]);
        Bindings in{{previous, Value::batch(ids)}};
        for (std::size_t i = 0; i < 4; ++i) in.emplace(states[i], values[i]);
        step.forward(in);
        for (std::size_t n = 0; n < 2; ++n)
            for (std::size_t v = 0; v < tiny_vocabulary; ++v)
                CHECK(step.value(outputs[0]).rows<double>()(n, v) ==
                      doctest::Approx(want.sequence<double>(n)(t, v)).epsilon(1e-12));
        for (std::size_t i = 0; i < 4; ++i) values[i] = step.value(out.states[i]);
    }
}

TEST_CASE("LstmLM's generation with keep_symbols false streams the same text and keeps only the last symbol") {
    // No context (the LSTM's state is all it reads): streamed with keep_symbols false, the callback
    // receives the same symbols as with every one kept, and the result holds only the last one.
    const layers::LstmLM lm = perturbed_lm(8);
    layers::Generator generator(lm.decoder(), {});
    const std::vector<std::vector<std::size_t>> prompts{{3, 1}, {2}};
    for (const bool sample : {true, false}) {
        layers::GenerateOptions o{
            .max_length = 300, .start_symbol = layers::no_symbol, .end_symbol = layers::no_symbol};
        if (sample) o.sample = true, o.seed = 3;
        std::vector<std::vector<std::size_t>> streamed(2);
        const layers::Generated all = generator.generate(o, {.prompts = prompts});
        o.keep_symbols = false;
        o.on_symbol = [&](std::size_t n, std::size_t symbol) { streamed[n].push_back(symbol); };
        const layers::Generated last = generator.generate(o, {.prompts = prompts});
        for (std::size_t n = 0; n < 2; ++n) {
            INFO("item " << n << (sample ? ", sampled" : ", greedy"));
            REQUIRE(all.items[n][0].symbols.size() == 300);
            CHECK(streamed[n] == all.items[n][0].symbols);
            CHECK(last.items[n][0].symbols == std::vector<std::size_t>{all.items[n][0].symbols.back()});
            CHECK(last.items[n][0].log_probability == all.items[n][0].log_probability);
            CHECK(last.items[n][0].score == all.items[n][0].score);
        }
    }
}

TEST_CASE("LstmLM: gradients in double on ragged sequences, through the carried state") {
    const layers::LstmLM lm = perturbed_lm(11);
    Variable x = sequence::input_variable({1}, "x");
    const std::vector<Variable> initial = state_inputs();
    const layers::LstmLMOutput out = lm(x, initial);
    Bindings in{{x, Value::index_sequences({{3, 1, 4}, {2}, {0, 4, 2, 1, 3}})}};
    for (std::size_t i = 0; i < 4; ++i)
        in.emplace(initial[i],
                   Value::batch(Matrix(0.3 * xt::ones<double>({std::size_t{3}, tiny_hidden}) - 0.1 * double(i))));
    std::vector<Variable> wrt = loom::testing::as_variables(lm.parameters());
    wrt.insert(wrt.end(), initial.begin(), initial.end());
    require_gradients("LstmLM", tanh(out.logits), in, wrt, {.max_elements = 30});
    // The last cell state does not reach the projection: its check leaves the projection out.
    std::vector<Variable> below_projection;
    for (const Variable& v : wrt)
        if (v.name().rfind("lm.project", 0) != 0) below_projection.push_back(v);
    REQUIRE(below_projection.size() + 2 == wrt.size());
    require_gradients("LstmLM's last states", tanh(out.last_states[3]), in, below_projection, {.max_elements = 30});
}

TEST_CASE("LstmLM's model file round-trips and refuses what it cannot be") {
    testing::TempDir dir("lstm_lm");
    const layers::LstmLM lm(tiny_vocabulary, tiny_lm());  // in float: the precision it loads back in
    lm.save(dir.file("m.loom"), {{"alphabet", "abcde"}});
    const ModelFile f = read_model_file(dir.file("m.loom"));
    CHECK(f.kind == "lstm_lm");
    CHECK(f.record("alphabet") == "abcde");
    const layers::LstmLM back = layers::LstmLM::load(f);
    CHECK(back.options().layers == 2);
    CHECK(back.options().hidden == tiny_hidden);
    CHECK(back.options().name == "lm");
    CHECK(back.vocabulary() == tiny_vocabulary);
    Variable x = sequence::input_variable({1}, "x");
    const Bindings in{{x, Value::index_sequences({{1, 2, 3}})}};
    const Variable a = lm(x).logits, b = back(x).logits;
    CHECK(evaluate({a}, in)[a].data<float>() == evaluate({b}, in)[b].data<float>());
    CHECK_THROWS_WITH_AS(lm.save(dir.file("x.loom"), {{"lstm_lm", "mine"}}), doctest::Contains("the model's own"),
                         UserError);
    // Settings claiming a width of 65,536 over these parameters: refused before anything is made.
    save_model_file(
        dir.file("big.loom"), "lstm_lm", lm.parameters(),
        {{"lstm_lm", settings_record({{"vocabulary", 5}, {"layers", 2}, {"hidden", 65536}, {"dropout", 0}})},
         {"lstm_lm_name", "lm"}});
    CHECK_THROWS_WITH_AS(layers::LstmLM::load(dir.file("big.loom")), doctest::Contains("its settings make a model of"),
                         DataError);
    save_model_file(dir.file("other.loom"), "transformer_lm", lm.parameters(), {});
    CHECK_THROWS_AS(layers::LstmLM::load(dir.file("other.loom")), UserError);  // read_model_file's kind check
    CHECK_THROWS_WITH_AS(layers::LstmLM::load(read_model_file(dir.file("other.loom"))),
                         doctest::Contains("not an LstmLM"), DataError);
    CHECK_THROWS_WITH_AS(layers::LstmLM(0, tiny_lm()), doctest::Contains("vocabulary"), UserError);
    CHECK_THROWS_WITH_AS(layers::LstmLM(5, {.layers = 0}), doctest::Contains("at least 1"), UserError);
    CHECK_THROWS_WITH_AS(layers::LstmLM(5, {.dropout = 1.0}), doctest::Contains("dropout"), UserError);
    CHECK_THROWS_WITH_AS(lm(x, {x}), doctest::Contains("1 initial states given"), UserError);
}
