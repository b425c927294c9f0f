// Dropout on attention's weights (AttentionOptions::dropout): with values that are one-hot per key,
// the output is the dropped weights themselves, so each can be checked against softmax(q k / sqrt(dk))
// computed here: 0 or P / (1 - rate), about `rate` of them 0, a fresh mask at every evaluation, none
// in inference mode. Gradients by finite differences in double with the seed held fixed, through
// self, causal and cross-attention on ragged batches; the rate's and the form's errors.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "attention_reference.hpp"
#include "gradcheck.hpp"
#include "graph/mode.hpp"
#include "graph/ops/kinds.hpp"

using namespace loom;
using loom::testing::head_softmax;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

namespace {

using Matrix = xt::xarray<double>;

// Values whose row j is 1 at column h * width + j of every head h: the output is then the weights.
std::vector<Matrix> one_hot_values(const std::vector<std::size_t>& lengths, std::size_t heads, std::size_t width) {
    std::vector<Matrix> v;
    for (std::size_t t : lengths) {
        Matrix m = xt::zeros<double>({t, heads * width});
        for (std::size_t j = 0; j < t; ++j)
            for (std::size_t h = 0; h < heads; ++h) m(j, h * width + j) = 1.0;
        v.push_back(m);
    }
    return v;
}

struct Counts {
    std::size_t weights = 0, dropped = 0, wrong = 0;
};

// Compares a causal self-attention's output over one-hot values with the weights computed here:
// each is 0 (dropped) or P / (1 - rate).
Counts compare(const Value& got, const std::vector<Matrix>& q, std::size_t heads, std::size_t width, double rate) {
    Counts c;
    for (std::size_t n = 0; n < q.size(); ++n) {
        const auto out = got.sequence<double>(n);
        for (std::size_t i = 0; i < q[n].shape()[0]; ++i)
            for (std::size_t h = 0; h < heads; ++h) {
                const auto p = head_softmax(q[n], q[n], i, h, heads, i + 1);
                for (std::size_t j = 0; j < width; ++j) {
                    const double y = out(i, h * width + j);
                    if (j > i) {
                        c.wrong += y != 0.0;  // a key after the query's step stays invisible
                        continue;
                    }
                    ++c.weights;
                    if (y == 0.0)
                        ++c.dropped;
                    else
                        c.wrong += std::abs(y - p[j] / (1 - rate)) > 1e-12;
                }
            }
    }
    return c;
}

}  // namespace

TEST_CASE("attention's weight dropout: each weight 0 or P / (1 - rate), about rate of them 0, fresh per evaluation") {
    const std::vector<std::size_t> lengths{20, 33, 7};
    const std::size_t heads = 2, width = 33;
    const double rate = 0.3;
    const SequenceAxis steps;
    Variable x = sequence::input_variable({4}, "x", steps);
    Variable v = sequence::input_variable({heads * width}, "v", steps);
    const auto xs = random_sequences({4}, lengths, 5, -2, 2);
    const Bindings in{{x, Value::sequences(xs)}, {v, Value::sequences(one_hot_values(lengths, heads, width))}};
    Variable out = attention(x, x, v, {.heads = heads, .causal = true, .dropout = rate, .seed = 7});

    SUBCASE("inference mode: nothing dropped") {
        const Counts c = compare(evaluate({out}, in, DType::f64)[out], xs, heads, width, 0.0);
        CHECK(c.wrong == 0);
        CHECK(c.dropped == 0);
    }
    SUBCASE("training mode") {
        const TrainingScope training;
        const Value first = evaluate({out}, in, DType::f64)[out];
        const Counts c = compare(first, xs, heads, width, rate);
        CHECK(c.wrong == 0);
        REQUIRE(c.weights == 2 * (210 + 561 + 28));
        // 1,598 weights: the dropped share's standard deviation is 0.011.
        CHECK(std::abs(static_cast<double>(c.dropped) / static_cast<double>(c.weights) - rate) < 0.05);
        // The next evaluation draws another mask; a graph made with the same seed draws the same first one.
        const Value second = evaluate({out}, in, DType::f64)[out];
        CHECK(compare(second, xs, heads, width, rate).wrong == 0);
        CHECK(xt::any(xt::not_equal(first.sequence<double>(1), second.sequence<double>(1))));
        Variable again = attention(x, x, v, {.heads = heads, .causal = true, .dropout = rate, .seed = 7});
        CHECK(xt::all(
            xt::equal(evaluate({again}, in, DType::f64)[again].sequence<double>(1), first.sequence<double>(1))));
        // In float, a graph made with the same seed drops the same weights at its first evaluation.
        Variable in_float = attention(x, x, v, {.heads = heads, .causal = true, .dropout = rate, .seed = 7});
        const Value single = evaluate({in_float}, in)[in_float];
        std::size_t differ = 0;
        for (std::size_t n = 0; n < lengths.size(); ++n) {
            const auto f = single.sequence<float>(n);
            const auto d = first.sequence<double>(n);
            for (std::size_t e = 0; e < d.size(); ++e) differ += (f.data()[e] == 0.0f) != (d.data()[e] == 0.0);
        }
        CHECK(differ == 0);
    }
}

