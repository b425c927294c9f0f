// Trainer and ProgressPrinter: loss goes down on a tiny regression, test_minibatch changes nothing,
// and the printer writes epoch lines (and a '\r' bar only when live).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include <loom.hpp>

using namespace loom;

namespace {

struct Regression {
    Variable x = input_variable({2}, "x");
    Variable y = input_variable({1}, "y");
    Parameter w = parameter({2, 1}, zeros(), "w");
    Parameter b = parameter({1}, zeros(), "b");
    Variable z = times(x, w) + b;
    Variable loss = square(z - y);
    Variable metric = abs(z - y);

    // y = 2 x0 - x1 + 1 on a fixed minibatch of 8 (the i-th of 4 minibatches).
    Bindings minibatch(std::size_t i) const {
        xt::xarray<float> xs = xt::zeros<float>({8, 2}), ys = xt::zeros<float>({8, 1});
        for (std::size_t n = 0; n < 8; ++n) {
            xs(n, 0) = static_cast<float>((n + 3 * i) % 5) * 0.5f - 1.0f;
            xs(n, 1) = static_cast<float>((2 * n + i) % 7) * 0.3f - 0.9f;
            ys(n, 0) = 2 * xs(n, 0) - xs(n, 1) + 1;
        }
        return {{x, Value::batch(xs)}, {y, Value::batch(ys)}};
    }
};

}  // namespace

TEST_CASE("trainer: loss decreases on a tiny regression") {
    Regression m;
    Trainer t(m.loss, m.metric, sgd({m.w, m.b}, 0.1));
    const MinibatchResult first = t.test_minibatch(m.minibatch(0));
    CHECK(first.loss_count == 8);
    CHECK(first.metric_count == 8);
    CHECK(first.loss_sum > 0);
    double last = 0;
    for (int epoch = 0; epoch < 60; ++epoch)
        for (std::size_t i = 0; i < 4; ++i) last = t.train_minibatch(m.minibatch(i)).average_loss();
    CHECK(last < first.average_loss() * 1e-3);
    CHECK(t.total_samples_seen() == 60 * 4 * 8);
    CHECK(t.learner().step_count() == 240);
    CHECK(m.w.value()(0, 0) == doctest::Approx(2.0).epsilon(1e-2));
    CHECK(m.b.value()(0) == doctest::Approx(1.0).epsilon(1e-2));

    // test_minibatch evaluates without changing anything.
    const auto w_before = m.w.value();
    const MinibatchResult r = t.test_minibatch(m.minibatch(1));
    CHECK(r.average_metric() < 0.05);
    CHECK(m.w.value() == w_before);
    CHECK(t.learner().step_count() == 240);
}

TEST_CASE("trainer: a minibatch result holds the sums a direct evaluation gives") {
    Regression m;
    xt::xarray<float> w0 = xt::zeros<float>({2, 1});
    w0(0, 0) = 0.5f;
    w0(1, 0) = 0.25f;
    m.w.set_value(w0);
    Trainer t(m.loss, m.metric, sgd({m.w, m.b}, 0.0));
    const Bindings in = m.minibatch(2);
    const auto out = evaluate({m.loss, m.metric}, in);
    const MinibatchResult r = t.train_minibatch(in);
    CHECK(r.loss_sum == doctest::Approx(xt::sum(out[m.loss].rows())()));
    CHECK(r.metric_sum == doctest::Approx(xt::sum(out[m.metric].rows())()));
    // A learning rate of zero leaves the parameters alone.
    CHECK(m.w.value()(0, 0) == 0.5f);
}

TEST_CASE("trainer: without a metric and with errors for bad arguments") {
    Regression m;
    Trainer t(m.loss, Variable(), adam({m.w, m.b}, 0.01));
    const MinibatchResult r = t.train_minibatch(m.minibatch(0));
    CHECK(r.metric_count == 0);
    CHECK(r.average_metric() == 0.0);
    CHECK_THROWS_AS(Trainer(m.loss, m.metric, nullptr), UserError);
    CHECK_THROWS_AS(Trainer(Variable(), m.metric, sgd({m.w}, 0.1)), UserError);
}

TEST_CASE("progress printer: epoch lines only when not live") {
    std::ostringstream out;
    ProgressOptions o;
    o.tag = "train";
    o.num_epochs = 2;
    o.live = false;
    ProgressPrinter p(o, out);
    CHECK_FALSE(p.live());
    p.update({4.0, 4, 1.0, 4});
    p.update({2.0, 4, 0.0, 4});
    const MinibatchResult total = p.end_epoch();
    CHECK(total.loss_count == 8);
    CHECK(total.average_loss() == doctest::Approx(0.75));
    const std::string text = out.str();
    CHECK(text.find('\r') == std::string::npos);
    CHECK(text.find("[train] epoch 1 of 2: loss = 0.750000 * 8, metric = 0.125000 * 8, ") == 0);
    CHECK(text.find("samples/s") != std::string::npos);
    CHECK(text.back() == '\n');
    CHECK(p.epoch() == 2);
}

