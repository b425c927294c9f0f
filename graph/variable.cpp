#include "graph/variable.hpp"

#include <algorithm>
#include <unordered_set>

#include "core/errors.hpp"
#include "core/finite.hpp"
#include "graph/compile.hpp"
#include "graph/op.hpp"

namespace loom {

namespace {
// A Variable holds a NodePtr (shared_ptr<Node>): a const handle still reaches a mutable node.
Node& checked(const NodePtr& n) {
    if (!n) throw UserError("use of an empty Variable (default-constructed, never assigned)");
    return *n;
}

// Is `target` reachable from `from` (following inputs and bound placeholders)?
bool reaches(Node* from, const Node* target) {
    std::vector<Node*> stack{from};
    std::unordered_set<Node*> seen;
    while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        if (n == target) return true;
        if (!n || !seen.insert(n).second) continue;
        if (n->kind == NodeKind::Placeholder) {
            if (n->is_bound) stack.push_back(n->bound.lock().get());
            continue;
        }
        for (auto& in : n->inputs) stack.push_back(in.get());
    }
    return false;
}

NodePtr constant_node(xt::xarray<double> value, std::string name) {
    Shape shape(std::vector<std::size_t>(value.shape().begin(), value.shape().end()));
    auto n = make_node(NodeKind::Constant, std::move(name), {shape, Axis::none()});
    n->constant_value = std::move(value);
    return n;
}
}  // namespace

Variable::Variable(double scalar) : node_(constant_node(xt::xarray<double>(scalar), {})) {}

const Shape& Variable::shape() const {
    const Node& n = checked(node_);
    if (n.type.shape_known) return n.type.shape;
    // Built on a placeholder() without a shape: compile infers it (and writes it into the nodes)
    // once the loop is closed.
    try {
        (void)compile({*this});
    } catch (const UserError& e) {
        throw UserError(n.label() + " has no shape yet: it is built on a placeholder() without a shape, whose shape " +
                        "compile infers once the loop is closed with replace_placeholders; give the placeholder a " +
                        "shape (placeholder(shape)) to use it before. compile says: " + e.what());
    }
    return n.type.shape;
}
const Axis& Variable::axis() const { return checked(node_).type.axis; }
const std::string& Variable::name() const { return checked(node_).name; }
bool Variable::is_placeholder() const { return checked(node_).kind == NodeKind::Placeholder; }
bool Variable::is_parameter() const { return checked(node_).kind == NodeKind::Parameter; }
bool Variable::is_input() const { return checked(node_).kind == NodeKind::Input; }
std::string Variable::label() const { return checked(node_).label(); }

Variable Variable::replace_placeholders(const std::vector<std::pair<Variable, Variable>>& map) const {
    checked(node_);
    for (const auto& [ph, target] : map) {
        Node& p = checked(ph.node());
        const Node& t = checked(target.node());
        if (p.kind != NodeKind::Placeholder)
            throw UserError("replace_placeholders: " + p.label() + " is not a placeholder");
        if (p.is_bound) throw UserError("replace_placeholders: " + p.label() + " is already bound");
        // A chain of placeholders that leads back to p would be a loop with no op in it.
        if (&t == &p)
            throw UserError("replace_placeholders: " + p.label() +
                            " cannot be bound to itself; bind it to the op output that closes the loop");
        for (const Node* n = &t; n && n->kind == NodeKind::Placeholder && n->is_bound;) {
            const auto next = n->bound.lock();
            if (next.get() == &p)
                throw UserError("replace_placeholders: binding " + p.label() + " to " + t.label() +
                                " would close a cycle of placeholders bound to each other, with no op in between");
            n = next.get();
        }
        if (!p.type.shape_known) {
            if (t.type.shape_known) p.type = {t.type.shape, Axis::any()};  // inferred from its target
        } else if (t.type.shape_known && t.type.shape != p.type.shape)
            throw UserError("replace_placeholders: " + p.label() + " has shape " + p.type.shape.str() + " but " +
                            t.label() + " has shape " + t.type.shape.str());
        if (p.type.axis.kind != Axis::Kind::Any && t.type.axis.kind != Axis::Kind::Any && !(p.type.axis == t.type.axis))
            throw UserError("replace_placeholders: " + p.label() + " is on the " + p.type.axis.str() + " but " +
                            t.label() + " is on the " + t.type.axis.str());
        p.bound = target.node();
        p.is_bound = true;
        if (!reaches(target.node().get(), &p)) p.bound_strong = target.node();
    }
    return *this;
}

