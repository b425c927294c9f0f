// weighted_gradients (graph/weighted_gradients.hpp): the gradient of sum(output * weights). For
// y = x W the expected values are written from the inputs by hand: d/dW = sum_t x_t^T g_t and
// d/dx_t = g_t W^T.
#include <doctest/doctest.h>

#include <string>

#include <loom.hpp>

#include "graph/weighted_gradients.hpp"

using namespace loom;

TEST_CASE("weighted_gradients: the vector-Jacobian product of a sequence output, by hand") {
    const Variable x = sequence::input_variable(Shape{2}, "x");
    xt::xarray<double> w = {{1.0, 2.0, 0.0}, {-1.0, 0.5, 3.0}};
    const Parameter W = parameter(
        Shape{2, 3}, [w](const Shape&, Rng&) { return w; }, "W", DType::f64);
    const Variable y = times(x, W);
    const xt::xarray<double> x0 = {{1.0, 2.0}, {0.0, -1.0}}, x1 = {{3.0, 1.0}};
    const xt::xarray<double> g0 = {{1.0, 0.0, 2.0}, {-1.0, 1.0, 0.0}}, g1 = {{0.5, 0.5, 0.5}};
    Bindings inputs{{x, Value::sequences(std::vector<xt::xarray<double>>{x0, x1})}};
    const Value weights = Value::sequences(std::vector<xt::xarray<double>>{g0, g1});

    const ValueMap r = weighted_gradients(y, weights, inputs, {W, x});
    const xt::xarray<double> dW = r[W].tensor<double>();
    // sum_t x_t^T g_t, written out: row i, column j is sum over steps of x[t, i] * g[t, j].
    const xt::xarray<double> expected = {{1 * 1 + 0 * -1 + 3 * 0.5, 1 * 0 + 0 * 1 + 3 * 0.5, 1 * 2 + 0 + 3 * 0.5},
                                         {2 * 1 + -1 * -1 + 1 * 0.5, 2 * 0 + -1 * 1 + 1 * 0.5, 2 * 2 + 0 + 1 * 0.5}};
    CHECK(xt::allclose(dW, expected));
    // d/dx_t = g_t W^T: for x1's one step, 0.5 * (row sums of W).
    const xt::xarray<double> dx1 = r[x].sequence<double>(1);
    CHECK(xt::allclose(dx1, xt::xarray<double>{{0.5 * 3.0, 0.5 * 2.5}}));

    SUBCASE("all-ones weights give gradients()") {
        const Value ones =
            Value::sequences(std::vector<xt::xarray<double>>{xt::ones<double>({2, 3}), xt::ones<double>({1, 3})});
        const ValueMap a = weighted_gradients(y, ones, inputs, {W});
        const ValueMap b = gradients(y, inputs, {W});
        CHECK(xt::allclose(a[W].tensor<double>(), b[W].tensor<double>()));
    }
    SUBCASE("weights of other lengths or another sample shape are a UserError") {
        const Value short_weights = Value::sequences(std::vector<xt::xarray<double>>{g0, g0});
        CHECK_THROWS_AS(weighted_gradients(y, short_weights, inputs, {W}), UserError);
        const Value wide =
            Value::sequences(std::vector<xt::xarray<double>>{xt::ones<double>({2, 4}), xt::ones<double>({1, 4})});
        CHECK_THROWS_AS(weighted_gradients(y, wide, inputs, {W}), UserError);
    }
}

TEST_CASE("weighted_gradients: a batch output, by hand") {
    const Variable x = input_variable(Shape{2}, "x");
    const Variable y = x * 3.0;
    Bindings inputs{{x, Value::batch(xt::xarray<double>{{1.0, 2.0}, {3.0, 4.0}})}};
    const ValueMap r = weighted_gradients(y, Value::batch(xt::xarray<double>{{1.0, -1.0}, {0.0, 2.0}}), inputs, {x});
    CHECK(xt::allclose(r[x].rows<double>(), xt::xarray<double>{{3.0, -3.0}, {0.0, 6.0}}));
}
