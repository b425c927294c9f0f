#pragma once
/// \file
/// compile: from requested outputs to a Plan. The plan is a topological order of
/// steps; a step is one node run once over all time steps, or a recurrence loop (a strongly
/// connected component, found with Tarjan's algorithm) run one time step at a time. A loop
/// r = f(z, element_select(cond, c, delay(r))) is rewritten into one node of the fused scan op.
#include <memory>
#include <unordered_map>
#include <vector>

#include "graph/node.hpp"
#include "graph/variable.hpp"

namespace loom {

/// One node of a Plan.
struct PlanNode {
    Node* node = nullptr;     ///< the graph's node     ///< placeholders never appear: inputs are resolved through them
    std::vector<int> inputs;  ///< plan indices
    TypeInfo type;            ///< the node's type with every `Any` axis resolved
    int loop = -1;            ///< index into Plan::steps of its loop, or -1
};

/// One step of a Plan: a node run once over all time steps, or a loop run one time step at a time.
struct PlanStep {
    bool is_loop = false;      ///< a loop (several members, or one reading its own past)
    int direction = +1;        ///< +1: t = 0..T-1 (past_value), -1: t = T-1..0 (future_value)
    std::vector<int> members;  ///< in evaluation order within a step
};

/// What compile makes of a graph: its nodes in order, with types resolved, and the steps to run.
struct Plan {
    std::vector<PlanNode> nodes;                 ///< in topological order (a loop's members contiguous)
    std::vector<PlanStep> steps;                 ///< in the order they run forward
    std::vector<int> outputs;                    ///< the plan index of each requested output
    std::unordered_map<const Node*, int> index;  ///< plan index of each node (find() reads it)
    std::vector<NodePtr> keep_alive;             ///< the plan keeps its nodes alive

    /// \return n's plan index, or -1 when the plan does not hold it.
    int find(const Node* n) const {
        auto it = index.find(n);
        return it == index.end() ? -1 : it->second;
    }
};

/// The plan that computes `outputs`. Throws a UserError naming the node for a graph that cannot run
/// (an unbound placeholder, a loop without a delay, a shape it cannot infer). Each call builds a new
/// plan and nothing is kept: the plan lives as long as its holder (a Session, or one evaluate call)
/// and keeps its nodes, parameters included, alive only that long. Compiling also writes the sample
/// shapes it inferred into the nodes built on placeholder().
std::shared_ptr<const Plan> compile(const std::vector<Variable>& outputs);

/// For compile's rewrite passes (fuse_scans, fold_embedding_products, fold_attention_rows): `nodes`
/// become the plan's nodes, their inputs, the plan's outputs and `plan.index` mapped through `moved`
/// (old index -> new; -1: gone, and so is its node's entry); `replaced[i]`, where not null, is the
/// node new node i stands for (found at i from then on, through every later pass).
void renumber_plan(Plan& plan, std::vector<PlanNode> nodes, const std::vector<int>& moved,
                   const std::vector<Node*>& replaced);

}  // namespace loom
