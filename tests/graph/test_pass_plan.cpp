// Planning a pass is a pure function of the plan and the wrt set (graph/pass_plan.hpp): checked on
// small graphs against what each rule says, worked out by hand from the graph.
#include <doctest/doctest.h>

#include <algorithm>

#include <loom.hpp>

#include "test_support.hpp"

#include "graph/pass_plan.hpp"

using namespace loom;

namespace {
using loom::testing::node_of;
bool contains(const std::vector<int>& list, int x) { return std::find(list.begin(), list.end(), x) != list.end(); }
}  // namespace

TEST_CASE("pass plan: gradients exist on paths from wrt to the output, and outlive the pass for wrt and outputs") {
    Variable x = input_variable({3}, "x");
    Parameter w1 = parameter(xt::xarray<float>{{1, 2}, {3, 4}, {5, 6}}, "w1");
    Parameter w2 = parameter(xt::xarray<float>{{1.0f, 2.0f}, {0.5f, -1.0f}}, "w2");
    Variable h = tanh(times(x, w1));
    Variable y = times(h, w2);
    Variable loss = reduce_sum(y);
    const auto plan = compile({loss});
    const StepGraph steps = plan_steps(*plan);
    // Differentiating for w2 only: h is a value w2's gradient needs, but h gets no gradient.
    const BackwardPlan bp = plan_backward(*plan, steps, {node_of(*plan, w2)});
    CHECK(bp.needs_grad[static_cast<std::size_t>(node_of(*plan, w2))]);
    CHECK(bp.needs_grad[static_cast<std::size_t>(node_of(*plan, y))]);
    CHECK(bp.needs_grad[static_cast<std::size_t>(node_of(*plan, loss))]);
    CHECK_FALSE(bp.needs_grad[static_cast<std::size_t>(node_of(*plan, h))]);
    CHECK_FALSE(bp.needs_grad[static_cast<std::size_t>(node_of(*plan, w1))]);
    CHECK(bp.keep_grad[static_cast<std::size_t>(node_of(*plan, w2))]);
    CHECK(bp.keep_grad[static_cast<std::size_t>(node_of(*plan, loss))]);
    CHECK_FALSE(bp.keep_grad[static_cast<std::size_t>(node_of(*plan, y))]);
    // tanh's backward never runs, so its input (x w1) is freed once tanh has read it; h is read by
    // the product's backward (dW2 = h^T dy) and kept; leaves always are.
    const Variable xw1 = Variable(h.node()->inputs[0]);
    CHECK_FALSE(bp.value_needed[static_cast<std::size_t>(node_of(*plan, xw1))]);
    CHECK(bp.value_needed[static_cast<std::size_t>(node_of(*plan, h))]);
    CHECK(bp.value_needed[static_cast<std::size_t>(node_of(*plan, x))]);
    // The same plan for w1 and w2: now h and the tanh's input get gradients.
    const BackwardPlan both = plan_backward(*plan, steps, {node_of(*plan, w1), node_of(*plan, w2)});
    CHECK(both.needs_grad[static_cast<std::size_t>(node_of(*plan, h))]);
    CHECK(both.value_needed[static_cast<std::size_t>(node_of(*plan, h))]);  // tanh's backward reads y
}

TEST_CASE("pass plan: an affine's addend shares its gradient buffer -- an embedding table's gradient is kept by rows") {
    Variable ids = sequence::input_variable({1}, "ids");
    Parameter table = parameter(xt::xarray<float>{{1, 2}, {3, 4}, {5, 6}}, "table");
    Parameter w = parameter(xt::xarray<float>{{1, 0}, {0, 1}}, "w");
    Parameter b = parameter(xt::xarray<float>{0.5f, -0.5f}, "b");
    Variable e = embedding(ids, table);
    Variable proj = times(e, w);        // one use only: its consumer below is an affine's addend
    Variable out = affine(e, w, proj);  // out = e w + proj
    Variable loss = sequence::reduce_sum(reduce_sum(sigmoid(out) + b));
    const auto plan = compile({loss});
    const StepGraph steps = plan_steps(*plan);
    const BackwardPlan bp = plan_backward(*plan, steps, {node_of(*plan, table), node_of(*plan, w)});
    CHECK(bp.alias_of[static_cast<std::size_t>(node_of(*plan, proj))] == node_of(*plan, out));
    CHECK(bp.alias_of[static_cast<std::size_t>(node_of(*plan, e))] == -1);  // used twice
    CHECK(bp.by_rows[static_cast<std::size_t>(node_of(*plan, table))]);
    CHECK_FALSE(bp.by_rows[static_cast<std::size_t>(node_of(*plan, w))]);  // a matrix, but used by times

    // The same table also used by times: its gradient is dense.
    Variable loss2 = loss + reduce_sum(times(input_variable({3}, "onehot"), table));
    const auto plan2 = compile({loss2});
    const BackwardPlan bp2 = plan_backward(*plan2, plan_steps(*plan2), {node_of(*plan2, table)});
    CHECK_FALSE(bp2.by_rows[static_cast<std::size_t>(node_of(*plan2, table))]);
}

TEST_CASE("pass plan: task graphs wait for producers forward and for consumers backward, in reverse plan order") {
    Variable x = sequence::input_variable({2}, "x");
    Parameter w = parameter(xt::xarray<float>{{0.5f, 0}, {0, 0.5f}}, "w");
    Variable p = placeholder({2}, "h_prev");
    Variable h = tanh(times(past_value(p), w) + x);
    h.replace_placeholders({{p, h}});
    Variable a = sequence::reduce_sum(h);
    Variable bsum = sequence::reduce_sum(x * x);
    Variable loss = reduce_sum(a) + reduce_sum(bsum);
    const auto plan = compile({loss});
    const StepGraph g = plan_steps(*plan);
    const int last = static_cast<int>(plan->steps.size()) - 1;
    const int loop_step = g.step_of[static_cast<std::size_t>(node_of(*plan, h))];
    REQUIRE(plan->steps[static_cast<std::size_t>(loop_step)].is_loop);
    const int a_step = g.step_of[static_cast<std::size_t>(node_of(*plan, a))];
    const int x_step = g.step_of[static_cast<std::size_t>(node_of(*plan, x))];
    // Forward: the sum over time waits for the loop, the loop for x (and w).
    CHECK(contains(g.forward.after[static_cast<std::size_t>(a_step)], loop_step));
    CHECK(contains(g.forward.after[static_cast<std::size_t>(loop_step)], x_step));
    CHECK(contains(g.step_inputs[static_cast<std::size_t>(loop_step)], node_of(*plan, x)));
    // Backward task k is plan step last - k: the loop's backward waits for the sum's.
    CHECK(contains(g.backward.after[static_cast<std::size_t>(last - loop_step)], last - a_step));
    // Every dependency is an earlier task, so the tasks in number order are a valid serial order.
    for (const TaskGraph* tasks : {&g.forward, &g.backward})
        for (std::size_t t = 0; t < tasks->after.size(); ++t)
            for (int d : tasks->after[t]) CHECK(d < static_cast<int>(t));
    // x feeds two steps (the loop and x * x): their backwards add into x's gradient one after the
    // other, the later plan step first, whatever the schedule.
    const int sq_step = g.step_of[static_cast<std::size_t>(node_of(*plan, Variable(bsum.node()->inputs[0])))];
    const int first = std::max(loop_step, sq_step), second = std::min(loop_step, sq_step);
    CHECK(contains(g.backward.after[static_cast<std::size_t>(last - second)], last - first));
}