TEST_CASE("progress printer: every-N-minibatch lines") {
    std::ostringstream out;
    ProgressOptions o;
    o.print_every_n_minibatches = 2;
    o.live = false;
    ProgressPrinter p(o, out);
    for (int i = 0; i < 5; ++i) p.update({1.0 * (i + 1), 1, 0.0, 0});
    p.end_epoch();
    const std::string text = out.str();
    CHECK(text.find(" minibatch 1-2: loss = 1.500000 * 2\n") != std::string::npos);
    CHECK(text.find(" minibatch 3-4: loss = 3.500000 * 2\n") != std::string::npos);
    CHECK(text.find("epoch 1: loss = 3.000000 * 5, ") != std::string::npos);
}

TEST_CASE("progress printer: live bar redrawn in place with an ETA") {
    std::ostringstream out;
    ProgressOptions o;
    o.epoch_size = 10;
    o.live = true;
    o.redraw_seconds = 0.0;
    ProgressPrinter p(o, out);
    p.update({1.0, 5, 0.0, 0});
    const std::string bar = out.str();
    CHECK(bar.front() == '\r');
    CHECK(bar.find(" 50% 5/10 ") != std::string::npos);
    CHECK(bar.find("samples/s") != std::string::npos);
    CHECK(bar.find("ETA") != std::string::npos);
    CHECK(bar.find('\n') == std::string::npos);
    p.end_epoch();
    const std::string text = out.str();
    // The bar is wiped before the epoch line, which ends the output with a newline.
    const auto epoch_line = text.rfind("epoch 1: loss");
    REQUIRE(epoch_line != std::string::npos);
    CHECK(text[epoch_line - 1] == '\r');
    CHECK(text.back() == '\n');
}

TEST_CASE("session: a released gradient is gone until the next backward, which gives it again") {
    Regression m;
    Session s({m.loss}, {m.w, m.b});
    CHECK_THROWS_WITH_AS(s.gradient(m.w), doctest::Contains("no gradient for"), UserError);
    s.forward(m.minibatch(0));
    s.backward();
    // d/db sum (z - y)^2 at w = b = 0 is sum 2 (0 - y) = -2 sum y, computed from the minibatch.
    double sum_y = 0;
    for (std::size_t n = 0; n < 8; ++n) {
        const double x0 = static_cast<double>(n % 5) * 0.5 - 1.0, x1 = static_cast<double>((2 * n) % 7) * 0.3 - 0.9;
        sum_y += 2 * x0 - x1 + 1;
    }
    CHECK(s.gradient(m.b).dense[0] == doctest::Approx(-2 * sum_y));
    s.release_gradients();
    CHECK_THROWS_WITH_AS(s.gradient(m.b), doctest::Contains("released"), UserError);
    s.forward(m.minibatch(0));
    s.backward();
    CHECK(s.gradient(m.b).dense[0] == doctest::Approx(-2 * sum_y));  // zeroed again, not added to stale memory
}

namespace {

xt::xarray<float> column(float a, float b) {
    xt::xarray<float> c = xt::zeros<float>({2, 1});
    c(0, 0) = a;
    c(1, 0) = b;
    return c;
}

// A regression with a second term |u v| written as sqrt(square(u v)): its value is finite
// everywhere, but at u = 0 its derivative is 2 * 0 * (0.5 / 0) = NaN, so a minibatch with u = 0
// has a finite loss and a NaN gradient for v (and finite ones for w and b).
struct Guarded {
    Variable x = input_variable({2}, "x");
    Variable y = input_variable({1}, "y");
    Variable u = input_variable({2}, "u");
    Parameter w = parameter(column(0.3f, -0.2f), "w");
    Parameter b = parameter(xt::xarray<float>{0.1f}, "b");
    Parameter v = parameter(column(0.5f, 0.4f), "v");
    Variable loss = square(times(x, w) + b - y) + 0.01 * sqrt(square(times(u, v)));

