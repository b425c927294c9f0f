// The attention family: values against the seeds' numbers and formulas computed here, gradients by
// finite differences on sequences of lengths 1, 3 and 7 (padding included).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include <xtensor-blas/xlinalg.hpp>

#include <xtensor/xview.hpp>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::default_lengths;
using loom::testing::random_rows;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

namespace {

std::vector<Variable> with(const std::vector<Parameter>& ps, std::initializer_list<Variable> more) {
    std::vector<Variable> out = loom::testing::as_variables(ps);
    out.insert(out.end(), more);
    return out;
}

// Softmax attention of query q over rows [0, count) of keys, values: the context.
std::vector<double> attend(const std::vector<double>& scores, const xt::xarray<double>& values) {
    double mx = -1e300, sum = 0;
    for (double s : scores) mx = std::max(mx, s);
    for (double s : scores) sum += std::exp(s - mx);
    std::vector<double> ctx(values.shape()[1], 0.0);
    for (std::size_t j = 0; j < scores.size(); ++j)
        for (std::size_t k = 0; k < ctx.size(); ++k) ctx[k] += std::exp(scores[j] - mx) / sum * values(j, k);
    return ctx;
}

double dot_row(const xt::xarray<double>& a, std::size_t i, const xt::xarray<double>& b, std::size_t j) {
    double d = 0;
    for (std::size_t k = 0; k < a.shape()[1]; ++k) d += a(i, k) * b(j, k);
    return d;
}

}  // namespace

TEST_CASE("seed 002: dot attention of a decoder state over four annotations") {
    Variable dec = input_variable({3}, "dec_hidden_state");
    Variable ann = sequence::input_variable({3}, "annotations");
    auto a = layers::dot_product_attention(dec, ann, ann);
    xt::xarray<double> d = {{5, 1, 20}};
    xt::xarray<double> annotations = {{3, 12, 45}, {59, 2, 5}, {1, 43, 5}, {4, 3, 45.3}};
    auto out =
        evaluate({a.scores, a.weights, a.context},
                 {{dec, Value::batch(d)}, {ann, Value::sequences(std::vector<xt::xarray<double>>{annotations})}});
    auto scores = out[a.scores].sequence<double>(0), weights = out[a.weights].sequence<double>(0);
    const double expected[] = {927, 397, 148, 929};
    for (std::size_t t = 0; t < 4; ++t) CHECK(scores(t, 0) == doctest::Approx(expected[t]));
    CHECK(weights(0, 0) == doctest::Approx(0.1192).epsilon(1e-3));
    CHECK(weights(3, 0) == doctest::Approx(0.8808).epsilon(1e-3));
    CHECK(weights(1, 0) < 1e-100);
    auto ctx = out[a.context].rows<double>();
    auto direct = attend({927, 397, 148, 929}, annotations);
    for (std::size_t k = 0; k < 3; ++k) CHECK(ctx(0, k) == doctest::Approx(direct[k]).epsilon(1e-9));
}

TEST_CASE("seed 000: the log-sum-exp recurrence equals sequence::softmax, gradient check") {
    Variable s = sequence::input_variable({4}, "s");
    Parameter w = parameter({4, 1}, glorot_normal(), "w");
    Variable z = times(s, w);
    auto a = layers::sequence_softmax_attention(z, s);
    Variable reference = sequence::softmax(z);
    Bindings in{{s, Value::sequences(random_sequences({4}, default_lengths, 1, -2, 2))}};
    auto out = evaluate({a.weights, reference}, in);
    for (std::size_t n = 0; n < 3; ++n)
        CHECK(xt::allclose(out[a.weights].sequence<double>(n), out[reference].sequence<double>(n), 1e-9, 1e-12));
    require_gradients("sequence_softmax_attention", a.context, in, {w, s});
}

