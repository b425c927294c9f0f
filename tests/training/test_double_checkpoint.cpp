// Checkpoints and model files of double parameters: a checkpoint records each parameter's
// precision, keeps double values and learner state in double, resumes bit for bit, and refuses to
// load into parameters of the other precision; files of the float-only layout still load.
#include <doctest/doctest.h>

#include <algorithm>
#include <variant>

#include <cmath>
#include <random>

#include <loom.hpp>
#include "core/serialization.hpp"
#include "test_support.hpp"

using namespace loom;
using loom::testing::expect_user_error;
using loom::testing::TempDir;

namespace {

struct Model {
    Variable x = input_variable({3}, "x");
    Variable y = input_variable({2}, "y");
    Parameter w1, b1, w2;
    Variable loss;

    explicit Model(DType precision) {
        w1 = parameter(Shape{3, 4}, glorot_uniform(), "w1", precision);
        b1 = parameter(Shape{4}, uniform(0.1), "b1", precision);
        w2 = parameter(Shape{4, 2}, glorot_uniform(), "w2", precision);
        loss = square(times(tanh(times(x, w1) + b1), w2) - y);
    }
    std::vector<Parameter> params() const { return {w1, b1, w2}; }

    Bindings minibatch(std::size_t i) const {
        Rng rng(1000 + i);
        std::normal_distribution<double> d(0.0, 1.0);
        xt::xarray<double> xs = xt::zeros<double>({5, 3}), ys = xt::zeros<double>({5, 2});
        for (auto& v : xs) v = d(rng);
        for (std::size_t n = 0; n < 5; ++n) {
            ys(n, 0) = std::sin(xs(n, 0)) + 0.5 * xs(n, 1);
            ys(n, 1) = xs(n, 2) * xs(n, 0);
        }
        return {{x, Value::batch(xs)}, {y, Value::batch(ys)}};
    }
};

std::unique_ptr<Learner> make_learner(const Model& m) {
    LearnerOptions o;
    o.gradient_clipping_norm = 2.0;
    return adam(m.params(), warmup_linear_decay(0.05, 2, 20), 0.9, 0.999, 1e-8, o);
}

// Some element of the parameters is not a float: they really are held in double.
bool beyond_float(const std::vector<Parameter>& ps) {
    for (const auto& p : ps)
        for (double v : p.data<double>())
            if (static_cast<double>(static_cast<float>(v)) != v) return true;
    return false;
}

}  // namespace

TEST_CASE("a double checkpoint resumes in double bit for bit") {
    TempDir dir("double_resume");
    Model a(DType::f64);
    Trainer ta(a.loss, Variable(), make_learner(a));
    for (std::size_t i = 0; i < 3; ++i) ta.train_minibatch(a.minibatch(i));
    ta.save_checkpoint(dir.file("ckpt"), {0, 3, 15, {}});
    std::vector<double> uninterrupted;
    for (std::size_t i = 3; i < 7; ++i) uninterrupted.push_back(ta.train_minibatch(a.minibatch(i)).loss_sum);

    Model b(DType::f64);
    Trainer tb(b.loss, Variable(), make_learner(b));
    tb.load_checkpoint(dir.file("ckpt"));
    CHECK(tb.learner().step_count() == 3);
    CHECK(beyond_float(b.params()));
    for (std::size_t i = 3; i < 7; ++i) CHECK(tb.train_minibatch(b.minibatch(i)).loss_sum == uninterrupted[i - 3]);
    for (std::size_t k = 0; k < 3; ++k)
        CHECK(xt::all(xt::equal(a.params()[k].data<double>(), b.params()[k].data<double>())));
}

TEST_CASE("a checkpoint refuses parameters of the other precision") {
    TempDir dir("double_refuse");
    Model f(DType::f32);
    Trainer tf(f.loss, Variable(), make_learner(f));
    tf.train_minibatch(f.minibatch(0));
    tf.save_checkpoint(dir.file("float"));

    Model d(DType::f64);
    Trainer td(d.loss, Variable(), make_learner(d));
    const xt::xarray<double> before = d.w1.data<double>();
    expect_user_error([&] { td.load_checkpoint(dir.file("float")); },
                      {"'w1'", "float in the file but double in the model", "to_precision", "DType::f32"});
    CHECK(xt::all(xt::equal(d.w1.data<double>(), before)));  // nothing changed
    CHECK(td.learner().step_count() == 0);

    td.save_checkpoint(dir.file("double"));
    expect_user_error([&] { tf.load_checkpoint(dir.file("double")); },
                      {"'w1'", "double in the file but float in the model", "DType::f64"});
}

