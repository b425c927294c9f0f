#pragma once
// What the samples' command lines share: numbers in a range (floating ones finite, whole ones
// refused rather than wrapped or clamped), a data-parallel job under mpirun (its --mpi-timeout
// option, and joining it), and the line an error ends a sample with. Header-only; a sample built with LOOM_DISTRIBUTED
// (its CMakeLists.txt links loom::distributed) joins the job.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
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

// "error: " and the message on standard error in one write: in pieces, under mpirun, Open MPI's
// notice of the job's abort could land between them (seen in the test of a stopped process).
inline void print_error(const std::string& message) {
    const std::string line = "error: " + message + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
}

// CLI11's Range lets NaN through (every comparison with it is false) and reads "inf": a floating
// option must be a finite number, refused by its name otherwise.
inline const CLI::Validator finite_number(
    [](std::string& text) {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return end != text.c_str() && !std::isfinite(v) ? text + " is not a finite number" : std::string();
    },
    "FINITE");

// A number as the shortest text that reads back as itself (1e-09, 18446744073709551615), so that a
// message quoting a range never contradicts itself (CLI11's Range prints 1e-9 as 0.000000).
template <class T>
std::string number_text(T value) {
    char text[64];
    return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

// The text of an option holding a number from `low` to `high`, checked before CLI11 converts it:
// CLI11's Range lets NaN through (every comparison with it is false) and reads "inf", and its
// conversion takes 18446744073709551616, 10^29 and -1 for 2^64 - 1 without a word. A floating
// number must be finite and in range, a whole one written in digits and in range; otherwise the
// option is refused by its name, its range in the message.
template <class T>
CLI::Validator in_range(T low, T high) {
    const std::string range = " from " + number_text(low) + " to " + number_text(high);
    return CLI::Validator(
        [low, high, range](std::string& text) {
            const char *begin = text.data(), *end = text.data() + text.size();
            if constexpr (std::is_floating_point_v<T>) {
                char* parsed = nullptr;
                const double v = std::strtod(text.c_str(), &parsed);
                if (parsed == begin || parsed != end) return text + " is not a number";
                if (!std::isfinite(v)) return text + " is not a finite number";
                return v >= static_cast<double>(low) && v <= static_cast<double>(high)
                           ? std::string()
                           : text + " is not a number" + range;
            } else {
                T v{};
                const auto [parsed, error] = std::from_chars(begin, end, v);
                const bool whole = error == std::errc() && parsed == end;
                return whole && v >= low && v <= high ? std::string() : text + " is not a whole number" + range;
            }
        },
        "from " + number_text(low) + " to " + number_text(high));
}

// An option holding a number from `low` to `high` (in_range), its default shown in --help.
template <class T>
CLI::Option* add_number(CLI::App& app, const std::string& name, T& value, const std::string& what, T low, T high) {
    return app.add_option(name, value, what)->capture_default_str()->check(in_range(low, high));
}

// --mpi-timeout SECONDS (default 300): how long a process waits for the others at a step.
inline void add_mpi_timeout(CLI::App& app, double& seconds) {
    app.add_option("--mpi-timeout", seconds,
                   "under mpirun: seconds a process waits for the others at a step before every process stops with "
                   "an error naming the one it waited for (stopped, asleep, stuck); 0: no limit")
        ->capture_default_str()
        ->check(in_range(0.0, 1e6));
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
