// fit: epochs over a source (against a hand-written loop), evaluation every N steps, the best
// parameters kept, early stopping, exact resumption mid-epoch (with dropout and Adam), the progress
// output, and the errors.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>

#include <loom.hpp>
#include "test_support.hpp"
#include "training/fit.hpp"

using namespace loom;
using loom::testing::expect_user_error;
using loom::testing::TempDir;

namespace {

// A small regression model with dropout on its hidden layer; `seed` draws the initial values, so a
// model built with another seed starts elsewhere and must be overwritten by a resumed checkpoint.
struct Model {
    Variable x = input_variable({3}, "x");
    Variable y = input_variable({2}, "y");
    Parameter w1, b1, w2;
    Variable loss, clean_loss;

    explicit Model(std::uint64_t seed) {
        Rng rng(seed);
        w1 = parameter(xt::cast<float>(glorot_uniform()(Shape{3, 4}, rng)), "w1");
        b1 = parameter(xt::cast<float>(uniform(0.1)(Shape{4}, rng)), "b1");
        w2 = parameter(xt::cast<float>(glorot_uniform()(Shape{4, 2}, rng)), "w2");
        loss = square(times(dropout(tanh(times(x, w1) + b1), 0.3, 7), w2) - y);
    }
    std::vector<Parameter> params() const { return {w1, b1, w2}; }

    // Deterministic data, different for each (epoch, index): the source fit asks for.
    Bindings minibatch(std::size_t epoch, std::size_t index) const {
        Rng rng(1000 + 100 * epoch + index);
        std::normal_distribution<float> d(0.0f, 1.0f);
        xt::xarray<float> xs = xt::zeros<float>({5, 3}), ys = xt::zeros<float>({5, 2});
        for (auto& v : xs) v = d(rng);
        for (std::size_t k = 0; k < 5; ++k)
            ys(k, 0) = std::sin(xs(k, 0)) + 0.5f * xs(k, 1), ys(k, 1) = xs(k, 2) * xs(k, 0);
        return {{x, Value::batch(xs)}, {y, Value::batch(ys)}};
    }
    EpochSource source(std::size_t per_epoch) const {
        return {per_epoch, [this](std::size_t e, std::size_t i) { return minibatch(e, i); }, 5 * per_epoch};
    }
};

std::unique_ptr<Trainer> make_trainer(const Model& m) {
    LearnerOptions o;
    o.gradient_clipping_norm = 2.0;
    return std::make_unique<Trainer>(m.loss, Variable(), adam(m.params(), 0.02, 0.9, 0.999, 1e-8, o));
}

// Scores from a script, one per evaluation; the parameters at each evaluation are recorded.
struct ScriptedEvaluation {
    const Model& model;
    std::vector<double> scores;
    std::vector<std::vector<xt::xarray<float>>> seen;
    Evaluation operator()() {
        std::vector<xt::xarray<float>> values;
        for (const auto& p : model.params()) values.push_back(p.value());
        seen.push_back(values);
        return scores.at(seen.size() - 1);
    }
};

std::vector<xt::xarray<float>> values_of(const Model& m) {
    std::vector<xt::xarray<float>> v;
    for (const auto& p : m.params()) v.push_back(p.value());
    return v;
}

}  // namespace

TEST_CASE("fit runs its epochs over the source as a hand-written loop does") {
    Model a(1), b(1);
    auto ta = make_trainer(a), tb = make_trainer(b);
    std::vector<double> fit_losses;
    FitOptions o;
    o.max_epochs = 3;
    o.on_step = [&](std::size_t, const MinibatchResult& r) { fit_losses.push_back(r.loss_sum); };
    const FitResult r = fit(*ta, a.source(4), o);
    CHECK(r.steps == 12);
    CHECK(r.epochs == 3);
    CHECK(r.stopped == FitStop::epochs);
    CHECK(r.evaluations.empty());
    CHECK(std::isnan(r.best_score()));
    // The same trainer setup, driven by hand in the order fit must follow.
    std::vector<double> loop_losses;
    REQUIRE(r.epoch_losses.size() == 3);
    for (std::size_t e = 0; e < 3; ++e) {
        double sum = 0, count = 0;
        for (std::size_t i = 0; i < 4; ++i) {
            const MinibatchResult m = tb->train_minibatch(b.minibatch(e, i));
            loop_losses.push_back(m.loss_sum), sum += m.loss_sum, count += static_cast<double>(m.loss_count);
        }
        CHECK(r.epoch_losses[e] == doctest::Approx(sum / count).epsilon(1e-12));
    }
    CHECK(fit_losses == loop_losses);
    CHECK(values_of(a) == values_of(b));
}