TEST_CASE("a float run goes on in double after to_precision with its learner state") {
    // The documented way: load the float checkpoint into the float model, then convert. The same
    // Trainer goes on: its session follows the parameters, the learner converts its moments.
    TempDir dir("double_convert");
    Model f(DType::f32);
    Trainer tf(f.loss, Variable(), make_learner(f));
    for (std::size_t i = 0; i < 2; ++i) tf.train_minibatch(f.minibatch(i));
    tf.save_checkpoint(dir.file("float"));
    std::vector<double> float_losses;
    for (std::size_t i = 2; i < 5; ++i) float_losses.push_back(tf.train_minibatch(f.minibatch(i)).loss_sum);

    Model g(DType::f32);
    Trainer tg(g.loss, Variable(), make_learner(g));
    tg.load_checkpoint(dir.file("float"));
    to_precision(g.params(), DType::f64);
    const double first = tg.train_minibatch(g.minibatch(2)).loss_sum;
    CHECK(tg.session().dtype() == DType::f64);
    CHECK(first == doctest::Approx(float_losses[0]).epsilon(1e-5));  // the float run's parameters, exactly
    CHECK(first != float_losses[0]);                                 // but computed in double
    tg.save_checkpoint(dir.file("double"));                          // the moments are double now

    Model h(DType::f64);
    Trainer th(h.loss, Variable(), make_learner(h));
    th.load_checkpoint(dir.file("double"));
    for (std::size_t i = 3; i < 5; ++i) {
        const double gone_on = tg.train_minibatch(g.minibatch(i)).loss_sum;
        CHECK(th.train_minibatch(h.minibatch(i)).loss_sum == gone_on);  // bit for bit
        CHECK(gone_on == doctest::Approx(float_losses[i - 2]).epsilon(1e-4));
    }
    CHECK(beyond_float(h.params()));
}

TEST_CASE("model files keep double parameters and load across precisions") {
    TempDir dir("double_model_file");
    Parameter w = parameter({2, 2}, uniform(1.0), "w", DType::f64);
    w.set_value(xt::xarray<double>{{1.0 / 3, 0.1}, {-0.7, 2.0}});
    save_model_file(dir.file("m"), "test", {w});
    const ModelFile file = read_model_file(dir.file("m"), "test");
    CHECK(std::none_of(file.parameters.begin(), file.parameters.end(),
                       [](const auto& e) { return std::holds_alternative<xt::xarray<float>>(e.second); }));
    REQUIRE(file.parameters.count("w") == 1);
    REQUIRE(std::holds_alternative<xt::xarray<double>>(file.parameters.at("w")));
    CHECK(std::get<xt::xarray<double>>(file.parameters.at("w"))(0, 0) == 1.0 / 3);

    Parameter into64 = parameter({2, 2}, uniform(1.0), "w", DType::f64);
    assign_parameters(file, {into64});
    CHECK(into64.data<double>()(0, 0) == 1.0 / 3);
    Parameter into32 = parameter({2, 2}, uniform(1.0), "w");
    assign_parameters(file, {into32});
    CHECK(into32.data<float>()(0, 0) == static_cast<float>(1.0 / 3));
    Parameter wrong = parameter({3}, uniform(1.0), "w", DType::f64);
    expect_user_error([&] { assign_parameters(file, {wrong}); }, {"'w' is [2, 2] in the file"});
}

TEST_CASE("files of the float only layout still load") {
    TempDir dir("double_v1");
    // A version 1 checkpoint of one parameter, no learner, written as that layout was.
    ByteWriter c;
    c.str("loom-checkpoint");
    c.u64(1);
    c.u64(1);
    c.str("v");
    c.u64(1);
    c.u64(2);
    c.floats(std::vector<float>{1.5f, -2.0f});
    c.u64(0);
    for (int k = 0; k < 3; ++k) c.u64(0);
    c.str("");
    c.u64(0);
    write_checked_file(dir.file("ckpt1"), c.bytes());
    Parameter v = parameter({2}, uniform(1.0), "v");
    load_checkpoint(dir.file("ckpt1"), {v}, nullptr);
    CHECK(v.data<float>()(0) == 1.5f);
    CHECK(v.data<float>()(1) == -2.0f);
    Parameter v64 = parameter({2}, uniform(1.0), "v", DType::f64);
    expect_user_error([&] { load_checkpoint(dir.file("ckpt1"), {v64}, nullptr); }, {"float in the file"});

    ByteWriter m;
    m.str("loom-model-file 1");
    m.str("test");
    m.u64(0);
    m.u64(1);
    m.str("v");
    m.u64(1);
    m.u64(2);
    m.floats(std::vector<float>{0.5f, 4.0f});
    write_checked_file(dir.file("model1"), m.bytes());
    const ModelFile file = read_model_file(dir.file("model1"), "test");
    REQUIRE(file.parameters.count("v") == 1);
    REQUIRE(std::holds_alternative<xt::xarray<float>>(file.parameters.at("v")));
    assign_parameters(file, {v64});
    CHECK(v64.data<double>()(1) == 4.0);
}
