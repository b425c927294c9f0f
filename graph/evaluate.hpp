#pragma once
// evaluate, gradients and check_gradients: the user's entry points to run a graph.
#include <string>
#include <unordered_map>
#include <vector>

#include "core/value.hpp"
#include "graph/executor.hpp"
#include "graph/variable.hpp"

namespace loom {

// Results by Variable; operator[] on a missing key throws a UserError naming it.
class ValueMap {
public:
    const Value& operator[](const Variable& v) const;
    bool contains(const Variable& v) const { return map_.count(v) != 0; }
    void insert(const Variable& v, Value value) { map_[v] = std::move(value); }
    std::size_t size() const { return map_.size(); }
    auto begin() const { return map_.begin(); }
    auto end() const { return map_.end(); }

private:
    std::unordered_map<Variable, Value> map_;
};

// Precision (graph/node.hpp) `automatic`: the computation runs in double when any bound input
// holds double data or any parameter of the graph is double, else in float; f32 / f64 override
// that (a parameter of the other precision is then read as a converted copy).

ValueMap evaluate(const std::vector<Variable>& outputs, const Bindings& inputs,
                  Precision precision = Precision::automatic);

// d(sum of `loss` over every sequence, step and element)/d(each of `wrt`). `wrt` may hold
// parameters and inputs. When `values` is given, the forward values of `outputs` are stored there.
ValueMap gradients(const Variable& loss, const Bindings& inputs, const std::vector<Variable>& wrt,
                   Precision precision = Precision::automatic);

struct GradientCheckOptions {
    double epsilon = 1e-6;  // central difference step
    double relative_tolerance = 1e-4;
    double absolute_tolerance = 1e-6;
    std::size_t max_elements = 400;  // per variable; beyond it, a random subset is checked
    std::uint64_t seed = 7;          // for the output weights and the subset
    // Session::set_memory_budget for the checked pass: a loop over it runs in segments, so the
    // recomputation is checked too. 0: none.
    std::size_t memory_budget = 0;
};

struct GradientReport {
    bool ok = true;
    std::size_t checked = 0;  // elements compared
    std::string worst_variable;
    std::size_t worst_index = 0;  // flat index into the variable's storage (padded for sequences)
    double worst_analytic = 0, worst_numeric = 0, worst_error = 0;  // error relative to the tolerance (<= 1 passes)
    std::size_t loop_bytes_peak = 0;  // the most bytes one loop held for backward (Session::loop_bytes_peak)
    std::string str() const;
};

// Finite differences in double. The outputs are reduced to a scalar with fixed pseudo-random
// weights (not a plain sum), so that errors cannot cancel.
GradientReport check_gradients(const Variable& loss, const Bindings& inputs, const std::vector<Variable>& wrt,
                               const GradientCheckOptions& options = {});

}  // namespace loom
