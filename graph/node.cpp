#include "graph/node.hpp"

#include <atomic>

#include "graph/op.hpp"

namespace loom {

namespace {
std::atomic<std::uint64_t> next_node_id{1};
std::atomic<std::uint64_t> next_axis_id{1};
}  // namespace

std::uint64_t Axis::new_sequence_id() { return next_axis_id++; }

std::string Axis::str() const {
    switch (kind) {
        case Kind::None:
            return "no dynamic axis";
        case Kind::Batch:
            return "batch axis";
        case Kind::Sequence:
            return "sequence axis #" + std::to_string(id);
        case Kind::Any:
            return "unbound axis";
    }
    return "?";
}

std::string Node::label() const {
    std::string what;
    switch (kind) {
        case NodeKind::Input:
            what = "input";
            break;
        case NodeKind::Parameter:
            what = "parameter";
            break;
        case NodeKind::Constant:
            what = "constant";
            break;
        case NodeKind::Placeholder:
            what = "placeholder";
            break;
        case NodeKind::Op:
            what = op ? op->name() : "op";
            break;
    }
    if (!name.empty()) what += " '" + name + "'";
    return what + " (#" + std::to_string(id) + ")";
}

Node* resolve(Node* n) {
    for (int hops = 0; n && n->kind == NodeKind::Placeholder; ++hops) {
        if (!n->is_bound || hops > 1000) return nullptr;
        auto target = n->bound.lock();
        if (!target) return nullptr;
        n = target.get();
    }
    return n;
}

NodePtr make_node(NodeKind kind, std::string name, TypeInfo type) {
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->id = next_node_id++;
    n->name = std::move(name);
    n->type = std::move(type);
    if (kind != NodeKind::Op) check_shape(n->type.shape, n->label());  // apply_op checks an op's result
    return n;
}

}  // namespace loom
