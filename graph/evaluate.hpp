#pragma once
/// \file
/// evaluate, gradients and check_gradients: the user's entry points to run a graph.
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/value.hpp"
#include "graph/executor.hpp"
#include "graph/variable.hpp"

namespace loom {

/// Results by Variable; operator[] on a missing key throws a UserError naming it.
class ValueMap {
public:
    /// \return v's result; a UserError naming v when it has none.
    const Value& operator[](const Variable& v) const;
    /// \return whether v has a result.
    bool contains(const Variable& v) const { return map_.count(v) != 0; }
    /// Sets v's result to `value`.
    void insert(const Variable& v, Value value) { map_[v] = std::move(value); }
    /// \return the number of results.
    std::size_t size() const { return map_.size(); }
    /// \return an iterator to the first (Variable, Value) pair, in no particular order.
    auto begin() const { return map_.begin(); }
    /// \return the end of the pairs.
    auto end() const { return map_.end(); }

private:
    std::unordered_map<Variable, Value> map_;
};

// The element type (DType): the one asked for, else (std::nullopt, the default) as exact as the inputs: double when any
// bound input holds double data or any parameter of the graph is double, else float (run_dtype, graph/run_dtype.hpp).
// A parameter of the other type is read as a converted copy.

/// Runs the graph forward once (compile, bind, forward) and returns the value of each output.
/// \param outputs  the variables to compute
/// \param inputs  a Value for every input they need
/// \param dtype  the element type to compute in (above)
ValueMap evaluate(const std::vector<Variable>& outputs, const Bindings& inputs,
                  std::optional<DType> dtype = std::nullopt);

/// d(sum of `loss` over every sequence, step and element)/d(each of `wrt`), by one forward and one
/// backward pass. `wrt` may hold parameters and inputs; one the loss does not depend on is a
/// UserError. The result maps each of `wrt` to its gradient, shaped as its value (an input's
/// gradient as its bound Value, padding included).
/// \param loss  the output to differentiate
/// \param inputs  a Value for every input the loss needs
/// \param wrt  the variables to differentiate for
/// \param dtype  the element type to compute in (as evaluate's)
ValueMap gradients(const Variable& loss, const Bindings& inputs, const std::vector<Variable>& wrt,
                   std::optional<DType> dtype = std::nullopt);

/// gradients() and the value of `loss` itself, from the same forward pass (CNTK's
/// `grad(..., outputs=[f])` returns both): one forward and one backward, not a second forward.
/// \return the value of `loss` and the gradient of each of `wrt`
std::pair<Value, ValueMap> value_and_gradients(const Variable& loss, const Bindings& inputs,
                                               const std::vector<Variable>& wrt,
                                               std::optional<DType> dtype = std::nullopt);

/// How check_gradients compares.
struct GradientCheckOptions {
    double epsilon = 1e-6;  ///< central difference step, relative to max(1, |x|)
    /// |analytic - numeric| <= absolute + relative * max(|analytic|, |numeric|) passes.
    double relative_tolerance = 1e-4;
    double absolute_tolerance = 1e-6;  ///< see relative_tolerance
    std::size_t max_elements = 400;    ///< per variable; beyond it, a random subset is checked
    std::uint64_t seed = 7;            ///< for the output weights and the subset
    /// Session::set_memory_budget for the checked pass: a loop over it runs in segments, so the
    /// recomputation is checked too. 0: none.
    std::size_t memory_budget = 0;
};

/// What check_gradients found.
struct GradientReport {
    bool ok = true;               ///< every checked element within the tolerance
    std::size_t checked = 0;      ///< elements compared
    std::string worst_variable;   ///< the label of the variable holding the worst element
    std::size_t worst_index = 0;  ///< flat index into the variable's storage (padded for sequences)
    double worst_analytic = 0, worst_numeric = 0, worst_error = 0;  // error relative to the tolerance (<= 1 passes)
    std::size_t loop_bytes_peak = 0;  ///< the most bytes one loop held for backward (Session::loop_bytes_peak)
    /// \return the report in one line: "gradients match (...)" or "GRADIENT MISMATCH ..." with the worst element.
    std::string str() const;
};
/// \var GradientReport::worst_analytic
/// The backward pass's gradient at the worst element.
/// \var GradientReport::worst_numeric
/// The central difference at the worst element.
/// \var GradientReport::worst_error
/// The worst element's |analytic - numeric| relative to the tolerance (<= 1 passes).

/// Compares the gradients of `loss` for `wrt` with central differences, in double. The outputs are reduced to a scalar
/// with fixed pseudo-random weights (not a plain sum), so that errors cannot cancel.
GradientReport check_gradients(const Variable& loss, const Bindings& inputs, const std::vector<Variable>& wrt,
                               const GradientCheckOptions& options = {});

}  // namespace loom
