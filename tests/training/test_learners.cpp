// Learners: each rule against its update computed by formula in the test (in double), convergence
// on a small least-squares problem, global-norm clipping, L2 decay, schedules, lazy Adam, state.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include <loom.hpp>

using namespace loom;

namespace {

// loss = sum_n sum_j (w_j - x_nj)^2, so d loss / d w_j = sum_n 2 (w_j - x_nj).
struct Quadratic {
    Variable x = input_variable({2}, "x");
    Parameter w = parameter(xt::xarray<float>{0.5f, -1.0f}, "w");
    Variable loss = square(w - x);
    xt::xarray<float> rows{{1.0f, 2.0f}, {-0.5f, 0.25f}};
    Session session{{loss}, {w}};

    std::vector<double> gradient_at(const std::vector<double>& wv) const {
        std::vector<double> g(2, 0.0);
        for (std::size_t n = 0; n < 2; ++n)
            for (std::size_t j = 0; j < 2; ++j) g[j] += 2.0 * (wv[j] - static_cast<double>(rows(n, j)));
        return g;
    }
    void step(Learner& l) {
        session.forward({{x, Value::batch(rows)}});
        session.backward();
        l.update(session);
    }
};

// A tensor of the given shape holding `values` in row-major order (nested braces are ambiguous
// for xtensor when a dimension has size 1).
xt::xarray<float> tensor(const std::vector<std::size_t>& shape, const std::vector<float>& values) {
    xt::xarray<float> t = xt::zeros<float>(shape);
    std::copy(values.begin(), values.end(), t.begin());
    return t;
}

using Rule = std::function<void(std::vector<double>& w, const std::vector<double>& g, std::vector<double>& s0,
                                std::vector<double>& s1, int t)>;

// Runs three steps of the learner and of `rule` (in double) side by side.
void check_against_formula(const std::function<std::unique_ptr<Learner>(Parameter)>& make, const Rule& rule) {
    Quadratic q;
    auto learner = make(q.w);
    std::vector<double> w{0.5, -1.0}, s0(2, 0.0), s1(2, 0.0);
    for (int t = 1; t <= 3; ++t) {
        rule(w, q.gradient_at(w), s0, s1, t);
        q.step(*learner);
        const auto got = q.w.value();
        for (std::size_t j = 0; j < 2; ++j) CHECK(got(j) == doctest::Approx(w[j]).epsilon(1e-5));
    }
    CHECK(learner->step_count() == 3);
}

}  // namespace

TEST_CASE("sgd applies w -= lr * g") {
    check_against_formula([](Parameter w) { return sgd({w}, 0.1); },
                          [](auto& w, const auto& g, auto&, auto&, int) {
                              for (int j = 0; j < 2; ++j) w[j] -= 0.1 * g[j];
                          });
}

TEST_CASE("momentum_sgd keeps a velocity") {
    check_against_formula([](Parameter w) { return momentum_sgd({w}, 0.05, 0.9); },
                          [](auto& w, const auto& g, auto& v, auto&, int) {
                              for (int j = 0; j < 2; ++j) {
                                  v[j] = 0.9 * v[j] + g[j];
                                  w[j] -= 0.05 * v[j];
                              }
                          });
}

TEST_CASE("nesterov looks ahead along the velocity") {
    check_against_formula([](Parameter w) { return nesterov({w}, 0.05, 0.8); },
                          [](auto& w, const auto& g, auto& v, auto&, int) {
                              for (int j = 0; j < 2; ++j) {
                                  v[j] = 0.8 * v[j] + g[j];
                                  w[j] -= 0.05 * (g[j] + 0.8 * v[j]);
                              }
                          });
}