TEST_CASE("dot and scaled dot attention of one query per sequence: values and gradients") {
    Variable q = input_variable({4}, "q");
    Variable keys = sequence::input_variable({4}, "k");
    Variable values = sequence::input_variable({2}, "v", SequenceAxis());
    SequenceAxis axis;
    Variable k2 = sequence::input_variable({4}, "k", axis), v2 = sequence::input_variable({2}, "v", axis);
    auto ks = random_sequences({4}, default_lengths, 2), vs = random_sequences({2}, default_lengths, 3);
    auto qs = random_rows({4}, 3, 4);
    Bindings in{{q, Value::batch(qs)}, {k2, Value::sequences(ks)}, {v2, Value::sequences(vs)}};
    for (bool scaled : {false, true}) {
        auto a = layers::dot_product_attention(q, k2, v2, scaled);
        auto ctx = evaluate({a.context}, in)[a.context].rows<double>();
        for (std::size_t n = 0; n < 3; ++n) {
            std::vector<double> sc;
            for (std::size_t j = 0; j < ks[n].shape()[0]; ++j) {
                double d = 0;
                for (std::size_t k = 0; k < 4; ++k) d += qs(n, k) * ks[n](j, k);
                sc.push_back(scaled ? d / 2.0 : d);
            }
            auto direct = attend(sc, vs[n]);
            for (std::size_t k = 0; k < 2; ++k) CHECK(ctx(n, k) == doctest::Approx(direct[k]).epsilon(1e-9));
        }
        require_gradients(scaled ? "scaled dot attention" : "dot attention", a.context, in, {q, k2, v2});
    }
    CHECK_THROWS_AS(layers::dot_product_attention(q, keys, values), UserError);  // keys and values on different axes
}

TEST_CASE("self-attention, bidirectional and causal, equals a direct computation per sequence") {
    Variable x = sequence::input_variable({3}, "x");
    auto xs = random_sequences({3}, default_lengths, 5);
    Bindings in{{x, Value::sequences(xs)}};
    for (bool causal : {false, true}) {
        auto a = layers::self_attention(x, true, causal);
        CHECK(a.context.shape() == Shape{3});
        auto out = evaluate({a.context}, in)[a.context];
        for (std::size_t n = 0; n < xs.size(); ++n) {
            auto ctx = out.sequence<double>(n);
            const std::size_t len = xs[n].shape()[0];
            REQUIRE(ctx.shape()[0] == len);
            for (std::size_t i = 0; i < len; ++i) {
                std::vector<double> sc;
                const std::size_t visible = causal ? i + 1 : len;
                for (std::size_t j = 0; j < visible; ++j) sc.push_back(dot_row(xs[n], i, xs[n], j) / std::sqrt(3.0));
                auto direct = attend(sc, xt::view(xs[n], xt::range(0, visible), xt::all()));
                for (std::size_t k = 0; k < 3; ++k) CHECK(ctx(i, k) == doctest::Approx(direct[k]).epsilon(1e-9));
            }
        }
        require_gradients(causal ? "causal self-attention" : "self-attention", a.context, in, {x});
    }
}

TEST_CASE("seed 003: non-parametric and parametric self-attention") {
    Variable x = sequence::input_variable({3}, "context");
    xt::xarray<double> context = {{0.6, 0.2, 0.8}, {0.2, 0.3, 0.1}, {0.9, 0.1, 0.8}, {0.4, 0.1, 0.4}, {0.4, 0.1, 0.6}};
    auto plain = layers::self_attention(x, false);
    auto out =
        evaluate({plain.context}, {{x, Value::sequences(std::vector<xt::xarray<double>>{context})}})[plain.context]
            .sequence<double>(0);
    CHECK(out.shape()[0] == 5);
    for (std::size_t i = 0; i < 5; ++i) {
        std::vector<double> sc;
        for (std::size_t j = 0; j < 5; ++j) sc.push_back(dot_row(context, i, context, j));
        auto direct = attend(sc, context);
        for (std::size_t k = 0; k < 3; ++k) CHECK(out(i, k) == doctest::Approx(direct[k]).epsilon(1e-9));
    }

    auto layer = layers::ParametricSelfAttention();
    Variable y = layer(x);
    auto ps = layer.parameters();
    REQUIRE(ps.size() == 4);
    auto seqs = random_sequences({3}, default_lengths, 6);
    Bindings in{{x, Value::sequences(seqs)}};
    auto yv = evaluate({y}, in)[y];
    auto m = [&](std::size_t i) { return xt::xarray<double>(xt::cast<double>(ps[i].value())); };
    const auto wq = m(0), wk = m(1), wv = m(2), wo = m(3);
    for (std::size_t n = 0; n < seqs.size(); ++n) {
        xt::xarray<double> q = xt::linalg::dot(seqs[n], wq), k = xt::linalg::dot(seqs[n], wk),
                           v = xt::linalg::dot(seqs[n], wv);
        auto got = yv.sequence<double>(n);
        for (std::size_t i = 0; i < seqs[n].shape()[0]; ++i) {
            std::vector<double> sc;
            for (std::size_t j = 0; j < seqs[n].shape()[0]; ++j) sc.push_back(dot_row(q, i, k, j) / std::sqrt(3.0));
            auto ctx = attend(sc, v);
            for (std::size_t c = 0; c < 3; ++c) {
                double o = 0;
                for (std::size_t r = 0; r < 3; ++r) o += std::tanh(ctx[r]) * wo(r, c);
                CHECK(got(i, c) == doctest::Approx(o).epsilon(1e-9));
            }
        }
    }
    require_gradients("ParametricSelfAttention", y, in, with(ps, {x}));
    auto causal = layers::ParametricSelfAttention(true);
    Variable yc = causal(x);
    require_gradients("ParametricSelfAttention (causal)", yc, in, with(causal.parameters(), {x}));
}

