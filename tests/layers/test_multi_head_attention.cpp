// layers::MultiHeadAttention [torch.nn.MultiheadAttention]: values against the multi-head equations
// written here with plain loops (projections with biases, per-head softmax, output projection) for
// self-attention (causal and not) and cross-attention over another axis with ragged lengths and key
// and value widths other than model_dim; forward's weights, averaged and per head; attention over a
// memory with a mask; gradients by finite differences in double; dropout in training mode only; the
// parameters' names, shapes and draws (those of the Transformer layers' attention); the errors; and
// the Layer that loom 0.2's MultiHeadAttention(heads, model_dim) was.
#include <doctest/doctest.h>

#include <cmath>

#include <xtensor/xview.hpp>

#include "gradcheck.hpp"
#include "graph/mode.hpp"
#include "test_support.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

namespace {

using Matrix = xt::xarray<double>;

// One item's attention by the equations: Q = query Wq + bq, K = key Wk + bk, V = value Wv + bv;
// head h = softmax(Q_h K_h^T / sqrt(dh)) V_h over the first `visible` keys (j <= i when causal), on
// columns [h dh, (h + 1) dh); out = [head_0, ..., head_H-1] Wout + bout. ps: q.W, q.b, k.W, k.b,
// v.W, v.b, out.W, out.b. weights, when given, gets [Lq, H, Lk] (0 on keys not seen).
Matrix mha_by_hand(const Matrix& query, const Matrix& key, const Matrix& value, const std::vector<Parameter>& ps,
                   std::size_t heads, bool causal, std::size_t visible, Matrix* weights = nullptr) {
    REQUIRE(ps.size() == 8);
    auto param = [&](std::size_t i) { return Matrix(xt::cast<double>(ps[i].value())); };
    auto project = [](const Matrix& x, const Matrix& w, const Matrix& b) {
        Matrix out = xt::zeros<double>({x.shape()[0], w.shape()[1]});
        for (std::size_t t = 0; t < x.shape()[0]; ++t)
            for (std::size_t j = 0; j < w.shape()[1]; ++j) {
                double sum = b(j);
                for (std::size_t i = 0; i < x.shape()[1]; ++i) sum += x(t, i) * w(i, j);
                out(t, j) = sum;
            }
        return out;
    };
    const Matrix q = project(query, param(0), param(1)), k = project(key, param(2), param(3)),
                 v = project(value, param(4), param(5));
    const std::size_t lq = query.shape()[0], lk = key.shape()[0], model = q.shape()[1], dh = model / heads;
    if (weights) *weights = xt::zeros<double>({lq, heads, lk});
    Matrix concat = xt::zeros<double>({lq, model});
    for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t i = 0; i < lq; ++i) {
            const std::size_t seen = causal ? std::min(visible, i + 1) : visible;
            std::vector<double> score(seen, 0.0);
            double top = -1e300, sum = 0;
            for (std::size_t j = 0; j < seen; ++j) {
                for (std::size_t c = h * dh; c < (h + 1) * dh; ++c) score[j] += q(i, c) * k(j, c);
                score[j] /= std::sqrt(static_cast<double>(dh));
                top = std::max(top, score[j]);
            }
            for (double& x : score) sum += (x = std::exp(x - top));
            for (std::size_t j = 0; j < seen; ++j) {
                if (weights) (*weights)(i, h, j) = score[j] / sum;
                for (std::size_t c = h * dh; c < (h + 1) * dh; ++c) concat(i, c) += score[j] / sum * v(j, c);
            }
        }
    return project(concat, param(6), param(7));
}

// Gives the biases (zeros at construction) values, so that the test sees them added.
void randomize_biases(const layers::MultiHeadAttention& mha, std::uint64_t seed) {
    for (const Parameter& p : mha.parameters())
        if (p.shape().rank() == 1)
            p.set_value(Matrix(xt::cast<double>(loom::testing::random_tensor(p.shape(), seed++))));
}

std::vector<Variable> with(const std::vector<Parameter>& ps, std::initializer_list<Variable> more) {
    std::vector<Variable> out = loom::testing::as_variables(ps);
    out.insert(out.end(), more);
    return out;
}