TEST_CASE("adagrad divides by the root of the summed squares") {
    check_against_formula([](Parameter w) { return adagrad({w}, 0.3, 1e-6); },
                          [](auto& w, const auto& g, auto& acc, auto&, int) {
                              for (int j = 0; j < 2; ++j) {
                                  acc[j] += g[j] * g[j];
                                  w[j] -= 0.3 * g[j] / (std::sqrt(acc[j]) + 1e-6);
                              }
                          });
}

TEST_CASE("rmsprop divides by the root of a moving average of squares") {
    check_against_formula([](Parameter w) { return rmsprop({w}, 0.01, 0.95, 1e-6); },
                          [](auto& w, const auto& g, auto& s, auto&, int) {
                              for (int j = 0; j < 2; ++j) {
                                  s[j] = 0.95 * s[j] + 0.05 * g[j] * g[j];
                                  w[j] -= 0.01 * g[j] / (std::sqrt(s[j]) + 1e-6);
                              }
                          });
}

TEST_CASE("adam corrects the bias of both moments") {
    check_against_formula([](Parameter w) { return adam({w}, 0.1, 0.8, 0.9, 1e-7); },
                          [](auto& w, const auto& g, auto& m, auto& v, int t) {
                              for (int j = 0; j < 2; ++j) {
                                  m[j] = 0.8 * m[j] + 0.2 * g[j];
                                  v[j] = 0.9 * v[j] + 0.1 * g[j] * g[j];
                                  const double mhat = m[j] / (1 - std::pow(0.8, t));
                                  const double vhat = v[j] / (1 - std::pow(0.9, t));
                                  w[j] -= 0.1 * mhat / (std::sqrt(vhat) + 1e-7);
                              }
                          });
}

TEST_CASE("adamw decays the weights apart from the moments") {
    check_against_formula([](Parameter w) { return adamw({w}, 0.1, 0.8, 0.9, 1e-7, 0.5); },
                          [](auto& w, const auto& g, auto& m, auto& v, int t) {
                              for (int j = 0; j < 2; ++j) {
                                  w[j] *= 1 - 0.1 * 0.5;
                                  m[j] = 0.8 * m[j] + 0.2 * g[j];
                                  v[j] = 0.9 * v[j] + 0.1 * g[j] * g[j];
                                  w[j] -= 0.1 * (m[j] / (1 - std::pow(0.8, t))) /
                                          (std::sqrt(v[j] / (1 - std::pow(0.9, t))) + 1e-7);
                              }
                          });
    // By hand, step 1 on w0 = 0.5 (g = 2 (0.5 - 1) + 2 (0.5 + 0.5) = 1): the moments' bias
    // corrections make the Adam step lr * sign(g) = 0.1, after the decay 0.5 * 0.95 = 0.475.
    Quadratic q;
    auto l = adamw({q.w}, 0.1, 0.8, 0.9, 1e-7, 0.5);
    q.step(*l);
    CHECK(q.w.value()(0) == doctest::Approx(0.375).epsilon(1e-5));
}

TEST_CASE("decay_matrices_only decays weight matrices and leaves biases and vectors alone") {
    // A loss whose gradient is 0 everywhere (0 times the parameters): Adam's step is then 0, and
    // what changes a weight is the decay alone, by hand: w (1 - lr decay) = 2 (1 - 0.1 0.5) = 1.9.
    Parameter matrix = parameter({2, 2}, constant_initializer(2.0), "matrix");
    Parameter bias = parameter({2}, constant_initializer(2.0), "bias");
    Variable x = input_variable({2}, "x");
    Variable loss = reduce_sum(times(x, matrix) * 0.0 + bias * 0.0);
    for (bool only : {true, false}) {
        CAPTURE(only);
        Session s({loss}, {matrix, bias});
        auto step = [&](Learner& learner) {
            matrix.set_value(xt::xarray<float>({{2.0f, 2.0f}, {2.0f, 2.0f}}));
            bias.set_value(xt::xarray<float>({2.0f, 2.0f}));
            s.forward({{x, Value::batch(xt::xarray<float>({{1.0f, 1.0f}}))}});
            s.backward();
            learner.update(s, {});
        };
        // sgd's coupled L2: w - lr l2 w = 2 - 0.1 0.5 2 = 1.9 as well.
        step(*sgd({matrix, bias}, 0.1, {.l2_weight_decay = 0.5, .decay_matrices_only = only}));
        CHECK(matrix.value()(1, 0) == doctest::Approx(1.9));
        CHECK(bias.value()(1) == doctest::Approx(only ? 2.0 : 1.9));
        step(*adamw({matrix, bias}, 0.1, 0.9, 0.999, 1e-8, 0.5, {.decay_matrices_only = only}));
        CHECK(matrix.value()(1, 0) == doctest::Approx(1.9));
        CHECK(bias.value()(1) == doctest::Approx(only ? 2.0 : 1.9));
    }
}

