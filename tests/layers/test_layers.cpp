// Dense, Embedding, Sequential, Dropout, LayerNormalization: values against formulas computed here,
// gradients by finite differences.
#include <doctest/doctest.h>

#include <cmath>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::as_variables;
using loom::testing::default_lengths;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

TEST_CASE("Dense computes activation(x W + b) and creates W at the first call") {
    auto dense = layers::Dense(2, layers::activations::tanh);
    CHECK(dense.parameters().size() == 1);  // b only, W waits for the input dimension
    Variable x = input_variable({3}, "x");
    Variable y = dense(x);
    CHECK(y.shape() == Shape{2});
    auto ps = dense.parameters();
    REQUIRE(ps.size() == 2);
    const Parameter& w = ps[0];
    const Parameter& b = ps[1];
    CHECK(w.shape() == Shape{3, 2});
    CHECK(parameter_count(ps) == 3 * 2 + 2);
    CHECK(parameter_count({}) == 0);
    b.set_value(xt::xarray<float>{0.5f, -0.25f});
    xt::xarray<double> rows = loom::testing::random_rows({3}, 2, 9);
    auto out = evaluate({y}, {{x, Value::batch(rows)}})[y].rows<double>();
    const xt::xarray<double> wv = xt::cast<double>(w.value()), bv = xt::cast<double>(b.value());
    for (std::size_t n = 0; n < 2; ++n)
        for (std::size_t j = 0; j < 2; ++j) {
            double z = bv(j);
            for (std::size_t i = 0; i < 3; ++i) z += rows(n, i) * wv(i, j);
            CHECK(out(n, j) == doctest::Approx(std::tanh(z)).epsilon(1e-6));
        }
    CHECK_THROWS_AS(dense(input_variable({4})), UserError);  // weights are shared: the input size is fixed
}

TEST_CASE("Dense and Sequential gradient checks on sequences") {
    Variable s = sequence::input_variable({3}, "s");
    auto model = layers::Sequential({layers::Dense(4, layers::activations::sigmoid), layers::Dense(2, {}, false)});
    Variable y = model(s);
    CHECK(y.shape() == Shape{2});
    auto ps = model.parameters();
    CHECK(ps.size() == 3);  // W1, b1, W2
    std::vector<Variable> wrt = as_variables(ps);
    wrt.push_back(s);
    require_gradients("Sequential(Dense, Dense)", y, {{s, Value::sequences(random_sequences({3}, default_lengths, 2))}},
                      wrt);
}

TEST_CASE("Sequential is the composition of its layers") {
    auto d1 = layers::Dense(3, layers::activations::relu), d2 = layers::Dense(2);
    auto both = layers::Sequential({d1, d2});
    Variable x = input_variable({4}, "x");
    Variable composed = both(x);
    Variable by_hand = d2(d1(x));  // the same layers, so the same parameters
    CHECK(both.parameters().size() == 4);
    xt::xarray<double> rows = loom::testing::random_rows({4}, 3, 4);
    auto out = evaluate({composed, by_hand}, {{x, Value::batch(rows)}});
    CHECK(xt::allclose(out[composed].rows<double>(), out[by_hand].rows<double>()));
}

