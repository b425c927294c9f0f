#pragma once
/// \file
/// Variable: the user's handle on a graph node. Cheap to copy; equality is node identity.
#include <concepts>
#include <functional>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/random.hpp"
#include "core/shape.hpp"
#include "graph/node.hpp"

namespace loom {

/// A handle to a node of the graph: an input, a parameter, a constant, a placeholder or an op's
/// output. Every accessor but node() and operator bool throws a UserError on an empty Variable.
///
/// A Variable is to its node what a `const std::shared_ptr<Node>` is to a `Node`: const on the
/// handle says the handle keeps pointing at the same node, not that the graph cannot change.
/// Calls that change the graph (replace_placeholders, Parameter::set_value, to_precision) are
/// const members or take const handles, and every handle on the node (copies included) sees the
/// change; no Variable ever holds a pointer to a const node.
class Variable {
public:
    /// An empty handle (operator bool is false).
    Variable() = default;
    /// A handle to `node`.
    explicit Variable(NodePtr node) : node_(std::move(node)) {}
    /// A scalar constant: a number where a Variable is expected becomes one (x * 2.0).
    Variable(double scalar);  // NOLINT: a number where a Variable is expected becomes a constant

    /// \return the sample shape (without the dynamic axes). Cheap: the node's own type, which
    /// apply_op inferred when the node was built; nothing is compiled. Only a node built on a
    /// placeholder() without a shape has none yet: then shape() compiles the graph it depends on
    /// (compile infers the loop's shapes and writes them into its nodes, so each node's later calls
    /// read them), and while the loop is still open it throws a UserError with compile's reason.
    const Shape& shape() const;
    /// \return the dynamic axes.
    const Axis& axis() const;
    /// \return the name given when the node was made (may be empty).
    const std::string& name() const;
    /// \return whether the node is a placeholder.
    bool is_placeholder() const;
    /// \return whether the node is a parameter.
    bool is_parameter() const;
    /// \return whether the node is an input.
    bool is_input() const;
    /// \return the node's description for messages: its kind or op, its name and its id.
    std::string label() const;

    /// Binds the placeholders in `map` (keys) to their values, closing loops; returns *this. A
    /// UserError for a key that is no placeholder or is already bound, a binding to itself or into a
    /// cycle of placeholders, or a shape or sequence axis that differs from the placeholder's.
    ///
    /// Const because it changes no handle, *this included: it rewires the placeholders' nodes, which
    /// every handle on them shares (see the class comment), as a `const shared_ptr<T>` reaches a
    /// non-const T. *this is returned as CNTK's `h.replace_placeholders({{p, h}})` returns the loop.
    Variable replace_placeholders(const std::vector<std::pair<Variable, Variable>>& map) const;

