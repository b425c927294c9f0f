#pragma once
// compile: a pure function from requested outputs to a Plan. The plan is a topological order of
// steps; a step is one node run once over all time steps, or a recurrence loop (a strongly
// connected component, found with Tarjan's algorithm) run one time step at a time. A loop
// r = f(z, element_select(cond, c, delay(r))) is rewritten into one node of the fused scan op.
#include <memory>
#include <unordered_map>
#include <vector>

#include "graph/node.hpp"
#include "graph/variable.hpp"

namespace loom {

struct PlanNode {
    Node* node = nullptr;     // placeholders never appear: inputs are resolved through them
    std::vector<int> inputs;  // plan indices
    TypeInfo type;            // the node's type with every `Any` axis resolved
    int loop = -1;            // index into Plan::steps of its loop, or -1
};

struct PlanStep {
    bool is_loop = false;
    int direction = +1;        // +1: t = 0..T-1 (past_value), -1: t = T-1..0 (future_value)
    std::vector<int> members;  // in evaluation order within a step
};

struct Plan {
    std::vector<PlanNode> nodes;  // in topological order (a loop's members contiguous)
    std::vector<PlanStep> steps;
    std::vector<int> outputs;
    std::unordered_map<const Node*, int> index;
    std::vector<NodePtr> keep_alive;  // the plan keeps its nodes alive

    int find(const Node* n) const {
        auto it = index.find(n);
        return it == index.end() ? -1 : it->second;
    }
};

std::shared_ptr<const Plan> compile(const std::vector<Variable>& outputs);

}  // namespace loom
