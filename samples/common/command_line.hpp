#pragma once
// What the samples' command lines share: floating options that must be finite numbers, and a
// data-parallel job under mpirun (its --mpi-timeout option, and joining it). Header-only; a sample
// built with LOOM_DISTRIBUTED (its CMakeLists.txt links loom::distributed) joins the job.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

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

// --mpi-timeout SECONDS (default 300): how long a process waits for the others at a step.
inline void add_mpi_timeout(CLI::App& app, double& seconds) {
    app.add_option("--mpi-timeout", seconds,
                   "under mpirun: seconds a process waits for the others at a step before every process stops with "
                   "an error naming the one it waited for (stopped, asleep, stuck); 0: no limit")
        ->capture_default_str()
        ->check(finite_number)
        ->check(CLI::Range(0.0, 1e6));
}

#ifdef LOOM_DISTRIBUTED
// Under mpirun, joins the job (docs/distributed.md): `mpi` holds the context (it ends MPI when it is
// destroyed, so it outlives the training), rank and ranks say this process's place, and reduction
// sums the processes' gradients. Alone, nothing changes.
inline void join_mpirun(std::optional<loom::distributed::Context>& mpi, int argc, char** argv, double timeout,
                        std::size_t& rank, std::size_t& ranks, std::shared_ptr<loom::GradientReduction>& reduction) {
    if (!loom::distributed::Context::launched_by_mpirun()) return;
    mpi.emplace(argc, argv);
    mpi->set_timeout(timeout);
    rank = mpi->rank(), ranks = mpi->size(), reduction = loom::distributed::data_parallel(*mpi);
}
#endif

}  // namespace samples
