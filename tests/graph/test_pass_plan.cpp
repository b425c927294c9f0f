// Planning a pass is a pure function of the plan, the kind of pass and the wrt set
// (graph/pass_plan.hpp): checked on small graphs against what each rule says, worked out by hand
// from the graph, the memory the schedule takes and frees step by step included.
#include <doctest/doctest.h>

#include <algorithm>

#include <loom.hpp>

#include "test_support.hpp"

#include "graph/pass_plan.hpp"

using namespace loom;

namespace {
using loom::testing::node_of;
bool contains(const std::vector<int>& list, int x) { return std::find(list.begin(), list.end(), x) != list.end(); }
bool contains(const std::vector<std::pair<int, int>>& list, std::pair<int, int> x) {
    return std::find(list.begin(), list.end(), x) != list.end();
}

// h = tanh(h[t-1] w + x) over x's axis, summed over time and over its row: a loop step between x's
// and the sums'.
struct Recurrence {
    Variable x = sequence::input_variable({2}, "x");
    Parameter w = parameter(xt::xarray<float>{{0.5f, 0}, {0, 0.5f}}, "w");
    Variable p = placeholder({2}, "h_prev");
    Variable delayed = past_value(p);
    Variable product = times(delayed, w);
    Variable sum = product + x;
    Variable h = tanh(sum);
    Variable over_time, loss;
    Recurrence() {
        h.replace_placeholders({{p, h}});
        over_time = sequence::reduce_sum(h);
        loss = reduce_sum(over_time);
    }
};
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
    const PassSchedule bp = plan_pass(*plan, steps, PassSchedule::Kind::training, {node_of(*plan, w2)});
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
    const PassSchedule both =
        plan_pass(*plan, steps, PassSchedule::Kind::training, {node_of(*plan, w1), node_of(*plan, w2)});
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
    const PassSchedule bp =
        plan_pass(*plan, steps, PassSchedule::Kind::training, {node_of(*plan, table), node_of(*plan, w)});
    CHECK(bp.alias_of[static_cast<std::size_t>(node_of(*plan, proj))] == node_of(*plan, out));
    CHECK(bp.alias_of[static_cast<std::size_t>(node_of(*plan, e))] == -1);  // used twice
    CHECK(bp.by_rows[static_cast<std::size_t>(node_of(*plan, table))]);
    CHECK_FALSE(bp.by_rows[static_cast<std::size_t>(node_of(*plan, w))]);  // a matrix, but used by times