    /// \return the node (null for an empty handle).
    const NodePtr& node() const { return node_; }
    /// \return whether the handle holds a node.
    explicit operator bool() const { return node_ != nullptr; }
    /// Equal when both handle the same node.
    bool operator==(const Variable& o) const { return node_ == o.node_; }

protected:
    NodePtr node_;  ///< the node handled (null when empty)
};

/// A learnable tensor with no dynamic axis. Its value lives with the node, shared by every copy, in
/// the parameter's precision: float (the default) or double (`parameter(..., DType::f64)`,
/// `to_precision`). Sessions, learners and checkpoints follow it.
class Parameter : public Variable {
public:
    /// An empty handle.
    Parameter() = default;
    /// A handle to `node`, which must be a parameter's (else a UserError).
    explicit Parameter(NodePtr node);
    /// \return the element type the value is stored in: f32 or f64.
    DType dtype() const;
    /// \deprecated The name earlier releases gave dtype(): use dtype() (the same value).
    DType precision() const { return dtype(); }
    /// A copy of the value as T: value() of a double parameter rounds each element to float.
    template <class T = float>
    xt::xarray<T> value() const;
    /// @{
    /// Sets the value (of the parameter's shape, else a UserError), stored in the parameter's
    /// precision: a double value rounds to a float parameter's, and one beyond float's range there
    /// is a UserError naming the parameter, the value and its element (nothing is changed). The
    /// double overload is a template so that float expressions and braced lists still choose the
    /// float one.
    void set_value(const xt::xarray<float>& v) const;
    template <class T>
    requires std::same_as<T, double>
    void set_value(const xt::xarray<T>& v) const { set_value_f64(v); }
    /// @}
    /// Direct access to the stored values, for learners: T must be the parameter's precision (else a
    /// UserError naming it).
    template <class T = float>
    xt::xarray<T>& data() const;

private:
    void set_value_f64(const xt::xarray<double>& v) const;
};

/// @cond
extern template xt::xarray<float> Parameter::value<float>() const;
extern template xt::xarray<double> Parameter::value<double>() const;
extern template xt::xarray<float>& Parameter::data<float>() const;
extern template xt::xarray<double>& Parameter::data<double>() const;
/// @endcond

std::string precision_name(DType p);  ///< "float" or "double"
/// Converts each parameter's storage to `precision` in place, for every handle on it (as PyTorch's
/// module.double()): float to double is exact, double to float rounds. Sessions (and Trainers) made
/// before follow at their next forward; learners convert their state at their next update.
void to_precision(const std::vector<Parameter>& parameters, DType precision);

/// Hashes a Variable by its node's address (equal handles hash equal), for unordered containers.
struct VariableHash {
    /// \return the hash of `v`'s node address.
    std::size_t operator()(const Variable& v) const { return std::hash<const void*>()(v.node().get()); }
};

/// A named sequence axis that several sequence inputs can share (e.g. features and aligned labels).
class SequenceAxis {
public:
    /// A new sequence axis, distinct from every other.
    SequenceAxis() : id_(Axis::new_sequence_id()) {}
    /// \return the axis' id (Axis::id of the inputs made on it).
    std::uint64_t id() const { return id_; }

private:
    std::uint64_t id_;
};

/// A dimension of an input's sample shape whose size each binding sets (the bound Value's own size
/// there), as sequence::unpack's T_max is set by each batch: input_variable({any_size, 256}) takes a
/// block of any number of rows of 256 per item, e.g. an encoder's states fed to a decoder step.
/// Inside the graph such a dimension shows as 0 in shape(), as unpack's T_max does.
inline constexpr std::size_t any_size = static_cast<std::size_t>(-1);

/// An input with a batch axis and no sequence axis: each bound Value holds N samples of `shape`
/// (a dimension may be any_size). `name` shows in messages.
Variable input_variable(const Shape& shape, const std::string& name = {});
/// An input with no dynamic axis (CNTK's input_variable(shape, dynamic_axes=[])): each bound Value is
/// one static tensor of `shape` (Value::tensor; a dimension may be any_size), read as a parameter is
/// and taking no part in the batch size, e.g. every item's memory [N, Tk, D] that index_select picks
/// per row. `name` shows in messages.
Variable static_input_variable(const Shape& shape, const std::string& name = {});
/// A parameter of `shape` whose values `init` draws (in double, from global_rng()), stored in
/// `precision`: f32 or f64 (else a UserError).
Parameter parameter(const Shape& shape, const Initializer& init, const std::string& name = {},
                    DType precision = DType::f32);
/// A float parameter holding a copy of `value`.
Parameter parameter(const xt::xarray<float>& value, const std::string& name = {});
/// @{
/// A constant with no dynamic axis: a scalar, or a copy of the tensor `value`.
Variable constant(double value, const std::string& name = {});
Variable constant(const xt::xarray<double>& value, const std::string& name = {});
/// @}
/// A placeholder of a known sample shape, on any axis until replace_placeholders binds it: how a
/// loop is closed (past_value of a placeholder, then bound to the loop's output).
Variable placeholder(const Shape& shape, const std::string& name = {});
/// A placeholder whose sample shape is inferred (CNTK's placeholder()): from what replace_placeholders
/// binds it to when that is known, else at compile from the loop it closes. shape() of an op built
/// on it compiles the graph to answer (so layers stack on such a loop); while the loop is still open
/// it throws a UserError with compile's reason.
Variable placeholder();

namespace sequence {
/// @{
/// A sequence input with its own new sequence axis, or on the given shared one: each bound Value
/// holds N sequences of samples of `shape`.
Variable input_variable(const Shape& shape, const std::string& name = {});
Variable input_variable(const Shape& shape, const std::string& name, const SequenceAxis& axis);
/// @}
}  // namespace sequence

/// Every leaf a set of outputs depends on (through bound placeholders and loops), in creation
/// order: its inputs, parameters, constants and the placeholders not bound yet (an output that is
/// a leaf itself included). What a caller lists as a graph's arguments (the inputs it must be
/// given) or its parameters.
std::vector<Variable> leaves_of(const std::vector<Variable>& outputs);
/// Every node named `name` that a set of outputs depends on (ops as well as leaves; through bound
/// placeholders and loops; the outputs themselves included), in creation order: CNTK's
/// Function.find_all_with_name, to reach a named intermediate value (a Label's alias, a layer's output).
std::vector<Variable> find_all_with_name(const std::vector<Variable>& outputs, const std::string& name);
/// All parameters a set of outputs depends on (through bound placeholders and loops), in creation order.
std::vector<Parameter> parameters_of(const std::vector<Variable>& outputs);
/// The number of learnable numbers in `parameters` (the sum of their shapes' sizes).
std::size_t parameter_count(const std::vector<Parameter>& parameters);

}  // namespace loom

/// @cond
template <>
struct std::hash<loom::Variable> {
    std::size_t operator()(const loom::Variable& v) const { return loom::VariableHash()(v); }
};
template <>
struct std::hash<loom::Parameter> {
    std::size_t operator()(const loom::Variable& v) const { return loom::VariableHash()(v); }
};
/// @endcond