    enum class Kind { good, nan_input, nan_gradient };
    Bindings minibatch(std::size_t i, Kind kind = Kind::good) const {
        xt::xarray<float> xs = xt::zeros<float>({8, 2}), ys = xt::zeros<float>({8, 1}), us = xt::zeros<float>({8, 2});
        for (std::size_t n = 0; n < 8; ++n) {
            xs(n, 0) = static_cast<float>((n + 3 * i) % 5) * 0.5f - 1.0f;
            xs(n, 1) = static_cast<float>((2 * n + i) % 7) * 0.3f - 0.9f;
            ys(n, 0) = 2 * xs(n, 0) - xs(n, 1) + 1;
            us(n, 0) = kind == Kind::nan_gradient ? 0.0f : 1.0f + static_cast<float>(n % 3);
            us(n, 1) = kind == Kind::nan_gradient ? 0.0f : 0.5f;
        }
        if (kind == Kind::nan_input) xs(3, 1) = std::numeric_limits<float>::quiet_NaN();
        return {{x, Value::batch(xs)}, {y, Value::batch(ys)}, {u, Value::batch(us)}};
    }
    std::vector<Parameter> params() const { return {w, b, v}; }
};

// Sets the inter-op threads for a scope.
struct Threads {
    int previous = inter_op_threads();
    explicit Threads(int n) { set_inter_op_threads(n); }
    ~Threads() { set_inter_op_threads(previous); }
};

bool all_finite(const Parameter& p) {
    const auto v = p.value();
    return std::all_of(v.begin(), v.end(), [](float e) { return std::isfinite(e); });
}

}  // namespace

TEST_CASE("trainer: a non-finite loss or gradient skips the update and leaves parameters and learner alone") {
    for (int threads : {1, 2}) {
        for (double clip : {0.0, 5.0}) {  // without clipping, 2 threads update each parameter early
            CAPTURE(threads);
            CAPTURE(clip);
            const Threads scope(threads);
            LearnerOptions o;
            o.gradient_clipping_norm = clip;
            // The reference never sees the bad minibatches; the guarded run must end identical.
            Guarded ref;
            Trainer tr(ref.loss, Variable(), adam(ref.params(), 0.05, 0.9, 0.999, 1e-8, o));
            Guarded m;
            Trainer t(m.loss, Variable(), adam(m.params(), 0.05, 0.9, 0.999, 1e-8, o));
            using Kind = Guarded::Kind;
            for (std::size_t i = 0; i < 2; ++i)
                CHECK(t.train_minibatch(m.minibatch(i)).loss_sum == tr.train_minibatch(ref.minibatch(i)).loss_sum);

            const MinibatchResult nan_loss = t.train_minibatch(m.minibatch(2, Kind::nan_input));
            CHECK(std::isnan(nan_loss.loss_sum));
            CHECK(nan_loss.skipped_updates == 1);
            const MinibatchResult nan_grad = t.train_minibatch(m.minibatch(2, Kind::nan_gradient));
            CHECK(std::isfinite(nan_grad.loss_sum));
            CHECK(nan_grad.skipped_updates == 1);
            CHECK(std::isnan(t.learner().last_gradient_norm()));
            CHECK(t.skipped_updates() == 2);
            CHECK(t.learner().step_count() == 2);
            for (const auto& p : m.params()) CHECK(all_finite(p));

            // Adam's moments and step count are untouched too: the next steps are the reference's.
            for (std::size_t i = 2; i < 5; ++i) {
                const MinibatchResult r = t.train_minibatch(m.minibatch(i));
                CHECK(r.skipped_updates == 0);
                CHECK(r.loss_sum == tr.train_minibatch(ref.minibatch(i)).loss_sum);  // bitwise
            }
            for (std::size_t k = 0; k < 3; ++k) CHECK(m.params()[k].value() == ref.params()[k].value());
            CHECK(t.total_samples_seen() == tr.total_samples_seen());
            CHECK(tr.skipped_updates() == 0);
        }
    }
}

TEST_CASE("trainer: on_non_finite stop throws and changes nothing while ignore lets NaN spread") {
    Guarded m;
    TrainerOptions stop;
    stop.on_non_finite = NonFiniteAction::stop;
    Trainer t(m.loss, Variable(), sgd(m.params(), 0.1), stop);
    t.train_minibatch(m.minibatch(0));
    const auto w = m.w.value(), v = m.v.value();
    CHECK_THROWS_WITH_AS(t.train_minibatch(m.minibatch(1, Guarded::Kind::nan_input)),
                         doctest::Contains("the loss is nan (8 items, after 1 updates)"), UserError);
    CHECK_THROWS_WITH_AS(t.train_minibatch(m.minibatch(1, Guarded::Kind::nan_gradient)),
                         doctest::Contains("the gradient norm is nan"), UserError);
    CHECK(m.w.value() == w);
    CHECK(m.v.value() == v);
    CHECK(t.skipped_updates() == 2);
    CHECK(t.train_minibatch(m.minibatch(1)).skipped_updates == 0);  // and training goes on
    CHECK(t.learner().step_count() == 2);

    Guarded n;
    TrainerOptions ignore;
    ignore.on_non_finite = NonFiniteAction::ignore;
    Trainer ti(n.loss, Variable(), sgd(n.params(), 0.1), ignore);
    ti.train_minibatch(n.minibatch(1, Guarded::Kind::nan_gradient));
    CHECK(ti.skipped_updates() == 0);
    CHECK_FALSE(all_finite(n.v));  // what the guard prevents
    CHECK(all_finite(n.w));
}

