// The embedding-product fold: a pass of compile's over a finished plan (graph/fold_products.hpp).
#include "graph/fold_products.hpp"

#include <vector>

#include "graph/op.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

bool is_op(const PlanNode& pn) { return pn.node->kind == NodeKind::Op && pn.node->op; }

// The embedding node that product `p` would fold, or -1.
int foldable(const Plan& plan, int p) {
    const PlanNode& pn = plan.nodes[p];
    if (!is_op(pn)) return -1;
    const int addends = plain_product_addends(*pn.node->op);
    if (addends < 0 || pn.inputs.size() != 2 + static_cast<std::size_t>(addends)) return -1;
    const int e = pn.inputs[0];
    const PlanNode& en = plan.nodes[e];
    if (!is_op(en) || !is_embedding(*en.node->op) || en.loop != pn.loop) return -1;
    const TypeInfo &w = plan.nodes[pn.inputs[1]].type, &out = pn.type;
    if (w.axis.is_dynamic() || w.shape.rank() < 1) return -1;
    if (addends == 1) {
        const TypeInfo& b = plan.nodes[pn.inputs[2]].type;
        if (b.axis.is_dynamic() || b.shape != out.shape) return -1;
    }
    return e;
}

}  // namespace

void fold_embedding_products(Plan& plan) {
    const int count = static_cast<int>(plan.nodes.size());
    std::vector<int> uses(count, 0);  // readers, and one more per request as an output
    for (const auto& pn : plan.nodes)
        for (int i : pn.inputs) ++uses[i];
    for (int o : plan.outputs) ++uses[o];
    // An embedding folds when every reader is a product that folds it (each reader's own node).
    std::vector<int> folds(count, 0), product_of(count, -1);
    for (int p = 0; p < count; ++p)
        if (const int e = foldable(plan, p); e >= 0) ++folds[e], product_of[p] = e;
    std::vector<bool> folded(count, false);
    bool any = false;
    for (int e = 0; e < count; ++e)
        if (folds[e] > 0 && folds[e] == uses[e]) folded[e] = any = true;
    if (!any) return;

    // The new node of each product: inputs (ids, table, W[, b]), the product's name and type.
    std::vector<Node*> replaced(count, nullptr);  // per new product node: the node it replaces
    for (int p = 0; p < count; ++p) {
        if (product_of[p] < 0 || !folded[product_of[p]]) continue;
        PlanNode& pn = plan.nodes[p];
        const PlanNode& en = plan.nodes[product_of[p]];
        std::vector<int> inputs{en.inputs[0], en.inputs[1]};
        inputs.insert(inputs.end(), pn.inputs.begin() + 1, pn.inputs.end());
        NodePtr fused = make_node(NodeKind::Op, pn.node->name, pn.type);
        fused->op = embedding_product(pn.inputs.size() == 3);
        for (int i : inputs) fused->inputs.push_back(plan.nodes[i].node->shared_from_this());
        plan.keep_alive.push_back(fused);
        replaced[p] = pn.node;
        pn.node = fused.get();
        pn.inputs = std::move(inputs);
    }

    // Drop the embeddings' nodes, and the steps left empty; renumber nodes and loops.
    std::vector<int> moved(count, -1), step_moved(plan.steps.size(), -1);
    std::vector<PlanStep> steps;
    std::vector<PlanNode> nodes;
    std::vector<Node*> replaced_moved;
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        PlanStep step = plan.steps[s];
        std::vector<int> members;
        for (int m : step.members) {
            if (folded[m]) continue;
            moved[m] = static_cast<int>(nodes.size());
            nodes.push_back(plan.nodes[m]);
            replaced_moved.push_back(replaced[m]);
            members.push_back(moved[m]);
        }
        if (members.empty()) continue;
        step_moved[s] = static_cast<int>(steps.size());
        step.members = std::move(members);
        steps.push_back(std::move(step));
    }
    for (auto& pn : nodes)
        if (pn.loop >= 0) pn.loop = step_moved[pn.loop];
    renumber_plan(plan, std::move(nodes), moved, replaced_moved);
    plan.steps = std::move(steps);
}

}  // namespace loom
