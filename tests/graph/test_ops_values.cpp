// Forward values of the non-sequence ops, each against a formula written in the test, a hand
// computation, or CNTK's documented example.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <xtensor/xview.hpp>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;

namespace {

// In double throughout, so that comparisons can be tight.
Value eval(const Variable& v, const Bindings& in = {}) { return evaluate({v}, in, DType::f64)[v]; }

xt::xarray<double> rows(const Shape& shape, std::uint64_t seed, double lo = -2, double hi = 2) {
    return testing::random_rows(shape, 2, seed, lo, hi);
}

}  // namespace

TEST_CASE("element_select follows CNTK's documented example") {
    Variable cond = constant(xt::xarray<double>{-10, -1, 0, 0.3, 100});
    Variable a = constant(xt::xarray<double>{1, 10, 100, 1000, 10000});
    Variable b = constant(xt::xarray<double>{2, 20, 200, 2000, 20000});
    auto y = eval(element_select(cond, a, b)).tensor<double>();
    const std::vector<double> expected{1, 10, 200, 1000, 10000};
    REQUIRE(y.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(y(i) == expected[i]);
}

TEST_CASE("softmax rows sum to 1 and equal exp(x - max) / sum, log_softmax is their log") {
    Variable x = input_variable({3, 4});
    const xt::xarray<double> data = rows({3, 4}, 1, -5, 5);
    Bindings in{{x, Value::batch(data)}};
    auto last = eval(softmax(x), in).rows<double>();
    auto log_last = eval(log_softmax(x), in).rows<double>();
    auto first = eval(softmax(x, 0), in).rows<double>();
    for (std::size_t n = 0; n < 2; ++n) {
        for (std::size_t i = 0; i < 3; ++i) {
            double mx = -1e300, sum = 0, total = 0;
            for (std::size_t j = 0; j < 4; ++j) mx = std::max(mx, data(n, i, j));
            for (std::size_t j = 0; j < 4; ++j) sum += std::exp(data(n, i, j) - mx);
            for (std::size_t j = 0; j < 4; ++j) {
                CHECK(last(n, i, j) == doctest::Approx(std::exp(data(n, i, j) - mx) / sum).epsilon(1e-12));
                CHECK(log_last(n, i, j) == doctest::Approx(std::log(last(n, i, j))).epsilon(1e-12));
                total += last(n, i, j);
            }
            CHECK(total == doctest::Approx(1.0).epsilon(1e-12));
        }
        for (std::size_t j = 0; j < 4; ++j) {  // axis 0: down each column
            double sum = 0;
            for (std::size_t i = 0; i < 3; ++i) sum += std::exp(data(n, i, j));
            for (std::size_t i = 0; i < 3; ++i)
                CHECK(first(n, i, j) == doctest::Approx(std::exp(data(n, i, j)) / sum).epsilon(1e-12));
        }
    }
}

TEST_CASE("softmax and log_softmax stay finite for huge inputs") {
    Variable c = constant(xt::xarray<double>{1000, 1001, -1000});
    auto s = eval(softmax(c)).tensor<double>();
    auto l = eval(log_softmax(c)).tensor<double>();
    const double e = std::exp(-1.0);
    CHECK(s(0) == doctest::Approx(e / (1 + e)));
    CHECK(s(1) == doctest::Approx(1 / (1 + e)));
    CHECK(s(2) == 0.0);
    CHECK(l(1) == doctest::Approx(-std::log1p(e)));
    CHECK(std::isfinite(l(2)));
}

TEST_CASE("softmax of large equal logits in float is uniform to the last bit, as CNTK's") {
    // exp(x - lse) would lose lse's rounding at 1e4 (an ulp of 1e-3); exp(x - max) / sum does not.
    for (double big : {0.0, 1000.0, 10000.0}) {
        Variable c = constant(xt::xarray<double>{big, big, big, big});
        Variable sm = softmax(c), lsm = log_softmax(c);
        auto res = evaluate({sm, lsm}, {}, DType::f32);
        const auto p = res[sm].tensor<float>();
        const auto l = res[lsm].tensor<float>();
        for (std::size_t j = 0; j < 4; ++j) {
            CHECK(p(j) == 0.25f);
            CHECK(l(j) == doctest::Approx(-std::log(4.0)).epsilon(1e-7));
        }
    }
}

TEST_CASE("static reductions keep reduced axes with size 1") {
    Variable x = input_variable({2, 3, 4});
    const xt::xarray<double> d = rows({2, 3, 4}, 2);
    Bindings in{{x, Value::batch(d)}};
    auto sum1 = eval(reduce_sum(x, 1), in).rows<double>();
    auto mean_last = eval(reduce_mean(x, -1), in).rows<double>();
    auto max0 = eval(reduce_max(x, 0), in).rows<double>();
    auto min1 = eval(reduce_min(x, 1), in).rows<double>();
    auto lse2 = eval(reduce_log_sum_exp(x, 2), in).rows<double>();
    auto all = eval(reduce_sum(x), in).rows<double>();
    CHECK(std::vector<std::size_t>(sum1.shape().begin(), sum1.shape().end()) == std::vector<std::size_t>{2, 2, 1, 4});
    CHECK(std::vector<std::size_t>(all.shape().begin(), all.shape().end()) == std::vector<std::size_t>{2, 1, 1, 1});
    CHECK(reduce_sum(x).shape() == Shape{1, 1, 1});
    for (std::size_t n = 0; n < 2; ++n) {
        double total = 0;
        for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t k = 0; k < 4; ++k) {
                double s = 0, mn = 1e300;
                for (std::size_t j = 0; j < 3; ++j) {
                    s += d(n, i, j, k);
                    mn = std::min(mn, d(n, i, j, k));
                }
                CHECK(sum1(n, i, 0, k) == doctest::Approx(s));
                CHECK(min1(n, i, 0, k) == mn);
                total += s;
            }
        CHECK(all(n, 0, 0, 0) == doctest::Approx(total));
        for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t j = 0; j < 3; ++j) {
                double s = 0, se = 0;
                for (std::size_t k = 0; k < 4; ++k) {
                    s += d(n, i, j, k);
                    se += std::exp(d(n, i, j, k));
                }
                CHECK(mean_last(n, i, j, 0) == doctest::Approx(s / 4));
                CHECK(lse2(n, i, j, 0) == doctest::Approx(std::log(se)));
            }
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t k = 0; k < 4; ++k) CHECK(max0(n, 0, j, k) == std::max(d(n, 0, j, k), d(n, 1, j, k)));
    }
}

