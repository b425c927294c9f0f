// past_value / future_value: CNTK's documented cases, every kind of initial state, time steps longer
// than a sequence, and delays inside recurrence loops. Expected values are written out or computed by
// the test from the definition out[t] = x[t -/+ k] (initial_state outside the sequence).
#include <doctest/doctest.h>

#include <type_traits>
#include <utility>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

namespace {

// CNTK's doctest input: one sequence of 4 steps of shape (3, 2) holding 0..23.
xt::xarray<double> arange_sequence(std::size_t steps) {
    xt::xarray<double> a = xt::zeros<double>({steps, std::size_t{3}, std::size_t{2}});
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<double>(i);
    return a;
}

// out[t] on one sequence: x[t - shift] when inside, else `init(t)`.
template <class Init>
xt::xarray<double> shifted(const xt::xarray<double>& x, long shift, Init init) {
    xt::xarray<double> out = xt::zeros<double>(x.shape());
    const long len = static_cast<long>(x.shape()[0]);
    const std::size_t row = x.size() / x.shape()[0];
    for (long t = 0; t < len; ++t)
        for (std::size_t j = 0; j < row; ++j) {
            const long s = t - shift;
            out.data()[t * row + j] = (s >= 0 && s < len) ? x.data()[s * row + j] : init(j);
        }
    return out;
}

void check_equal(const xt::xarray<double>& got, const xt::xarray<double>& want) {
    REQUIRE(got.shape() == want.shape());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got.data()[i] == doctest::Approx(want.data()[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("past_value(x, 0.1): CNTK's example, shifted by one step with 0.1 first, gradient of the sum") {
    Variable x = sequence::input_variable({3, 2}, "x");
    Variable y = past_value(x, 0.1, 1);
    const xt::xarray<double> x0 = arange_sequence(4);
    Bindings in{{x, Value::sequences(std::vector<xt::xarray<double>>{x0})}};
    auto got = evaluate({y}, in)[y].sequence<double>(0);
    xt::xarray<double> want = xt::zeros<double>({4, 3, 2});
    for (std::size_t j = 0; j < 6; ++j) want.data()[j] = 0.1;
    for (std::size_t i = 6; i < 24; ++i) want.data()[i] = static_cast<double>(i - 6);
    check_equal(got, want);

    auto g = gradients(y, in, {x})[x].sequence<double>(0);
    for (std::size_t i = 0; i < 24; ++i) CHECK(g.data()[i] == (i < 18 ? 1.0 : 0.0));
}

TEST_CASE("future_value(x, 0.1): the mirror image, gradient is zero on the first step") {
    Variable x = sequence::input_variable({3, 2}, "x");
    Variable y = future_value(x, 0.1, 1);
    const xt::xarray<double> x0 = arange_sequence(4);
    Bindings in{{x, Value::sequences(std::vector<xt::xarray<double>>{x0})}};
    auto got = evaluate({y}, in)[y].sequence<double>(0);
    xt::xarray<double> want = xt::zeros<double>({4, 3, 2});
    for (std::size_t i = 0; i < 18; ++i) want.data()[i] = static_cast<double>(i + 6);
    for (std::size_t i = 18; i < 24; ++i) want.data()[i] = 0.1;
    check_equal(got, want);

    auto g = gradients(y, in, {x})[x].sequence<double>(0);
    for (std::size_t i = 0; i < 24; ++i) CHECK(g.data()[i] == (i < 6 ? 0.0 : 1.0));
}

TEST_CASE("time_step = 2 on a 2-step sequence gives only the initial state and no gradient") {
    Variable x = sequence::input_variable({3, 2}, "x");
    const xt::xarray<double> x0 = arange_sequence(2);
    Bindings in{{x, Value::sequences(std::vector<xt::xarray<double>>{x0})}};
    for (Variable y : {past_value(x, 0.1, 2), future_value(x, 0.1, 2)}) {
        auto got = evaluate({y}, in)[y].sequence<double>(0);
        for (double v : got) CHECK(v == doctest::Approx(0.1));
        auto g = gradients(y, in, {x})[x].sequence<double>(0);
        for (double v : g) CHECK(v == 0.0);
    }
}

TEST_CASE("time_step longer than some sequences of a batch") {
    Variable x = sequence::input_variable({2}, "x");
    auto seqs = random_sequences({2}, {1, 3, 7}, 3);
    Bindings in{{x, Value::sequences(seqs)}};
    Variable p = past_value(x, -2.0, 4), f = future_value(x, -3.0, 4);
    auto out = evaluate({p, f}, in);
    for (std::size_t n = 0; n < 3; ++n) {
        check_equal(out[p].sequence<double>(n), shifted(seqs[n], 4, [](std::size_t) { return -2.0; }));
        check_equal(out[f].sequence<double>(n), shifted(seqs[n], -4, [](std::size_t) { return -3.0; }));
    }
    // Sequences of length 1 and 3 never reach back 4 steps: all initial state.
    for (double v : out[p].sequence<double>(1)) CHECK(v == -2.0);
}

TEST_CASE("initial_state as a scalar, a tensor of the sample shape, a parameter and a per-sequence value") {
    Variable x = sequence::input_variable({2}, "x");
    auto seqs = random_sequences({2}, {1, 3, 7}, 4);
    const xt::xarray<double> rows = random_rows({2}, 3, 5);
    Variable per_seq = input_variable({2}, "init_rows");
    Parameter p = parameter(xt::xarray<float>{0.25f, -0.75f}, "init_param");
    Bindings in{{x, Value::sequences(seqs)}, {per_seq, Value::batch(rows)}};
    const xt::xarray<double> tensor_init = {1.5, -2.5};

    Variable y_scalar = past_value(x, 0.5), y_tensor = past_value(x, constant(tensor_init));
    Variable y_param = past_value(x, p, 2), y_rows = future_value(x, per_seq, 2);
    auto out = evaluate({y_scalar, y_tensor, y_param, y_rows}, in);
    for (std::size_t n = 0; n < 3; ++n) {
        check_equal(out[y_scalar].sequence<double>(n), shifted(seqs[n], 1, [](std::size_t) { return 0.5; }));
        check_equal(out[y_tensor].sequence<double>(n),
                    shifted(seqs[n], 1, [&](std::size_t j) { return tensor_init(j); }));
        check_equal(out[y_param].sequence<double>(n),
                    shifted(seqs[n], 2, [](std::size_t j) { return j == 0 ? 0.25 : -0.75; }));
        check_equal(out[y_rows].sequence<double>(n), shifted(seqs[n], -2, [&](std::size_t j) { return rows(n, j); }));
    }
    // d(sum)/d(initial state) = the number of steps that read it: min(k, L) per sequence.
    auto g = gradients(y_param, in, {p});
    const double used = 1.0 + 2.0 + 2.0;  // lengths 1, 3, 7 with time_step 2
    CHECK(g[p].tensor<double>()(0) == doctest::Approx(used));
    CHECK(g[p].tensor<double>()(1) == doctest::Approx(used));
    auto gr = gradients(y_rows, in, {per_seq})[per_seq].rows<double>();
    CHECK(gr(0, 0) == 1.0);
    CHECK(gr(1, 1) == 2.0);
    CHECK(gr(2, 0) == 2.0);

    require_gradients("parameter initial state", tanh(past_value(x, p, 2) * x), in, {p, x});
    require_gradients("per-sequence initial state", tanh(future_value(x, per_seq, 2) * x), in, {per_seq, x});
    require_gradients("tensor initial state", past_value(x, constant(tensor_init)) * x, in, {x});
}

TEST_CASE("past_value and future_value inside loops: running sums, with time_step 1 and 2") {
    Variable x = sequence::input_variable({2}, "x");
    auto seqs = random_sequences({2}, {1, 3, 7}, 6);
    Bindings in{{x, Value::sequences(seqs)}};
    struct Case {
        int dir;
        std::size_t k;
        double init;
    };
    for (Case c : {Case{1, 1, 0.0}, Case{1, 2, 0.5}, Case{-1, 1, 0.0}, Case{-1, 3, -1.0}}) {
        CAPTURE(c.dir);
        CAPTURE(c.k);
        // h[t] = x[t] + h[t - dir k] (or init where that falls outside).
        Variable p = placeholder({2}, "h_prev");
        Variable d = c.dir > 0 ? past_value(p, c.init, c.k) : future_value(p, c.init, c.k);
        Variable h = x + d;
        h.replace_placeholders({{p, h}});
        auto out = evaluate({h}, in);
        auto g = gradients(h, in, {x});
        for (std::size_t n = 0; n < 3; ++n) {
            const long len = static_cast<long>(seqs[n].shape()[0]);
            xt::xarray<double> want = xt::zeros<double>(seqs[n].shape());
            xt::xarray<double> dwant = xt::zeros<double>(seqs[n].shape());
            for (long i = 0; i < len; ++i) {
                const long t = c.dir > 0 ? i : len - 1 - i;
                const long s = t - c.dir * static_cast<long>(c.k);
                for (std::size_t j = 0; j < 2; ++j)
                    want(t, j) = seqs[n](t, j) + ((s >= 0 && s < len) ? want(s, j) : c.init);
            }
            // d(sum_t h[t])/dx[s]: h[t] holds x[s] for every t reachable from s by steps of dir*k.
            for (long s = 0; s < len; ++s)
                for (long t = s; t >= 0 && t < len; t += c.dir * static_cast<long>(c.k))
                    for (std::size_t j = 0; j < 2; ++j) dwant(s, j) += 1.0;
            check_equal(out[h].sequence<double>(n), want);
            check_equal(g[x].sequence<double>(n), dwant);
        }
        require_gradients("running sum loop", tanh(h), in, {x});
    }
}

TEST_CASE("delays reject time_step 0 and a sequence initial state") {
    Variable x = sequence::input_variable({2}, "x");
    CHECK_THROWS_WITH_AS(past_value(x, 0.0, 0), doctest::Contains("time_step"), UserError);
    CHECK_THROWS_WITH_AS(future_value(x, 0.0, 0), doctest::Contains("future_value"), UserError);
    CHECK_THROWS_WITH_AS(past_value(x, x), doctest::Contains("initial_state"), UserError);
    CHECK_THROWS_AS(past_value(x, constant(xt::xarray<double>{1.0, 2.0, 3.0})), UserError);
    CHECK_THROWS_AS(past_value(input_variable({2}, "not_a_sequence")), UserError);
}

TEST_CASE("placeholder() without a shape takes it from the loop it closes, as the seed program writes it") {
    // The seed's recurrence log_add_exp(z, select(is_first(z), -1e30, past_value(p))) with p
    // given no shape: compile infers [1] from z. The values equal the version with placeholder({1}).
    Variable x = sequence::input_variable({1}, "x");
    auto build = [&](Variable p) {
        Variable lse = log_add_exp(x, element_select(sequence::is_first(x), constant(-1e30), past_value(p)));
        return lse.replace_placeholders({{p, lse}});
    };
    Variable inferred = build(placeholder()), given = build(placeholder({1}, "p"));
    CHECK(inferred.shape() == Shape{1});  // inferred from the closed loop, before any evaluate
    xt::xarray<float> s0 = xt::zeros<float>({std::size_t{3}, std::size_t{1}}), s1 = xt::ones<float>({1, 1});
    s0(0, 0) = 0.5f;
    s0(1, 0) = -1.0f;
    s0(2, 0) = 2.0f;
    const Bindings in{{x, Value::sequences(std::vector<xt::xarray<float>>{s0, s1})}};
    const auto a = evaluate({inferred}, in), b = evaluate({given}, in);
    for (std::size_t n = 0; n < 2; ++n) {
        const auto va = a[inferred].sequence<double>(n), vb = b[given].sequence<double>(n);
        REQUIRE(va.size() == vb.size());
        for (std::size_t e = 0; e < va.size(); ++e) CHECK(va.data()[e] == vb.data()[e]);
    }
    // log(e^0.5 + e^-1) at the second step of the first sequence, by formula.
    CHECK(a[inferred].sequence<double>(0).data()[1] == doctest::Approx(std::log(std::exp(0.5) + std::exp(-1.0))));
    // Bound to a node of known shape, it takes that shape at once.
    Variable q = placeholder();
    Variable y = x * 2.0;
    q.replace_placeholders({{q, y}});
    CHECK(q.shape() == Shape{1});
}

TEST_CASE("a layer stacks on a loop closed through placeholder(): shape() answers once the loop is closed") {
    // h[t] = tanh(x[t] + 0.5 h[t-1]) over x of sample shape [2], its placeholder given no shape;
    // a Dense layer reads h's last axis, so it can only be built once compile has inferred it.
    Variable x = sequence::input_variable({2}, "x");
    Variable p = placeholder();
    Variable step = tanh(x + 0.5 * past_value(p), "h");
    CHECK_THROWS_WITH_AS((void)step.shape(), doctest::Contains("no shape yet"), UserError);  // loop still open
    Variable h = step.replace_placeholders({{p, step}});
    CHECK(h.shape() == Shape{2});
    CHECK(p.shape() == Shape{2});

    const xt::xarray<float> w_value{{1.0f, -2.0f, 0.5f}, {0.25f, 3.0f, -1.0f}};
    const xt::xarray<float> b_value{0.1f, -0.2f, 0.3f};
    layers::Layer dense = layers::Dense(3, {}, true, glorot_uniform(), "out");
    Variable y = dense(h);
    CHECK(y.shape() == Shape{3});
    Parameter w = dense.parameters().at(0), b = dense.parameters().at(1);
    REQUIRE(w.shape() == Shape{2, 3});
    w.set_value(w_value);
    b.set_value(b_value);

    // Two sequences of lengths 3 and 1; the expected values by the recurrence, computed here.
    const std::vector<xt::xarray<double>> xs{{{0.5, -1.0}, {2.0, 0.25}, {-0.75, 1.5}}, {{1.0, 1.0}}};
    const Bindings in{{x, Value::sequences(xs)}};
    const auto out = evaluate({y}, in);
    xt::xarray<double> dw = xt::zeros<double>({std::size_t{2}, std::size_t{3}});
    for (std::size_t n = 0; n < xs.size(); ++n) {
        const auto got = out[y].sequence<double>(n);
        double prev[2] = {0.0, 0.0};
        for (std::size_t t = 0; t < xs[n].shape()[0]; ++t) {
            double ht[2];
            for (std::size_t i = 0; i < 2; ++i) ht[i] = std::tanh(xs[n](t, i) + 0.5 * prev[i]);
            for (std::size_t j = 0; j < 3; ++j) {
                const double want = ht[0] * w_value(0, j) + ht[1] * w_value(1, j) + b_value(j);
                CHECK(got(t, j) == doctest::Approx(want).epsilon(1e-5));
                for (std::size_t i = 0; i < 2; ++i) dw(i, j) += ht[i];  // d sum(y) / dW[i, j]
            }
            prev[0] = ht[0];
            prev[1] = ht[1];
        }
    }
    // The gradient of sum(y) by the weight is the sum of h over all steps, by the bias the number of steps.
    Variable total = reduce_sum(sequence::reduce_sum(y));
    const auto g = gradients(total, in, {w, b});
    const auto gw = g[w].tensor<double>(), gb = g[b].tensor<double>();
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j) CHECK(gw(i, j) == doctest::Approx(dw(i, j)).epsilon(1e-5));
    for (std::size_t j = 0; j < 3; ++j) CHECK(gb(j) == doctest::Approx(4.0));
    require_gradients("Dense on a placeholder() loop", y, {{x, Value::sequences(random_sequences({2}, {1, 3, 7}, 5))}},
                      {x, w, b});
}

TEST_CASE("shape() reads the type the node was built with: it answers on a graph that cannot compile yet") {
    // p has a shape but is never bound: compile refuses the graph, shape() does not need it.
    Variable x = sequence::input_variable({2}, "x");
    Variable p = placeholder({2}, "never_bound");
    Variable h = tanh(x + past_value(p), "h");
    Variable y = sequence::reduce_sum(h * 3.0);
    CHECK(h.shape() == Shape{2});
    CHECK(y.shape() == Shape{2});
    CHECK(&h.shape() == &h.node()->type.shape);  // the node's own type, no copy
    CHECK_THROWS_WITH_AS(compile({y}), doctest::Contains("never_bound"), UserError);
}

TEST_CASE("replace_placeholders on const handles: a Variable is a handle, every copy sees the loop closed") {
    // A const Variable is a const shared_ptr<Node>: the handle is fixed, the node it reaches is not.
    static_assert(std::is_same_v<decltype(std::declval<const Variable&>().node()), const NodePtr&>);
    static_assert(!std::is_const_v<NodePtr::element_type>);
    Variable x = sequence::input_variable({2}, "x");
    const Variable p = placeholder({2}, "p");
    const Variable p_copy = p;                       // another handle on the same node
    const Variable h = x + past_value(p_copy, 0.0);  // built on the copy
    const Variable closed = h.replace_placeholders({{p, h}});
    CHECK(closed == h);
    CHECK_THROWS_WITH_AS(h.replace_placeholders({{p_copy, h}}), doctest::Contains("already bound"), UserError);
    // h = x + past_value(h): the running sum of each sequence, through the handles above.
    const std::vector<xt::xarray<double>> xs{{{1.0, 10.0}, {2.0, 20.0}, {4.0, 40.0}}, {{-1.0, -10.0}}};
    const auto out = evaluate({closed}, {{x, Value::sequences(xs)}});
    const xt::xarray<double> sums{{1.0, 10.0}, {3.0, 30.0}, {7.0, 70.0}};
    CHECK(out[closed].sequence<double>(0) == sums);
    CHECK(out[closed].sequence<double>(1) == xs[1]);
}

TEST_CASE("placeholder() whose shape nothing determines is a compile error naming it") {
    // h = tanh(past_value(p) times w): the product needs p's shape, and nothing else gives h one.
    Variable x = sequence::input_variable({2}, "x");
    Parameter w = parameter(xt::xarray<float>{{1, 0}, {0, 1}}, "w");
    Variable p = placeholder();
    Variable h = tanh(times(past_value(p), w), "h");
    h.replace_placeholders({{p, h}});
    Variable out = sequence::reduce_sum(h) + sequence::reduce_sum(x);
    CHECK_THROWS_WITH_AS(compile({out}), doctest::Contains("cannot infer the shape"), UserError);
}