Parameter::Parameter(NodePtr node) : Variable(std::move(node)) {
    if (node_ && node_->kind != NodeKind::Parameter)
        throw UserError("Parameter: " + node_->label() + " is not a parameter");
}

DType Parameter::dtype() const { return dtype_held(checked(node_).parameter_value); }

template <class T>
xt::xarray<T> Parameter::value() const {
    return std::visit([](const auto& v) { return xt::xarray<T>(xt::cast<T>(*v)); }, checked(node_).parameter_value);
}

namespace {
template <class T, class S>
void assign_value(const Parameter& p, xt::xarray<T>& cur, const xt::xarray<S>& v) {
    if (!std::equal(v.shape().begin(), v.shape().end(), cur.shape().begin(), cur.shape().end()))
        throw UserError("Parameter::set_value: " + p.label() + " has shape " + p.shape().str() +
                        ", got a value of shape " +
                        Shape(std::vector<std::size_t>(v.shape().begin(), v.shape().end())).str());
    if constexpr (std::is_same_v<T, float> && std::is_same_v<S, double>)
        if (const std::string bad = first_beyond_float({v.data(), v.size()}); !bad.empty())
            throw UserError("Parameter::set_value: " + p.label() + " " + p.shape().str() + " is given " + bad +
                            beyond_float_reason);
    std::transform(v.begin(), v.end(), cur.begin(), [](S x) { return static_cast<T>(x); });
}
}  // namespace

void Parameter::set_value(const xt::xarray<float>& v) const {
    std::visit([&](const auto& cur) { assign_value(*this, *cur, v); }, checked(node_).parameter_value);
}

void Parameter::set_value_f64(const xt::xarray<double>& v) const {
    std::visit([&](const auto& cur) { assign_value(*this, *cur, v); }, checked(node_).parameter_value);
}

template <class T>
xt::xarray<T>& Parameter::data() const {
    if (xt::xarray<T>* own = checked(node_).parameter_as<T>()) return *own;
    throw UserError("Parameter::data<" + std::string(std::is_same_v<T, double> ? "double" : "float") + ">: " + label() +
                    " is stored in " + precision_name(dtype()) + "; read it as data<" + precision_name(dtype()) +
                    ">(), or convert it with to_precision");
}

template xt::xarray<float> Parameter::value<float>() const;
template xt::xarray<double> Parameter::value<double>() const;
template xt::xarray<float>& Parameter::data<float>() const;
template xt::xarray<double>& Parameter::data<double>() const;

std::string precision_name(DType p) { return p == DType::f64 ? "double" : "float"; }

void to_precision(const std::vector<Parameter>& parameters, DType precision) {
    for (const auto& p : parameters) {
        Node& n = checked(p.node());
        if (n.kind != NodeKind::Parameter) throw UserError("to_precision: " + n.label() + " is not a parameter");
        if (p.dtype() == precision) continue;
        if (precision == DType::f64)
            n.parameter_value = std::make_shared<xt::xarray<double>>(xt::cast<double>(*n.parameter_as<float>()));
        else
            n.parameter_value = std::make_shared<xt::xarray<float>>(xt::cast<float>(*n.parameter_as<double>()));
    }
}

namespace {

// An input's node: its any_size dimensions are checked as 1, then kept as 0 (a run-time size).
NodePtr input_node(const Shape& shape, const std::string& name, Axis axis) {
    std::vector<std::size_t> checked(shape.begin(), shape.end()), stored = checked;
    for (std::size_t k = 0; k < checked.size(); ++k)
        if (checked[k] == any_size) checked[k] = 1, stored[k] = 0;
    NodePtr n = make_node(NodeKind::Input, name, {Shape(checked), axis});
    n->type.shape = Shape(stored);
    return n;
}

}  // namespace