void check_item(const xt::xarray<double>& got, const Matrix& want, double tolerance = 1e-12) {
    REQUIRE(got.shape() == want.shape());
    for (std::size_t e = 0; e < want.size(); ++e) {
        INFO("element " << e);
        CHECK(got.flat(e) == doctest::Approx(want.flat(e)).epsilon(tolerance));
    }
}

}  // namespace

TEST_CASE("MultiHeadAttention: self-attention equals the multi-head equations with biases on a ragged batch") {
    const std::vector<std::size_t> lengths{3, 1, 4};
    Variable x = sequence::input_variable({4}, "x");
    const auto xs = random_sequences({4}, lengths, 51, -1.5, 1.5);
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        layers::MultiHeadAttention mha({.model_dim = 4, .heads = 2, .causal = causal});
        randomize_biases(mha, 52);
        to_precision(mha.parameters(), DType::f64);
        Variable y = mha(x);
        CHECK(y.shape() == Shape{4});
        CHECK(y.axis() == x.axis());
        const Value out = evaluate({y}, {{x, Value::sequences(xs)}}, DType::f64)[y];
        for (std::size_t n = 0; n < lengths.size(); ++n) {
            CAPTURE(n);
            check_item(out.sequence<double>(n),
                       mha_by_hand(xs[n], xs[n], xs[n], mha.parameters(), 2, causal, lengths[n]));
        }
    }
}

TEST_CASE("MultiHeadAttention: cross-attention over another axis, key_dim and value_dim other than model_dim") {
    const SequenceAxis memory_axis;
    const std::vector<std::size_t> query_lengths{3, 1, 4}, key_lengths{2, 5, 1};
    Variable q = sequence::input_variable({6}, "q");
    Variable k = sequence::input_variable({3}, "k", memory_axis), v = sequence::input_variable({5}, "v", memory_axis);
    const auto qs = random_sequences({6}, query_lengths, 53, -1.5, 1.5), ks = random_sequences({3}, key_lengths, 54),
               vs = random_sequences({5}, key_lengths, 55);
    const Bindings in{{q, Value::sequences(qs)}, {k, Value::sequences(ks)}, {v, Value::sequences(vs)}};
    for (std::size_t heads : {1, 3}) {
        CAPTURE(heads);
        layers::MultiHeadAttention mha({.model_dim = 6, .heads = heads, .key_dim = 3, .value_dim = 5});
        randomize_biases(mha, 56);
        to_precision(mha.parameters(), DType::f64);
        Variable y = mha(q, k, v);
        CHECK(y.shape() == Shape{6});
        CHECK(y.axis() == q.axis());
        const Value out = evaluate({y}, in, DType::f64)[y];
        for (std::size_t n = 0; n < qs.size(); ++n) {
            CAPTURE(n);
            check_item(out.sequence<double>(n),
                       mha_by_hand(qs[n], ks[n], vs[n], mha.parameters(), heads, false, key_lengths[n]));
        }
    }
}

TEST_CASE("MultiHeadAttention::forward: the output and the weights, averaged or per head, against the equations") {
    const SequenceAxis memory_axis;
    const std::vector<std::size_t> query_lengths{3, 1, 4}, key_lengths{2, 5, 1};
    Variable q = sequence::input_variable({4}, "q");
    Variable kv = sequence::input_variable({3}, "kv", memory_axis);
    const auto qs = random_sequences({4}, query_lengths, 57, -1.5, 1.5), kvs = random_sequences({3}, key_lengths, 58);
    const Bindings in{{q, Value::sequences(qs)}, {kv, Value::sequences(kvs)}};
    layers::MultiHeadAttention mha({.model_dim = 4, .heads = 2, .key_dim = 3, .value_dim = 3});
    randomize_biases(mha, 59);
    to_precision(mha.parameters(), DType::f64);
    const auto averaged = mha.forward(q, kv, kv);
    const auto per_head = mha.forward(q, kv, kv, true, false);
    const auto none = mha.forward(q, kv, kv, false);
    CHECK_FALSE(none.weights);
    CHECK(averaged.weights.shape() == Shape{0});  // [Tk_max], known when a batch is bound
    CHECK(per_head.weights.shape() == Shape{2, 0});
    const auto out = evaluate({averaged.output, averaged.weights, per_head.weights, none.output}, in, DType::f64);
    for (std::size_t n = 0; n < qs.size(); ++n) {
        CAPTURE(n);
        Matrix weights;
        const Matrix want = mha_by_hand(qs[n], kvs[n], kvs[n], mha.parameters(), 2, false, key_lengths[n], &weights);
        check_item(out[averaged.output].sequence<double>(n), want);
        check_item(out[none.output].sequence<double>(n), want);
        const auto heads = out[per_head.weights].sequence<double>(n);  // [Lq, 2, 5]
        const auto mean = out[averaged.weights].sequence<double>(n);   // [Lq, 5]
        REQUIRE(heads.shape() == std::vector<std::size_t>{query_lengths[n], 2, 5});
        REQUIRE(mean.shape() == std::vector<std::size_t>{query_lengths[n], 5});
        for (std::size_t i = 0; i < query_lengths[n]; ++i)
            for (std::size_t j = 0; j < 5; ++j) {
                CAPTURE(i);
                CAPTURE(j);
                for (std::size_t h = 0; h < 2; ++h)
                    CHECK(heads(i, h, j) ==
                          doctest::Approx(j < key_lengths[n] ? weights(i, h, j) : 0.0).epsilon(1e-12));
                CHECK(mean(i, j) == doctest::Approx((heads(i, 0, j) + heads(i, 1, j)) / 2).epsilon(1e-12));
            }
    }
}

