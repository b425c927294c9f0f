// Recurrent cells and combinators: an LSTM step against the equations computed here, recurrences
// against loops written in the test, and finite-difference gradient checks on lengths 1, 3 and 7.
#include <doctest/doctest.h>

#include <cmath>

#include <xtensor/xview.hpp>

#include "gradcheck.hpp"
#include "graph/op.hpp"

using namespace loom;
using loom::testing::as_variables;
using loom::testing::default_lengths;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

namespace {

double sigm(double v) { return 1.0 / (1.0 + std::exp(-v)); }

void randomize(const std::vector<Parameter>& ps, std::uint64_t seed) {
    for (const auto& p : ps) p.set_value(loom::testing::random_tensor(p.shape(), seed++, -0.8, 0.8));
}

// h_t = tanh(x_t W + b + h_prev U), h_prev of the step before (forward) or after (backward), 0 at the edge.
xt::xarray<double> rnn_by_hand(const xt::xarray<double>& x, const std::vector<Parameter>& ps, bool backwards) {
    const xt::xarray<double> w = xt::cast<double>(ps[0].value()), b = xt::cast<double>(ps[1].value()),
                             u = xt::cast<double>(ps[2].value());
    const std::size_t len = x.shape()[0], in = x.shape()[1], n = b.size();
    xt::xarray<double> h = xt::zeros<double>({len, n});
    for (std::size_t k = 0; k < len; ++k) {
        const std::size_t t = backwards ? len - 1 - k : k;
        const bool edge = k == 0;
        const std::size_t prev = backwards ? t + 1 : t - 1;
        for (std::size_t j = 0; j < n; ++j) {
            double z = b(j);
            for (std::size_t i = 0; i < in; ++i) z += x(t, i) * w(i, j);
            if (!edge)
                for (std::size_t i = 0; i < n; ++i) z += h(prev, i) * u(i, j);
            h(t, j) = std::tanh(z);
        }
    }
    return h;
}

}  // namespace

TEST_CASE("LSTM step equals the gate equations computed by hand") {
    const std::size_t n = 2, in = 3, batch = 2;
    auto lstm = layers::LSTM(n);
    Variable h = input_variable({n}, "h"), c = input_variable({n}, "c"), x = input_variable({in}, "x");
    auto next = lstm(h, c, x);
    REQUIRE(next.size() == 2);
    auto ps = lstm.parameters();  // W [in, 4n], b [4n], U [n, 4n]
    REQUIRE(ps.size() == 3);
    CHECK(ps[0].shape() == Shape{in, 4 * n});
    CHECK(ps[2].shape() == Shape{n, 4 * n});
    randomize(ps, 30);
    const xt::xarray<double> w = xt::cast<double>(ps[0].value()), b = xt::cast<double>(ps[1].value()),
                             u = xt::cast<double>(ps[2].value());
    auto hv = loom::testing::random_rows({n}, batch, 1), cv = loom::testing::random_rows({n}, batch, 2),
         xv = loom::testing::random_rows({in}, batch, 3);
    auto out = evaluate({next[0], next[1]}, {{h, Value::batch(hv)}, {c, Value::batch(cv)}, {x, Value::batch(xv)}});
    auto h1 = out[next[0]].rows<double>(), c1 = out[next[1]].rows<double>();
    for (std::size_t m = 0; m < batch; ++m)
        for (std::size_t j = 0; j < n; ++j) {
            auto pre = [&](std::size_t g) {  // gate g's pre-activation for unit j
                double z = b(g * n + j);
                for (std::size_t i = 0; i < in; ++i) z += xv(m, i) * w(i, g * n + j);
                for (std::size_t i = 0; i < n; ++i) z += hv(m, i) * u(i, g * n + j);
                return z;
            };
            const double i_gate = sigm(pre(0)), f_gate = sigm(pre(1)), o_gate = sigm(pre(2)), cand = std::tanh(pre(3));
            const double c_new = f_gate * cv(m, j) + i_gate * cand;
            CHECK(c1(m, j) == doctest::Approx(c_new).epsilon(1e-6));
            CHECK(h1(m, j) == doctest::Approx(o_gate * std::tanh(c_new)).epsilon(1e-6));
        }
}

