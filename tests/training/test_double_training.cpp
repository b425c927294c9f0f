// Training in double: parameters stored in double (parameter(..., DType::f64), to_precision),
// sessions that run in their parameters' precision, learners whose rules run in double. A model
// trained in double agrees with the same model in float to float tolerance, and two steps of sgd
// agree with a computation written out here in double to double tolerance.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <random>

#include <loom.hpp>
#include "test_support.hpp"

using namespace loom;
using loom::testing::expect_user_error;

namespace {

// Whether to_precision and parameter() accept a precision of type P.
template <class P>
concept takes_precision = requires(std::vector<Parameter> ps, P p) {
    to_precision(ps, p);
    parameter(Shape({2}), uniform(1.0), "r", p);
};

// A small recurrent model: h_t = tanh(x_t W + past_value(h)_t U + b), loss = squared error of
// sequence::last(h) V against a target. Its values are given, so a float and a double build start
// from the same numbers.
struct Model {
    Variable x = sequence::input_variable({3}, "x");
    Variable y = input_variable({2}, "y");
    Parameter w, u, b, v;
    Variable loss;

    explicit Model(DType precision) {
        Rng rng(5);
        w = parameter(xt::cast<float>(glorot_uniform()(Shape{3, 4}, rng)), "w");
        u = parameter(xt::cast<float>(glorot_uniform()(Shape{4, 4}, rng)), "u");
        b = parameter(xt::cast<float>(uniform(0.1)(Shape{4}, rng)), "b");
        v = parameter(xt::cast<float>(glorot_uniform()(Shape{4, 2}, rng)), "v");
        to_precision(params(), precision);
        Variable p = placeholder({4}, "h_prev");
        Variable h = tanh(times(x, w) + times(past_value(p), u) + b);
        h.replace_placeholders({{p, h}});
        loss = reduce_sum(square(times(sequence::last(h), v) - y), 0);
    }
    std::vector<Parameter> params() const { return {w, u, b, v}; }

    // Minibatch i: 3 sequences of lengths 2..4, float data (a double session converts it exactly).
    Bindings minibatch(std::size_t i) const {
        Rng rng(100 + i);
        std::normal_distribution<float> d(0.0f, 1.0f);
        std::vector<xt::xarray<float>> seqs;
        xt::xarray<float> ys = xt::zeros<float>({3, 2});
        for (std::size_t n = 0; n < 3; ++n) {
            xt::xarray<float> s = xt::zeros<float>({2 + (n + i) % 3, std::size_t{3}});
            for (auto& e : s) e = d(rng);
            seqs.push_back(s);
            ys(n, 0) = std::sin(s(0, 0));
            ys(n, 1) = 0.5f * s(0, 1);
        }
        return {{x, Value::sequences(seqs)}, {y, Value::batch(ys)}};
    }
};

// Trains `steps` minibatches and returns each loss.
std::vector<double> train(Trainer& t, const Model& m, std::size_t steps) {
    std::vector<double> losses;
    for (std::size_t i = 0; i < steps; ++i) losses.push_back(t.train_minibatch(m.minibatch(i)).average_loss());
    return losses;
}

double max_difference(const Parameter& a, const Parameter& b) {
    return xt::amax(xt::abs(a.value<double>() - b.value<double>()))();
}

// A [n, 1] array ({{a}, {b}} is ambiguous to xtensor).
xt::xarray<double> column(const std::vector<double>& v) {
    xt::xarray<double> out = xt::zeros<double>({v.size(), std::size_t{1}});
    for (std::size_t i = 0; i < v.size(); ++i) out(i, 0) = v[i];
    return out;
}

using MakeLearner = std::unique_ptr<Learner> (*)(const Model&);

}  // namespace

TEST_CASE("double parameters store, convert and refuse the other element type") {
    Parameter p = parameter({2, 3}, uniform(1.0), "p", DType::f64);
    CHECK(p.dtype() == DType::f64);
    CHECK(p.data<double>().size() == 6);
    expect_user_error([&] { p.data(); }, {"'p'", "stored in double", "data<double>"});

    const xt::xarray<double> third = {{1.0 / 3, 2.0 / 3, 1.0}, {-1.0 / 3, 0.1, 0.2}};
    p.set_value(third);
    CHECK(p.value<double>()(0, 0) == 1.0 / 3);  // exact, not rounded through float
    CHECK(p.value()(0, 0) == static_cast<float>(1.0 / 3));
    CHECK(static_cast<double>(p.value()(0, 0)) != 1.0 / 3);

    Parameter q = parameter(xt::xarray<float>{0.1f, -2.5f}, "q");
    CHECK(q.dtype() == DType::f32);
    to_precision({q}, DType::f64);
    CHECK(q.dtype() == DType::f64);
    CHECK(q.data<double>()(0) == static_cast<double>(0.1f));  // float to double is exact
    q.set_value(xt::xarray<double>{1.0 / 3, 0.25});
    to_precision({q}, DType::f32);
    CHECK(q.data<float>()(0) == static_cast<float>(1.0 / 3));
    CHECK(q.data<float>()(1) == 0.25f);
    // A precision left to loom (what evaluate takes) is refused: by type, before the program runs.
    static_assert(takes_precision<DType>);
    static_assert(!takes_precision<std::optional<DType>>);
}

