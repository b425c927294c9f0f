// The Trainer's GradientReduction hook (what loom::distributed implements over MPI), with a fake
// "twin" reduction standing for two processes that computed exactly the same share: it doubles the
// sums and every gradient, so the averaged update must equal, bit for bit, a plain Trainer's.
#include <doctest/doctest.h>

#include <algorithm>
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
    void ready(const Session& session, std::size_t i) override {
        reported.push_back(i);
        const auto g = session.gradient(i);
        float* data = const_cast<float*>(g.data());
        for (std::size_t k = 0; k < g.size(); ++k) data[k] *= 2;
    }
    void finish(const Session&) override { ++finishes; }
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