TEST_CASE("Recurrence forward and go_backwards match loops written by hand") {
    auto cell = layers::RNNStep(3, layers::activations::tanh);
    Variable s = sequence::input_variable({2}, "s");
    Variable fwd = layers::Recurrence(cell)(s);
    Variable bwd = layers::Recurrence(cell, true)(s);  // the same cell: the same parameters
    auto ps = cell.parameters();
    REQUIRE(ps.size() == 3);
    randomize(ps, 40);
    auto seqs = random_sequences({2}, default_lengths, 4);
    auto out = evaluate({fwd, bwd}, {{s, Value::sequences(seqs)}});
    for (std::size_t k = 0; k < seqs.size(); ++k) {
        CHECK(xt::allclose(out[fwd].sequence<double>(k), rnn_by_hand(seqs[k], ps, false), 1e-5, 1e-6));
        CHECK(xt::allclose(out[bwd].sequence<double>(k), rnn_by_hand(seqs[k], ps, true), 1e-5, 1e-6));
    }
}

TEST_CASE("the input projection runs outside the recurrence loop") {
    auto cell = layers::LSTM(4);
    Variable s = sequence::input_variable({3}, "s");
    Variable h = layers::Recurrence(cell)(s);
    auto plan = compile({h});
    std::size_t loops = 0, input_products = 0;
    for (const auto& step : plan->steps) loops += step.is_loop;
    CHECK(loops == 1);
    for (const auto& pn : plan->nodes)
        if (pn.node->kind == NodeKind::Op && (pn.node->op->name() == "times" || pn.node->op->name() == "affine") &&
            pn.node->inputs[0] == s.node()) {
            ++input_products;
            CHECK(pn.loop == -1);
        }
    CHECK(input_products == 1);
}

TEST_CASE("BiRecurrence splices a forward and a backward recurrence: shape (n_fwd + n_bwd)") {
    auto f = layers::LSTM(2);
    auto b = layers::GRU(3);
    Variable s = sequence::input_variable({4}, "s");
    Variable both = layers::BiRecurrence(f, b)(s);
    CHECK(both.shape() == Shape{5});
    Variable alone_f = layers::Recurrence(f)(s), alone_b = layers::Recurrence(b, true)(s);
    auto seqs = random_sequences({4}, default_lengths, 6);
    auto out = evaluate({both, alone_f, alone_b}, {{s, Value::sequences(seqs)}});
    for (std::size_t k = 0; k < seqs.size(); ++k) {
        auto y = out[both].sequence<double>(k);
        CHECK(xt::allclose(xt::view(y, xt::all(), xt::range(0, 2)), out[alone_f].sequence<double>(k)));
        CHECK(xt::allclose(xt::view(y, xt::all(), xt::range(2, 5)), out[alone_b].sequence<double>(k)));
    }
    auto bi = layers::BiRecurrence(layers::LSTM(3), layers::LSTM(3));
    CHECK(bi(s).shape() == Shape{6});
    CHECK(bi.parameters().size() == 6);
}

TEST_CASE("Fold is the last step forward and the first step backward") {
    auto cell = layers::RNNStep(2, layers::activations::tanh);
    Variable s = sequence::input_variable({3}, "s");
    Variable last = layers::Fold(cell)(s), first = layers::Fold(cell, true)(s);
    auto ps = cell.parameters();
    auto seqs = random_sequences({3}, default_lengths, 8);
    auto out = evaluate({last, first}, {{s, Value::sequences(seqs)}});
    auto l = out[last].rows<double>(), f = out[first].rows<double>();
    for (std::size_t k = 0; k < seqs.size(); ++k) {
        auto fw = rnn_by_hand(seqs[k], ps, false), bw = rnn_by_hand(seqs[k], ps, true);
        const std::size_t len = seqs[k].shape()[0];
        for (std::size_t j = 0; j < 2; ++j) {
            CHECK(l(k, j) == doctest::Approx(fw(len - 1, j)).epsilon(1e-5));
            CHECK(f(k, j) == doctest::Approx(bw(0, j)).epsilon(1e-5));
        }
    }
}