TEST_CASE("MultiHeadAttention::over_memory: one query per item over batch keys and values with a mask") {
    layers::MultiHeadAttention mha({.model_dim = 4, .heads = 2, .key_dim = 3, .value_dim = 5});
    randomize_biases(mha, 60);
    to_precision(mha.parameters(), DType::f64);
    Variable query = input_variable({4}, "query");
    Variable keys = input_variable({any_size, 3}, "keys"), values = input_variable({any_size, 5}, "values");
    Variable mask = input_variable({any_size}, "mask");
    Variable y = mha.over_memory(query, keys, values, mask);
    CHECK(y.shape() == Shape{4});
    const Matrix qv = random_rows({4}, 3, 61, -1.5, 1.5), kv = random_rows({4, 3}, 3, 62),
                 vv = random_rows({4, 5}, 3, 63);
    const std::vector<std::size_t> real{4, 2, 1};
    Matrix m = xt::zeros<double>({std::size_t{3}, std::size_t{4}});
    for (std::size_t n = 0; n < 3; ++n)
        for (std::size_t j = 0; j < real[n]; ++j) m(n, j) = 1.0;
    const Bindings in{
        {query, Value::batch(qv)}, {keys, Value::batch(kv)}, {values, Value::batch(vv)}, {mask, Value::batch(m)}};
    const auto got = evaluate({y}, in, DType::f64)[y].data<double>();
    for (std::size_t n = 0; n < 3; ++n) {
        CAPTURE(n);
        const Matrix qn = xt::view(qv, xt::range(n, n + 1), xt::all());
        const Matrix kn = xt::view(kv, n, xt::all(), xt::all()), vn = xt::view(vv, n, xt::all(), xt::all());
        check_item(Matrix(xt::view(got, xt::range(n, n + 1), xt::all())),
                   mha_by_hand(qn, kn, vn, mha.parameters(), 2, false, real[n]));
    }
    SUBCASE("without a mask every key is real") {
        Variable all = mha.over_memory(query, keys, values);
        const auto unmasked = evaluate({all}, in, DType::f64)[all].data<double>();
        const Matrix q1 = xt::view(qv, xt::range(2, 3), xt::all());
        const Matrix k1 = xt::view(kv, 2, xt::all(), xt::all()), v1 = xt::view(vv, 2, xt::all(), xt::all());
        check_item(Matrix(xt::view(unmasked, xt::range(2, 3), xt::all())),
                   mha_by_hand(q1, k1, v1, mha.parameters(), 2, false, 4));
    }
    SUBCASE("gradients in double") {
        require_gradients("over_memory", square(y), in, with(mha.parameters(), {query, keys, values}));
    }
}

