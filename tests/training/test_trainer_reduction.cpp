// The Trainer's GradientReduction hook (what loom::distributed implements over MPI), with a fake
// "twin" reduction standing for two processes that computed exactly the same share: it doubles the
// sums and every gradient, so the averaged update must equal, bit for bit, a plain Trainer's.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include <loom.hpp>

using namespace loom;

namespace {

struct Twin final : GradientReduction {
    int combines = 0, finishes = 0, failures = 0;
    std::vector<std::size_t> reported;
    std::string failure;

    MinibatchResult combine(const MinibatchResult& local) override {
        ++combines;
        MinibatchResult r = local;
        r.loss_sum *= 2, r.loss_count *= 2, r.metric_sum *= 2, r.metric_count *= 2;
        return r;
    }
    void ready(Session& session, std::size_t i) override {
        reported.push_back(i);
        for (float& v : session.mutable_gradient(i).dense) v *= 2;
    }
    void finish(Session&) override { ++finishes; }
    void failed(const std::string& what) override {
        ++failures;
        failure = what;
    }
};

struct Regression {
    Variable x = input_variable({2}, "x");
    Variable y = input_variable({1}, "y");
    Parameter w = parameter({2, 1}, constant_initializer(0.3), "w");
    Parameter b = parameter({1}, zeros(), "b");
    Variable loss = square(times(x, w) + b - y);

    Bindings minibatch(std::size_t i) const {
        xt::xarray<float> xs = xt::zeros<float>({6, 2}), ys = xt::zeros<float>({6, 1});
        for (std::size_t n = 0; n < 6; ++n) {
            xs(n, 0) = static_cast<float>((n + 2 * i) % 5) * 0.4f - 1.0f;
            xs(n, 1) = static_cast<float>((3 * n + i) % 7) * 0.2f - 0.5f;
            ys(n, 0) = xs(n, 0) - 2 * xs(n, 1) + 0.5f;
        }
        return {{x, Value::batch(xs)}, {y, Value::batch(ys)}};
    }
};

}  // namespace

TEST_CASE("trainer reduction: a twin reduction gives the plain update and sees every gradient once") {
    Regression plain_model, twin_model;
    Trainer plain(plain_model.loss, Variable(), adam({plain_model.w, plain_model.b}, 0.05));
    auto twin = std::make_shared<Twin>();
    TrainerOptions options;
    options.reduction = twin;
    Trainer shared(twin_model.loss, Variable(), adam({twin_model.w, twin_model.b}, 0.05), options);
    for (std::size_t step = 0; step < 5; ++step) {
        const MinibatchResult p = plain.train_minibatch(plain_model.minibatch(step));
        twin->reported.clear();
        const MinibatchResult s = shared.train_minibatch(twin_model.minibatch(step));
        CHECK(s.loss_count == 2 * p.loss_count);  // the global sums come back
        CHECK(s.loss_sum == 2 * p.loss_sum);
        std::sort(twin->reported.begin(), twin->reported.end());
        CHECK(twin->reported == std::vector<std::size_t>{0, 1});
        CHECK(twin_model.w.value() == plain_model.w.value());
        CHECK(twin_model.b.value() == plain_model.b.value());
    }
    CHECK(twin->combines == 5);
    CHECK(twin->finishes == 5);
    CHECK(shared.total_samples_seen() == 2 * plain.total_samples_seen());

    // Forward throws: the reduction hears of it instead of combine, and the error still reaches the
    // caller; nothing changes.
    Bindings bad = twin_model.minibatch(0);
    bad[twin_model.y] = Value::batch(xt::xarray<float>(xt::zeros<float>({6, 3})));
    const auto w_before = twin_model.w.value();
    CHECK_THROWS_AS(shared.train_minibatch(bad), UserError);
    CHECK(twin->failures == 1);
    CHECK(!twin->failure.empty());
    CHECK(twin->combines == 5);
    CHECK(twin_model.w.value() == w_before);
}

namespace {

// A twin that shares the update out (UpdateShare) with every parameter stepped on this "process".
struct SteppingTwin final : GradientReduction, UpdateShare {
    int updates = 0;
    MinibatchResult combine(const MinibatchResult& local) override { return local; }
    void ready(Session&, std::size_t) override {}
    void finish(Session&) override {}
    void failed(const std::string&) override {}
    UpdateShare* share() override { return this; }
    std::vector<char> stepped_here(const Learner& learner) override {
        ++updates;
        return std::vector<char>(learner.parameters().size(), 1);
    }
    void share_norms(std::vector<double>&) override {}
};

// A share of the update fixed by the test: its flags, and what it does to the norms.
struct FixedShare final : UpdateShare {
    std::vector<char> mine;
    std::function<void(std::vector<double>&)> norms;
    FixedShare(std::vector<char> m, std::function<void(std::vector<double>&)> n)
        : mine(std::move(m)), norms(std::move(n)) {}
    std::vector<char> stepped_here(const Learner&) override { return mine; }
    void share_norms(std::vector<double>& square_sums) override { norms(square_sums); }
};

// Learner::update sharing out as `share` says.
bool update_share(Learner& learner, Session& session, std::vector<char> mine, double scale, bool only_if_finite,
                  std::function<void(std::vector<double>&)> norms) {
    FixedShare share(std::move(mine), std::move(norms));
    UpdateOptions options{scale, only_if_finite};
    options.share = &share;
    return learner.update(session, options);
}

}  // namespace

