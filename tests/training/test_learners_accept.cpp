// The learner's step given its gradients one by one (Learner::begin, accept, finish), as the
// Trainer drives it: the same step as Learner::update for every rule and option, its misuse
// refused, and with inter-op threads a parameter stepped while backward is still running.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <loom.hpp>

#include "gradcheck.hpp"
#include "graph/op.hpp"

using namespace loom;

namespace {

// An embedding table (its gradient kept by rows), a dense weight, and a parameter the loss does
// not use (its gradient is zero).
struct Model {
    Variable ids = sequence::input_variable({1}, "ids");
    Parameter table = parameter(testing::random_tensor({6, 2}, 1), "table");
    Parameter w = parameter(testing::random_tensor({2, 3}, 2), "w");
    Parameter unused = parameter(testing::random_tensor({4}, 3), "unused");
    Variable loss = sequence::reduce_sum(square(times(embedding(ids, table), w) - constant(xt::xarray<float>{0.5f})));
    std::vector<Parameter> params() const { return {table, w, unused}; }
    Bindings minibatch(std::size_t k) const {
        const std::vector<std::vector<std::size_t>> ids_of[2] = {{{1, 2, 1}, {4}}, {{0, 2}, {5, 5, 3}}};
        return {{ids, Value::index_sequences(ids_of[k % 2])}};
    }
};

using Make = std::function<std::unique_ptr<Learner>(std::vector<Parameter>, LearnerOptions)>;

const std::vector<std::pair<const char*, Make>>& nine_learners() {
    static const std::vector<std::pair<const char*, Make>> all{
        {"sgd", [](auto p, auto o) { return sgd(p, 0.1, o); }},
        {"momentum", [](auto p, auto o) { return momentum_sgd(p, 0.05, 0.9, o); }},
        {"nesterov", [](auto p, auto o) { return nesterov(p, 0.05, 0.9, o); }},
        {"adagrad", [](auto p, auto o) { return adagrad(p, 0.5, 1e-8, o); }},
        {"rmsprop", [](auto p, auto o) { return rmsprop(p, 0.01, 0.9, 1e-8, o); }},
        {"adam", [](auto p, auto o) { return adam(p, 0.05, 0.9, 0.999, 1e-8, o); }},
        {"adamw", [](auto p, auto o) { return adamw(p, 0.05, 0.9, 0.999, 1e-8, 1e-2, o); }},
        {"adadelta", [](auto p, auto o) { return adadelta(p, 1.0, 0.95, 1e-6, o); }},
        {"fsadagrad", [](auto p, auto o) { return fsadagrad(p, 0.05, 0.9, 0.999, true, o); }},
    };
    return all;
}

struct Stepped {
    std::vector<xt::xarray<float>> values;
    double norm = 0;
    std::uint64_t steps = 0;
};

// Three steps of `learner` on the model's gradients, each taken by `step`.
Stepped three_steps(Model& m, Learner& learner, const std::function<bool(Learner&, Session&)>& step) {
    Session s({m.loss}, m.params());
    for (std::size_t k = 0; k < 3; ++k) {
        s.forward(m.minibatch(k));
        s.backward();
        REQUIRE(step(learner, s));
    }
    Stepped out{{}, learner.last_gradient_norm(), learner.step_count()};
    for (const Parameter& p : m.params()) out.values.push_back(p.value());
    return out;
}

}  // namespace

TEST_CASE("learner: begin, accept and finish step exactly as update, every rule and option") {
    LearnerOptions plain, clipped, lazy;
    clipped.gradient_clipping_norm = 0.05;  // the global norm decides every step
    clipped.l2_weight_decay = 0.01;
    lazy.lazy_sparse_rows = true;
    const UpdateOptions options{0.25, true};
    for (const auto& learner : nine_learners()) {
        const auto& name = learner.first;
        const auto& make = learner.second;
        for (const LearnerOptions& o : {plain, clipped, lazy}) {
            CAPTURE(std::string(name));
            CAPTURE(o.gradient_clipping_norm);
            CAPTURE(o.lazy_sparse_rows);
            Model by_update, by_accept;
            auto a = make(by_update.params(), o), b = make(by_accept.params(), o);
            const Stepped want =
                three_steps(by_update, *a, [&](Learner& l, Session& s) { return l.update(s, options); });
            const Stepped got = three_steps(by_accept, *b, [&](Learner& l, Session& s) {
                l.begin(options);
                for (std::size_t i = 3; i-- > 0;) {  // in any order
                    CHECK(l.waiting(i));
                    CHECK_FALSE(l.accept(i, gradient_view(s, i)));  // held for the check
                    CHECK_FALSE(l.waiting(i));
                }
                return l.finish();
            });
            for (std::size_t i = 0; i < 3; ++i) CHECK(got.values[i] == want.values[i]);
            CHECK(got.values[1] != Model().w.value());  // it did step
            CHECK(got.norm == want.norm);
            CHECK(got.steps == 3);
            CHECK(want.steps == 3);
        }
    }
}