TEST_CASE("MultiHeadAttention: gradients in double on ragged batches, self, causal and cross") {
    const SequenceAxis memory_axis;
    Variable x = sequence::input_variable({4}, "x");
    Variable k = sequence::input_variable({3}, "k", memory_axis), v = sequence::input_variable({5}, "v", memory_axis);
    const Bindings in{{x, Value::sequences(random_sequences({4}, {3, 1, 4}, 64, -1.5, 1.5))},
                      {k, Value::sequences(random_sequences({3}, {2, 5, 1}, 65, -1.5, 1.5))},
                      {v, Value::sequences(random_sequences({5}, {2, 5, 1}, 66, -1.5, 1.5))}};
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        layers::MultiHeadAttention self({.model_dim = 4, .heads = 2, .causal = causal});
        randomize_biases(self, 67);
        to_precision(self.parameters(), DType::f64);
        require_gradients("self", tanh(self(x)) * 1.3, in, with(self.parameters(), {x}));
    }
    layers::MultiHeadAttention cross({.model_dim = 4, .heads = 2, .key_dim = 3, .value_dim = 5});
    randomize_biases(cross, 68);
    to_precision(cross.parameters(), DType::f64);
    require_gradients("cross", square(cross(x, k, v)), in, with(cross.parameters(), {x, k, v}));
    const auto both = cross.forward(x, k, v, true, false);
    const auto ps = cross.parameters();  // the weights depend on q.W, q.b, k.W, k.b only
    require_gradients("per-head weights", square(both.weights) * 3.0, in, with({ps[0], ps[1], ps[2], ps[3]}, {x, k}));
}

TEST_CASE("MultiHeadAttention: dropout on the weights in training mode only") {
    Variable x = sequence::input_variable({4}, "x");
    const auto xs = random_sequences({4}, {3, 1, 4}, 69, -1.5, 1.5);
    layers::MultiHeadAttention mha({.model_dim = 4, .heads = 2, .dropout = 0.5});
    to_precision(mha.parameters(), DType::f64);
    Variable y = mha(x);
    const Bindings in{{x, Value::sequences(xs)}};
    const Value inference = evaluate({y}, in, DType::f64)[y];
    for (std::size_t n = 0; n < xs.size(); ++n)
        check_item(inference.sequence<double>(n),
                   mha_by_hand(xs[n], xs[n], xs[n], mha.parameters(), 2, false, xs[n].shape()[0]));
    const TrainingScope training;
    const Value trained = evaluate({y}, in, DType::f64)[y];
    double difference = 0;
    for (std::size_t n = 0; n < xs.size(); ++n)
        difference += xt::sum(xt::abs(trained.sequence<double>(n) - inference.sequence<double>(n)))();
    CHECK(difference > 1e-6);
}

TEST_CASE("MultiHeadAttention: the parameters' names, shapes and order, the Transformer's draws one for one") {
    layers::MultiHeadAttention mha({.model_dim = 6, .heads = 3, .key_dim = 2, .value_dim = 5, .name = "attn"});
    const auto ps = mha.parameters();
    REQUIRE(ps.size() == 8);
    const char* names[] = {"attn.q.W", "attn.q.b", "attn.k.W",   "attn.k.b",
                           "attn.v.W", "attn.v.b", "attn.out.W", "attn.out.b"};
    const Shape shapes[] = {Shape{6, 6}, Shape{6}, Shape{2, 6}, Shape{6}, Shape{5, 6}, Shape{6}, Shape{6, 6}, Shape{6}};
    for (std::size_t i = 0; i < 8; ++i) {
        CHECK(ps[i].name() == names[i]);
        CHECK(ps[i].shape() == shapes[i]);
        if (i % 2) CHECK(xt::all(xt::equal(ps[i].value(), 0.0f)));
    }
    const auto unbiased = layers::MultiHeadAttention({.model_dim = 4, .heads = 2, .bias = false}).parameters();
    REQUIRE(unbiased.size() == 4);
    CHECK(unbiased[3].name() == "MultiHeadAttention.out.W");
    CHECK(mha.heads() == 3);
    CHECK(mha.model_dim() == 6);

    // A TransformerEncoderLayer makes its self-attention's parameters first, with the same draws.
    set_seed(77);
    layers::MultiHeadAttention alone({.model_dim = 4, .heads = 2, .name = "enc.self_attn"});
    set_seed(77);
    layers::TransformerEncoderLayer encoder({.model_dim = 4, .heads = 2, .feedforward_dim = 8}, "enc");
    const auto mine = alone.parameters(), theirs = encoder.parameters();
    REQUIRE(theirs.size() >= 8);
    for (std::size_t i = 0; i < 8; ++i) {
        CAPTURE(i);
        CHECK(mine[i].name() == theirs[i].name());
        CHECK(mine[i].shape() == theirs[i].shape());
        CHECK(xt::all(xt::equal(mine[i].value(), theirs[i].value())));
    }
}