TEST_CASE("adadelta scales by the ratio of the running step and gradient sizes") {
    check_against_formula([](Parameter w) { return adadelta({w}, 0.5, 0.9, 1e-4); },
                          [](auto& w, const auto& g, auto& g2, auto& d2, int) {
                              for (int j = 0; j < 2; ++j) {
                                  g2[j] = 0.9 * g2[j] + 0.1 * g[j] * g[j];
                                  const double d = std::sqrt(d2[j] + 1e-4) / std::sqrt(g2[j] + 1e-4) * g[j];
                                  d2[j] = 0.9 * d2[j] + 0.1 * d * d;
                                  w[j] -= 0.5 * d;
                              }
                          });
    // By hand, step 1 on w0 = 0.5 with g = 1: G = 0.1, d = sqrt(1e-4) / sqrt(0.1001) = 0.031607,
    // w = 0.5 - 0.5 * 0.031607 = 0.484197.
    Quadratic q;
    auto l = adadelta({q.w}, 0.5, 0.9, 1e-4);
    q.step(*l);
    CHECK(q.w.value()(0) == doctest::Approx(0.484197).epsilon(1e-5));
}

TEST_CASE("fsadagrad normalizes by the smoothed squares and the smoothed count, then adds momentum") {
    auto rule = [](double mu, double vm, bool unit_gain) {
        return [=](auto& w, const auto& g, auto& v, auto& m, int t) {
            for (int j = 0; j < 2; ++j) {
                v[j] = vm * v[j] + (1 - vm) * g[j] * g[j];
                double gj = g[j];
                if (v[j] != 0) gj *= std::min(std::sqrt(1 - std::pow(vm, t)) / std::sqrt(v[j]), 10.0);
                m[j] = mu * m[j] + (unit_gain ? 1 - mu : 1.0) * gj;
                w[j] -= 0.1 * m[j];
            }
        };
    };
    check_against_formula([](Parameter w) { return fsadagrad({w}, 0.1, 0.9, 0.99, true); }, rule(0.9, 0.99, true));
    check_against_formula([](Parameter w) { return fsadagrad({w}, 0.1, 0.5, 0.9, false); }, rule(0.5, 0.9, false));
    // By hand, step 1 with g = 1: V = 0.01 g^2 and sqrt(1 - 0.99) = 0.1, so the normalized gradient is
    // 0.1 / 0.1 = 1; unit-gain momentum keeps 0.1 of it: w = 0.5 - 0.1 * 0.1 = 0.49.
    Quadratic q;
    auto l = fsadagrad({q.w}, 0.1, 0.9, 0.99, true);
    q.step(*l);
    CHECK(q.w.value()(0) == doctest::Approx(0.49).epsilon(1e-5));
}

