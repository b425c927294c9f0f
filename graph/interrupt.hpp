#pragma once
/// \file
/// Stopping a long pass from outside: between the steps of a pass (before each step of its plan,
/// and before each time step of a loop) the engine calls the check of the innermost
/// InterruptCheckScope of the thread that started the pass (on whichever thread runs the step), at
/// most once per `every_seconds`. An exception the check throws stops the pass there and leaves the
/// call that ran it (evaluate, gradients, Session::forward / backward, a Trainer's step) as that
/// exception; the Session stays usable (its next forward starts afresh), and a Trainer's parameters
/// are left as they were when the stop came before its update. How a program stops a long
/// evaluation: Python's Ctrl-C goes through it. fit and generate have their own hooks, between
/// whole steps (FitOptions::stop_requested, GenerateOptions::on_step).
#include <atomic>
#include <chrono>
#include <functional>

namespace loom {

/// Sets a check for the passes the calling thread starts while the scope lives; scopes nest (the
/// innermost applies), and each must end on the thread that made it, innermost first.
class InterruptCheckScope {
public:
    /// \param check  called between steps (any thread may run a step, so it must be thread-safe);
    ///        it throws to stop the pass
    /// \param every_seconds  the least time between two calls (0: before every step)
    explicit InterruptCheckScope(std::function<void()> check, double every_seconds = 0.05);
    ~InterruptCheckScope();
    InterruptCheckScope(const InterruptCheckScope&) = delete;
    InterruptCheckScope& operator=(const InterruptCheckScope&) = delete;

    /// @cond
    /// The engine's side: the calling thread's innermost scope (nullptr: none), a scope's check
    /// when its time has come, and a worker thread running a step of another thread's pass.
    static const InterruptCheckScope* current();
    void check_now() const;
    class Adopt {
    public:
        explicit Adopt(const InterruptCheckScope* scope);
        ~Adopt();
        Adopt(const Adopt&) = delete;
        Adopt& operator=(const Adopt&) = delete;

    private:
        const InterruptCheckScope* before_;
    };
    /// @endcond

private:
    std::function<void()> check_;
    std::chrono::steady_clock::duration every_;
    mutable std::atomic<std::chrono::steady_clock::rep> next_{0};
    const InterruptCheckScope* outer_;
};

/// @cond
/// Where a pass may be stopped: calls the current scope's check when its time has come.
inline void interruption_point() {
    if (const InterruptCheckScope* scope = InterruptCheckScope::current()) scope->check_now();
}
/// @endcond

}  // namespace loom