TEST_CASE("RecurrenceFrom starts from per-sequence states, gradient check includes them") {
    auto cell = layers::LSTM(2);
    layers::RecurrenceFrom from(cell);
    Variable s = sequence::input_variable({3}, "s");
    Variable h0 = input_variable({2}, "h0"), c0 = input_variable({2}, "c0");
    Variable y = from({h0, c0}, s);
    auto seqs = random_sequences({3}, default_lengths, 10);
    Bindings in{{s, Value::sequences(seqs)},
                {h0, Value::batch(loom::testing::random_rows({2}, 3, 11))},
                {c0, Value::batch(loom::testing::random_rows({2}, 3, 12))}};
    // The first step equals one step of the cell from (h0, c0).
    auto step = cell(h0, c0, sequence::first(s));
    auto out = evaluate({y, step[0]}, in);
    auto first_step = out[step[0]].rows<double>();
    for (std::size_t k = 0; k < 3; ++k) {
        auto seq = out[y].sequence<double>(k);
        for (std::size_t j = 0; j < 2; ++j) CHECK(seq(0, j) == doctest::Approx(first_step(k, j)).epsilon(1e-6));
    }
    std::vector<Variable> wrt = as_variables(from.parameters());
    wrt.insert(wrt.end(), {s, h0, c0});
    require_gradients("RecurrenceFrom(LSTM)", y, in, wrt);
}

TEST_CASE("gradient checks of the recurrent layers on lengths 1, 3, 7") {
    Variable s = sequence::input_variable({3}, "s");
    Bindings in{{s, Value::sequences(random_sequences({3}, default_lengths, 20))}};
    struct Case {
        const char* name;
        layers::Layer layer;
    };
    std::vector<Case> cases{
        {"Recurrence(LSTM)", layers::Recurrence(layers::LSTM(3))},
        {"Recurrence(LSTM, peepholes)", layers::Recurrence(layers::LSTM(2, true))},
        {"Recurrence(GRU), backwards", layers::Recurrence(layers::GRU(3), true)},
        {"Recurrence(RNNStep)", layers::Recurrence(layers::RNNStep(2), false, Variable(0.3))},
        {"Fold(LSTM)", layers::Fold(layers::LSTM(2))},
        {"Fold(GRU), backwards", layers::Fold(layers::GRU(2), true)},
        {"BiRecurrence(LSTM, LSTM)", layers::BiRecurrence(layers::LSTM(2), layers::LSTM(2))},
        {"Sequential(Dense, BiRecurrence(GRU, RNNStep), Dense)",
         layers::Sequential({layers::Dense(3, layers::activations::tanh),
                             layers::BiRecurrence(layers::GRU(2), layers::RNNStep(2)), layers::Dense(2)})},
    };
    for (auto& c : cases) {
        Variable y = c.layer(s);
        auto ps = c.layer.parameters();
        randomize(ps, 50);
        std::vector<Variable> wrt = as_variables(ps);
        wrt.push_back(s);
        require_gradients(c.name, y, in, wrt);
    }
}

TEST_CASE("recurrent layers reject bad inputs with clear errors") {
    Variable batch_x = input_variable({3}, "x");
    CHECK_THROWS_WITH_AS(layers::Recurrence(layers::LSTM(2))(batch_x), doctest::Contains("must be a sequence"),
                         UserError);
    Variable s = sequence::input_variable({3}, "s");
    layers::RecurrenceFrom from(layers::LSTM(2));
    CHECK_THROWS_AS(from({Variable(0.0), Variable(0.0), Variable(0.0)}, s), UserError);
}