TEST_CASE("L2 weight decay adds l2 * w to the gradient") {
    LearnerOptions o;
    o.l2_weight_decay = 0.3;
    check_against_formula([&](Parameter w) { return sgd({w}, 0.1, o); },
                          [](auto& w, const auto& g, auto&, auto&, int) {
                              for (int j = 0; j < 2; ++j) w[j] -= 0.1 * (g[j] + 0.3 * w[j]);
                          });
    check_against_formula([&](Parameter w) { return momentum_sgd({w}, 0.05, 0.5, o); },
                          [](auto& w, const auto& g, auto& v, auto&, int) {
                              for (int j = 0; j < 2; ++j) {
                                  v[j] = 0.5 * v[j] + g[j] + 0.3 * w[j];
                                  w[j] -= 0.05 * v[j];
                              }
                          });
}

TEST_CASE("gradient clipping rescales by the global norm over all parameters") {
    // loss = sum(a * x): the gradient of a is x.
    Variable x = input_variable({2}, "x");
    Parameter a = parameter(xt::xarray<float>{1.0f, 2.0f}, "a");
    Session s({element_times(a, x)}, {a});
    const xt::xarray<float> xv{{3.0f, 4.0f}};  // gradient (3, 4), norm 5
    LearnerOptions o;
    o.gradient_clipping_norm = 1.0;
    auto l = sgd({a}, 1.0, o);
    s.forward({{x, Value::batch(xv)}});
    s.backward();
    l->update(s);
    CHECK(l->last_gradient_norm() == doctest::Approx(5.0));
    auto got = a.value();
    CHECK(got(0) == doctest::Approx(1.0 - 3.0 / 5.0));
    CHECK(got(1) == doctest::Approx(2.0 - 4.0 / 5.0));

    // Below the threshold nothing is rescaled.
    o.gradient_clipping_norm = 10.0;
    a.set_value(xt::xarray<float>{1.0f, 2.0f});
    auto l2 = sgd({a}, 1.0, o);
    l2->update(s);
    got = a.value();
    CHECK(got(0) == doctest::Approx(-2.0));
    CHECK(got(1) == doctest::Approx(-2.0));

    // The norm is global: a's gradient (3, 4) and c's (12) together have norm 13, and both are
    // scaled by 1/13 (clipping each alone would give different directions).
    Parameter c = parameter(xt::xarray<float>{0.0f}, "c");
    Variable z = input_variable({1}, "z");
    Session s2({element_times(a, x) + element_times(c, z)}, {a, c});
    a.set_value(xt::xarray<float>{0.0f, 0.0f});
    o.gradient_clipping_norm = 1.0;
    auto l3 = sgd({a, c}, 1.0, o);
    s2.forward({{x, Value::batch(xv)}, {z, Value::batch(tensor({1, 1}, {6.0f}))}});
    s2.backward();
    l3->update(s2);
    // c * z is broadcast over the 2 elements of the sum, so d/dc = 2 * 6 = 12.
    CHECK(l3->last_gradient_norm() == doctest::Approx(13.0));
    CHECK(a.value()(0) == doctest::Approx(-3.0 / 13.0));
    CHECK(a.value()(1) == doctest::Approx(-4.0 / 13.0));
    CHECK(c.value()(0) == doctest::Approx(-12.0 / 13.0));
}

