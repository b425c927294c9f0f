// Trainer and ProgressPrinter: loss goes down on a tiny regression, test_minibatch changes nothing,
// and the printer writes epoch lines (and a '\r' bar only when live).
#include <doctest/doctest.h>

#include <sstream>

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
    CHECK(r.loss_sum == doctest::Approx(xt::sum(out[m.loss].batch())()));
    CHECK(r.metric_sum == doctest::Approx(xt::sum(out[m.metric].batch())()));
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
    CHECK(s.gradient(m.b)[0] == doctest::Approx(-2 * sum_y));
    s.release_gradients();
    CHECK_THROWS_WITH_AS(s.gradient(m.b), doctest::Contains("released"), UserError);
    s.forward(m.minibatch(0));
    s.backward();
    CHECK(s.gradient(m.b)[0] == doctest::Approx(-2 * sum_y));  // zeroed again, not added to stale memory
}