Variable input_variable(const Shape& shape, const std::string& name) {
    return Variable(input_node(shape, name, Axis::batch()));
}

Variable static_input_variable(const Shape& shape, const std::string& name) {
    return Variable(input_node(shape, name, Axis::none()));
}

Parameter parameter(const Shape& shape, const Initializer& init, const std::string& name, DType precision) {
    auto n = make_node(NodeKind::Parameter, name, {shape, Axis::none()});
    xt::xarray<double> v = init(shape, global_rng());
    if (precision == DType::f64)
        n->parameter_value = std::make_shared<xt::xarray<double>>(std::move(v));
    else
        n->parameter_value = std::make_shared<xt::xarray<float>>(xt::cast<float>(v));
    return Parameter(n);
}

Parameter parameter(const xt::xarray<float>& value, const std::string& name) {
    Shape shape(std::vector<std::size_t>(value.shape().begin(), value.shape().end()));
    auto n = make_node(NodeKind::Parameter, name, {shape, Axis::none()});
    n->parameter_value = std::make_shared<xt::xarray<float>>(value);
    return Parameter(n);
}

Variable constant(double value, const std::string& name) {
    return Variable(constant_node(xt::xarray<double>(value), name));
}

Variable constant(const xt::xarray<double>& value, const std::string& name) {
    return Variable(constant_node(value, name));
}

Variable placeholder(const Shape& shape, const std::string& name) {
    return Variable(make_node(NodeKind::Placeholder, name, {shape, Axis::any()}));
}

Variable placeholder() { return Variable(make_node(NodeKind::Placeholder, {}, {Shape{}, Axis::any(), false})); }

namespace sequence {
Variable input_variable(const Shape& shape, const std::string& name) {
    return Variable(input_node(shape, name, Axis::sequence(Axis::new_sequence_id())));
}
Variable input_variable(const Shape& shape, const std::string& name, const SequenceAxis& axis) {
    return Variable(input_node(shape, name, Axis::sequence(axis.id())));
}
}  // namespace sequence

std::size_t parameter_count(const std::vector<Parameter>& parameters) {
    std::size_t count = 0;
    for (const Parameter& p : parameters) count += p.shape().size();
    return count;
}

namespace {

// The nodes `outputs` depend on, through bound placeholders to what they are bound to, for which
// keep(node) holds, in the order they were made.
template <class Keep>
std::vector<Variable> nodes_of(const std::vector<Variable>& outputs, Keep keep) {
    std::vector<Node*> stack;
    for (auto& v : outputs) stack.push_back(v.node().get());
    std::unordered_set<Node*> seen;
    std::vector<NodePtr> found;
    while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        if (!n || !seen.insert(n).second) continue;
        if (keep(*n)) found.push_back(n->shared_from_this());
        if (n->kind == NodeKind::Placeholder && n->is_bound) stack.push_back(n->bound.lock().get());
        for (auto& in : n->inputs) stack.push_back(in.get());
    }
    std::sort(found.begin(), found.end(), [](auto& a, auto& b) { return a->id < b->id; });
    std::vector<Variable> out;
    for (auto& n : found) out.emplace_back(n);
    return out;
}

}  // namespace

std::vector<Variable> leaves_of(const std::vector<Variable>& outputs) {
    return nodes_of(
        outputs, [](const Node& n) { return n.kind == NodeKind::Placeholder ? !n.is_bound : n.kind != NodeKind::Op; });
}

std::vector<Variable> find_all_with_name(const std::vector<Variable>& outputs, const std::string& name) {
    return nodes_of(outputs, [&](const Node& n) { return n.name == name; });
}

std::vector<Parameter> parameters_of(const std::vector<Variable>& outputs) {
    std::vector<Parameter> out;
    for (const Variable& v : leaves_of(outputs))
        if (v.is_parameter()) out.emplace_back(v.node());
    return out;
}

}  // namespace loom
