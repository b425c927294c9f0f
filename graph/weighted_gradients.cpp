#include "graph/weighted_gradients.hpp"

#include <string>

#include "core/errors.hpp"
#include "graph/node.hpp"
#include "graph/ops.hpp"

namespace loom {

ValueMap weighted_gradients(const Variable& output, const Value& weights, const Bindings& inputs,
                            const std::vector<Variable>& wrt, std::optional<DType> dtype) {
    const Axis axis = output.axis();
    if (axis.kind == Axis::Kind::Any)
        throw UserError("weighted_gradients: " + output.label() +
                        " is on no known dynamic axis yet (built on a placeholder not bound)");
    if (inputs.count(output))
        throw UserError("weighted_gradients: the output " + output.label() + " is one of the inputs bound");
    // An input on the output's own dynamic axes, of its sample shape: binding checks the weights'
    // layout against the output's (the lengths of its sequence axis, the batch size).
    const Variable root(make_node(NodeKind::Input, "root gradient of " + output.label(), {output.shape(), axis}));
    Bindings bound = inputs;
    bound.emplace(root, weights);
    return gradients(element_times(output, root), bound, wrt, dtype);
}

}  // namespace loom
