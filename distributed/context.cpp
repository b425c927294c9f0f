#include "distributed/context.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "core/errors.hpp"

namespace loom::distributed {

namespace {
Context* current_context = nullptr;
}

Context::Context(int& argc, char**& argv) { init(&argc, &argv); }

Context::Context() { init(nullptr, nullptr); }

bool Context::launched_by_mpirun() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
        if (std::getenv(name)) return true;
    return false;
}

void Context::init(int* argc, char*** argv) {
    if (current_context) throw UserError("loom::distributed::Context: another Context is alive in this process");
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) throw UserError("loom::distributed::Context: MPI was initialized already (by someone else)");
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw UserError("loom::distributed::Context: MPI_Init_thread failed; run under mpirun (OpenMPI)");
    any_thread_ = provided >= MPI_THREAD_SERIALIZED;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    current_context = this;
}

Context::~Context() {
    current_context = nullptr;
    if (in_flight_) abort("this process ended while its gradients were being summed with the other processes");
    // The others are at a synchronization (or reach this one, when every process ends): meet them
    // there, so none waits for this process forever. An ending process's exchange never throws.
    if (!gone_)
        exchange(Words{}, ended, std::uncaught_exceptions() > 0 ? "ended by an exception" : "ended its program");
    MPI_Finalize();
}

Context& Context::current() {
    if (!current_context)
        throw UserError("loom::distributed: no Context is alive; create loom::distributed::Context first in main");
    return *current_context;
}

Context::Words Context::synchronize(const Words& values) { return exchange(values, ok, ""); }

void Context::fail(const std::string& what) { exchange(Words{}, failed, what); }

void Context::abort(const std::string& what, int code) const {
    std::fprintf(stderr, "loom::distributed: rank %d of %d stops every process: %s\n", rank_, size_, what.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::terminate();  // not reached: MPI_Abort does not return
}

Context::Words Context::exchange(const Words& values, Control control, const std::string& what) {
    if (gone_) throw UserError(gone_message_);
    // Every process's words, control first: the sum is taken here in rank order, so it is the same
    // on every process, and who failed is known without a second round.
    constexpr std::size_t stride = sync_words + 1;
    std::array<double, stride> mine{};
    mine[0] = control;
    for (std::size_t k = 0; k < sync_words; ++k) mine[k + 1] = values[k];
    std::vector<double> all(stride * static_cast<std::size_t>(size_));
    MPI_Allgather(mine.data(), static_cast<int>(stride), MPI_DOUBLE, all.data(), static_cast<int>(stride), MPI_DOUBLE,
                  MPI_COMM_WORLD);
    int culprit = -1;
    bool any_ended = false;
    for (int r = 0; r < size_; ++r) {
        const auto c = static_cast<Control>(all[static_cast<std::size_t>(r) * stride]);
        any_ended |= c == ended;
        if (c != ok && culprit < 0) culprit = r;
    }
    if (culprit < 0) {
        Words sum{};
        for (int r = 0; r < size_; ++r)
            for (std::size_t k = 0; k < sync_words; ++k) sum[k] += all[static_cast<std::size_t>(r) * stride + k + 1];
        return sum;
    }
    // The first failing process's message, to every process.
    std::string text = rank_ == culprit ? what : std::string();
    int length = static_cast<int>(text.size());
    MPI_Bcast(&length, 1, MPI_INT, culprit, MPI_COMM_WORLD);
    text.resize(static_cast<std::size_t>(length));
    MPI_Bcast(text.data(), length, MPI_CHAR, culprit, MPI_COMM_WORLD);
    const bool culprit_ended = static_cast<Control>(all[static_cast<std::size_t>(culprit) * stride]) == ended;
    const std::string message = "loom::distributed: rank " + std::to_string(culprit) + " of " + std::to_string(size_) +
                                (culprit_ended ? " " : " failed: ") + text +
                                (culprit_ended ? " while rank " + std::to_string(rank_) + " was still training" : "") +
                                "; every process stops";
    if (any_ended) {
        gone_ = true;
        gone_message_ = message;
    }
    if (control != ok) return {};  // this process failed or ended itself: its caller knows why
    throw UserError(message);
}

}  // namespace loom::distributed
