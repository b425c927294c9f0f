// attention_head_weights, each head's weights of the attention op over sequences: values against a
// softmax written here with plain loops over ragged batches (self, causal, cross-attention over
// another axis with other lengths), their mean over the heads against attention_weights, gradients
// by finite differences in double, and the shape errors.
#include <doctest/doctest.h>

#include <cmath>

#include "attention_reference.hpp"
#include "gradcheck.hpp"

using namespace loom;
using loom::testing::head_softmax;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

namespace {

using Matrix = xt::xarray<double>;

// Checks got (a sequence [H, Tk_max] per item) against head_softmax, 0 past each item's keys and
// past the query's step when causal.
void check_heads(const Value& got, const std::vector<Matrix>& qs, const std::vector<Matrix>& ks, std::size_t heads,
                 bool causal) {
    std::size_t longest = 0;
    for (const Matrix& k : ks) longest = std::max(longest, k.shape()[0]);
    REQUIRE(got.num_items() == qs.size());
    for (std::size_t n = 0; n < qs.size(); ++n) {
        const auto g = got.sequence<double>(n);
        REQUIRE(g.shape() == std::vector<std::size_t>{qs[n].shape()[0], heads, longest});
        const std::size_t lk = ks[n].shape()[0];
        for (std::size_t i = 0; i < qs[n].shape()[0]; ++i)
            for (std::size_t h = 0; h < heads; ++h) {
                const std::size_t visible = causal ? std::min(lk, i + 1) : lk;
                const auto p = head_softmax(qs[n], ks[n], i, h, heads, visible);
                for (std::size_t j = 0; j < longest; ++j) {
                    INFO("item " << n << " query " << i << " head " << h << " key " << j);
                    CHECK(g(i, h, j) == doctest::Approx(j < visible ? p[j] : 0.0).epsilon(1e-12));
                }
            }
    }
}

}  // namespace

TEST_CASE("attention_head_weights: each head's softmax(q k / sqrt(dk)), 0 past the item's keys, self and causal") {
    const std::vector<std::size_t> lengths{3, 1, 4};
    Variable x = sequence::input_variable({6}, "x");
    const auto xs = random_sequences({6}, lengths, 61, -2, 2);
    for (std::size_t heads : {1, 2, 3})
        for (bool causal : {false, true}) {
            CAPTURE(heads);
            CAPTURE(causal);
            Variable w = attention_head_weights(x, x, {.heads = heads, .causal = causal});
            CHECK(w.shape() == Shape{heads, 0});
            CHECK(w.axis() == x.axis());
            check_heads(evaluate({w}, {{x, Value::sequences(xs)}}, DType::f64)[w], xs, xs, heads, causal);
        }
}

TEST_CASE(
    "attention_head_weights: cross-attention over keys on another axis with other lengths, the mean is "
    "attention_weights") {
    const SequenceAxis keys_axis;
    Variable q = sequence::input_variable({4}, "q"), k = sequence::input_variable({4}, "k", keys_axis);
    const auto qs = random_sequences({4}, {3, 1, 4}, 62, -2, 2), ks = random_sequences({4}, {2, 5, 1}, 63, -2, 2);
    const Bindings in{{q, Value::sequences(qs)}, {k, Value::sequences(ks)}};
    Variable per_head = attention_head_weights(q, k, {.heads = 2});
    Variable mean = attention_weights(q, k, {.heads = 2});
    const auto out = evaluate({per_head, mean}, in, DType::f64);
    check_heads(out[per_head], qs, ks, 2, false);
    for (std::size_t n = 0; n < qs.size(); ++n) {
        const auto h = out[per_head].sequence<double>(n);
        const auto m = out[mean].sequence<double>(n);
        REQUIRE(m.shape()[1] == 5);
        for (std::size_t i = 0; i < qs[n].shape()[0]; ++i)
            for (std::size_t j = 0; j < 5; ++j)
                CHECK(m(i, j) == doctest::Approx((h(i, 0, j) + h(i, 1, j)) / 2).epsilon(1e-12));
    }
    SUBCASE("float") {
        const Value f = evaluate({per_head}, in)[per_head];
        for (std::size_t n = 0; n < qs.size(); ++n) {
            const auto got = f.sequence<float>(n);
            const auto want = out[per_head].sequence<double>(n);
            REQUIRE(got.size() == want.size());
            for (std::size_t e = 0; e < got.size(); ++e)
                CHECK(static_cast<double>(got.data()[e]) == doctest::Approx(want.data()[e]).epsilon(1e-5));
        }
    }
}

TEST_CASE("attention_head_weights: gradients in double on ragged batches, self, causal and cross") {
    const SequenceAxis keys_axis;
    Variable x = sequence::input_variable({4}, "x"), y = sequence::input_variable({4}, "y", keys_axis);
    Parameter wq = parameter(loom::testing::random_tensor({4, 4}, 64, -0.8, 0.8), "Wq");
    Parameter wk = parameter(loom::testing::random_tensor({4, 4}, 65, -0.8, 0.8), "Wk");
    to_precision({wq, wk}, DType::f64);
    const Bindings in{{x, Value::sequences(random_sequences({4}, {3, 1, 4}, 66, -1.5, 1.5))},
                      {y, Value::sequences(random_sequences({4}, {2, 5, 1}, 67, -1.5, 1.5))}};
    // Squared and scaled, so that the gradient of each weight differs (a plain sum of a softmax is 1).
    require_gradients("self", square(attention_head_weights(times(x, wq), times(x, wk), {.heads = 2})) * 3.0, in,
                      {x, wq, wk});
    require_gradients("causal",
                      square(attention_head_weights(times(x, wq), times(x, wk), {.heads = 2, .causal = true})) * 3.0,
                      in, {x, wq, wk});
    require_gradients("cross", square(attention_head_weights(times(x, wq), times(y, wk), {.heads = 1})) * 3.0, in,
                      {x, y, wq, wk});
}

TEST_CASE("attention_head_weights: heads that do not divide the width and other mismatches are UserErrors") {
    Variable x = sequence::input_variable({6}, "x"), z = sequence::input_variable({4}, "z");
    CHECK_THROWS_WITH_AS(attention_head_weights(x, x, {.heads = 4}), doctest::Contains("multiples of the 4 heads"),
                         UserError);
    CHECK_THROWS_WITH_AS(attention_head_weights(x, z), doctest::Contains("queries (6) and keys (4)"), UserError);
    CHECK_THROWS_WITH_AS(attention_head_weights(x, x, {.heads = 0}), doctest::Contains("heads must be at least 1"),
                         UserError);
    Variable q = input_variable({6}, "q");
    CHECK_THROWS_WITH_AS(attention_head_weights(q, x), doctest::Contains("must be a sequence"), UserError);
    CHECK_THROWS_WITH_AS(attention_head_weights(x, x, {.key_mask = q}), doctest::Contains("key_mask"), UserError);
}