TEST_CASE("additive (Bahdanau) and general (Luong) attention: values and gradients") {
    Variable q = input_variable({2}, "q");
    Variable keys = sequence::input_variable({3}, "keys");
    auto ks = random_sequences({3}, default_lengths, 8);
    auto qs = random_rows({2}, 3, 9);
    Bindings in{{q, Value::batch(qs)}, {keys, Value::sequences(ks)}};

    layers::AdditiveAttention additive(4);
    auto a = additive(q, keys, keys);
    auto ps = additive.parameters();  // W_k [3, 4], W_q [2, 4], v [4]
    REQUIRE(ps.size() == 3);
    const xt::xarray<double> wk = xt::cast<double>(ps[0].value()), wq = xt::cast<double>(ps[1].value()),
                             v = xt::cast<double>(ps[2].value());
    auto ctx = evaluate({a.context}, in)[a.context].rows<double>();
    for (std::size_t n = 0; n < 3; ++n) {
        std::vector<double> sc;
        for (std::size_t j = 0; j < ks[n].shape()[0]; ++j) {
            double s = 0;
            for (std::size_t h = 0; h < 4; ++h) {
                double z = 0;
                for (std::size_t i = 0; i < 3; ++i) z += ks[n](j, i) * wk(i, h);
                for (std::size_t i = 0; i < 2; ++i) z += qs(n, i) * wq(i, h);
                s += v(h) * std::tanh(z);
            }
            sc.push_back(s);
        }
        auto direct = attend(sc, ks[n]);
        for (std::size_t k = 0; k < 3; ++k) CHECK(ctx(n, k) == doctest::Approx(direct[k]).epsilon(1e-9));
    }
    require_gradients("AdditiveAttention", a.context, in, with(ps, {q, keys}));

    layers::GeneralAttention general;
    auto g = general(q, keys, keys);
    const xt::xarray<double> w = xt::cast<double>(general.parameters().at(0).value());  // [2, 3]
    auto gctx = evaluate({g.context}, in)[g.context].rows<double>();
    for (std::size_t n = 0; n < 3; ++n) {
        std::vector<double> sc;
        for (std::size_t j = 0; j < ks[n].shape()[0]; ++j) {
            double s = 0;
            for (std::size_t i = 0; i < 2; ++i)
                for (std::size_t k = 0; k < 3; ++k) s += qs(n, i) * w(i, k) * ks[n](j, k);
            sc.push_back(s);
        }
        auto direct = attend(sc, ks[n]);
        for (std::size_t k = 0; k < 3; ++k) CHECK(gctx(n, k) == doctest::Approx(direct[k]).epsilon(1e-9));
    }
    require_gradients("GeneralAttention", g.context, in, with(general.parameters(), {q, keys}));
}