TEST_CASE("fit evaluates every N steps and ends with the best evaluation's parameters") {
    TempDir dir("fit_best");
    for (const bool in_file : {false, true}) {
        CAPTURE(in_file);
        Model m(1);
        auto t = make_trainer(m);
        ScriptedEvaluation script{m, {0.1, 0.5, 0.3, 0.2, 0.4}, {}};
        FitOptions o;
        o.max_epochs = 4;  // 16 steps, evaluations after steps 3, 6, 9, 12, 15
        o.evaluate_every = 3;
        if (in_file) o.best_path = dir.file("best");
        const FitResult r = fit(*t, m.source(4), o, std::ref(script));
        REQUIRE(r.evaluations.size() == 5);
        CHECK(r.steps == 16);
        const std::vector<std::size_t> steps{3, 6, 9, 12, 15}, epochs{0, 1, 2, 2, 3};
        for (std::size_t k = 0; k < 5; ++k) {
            CHECK(r.evaluations[k].step == steps[k]);
            CHECK(r.evaluations[k].epoch == epochs[k]);
            CHECK(r.evaluations[k].improved == (k <= 1));
        }
        CHECK(r.best == 1);
        CHECK(r.best_score() == 0.5);
        CHECK(values_of(m) == script.seen[1]);
        CHECK_FALSE(script.seen[1] == script.seen[4]);  // it did train after the best evaluation
    }
}

TEST_CASE("fit stops early after patience evaluations without improvement") {
    Model m(1);
    auto t = make_trainer(m);
    // 0.5 again is no improvement; the 0.9 after the second miss is never asked for.
    ScriptedEvaluation script{m, {0.1, 0.5, 0.5, 0.4, 0.9}, {}};
    FitOptions o;
    o.max_epochs = 10;
    o.patience = 2;
    const FitResult r = fit(*t, m.source(3), o, std::ref(script));
    CHECK(r.stopped == FitStop::early);
    CHECK(r.evaluations.size() == 4);
    CHECK(script.seen.size() == 4);
    CHECK(r.steps == 12);  // 4 epochs of 3, one evaluation after each
    CHECK(r.best == 1);
    CHECK(values_of(m) == script.seen[1]);

    // A NaN score is never an improvement; min_improvement makes a small gain a miss.
    Model n(1);
    auto tn = make_trainer(n);
    ScriptedEvaluation nan_script{n, {std::numeric_limits<double>::quiet_NaN(), 0.2, 0.25, 0.3}, {}};
    o.min_improvement = 0.06;
    o.max_epochs = 4;
    const FitResult rn = fit(*tn, n.source(3), o, std::ref(nan_script));
    REQUIRE(rn.evaluations.size() == 4);
    CHECK_FALSE(rn.evaluations[0].improved);
    CHECK(rn.evaluations[1].improved);
    CHECK_FALSE(rn.evaluations[2].improved);  // 0.25 is not more than 0.2 + 0.06
    CHECK(rn.evaluations[3].improved);        // 0.3 is
    CHECK(rn.best == 3);
    CHECK(rn.stopped == FitStop::epochs);
}

TEST_CASE("fit resumed from a checkpoint mid-epoch gives the losses of an uninterrupted run") {
    TempDir dir("fit_resume");
    FitOptions o;
    o.max_epochs = 3;  // 5 minibatches per epoch
    o.evaluate_every = 4;
    o.patience = 3;
    // A real evaluation: minus the loss on fixed data, in inference mode (dropout off).
    auto evaluation_of = [](const Model& m, Trainer& t) {
        return [&m, &t] { return -t.test_minibatch(m.minibatch(99, 0)).average_loss(); };
    };
    auto recorder = [](std::vector<double>& losses) {
        return [&losses](std::size_t, const MinibatchResult& r) { losses.push_back(r.loss_sum); };
    };

    Model a(1);
    auto ta = make_trainer(a);
    std::vector<double> whole;
    o.on_step = recorder(whole);
    const FitResult ra = fit(*ta, a.source(5), o, evaluation_of(a, *ta));
    REQUIRE(whole.size() == 15);

    o.checkpoint_path = dir.file("fit.ckpt");
    std::vector<double> parts;
    o.on_step = recorder(parts);
    {
        Model b(1);
        auto tb = make_trainer(b);
        o.max_steps = 7;  // stops at minibatch 2 of epoch 1, between two evaluations
        const FitResult rb = fit(*tb, b.source(5), o, evaluation_of(b, *tb));
        CHECK(rb.stopped == FitStop::max_steps);
        CHECK(rb.steps == 7);
        CHECK(rb.evaluations.size() == 1);
    }
    Model c(2);  // other initial values: all of them must come from the checkpoint
    auto tc = make_trainer(c);
    o.max_steps = 0;
    const FitResult rc = fit(*tc, c.source(5), o, evaluation_of(c, *tc));
    CHECK(rc.resumed);
    CHECK(parts == whole);  // bit for bit: parameters, Adam's moments, dropout's generator, position
    CHECK(rc.steps == ra.steps);
    CHECK(rc.epoch_losses == ra.epoch_losses);
    REQUIRE(rc.evaluations.size() == ra.evaluations.size());
    for (std::size_t k = 0; k < ra.evaluations.size(); ++k) {
        CHECK(rc.evaluations[k].score == ra.evaluations[k].score);
        CHECK(rc.evaluations[k].train_loss == ra.evaluations[k].train_loss);
    }
    CHECK(rc.best == ra.best);
    CHECK(values_of(c) == values_of(a));  // both restored to the same best evaluation

    // Resuming a finished run trains nothing more.
    std::vector<double> none;
    o.on_step = recorder(none);
    const FitResult rd = fit(*tc, c.source(5), o, evaluation_of(c, *tc));
    CHECK(none.empty());
    CHECK(rd.steps == 15);
}