namespace {

// GRU over one sequence x [L, in], from its equations (CNTK's, with loom's gate order r, z, g):
//   r = sigmoid(x W_r + b_r + h U_r), z = sigmoid(x W_z + b_z + h U_z),
//   g = tanh(x W_g + b_g + (r * h) U_g), h' = (1 - z) g + z h, h = 0 before the first step.
xt::xarray<double> gru_by_hand(const xt::xarray<double>& x, const std::vector<Parameter>& ps, bool backwards) {
    const xt::xarray<double> w = xt::cast<double>(ps[0].value()), b = xt::cast<double>(ps[1].value()),
                             u_rz = xt::cast<double>(ps[2].value()), u_g = xt::cast<double>(ps[3].value());
    const std::size_t len = x.shape()[0], in = x.shape()[1], n = u_g.shape()[0];
    xt::xarray<double> out = xt::zeros<double>({len, n});
    std::vector<double> h(n, 0.0);
    for (std::size_t k = 0; k < len; ++k) {
        const std::size_t t = backwards ? len - 1 - k : k;
        auto input = [&](std::size_t gate, std::size_t j) {
            double v = b(gate * n + j);
            for (std::size_t i = 0; i < in; ++i) v += x(t, i) * w(i, gate * n + j);
            return v;
        };
        std::vector<double> r(n), z(n), next(n);
        for (std::size_t j = 0; j < n; ++j) {
            double hr = 0, hz = 0;
            for (std::size_t i = 0; i < n; ++i) {
                hr += h[i] * u_rz(i, j);
                hz += h[i] * u_rz(i, n + j);
            }
            r[j] = sigm(input(0, j) + hr);
            z[j] = sigm(input(1, j) + hz);
        }
        for (std::size_t j = 0; j < n; ++j) {
            double rh = 0;
            for (std::size_t i = 0; i < n; ++i) rh += r[i] * h[i] * u_g(i, j);
            const double g = std::tanh(input(2, j) + rh);
            next[j] = (1 - z[j]) * g + z[j] * h[j];
        }
        h = next;
        for (std::size_t j = 0; j < n; ++j) out(t, j) = h[j];
    }
    return out;
}

}  // namespace

TEST_CASE("GRU recurrence equals its gate equations on a ragged batch in both directions") {
    const std::vector<std::size_t> lengths{3, 1, 4};
    const std::size_t n = 2;
    auto cell = layers::GRU(n);
    Variable s = sequence::input_variable({3}, "s");
    Variable fwd = layers::Recurrence(cell)(s);
    Variable bwd = layers::Recurrence(cell, true)(s);
    const auto ps = cell.parameters();  // W [3, 3n], b [3n], U_rz [n, 2n], U_g [n, n]
    REQUIRE(ps.size() == 4);
    CHECK(ps[0].shape() == Shape{3, 3 * n});
    CHECK(ps[2].shape() == Shape{n, 2 * n});
    CHECK(ps[3].shape() == Shape{n, n});
    randomize(ps, 60);  // b too: its zero default would hide a gate read from the wrong slice
    const auto seqs = random_sequences({3}, lengths, 61);
    auto out = evaluate({fwd, bwd}, {{s, Value::sequences(seqs)}}, DType::f64);
    for (std::size_t k = 0; k < lengths.size(); ++k) {
        CAPTURE(k);
        for (bool backwards : {false, true}) {
            const auto got = out[backwards ? bwd : fwd].sequence<double>(k);
            const auto want = gru_by_hand(seqs[k], ps, backwards);
            REQUIRE(got.shape() == want.shape());
            for (std::size_t i = 0; i < got.size(); ++i)
                CHECK(got.flat(i) == doctest::Approx(want.flat(i)).epsilon(1e-12));
        }
    }
}
