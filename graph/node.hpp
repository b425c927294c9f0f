#pragma once
// Nodes of the symbolic graph. A node is a leaf (input, parameter, constant, placeholder) or the
// output of an op applied to input nodes. Nodes hold no traversal or evaluation state: compile()
// and the executor keep theirs outside.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/shape.hpp"

namespace loom {

class Op;

// The element type a parameter is stored and trained in, and a computation runs in. A parameter is
// f32 or f64 (per parameter, as PyTorch's tensors); `automatic` lets evaluate/gradients choose.
enum class Precision { automatic, f32, f64 };

// The dynamic axes of a value: none, a batch axis, or a batch axis plus one particular sequence
// axis. `Any` is a placeholder's axis before it is bound: it unifies with every other.
struct Axis {
    enum class Kind { None, Batch, Sequence, Any };
    Kind kind = Kind::None;
    std::uint64_t id = 0;  // which sequence axis (Kind::Sequence only)

    static Axis none() { return {}; }
    static Axis batch() { return {Kind::Batch, 0}; }
    static Axis sequence(std::uint64_t id) { return {Kind::Sequence, id}; }
    static Axis any() { return {Kind::Any, 0}; }
    static std::uint64_t new_sequence_id();

    bool is_sequence() const { return kind == Kind::Sequence; }
    bool is_dynamic() const { return kind == Kind::Batch || kind == Kind::Sequence; }
    bool operator==(const Axis&) const = default;
    std::string str() const;
};

// The static type of a node: sample shape and dynamic axes. `shape_known` is false for a
// placeholder() made without a shape and for what is built on it, until compile infers it.
struct TypeInfo {
    Shape shape;
    Axis axis;
    bool shape_known = true;
};

enum class NodeKind { Input, Parameter, Constant, Placeholder, Op };

struct Node : std::enable_shared_from_this<Node> {
    NodeKind kind = NodeKind::Op;
    std::uint64_t id = 0;  // unique and increasing: creation order
    std::string name;
    TypeInfo type;

    std::shared_ptr<const Op> op;               // Kind::Op
    std::vector<std::shared_ptr<Node>> inputs;  // Kind::Op

    // Kind::Placeholder: what replace_placeholders bound it to. A binding that closes a loop is
    // weak, so the graph holds no reference cycle (the loop's output keeps the loop alive); any
    // other binding is strong, so binding to a temporary input works.
    std::weak_ptr<Node> bound;
    std::shared_ptr<Node> bound_strong;
    bool is_bound = false;

    // Kind::Parameter: the current value, in the parameter's precision: exactly one of the two is
    // set. Kind::Constant: its value.
    std::shared_ptr<xt::xarray<float>> parameter_value;
    std::shared_ptr<xt::xarray<double>> parameter_value_f64;
    xt::xarray<double> constant_value;

    std::string label() const;  // "times 'zq' (#12)"
};

using NodePtr = std::shared_ptr<Node>;

// Follows a placeholder to what it was bound to (through chains); other nodes are returned as is.
// Returns nullptr for a placeholder that is not bound (or whose binding no longer exists).
Node* resolve(Node* n);

// Monotonic counter bumped whenever the graph is rewired, so cached plans can be invalidated.
std::uint64_t graph_generation();
void bump_graph_generation();

NodePtr make_node(NodeKind kind, std::string name, TypeInfo type);

}  // namespace loom
