#pragma once
/// \file
/// The processes of one data-parallel run: MPI_COMM_WORLD, its rank and size, and the one
/// synchronization every process takes part in at the same points of a run.
///
/// A run must never hang because one process stopped. Whether to go on is agreed at one fixed-size
/// sum per step (synchronize), which also carries "this process failed" and "this process ended": a
/// process whose step threw tells the others at the step's synchronization (they all throw the same
/// UserError, naming the rank and its message), and one that leaves main early says so from
/// ~Context, where the others are waiting. A process that ends while its gradients are still being
/// summed (an exception out of backward) aborts the whole job instead: mpirun then stops every
/// process, as it does when one is killed.
///
/// A process that stops answering (stopped by a signal, asleep, stuck) cannot say so: every wait for
/// the others is bounded instead (set_timeout, wait). Each process tells the others, in small
/// messages of its own, the number of the agreement it has come to; one that waited longer than the
/// timeout names the processes that have not come to it (and the last agreement each did come to),
/// tells the others, and every process that hears it throws the same UserError; the job then ends
/// from ~Context (docs/distributed.md, "Failures").
#include <array>
#include <memory>
#include <string>
#include <vector>

namespace loom::distributed {

/// This process's part in the run (above); one per process, alive while MPI is used.
class Context {
public:
    /// What synchronize sums, besides its control words.
    static constexpr std::size_t sync_words = 4;
    /// The numbers synchronize sums.
    using Words = std::array<double, sync_words>;

    /// MPI_Init_thread (serialized calls, from any thread); a UserError when MPI is not there or
    /// another Context is alive. argc and argv may be those of main, or 0 and nullptr.
    Context(int& argc, char**& argv);
    Context();
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    /// \return this process's rank in MPI_COMM_WORLD, from 0.
    int rank() const { return rank_; }
    /// Whether MPI may be called from any thread (one at a time); otherwise only from this one.
    bool any_thread() const { return any_thread_; }
    /// \return the number of processes.
    int size() const { return size_; }
    /// \return whether this is rank 0 (the one that prints and saves).
    bool is_root() const { return rank_ == 0; }

    /// Sums `values` over every process, in rank order (identical on every process). When a process
    /// called fail() or ended instead, every process throws the same UserError naming it. After a
    /// process ended, every later call throws at once (that process is gone). `what` names this
    /// agreement in a timeout's message ("step 3's losses").
    Words synchronize(const Words& values, const std::string& what = "a synchronization");
    /// Takes this process's part in the synchronization the others are at, as a failure: they throw
    /// a UserError naming this rank and `what`. Returns normally (the caller rethrows its own error).
    void fail(const std::string& what);

    /// Gradient sums in flight: ending the process now would leave the others waiting, so ~Context
    /// aborts the job instead while this is set.
    void set_in_flight(bool in_flight) { in_flight_ = in_flight; }
    /// Ends every process of the job at once (MPI_Abort) after printing `what` on this one.
    [[noreturn]] void abort(const std::string& what, int code = 1) const;

    /// How long, in seconds, a process waits for the others at one agreement before the job stops
    /// (above): default 300; 0 waits forever. Every process should set the same.
    void set_timeout(double seconds);
    /// \return the timeout of set_timeout, in seconds.
    double timeout() const;
    /// Waits for `count` nonblocking MPI operations, this process's part in the agreement `what`
    /// ("step 3's gradient sums"), polling them (MPI_Testall) for at most timeout() seconds.
    /// `Request` is MPI_Request (this header does without mpi.h). Every process calls it at the same
    /// agreements in the same order. Throws UserError when the time is up here, naming the processes
    /// that had not come to `what`, or when another process's time was up; every later agreement
    /// then throws the same at once, and ~Context ends the job (MPI_Abort) once the processes that
    /// still answer have heard it.
    template <class Request>
    void wait(Request* requests, int count, const std::string& what);

    /// The Context of this process (a UserError when none is alive).
    static Context& current();
    /// Whether this process was started by mpirun/mpiexec (OpenMPI, or a PMI launcher such as
    /// MPICH's or Slurm's): a program that also runs alone creates a Context only then, so that a
    /// plain start does not initialise MPI.
    static bool launched_by_mpirun();

private:
    enum Control { ok = 0, failed = 1, ended = 2 };
    struct Watch;  ///< the timeout's state: where every process said it was (context.cpp)
    Words exchange(const Words& values, Control control, const std::string& message, const std::string& what);
    void init(int* argc, char*** argv);
    void announce();
    bool hear();
    [[noreturn]] void stop(const std::string& message, const std::vector<int>& late);
    [[noreturn]] void give_up(const std::string& what);
    [[noreturn]] void end_stopped();

    int rank_ = 0, size_ = 1;
    bool any_thread_ = false;
    bool in_flight_ = false;
    bool gone_ = false;  ///< a process ended: no more synchronizations
    std::string gone_message_;
    std::unique_ptr<Watch> watch_;
};

}  // namespace loom::distributed