    // The same table also used by times: its gradient is dense.
    Variable loss2 = loss + reduce_sum(times(input_variable({3}, "onehot"), table));
    const auto plan2 = compile({loss2});
    const PassSchedule bp2 =
        plan_pass(*plan2, plan_steps(*plan2), PassSchedule::Kind::training, {node_of(*plan2, table)});
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

TEST_CASE("pass schedule: scoring frees a value after its last reader and a loop's inner values after the loop") {
    Recurrence r;
    const auto plan = compile({r.loss});
    const StepGraph steps = plan_steps(*plan);
    const PassSchedule ps = plan_pass(*plan, steps, PassSchedule::Kind::forward_only);
    const int loop = steps.step_of[static_cast<std::size_t>(node_of(*plan, r.h))];
    auto i = [&](const Variable& v) { return static_cast<std::size_t>(node_of(*plan, v)); };
    // Everything but the output goes once read, the leaves too; the output stays.
    CHECK(ps.free_when_read[i(r.x)]);
    CHECK(ps.free_when_read[i(r.h)]);
    CHECK(ps.free_when_read[i(r.over_time)]);
    CHECK_FALSE(ps.free_when_read[i(r.loss)]);
    // The loop's members no other step reads are freed when the loop is done: the delay, the
    // product and the sum, not h (the sum over time reads it).
    const auto& own = ps.free_own[static_cast<std::size_t>(loop)];
    CHECK(own.size() == 3);
    for (const Variable* v : {&r.delayed, &r.product, &r.sum}) CHECK(contains(own, node_of(*plan, *v)));
    CHECK_FALSE(contains(own, node_of(*plan, r.h)));
    // Nothing is held for segments: no backward follows.
    for (const auto& holds : ps.hold_if_segmented) CHECK(holds.empty());
}

TEST_CASE(
    "pass schedule: training keeps what backward reads, holds a loop's inputs for its segments, and lists each "
    "step's gradients") {
    Recurrence r;
    const auto plan = compile({r.loss});
    const StepGraph steps = plan_steps(*plan);
    const int w = node_of(*plan, r.w);
    const PassSchedule ps = plan_pass(*plan, steps, PassSchedule::Kind::training, {w});
    auto i = [&](const Variable& v) { return static_cast<std::size_t>(node_of(*plan, v)); };
    const auto loop = static_cast<std::size_t>(steps.step_of[i(r.h)]);
    const auto sum_step = static_cast<std::size_t>(steps.step_of[i(r.over_time)]);
    // tanh's backward reads h, the product's backward its input (the delay) for dW: kept. The sum
    // over time's backward reads nothing of its input's value... but h is tanh's output: kept.
    CHECK_FALSE(ps.free_when_read[i(r.h)]);
    CHECK(ps.free_when_read[i(r.over_time)]);  // reduce_sum's backward reads neither side
    // The loop reads x and w from outside: held when it runs in segments (it recomputes from them).
    const auto& holds = ps.hold_if_segmented[loop];
    CHECK(contains(holds, {node_of(*plan, r.x), static_cast<int>(loop)}));
    CHECK(contains(holds, {w, static_cast<int>(loop)}));
    CHECK(ps.free_own[loop].empty());
    // The loop's backward: its members that get gradients (all four: each depends on w) and that
    // no step after it took (h's the sum over time took) are taken unzeroed for the sweep; w's is
    // taken after it for the bulk product, x's never (not wrt).
    const PassSchedule::Backward& b = ps.backward[loop];
    CHECK(b.take_unzeroed.size() == 3);
    CHECK_FALSE(contains(b.take_unzeroed, node_of(*plan, r.h)));
    CHECK(b.take_after == std::vector<int>{w});
    // Their gradients and the inner values go back once the loop's backward ran; w is final after
    // its own step, not the loop's.
    CHECK(b.free_grad.size() == 4);
    CHECK(b.free_value.size() == 4);
    CHECK(b.final.empty());
    CHECK(ps.backward[static_cast<std::size_t>(steps.step_of[static_cast<std::size_t>(w)])].final ==
          std::vector<int>{w});
    // A node's step takes its input's gradient (zeroed: a sum over time adds into it), not its own:
    // the step after it (the loss's sum) took that.
    CHECK(ps.backward[sum_step].take == std::vector<int>{node_of(*plan, r.h)});
    // In segments: the delay reads h (carried, one row of history); h is read whole after the loop
    // and the delay's value by the product's dW: kept whole; the gradients the bulk product and the
    // sum over time read are kept whole.
    const LoopRoles& roles = ps.loops[loop];
    auto member = [&](const Variable& v) {
        const auto& ms = plan->steps[loop].members;
        return static_cast<std::size_t>(std::find(ms.begin(), ms.end(), node_of(*plan, v)) - ms.begin());
    };
    CHECK(roles.history == 1);
    CHECK(roles.reads_time == -1);
    CHECK(roles.carried[member(r.h)]);
    CHECK_FALSE(roles.carried[member(r.sum)]);
    CHECK(roles.full_value[member(r.h)]);
    CHECK(roles.full_value[member(r.delayed)]);
    CHECK_FALSE(roles.full_value[member(r.sum)]);
    CHECK(roles.full_grad[member(r.h)]);
    CHECK(roles.full_grad[member(r.product)]);
    CHECK_FALSE(roles.full_grad[member(r.sum)]);
    // When the loop ran in segments: of the two gradients kept whole, the product's (h's was taken).
    CHECK(b.take == std::vector<int>{node_of(*plan, r.product)});
    CHECK(roles.zero_reach == 1);  // the delay adds into the step before
}

TEST_CASE("pass schedule: a node's backward hands its gradient buffer to the addend it was lent to") {
    Variable x = sequence::input_variable({2}, "x");
    Parameter w = parameter(xt::xarray<float>{{1, 0}, {0, 1}}, "w");
    Parameter b = parameter(xt::xarray<float>{0.5f, -0.5f}, "b");
    Variable proj = times(x, w);
    Variable out = affine(x, w, proj);
    Variable loss = sequence::reduce_sum(reduce_sum(sigmoid(out) + b));
    const auto plan = compile({loss});
    const StepGraph steps = plan_steps(*plan);
    const PassSchedule ps = plan_pass(*plan, steps, PassSchedule::Kind::training, {node_of(*plan, w)});
    const auto out_step = static_cast<std::size_t>(steps.step_of[static_cast<std::size_t>(node_of(*plan, out))]);
    const PassSchedule::Backward& bw = ps.backward[out_step];
    REQUIRE(bw.hand_over.size() == 1);
    CHECK(bw.hand_over[0] == std::pair{node_of(*plan, out), node_of(*plan, proj)});
    // affine takes w's gradient unzeroed, its product writing it whole (w is its input 1), and
    // proj's zeroed (x gets none; its own the sigmoid took): proj's is out's buffer until the
    // hand-over when their run-time shapes agree, so Buffers takes nothing for it then.
    CHECK(bw.take == std::vector<int>{node_of(*plan, proj)});
    CHECK(bw.write == std::vector<int>{node_of(*plan, w)});
    CHECK(bw.assign == 2u);
}

TEST_CASE(
    "pass schedule: each gradient is taken once, by the first step to add into it, unzeroed for an op that "
    "writes it whole") {
    // p = x w, h = tanh(p), y = h w, loss = sum(y): w is read twice, by y's product first in
    // backward's order.
    Variable x = input_variable({3}, "x");
    Parameter w = parameter(xt::xarray<float>{{1, 2, 0}, {3, 4, 0}, {5, 6, 1}}, "w");
    Variable p = times(x, w);
    Variable h = tanh(p);
    Variable y = times(h, w);
    Variable loss = reduce_sum(y);
    const auto plan = compile({loss});
    const StepGraph steps = plan_steps(*plan);
    const PassSchedule ps = plan_pass(*plan, steps, PassSchedule::Kind::training, {node_of(*plan, w)});
    auto at = [&](const Variable& v) -> const PassSchedule::Backward& {
        return ps.backward[static_cast<std::size_t>(steps.step_of[static_cast<std::size_t>(node_of(*plan, v))])];
    };
    // The loss is an output: its seed takes its gradient. Its sum adds into y's (zeroed).
    CHECK(at(loss).take == std::vector<int>{node_of(*plan, y)});
    CHECK(at(loss).write.empty());
    // y's product writes both its inputs' gradients whole: h (input 0) and w (input 1).
    CHECK(at(y).take.empty());
    CHECK(at(y).write == std::vector<int>{node_of(*plan, h), node_of(*plan, w)});
    CHECK(at(y).assign == 3u);
    // tanh writes p's whole.
    CHECK(at(h).write == std::vector<int>{node_of(*plan, p)});
    CHECK(at(h).assign == 1u);
    // p's product adds into w's, taken already: it takes nothing and writes nothing.
    CHECK(at(p).take.empty());
    CHECK(at(p).write.empty());
    CHECK(at(p).assign == 0u);
    // Every gradient of the pass but the seeded output's is taken by exactly one step.
    std::vector<int> times_taken(plan->nodes.size(), 0);
    for (const auto& b : ps.backward)
        for (const auto* list : {&b.take, &b.write, &b.take_unzeroed, &b.take_after})
            for (int j : *list) ++times_taken[static_cast<std::size_t>(j)];
    for (std::size_t j = 0; j < plan->nodes.size(); ++j)
        CHECK_MESSAGE(times_taken[j] == (ps.needs_grad[j] && !ps.is_output[j] ? 1 : 0), plan->nodes[j].node->label());
}

TEST_CASE("pass schedule: a loop's segments balance the windows against the saved states, worked out by hand") {
    LoopRoles roles;
    roles.full_value = {0};
    roles.full_grad = {0};
    roles.carried = {1};
    roles.history = 1;
    const std::vector<std::size_t> row{10};  // floats per time step
    const std::vector<char> grad{1};
    // 100 steps of 10 floats, value and gradient: 8,000 bytes whole.
    SegmentSizes z = size_segments(roles, row, grad, 100, 8000, 4);
    CHECK_FALSE(z.segmented);
    CHECK(z.plain_bytes == 8000);
    CHECK_FALSE(size_segments(roles, row, grad, 100, 0, 4).segmented);  // no budget
    // Under 2,000: bytes(len) = 4 (20 (len + 1) + 10 + 10 (ceil(100 / len) - 1)); sqrt(10 * 100 /
    // 20) = 7.07 gives len 7 (1,240 bytes: 160 + 10 + 140 floats), which neither 6 nor 8 beats.
    z = size_segments(roles, row, grad, 100, 2000, 4);
    CHECK(z.segmented);
    CHECK(z.length == 7);
    CHECK(z.count == 15);
    CHECK(z.least_bytes == 1240);
    CHECK(z.whole_bytes == 0);
    // A member kept whole adds its value over all steps to the least.
    roles.full_value = {1};
    z = size_segments(roles, row, grad, 100, 2000, 4);
    CHECK(z.whole_bytes == 4000);
    CHECK(z.least_bytes == 1240 + 4000);
}
