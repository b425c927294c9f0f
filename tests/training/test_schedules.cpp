// Schedules over a training budget (training/schedules.hpp): their rates at chosen updates against
// the formulas written out here (nanoGPT's get_lr, budgeted training's linear decay), a time budget
// read through a clock the test moves (no test sleeps), and the bad arguments refused.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <numbers>

#include <loom.hpp>

using namespace loom;

namespace {

// nanoGPT's train.py get_lr, as it reads there, its decay over lr_decay_iters iterations.
double get_lr(double it, double learning_rate, double warmup_iters, double lr_decay_iters, double min_lr) {
    if (it < warmup_iters) return learning_rate * (it + 1) / (warmup_iters + 1);
    if (it > lr_decay_iters) return min_lr;
    const double decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters);
    const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * decay_ratio));
    return min_lr + coeff * (learning_rate - min_lr);
}

// A clock the test sets.
struct FakeClock {
    std::shared_ptr<double> now = std::make_shared<double>(0.0);
    TrainingBudget::Clock clock() const {
        return [now = now] { return *now; };
    }
    void set(double seconds) const { *now = seconds; }
};

}  // namespace

TEST_CASE("budget_cosine_decay over a budget of steps is nanoGPT's get_lr") {
    const double peak = 1e-3, low = 1e-4;
    const LearningRate rate = budget_cosine_decay(peak, 10, TrainingBudget::steps(110), low);
    for (std::uint64_t s : {0, 1, 5, 9, 10, 11, 35, 60, 85, 109, 110}) {
        CAPTURE(s);
        CHECK(rate(s) == doctest::Approx(get_lr(double(s), peak, 10, 110, low)).epsilon(1e-12));
    }
    CHECK(rate(0) == doctest::Approx(peak / 11));
    CHECK(rate(10) == doctest::Approx(peak));
    CHECK(rate(60) == doctest::Approx((peak + low) / 2));  // halfway through the decay
    CHECK(rate(110) == doctest::Approx(low));
    CHECK(rate(5000) == doctest::Approx(low));  // past the budget: the minimum
    // A budget shorter than the warm-up (lm --iterations 30 with --warmup 100): warm-up only.
    const LearningRate short_run = budget_cosine_decay(peak, 100, TrainingBudget::steps(30), low);
    for (std::uint64_t s : {0, 15, 29}) CHECK(short_run(s) == doctest::Approx(peak * double(s + 1) / 101));
    // No warm-up: the first update is at the peak.
    CHECK(budget_cosine_decay(peak, 0, TrainingBudget::steps(4), low)(0) == doctest::Approx(peak));
    CHECK(budget_cosine_decay(peak, 0, TrainingBudget::steps(4), low)(2) == doctest::Approx((peak + low) / 2));
}

TEST_CASE("a time budget reads its clock from the first update asked, one reading per update, shared by copies") {
    const FakeClock fake;
    fake.set(1000);
    const TrainingBudget budget = TrainingBudget::seconds(100, fake.clock());
    const double peak = 1e-3, low = 1e-4;
    const LearningRate rate = budget_cosine_decay(peak, 2, budget, low);
    const LearningRate copy = rate;               // what a learner holds, while the caller prints its own
    fake.set(1500);                               // the setup before the first update is not counted
    CHECK(rate(0) == doctest::Approx(peak / 3));  // the warm-up counts updates
    CHECK(budget.spent(0) == 0.0);                // the clock started at the first update asked
    fake.set(1510);
    CHECK(rate(1) == doctest::Approx(peak * 2 / 3));
    fake.set(1525);  // a quarter of the budget: (1 + cos(pi / 4)) / 2 of the way from low to peak
    const double quarter = low + (peak - low) * (1 + std::cos(std::numbers::pi / 4)) / 2;
    CHECK(rate(2) == doctest::Approx(quarter).epsilon(1e-12));
    fake.set(1540);
    CHECK(copy(2) == doctest::Approx(quarter).epsilon(1e-12));  // update 2's time, read when first asked
    CHECK(budget.spent(2) == doctest::Approx(0.25));
    CHECK(copy(3) == doctest::Approx(low + (peak - low) * (1 + std::cos(std::numbers::pi * 0.4)) / 2));
    fake.set(1550);
    CHECK(budget.spent(4) == doctest::Approx(0.5));
    CHECK(rate(4) == doctest::Approx((peak + low) / 2));
    fake.set(1700);  // past the budget: the minimum, and spent goes on past 1
    CHECK(rate(5) == doctest::Approx(low));
    CHECK(budget.spent(6) == doctest::Approx(2.0));
    CHECK(budget.counts_seconds());
    CHECK_FALSE(budget.counts_steps());

    // Without a clock given, the steady clock: a day's budget has spent almost nothing yet.
    const TrainingBudget day = TrainingBudget::seconds(86400);
    CHECK(day.spent(0) == 0.0);
    CHECK(day.spent(1) >= 0.0);
    CHECK(day.spent(1) < 0.01);
}