TEST_CASE("reductions and softmax work per step on sequences of lengths 1, 3, 7") {
    Variable s = sequence::input_variable({4});
    auto data = testing::random_sequences({4}, testing::default_lengths, 3);
    Bindings in{{s, Value::sequences(data)}};
    Variable m = reduce_max(s), p = softmax(s);
    auto res = evaluate({m, p}, in, DType::f64);
    for (std::size_t n = 0; n < data.size(); ++n) {
        auto mx = res[m].sequence<double>(n);
        auto sm = res[p].sequence<double>(n);
        REQUIRE(mx.shape()[0] == data[n].shape()[0]);
        for (std::size_t t = 0; t < data[n].shape()[0]; ++t) {
            double best = -1e300, sum = 0;
            for (std::size_t j = 0; j < 4; ++j) {
                best = std::max(best, data[n](t, j));
                sum += std::exp(data[n](t, j));
            }
            CHECK(mx(t, 0) == best);
            for (std::size_t j = 0; j < 4; ++j) CHECK(sm(t, j) == doctest::Approx(std::exp(data[n](t, j)) / sum));
        }
    }
}

TEST_CASE("cross_entropy_with_softmax, squared_error, binary_cross_entropy, classification_error by hand") {
    Variable z = input_variable({3}), y = input_variable({3});
    const xt::xarray<double> zd{{1.0, 2.0, 3.0}, {0.5, -1.0, 0.0}};
    const xt::xarray<double> yd{{0.0, 0.0, 1.0}, {0.2, 0.3, 0.5}};
    Bindings in{{z, Value::batch(zd)}, {y, Value::batch(yd)}};
    auto ce = eval(cross_entropy_with_softmax(z, y), in).rows<double>();
    // Row 0: log(e + e^2 + e^3) - 3. Row 1: labels sum to 1, so lse(z) - y.z.
    CHECK(ce(0, 0) == doctest::Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0));
    const double lse1 = std::log(std::exp(0.5) + std::exp(-1.0) + 1.0);
    CHECK(ce(1, 0) == doctest::Approx(lse1 - (0.2 * 0.5 + 0.3 * -1.0)));

    auto se = eval(squared_error(z, y), in).rows<double>();
    CHECK(se(0, 0) == doctest::Approx(1.0 + 4.0 + 4.0));
    CHECK(se(1, 0) == doctest::Approx(0.09 + 1.69 + 0.25));

    auto err = eval(classification_error(z, y), in).rows<double>();
    CHECK(err(0, 0) == 0.0);  // argmax 2 both
    CHECK(err(1, 0) == 1.0);  // argmax 0 vs 2

    Variable p = input_variable({2}), t = input_variable({2});
    const xt::xarray<double> pd{{0.9, 0.2}, {0.5, 0.7}}, td{{1.0, 0.0}, {0.0, 0.25}};
    auto bce = eval(binary_cross_entropy(p, t), {{p, Value::batch(pd)}, {t, Value::batch(td)}}).rows<double>();
    CHECK(bce(0, 0) == doctest::Approx(-std::log(0.9) - std::log(0.8)));
    CHECK(bce(1, 0) == doctest::Approx(-std::log(0.5) - (0.25 * std::log(0.7) + 0.75 * std::log(0.3))));
}

