#pragma once
// Variable: the user's handle on a graph node. Cheap to copy; equality is node identity.
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

class Variable {
public:
    Variable() = default;
    explicit Variable(NodePtr node) : node_(std::move(node)) {}
    Variable(double scalar);  // NOLINT: a number where a Variable is expected becomes a constant

    const Shape& shape() const;
    const Axis& axis() const;
    const std::string& name() const;
    bool is_placeholder() const;
    bool is_parameter() const;
    bool is_input() const;
    std::string label() const;

    // Binds the placeholders in `map` (keys) to their values, closing loops; returns *this.
    Variable replace_placeholders(const std::vector<std::pair<Variable, Variable>>& map) const;

    const NodePtr& node() const { return node_; }
    explicit operator bool() const { return node_ != nullptr; }
    bool operator==(const Variable& o) const { return node_ == o.node_; }

protected:
    NodePtr node_;
};

// A learnable tensor with no dynamic axis. Its value lives with the node, shared by every copy, in
// the parameter's precision: float (the default) or double (`parameter(..., Precision::f64)`,
// `to_precision`). Sessions, learners and checkpoints follow it.
class Parameter : public Variable {
public:
    Parameter() = default;
    explicit Parameter(NodePtr node);
    Precision precision() const;
    // A copy of the value as T: value() of a double parameter rounds each element to float.
    template <class T = float>
    xt::xarray<T> value() const;
    // Stored in the parameter's precision: a double value rounds to a float parameter's. The double
    // overload is a template so that float expressions and braced lists still choose this one.
    void set_value(const xt::xarray<float>& v) const;
    template <class T>
    requires std::same_as<T, double>
    void set_value(const xt::xarray<T>& v) const { set_value_f64(v); }
    // Direct access to the stored values, for learners: T must be the parameter's precision (else a
    // UserError naming it).
    template <class T = float>
    xt::xarray<T>& data() const;

private:
    void set_value_f64(const xt::xarray<double>& v) const;
};

extern template xt::xarray<float> Parameter::value<float>() const;
extern template xt::xarray<double> Parameter::value<double>() const;
extern template xt::xarray<float>& Parameter::data<float>() const;
extern template xt::xarray<double>& Parameter::data<double>() const;

std::string precision_name(Precision p);  // "float", "double", "automatic"
// Converts each parameter's storage to `precision` in place, for every handle on it (as PyTorch's
// module.double()): float to double is exact, double to float rounds. Sessions (and Trainers) made
// before follow at their next forward; learners convert their state at their next update.
void to_precision(const std::vector<Parameter>& parameters, Precision precision);

struct VariableHash {
    std::size_t operator()(const Variable& v) const { return std::hash<const void*>()(v.node().get()); }
};

// A named sequence axis that several sequence inputs can share (e.g. features and aligned labels).
class SequenceAxis {
public:
    SequenceAxis() : id_(Axis::new_sequence_id()) {}
    std::uint64_t id() const { return id_; }

private:
    std::uint64_t id_;
};

// A dimension of an input's sample shape whose size each binding sets (the bound Value's own size
// there), as sequence::unpack's T_max is set by each batch: input_variable({any_size, 256}) takes a
// block of any number of rows of 256 per item, e.g. an encoder's states fed to a decoder step.
// Inside the graph such a dimension shows as 0 in shape(), as unpack's T_max does.
inline constexpr std::size_t any_size = static_cast<std::size_t>(-1);

Variable input_variable(const Shape& shape, const std::string& name = {});
// The initializer's values (drawn in double) are stored in `precision`: f32 or f64.
Parameter parameter(const Shape& shape, const Initializer& init, const std::string& name = {},
                    Precision precision = Precision::f32);
Parameter parameter(const xt::xarray<float>& value, const std::string& name = {});
Variable constant(double value, const std::string& name = {});
Variable constant(const xt::xarray<double>& value, const std::string& name = {});
Variable placeholder(const Shape& shape, const std::string& name = {});
// A placeholder whose sample shape is inferred (CNTK's placeholder()): from what replace_placeholders
// binds it to when that is known, else at compile from the loop it closes. Ops built on it have no
// shape until then (shape() throws); compile names what it cannot infer.
Variable placeholder();

namespace sequence {
// A sequence input with its own new sequence axis, or on the given shared one.
Variable input_variable(const Shape& shape, const std::string& name = {});
Variable input_variable(const Shape& shape, const std::string& name, const SequenceAxis& axis);
}  // namespace sequence

// All parameters a set of outputs depends on (through bound placeholders and loops), in creation order.
std::vector<Parameter> parameters_of(const std::vector<Variable>& outputs);
// The number of learnable numbers in `parameters` (the sum of their shapes' sizes).
std::size_t parameter_count(const std::vector<Parameter>& parameters);

}  // namespace loom

template <>
struct std::hash<loom::Variable> {
    std::size_t operator()(const loom::Variable& v) const { return loom::VariableHash()(v); }
};
template <>
struct std::hash<loom::Parameter> {
    std::size_t operator()(const loom::Variable& v) const { return loom::VariableHash()(v); }
};
