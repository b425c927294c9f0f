// A rewrite pass over a compiled plan: loops that are one element-wise recurrence become one node.
#pragma once

#include "graph/compile.hpp"

namespace loom {

/// Rewrites every loop of `plan` of the form r = f(z, element_select(cond, c, delay(r, init))) (f a
/// differentiable element-wise binary op, a delay of one step, the select and the delay read by
/// nothing else, operands that fit the scan kernels) into one node of the fused scan op, with
/// inputs (z, cond, c, init): such a loop then runs as one scan over time instead of step by step.
/// The loop's step stays, as a plain step, so step indices keep their meaning; `plan.index` maps
/// r's node to the new node. compile runs it last; a plan it leaves alone is unchanged.
void fuse_scans(Plan& plan);

}  // namespace loom
