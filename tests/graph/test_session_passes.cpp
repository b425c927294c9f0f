// A Session's backward frees the values of its forward as it goes, so each backward needs a forward
// of its own: a second backward, or one before any forward, is a UserError that says so (it read
// freed buffers before: a crash in a loop's backward), and a forward after it makes backward right
// again.
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
