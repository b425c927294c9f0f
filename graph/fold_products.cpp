// compile's folds over a finished plan (graph/fold_products.hpp): an embedding into the products that
// read it, picked rows into the attention that reads them.
#include "graph/fold_products.hpp"

#include <vector>

#include "core/errors.hpp"
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

// Removes the nodes marked `gone` from the plan, and the steps left empty; renumbers nodes and loops.
// replaced[i], where not null, is the node that plan node i (kept) stands for.
void drop_nodes(Plan& plan, const std::vector<bool>& gone, const std::vector<Node*>& replaced) {
    const int count = static_cast<int>(plan.nodes.size());
    std::vector<int> moved(count, -1), step_moved(plan.steps.size(), -1);
    std::vector<PlanStep> steps;
    std::vector<PlanNode> nodes;
    std::vector<Node*> replaced_moved;
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        PlanStep step = plan.steps[s];
        std::vector<int> members;
        for (int m : step.members) {
            if (gone[m]) continue;
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

// Readers of each node, and one more per request as an output.
std::vector<int> uses_of(const Plan& plan) {
    std::vector<int> uses(plan.nodes.size(), 0);
    for (const auto& pn : plan.nodes)
        for (int i : pn.inputs) ++uses[i];
    for (int o : plan.outputs) ++uses[o];
    return uses;
}

}  // namespace

void fold_embedding_products(Plan& plan) {
    const int count = static_cast<int>(plan.nodes.size());
    const std::vector<int> uses = uses_of(plan);
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

    drop_nodes(plan, folded, replaced);
}

void fold_attention_rows(Plan& plan) {
    const int count = static_cast<int>(plan.nodes.size());
    std::vector<int> uses = uses_of(plan);
    std::vector<Node*> replaced(count, nullptr);
    bool any = false;
    for (int a = 0; a < count; ++a) {
        AttentionInPlace in_place = attention_rows_in_place(plan, a);
        if (!in_place.op) continue;
        PlanNode& pn = plan.nodes[a];
        bool one_step = true;  // the picks run where the attention runs (one loop, or none)
        for (int g : in_place.folded) one_step = one_step && plan.nodes[g].loop == pn.loop;
        if (!one_step) continue;
        // The op must find in its new inputs the type it gave before (else it stays as it is).
        std::vector<TypeInfo> types;
        for (int i : in_place.inputs) types.push_back(plan.nodes[i].type);
        try {
            const TypeInfo t = in_place.op->infer(types);
            if (!(t.shape == pn.type.shape && t.axis == pn.type.axis)) continue;
        } catch (const UserError&) {
            continue;
        }
        for (int i : pn.inputs) --uses[i];
        for (int i : in_place.inputs) ++uses[i];
        NodePtr folded = make_node(NodeKind::Op, pn.node->name, pn.type);
        folded->op = std::move(in_place.op);
        for (int i : in_place.inputs) folded->inputs.push_back(plan.nodes[i].node->shared_from_this());
        plan.keep_alive.push_back(folded);
        replaced[a] = pn.node;
        pn.node = folded.get();
        pn.inputs = std::move(in_place.inputs);
        any = true;
    }
    if (!any) return;
    // A picking node no one reads any more leaves the plan (the attention reads its inputs now);
    // picks read by anything else still run for them.
    std::vector<bool> gone(count, false);
    for (int n = count - 1; n >= 0; --n) {
        const PlanNode& pn = plan.nodes[n];
        if (uses[n] > 0 || pn.node->kind != NodeKind::Op || !pn.node->op) continue;
        if (!is_index_select(*pn.node->op)) continue;
        gone[n] = true;
        for (int i : pn.inputs) --uses[i];
    }
    drop_nodes(plan, gone, replaced);
}

}  // namespace loom
