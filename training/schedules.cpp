#include "training/schedules.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <numbers>
#include <string>

#include "core/errors.hpp"

namespace loom {

// A time budget's clock, shared by the copies of a budget and of the schedules made from it: it
// starts at the first update asked, and keeps the time read for the last update asked.
struct TrainingBudget::Timer {
    double seconds = 0;
    Clock clock;
    std::mutex mutex;
    bool started = false;
    double start = 0;
    bool asked = false;  // an update was asked for: last_step and last_elapsed hold
    std::uint64_t last_step = 0;
    double last_elapsed = 0;

    double elapsed(std::uint64_t step) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (asked && step == last_step) return last_elapsed;
        const double now = clock();
        if (!started) start = now, started = true;
        asked = true, last_step = step, last_elapsed = now - start;
        return last_elapsed;
    }
};

std::shared_ptr<TrainingBudget::Timer> TrainingBudget::make_timer(double seconds, Clock clock) {
    if (!std::isfinite(seconds) || seconds <= 0)
        throw UserError("TrainingBudget: a time budget of " + std::to_string(seconds) +
                        " seconds; it must be finite and positive");
    if (!clock)
        clock = [] {
            return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
        };
    auto timer = std::make_shared<Timer>();
    timer->seconds = seconds;
    timer->clock = std::move(clock);
    return timer;
}

TrainingBudget TrainingBudget::steps(std::uint64_t steps) {
    TrainingBudget b;
    b.counts_steps_ = true, b.steps_ = steps;
    return b;
}

TrainingBudget TrainingBudget::seconds(double seconds, Clock clock) {
    TrainingBudget b;
    b.timer_ = make_timer(seconds, std::move(clock));
    return b;
}

TrainingBudget TrainingBudget::steps_or_seconds(std::uint64_t steps, double seconds, Clock clock) {
    TrainingBudget b = TrainingBudget::steps(steps);
    b.timer_ = make_timer(seconds, std::move(clock));
    return b;
}

TrainingBudget TrainingBudget::at_most(double cap) const {
    if (!(cap > 0 && cap <= 1))
        throw UserError("TrainingBudget::at_most: the cap " + std::to_string(cap) + " is not in (0, 1]");
    TrainingBudget b = *this;
    b.cap_ = cap;
    return b;
}

double TrainingBudget::spent(std::uint64_t step, std::uint64_t after) const {
    double part = 0;
    if (counts_steps_ && step >= after)
        // nanoGPT's decay_ratio, computed as the samples did: one update at least to decay over.
        part = (static_cast<double>(step) - static_cast<double>(after)) /
               std::max(1.0, static_cast<double>(steps_) - static_cast<double>(after));
    if (timer_) part = std::max(part, timer_->elapsed(step) / timer_->seconds);
    return std::min(cap_, part);
}

namespace {

void check_rate(const char* schedule, const char* what, double rate) {
    if (!std::isfinite(rate) || rate < 0)
        throw UserError(std::string(schedule) + ": " + what + " is " + std::to_string(rate) +
                        "; it must be finite and not negative");
}

}  // namespace

LearningRate budget_cosine_decay(double peak, std::uint64_t warmup_steps, TrainingBudget budget, double final_lr) {
    check_rate("budget_cosine_decay", "peak", peak);
    check_rate("budget_cosine_decay", "final_lr", final_lr);
    if (final_lr > peak)
        throw UserError("budget_cosine_decay: final_lr (" + std::to_string(final_lr) + ") exceeds peak (" +
                        std::to_string(peak) + ")");
    const double warmup = static_cast<double>(warmup_steps);
    return LearningRate([=](std::uint64_t s) {
        // Asked during the warm-up too: a time budget's clock starts at the first update.
        const double f = std::min(budget.spent(s, warmup_steps), 1.0);
        if (s < warmup_steps) return peak * static_cast<double>(s + 1) / (warmup + 1);
        return final_lr + (peak - final_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * f));
    });
}

LearningRate budget_linear_decay(double peak, std::uint64_t warmup_steps, TrainingBudget budget) {
    check_rate("budget_linear_decay", "peak", peak);
    const double warmup = static_cast<double>(warmup_steps);
    return LearningRate([=](std::uint64_t s) {
        const double rise = warmup > 0 ? std::min(1.0, static_cast<double>(s + 1) / warmup) : 1.0;
        return peak * rise * (1.0 - std::min(1.0, budget.spent(s)));
    });
}

}  // namespace loom
