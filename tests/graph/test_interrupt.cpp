// An InterruptCheckScope's check stops a pass between its steps: a loop of many steps stops within a
// few of the call that throws, the exception leaves evaluate / Session::forward / backward as it
// was thrown, and the Session's next forward and backward give the values of an uninterrupted run.
#include <doctest/doctest.h>

#include <thread>

#include <xtensor/xadapt.hpp>

#include <loom.hpp>

using namespace loom;

namespace {

struct Stop : std::runtime_error {
    Stop() : std::runtime_error("stopped") {}
};

// h_t = tanh(x_t W + h_{t-1} U) over one sequence of `steps` steps: a loop of that many steps.
struct Loop {
    Variable x = sequence::input_variable(Shape{2}, "x");
    Parameter W = parameter(Shape{2, 3}, glorot_uniform(), "W", DType::f64);
    Parameter U = parameter(Shape{3, 3}, glorot_uniform(), "U", DType::f64);
    Variable loss;
    Loop() {
        const Variable p = placeholder(Shape{3}, "h");
        const Variable h = tanh(plus(times(x, W), times(past_value(p), U)));
        h.replace_placeholders({{p, h}});
        loss = sequence::reduce_sum(reduce_sum(h));
    }
    Bindings data(std::size_t steps) const {
        xt::xarray<double> x0 = xt::zeros<double>({steps, std::size_t{2}});
        for (std::size_t t = 0; t < steps; ++t) x0(t, 0) = std::sin(0.1 * double(t)), x0(t, 1) = 0.5;
        return {{x, Value::sequences(std::vector<xt::xarray<double>>{x0})}};
    }
};

}  // namespace

TEST_CASE("InterruptCheckScope: a check that throws stops evaluate within a few loop steps") {
    const Loop m;
    int calls = 0;
    {
        const InterruptCheckScope scope(
            [&] {
                if (++calls == 5) throw Stop();
            },
            0);
        CHECK_THROWS_AS(evaluate({m.loss}, m.data(1000)), Stop);
    }
    CHECK(calls == 5);  // called before each step until it threw, never after
    // Out of the scope nothing is checked, and the graph runs whole.
    const double whole = evaluate({m.loss}, m.data(1000))[m.loss].tensor<double>()(0, 0);
    CHECK(calls == 5);
    CHECK(std::isfinite(whole));
}

TEST_CASE("InterruptCheckScope: a Session stopped in forward or backward runs whole afterwards") {
    const Loop m;
    const Bindings in = m.data(300);
    const xt::xarray<double> expected = gradients(m.loss, in, {m.W})[m.W].tensor<double>();
    for (int threads : {1, 2}) {
        CAPTURE(threads);
        set_inter_op_threads(threads);
        Session s({m.loss}, {m.W, m.U});
        int calls = 0, stop_at = 40;
        {
            const InterruptCheckScope scope(
                [&] {
                    if (++calls == stop_at) throw Stop();
                },
                0);
            CHECK_THROWS_AS(s.forward(in), Stop);
            CHECK_THROWS_WITH_AS(s.backward(), doctest::Contains("Session::backward: no forward"), UserError);
            calls = 0, stop_at = -1;
            s.forward(in);
            const int in_forward = calls;
            CHECK(in_forward >= 300);  // a check before each of the loop's 300 steps
            calls = 0, stop_at = in_forward + 40;
            s.forward(in);
            CHECK_THROWS_AS(s.backward(), Stop);  // 40 checks into backward's sweep
        }
        s.forward(in);
        s.backward();
        CHECK(xt::allclose(xt::adapt(s.gradient<double>(0).to_dense(), expected.shape()), expected));
    }
    set_inter_op_threads(1);
}

TEST_CASE("InterruptCheckScope: scopes nest, end innermost first, and belong to their thread") {
    int outer = 0, inner = 0;
    const Loop m;
    {
        const InterruptCheckScope a([&] { ++outer; }, 0);
        {
            const InterruptCheckScope b([&] { ++inner; }, 0);
            evaluate({m.loss}, m.data(10));
        }
        CHECK(inner > 0);
        CHECK(outer == 0);
        evaluate({m.loss}, m.data(10));
        CHECK(outer > 0);
        // Another thread's passes do not answer to this thread's scope.
        const int before = outer;
        std::thread([&] { evaluate({m.loss}, m.data(10)); }).join();
        CHECK(outer == before);
    }
    // A scope with a long interval checks once, at the first step.
    int calls = 0;
    const InterruptCheckScope rare([&] { ++calls; }, 3600);
    evaluate({m.loss}, m.data(200));
    CHECK(calls == 1);
}