TEST_CASE("a session runs in its parameters precision follows conversions and names mixed ones") {
    Variable x = input_variable({2}, "x");
    Parameter a = parameter({2, 2}, glorot_uniform(), "a", DType::f64);
    Parameter c = parameter({2, 1}, glorot_uniform(), "c");
    Variable loss = times(times(x, a), c);
    expect_user_error(
        [&] {
            Session s({loss}, {a, c});
        },
        {"mixes float parameters", "'c'", "double parameters", "'a'", "to_precision"});

    to_precision({c}, DType::f64);
    Session s({loss}, {a, c});
    CHECK(s.dtype() == DType::f64);
    const Bindings in{{x, Value::batch(xt::xarray<float>{{1, 2}, {3, 4}})}};
    s.forward(in);
    CHECK(s.value(loss).dtype() == DType::f64);
    s.backward();
    // d(sum over items of x a c)/dc = sum_n (x_n a)^T, computed here in double.
    const xt::xarray<double> av = a.value<double>();
    const double dc0 = (1 * av(0, 0) + 2 * av(1, 0)) + (3 * av(0, 0) + 4 * av(1, 0));
    CHECK(s.gradient<double>(c).dense[0] == doctest::Approx(dc0).epsilon(1e-14));
    expect_user_error([&] { s.gradient(c); }, {"gradient<float>", "runs in double", "gradient<double>"});

    // evaluate chooses double for a double model by itself.
    CHECK(evaluate({loss}, in)[loss].dtype() == DType::f64);

    // Converted since: the session follows its parameters, all of them or a UserError.
    to_precision({a}, DType::f32);
    expect_user_error([&] { s.forward(in); }, {"mixes float parameters", "'a'", "double parameters", "'c'"});
    to_precision({c}, DType::f32);
    s.forward(in);
    CHECK(s.dtype() == DType::f32);
    CHECK(s.value(loss).dtype() == DType::f32);
}

TEST_CASE("k steps in double agree with float to float tolerance for every learner") {
    const std::pair<const char*, MakeLearner> learners[] = {
        {"sgd", [](const Model& m) { return sgd(m.params(), 0.1); }},
        {"adam", [](const Model& m) { return adam(m.params(), 0.01); }},
        {"rmsprop", [](const Model& m) { return rmsprop(m.params(), 0.01); }},
        {"momentum_sgd", [](const Model& m) { return momentum_sgd(m.params(), 0.05); }},
        {"nesterov", [](const Model& m) { return nesterov(m.params(), 0.05); }},
        {"adamw", [](const Model& m) { return adamw(m.params(), 0.01); }},
        {"adadelta", [](const Model& m) { return adadelta(m.params(), 1.0); }},
        {"fsadagrad", [](const Model& m) { return fsadagrad(m.params(), 0.01); }},
        {"adagrad with clipping and l2",
         [](const Model& m) {
             LearnerOptions o;
             o.gradient_clipping_norm = 0.5;
             o.l2_weight_decay = 1e-3;
             return adagrad(m.params(), 0.05, 1e-8, o);
         }},
    };
    for (const auto& learner : learners) {
        const auto& name = learner.first;
        const auto& make = learner.second;
        CAPTURE(name);
        Model f(DType::f32), d(DType::f64);
        Trainer tf(f.loss, Variable(), make(f)), td(d.loss, Variable(), make(d));
        CHECK(tf.session().dtype() == DType::f32);
        CHECK(td.session().dtype() == DType::f64);
        const auto lf = train(tf, f, 12), ld = train(td, d, 12);
        for (std::size_t i = 0; i < lf.size(); ++i) CHECK(ld[i] == doctest::Approx(lf[i]).epsilon(1e-4));
        CHECK(ld.back() < ld.front());  // it learns
        for (std::size_t k = 0; k < 4; ++k) {
            CAPTURE(k);
            CHECK(max_difference(f.params()[k], d.params()[k]) < 1e-4);
            CHECK(max_difference(f.params()[k], d.params()[k]) > 0);  // the double run did not round to float
        }
        CHECK(d.w.dtype() == DType::f64);
    }
}

