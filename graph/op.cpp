#include "graph/op.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace loom {

NodePtr apply_op(std::shared_ptr<const Op> op, std::vector<NodePtr> inputs, std::string name) {
    std::vector<TypeInfo> types;
    types.reserve(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i])
            throw UserError(op->name() + ": input " + std::to_string(i) + " is an empty Variable (never assigned)");
        types.push_back(inputs[i]->type);
    }
    // Built on a placeholder() without a shape: the type waits for compile.
    const bool deferred = std::any_of(types.begin(), types.end(), [](const TypeInfo& t) { return !t.shape_known; });
    if (deferred) {
        auto node = make_node(NodeKind::Op, std::move(name), {Shape{}, Axis::any(), false});
        node->op = std::move(op);
        node->inputs = std::move(inputs);
        return node;
    }
    TypeInfo out = op->infer(types);
    check_shape(out.shape, op->name() + " (operand shapes " + describe_types(types) + ")", true);
    auto node = make_node(NodeKind::Op, std::move(name), std::move(out));
    node->op = std::move(op);
    node->inputs = std::move(inputs);
    return node;
}

std::string describe_types(std::span<const TypeInfo> in) {
    std::string s;
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (i) s += ", ";
        s += in[i].shape.str();
        if (in[i].axis.is_sequence()) s += " (sequence #" + std::to_string(in[i].axis.id) + ")";
        if (in[i].axis.kind == Axis::Kind::Batch) s += " (batch)";
    }
    return s;
}

void shape_error(const std::string& op, std::span<const TypeInfo> in, const std::string& why) {
    throw UserError(op + ": " + why + " (operand shapes " + describe_types(in) + ")");
}

Axis unify_axes(const std::string& op, std::span<const TypeInfo> in) {
    Axis out = Axis::none();
    bool any = false;
    for (const auto& t : in) {
        const Axis& a = t.axis;
        if (a.kind == Axis::Kind::Any) {
            any = true;
        } else if (a.kind == Axis::Kind::Sequence) {
            if (out.kind == Axis::Kind::Sequence && out.id != a.id)
                shape_error(op, in,
                            "operands are on different sequence axes; use sequence::broadcast_as or a sequence "
                            "reduction to move between them");
            out = a;
        } else if (a.kind == Axis::Kind::Batch && out.kind == Axis::Kind::None) {
            out = a;
        }
    }
    // An unbound placeholder may turn out to be a sequence; only a known sequence axis wins.
    if (any && out.kind != Axis::Kind::Sequence) return Axis::any();
    return out;
}

Shape broadcast_shapes(const std::string& op, std::span<const TypeInfo> in) {
    std::size_t rank = 0;
    for (const auto& t : in) rank = std::max(rank, t.shape.rank());
    std::vector<std::size_t> out(rank, 1);
    for (const auto& t : in) {
        const std::size_t off = rank - t.shape.rank();
        for (std::size_t i = 0; i < t.shape.rank(); ++i) {
            const std::size_t d = t.shape[i];
            if (d == out[off + i] || d == 1) continue;
            if (out[off + i] != 1) shape_error(op, in, "shapes cannot be broadcast together");
            out[off + i] = d;
        }
    }
    return Shape(out);
}

std::size_t normalize_axis(const std::string& op, int axis, std::size_t rank) {
    const long a = axis < 0 ? static_cast<long>(rank) + axis : axis;
    if (a < 0 || a >= static_cast<long>(rank))
        throw UserError(op + ": axis " + std::to_string(axis) + " is out of range for a sample of rank " +
                        std::to_string(rank));
    return static_cast<std::size_t>(a);
}

}  // namespace loom
