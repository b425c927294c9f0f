#pragma once
/// \file
/// weighted_gradients: the gradient of an output weighted by a root gradient (a vector-Jacobian
/// product), what CNTK's Function.backward computes from its root_gradients.
#include <optional>
#include <vector>

#include "core/value.hpp"
#include "graph/evaluate.hpp"
#include "graph/executor.hpp"
#include "graph/variable.hpp"

namespace loom {

/// d(sum over every sequence, step and element of output * weights)/d(each of `wrt`), by one forward
/// and one backward pass: the vector-Jacobian product of `output` with the root gradient `weights`.
/// \param output  the output the root gradient is for
/// \param weights  a Value of output's layout: for a sequence output, sequences of the lengths of
///        the inputs on its sequence axis; for a batch output, N rows; for a static one, a tensor; each
///        sample of output's shape. Another layout is a UserError from binding, naming it.
/// \param inputs  a Value for every input `output` needs
/// \param wrt  the parameters and inputs to differentiate for (as gradients')
/// \param dtype  the element type to compute in (as evaluate's)
/// All-ones weights give gradients(output, inputs, wrt).
ValueMap weighted_gradients(const Variable& output, const Value& weights, const Bindings& inputs,
                            const std::vector<Variable>& wrt, std::optional<DType> dtype = std::nullopt);

}  // namespace loom