TEST_CASE("top_k picks the k largest along the last axis, largest first") {
    Variable c = constant(xt::xarray<double>{{3, 1, 4, 1, 5, 9, 2, 6}, {-1, -2, -3, -4, -5, -6, -7, -8}});
    TopK top = top_k(c, 3);
    CHECK(top.values.shape() == Shape{2, 3});
    auto out = evaluate({top.values, top.indices}, {}, DType::f64);
    auto v = out[top.values].tensor<double>();
    auto i = out[top.indices].tensor<double>();
    const double ev[2][3] = {{9, 6, 5}, {-1, -2, -3}}, ei[2][3] = {{5, 7, 4}, {0, 1, 2}};
    for (std::size_t r = 0; r < 2; ++r)
        for (std::size_t j = 0; j < 3; ++j) {
            CHECK(v(r, j) == ev[r][j]);
            CHECK(i(r, j) == ei[r][j]);
        }
}

TEST_CASE("one_hot turns ids into rows with a single 1") {
    Variable ids = sequence::input_variable({1});
    Variable h = one_hot(ids, 4);
    auto out = eval(h, {{ids, Value::index_sequences({{2, 0}, {3}})}});
    auto s0 = out.sequence<double>(0), s1 = out.sequence<double>(1);
    const double e0[2][4] = {{0, 0, 1, 0}, {1, 0, 0, 0}}, e1[4] = {0, 0, 0, 1};
    for (std::size_t k = 0; k < 4; ++k) {
        CHECK(s0(0, k) == e0[0][k]);
        CHECK(s0(1, k) == e0[1][k]);
        CHECK(s1(0, k) == e1[k]);
    }
}

TEST_CASE("splice, slice, reshape and transpose place elements where expected") {
    Variable a = input_variable({2, 2}), b = input_variable({2, 1});
    const xt::xarray<double> ad = rows({2, 2}, 4), bd = rows({2, 1}, 5);
    Bindings in{{a, Value::batch(ad)}, {b, Value::batch(bd)}};
    auto cat1 = eval(splice({a, b}, 1), in).rows<double>();
    auto cat0 = eval(splice({a, reshape(b, {1, 2})}, 0), in).rows<double>();
    for (std::size_t n = 0; n < 2; ++n)
        for (std::size_t i = 0; i < 2; ++i) {
            CHECK(cat1(n, i, 0) == ad(n, i, 0));
            CHECK(cat1(n, i, 1) == ad(n, i, 1));
            CHECK(cat1(n, i, 2) == bd(n, i, 0));
            CHECK(cat0(n, i, 0) == ad(n, i, 0));
            CHECK(cat0(n, 2, i) == bd(n, i, 0));
        }

    Variable x = input_variable({3, 4});
    const xt::xarray<double> xd = rows({3, 4}, 6);
    Bindings xin{{x, Value::batch(xd)}};
    auto mid = eval(slice(x, 1, 1, 3), xin).rows<double>();
    auto tail = eval(slice(x, 0, -2, 0), xin).rows<double>();
    auto flat = eval(reshape(x, {2, 6}), xin).rows<double>();
    auto tr = eval(transpose(x, {1, 0}), xin).rows<double>();
    for (std::size_t n = 0; n < 2; ++n)
        for (std::size_t i = 0; i < 3; ++i)
            for (std::size_t j = 0; j < 4; ++j) {
                if (j >= 1 && j < 3) CHECK(mid(n, i, j - 1) == xd(n, i, j));
                if (i >= 1) CHECK(tail(n, i - 1, j) == xd(n, i, j));
                const std::size_t flat_index = i * 4 + j;
                CHECK(flat(n, flat_index / 6, flat_index % 6) == xd(n, i, j));
                CHECK(tr(n, j, i) == xd(n, i, j));
            }

    Variable t3 = input_variable({2, 3, 4});
    const xt::xarray<double> td = rows({2, 3, 4}, 7);
    auto p = eval(transpose(t3, {2, 0, 1}), {{t3, Value::batch(td)}}).rows<double>();
    CHECK(transpose(t3, {2, 0, 1}).shape() == Shape{4, 2, 3});
    for (std::size_t n = 0; n < 2; ++n)
        for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t j = 0; j < 3; ++j)
                for (std::size_t k = 0; k < 4; ++k) CHECK(p(n, k, i, j) == td(n, i, j, k));
}

