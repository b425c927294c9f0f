// What compile keeps: nothing. A plan lives as long as whoever asked for it (a Session, one
// evaluate call), so a graph and its parameters are freed when the user's last handle goes.
#include <doctest/doctest.h>

#include <loom.hpp>

using namespace loom;

TEST_CASE("after evaluate and a Session, dropping the graph's handles frees its nodes and parameters") {
    std::weak_ptr<Node> weights, output;
    {
        Parameter w = parameter(xt::xarray<float>{{1, 2}, {3, 4}}, "w");
        Variable x = input_variable({2}, "x");
        Variable y = times(x, w, "y");
        weights = w.node();
        output = y.node();
        const Bindings in{{x, Value::batch(xt::xarray<float>{{1, 1}})}};
        const auto v = evaluate({y}, in)[y].tensor();
        CHECK(v(0, 0) == doctest::Approx(4));  // [1 1] [[1 2] [3 4]] = [4 6]
        CHECK(v(0, 1) == doctest::Approx(6));
        Session s({y});
        s.forward(in);
        CHECK(s.value(y).tensor()(0, 1) == doctest::Approx(6));
    }
    CHECK(output.expired());
    CHECK(weights.expired());
}

TEST_CASE("each compile builds its own plan") {
    Variable x = sequence::input_variable({1}, "x");
    Variable p = placeholder({1}, "p");
    Variable r = x + past_value(p);
    r.replace_placeholders({{p, r}});
    const auto first = compile({r}), second = compile({r});
    CHECK(first != second);  // nothing cached: two plans, each owned by its caller
    CHECK(first->steps.size() == second->steps.size());
    xt::xarray<float> steps = xt::zeros<float>({3, 1});
    steps(0, 0) = 1, steps(1, 0) = 2, steps(2, 0) = 3;
    const Value sums = evaluate({r}, {{x, Value::sequences(std::vector<xt::xarray<float>>{steps})}})[r];
    CHECK(sums.sequence(0)(2, 0) == doctest::Approx(6));  // the running sum 1, 1+2, 1+2+3
}
