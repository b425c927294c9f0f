#pragma once
// Shared helpers for the gradient-check tables (see tests/graph/test_gradcheck_*.cpp).
// A case builds a graph from inputs made by the harness and names what to differentiate for; the
// harness binds a batch of sequences of lengths 1, 3 and 7 (or a batch of 3 rows), runs
// check_gradients in double, and reports the worst element on failure.
#include <doctest/doctest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include <loom.hpp>

namespace loom::testing {

inline const std::vector<std::size_t> default_lengths{1, 3, 7};

// Random data in [lo, hi] for sequences of the given lengths, each [len, shape...].
inline std::vector<xt::xarray<double>> random_sequences(const Shape& shape, const std::vector<std::size_t>& lengths,
                                                        std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<xt::xarray<double>> out;
    for (auto len : lengths) {
        std::vector<std::size_t> dims{len};
        dims.insert(dims.end(), shape.begin(), shape.end());
        xt::xarray<double> a = xt::zeros<double>(dims);
        for (auto& v : a) v = d(rng);
        out.push_back(std::move(a));
    }
    return out;
}

inline xt::xarray<double> random_rows(const Shape& shape, std::size_t n, std::uint64_t seed, double lo = -1.0,
                                      double hi = 1.0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<std::size_t> dims{n};
    dims.insert(dims.end(), shape.begin(), shape.end());
    xt::xarray<double> a = xt::zeros<double>(dims);
    for (auto& v : a) v = d(rng);
    return a;
}

inline xt::xarray<float> random_tensor(const Shape& shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    xt::xarray<float> a = xt::zeros<float>(shape.dims());
    for (auto& v : a) v = static_cast<float>(d(rng));
    return a;
}

// Parameters as the Variables that check_gradients takes.
inline std::vector<Variable> as_variables(const std::vector<Parameter>& ps) { return {ps.begin(), ps.end()}; }

// Runs check_gradients and turns a failure into a readable doctest failure.
inline void require_gradients(const std::string& name, const Variable& out, const Bindings& in,
                              const std::vector<Variable>& wrt, const GradientCheckOptions& options = {}) {
    auto report = check_gradients(out, in, wrt, options);
    INFO(name << ": " << report.str());
    CHECK(report.ok);
    CHECK(report.checked > 0);
}

}  // namespace loom::testing