TEST_CASE("fit refuses an empty source and a checkpoint it did not write or that does not fit") {
    TempDir dir("fit_errors");
    Model m(1);
    auto t = make_trainer(m);
    FitOptions o;
    expect_user_error([&] { fit(*t, m.source(0), o); }, {"fit", "no minibatches"});

    o.checkpoint_path = dir.file("plain.ckpt");
    t->save_checkpoint(o.checkpoint_path);
    Model other(2);
    auto to = make_trainer(other);
    const auto before = values_of(other);
    expect_user_error([&] { fit(*to, other.source(4), o); }, {"plain.ckpt", "not written by fit"});
    CHECK(values_of(other) == before);  // refused before anything changed

    o.checkpoint_path = dir.file("fit.ckpt");
    o.max_steps = 3;
    fit(*t, m.source(5), o);  // stops at minibatch 3 of epoch 0
    o.max_steps = 0;
    expect_user_error([&] { fit(*to, other.source(2), o); }, {"fit.ckpt", "minibatch 3", "2 per epoch"});
}

TEST_CASE("fit refuses at the start a checkpoint whose best parameters' file is missing") {
    TempDir dir("fit_best_missing");
    Model m(1);
    auto t = make_trainer(m);
    FitOptions o;
    o.max_epochs = 2;
    o.evaluate_every = 2;
    o.checkpoint_path = dir.file("fit.ckpt");
    o.max_steps = 3;  // one evaluation, so a best one, then stopped
    ScriptedEvaluation first{m, {0.5}, {}};
    fit(*t, m.source(5), o, std::ref(first));
    REQUIRE(std::filesystem::exists(o.checkpoint_path + ".best"));
    // Copied elsewhere without its .best file: refused before a step, naming the missing file.
    const std::string copy = dir.file("copy.ckpt");
    std::filesystem::copy_file(o.checkpoint_path, copy);
    o.checkpoint_path = copy;
    o.max_steps = 0;
    Model other(2);
    auto to = make_trainer(other);
    const auto before = values_of(other);
    ScriptedEvaluation never{other, {}, {}};
    expect_user_error([&] { fit(*to, other.source(5), o, std::ref(never)); },
                      {"copy.ckpt.best", "missing", "copy.ckpt"});
    CHECK(values_of(other) == before);
    CHECK(never.seen.empty());
    // Without restore_best the best parameters are never read back: the run goes on.
    o.restore_best = false;
    ScriptedEvaluation later{other, {0.1, 0.2, 0.3, 0.4}, {}};
    CHECK(fit(*to, other.source(5), o, std::ref(later)).resumed);
}

TEST_CASE("fit draws the progress bar and prints a line per epoch and per evaluation") {
    Model m(1);
    auto t = make_trainer(m);
    std::ostringstream out;
    FitOptions o;
    o.max_epochs = 2;
    o.progress_stream = &out;
    o.progress.live = true;
    o.progress.redraw_seconds = 0;
    o.progress.tag = "toy";
    ScriptedEvaluation script{m, {0.25, 0.125}, {}};
    fit(*t, m.source(3), o, [&] {
        const double score = script().score;
        return Evaluation(score, "held-out score " + std::to_string(script.seen.size()));
    });
    const std::string s = out.str();
    CHECK(s.find("\r[toy] epoch 1 [") != std::string::npos);  // the live bar, with its fraction
    CHECK(s.find("[toy] epoch 1 of 2: loss = ") != std::string::npos);
    CHECK(s.find("[toy] epoch 2 of 2: loss = ") != std::string::npos);
    CHECK(s.find("[toy] evaluation at step 3 (epoch 1): held-out score 1 (best)") != std::string::npos);
    CHECK(s.find("[toy] evaluation at step 6 (epoch 2): held-out score 2, best 0.2500 at step 3") != std::string::npos);
}

