#pragma once
/// \file
/// Learning-rate schedules over a training budget: a warm-up, then a decay that ends where the
/// budget does, whether the budget counts updates (nanoGPT's lr_decay_iters) or wall-clock seconds
/// (a run of 30 minutes, FitOptions::max_seconds). A schedule is a LearningRate (learners.hpp),
/// a function of the update's number like CNTK's learning_parameter_schedule and PyTorch's
/// LambdaLR; a time budget adds the clock it reads, so the caller writes one line instead of a
/// "fraction done" that its data source updates.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>

#include "training/learners.hpp"

namespace loom {

/// The length of a training run as a schedule reads it: a number of updates, seconds of wall-clock
/// time, or both (whichever is spent first). Copies share one clock, so the schedule a learner
/// holds and the copy its caller keeps (to print the rate) read the same time.
class TrainingBudget {
public:
    /// Seconds since any fixed origin, never decreasing: what a time budget reads (by default
    /// std::chrono::steady_clock; a test passes a clock of its own).
    using Clock = std::function<double()>;

    /// No budget: nothing is ever spent (a schedule stays at its peak after the warm-up).
    TrainingBudget() = default;
    /// `steps` updates.
    static TrainingBudget steps(std::uint64_t steps);
    /// `seconds` of wall-clock time, counted from the first update whose part spent is asked (the
    /// first update's rate): a schedule made before a long setup does not count it. A UserError
    /// unless `seconds` is finite and positive.
    static TrainingBudget seconds(double seconds, Clock clock = {});
    /// `steps` updates or `seconds` of time, whichever is spent first (a run stopped by either).
    static TrainingBudget steps_or_seconds(std::uint64_t steps, double seconds, Clock clock = {});
    /// The same budget, its clock shared, whose part spent stops at `cap` (in (0, 1], else a
    /// UserError): for a run that goes on past its budget at (1 - cap) of a linear decay (the g2p
    /// sample always trains its first epoch to the end).
    TrainingBudget at_most(double cap) const;

    /// The part of the budget spent when update `step` (from 0) starts, not counting the first
    /// `after` updates (a warm-up) where the budget counts updates:
    ///   updates: (step - after) / max(1, steps - after), 0 before `after`;
    ///   seconds: the seconds since the first update asked, over `seconds` (the warm-up's included:
    ///            its length in seconds is not known ahead);
    ///   both: the larger; then at most at_most's cap. Past the budget it exceeds 1.
    /// The time of an update is read when it is first asked for: asked again for the step it was
    /// last asked for, the same part (the rate a caller prints is the one the learner used).
    double spent(std::uint64_t step, std::uint64_t after = 0) const;

    /// Whether the budget counts updates (steps, steps_or_seconds).
    bool counts_steps() const { return counts_steps_; }
    /// Whether the budget counts seconds (seconds, steps_or_seconds).
    bool counts_seconds() const { return timer_ != nullptr; }

private:
    struct Timer;
    static std::shared_ptr<Timer> make_timer(double seconds, Clock clock);
    bool counts_steps_ = false;
    std::uint64_t steps_ = 0;
    double cap_ = std::numeric_limits<double>::infinity();
    std::shared_ptr<Timer> timer_;
};

/// nanoGPT's get_lr over a budget (and the PyTorch peer's, bench/torch_lm.py): update s below
/// warmup_steps uses peak (s + 1) / (warmup_steps + 1); the later ones
///   final_lr + (peak - final_lr) (1 + cos(pi f)) / 2,   f = min(1, budget.spent(s, warmup_steps)),
/// a half cosine from peak down to final_lr as the budget is spent, final_lr after it. A budget of
/// steps decays over the updates after the warm-up (nanoGPT's lr_decay_iters = its steps); a time
/// budget over the seconds since the first update. (warmup_cosine_decay's warm-up reaches the peak
/// one update earlier: peak (s + 1) / warmup_steps.) A UserError unless 0 <= final_lr <= peak, both finite.
LearningRate budget_cosine_decay(double peak, std::uint64_t warmup_steps, TrainingBudget budget, double final_lr = 0.0);

/// Budgeted training's linear decay to 0 (Li, Yumer and Ramanan, ICLR 2020) under a linear
/// warm-up, the two multiplied:
///   peak min(1, (s + 1) / warmup_steps) (1 - min(1, budget.spent(s))),
/// the warm-up's updates counted in the budget (warmup_steps 0: no warm-up). With no budget
/// (TrainingBudget{}), the warm-up then peak. A UserError unless peak is finite and not negative.
LearningRate budget_linear_decay(double peak, std::uint64_t warmup_steps, TrainingBudget budget);

}  // namespace loom