TEST_CASE("two steps of sgd in double match a computation by hand in double") {
    // loss per item = (x_n . w - t_n)^2; the Trainer averages over the N = 2 items, so
    // dL/dw = (2 / N) sum_n (x_n . w - t_n) x_n, and w <- w - lr dL/dw.
    Variable x = input_variable({2}, "x");
    Variable t = input_variable({1}, "t");
    Parameter w = parameter({2, 1}, uniform(1.0), "w", DType::f64);
    w.set_value(column({0.1, -0.3}));
    Variable loss = square(times(x, w) - t);
    Trainer trainer(loss, Variable(), sgd({w}, 0.1));
    const xt::xarray<double> xs = {{0.7, -1.3}, {2.1, 0.4}}, ts = column({0.5, -0.2});

    double w0 = 0.1, w1 = -0.3;
    for (int step = 0; step < 2; ++step) {
        double g0 = 0, g1 = 0, loss_sum = 0;
        for (int n = 0; n < 2; ++n) {
            const double r = xs(n, 0) * w0 + xs(n, 1) * w1 - ts(n, 0);
            loss_sum += r * r;
            g0 += r * xs(n, 0);
            g1 += r * xs(n, 1);
        }
        w0 -= 0.1 * (2.0 / 2) * g0;
        w1 -= 0.1 * (2.0 / 2) * g1;
        const MinibatchResult r = trainer.train_minibatch({{x, Value::batch(xs)}, {t, Value::batch(ts)}});
        CHECK(r.loss_sum == doctest::Approx(loss_sum).epsilon(1e-14));
    }
    const xt::xarray<double> got = w.value<double>();
    CHECK(std::abs(got(0, 0) - w0) < 1e-15);
    CHECK(std::abs(got(1, 0) - w1) < 1e-15);
    // Float arithmetic would be off by ~1e-8 here: the check above is one float cannot pass.
    CHECK(std::abs(static_cast<double>(static_cast<float>(w0)) - w0) > 1e-10);
}

TEST_CASE("embedding row gradients in double with lazy adam") {
    // A table of 6 rows of which a minibatch uses rows 1 and 4: its gradient is kept by rows
    // (RowGradient<double>) and lazy Adam leaves every other row exactly as it was.
    auto build = [](DType precision) {
        Rng rng(11);
        Parameter table = parameter(xt::cast<float>(uniform(0.5)(Shape{6, 3}, rng)), "table");
        Parameter out = parameter(xt::cast<float>(uniform(0.5)(Shape{3, 1}, rng)), "out");
        to_precision({table, out}, precision);
        return std::pair{table, out};
    };
    Variable ids = sequence::input_variable({1}, "ids");
    const Value tokens = Value::index_sequences({{1, 4, 4}, {1}});
    LearnerOptions lazy;
    lazy.lazy_sparse_rows = true;
    std::vector<xt::xarray<double>> trained;
    for (DType precision : {DType::f32, DType::f64}) {
        auto [table, out] = build(precision);
        Variable loss = square(times(sequence::reduce_sum(embedding(ids, table)), out) - 1.0);
        const xt::xarray<double> before = table.value<double>();
        Trainer trainer(loss, Variable(), adam({table, out}, 0.05, 0.9, 0.999, 1e-8, lazy));
        for (int k = 0; k < 5; ++k) trainer.train_minibatch({{ids, tokens}});
        if (precision == DType::f64) {
            trainer.session().forward({{ids, tokens}});
            trainer.session().backward();
            const RowGradient<double>* rows = trainer.session().gradient<double>(table).by_rows;
            REQUIRE(rows != nullptr);
            CHECK(rows->sorted == std::vector<std::size_t>{1, 4});
        }
        const xt::xarray<double> after = table.value<double>();
        for (std::size_t r : {0, 2, 3, 5})
            for (std::size_t e = 0; e < 3; ++e) CHECK(after(r, e) == before(r, e));
        CHECK(after(1, 0) != before(1, 0));
        trained.push_back(after);
    }
    CHECK(xt::amax(xt::abs(trained[0] - trained[1]))() < 1e-4);
    CHECK(xt::amax(xt::abs(trained[0] - trained[1]))() > 0);
}

TEST_CASE("gradient checks of a double model perturb a copy not the parameters") {
    Model m(DType::f64);
    const xt::xarray<double> before = m.u.value<double>();
    const GradientReport report = check_gradients(m.loss, m.minibatch(0), {m.w, m.u, m.b, m.v});
    CHECK_MESSAGE(report.ok, report.str());
    CHECK(report.checked == 12 + 16 + 4 + 8);
    CHECK(xt::all(xt::equal(m.u.value<double>(), before)));
}