TEST_CASE("splice repeats a static operand along every step of a sequence") {
    Variable s = sequence::input_variable({2});
    Variable c = constant(xt::xarray<double>{7, 8, 9});
    auto data = testing::random_sequences({2}, testing::default_lengths, 8);
    auto out = eval(splice({s, c}), {{s, Value::sequences(data)}});
    for (std::size_t n = 0; n < data.size(); ++n) {
        auto v = out.sequence<double>(n);
        for (std::size_t t = 0; t < data[n].shape()[0]; ++t) {
            CHECK(v(t, 0) == data[n](t, 0));
            CHECK(v(t, 1) == data[n](t, 1));
            CHECK(v(t, 2) == 7.0);
            CHECK(v(t, 4) == 9.0);
        }
    }
}

TEST_CASE("times matches a triple loop, per step of each sequence") {
    Variable s = sequence::input_variable({2, 3});
    xt::xarray<float> w = testing::random_tensor({3, 4}, 9);
    Parameter W = parameter(w);
    auto data = testing::random_sequences({2, 3}, testing::default_lengths, 10);
    auto out = eval(times(s, W), {{s, Value::sequences(data)}});
    for (std::size_t n = 0; n < data.size(); ++n) {
        auto y = out.sequence<double>(n);
        for (std::size_t t = 0; t < data[n].shape()[0]; ++t)
            for (std::size_t r = 0; r < 2; ++r)
                for (std::size_t c = 0; c < 4; ++c) {
                    double acc = 0;
                    for (std::size_t k = 0; k < 3; ++k) acc += data[n](t, r, k) * static_cast<double>(w(k, c));
                    CHECK(y(t, r, c) == doctest::Approx(acc).epsilon(1e-9));
                }
    }
}

TEST_CASE("float and double evaluation agree on the reductions, shape ops and losses") {
    SequenceAxis axis;
    Variable s = sequence::input_variable({2, 3}, "s", axis), y = sequence::input_variable({3}, "y", axis);
    auto data = testing::random_sequences({2, 3}, testing::default_lengths, 11);
    auto labels = testing::random_sequences({3}, testing::default_lengths, 12, 0, 1);
    Bindings in{{s, Value::sequences(data)}, {y, Value::sequences(labels)}};
    Variable z = reduce_sum(splice({softmax(s), log_softmax(s, 0)}, 1), 0);  // [1, 6]
    Variable r = splice(
        {reshape(transpose(slice(s, 1, 0, 2), {1, 0}), {4}), reshape(top_k(reduce_log_sum_exp(s, 0), 2).values, {2})});
    Variable loss = cross_entropy_with_softmax(reshape(reduce_mean(s, 0), {3}), y) +
                    squared_error(reduce_min(s, 0), reduce_max(s, 0));
    for (const Variable& v : {z, r, loss}) {
        auto lo = evaluate({v}, in, DType::f32)[v].tensor<double>();
        auto hi = evaluate({v}, in, DType::f64)[v].tensor<double>();
        REQUIRE(lo.size() == hi.size());
        for (std::size_t i = 0; i < lo.size(); ++i) CHECK(lo.data()[i] == doctest::Approx(hi.data()[i]).epsilon(1e-5));
    }
}

