#pragma once
/// \file
/// Nodes of the symbolic graph. A node is a leaf (input, parameter, constant, placeholder) or the
/// output of an op applied to input nodes. Nodes hold no traversal or evaluation state: compile()
/// and the executor keep theirs outside.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/shape.hpp"
#include "core/value.hpp"

namespace loom {

class Op;

/// \deprecated The name earlier releases gave DType (the element type a parameter is stored in and a
/// graph runs in): write DType (the same type).
using Precision = DType;

/// A parameter's storage in its element type T, shared by every handle on it.
template <class T>
using SharedArray = std::shared_ptr<xt::xarray<T>>;

/// The dynamic axes of a value: none, a batch axis, or a batch axis plus one particular sequence
/// axis. `Any` is a placeholder's axis before it is bound: it unifies with every other.
struct Axis {
    /// Which dynamic axes (above).
    enum class Kind { None, Batch, Sequence, Any };
    Kind kind = Kind::None;  ///< which dynamic axes
    std::uint64_t id = 0;    ///< which sequence axis (Kind::Sequence only)

    /// \return no dynamic axis (a static value).
    static Axis none() { return {}; }
    /// \return a batch axis only.
    static Axis batch() { return {Kind::Batch, 0}; }
    /// \return a batch axis and the sequence axis `id` (new_sequence_id() makes a new one).
    static Axis sequence(std::uint64_t id) { return {Kind::Sequence, id}; }
    /// \return a placeholder's axis before it is bound.
    static Axis any() { return {Kind::Any, 0}; }
    /// \return an id no sequence axis has had yet.
    static std::uint64_t new_sequence_id();

    /// \return whether this is a sequence axis.
    bool is_sequence() const { return kind == Kind::Sequence; }
    /// \return whether there is a batch axis (with or without a sequence axis).
    bool is_dynamic() const { return kind == Kind::Batch || kind == Kind::Sequence; }
    /// Equal when the kinds and the sequence ids are.
    bool operator==(const Axis&) const = default;
    /// \return the axis as text, for messages.
    std::string str() const;
};

/// The static type of a node: sample shape and dynamic axes. `shape_known` is false for a
/// placeholder() made without a shape and for what is built on it, until compile infers it.
struct TypeInfo {
    Shape shape;              ///< the sample shape (without the dynamic axes)
    Axis axis;                ///< the dynamic axes
    bool shape_known = true;  ///< false while `shape` is not known yet (above)
};

/// What a node is: a leaf of one of four kinds, or an op applied to input nodes.
enum class NodeKind { Input, Parameter, Constant, Placeholder, Op };

/// A node of the graph (a Variable is a handle to one). Nodes hold no evaluation state; what they
/// hold is read by compile and the executor.
struct Node : std::enable_shared_from_this<Node> {
    NodeKind kind = NodeKind::Op;  ///< leaf kind, or an op
    std::uint64_t id = 0;          ///< unique and increasing: creation order
    std::string name;              ///< the user's name (may be empty), shown in messages
    TypeInfo type;                 ///< the static type, set when the node is built

    std::shared_ptr<const Op> op;               ///< Kind::Op
    std::vector<std::shared_ptr<Node>> inputs;  ///< Kind::Op

    /// Kind::Placeholder: what replace_placeholders bound it to. A binding that closes a loop is
    /// weak, so the graph holds no reference cycle (the loop's output keeps the loop alive); any
    /// other binding is strong, so binding to a temporary input works.
    std::weak_ptr<Node> bound;
    std::shared_ptr<Node> bound_strong;  ///< set (with `bound`) unless the binding closes a loop
    bool is_bound = false;               ///< whether replace_placeholders bound it

    /// Kind::Parameter: the current value, in the parameter's precision (null for other kinds).
    ByDType<SharedArray> parameter_value;
    xt::xarray<double> constant_value;  ///< Kind::Constant: its value

    /// \return Kind::Parameter: the value when it is stored in T, else nullptr.
    template <class T>
    xt::xarray<T>* parameter_as() const {
        const auto* held = std::get_if<SharedArray<T>>(&parameter_value);
        return held ? held->get() : nullptr;
    }

    std::string label() const;  ///< "times 'zq' (#12)"
};

/// The owning handle to a node: inputs own their producers.
using NodePtr = std::shared_ptr<Node>;

/// Follows a placeholder to what it was bound to (through chains); other nodes are returned as is.
/// Returns nullptr for a placeholder that is not bound (or whose binding no longer exists).
Node* resolve(Node* n);

/// \return a new node with a fresh id and no inputs; a leaf's shape is checked (check_shape). The
/// graph's builders call it (input_variable, parameter, apply_op, ...).
NodePtr make_node(NodeKind kind, std::string name, TypeInfo type);

}  // namespace loom