TEST_CASE("fit with max_seconds stops on time, and evaluate_at_end scores the last parameters once") {
    Model m(1);
    auto t = make_trainer(m);
    // A source of 10,000 minibatches, each taking at least 5 ms: a budget of 0.2 s stops it long before.
    EpochSource slow = m.source(10000);
    slow.minibatch = [&m](std::size_t e, std::size_t i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return m.minibatch(e, i);
    };
    ScriptedEvaluation scripted{m, {0.1, 0.2, 0.2}, {}};
    std::function<Evaluation()> evaluate = std::ref(scripted);
    FitOptions o;
    o.max_seconds = 0.2;
    o.evaluate_every = 1000;  // never reached in the budget: only the end evaluates
    o.evaluate_at_end = true;
    const FitResult r = fit(*t, slow, o, evaluate);
    CHECK(r.stopped == FitStop::max_seconds);
    CHECK(r.steps >= 1);
    CHECK(r.steps < 10000);
    REQUIRE(r.evaluations.size() == 1);
    CHECK(r.evaluations[0].step == r.steps);
    CHECK(r.best == 0);
    CHECK(values_of(m) == scripted.seen[0]);  // the only evaluation is the best: nothing restored

    // Epochs done: one evaluation at the end unless the last step was evaluated already.
    for (const std::size_t every : {3, 4}) {
        CAPTURE(every);
        Model e(2);
        auto te = make_trainer(e);
        ScriptedEvaluation s{e, {0.5, 0.1}, {}};
        std::function<Evaluation()> f = std::ref(s);
        FitOptions eo;
        eo.evaluate_every = every;
        eo.evaluate_at_end = true;
        const FitResult re = fit(*te, e.source(4), eo, f);
        CHECK(re.stopped == FitStop::epochs);
        REQUIRE(re.evaluations.size() == (every == 3 ? 2u : 1u));
        CHECK(re.evaluations.back().step == 4);
        CHECK(re.evaluations.back().epoch == 0);
        // Without it, 4 steps evaluated every 3 are scored at step 3 only.
        if (every == 3) {
            Model n(2);
            auto tn = make_trainer(n);
            ScriptedEvaluation sn{n, {0.5, 0.1}, {}};
            std::function<Evaluation()> fn = std::ref(sn);
            eo.evaluate_at_end = false;
            CHECK(fit(*tn, n.source(4), eo, fn).evaluations.size() == 1);
        }
    }

    // Stopped by max_steps (an interruption to resume): no evaluation at the end.
    Model i(3);
    auto ti = make_trainer(i);
    ScriptedEvaluation si{i, {0.5}, {}};
    std::function<Evaluation()> fi = std::ref(si);
    FitOptions io;
    io.evaluate_every = 100;
    io.evaluate_at_end = true;
    io.max_steps = 2;
    const FitResult ri = fit(*ti, i.source(4), io, fi);
    CHECK(ri.stopped == FitStop::max_steps);
    CHECK(ri.evaluations.empty());
}

TEST_CASE("fit stops before the step at which stop_requested says so, saves its checkpoint and resumes from it") {
    TempDir dir("fit_stop");
    FitOptions o;
    o.max_epochs = 2;  // 4 minibatches per epoch
    o.checkpoint_path = dir.file("fit.ckpt");
    std::vector<double> whole, parts;
    {
        Model a(1);
        auto ta = make_trainer(a);
        FitOptions plain = o;
        plain.checkpoint_path.clear();
        plain.on_step = [&](std::size_t, const MinibatchResult& r) { whole.push_back(r.loss_sum); };
        fit(*ta, a.source(4), plain);
    }
    std::size_t asked = 0;
    o.on_step = [&](std::size_t, const MinibatchResult& r) { parts.push_back(r.loss_sum); };
    o.stop_requested = [&] { return ++asked == 6; };  // asked before steps 1..6: stops after 5
    {
        Model b(1);
        auto tb = make_trainer(b);
        const FitResult rb = fit(*tb, b.source(4), o);
        CHECK(rb.stopped == FitStop::interrupted);
        CHECK(rb.steps == 5);
        CHECK(asked == 6);
    }
    o.stop_requested = {};
    Model c(2);
    auto tc = make_trainer(c);
    const FitResult rc = fit(*tc, c.source(4), o);
    CHECK(rc.resumed);
    CHECK(rc.stopped == FitStop::epochs);
    CHECK(parts == whole);  // the interrupted run's checkpoint goes on bit for bit
}