TEST_CASE("attention of every decoder step over an encoder sequence (different axes)") {
    Variable dec = sequence::input_variable({2}, "decoder");
    Variable enc = sequence::input_variable({3}, "encoder");
    Bindings in{{dec, Value::sequences(random_sequences({2}, {2, 1, 4}, 10))},
                {enc, Value::sequences(random_sequences({3}, default_lengths, 11))}};
    layers::AdditiveAttention additive(3);
    auto a = additive(dec, enc, enc);
    CHECK(a.context.axis() == dec.axis());
    require_gradients("AdditiveAttention, sequence query", a.context, in, with(additive.parameters(), {dec, enc}));
    layers::GeneralAttention general;
    auto g = general(dec, enc, enc);
    require_gradients("GeneralAttention, sequence query", g.context, in, with(general.parameters(), {dec, enc}));
}

TEST_CASE("seed 001: local-p attention, values and gradients through p_t") {
    Variable target = input_variable({3}, "h_t");
    Variable source = sequence::input_variable({3}, "h_s");
    const double half_window = 2.0;
    layers::LocalAttention local(half_window);
    auto a = local(target, source);
    Variable p_t = local.aligned_position();
    auto ps = local.parameters();  // W_p [3, 3], v_p [3]
    REQUIRE(ps.size() == 2);
    auto srcs = random_sequences({3}, default_lengths, 12);
    auto tgts = random_rows({3}, 3, 13);
    Bindings in{{target, Value::batch(tgts)}, {source, Value::sequences(srcs)}};
    auto out = evaluate({a.context, p_t}, in);
    auto ctx = out[a.context].rows<double>(), pv = out[p_t].rows<double>();
    const xt::xarray<double> wp = xt::cast<double>(ps[0].value()), vp = xt::cast<double>(ps[1].value());
    for (std::size_t n = 0; n < 3; ++n) {
        const std::size_t len = srcs[n].shape()[0];
        double e = 0;
        for (std::size_t j = 0; j < 3; ++j) {
            double z = 0;
            for (std::size_t i = 0; i < 3; ++i) z += tgts(n, i) * wp(i, j);
            e += vp(j) * std::tanh(z);
        }
        const double p = static_cast<double>(len) / (1.0 + std::exp(-e));
        CHECK(pv(n, 0) == doctest::Approx(p).epsilon(1e-9));
        std::vector<double> sc;
        double mx = -1e300, sum = 0;
        for (std::size_t s = 0; s < len; ++s) {
            double d = 0;
            for (std::size_t k = 0; k < 3; ++k) d += tgts(n, k) * srcs[n](s, k);
            sc.push_back(d);
            mx = std::max(mx, d);
        }
        for (double v : sc) sum += std::exp(v - mx);
        for (std::size_t k = 0; k < 3; ++k) {
            double c = 0;
            for (std::size_t s = 0; s < len; ++s) {
                const double sigma = half_window / 2;
                const double gauss = std::exp(-(s - p) * (s - p) / (2 * sigma * sigma));
                c += std::exp(sc[s] - mx) / sum * gauss * srcs[n](s, k);
            }
            CHECK(ctx(n, k) == doctest::Approx(c).epsilon(1e-9));
        }
    }
    // W_p and v_p reach the loss only through p_t: their gradients check the Gaussian's derivative.
    require_gradients("LocalAttention", a.context, in, with(ps, {target, source}));
    CHECK_THROWS_AS(layers::LocalAttention(0.0), UserError);
}

TEST_CASE("sequence_positions numbers the steps of each sequence from 0") {
    const std::vector<std::size_t> lengths{3, 1, 7, 2};
    Variable x = sequence::input_variable({2}, "x");
    Variable pos = layers::sequence_positions(x);
    CHECK(pos.shape() == Shape{1});
    CHECK(pos.axis() == x.axis());
    // NaN in the input values: positions depend on the layout only.
    auto data = testing::random_sequences({2}, lengths, 41);
    data[2](4, 1) = std::numeric_limits<double>::quiet_NaN();
    const Value out = evaluate({pos}, {{x, Value::sequences(data)}}, DType::f64)[pos];
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        const auto p = out.sequence<double>(i);
        REQUIRE(p.shape() == std::vector<std::size_t>{lengths[i], 1});
        for (std::size_t t = 0; t < lengths[i]; ++t) CHECK(p(t, 0) == static_cast<double>(t));
    }
}
