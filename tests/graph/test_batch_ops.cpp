// The batch:: ops: reductions and softmax over the N items of a batch value, and broadcast_as back.
// Expected values are computed in the test from the bound data; the listwise ranking loss (one
// question, K answers as a batch of K items) is checked against its direct formula and by finite
// differences.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>

#include <loom.hpp>

#include "gradcheck.hpp"
#include "test_support.hpp"

using namespace loom;
using loom::testing::expect_user_error;
using loom::testing::random_rows;

namespace {

// A [n, 1] array (braces around single numbers are ambiguous for xtensor).
xt::xarray<double> column(const std::vector<double>& v) {
    xt::xarray<double> a = xt::zeros<double>({v.size(), std::size_t{1}});
    for (std::size_t i = 0; i < v.size(); ++i) a(i, 0) = v[i];
    return a;
}

void check_close(const xt::xarray<double>& got, const xt::xarray<double>& want, double eps = 1e-12) {
    REQUIRE(got.shape() == want.shape());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got.data()[i] == doctest::Approx(want.data()[i]).epsilon(eps));
}

}  // namespace

TEST_CASE("batch reductions return a static value over the N items") {
    Variable x = input_variable({2}, "x");
    const xt::xarray<double> rows = {{1.0, -2.0}, {4.0, 0.5}, {-3.0, 0.25}};
    Bindings in{{x, Value::batch(rows)}};
    Variable s = batch::reduce_sum(x), m = batch::reduce_mean(x), mx = batch::reduce_max(x);
    CHECK(s.shape() == Shape{2});
    auto out = evaluate({s, m, mx}, in);
    CHECK(out[s].kind() == Value::Kind::Static);
    check_close(out[s].tensor<double>(), xt::xarray<double>{1.0 + 4.0 - 3.0, -2.0 + 0.5 + 0.25});
    check_close(out[m].tensor<double>(), xt::xarray<double>{2.0 / 3.0, -1.25 / 3.0});
    check_close(out[mx].tensor<double>(), xt::xarray<double>{4.0, 0.5});

    // d(sum of the result)/dx: 1 for sum, 1/N for mean, 1 at the first item attaining the max.
    check_close(gradients(s, in, {x})[x].rows<double>(), xt::ones<double>({3, 2}));
    check_close(gradients(m, in, {x})[x].rows<double>(), xt::ones<double>({3, 2}) / 3.0);
    check_close(gradients(mx, in, {x})[x].rows<double>(), xt::xarray<double>{{0, 0}, {1, 1}, {0, 0}});
}

TEST_CASE("batch::reduce_max sends a tie's gradient to the first item only") {
    Variable x = input_variable({1}, "x");
    Bindings in{{x, Value::batch(column({2.0, 5.0, 5.0}))}};
    check_close(gradients(batch::reduce_max(x), in, {x})[x].rows<double>(), column({0, 1, 0}));
}

TEST_CASE("batch::softmax normalizes each sample element over the items") {
    Variable x = input_variable({2}, "x");
    const xt::xarray<double> rows = random_rows({2}, 4, 5, -2, 2);
    Bindings in{{x, Value::batch(rows)}};
    Variable p = batch::softmax(x);
    const xt::xarray<double> got = evaluate({p}, in)[p].rows<double>();
    for (std::size_t j = 0; j < 2; ++j) {
        double z = 0;
        for (std::size_t i = 0; i < 4; ++i) z += std::exp(rows(i, j));
        for (std::size_t i = 0; i < 4; ++i) CHECK(got(i, j) == doctest::Approx(std::exp(rows(i, j)) / z));
    }
    // Large scores do not overflow (the max is subtracted first).
    Bindings big{{x, Value::batch(xt::xarray<double>{{1000.0, -1000.0}, {1000.0, -999.0}})}};
    check_close(evaluate({p}, big)[p].rows<double>(),
                xt::xarray<double>{{0.5, 1 / (1 + std::exp(1.0))}, {0.5, 1 / (1 + std::exp(-1.0))}});
}

