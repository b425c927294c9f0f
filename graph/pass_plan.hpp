#pragma once
// What a forward or backward pass does with memory, derived from the Plan, the kind of pass and the
// set of nodes differentiated for alone: which steps wait for which, which gradients exist and
// outlive the pass, which are kept by rows or share a buffer, and per plan step and direction the
// buffers to take, zero or leave for an op to write, hand over and free and the gradients that
// become final, a loop's roles when it runs in segments and how far ahead of its reverse sweep its
// gradients are zeroed included. Pure functions of their arguments, computed once per plan, kind and
// wrt set. The executor, the step runner and the buffers replay what it says, and decide at run time
// only what the run-time sizes decide: a loop's segments under a memory budget (from its lengths),
// whether a gradient planned to share its consumer's buffer does (their shapes agree), and the
// counting of a parallel schedule.
#include <cstdint>
#include <string>
#include <utility>
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

// A loop's members when it runs in segments under a memory budget (square-root checkpointing,
// graph/step_segments.cpp): kept whole (read whole outside the loop or by its bulk gradients, or
// drawn at random), carried (a delay reads it: its rows at each segment's start are saved), and
// the rows before a segment its delays read.
struct LoopRoles {
    std::vector<char> full_value, full_grad, carried;  // per member
    std::size_t history = 0;
    int reads_time = -1;  // a member reading sequence positions other than a delay: no segments
    // How many steps ahead of the reverse sweep a member's gradient slice must be zeroed: the
    // delays' reach (a delay at step t adds into step t -+ d); everything, when a member reads time.
    std::size_t zero_reach = 0;
};

// The length of a loop's segments under `budget` bytes, from its roles and its run-time sizes.
struct SegmentSizes {
    bool segmented = false;  // false: the plain run fits the budget (or there is none)
    std::size_t length = 0, count = 0;
    std::size_t plain_bytes = 0;  // the loop's values and gradients whole
    std::size_t least_bytes = 0;  // with segments of `length` steps
    std::size_t whole_bytes = 0;  // of them, the members kept whole
};
// `row`: elements per time step of each member; `grad`: whether it gets a gradient.
SegmentSizes size_segments(const LoopRoles& roles, const std::vector<std::size_t>& row, const std::vector<char>& grad,
                           std::size_t steps, std::size_t budget, std::size_t element_bytes);

// One pass over a plan (see the file's comment).
struct PassSchedule {
    // forward_only: no backward follows (a session that scores): a value is freed once its last
    // reader ran, a loop's inner values once the loop is done, only the outputs are kept. training:
    // every forward is followed by backward for wrt: values no backward step reads are freed during
    // forward. keep_all: forward frees nothing; backward for wrt is planned when it is asked for.
    enum class Kind { keep_all, forward_only, training };
    Kind kind = Kind::keep_all;
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
    // Values some backward step reads, and per node how many steps other than its own read it in
    // forward.
    std::vector<char> value_needed;
    std::vector<int> readers;

    // Forward, after plan step s ran: each value steps.step_inputs[s] names has one reader fewer,
    // and is freed when none is left if free_when_read says so and it is not held. A value is held
    // for the backward of a loop that ran in segments: hold_if_segmented[s] lists (value, loop step)
    // pairs, the value held when that loop's last forward ran in segments (the loop recomputes from
    // its inputs; a dropout mask made inside it is copied back, not drawn again). free_own[s]: the
    // step's members no other step reads, freed at once.
    std::vector<char> free_when_read;
    std::vector<std::vector<std::pair<int, int>>> hold_if_segmented;
    std::vector<std::vector<int>> free_own;

    // Backward of plan step s, in this order: a node's step takes `take` (gradients zeroed) and
    // `write` (unzeroed: the op writes them whole, its inputs at the bits of `assign`, see
    // OpCall::assign_grad); a loop's takes `take_unzeroed` (its sweep zeroes each slice just ahead
    // of itself), or when it ran in segments `take` (the members kept whole), and takes
    // `take_after` (its inputs from outside the loop) before their bulk products. Each gradient is
    // taken by the first step in backward's order that adds into it, and listed there only. Then
    // hand_over (consumer, addend): the consumer's gradient buffer, lent to the addend, becomes the
    // addend's; free_grad and free_value go back to the pool; `final` are the wrt nodes whose
    // gradients no later step adds into: finished and reported.
    struct Backward {
        std::vector<int> take, write, take_unzeroed, take_after, free_grad, free_value, final;
        std::uint32_t assign = 0;
        std::vector<std::pair<int, int>> hand_over;
    };
    std::vector<Backward> backward;  // per plan step
    std::vector<LoopRoles> loops;    // per plan step (empty for a node)
};
PassSchedule plan_pass(const Plan& plan, const StepGraph& steps, PassSchedule::Kind kind,
                       const std::vector<int>& wrt = {});

}  // namespace loom
