#pragma once
/// \file
/// The mean of parameters' values over points of a training run (Polyak averaging at the points the
/// caller chooses, e.g. each evaluation): a model that is often better than any single point, whose
/// held-out score is noisy.
#include <cstddef>
#include <variant>
#include <vector>

#include <xtensor/xarray.hpp>

#include "graph/variable.hpp"

namespace loom {

/// The mean of parameters' values over points of a run (above): add() at each point, assign() at the end.
class ParameterAverage {
public:
    /// An average of `parameters`, with nothing added yet.
    explicit ParameterAverage(std::vector<Parameter> parameters);
    /// Adds the parameters' current values. Sums are kept in each parameter's precision.
    void add();
    /// \return how many times add() was called.
    std::size_t count() const { return count_; }
    /// Sets every parameter to the mean of the values added (sum / count, in its precision). Throws
    /// UserError when nothing was added.
    void assign() const;

private:
    std::vector<Parameter> parameters_;
    std::vector<ByDType<Array>> sums_;  ///< in each parameter's precision
    std::size_t count_ = 0;
};

}  // namespace loom