TEST_CASE("trainer reduction: a reduction that takes the update over gives the learner's own update") {
    Regression plain_model, twin_model;
    LearnerOptions clip;
    clip.gradient_clipping_norm = 0.1;  // the global norm decides the step
    Trainer plain(plain_model.loss, Variable(), adam({plain_model.w, plain_model.b}, 0.05, 0.9, 0.999, 1e-8, clip));
    auto twin = std::make_shared<SteppingTwin>();
    TrainerOptions options;
    options.reduction = twin;
    Trainer stepped(twin_model.loss, Variable(), adam({twin_model.w, twin_model.b}, 0.05, 0.9, 0.999, 1e-8, clip),
                    options);
    for (std::size_t step = 0; step < 4; ++step) {
        plain.train_minibatch(plain_model.minibatch(step));
        stepped.train_minibatch(twin_model.minibatch(step));
        CHECK(twin_model.w.value() == plain_model.w.value());
        CHECK(twin_model.b.value() == plain_model.b.value());
        CHECK(stepped.learner().last_gradient_norm() == plain.learner().last_gradient_norm());
    }
    CHECK(twin->updates == 4);
    CHECK(stepped.learner().step_count() == 4);
    CHECK(stepped.reduction() == twin);
}

TEST_CASE("learner: a shared-out update steps only its parameters and takes the others' norms as given") {
    // Learners on the same gradients: `first` steps w only, told b's squared norm as `second` (b
    // only) reads it; `whole` steps both. Clipping makes the global norm decide the step.
    Regression model;
    Session session({model.loss}, {model.w, model.b});
    session.forward(model.minibatch(1));
    session.backward();
    LearnerOptions clip;
    clip.gradient_clipping_norm = 0.01;
    auto learner = [&] { return adam({model.w, model.b}, 0.05, 0.9, 0.999, 1e-8, clip); };
    const xt::xarray<float> w0 = model.w.value(), b0 = model.b.value();
    double w_sq = 0;  // independently: the sum of w's squared gradient elements
    for (float g : session.gradient(model.w).dense) w_sq += double(g) * double(g);

    auto second = learner();
    double b_read = -1;
    REQUIRE(update_share(*second, session, {0, 1}, 1.0 / 6, true, [&](std::vector<double>& sums) {
        b_read = sums[1];
        sums[0] = w_sq;
    }));
    CHECK(model.w.value() == w0);  // not stepped by `second`
    CHECK(model.b.value() != b0);
    model.b.data() = b0;

    auto first = learner();
    std::vector<double> seen;
    REQUIRE(update_share(*first, session, {1, 0}, 1.0 / 6, true, [&](std::vector<double>& sums) {
        seen = sums;
        sums[1] = b_read;
    }));
    REQUIRE(seen.size() == 2);
    CHECK(seen[0] == doctest::Approx(w_sq).epsilon(1e-6));
    CHECK(seen[1] == 0.0);  // not read by `first`
    CHECK(model.b.value() == b0);
    const xt::xarray<float> w_first = model.w.value();
    CHECK(w_first != w0);
    CHECK(first->step_count() == 1);
    CHECK(first->last_gradient_norm() == doctest::Approx(std::sqrt(w_sq + b_read) / 6).epsilon(1e-6));
    CHECK(first->last_gradient_norm() > clip.gradient_clipping_norm);  // clipped

    // The whole update from the same start: w bit for bit as `first` stepped it, the same norm.
    model.w.data() = w0;
    auto whole = learner();
    REQUIRE(whole->update(session, {1.0 / 6, true}));
    CHECK(model.w.value() == w_first);
    CHECK(whole->last_gradient_norm() == first->last_gradient_norm());

    // A non-finite norm given for the other parameter: nothing changes, the step count stays.
    auto third = learner();
    const xt::xarray<float> w_now = model.w.value();
    CHECK_FALSE(update_share(*third, session, {1, 0}, 1.0 / 6, true,
                             [](std::vector<double>& sums) { sums[1] = std::nan(""); }));
    CHECK(model.w.value() == w_now);
    CHECK(third->step_count() == 0);
    CHECK(std::isnan(third->last_gradient_norm()));
    // One flag per parameter, or an error.
    CHECK_THROWS_AS(update_share(*third, session, {1}, 1.0, false, [](std::vector<double>&) {}), InternalError);
}