TEST_CASE("Embedding layer: ids with an explicit or default vocabulary, dense rows by product") {
    Variable ids = sequence::input_variable({1}, "ids");
    CHECK_THROWS_WITH_AS(layers::Embedding(5)(ids), doctest::Contains("vocabulary"), UserError);
    auto explicit_vocab = layers::Embedding(5, 11);
    CHECK(explicit_vocab(ids).shape() == Shape{5});
    CHECK(explicit_vocab.parameters().at(0).shape() == Shape{11, 5});
    {
        layers::DefaultVocabulary vocab(13);
        auto from_default = layers::Embedding(5);
        CHECK(from_default(ids).shape() == Shape{5});
        CHECK(from_default.parameters().at(0).shape() == Shape{13, 5});
    }
    Variable one_hot_rows = sequence::input_variable({7}, "rows");
    auto dense_embed = layers::Embedding(2);
    Variable y = dense_embed(one_hot_rows);
    CHECK(dense_embed.parameters().at(0).shape() == Shape{7, 2});
    require_gradients("Embedding over dense rows", y,
                      {{one_hot_rows, Value::sequences(random_sequences({7}, default_lengths, 3))}},
                      as_variables(dense_embed.parameters()));
    Variable e = explicit_vocab(ids);
    require_gradients("Embedding over ids", tanh(e),
                      {{ids, Value::index_sequences({{10}, {0, 1, 2}, {3, 3, 3, 4, 5, 6, 9}})}},
                      as_variables(explicit_vocab.parameters()));
}

TEST_CASE("the seed's question model builds with the documented API") {
    layers::DefaultVocabulary vocab(10000);  // Embedding(500) reads the vocabulary size from here
    auto q_lstm = layers::Sequential(
        {layers::Embedding(500), layers::BiRecurrence(layers::LSTM(300), layers::LSTM(300)), layers::Dense(200)});
    Variable question = sequence::input_variable({1}, "question");
    Variable q_embed = q_lstm(question);
    CHECK(q_embed.shape() == Shape{200});
    CHECK(q_embed.axis() == question.axis());
    // E, two LSTMs of (W, b, U), Dense (W, b)
    CHECK(q_lstm.parameters().size() == 9);
    auto out = evaluate({q_embed}, {{question, Value::index_sequences({{9999, 3, 17}, {42}})}});
    CHECK(out[q_embed].sequence(0).shape()[0] == 3);
    CHECK(out[q_embed].sequence(1).shape()[0] == 1);
}

TEST_CASE("Dropout layer: identity in inference, masks in training") {
    auto drop = layers::Dropout(0.5, 77);
    Variable x = input_variable({50}, "x");
    Variable y = drop(x);
    xt::xarray<double> rows = loom::testing::random_rows({50}, 2, 8, 1.0, 2.0);
    CHECK(evaluate({y}, {{x, Value::batch(rows)}})[y].rows<double>() == rows);
    TrainingScope training;
    auto trained = evaluate({y}, {{x, Value::batch(rows)}})[y].rows<double>();
    std::size_t zeros = 0;
    for (std::size_t i = 0; i < trained.size(); ++i) {
        if (trained.flat(i) == 0)
            ++zeros;
        else
            CHECK(trained.flat(i) == doctest::Approx(2.0 * rows.flat(i)));
    }
    CHECK(zeros > 20);
    CHECK(zeros < 80);
    CHECK(drop.parameters().empty());
}

TEST_CASE("LayerNormalization normalizes the last axis, gradient check") {
    auto norm = layers::LayerNormalization();
    Variable s = sequence::input_variable({4}, "s");
    Variable y = norm(s);
    auto seqs = random_sequences({4}, default_lengths, 12);
    Bindings in{{s, Value::sequences(seqs)}};
    auto out = evaluate({y}, in)[y];
    for (std::size_t n = 0; n < seqs.size(); ++n) {
        auto v = out.sequence<double>(n);
        for (std::size_t t = 0; t < seqs[n].shape()[0]; ++t) {
            double mean = 0, var = 0;
            for (std::size_t j = 0; j < 4; ++j) mean += seqs[n](t, j) / 4;
            for (std::size_t j = 0; j < 4; ++j) var += (seqs[n](t, j) - mean) * (seqs[n](t, j) - mean) / 4;
            for (std::size_t j = 0; j < 4; ++j)
                CHECK(v(t, j) == doctest::Approx((seqs[n](t, j) - mean) / std::sqrt(var + 1e-5)).epsilon(1e-5));
        }
    }
    std::vector<Variable> wrt = as_variables(norm.parameters());
    wrt.push_back(s);
    require_gradients("LayerNormalization", y, in, wrt);
}
