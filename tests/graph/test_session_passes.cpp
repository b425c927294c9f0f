// A Session's backward frees the values of its forward as it goes, so each backward needs a forward
// of its own: a second backward, or one before any forward, is a UserError that says so (it read
// freed buffers before: a crash in a loop's backward), and a forward after it makes backward right
// again. value_and_gradients gives the loss and its gradients from one forward pass.
#include <doctest/doctest.h>

#include <xtensor/xadapt.hpp>

#include <loom.hpp>

using namespace loom;

TEST_CASE("Session: a backward without a forward of its own is a UserError, and forward makes it right again") {
    const Variable x = sequence::input_variable(Shape{2}, "x");
    const Parameter W = parameter(Shape{2, 3}, glorot_uniform(), "W", DType::f64);
    const Parameter U = parameter(Shape{3, 3}, glorot_uniform(), "U", DType::f64);
    const Variable p = placeholder(Shape{3}, "h");
    const Variable h = tanh(plus(times(x, W), times(past_value(p), U)));
    h.replace_placeholders({{p, h}});
    const Variable loss = sequence::reduce_sum(reduce_sum(h));
    const xt::xarray<double> x0 = {{1.0, -2.0}, {0.5, 0.25}, {3.0, 1.0}}, x1 = {{-1.0, 0.5}};
    const Bindings inputs{{x, Value::sequences(std::vector<xt::xarray<double>>{x0, x1})}};
    const xt::xarray<double> expected = gradients(loss, inputs, {W})[W].tensor<double>();

    Session s({loss}, {W, U});
    CHECK_THROWS_WITH_AS(s.backward(), doctest::Contains("Session::backward: no forward since the last backward"),
                         UserError);
    s.forward(inputs);
    s.backward();
    CHECK(xt::allclose(xt::adapt(s.gradient<double>(0).to_dense(), expected.shape()), expected));
    CHECK_THROWS_WITH_AS(s.backward(), doctest::Contains("each backward needs a forward of its own"), UserError);
    s.forward(inputs);
    s.backward();
    CHECK(xt::allclose(xt::adapt(s.gradient<double>(0).to_dense(), expected.shape()), expected));
}

TEST_CASE("value_and_gradients: the loss's value and its gradients come from one forward pass") {
    // Dropout in training mode draws a new mask at every evaluation: y = x * mask / (1 - rate), so
    // d(sum y)/dx = mask / (1 - rate) and y = x * that gradient, element by element, only when the
    // value and the gradient are of the same pass. Ragged sequences, the padding NaN.
    Variable x = sequence::input_variable({3}, "x");
    Variable y = dropout(x * 1.0, 0.5, 0);
    const Value xs = Value::sequences(
        std::vector<xt::xarray<double>>{xt::xarray<double>{{1.5, -2.0, 0.5}, {3.0, 0.25, -1.0}, {2.0, 2.0, 2.0}},
                                        xt::xarray<double>{{-0.5, 4.0, 1.0}}});
    const TrainingScope training(true);
    const auto [value, grads] = value_and_gradients(y, {{x, xs}}, {x}, DType::f64);
    REQUIRE(value.num_items() == 2);
    std::size_t dropped = 0, kept = 0;
    for (std::size_t s = 0; s < 2; ++s) {
        const xt::xarray<double> v = value.sequence<double>(s), g = grads[x].sequence<double>(s),
                                 in = xs.sequence<double>(s);
        REQUIRE(v.shape() == in.shape());
        for (std::size_t e = 0; e < in.size(); ++e) {
            CHECK(v.flat(e) == in.flat(e) * g.flat(e));
            (g.flat(e) == 0.0 ? dropped : kept) += 1;
        }
    }
    CHECK(dropped > 0);  // the mask dropped some and kept some: a second pass would draw another
    CHECK(kept > 0);
    // Without dropout, the value is evaluate's and the gradients are gradients()'.
    Variable z = tanh(x * 0.7);
    const auto [zv, zg] = value_and_gradients(z, {{x, xs}}, {x}, DType::f64);
    for (std::size_t s = 0; s < 2; ++s) {
        CHECK(zv.sequence<double>(s) == evaluate({z}, {{x, xs}}, DType::f64)[z].sequence<double>(s));
        CHECK(zg[x].sequence<double>(s) == gradients(z, {{x, xs}}, {x}, DType::f64)[x].sequence<double>(s));
    }
}
