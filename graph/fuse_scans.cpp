// The fused-scan rewrite: compile's one pass over a finished plan (graph/fuse_scans.hpp).
#include "graph/fuse_scans.hpp"

#include <vector>

#include "graph/op.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

// The loop r = f(z, element_select(cond, c, delay(r, init))) of `step` when it can run as one
// fused scan: a differentiable element-wise f, a delay of one step, operands that fit, and a
// select and delay used nowhere else. Returns the members {r, select, delay}, or an empty list.
std::vector<int> scan_loop(const Plan& plan, const PlanStep& step, const std::vector<int>& uses) {
    if (!step.is_loop || step.members.size() != 3) return {};
    int r = -1, sel = -1, d = -1;
    for (int m : step.members) {
        const OpTraits op = plan.nodes[m].node->op->traits();
        if (op.delay_direction != 0)
            d = m;
        else if (op.element_select)
            sel = m;
        else
            r = m;
    }
    if (r < 0 || sel < 0 || d < 0 || uses[sel] || uses[d]) return {};
    const auto &rn = plan.nodes[r], &sn = plan.nodes[sel], &dn = plan.nodes[d];
    auto outside = [&](int i) { return plan.nodes[i].loop != rn.loop; };
    if (rn.inputs.size() != 2 || rn.inputs[1] != sel || !outside(rn.inputs[0]) || sn.inputs[2] != d ||
        !outside(sn.inputs[0]) || !outside(sn.inputs[1]) || dn.inputs[0] != r ||
        dn.node->op->traits().delay_steps != 1 || !binary_kernels(*rn.node->op))
        return {};
    auto type = [&](int i) { return plan.nodes[i].type; };
    if (!scan_fits(type(rn.inputs[0]), type(sn.inputs[0]), type(sn.inputs[1]), type(dn.inputs[1]))) return {};
    return {r, sel, d};
}

// Rewrites every loop scan_loop accepts into one node of the fused scan op (graph/ops/scan.cpp),
// with inputs (z, cond, c, init): no loop is left to run step by step. The step stays (as a plain
// one), so loop indices keep their meaning; r's node maps to the new node.
}  // namespace

void fuse_scans(Plan& plan) {
    std::vector<int> uses(plan.nodes.size(), 0);  // consumers outside the node's own loop, and outputs
    for (const auto& pn : plan.nodes)
        for (int i : pn.inputs)
            if (plan.nodes[i].loop != pn.loop) ++uses[i];
    for (int o : plan.outputs) ++uses[o];
    std::vector<PlanNode> nodes;
    std::vector<int> moved(plan.nodes.size(), -1);  // old index -> new index
    std::vector<Node*> fused_from;                  // per new node: the node it replaced, if fused
    for (auto& step : plan.steps) {
        const std::vector<int> loop = scan_loop(plan, step, uses);
        if (loop.empty()) {
            for (int& m : step.members) {
                moved[m] = static_cast<int>(nodes.size());
                nodes.push_back(plan.nodes[m]);
                fused_from.push_back(nullptr);
                m = moved[m];
            }
            continue;
        }
        const PlanNode &r = plan.nodes[loop[0]], &sel = plan.nodes[loop[1]], &d = plan.nodes[loop[2]];
        const std::vector<int> inputs{r.inputs[0], sel.inputs[0], sel.inputs[1], d.inputs[1]};
        std::vector<NodePtr> input_nodes;
        for (int i : inputs) input_nodes.push_back(plan.nodes[i].node->shared_from_this());
        NodePtr fused = make_node(NodeKind::Op, r.node->name, r.type);
        fused->op = select_delay_scan(*binary_kernels(*r.node->op), step.direction);
        fused->inputs = std::move(input_nodes);
        plan.keep_alive.push_back(fused);
        moved[loop[0]] = static_cast<int>(nodes.size());
        nodes.push_back({fused.get(), inputs, r.type, -1});
        fused_from.push_back(r.node);
        step = PlanStep{};
        step.members = {moved[loop[0]]};
    }
    renumber_plan(plan, std::move(nodes), moved, fused_from);
}

}  // namespace loom