TEST_CASE("affine broadcasts an addend with as many values as a row of W but another shape, ragged batch too") {
    // x [2, 3] per step times W [3, 2, 3] gives [2, 2, 3]; b [2, 1, 3] has 6 values, as many as a row
    // of the product's [2, 3], but varies along its first axis: y[a, i, j] = (x W)[a, i, j] + b[a, 0, j].
    // On a ragged batch (lengths 4 and 1: the real rows alone are multiplied) as on one sequence.
    Variable x = sequence::input_variable({2, 3});
    xt::xarray<double> w = xt::zeros<double>({3, 2, 3}), b = xt::zeros<double>({2, 1, 3});
    for (std::size_t e = 0; e < w.size(); ++e) w.data()[e] = std::sin(1.0 + double(e));
    for (std::size_t e = 0; e < b.size(); ++e) b.data()[e] = 10.0 * double(e + 1);
    Variable y = affine(x, constant(w), constant(b));
    xt::xarray<double> s0 = xt::zeros<double>({4, 2, 3}), s1 = xt::zeros<double>({1, 2, 3});
    for (std::size_t e = 0; e < s0.size(); ++e) s0.data()[e] = std::cos(double(e));
    for (std::size_t e = 0; e < s1.size(); ++e) s1.data()[e] = std::cos(0.5 * double(e));
    for (const std::vector<xt::xarray<double>>& batch :
         {std::vector<xt::xarray<double>>{s0, s1}, std::vector<xt::xarray<double>>{s0}}) {
        const Value out = eval(y, {{x, Value::sequences(batch)}});
        for (std::size_t n = 0; n < batch.size(); ++n) {
            const xt::xarray<double> got = out.sequence<double>(n);
            for (std::size_t t = 0; t < batch[n].shape(0); ++t)
                for (std::size_t a = 0; a < 2; ++a)
                    for (std::size_t i = 0; i < 2; ++i)
                        for (std::size_t j = 0; j < 3; ++j) {
                            double want = b(a, 0, j);
                            for (std::size_t p = 0; p < 3; ++p) want += batch[n](t, a, p) * w(p, i, j);
                            INFO("batch of " << batch.size() << ", sequence " << n << ", step " << t);
                            CHECK(got(t, a, i, j) == doctest::Approx(want).epsilon(1e-12));
                        }
        }
    }
}

TEST_CASE("layer_norm normalizes every row of the last axis, of samples of rank 1 and 2, by formula") {
    // x [2, 3, 4] as a batch of 2 samples [3, 4]: 6 rows of 4; and sequences of [4] rows, ragged.
    const xt::xarray<double> data = rows({3, 4}, 7, -3, 3);
    const xt::xarray<double> scale{0.5, -1.0, 2.0, 1.5}, bias{0.1, 0.2, -0.3, 0.0};
    const double eps = 1e-3;
    auto expect = [&](const double* x, const double* y) {
        double mean = 0, var = 0;
        for (std::size_t j = 0; j < 4; ++j) mean += x[j] / 4;
        for (std::size_t j = 0; j < 4; ++j) var += (x[j] - mean) * (x[j] - mean) / 4;
        for (std::size_t j = 0; j < 4; ++j)
            CHECK(y[j] == doctest::Approx((x[j] - mean) / std::sqrt(var + eps) * scale(j) + bias(j)).epsilon(1e-12));
    };
    Variable x = input_variable({3, 4});
    const xt::xarray<double> y =
        eval(layer_norm(x, constant(scale), constant(bias), eps), {{x, Value::batch(data)}}).tensor<double>();
    REQUIRE(y.size() == data.size());
    for (std::size_t r = 0; r < 6; ++r) expect(data.data() + r * 4, y.data() + r * 4);

    Variable s = sequence::input_variable({4});
    const xt::xarray<double> one_step = xt::view(rows({4}, 9), xt::range(0, 1), xt::all());
    const std::vector<xt::xarray<double>> seqs{rows({4}, 8), one_step};  // 2 steps and 1
    const Value ys = eval(layer_norm(s, constant(scale), constant(bias), eps), {{s, Value::sequences(seqs)}});
    REQUIRE(ys.num_items() == 2);
    for (std::size_t n = 0; n < 2; ++n) {
        const xt::xarray<double> yn = ys.sequence<double>(n);
        for (std::size_t t = 0; t < seqs[n].shape(0); ++t) expect(seqs[n].data() + t * 4, yn.data() + t * 4);
    }
}