TEST_CASE("learning-rate schedules") {
    CHECK(LearningRate(0.5)(0) == 0.5);
    CHECK(LearningRate(0.5)(1000) == 0.5);
    auto sd = step_decay(1.0, 3, 0.5);
    CHECK(sd(0) == 1.0);
    CHECK(sd(2) == 1.0);
    CHECK(sd(3) == 0.5);
    CHECK(sd(7) == 0.25);
    auto ed = exponential_decay(2.0, 0.9);
    CHECK(ed(0) == doctest::Approx(2.0));
    CHECK(ed(3) == doctest::Approx(2.0 * 0.729));
    auto wl = warmup_linear_decay(1.0, 4, 12, 0.2);
    CHECK(wl(0) == doctest::Approx(0.25));
    CHECK(wl(3) == doctest::Approx(1.0));
    CHECK(wl(4) == doctest::Approx(1.0));
    CHECK(wl(8) == doctest::Approx(0.6));
    CHECK(wl(12) == doctest::Approx(0.2));
    CHECK(wl(100) == doctest::Approx(0.2));
    CHECK_THROWS_AS(warmup_linear_decay(1.0, 5, 2), UserError);
    // The cosine by hand: halfway through the decay, (1 + cos(pi / 2)) / 2 = 1/2 of the way down;
    // a quarter through, (1 + cos(pi / 4)) / 2 = 0.853553.
    auto wc = warmup_cosine_decay(1.0, 4, 12, 0.2);
    CHECK(wc(0) == doctest::Approx(0.25));
    CHECK(wc(4) == doctest::Approx(1.0));
    CHECK(wc(6) == doctest::Approx(0.2 + 0.8 * 0.853553).epsilon(1e-6));
    CHECK(wc(8) == doctest::Approx(0.6));
    CHECK(wc(12) == doctest::Approx(0.2));
    CHECK(wc(1000) == doctest::Approx(0.2));
    CHECK_THROWS_AS(warmup_cosine_decay(1.0, 5, 2), UserError);

    // The learner asks the schedule with its step count: with a constant gradient g,
    // w after 3 steps is w0 - g * (lr(0) + lr(1) + lr(2)).
    Variable x = input_variable({1}, "x");
    Parameter a = parameter(xt::xarray<float>{0.0f}, "a");
    Session s({element_times(a, x)}, {a});
    s.forward({{x, Value::batch(tensor({1, 1}, {2.0f}))}});
    s.backward();
    auto l = sgd({a}, step_decay(1.0, 2, 0.1));
    CHECK(l->learning_rate() == 1.0);
    for (int i = 0; i < 3; ++i) l->update(s);
    CHECK(a.value()(0) == doctest::Approx(-2.0 * (1.0 + 1.0 + 0.1)));
    CHECK(l->learning_rate() == doctest::Approx(0.1));
}

TEST_CASE("lazy adam skips rows whose gradient is zero but exact adam does not") {
    for (bool lazy : {false, true}) {
        Variable mask = input_variable({3, 1}, "mask");
        Parameter e = parameter(xt::xarray<float>{{1, 2}, {3, 4}, {5, 6}}, "table");
        Variable loss = element_times(e, mask);  // gradient of row r = mask_r (both columns)
        Session s({loss}, {e});
        LearnerOptions o;
        o.lazy_sparse_rows = lazy;
        auto l = adam({e}, 0.1, 0.9, 0.999, 1e-8, o);
        s.forward({{mask, Value::batch(tensor({1, 3, 1}, {1, 1, 1}))}});
        s.backward();
        l->update(s);
        // First step of Adam moves every element by lr * g / |g| = 0.1.
        const auto after1 = e.value();
        CHECK(after1(1, 0) == doctest::Approx(2.9));
        s.forward({{mask, Value::batch(tensor({1, 3, 1}, {1, 0, 1}))}});
        s.backward();
        l->update(s);
        const auto after2 = e.value();
        // Rows 0 and 2 moved by 0.1 again (constant gradient); row 1 keeps its momentum unless lazy.
        CHECK(after2(0, 0) == doctest::Approx(0.8));
        CHECK(after2(2, 1) == doctest::Approx(5.8));
        if (lazy) {
            CHECK(after2(1, 0) == after1(1, 0));
        } else {
            const double m = 0.9 * 0.1, v = 0.999 * 0.001;
            const double step = 0.1 * (m / (1 - 0.81)) / (std::sqrt(v / (1 - 0.999 * 0.999)) + 1e-8);
            CHECK(after2(1, 0) == doctest::Approx(2.9 - step));
        }
    }
}