TEST_CASE("MultiHeadAttention: loom 0.2's Layer form still compiles and runs self-attention") {
    Variable x = sequence::input_variable({4}, "x");
    layers::Layer old = layers::MultiHeadAttention(2, 4);
    CHECK(old.name() == "MultiHeadAttention");
    CHECK(old.parameters().size() == 8);
    CHECK(old(x).shape() == Shape{4});

    layers::MultiHeadAttention mha(2, 4, true, "causal");
    layers::Layer layer = mha;
    const auto ps = layer.parameters();
    REQUIRE(ps.size() == 8);
    CHECK(ps[0].name() == "causal.q.W");
    Variable a = mha(x), b = layer(x);
    const auto out = evaluate({a, b}, {{x, Value::sequences(random_sequences({4}, {3, 1, 4}, 70))}});
    for (std::size_t n = 0; n < 3; ++n) CHECK(xt::all(xt::equal(out[a].sequence<float>(n), out[b].sequence<float>(n))));
}

TEST_CASE("MultiHeadAttention's errors name the layer, the input and the shapes") {
    CHECK_THROWS_WITH_AS(layers::MultiHeadAttention(3, 4), doctest::Contains("multiple of heads (3)"), UserError);
    CHECK_THROWS_AS(layers::MultiHeadAttention({.model_dim = 0}), UserError);
    CHECK_THROWS_AS(layers::MultiHeadAttention({.model_dim = 4, .heads = 0}), UserError);
    CHECK_THROWS_WITH_AS(layers::MultiHeadAttention({.model_dim = 4, .dropout = 1.0}), doctest::Contains("dropout"),
                         UserError);

    const SequenceAxis memory_axis;
    layers::MultiHeadAttention mha({.model_dim = 4, .heads = 2, .key_dim = 3, .name = "mha"});
    Variable x = sequence::input_variable({5}, "wide"), q = sequence::input_variable({4}, "q");
    Variable k = sequence::input_variable({3}, "k", memory_axis), v4 = sequence::input_variable({4}, "v", memory_axis);
    loom::testing::expect_user_error([&] { mha(x); },
                                     {"mha: the query", "'wide'", "sample shape [5]; the layer takes [4]"});
    loom::testing::expect_user_error([&] { mha(q, v4, v4); },
                                     {"mha: the key", "'v'", "sample shape [4]; the layer takes [3]"});
    loom::testing::expect_user_error([&] { mha(q, k, k); },
                                     {"mha: the value", "'k'", "sample shape [3]; the layer takes [4]"});
    Variable v_elsewhere = sequence::input_variable({4}, "v2");
    CHECK_THROWS_WITH_AS(mha(q, k, v_elsewhere), doctest::Contains("one sequence axis"), UserError);
    Variable batch_query = input_variable({4}, "bq");
    CHECK_THROWS_WITH_AS(mha(batch_query, k, v4), doctest::Contains("over_memory"), UserError);
    layers::MultiHeadAttention causal({.model_dim = 4, .heads = 2, .key_dim = 3, .causal = true, .name = "c"});
    CHECK_THROWS_WITH_AS(causal(q, k, v4), doctest::Contains("one sequence axis"), UserError);

    Variable keys = input_variable({any_size, 3}, "keys"), values = input_variable({any_size, 4}, "values");
    Variable flat_keys = input_variable({3}, "flat");
    loom::testing::expect_user_error([&] { mha.over_memory(batch_query, flat_keys, values); },
                                     {"mha: the keys", "'flat'", "sample shape [3]; the layer takes [Tk, 3]"});
    CHECK_THROWS_WITH_AS(mha.over_memory(q, keys, values), doctest::Contains("batch values"), UserError);
    CHECK_NOTHROW(mha.over_memory(batch_query, keys, values));
}