TEST_CASE("batch::broadcast_as puts a static value on every item and sums its gradient back") {
    Variable x = input_variable({2}, "x");
    const xt::xarray<double> rows = {{1.0, 2.0}, {3.0, 5.0}, {-1.0, 0.5}};
    Bindings in{{x, Value::batch(rows)}};
    // Centre the batch: x - mean over the items.
    Variable centred = x - batch::broadcast_as(batch::reduce_mean(x), x);
    xt::xarray<double> want = rows;
    for (std::size_t i = 0; i < 3; ++i) {
        want(i, 0) -= 1.0;
        want(i, 1) -= 2.5;
    }
    check_close(evaluate({centred}, in)[centred].rows<double>(), want);
    // The sum of a centred batch is constant: zero gradient.
    check_close(gradients(centred, in, {x})[x].rows<double>(), xt::zeros<double>({3, 2}), 1e-12);

    // A parameter broadcast onto a batch of N items gets N times the upstream gradient.
    Parameter b = parameter(xt::xarray<float>{0.5f, -0.5f}, "b");
    Variable y = batch::broadcast_as(b, x) * x;
    check_close(gradients(y, in, {b})[b].tensor<double>(), xt::xarray<double>{1.0 + 3.0 - 1.0, 2.0 + 5.0 + 0.5});
}

TEST_CASE("listwise ranking loss over the K answers of a question as one batch") {
    // One question, K = 5 candidate answers with 3 features each; answers 1 and 3 are correct.
    // score s_k = a_k . w; loss = -sum_k y_k log softmax_k(s) = sum_pos (log sum_j exp s_j - s_pos).
    const std::size_t K = 5;
    Variable a = input_variable({3}, "answers");
    Variable y = input_variable({1}, "labels");
    Parameter w = parameter(xt::xarray<float>(xt::cast<float>(column({0.4, -0.7, 0.2}))), "w");
    Variable s = times(a, w);
    Variable loss = negate(batch::reduce_sum(y * log(batch::softmax(s))));
    CHECK(loss.shape() == Shape{1});

    const xt::xarray<double> feats = random_rows({3}, K, 9, -1.5, 1.5);
    const xt::xarray<double> labels = column({0, 1, 0, 1, 0});
    Bindings in{{a, Value::batch(feats)}, {y, Value::batch(labels)}};

    std::vector<double> score(K);
    double lse = 0;
    for (std::size_t k = 0; k < K; ++k) {
        score[k] = double(0.4f) * feats(k, 0) + double(-0.7f) * feats(k, 1) + double(0.2f) * feats(k, 2);
        lse += std::exp(score[k]);
    }
    lse = std::log(lse);
    const double want = (lse - score[1]) + (lse - score[3]);
    CHECK(evaluate({loss}, in)[loss].tensor<double>()(0) == doctest::Approx(want).epsilon(1e-9));

    // dloss/ds_k = (number of positives) p_k - y_k; dloss/dw = sum_k that * a_k.
    xt::xarray<double> want_w = xt::zeros<double>({3, 1});
    for (std::size_t k = 0; k < K; ++k) {
        const double d = 2 * std::exp(score[k] - lse) - labels(k, 0);
        for (std::size_t f = 0; f < 3; ++f) want_w(f, 0) += d * feats(k, f);
    }
    check_close(gradients(loss, in, {w})[w].tensor<double>(), want_w, 1e-9);
    testing::require_gradients("listwise loss", loss, in, {w, a});

    // The same loss written with broadcast_as: log softmax = s - broadcast(log sum exp s).
    Variable lse_v = log(batch::reduce_sum(exp(s)));
    Variable loss2 = negate(batch::reduce_sum(y * (s - batch::broadcast_as(lse_v, s))));
    CHECK(evaluate({loss2}, in)[loss2].tensor<double>()(0) == doctest::Approx(want).epsilon(1e-9));
    testing::require_gradients("listwise loss via broadcast_as", loss2, in, {w, a});
}

