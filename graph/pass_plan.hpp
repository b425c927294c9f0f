#pragma once
// What a forward or backward pass does, derived from the Plan (and the set of nodes differentiated
// for) alone: which steps wait for which, which gradients exist and outlive the pass, which
// gradients are kept by rows, which share a buffer, which values backward reads. Pure functions of
// their arguments, computed once per plan and wrt set; the executor only runs what they say.
#include <vector>

#include "core/parallel.hpp"
#include "graph/compile.hpp"

namespace loom {

// The plan's steps as tasks. Forward task s is plan step s and waits for the steps producing its
// inputs. Backward task k is plan step (last - k): it waits for the steps consuming its outputs,
// and steps adding into the same input's gradient run in reverse plan order, as serially, so that
// results do not depend on the schedule.
struct StepGraph {
    std::vector<int> step_of;                   // per node: the plan step it runs in
    std::vector<std::vector<int>> step_inputs;  // per step: the nodes of other steps it reads, once each
    TaskGraph forward, backward;
};
StepGraph plan_steps(const Plan& plan);

// One backward pass for `wrt` (plan indices of the nodes differentiated for), and what the forward
// before it may free.
struct BackwardPlan {
    std::vector<int> wrt;
    std::vector<char> is_output, is_wrt;
    // Nodes on a path from a wrt node to an output: their gradients exist during the pass.
    std::vector<char> needs_grad;
    // Gradients that outlive the pass (outputs' and wrt's); values that do (those and the leaves').
    std::vector<char> keep_grad, keep_value;
    // A parameter matrix whose every consumer adds into its gradient by whole rows, outside loops
    // (an embedding table): its gradient is a RowGradient, the dense table gradient is never made.
    std::vector<char> by_rows;
    // An input whose one consumer passes its gradient through (an affine's addend, e.g. an LSTM's
    // input projection) shares that consumer's gradient buffer: alias_of[j] = the consumer, or -1.
    std::vector<int> alias_of;
    // Values some backward step reads (the rest are freed during forward once their readers ran),
    // and per node how many steps other than its own read it in forward.
    std::vector<char> value_needed;
    std::vector<int> readers;
};
BackwardPlan plan_backward(const Plan& plan, const StepGraph& steps, const std::vector<int>& wrt);

}  // namespace loom
