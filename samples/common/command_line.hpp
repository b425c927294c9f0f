#pragma once
// What the samples' command lines share: numbers in a range (floating ones finite), and a
// data-parallel job under mpirun (its --mpi-timeout option, and joining it). Header-only; a sample
// built with LOOM_DISTRIBUTED (its CMakeLists.txt links loom::distributed) joins the job.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include <loom.hpp>
#ifdef LOOM_DISTRIBUTED
#include "distributed/distributed.hpp"
#endif

namespace samples {

// CLI11's Range lets NaN through (every comparison with it is false) and reads "inf": a floating
// option must be a finite number, refused by its name otherwise.
inline const CLI::Validator finite_number(
    [](std::string& text) {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return end != text.c_str() && !std::isfinite(v) ? text + " is not a finite number" : std::string();
    },
    "FINITE");

// An option holding a number from `low` to `high`, its default shown in --help; a floating one must
// also be a finite number. (CLI11 would read -1 into a size_t as 2^64 - 1: every number has a range.)
template <class T>
CLI::Option* add_number(CLI::App& app, const std::string& name, T& value, const std::string& what, T low, T high) {
    CLI::Option* option = app.add_option(name, value, what)->capture_default_str();
    if constexpr (std::is_floating_point_v<T>) option->check(finite_number);
    return option->check(CLI::Range(low, high));
}

// --mpi-timeout SECONDS (default 300): how long a process waits for the others at a step.
inline void add_mpi_timeout(CLI::App& app, double& seconds) {
    app.add_option("--mpi-timeout", seconds,
                   "under mpirun: seconds a process waits for the others at a step before every process stops with "
                   "an error naming the one it waited for (stopped, asleep, stuck); 0: no limit")
        ->capture_default_str()
        ->check(finite_number)
        ->check(CLI::Range(0.0, 1e6));
}

// Under mpirun, joins the job (docs/distributed.md): join says this process's place (rank of ranks)
// and gives the reduction that sums the processes' gradients; the job holds the MPI context, which
// ends MPI when it is destroyed, so it outlives the training. Alone, or in a sample built without
// loom::distributed, join changes nothing.
class MpiJob {
public:
    void join([[maybe_unused]] int argc, [[maybe_unused]] char** argv, [[maybe_unused]] double timeout,
              [[maybe_unused]] std::size_t& rank, [[maybe_unused]] std::size_t& ranks,
              [[maybe_unused]] std::shared_ptr<loom::GradientReduction>& reduction) {
#ifdef LOOM_DISTRIBUTED
        if (!loom::distributed::Context::launched_by_mpirun()) return;
        context_.emplace(argc, argv);
        context_->set_timeout(timeout);
        rank = context_->rank(), ranks = context_->size(), reduction = loom::distributed::data_parallel(*context_);
#endif
    }

private:
#ifdef LOOM_DISTRIBUTED
    std::optional<loom::distributed::Context> context_;
#endif
};

}  // namespace samples