TEST_CASE("attention's weight dropout: gradients in double with the seed held, self, causal and cross, ragged") {
    const TrainingScope training;
    Variable x = sequence::input_variable({4}, "x"), y = sequence::input_variable({4}, "y");
    Parameter wq = parameter(loom::testing::random_tensor({4, 4}, 31, -0.8, 0.8), "Wq");
    Parameter wk = parameter(loom::testing::random_tensor({4, 4}, 32, -0.8, 0.8), "Wk");
    Parameter wv = parameter(loom::testing::random_tensor({4, 6}, 33, -0.8, 0.8), "Wv");
    const std::vector<Parameter> params{wq, wk, wv};
    to_precision(params, DType::f64);
    // A seed of four 16-bit parts and the training flag, the same at every evaluation.
    const Variable seed = constant(xt::xarray<double>{12345, 678, 9, 4321, 1});
    const Bindings in{{x, Value::sequences(random_sequences({4}, {1, 3, 7}, 34, -1.5, 1.5))},
                      {y, Value::sequences(random_sequences({4}, {4, 1, 5}, 35, -1.5, 1.5))}};
    for (double rate : {0.2, 0.5}) {
        INFO("rate " << rate);
        require_gradients(
            "self",
            tanh(attention_dropping(times(x, wq), times(x, wk), times(x, wv), {.heads = 2, .dropout = rate}, seed)), in,
            {x, wq, wk, wv});
        require_gradients("causal",
                          attention_dropping(times(x, wq), times(x, wk), times(x, wv),
                                             {.heads = 2, .causal = true, .dropout = rate}, seed) *
                              1.3,
                          in, {x, wq, wk, wv});
        require_gradients(
            "cross",
            square(attention_dropping(times(x, wq), times(y, wk), times(y, wv), {.heads = 1, .dropout = rate}, seed)),
            in, {x, y, wq, wk, wv});
    }
}

TEST_CASE("attention's weight dropout: a rate outside 0 to 1 (1 excluded) and dropout over a memory are UserErrors") {
    Variable x = sequence::input_variable({4}, "x");
    for (double rate : {-0.1, 1.0, std::numeric_limits<double>::quiet_NaN()})
        CHECK_THROWS_WITH_AS(attention(x, x, x, {.dropout = rate}), doctest::Contains("attention: dropout"), UserError);
    Variable q = input_variable({4}, "q"), cache = input_variable({any_size, 4}, "cache");
    CHECK_THROWS_WITH_AS(attention(q, cache, cache, {.dropout = 0.1}), doctest::Contains("over sequences"), UserError);
}