TEST_CASE("trainer: train_minibatch runs in training mode and test_minibatch in inference mode") {
    Variable x = input_variable({50}, "x");
    Parameter w = parameter(xt::xarray<float>(xt::ones<float>({50, 1})), "w");
    Variable loss = times(dropout(x, 0.5, 3), w);  // with dropout active, about half of x is dropped
    Trainer t(loss, Variable(), sgd({w}, 0.0));
    xt::xarray<float> xs = xt::ones<float>({2, 50});
    const Bindings in{{x, Value::batch(xs)}};
    CHECK(t.test_minibatch(in).loss_sum == 100.0);  // inference: the sum of x, exactly
    // Each kept element counts 1 / (1 - 0.5) = 2: an even sum, and one of 100 only when exactly
    // half are kept (8 % of the time), so not in five minibatches running.
    bool other_than_inference = false;
    for (int i = 0; i < 5; ++i) {
        const double trained = t.train_minibatch(in).loss_sum;
        CHECK(std::fmod(trained, 2.0) == 0.0);
        other_than_inference |= trained != 100.0;
    }
    CHECK(other_than_inference);
    CHECK_FALSE(is_training());  // the mode is restored
}

TEST_CASE("progress printer: a skipped update is counted and left out of the averages") {
    std::ostringstream out;
    ProgressOptions o;
    o.live = false;
    ProgressPrinter p(o, out);
    p.update({4.0, 4, 0.0, 0});
    MinibatchResult skipped{std::numeric_limits<double>::quiet_NaN(), 4, 0.0, 0};
    skipped.skipped_updates = 1;
    p.update(skipped);
    const MinibatchResult total = p.end_epoch();
    CHECK(total.loss_count == 4);
    CHECK(total.skipped_updates == 1);
    CHECK(out.str().find("epoch 1: loss = 1.000000 * 4, 1 update skipped (non-finite loss or gradient), ") !=
          std::string::npos);
}

TEST_CASE("learner: a cancelled update moves nothing and the next one opens") {
    Guarded m;
    auto learner = adam(m.params(), 0.05);
    Session s({m.loss}, m.params());
    s.forward(m.minibatch(0));
    s.backward();
    const auto w = m.w.value();
    learner->begin({1.0, true});
    CHECK_FALSE(learner->accept(0, gradient_view(s, 0)));       // held for finish (the norm comes first)
    CHECK_THROWS_AS(learner->update(s, {1.0}), InternalError);  // still open
    learner->cancel();                                          // as when backward throws
    CHECK(learner->step_count() == 0);
    CHECK(m.w.value() == w);
    CHECK(learner->update(s, {1.0, true}));
    CHECK(learner->step_count() == 1);
    CHECK_FALSE(m.w.value() == w);
}

TEST_CASE("trainer: a binding error names train_minibatch or test_minibatch, the call the user made") {
    Regression m;
    Trainer t(m.loss, m.metric, sgd({m.w, m.b}, 0.1));
    const auto w_before = m.w.value();
    Bindings unbound = m.minibatch(0);
    unbound.erase(m.y);
    Bindings wrong_shape = m.minibatch(0);
    wrong_shape[m.x] = Value::batch(xt::zeros<float>({8, 3}));
    const auto message = [](auto call) -> std::string {
        try {
            call();
        } catch (const UserError& e) {
            return e.what();
        }
        return "nothing thrown";
    };
    for (const Bindings& in : {unbound, wrong_shape}) {
        const std::string train = message([&] { t.train_minibatch(in); });
        const std::string test = message([&] { t.test_minibatch(in); });
        CHECK_MESSAGE(train.rfind("Trainer::train_minibatch: input '", 0) == 0, train);
        CHECK_MESSAGE(test.rfind("Trainer::test_minibatch: input '", 0) == 0, test);
    }
    CHECK(message([&] { t.train_minibatch(unbound); }).find("input 'y'") != std::string::npos);
    CHECK(m.w.value() == w_before);
    CHECK(t.learner().step_count() == 0);
}