TEST_CASE("in-batch negatives: each question against every answer of the batch") {
    // N pairs; score matrix S[i][j] = q_i . a_j; loss_i = log sum_j exp S[i][j] - S[i][i]. Written
    // with batch ops as a softmax over the items j for every question i (the sample axis).
    const std::size_t N = 3;
    Variable q = input_variable({2}, "q"), a = input_variable({2}, "a");
    Variable eye = input_variable({N}, "eye");  // row j: one-hot of j, to pick S[j][j]
    // scores[j] = [S[0][j], S[1][j], S[2][j]] = a_j . q_i for every i: a_j times Q^T.
    Variable q_all = reshape(batch::reduce_sum(element_times(reshape(q, {1, 2}), reshape(eye, {N, 1}))), {N, 2});
    Variable scores = times_transpose(a, q_all);  // item j: [N] = S[:, j]
    Variable loss = negate(batch::reduce_sum(reduce_sum(eye * log(batch::softmax(scores)))));

    const xt::xarray<double> qs = random_rows({2}, N, 3), as = random_rows({2}, N, 4);
    Bindings in{{q, Value::batch(qs)}, {a, Value::batch(as)}, {eye, Value::batch(xt::eye<double>(N))}};
    double want = 0;
    for (std::size_t i = 0; i < N; ++i) {
        double z = 0, own = 0;
        for (std::size_t j = 0; j < N; ++j) {
            const double sij = qs(i, 0) * as(j, 0) + qs(i, 1) * as(j, 1);
            z += std::exp(sij);
            if (i == j) own = sij;
        }
        want += std::log(z) - own;
    }
    CHECK(evaluate({loss}, in)[loss].tensor<double>()(0) == doctest::Approx(want).epsilon(1e-9));
    testing::require_gradients("in-batch negatives", loss, in, {q, a});
}

TEST_CASE("batch ops on a batch of one item") {
    Variable x = input_variable({3}, "x");
    const xt::xarray<double> row = {{0.5, -1.0, 2.0}};
    Bindings in{{x, Value::batch(row)}};
    Variable s = batch::reduce_sum(x), mx = batch::reduce_max(x), p = batch::softmax(x);
    auto out = evaluate({s, mx, p}, in);
    check_close(out[s].tensor<double>(), xt::xarray<double>{0.5, -1.0, 2.0});
    check_close(out[mx].tensor<double>(), xt::xarray<double>{0.5, -1.0, 2.0});
    check_close(out[p].rows<double>(), xt::ones<double>({1, 3}));
    check_close(gradients(p, in, {x})[x].rows<double>(), xt::zeros<double>({1, 3}));
    testing::require_gradients("mean and broadcast, N = 1",
                               batch::broadcast_as(batch::reduce_mean(x * x), x) * x + batch::softmax(x * x), in, {x});
}

TEST_CASE("batch ops refuse sequence operands and non-static values to broadcast") {
    Variable seq = sequence::input_variable({2}, "tokens");
    Variable x = input_variable({2}, "x");
    expect_user_error([&] { batch::reduce_sum(seq); }, {"batch::reduce_sum", "sequence", "reduce the sequence first"});
    expect_user_error([&] { batch::reduce_mean(seq); }, {"batch::reduce_mean", "sequence"});
    expect_user_error([&] { batch::reduce_max(seq); }, {"batch::reduce_max", "sequence"});
    expect_user_error([&] { batch::softmax(seq); }, {"batch::softmax", "sequence"});
    expect_user_error([&] { batch::reduce_sum(parameter({2}, constant_initializer(1.0))); }, {"batch::reduce_sum"});
    expect_user_error([&] { batch::broadcast_as(x, x); }, {"batch::broadcast_as", "static"});
    expect_user_error([&] { batch::broadcast_as(batch::reduce_sum(x), seq); }, {"batch::broadcast_as", "sequence"});
    // A batch op needs the whole batch at every step: compiling a loop through one is refused.
    Bindings in{{seq, Value::sequences(std::vector<xt::xarray<double>>{{{1, 2}}, {{3, 4}, {5, 6}}})}};
    Variable p = placeholder({2});
    Variable prev = past_value(p);
    Variable h = tanh(seq + batch::broadcast_as(batch::reduce_sum(prev), prev));
    h.replace_placeholders({{p, h}});
    expect_user_error([&] { evaluate({h}, in); }, {"batch::", "recurrence loop"});
    // A reduction over the batch of a reduced sequence is fine.
    Variable total = batch::reduce_sum(sequence::reduce_sum(seq));
    check_close(evaluate({total}, in)[total].tensor<double>(), xt::xarray<double>{9, 12});
}
