// The graph ops the layers add: embedding (sparse gradient, id checks) and dropout (modes, masks).
#include <doctest/doctest.h>

#include <set>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::require_gradients;

TEST_CASE("embedding picks table rows and its gradient touches only the used rows") {
    Variable ids = sequence::input_variable({1}, "ids");
    xt::xarray<float> table_value = loom::testing::random_tensor({6, 3}, 1);
    Parameter table = parameter(table_value, "E");
    Variable e = embedding(ids, table);
    CHECK(e.shape() == Shape{3});
    Bindings in{{ids, Value::index_sequences({{4, 1, 4}, {2}})}};
    auto out = evaluate({e}, in);
    auto s0 = out[e].sequence(0), s1 = out[e].sequence(1);
    const std::size_t rows0[] = {4, 1, 4};
    for (std::size_t t = 0; t < 3; ++t)
        for (std::size_t j = 0; j < 3; ++j) CHECK(s0(t, j) == table_value(rows0[t], j));
    for (std::size_t j = 0; j < 3; ++j) CHECK(s1(0, j) == table_value(2, j));

    // d(sum e)/dE: the count of each id in every column of its row, zero elsewhere.
    auto g = gradients(e, in, {table})[table].tensor<double>();
    const double count[] = {0, 1, 1, 0, 2, 0};
    for (std::size_t r = 0; r < 6; ++r)
        for (std::size_t j = 0; j < 3; ++j) CHECK(g(r, j) == count[r]);
}

TEST_CASE("embedding gradient check on sequences of lengths 1, 3, 7") {
    Variable ids = sequence::input_variable({1}, "ids");
    Parameter table = parameter({9, 4}, glorot_uniform(), "E");
    Variable y = tanh(embedding(ids, table));
    Bindings in{{ids, Value::index_sequences({{3}, {0, 8, 3}, {1, 2, 3, 4, 5, 6, 7}})}};
    require_gradients("embedding", y, in, {table});
}

TEST_CASE("embedding rejects an id outside the table, naming the op and the id") {
    Variable ids = sequence::input_variable({1}, "ids");
    Parameter table = parameter({5, 2}, glorot_uniform(), "E");
    Variable e = embedding(ids, table);
    Bindings in{{ids, Value::index_sequences({{1, 7}})}};
    CHECK_THROWS_WITH_AS(evaluate({e}, in), doctest::Contains("embedding: id 7"), UserError);
    CHECK_THROWS_AS(embedding(ids, parameter({5}, glorot_uniform())), UserError);
    CHECK_THROWS_AS(embedding(sequence::input_variable({2}), table), UserError);
}

TEST_CASE("training mode: default inference, TrainingScope restores") {
    CHECK_FALSE(is_training());
    {
        TrainingScope training;
        CHECK(is_training());
        {
            TrainingScope inference(false);
            CHECK_FALSE(is_training());
        }
        CHECK(is_training());
    }
    CHECK_FALSE(is_training());
}

TEST_CASE("dropout: identity in inference, a fresh scaled Bernoulli mask in training") {
    Variable x = input_variable({200}, "x");
    Variable y = dropout(x, 0.25, 1234);
    xt::xarray<double> rows = loom::testing::random_rows({200}, 4, 3, 0.5, 1.5);
    Bindings in{{x, Value::batch(rows)}};
    auto inference = evaluate({y}, in)[y].rows<double>();
    CHECK(inference == rows);

    TrainingScope training;
    auto a = evaluate({y}, in)[y].rows<double>();
    auto b = evaluate({y}, in)[y].rows<double>();
    std::size_t zeros = 0, differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double ra = a.flat(i) / rows.flat(i);
        CHECK((ra == doctest::Approx(0.0) || ra == doctest::Approx(1.0 / 0.75)));
        zeros += a.flat(i) == 0;
        differ += (a.flat(i) == 0) != (b.flat(i) == 0);
    }
    CHECK(zeros > 120);  // about 200 of 800
    CHECK(zeros < 280);
    CHECK(differ > 0);  // a new mask at every evaluation

    // The gradient is the mask: each element 0 or 1 / (1 - rate).
    auto g = gradients(y, in, {x})[x].rows<double>();
    std::size_t dropped = 0;
    for (double v : g) {
        CHECK((v == 0.0 || v == doctest::Approx(1.0 / 0.75)));
        dropped += v == 0.0;
    }
    CHECK(dropped > 120);
    CHECK(dropped < 280);
}

TEST_CASE("dropout gradient check in inference mode, and bad rates") {
    Variable s = sequence::input_variable({3}, "s");
    Variable y = dropout(s * s, 0.5);
    Bindings in{{s, Value::sequences(loom::testing::random_sequences({3}, loom::testing::default_lengths, 5))}};
    require_gradients("dropout (inference)", y, in, {s});
    CHECK_THROWS_AS(dropout(s, 1.0), UserError);
    CHECK_THROWS_AS(dropout(s, -0.1), UserError);
    CHECK(dropout(s, 0.0) == s);
}