TEST_CASE("learner: a step given its gradients refuses misuse and a cancelled one moves nothing") {
    Model m;
    auto learner = adam(m.params(), 0.05);
    Session s({m.loss}, m.params());
    s.forward(m.minibatch(0));
    s.backward();
    CHECK_THROWS_AS(learner->accept(0, gradient_view(s, 0)), InternalError);  // not begun
    CHECK_THROWS_AS(learner->finish(), InternalError);
    learner->begin();
    CHECK_THROWS_AS(learner->begin(), InternalError);  // one at a time
    learner->accept(0, gradient_view(s, 0));
    CHECK_THROWS_AS(learner->accept(0, gradient_view(s, 0)), InternalError);  // twice
    CHECK_THROWS_AS(learner->accept(3, gradient_view(s, 0)), InternalError);  // out of range
    CHECK_THROWS_AS(learner->finish(), InternalError);                        // w and unused wait
    CHECK_FALSE(learner->waiting(0));                                         // the failed finish closed the step
    const xt::xarray<float> w0 = m.w.value();
    learner->begin();
    learner->accept(1, gradient_view(s, 1));
    learner->cancel();
    CHECK(m.w.value() == w0);
    CHECK(learner->step_count() == 0);
    CHECK(learner->update(s));  // the next one opens
    CHECK(learner->step_count() == 1);
    CHECK(m.w.value() != w0);
}

namespace {

// Set by the rule below when it steps the output weight; the probe's backward waits for it.
std::atomic<bool> output_stepped{false}, stepped_during_backward{false};
constexpr std::size_t output_size = 24;  // the output weight's [8, 3]

// sgd that says when it stepped the output weight.
class Recording final : public LearnerRule<Recording> {
public:
    explicit Recording(std::vector<Parameter> p) : LearnerRule("recording", std::move(p), 0.1, {}, 0) {}
    template <class T>
    void rule(const StepOf<T>& s) {
        for (std::size_t j = 0; j < s.size; ++j) s.w[j] -= s.lr * s.grad[j] * s.scale;
        if (s.size == output_size) output_stepped = true;
    }
};

// The identity, whose backward (which runs after the output weight's gradient is final, and before
// the hidden weight's) waits up to two seconds for the output weight to be stepped.
class WaitForStep final : public OpBase<WaitForStep> {
public:
    std::string name() const override { return "wait_for_step"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override { return in[0]; }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        std::copy_n(c.in[0].data, c.out.size(), c.out.data);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (!output_stepped && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        stepped_during_backward = output_stepped.load();
        if (!c.in_grad[0]) return;
        for (std::size_t e = 0; e < c.out.size(); ++e) c.in_grad[0].data[e] += c.out_grad.data[e];
    }
};

struct Threads {
    int previous = inter_op_threads();
    explicit Threads(int n) { set_inter_op_threads(n); }
    ~Threads() { set_inter_op_threads(previous); }
};

}  // namespace

TEST_CASE("trainer: with inter-op threads and no check, a parameter is stepped while backward runs") {
    const Threads two(2);
    Variable x = input_variable({4}, "x");
    Parameter hidden = parameter(testing::random_tensor({4, 8}, 4), "hidden");
    Parameter output = parameter(testing::random_tensor({8, 3}, 5), "output");
    const Variable h = Variable(apply_op(std::make_shared<WaitForStep>(), {tanh(times(x, hidden)).node()}, "probe"));
    TrainerOptions ignore;
    ignore.on_non_finite = NonFiniteAction::ignore;  // nothing needs the global norm first
    Trainer t(square(times(h, output)), Variable(), std::make_unique<Recording>(std::vector<Parameter>{hidden, output}),
              ignore);
    const xt::xarray<float> hidden0 = hidden.value();
    output_stepped = false;
    stepped_during_backward = false;
    t.train_minibatch({{x, Value::batch(testing::random_tensor({5, 4}, 6))}});
    CHECK(stepped_during_backward);  // the learner's step came to the parameter, not after backward
    CHECK(output_stepped);
    CHECK(hidden.value() != hidden0);
    CHECK(t.learner().step_count() == 1);
}

TEST_CASE("trainer: the step is the same on one inter-op thread and on two, checked or not, clipped or not") {
    LearnerOptions clipped;
    clipped.gradient_clipping_norm = 0.05;
    for (const LearnerOptions& o : {LearnerOptions{}, clipped}) {
        for (NonFiniteAction action : {NonFiniteAction::skip, NonFiniteAction::ignore}) {
            std::vector<xt::xarray<float>> values[2];
            for (int threads : {1, 2}) {
                const Threads scope(threads);
                Model m;
                TrainerOptions options;
                options.on_non_finite = action;
                Trainer t(m.loss, Variable(), adam(m.params(), 0.05, 0.9, 0.999, 1e-8, o), options);
                for (std::size_t k = 0; k < 3; ++k) t.train_minibatch(m.minibatch(k));
                for (const Parameter& p : m.params()) values[threads - 1].push_back(p.value());
            }
            CHECK(values[0] == values[1]);
        }
    }
}