TEST_CASE("every learner solves a small least-squares problem") {
    // y = x . (1, -2, 0.5) + 0.3 on 16 fixed points; the loss is the squared error.
    Rng rng(11);
    std::normal_distribution<float> d(0.0f, 1.0f);
    xt::xarray<float> xs = xt::zeros<float>({16, 3}), ys = xt::zeros<float>({16, 1});
    const float w_true[3] = {1.0f, -2.0f, 0.5f};
    for (std::size_t n = 0; n < 16; ++n) {
        ys(n, 0) = 0.3f;
        for (std::size_t j = 0; j < 3; ++j) {
            xs(n, j) = d(rng);
            ys(n, 0) += xs(n, j) * w_true[j];
        }
    }
    using Make = std::function<std::unique_ptr<Learner>(std::vector<Parameter>)>;
    const std::vector<std::pair<const char*, Make>> learners{
        {"sgd", [](auto p) { return sgd(p, 0.1); }},
        {"momentum", [](auto p) { return momentum_sgd(p, 0.05, 0.9); }},
        {"nesterov", [](auto p) { return nesterov(p, 0.05, 0.9); }},
        {"adagrad", [](auto p) { return adagrad(p, 0.5); }},
        {"rmsprop", [](auto p) { return rmsprop(p, step_decay(0.01, 200, 0.1), 0.9); }},
        {"adam", [](auto p) { return adam(p, exponential_decay(0.05, 0.995)); }},
        {"adamw", [](auto p) { return adamw(p, exponential_decay(0.05, 0.995), 0.9, 0.999, 1e-8, 1e-4); }},
        {"adadelta", [](auto p) { return adadelta(p, 1.0, 0.99, 1e-5); }},
        {"fsadagrad", [](auto p) { return fsadagrad(p, exponential_decay(0.05, 0.995)); }},
    };
    for (const auto& [name, make] : learners) {
        const std::string learner_name = name;
        CAPTURE(learner_name);
        Variable x = input_variable({3}, "x"), y = input_variable({1}, "y");
        Parameter w = parameter({3, 1}, zeros(), "w");
        Parameter b = parameter({1}, zeros(), "b");
        Variable loss = square(times(x, w) + b - y);
        Session s({loss}, {w, b});
        auto learner = make({w, b});
        const Bindings in{{x, Value::batch(xs)}, {y, Value::batch(ys)}};
        for (int i = 0; i < 600; ++i) {
            s.forward(in);
            s.backward();
            learner->update(s, {1.0 / 16});
        }
        s.forward(in);
        CHECK(s.sum(loss) / 16 < 1e-4);
        const auto wv = w.value();
        for (std::size_t j = 0; j < 3; ++j) CHECK(wv(j, 0) == doctest::Approx(w_true[j]).epsilon(1e-2));
        CHECK(b.value()(0) == doctest::Approx(0.3).epsilon(1e-2));
    }
}

TEST_CASE("learner state round-trips and refuses another learner's state") {
    Quadratic q;
    auto a1 = adam({q.w}, 0.1);
    q.step(*a1);
    q.step(*a1);
    ByteWriter out;
    a1->save_state(out);

    auto a2 = adam({q.w}, 0.1);
    ByteReader in(out.bytes(), "test");
    a2->load_state(in);
    CHECK(in.done());
    CHECK(a2->step_count() == 2);

    auto s = sgd({q.w}, 0.1);
    ByteReader in2(out.bytes(), "test");
    CHECK_THROWS_AS(s->load_state(in2), DataError);
    CHECK(s->step_count() == 0);

    Parameter other = parameter(xt::xarray<float>{1.0f, 2.0f, 3.0f}, "other");
    auto a3 = adam({other}, 0.1);
    ByteReader in3(out.bytes(), "test");
    CHECK_THROWS_AS(a3->load_state(in3), DataError);
    CHECK(a3->step_count() == 0);

    CHECK_THROWS_AS(sgd({}, 0.1), UserError);
    CHECK_THROWS_AS(adam({q.w, q.w}, 0.1), UserError);
}