TEST_CASE("budget_linear_decay with steps or seconds, whichever is spent first, and a cap") {
    const FakeClock fake;
    const double peak = 2e-3;
    // The formula written out: the warm-up's rise times what is left of the budget.
    auto expected = [&](double s, double warmup, double spent) {
        const double rise = warmup > 0 ? std::min(1.0, (s + 1) / warmup) : 1.0;
        return peak * rise * (1.0 - std::min(1.0, spent));
    };
    const TrainingBudget budget = TrainingBudget::steps_or_seconds(200, 60, fake.clock());
    const LearningRate rate = budget_linear_decay(peak, 10, budget);
    CHECK(rate(0) == doctest::Approx(expected(0, 10, 0)));  // the clock starts here
    fake.set(3);                                            // 5 % of the time, 2.5 % of the steps
    CHECK(rate(5) == doctest::Approx(expected(5, 10, 0.05)));
    fake.set(6);  // 10 % of the time, 25 % of the steps: the steps are spent first
    CHECK(rate(50) == doctest::Approx(expected(50, 10, 0.25)));
    CHECK(budget.spent(50) == doctest::Approx(0.25));
    fake.set(45);  // 75 % of the time
    CHECK(rate(60) == doctest::Approx(expected(60, 10, 0.75)));
    fake.set(90);
    CHECK(rate(61) == 0.0);  // the time is up: the rate has reached 0
    // A capped budget shares the clock and keeps a tenth of the rate past its end.
    const TrainingBudget capped = budget.at_most(0.9);
    CHECK(capped.spent(62) == doctest::Approx(0.9));
    CHECK(budget_linear_decay(peak, 10, capped)(62) == doctest::Approx(peak * 0.1));
    CHECK(budget.spent(62) == doctest::Approx(1.5));
    // Steps alone, no warm-up: s / steps spent.
    const LearningRate steps = budget_linear_decay(peak, 0, TrainingBudget::steps(8));
    for (std::uint64_t s : {0, 2, 7, 8, 9}) CHECK(steps(s) == doctest::Approx(expected(double(s), 0, double(s) / 8)));
    // No budget: the warm-up, then the peak for good.
    const LearningRate unbounded = budget_linear_decay(peak, 4, TrainingBudget{});
    CHECK(unbounded(1) == doctest::Approx(peak / 2));
    CHECK(unbounded(100000) == doctest::Approx(peak));
}

TEST_CASE("a learner reads a budget schedule at its step count") {
    Variable x = input_variable({2}, "x");
    Parameter w = parameter(xt::xarray<float>{1.0f, -1.0f}, "w");
    Variable loss = square(w - x);
    Session session({loss}, {w});
    const xt::xarray<float> rows{{0.5f, 0.25f}, {1.0f, 2.0f}};
    const LearningRate rate = budget_cosine_decay(0.1, 2, TrainingBudget::steps(6), 0.01);
    const auto learner = sgd({w}, rate);
    for (std::uint64_t s = 0; s < 8; ++s) {
        CHECK(learner->learning_rate() == doctest::Approx(get_lr(double(s), 0.1, 2, 6, 0.01)));
        session.forward({{x, Value::batch(rows)}});
        session.backward();
        learner->update(session);
    }
}

TEST_CASE("budget schedules refuse budgets and rates they cannot follow") {
    CHECK_THROWS_WITH_AS(TrainingBudget::seconds(0), doctest::Contains("must be finite and positive"), UserError);
    CHECK_THROWS_AS(TrainingBudget::seconds(std::nan("")), UserError);
    CHECK_THROWS_AS(TrainingBudget::steps_or_seconds(10, -1), UserError);
    CHECK_THROWS_WITH_AS(TrainingBudget::steps(10).at_most(0), doctest::Contains("not in (0, 1]"), UserError);
    CHECK_THROWS_AS(TrainingBudget::steps(10).at_most(1.5), UserError);
    CHECK_THROWS_WITH_AS(budget_cosine_decay(1e-3, 0, TrainingBudget::steps(10), 1e-2),
                         doctest::Contains("budget_cosine_decay: final_lr"), UserError);
    CHECK_THROWS_AS(budget_cosine_decay(-1, 0, TrainingBudget::steps(10)), UserError);
    CHECK_THROWS_WITH_AS(budget_linear_decay(std::nan(""), 0, TrainingBudget{}),
                         doctest::Contains("budget_linear_decay: peak"), UserError);
}
