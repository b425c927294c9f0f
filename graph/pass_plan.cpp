#include "graph/pass_plan.hpp"

#include <algorithm>

#include "graph/op.hpp"

namespace loom {

namespace {

void add_once(std::vector<int>& list, int x) {
    if (std::find(list.begin(), list.end(), x) == list.end()) list.push_back(x);
}

// Nodes that depend on a wrt node and so lie on a path from one to an output.
std::vector<char> depends_on(const Plan& plan, const std::vector<char>& is_wrt) {
    std::vector<char> needs = is_wrt;
    for (bool changed = true; changed;) {  // loops' back edges settle in a second pass
        changed = false;
        for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
            if (needs[i]) continue;
            for (int j : plan.nodes[i].inputs)
                if (needs[static_cast<std::size_t>(j)]) {
                    needs[i] = 1;
                    changed = true;
                    break;
                }
        }
    }
    return needs;
}

// A parameter matrix that gets a gradient, whose every consumer is an op outside loops (loop ops
// get their outside gradients in bulk, densely) that adds into it by rows.
bool rows_only(const Plan& plan, std::size_t i, const std::vector<char>& needs) {
    const PlanNode& p = plan.nodes[i];
    if (!needs[i] || p.node->kind != NodeKind::Parameter || p.type.shape.rank() < 2) return false;
    bool any = false;
    for (const auto& pn : plan.nodes)
        for (std::size_t j = 0; j < pn.inputs.size(); ++j) {
            if (pn.inputs[j] != static_cast<int>(i)) continue;
            if (pn.node->kind != NodeKind::Op || pn.loop >= 0 || !pn.node->op->traits().writes_gradient_rows(j))
                return false;
            any = true;
        }
    return any;
}

// alias_of (see BackwardPlan): both must be pooled gradients of ops outside loops, with equal
// shapes, and the consumer not itself an alias.
std::vector<int> gradient_aliases(const Plan& plan, const BackwardPlan& bp) {
    const std::size_t n = plan.nodes.size();
    std::vector<int> uses(n, 0), consumer(n, -1);
    std::vector<std::size_t> position(n, 0);
    for (std::size_t k = 0; k < n; ++k)
        for (std::size_t p = 0; p < plan.nodes[k].inputs.size(); ++p) {
            const auto j = static_cast<std::size_t>(plan.nodes[k].inputs[p]);
            ++uses[j];
            consumer[j] = static_cast<int>(k);
            position[j] = p;
        }
    auto pooled = [&](std::size_t i) {
        return bp.needs_grad[i] && !bp.keep_grad[i] && plan.nodes[i].node->kind == NodeKind::Op;
    };
    std::vector<char> candidate(n, 0);
    for (std::size_t j = 0; j < n; ++j) {
        if (uses[j] != 1 || !pooled(j) || plan.nodes[j].loop >= 0) continue;
        const auto k = static_cast<std::size_t>(consumer[j]);
        candidate[j] = pooled(k) && plan.nodes[k].node->op->traits().passes_gradient_through(position[j]) &&
                       plan.nodes[j].type.shape == plan.nodes[k].type.shape;
    }
    std::vector<int> alias_of(n, -1);
    for (std::size_t j = 0; j < n; ++j)
        if (candidate[j] && !candidate[static_cast<std::size_t>(consumer[j])]) alias_of[j] = consumer[j];
    return alias_of;
}

// Values a backward step reads: the outputs and leaves always; an op's output and inputs as its
// backward declares, when that backward runs at all.
std::vector<char> values_needed(const Plan& plan, const std::vector<char>& needs) {
    const std::size_t n = plan.nodes.size();
    std::vector<char> needed(n, 0);
    for (int o : plan.outputs) needed[static_cast<std::size_t>(o)] = 1;
    for (std::size_t i = 0; i < n; ++i) {
        const PlanNode& pn = plan.nodes[i];
        if (pn.node->kind != NodeKind::Op) {
            needed[i] = 1;
            continue;
        }
        if (!needs[i]) continue;
        if (pn.node->op->backward_reads_output()) needed[i] = 1;
        for (std::size_t j = 0; j < pn.inputs.size(); ++j)
            if (pn.node->op->backward_reads_input(j)) needed[static_cast<std::size_t>(pn.inputs[j])] = 1;
    }
    return needed;
}

}  // namespace

StepGraph plan_steps(const Plan& plan) {
    const std::size_t n_steps = plan.steps.size();
    StepGraph g;
    g.step_of.assign(plan.nodes.size(), -1);
    for (std::size_t s = 0; s < n_steps; ++s)
        for (int m : plan.steps[s].members) g.step_of[static_cast<std::size_t>(m)] = static_cast<int>(s);
    g.step_inputs.assign(n_steps, {});
    g.forward.after.assign(n_steps, {});
    g.backward.after.assign(n_steps, {});
    const int last = static_cast<int>(n_steps) - 1;
    std::vector<int> last_consumer(plan.nodes.size(), -1);  // in the backward sweep so far
    for (int s = last; s >= 0; --s) {
        const auto su = static_cast<std::size_t>(s);
        const int task = last - s;
        for (int m : plan.steps[su].members)
            for (int j : plan.nodes[static_cast<std::size_t>(m)].inputs) {
                const int producer = g.step_of[static_cast<std::size_t>(j)];
                if (producer == s) continue;
                add_once(g.step_inputs[su], j);
                add_once(g.forward.after[su], producer);
                // Backward: the producer waits for this step (it adds into j's gradient), and this
                // step waits for the later step that added into j's gradient before it.
                add_once(g.backward.after[static_cast<std::size_t>(last - producer)], task);
                int& prev = last_consumer[static_cast<std::size_t>(j)];
                if (prev >= 0 && prev != task) add_once(g.backward.after[static_cast<std::size_t>(task)], prev);
                prev = task;
            }
    }
    return g;
}

BackwardPlan plan_backward(const Plan& plan, const StepGraph& steps, const std::vector<int>& wrt) {
    const std::size_t n = plan.nodes.size();
    BackwardPlan bp;
    bp.wrt = wrt;
    bp.is_output.assign(n, 0);
    bp.is_wrt.assign(n, 0);
    for (int o : plan.outputs) bp.is_output[static_cast<std::size_t>(o)] = 1;
    for (int w : wrt) bp.is_wrt[static_cast<std::size_t>(w)] = 1;
    bp.needs_grad = depends_on(plan, bp.is_wrt);
    bp.keep_grad.assign(n, 0);
    bp.keep_value.assign(n, 0);
    bp.by_rows.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        bp.keep_grad[i] = bp.is_output[i] || bp.is_wrt[i];
        bp.keep_value[i] = bp.keep_grad[i] || plan.nodes[i].node->kind != NodeKind::Op;
        bp.by_rows[i] = bp.is_wrt[i] && !bp.is_output[i] && rows_only(plan, i, bp.needs_grad);
    }
    bp.alias_of = gradient_aliases(plan, bp);
    bp.value_needed = values_needed(plan, bp.needs_grad);
    bp.readers.assign(n, 0);
    for (const auto& ins : steps.step_inputs)
        for (int j : ins) ++bp.readers[static_cast<std::size_t>(j)];
    return bp;
}

}  // namespace loom
