// The language-model sample's model and text (samples/lm): the LSTM's state carried over
// consecutive windows gives what one long sequence gives; model files round-trip with their
// architecture and alphabet and refuse what this program never wrote.
#include <doctest/doctest.h>

#include <fstream>

#include "core/errors.hpp"
#include "lm/model.hpp"
#include "test_support.hpp"

using namespace loom;

namespace {

lm::Settings lstm_sizes() {
    return {.architecture = lm::Architecture::lstm, .layers = 2, .heads = 1, .width = 6, .block = 4, .dropout = 0};
}

std::vector<std::size_t> ids_of(const std::vector<std::size_t>& all, std::size_t begin, std::size_t end) {
    return {all.begin() + static_cast<std::ptrdiff_t>(begin), all.begin() + static_cast<std::ptrdiff_t>(end)};
}

}  // namespace

TEST_CASE("lm: the LSTM's state carried over consecutive windows equals one long sequence") {
    lm::Model m(lstm_sizes(), 5);
    to_precision(m.parameters(), DType::f64);
    // Two streams of 13 characters: 12 predicted, as one window of 12 or three of 4.
    const std::vector<std::vector<std::size_t>> text{{0, 3, 1, 4, 1, 2, 2, 4, 0, 1, 3, 3, 2},
                                                     {4, 4, 0, 1, 2, 3, 0, 0, 1, 4, 2, 1, 0}};
    std::vector<Variable> outputs{m.loss};
    outputs.insert(outputs.end(), m.last_states.begin(), m.last_states.end());
    Session whole(outputs), windows(outputs);
    whole.forward(
        m.bind({ids_of(text[0], 0, 12), ids_of(text[1], 0, 12)}, {ids_of(text[0], 1, 13), ids_of(text[1], 1, 13)}));
    const Value want = whole.value(m.loss);
    std::vector<Value> states;
    for (std::size_t w = 0; w < 3; ++w) {
        windows.forward(m.bind({ids_of(text[0], 4 * w, 4 * w + 4), ids_of(text[1], 4 * w, 4 * w + 4)},
                               {ids_of(text[0], 4 * w + 1, 4 * w + 5), ids_of(text[1], 4 * w + 1, 4 * w + 5)}, states));
        const Value got = windows.value(m.loss);
        for (std::size_t n = 0; n < 2; ++n)
            for (std::size_t t = 0; t < 4; ++t) {
                INFO("window " << w << " stream " << n << " step " << t);
                CHECK(got.sequence<double>(n)(t, 0) ==
                      doctest::Approx(want.sequence<double>(n)(4 * w + t, 0)).epsilon(1e-12));
            }
        states.clear();
        for (const Variable& v : m.last_states) states.push_back(windows.value(v));
    }
    // Without the carried state the second window differs: the test can tell.
    windows.forward(m.bind({ids_of(text[0], 4, 8)}, {ids_of(text[0], 5, 9)}));
    CHECK(std::abs(windows.value(m.loss).sequence<double>(0)(0, 0) - want.sequence<double>(0)(4, 0)) > 1e-6);
}

TEST_CASE("lm: model files keep the architecture and the alphabet, and refuse another program's or a wrong alphabet") {
    testing::TempDir dir("lm_model_file");
    const Alphabet alphabet = Alphabet::of(U"to be, or not\n");
    for (lm::Architecture a : {lm::Architecture::transformer, lm::Architecture::lstm}) {
        lm::Settings s{.architecture = a, .layers = 2, .heads = 2, .width = 8, .block = 5, .dropout = 0.1};
        lm::Model m(s, alphabet.size());
        lm::save_model(dir.file("m.loom"), m, alphabet);
        const lm::Loaded back = lm::load_model(dir.file("m.loom"));
        CHECK(back.model->settings.architecture == a);
        CHECK(back.model->settings.block == 5);
        CHECK(back.model->settings.dropout == 0.1);
        CHECK(back.alphabet.utf8() == alphabet.utf8());
        const Bindings in = m.bind({{1, 2, 3}}, {{2, 3, 4}});
        const Bindings in_back = back.model->bind({{1, 2, 3}}, {{2, 3, 4}});
        CHECK(evaluate({m.loss}, in)[m.loss].data<float>() ==
              evaluate({back.model->loss}, in_back)[back.model->loss].data<float>());
    }
    // A model file of another program, and an alphabet that is not the model's vocabulary: refused.
    lm::Model m({.heads = 2, .width = 8, .block = 5}, alphabet.size());
    save_model_file(dir.file("other.loom"), "lm", m.parameters(), {{"alphabet", alphabet.utf8()}});
    CHECK_THROWS_WITH_AS(lm::load_model(dir.file("other.loom")), doctest::Contains("holds a model of kind 'lm'"),
                         DataError);
    lm::save_model(dir.file("short.loom"), m, Alphabet::of(U"abc"));
    CHECK_THROWS_WITH_AS(lm::load_model(dir.file("short.loom")), doctest::Contains("alphabet of 3 characters"),
                         DataError);
}

TEST_CASE("lm: a GPT trained with bfloat16 products (matmul precision medium) follows the float run") {
    // 40 AdamW steps on the same windows from the same start, at each precision. Where the CPU has
    // AVX-512 BF16 the products round their operands (2^-9 relative; Bf16Products::always, so also
    // where they would not be chosen for speed): the losses must differ, yet fall alike; elsewhere
    // medium computes as highest and they are equal.
    const lm::Settings sizes{
        .architecture = lm::Architecture::transformer, .layers = 2, .heads = 2, .width = 32, .block = 32, .dropout = 0};
    std::vector<std::size_t> text;
    for (std::size_t i = 0; i < 400; ++i) text.push_back((i * 7 + i / 5) % 11);
    std::vector<double> first, last;
    bool rounds = false;
    const Bf16ProductsScope always(Bf16Products::always);
    for (MatmulPrecision p : {MatmulPrecision::highest, MatmulPrecision::medium}) {
        set_seed(5);
        lm::Model m(sizes, 11);
        Trainer trainer(m.loss, Variable(), adamw(m.parameters(), 3e-3));
        set_matmul_precision(p);
        rounds = rounds || bf16_products();
        double loss = 0;
        for (std::size_t step = 0; step < 40; ++step) {
            std::vector<std::vector<std::size_t>> in, next;
            for (std::size_t b = 0; b < 4; ++b) {
                const std::size_t at = (step * 37 + b * 91) % (text.size() - 33);
                in.push_back(ids_of(text, at, at + 32));
                next.push_back(ids_of(text, at + 1, at + 33));
            }
            const MinibatchResult r = trainer.train_minibatch(m.bind(in, next));
            loss = r.loss_sum / static_cast<double>(r.loss_count);
            if (step == 0) first.push_back(loss);
        }
        last.push_back(loss);
        set_matmul_precision(MatmulPrecision::highest);
    }
    INFO("first " << first[0] << " " << first[1] << ", last " << last[0] << " " << last[1]);
    CHECK(last[0] < 0.5 * first[0]);  // it learns the pattern
    CHECK(last[1] == doctest::Approx(last[0]).epsilon(0.05));
    if (rounds)
        CHECK(last[1] != last[0]);
    else
        CHECK(last[1] == last[0]);
}
