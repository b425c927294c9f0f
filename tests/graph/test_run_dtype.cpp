// The one precision rule (graph/run_dtype.hpp, docs/semantics.md "Precision") at each call that
// runs a graph: the type asked for when one is; evaluate, gradients and check_batch_invariance with
// none as exact as their inputs; a Session, Trainer and Generator in their parameters' one type.
// The results 0.2.1 gave are kept: these cases pin them beside what is new (dtype(), next_dtype(),
// a mix's message naming one parameter of each type and the call the user made).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <type_traits>

#include <loom.hpp>

#include "graph/run_dtype.hpp"
#include "test_support.hpp"

using namespace loom;

namespace {

// y = x w + b over batch rows x [2].
struct Affine {
    Variable x = input_variable({2}, "x");
    Parameter w, b;
    Variable y;
    Affine(DType w_dtype, DType b_dtype) {
        w = parameter({2, 1}, uniform(1.0), "w", w_dtype);
        b = parameter({1}, uniform(1.0), "b", b_dtype);
        y = times(x, w) + b;
    }
    std::vector<Parameter> params() const { return {w, b}; }
};

const xt::xarray<float> float_rows = {{1.0f, 2.0f}, {3.0f, 4.0f}};
// Not representable in float: a computation in float rounds them.
const xt::xarray<double> double_rows = {{0.1, 0.2}, {0.3, 0.7}};

bool float_representable(double v) { return static_cast<double>(static_cast<float>(v)) == v; }

// The message of the UserError f throws (a failed check when it throws none).
std::string user_error(const std::function<void()>& f) {
    try {
        f();
    } catch (const UserError& e) {
        return e.what();
    }
    FAIL("expected a UserError");
    return {};
}

// Checks that `message` is the mix's UserError of `caller` naming `a_float` among the float
// parameters and `a_double` among the double ones.
void check_mix_error(const std::string& message, const std::string& caller, const std::string& a_float,
                     const std::string& a_double) {
    INFO("message: " << message);
    CHECK(message.rfind(caller + ": the graph mixes float parameters (", 0) == 0);
    const std::size_t doubles = message.find("double parameters (");
    CHECK(message.find(a_float) < doubles);
    CHECK(message.find(a_double, doubles) != std::string::npos);
    CHECK(message.find("to_precision") != std::string::npos);
}

}  // namespace

TEST_CASE("run_dtype: the type asked for, else as exact as the inputs, else the parameters' one type") {
    Parameter f1 = parameter({2}, uniform(1.0), "f1"), f2 = parameter({2}, uniform(1.0), "f2");
    Parameter d1 = parameter({2}, uniform(1.0), "d1", DType::f64);
    Variable x = input_variable({2}, "x"), unused = input_variable({2}, "unused");
    const Value f = Value::batch(float_rows), d = Value::batch(double_rows);
    const DTypeRequest exact = DTypeRequest::given_or_exact(std::nullopt), by_parameters{};
    auto dtype = [](const std::vector<Parameter>& parameters, const Bindings& in, const DTypeRequest& asked) {
        return run_dtype(parameters, in, asked, "t");
    };

    // Asked for: that type, whatever the parameters (a mix too: read as converted copies) and the data.
    CHECK(dtype({f1}, {{x, f}}, DTypeRequest::given_or_exact(DType::f64)) == DType::f64);
    CHECK(dtype({d1}, {{x, d}}, DTypeRequest::given_or_exact(DType::f32)) == DType::f32);
    CHECK(dtype({f1, d1}, {}, DTypeRequest::given_or_exact(DType::f32)) == DType::f32);

    // As exact as the inputs: double when any parameter or any bound Value is double.
    CHECK(dtype({f1, f2}, {{x, f}}, exact) == DType::f32);
    CHECK(dtype({f1, f2}, {{x, d}}, exact) == DType::f64);
    CHECK(dtype({d1}, {{x, f}}, exact) == DType::f64);
    CHECK(dtype({f1, d1}, {{x, f}}, exact) == DType::f64);         // a mix: the float one converted
    CHECK(dtype({}, {{x, f}, {unused, d}}, exact) == DType::f64);  // any bound data, as in 0.2.1
    CHECK(dtype({}, {}, exact) == DType::f32);

    // By the parameters: their one type, the data converted; f32 without any.
    CHECK(dtype({f1, f2}, {{x, d}}, by_parameters) == DType::f32);
    CHECK(dtype({d1}, {{x, f}}, by_parameters) == DType::f64);
    CHECK(dtype({}, {{x, d}}, by_parameters) == DType::f32);
    // A mix: one of each type named, with how many more there are.
    const std::string three = user_error([&] { dtype({f1, d1, f2}, {}, by_parameters); });
    check_mix_error(three, "t", "'f1'", "'d1'");
    CHECK(three.find("'f2'") == std::string::npos);
    CHECK(three.find(" and 1 more) and double parameters (") != std::string::npos);
}

TEST_CASE("evaluate and gradients with no type asked run as exact as their inputs, as in 0.2.1") {
    Affine f(DType::f32, DType::f32), d(DType::f64, DType::f64), mixed(DType::f32, DType::f64);
    // Float parameters, double data: double, the data not rounded.
    const ValueMap fv = evaluate({f.y}, {{f.x, Value::batch(double_rows)}});
    REQUIRE(fv[f.y].dtype() == DType::f64);
    const xt::xarray<double> w = xt::cast<double>(f.w.data<float>()), b = xt::cast<double>(f.b.data<float>());
    CHECK(fv[f.y].data<double>()(1, 0) == doctest::Approx(0.3 * w(0, 0) + 0.7 * w(1, 0) + b(0)).epsilon(1e-15));
    CHECK(gradients(f.y, {{f.x, Value::batch(double_rows)}}, {f.w})[f.w].dtype() == DType::f64);
    // Float parameters, float data: float.
    CHECK(evaluate({f.y}, {{f.x, Value::batch(float_rows)}})[f.y].dtype() == DType::f32);
    // Double parameters, float data: double.
    CHECK(evaluate({d.y}, {{d.x, Value::batch(float_rows)}})[d.y].dtype() == DType::f64);
    // A mix runs in double, the float parameter read as a converted copy (it stays float).
    CHECK(evaluate({mixed.y}, {{mixed.x, Value::batch(float_rows)}})[mixed.y].dtype() == DType::f64);
    CHECK(gradients(mixed.y, {{mixed.x, Value::batch(float_rows)}}, {mixed.w})[mixed.w].dtype() == DType::f64);
    CHECK(mixed.w.dtype() == DType::f32);
    // Asked for: that type.
    CHECK(evaluate({d.y}, {{d.x, Value::batch(double_rows)}}, DType::f32)[d.y].dtype() == DType::f32);
    CHECK(d.w.dtype() == DType::f64);
}

TEST_CASE("check_batch_invariance with no type asked runs as exact as its inputs: double parameters") {
    // y = the batch's sum of x w: not batch invariant, so the report holds the values it compared.
    Variable x = input_variable({1}, "x");
    Parameter w = parameter({1, 1}, uniform(1.0), "w", DType::f64);
    xt::xarray<double> w_value = xt::zeros<double>({1, 1});
    w_value(0, 0) = 0.1;
    w.set_value(w_value);
    xt::xarray<float> rows = xt::zeros<float>({2, 1});
    rows(0, 0) = 1.0f, rows(1, 0) = 2.0f;
    Variable y = batch::reduce_sum(times(x, w));
    InvarianceOptions as_exact;
    as_exact.precision = std::nullopt;
    as_exact.gradients = false;
    const InvarianceReport r = check_batch_invariance({y}, {{x, Value::batch(rows)}}, as_exact);
    INFO(r.str());
    REQUIRE_FALSE(r.ok);
    // Alone x_i 0.1 and the batch's 0.1 + 0.2, in double: neither is a float.
    CHECK_FALSE(float_representable(r.values.alone));
    CHECK_FALSE(float_representable(r.values.batched));
    CHECK(r.values.batched == 1.0 * 0.1 + 2.0 * 0.1);
}

TEST_CASE("a Session runs in its parameters' one type, converts its data and names a mix by the call") {
    SUBCASE("float parameters read double data converted") {
        Affine f(DType::f32, DType::f32);
        Session s({f.y}, f.params());
        CHECK(s.dtype() == DType::f32);
        s.forward({{f.x, Value::batch(double_rows)}});
        CHECK(s.value(f.y).dtype() == DType::f32);
        // The same values as data rounded to float.
        Session rounded({f.y}, f.params());
        rounded.forward({{f.x, Value::batch(xt::xarray<float>(xt::cast<float>(double_rows)))}});
        CHECK(s.value(f.y).data<float>() == rounded.value(f.y).data<float>());
    }
    SUBCASE("without parameters: float, whatever its data") {
        Variable x = input_variable({2}, "x");
        Variable y = x * constant(3.0);
        Session s({y});
        s.forward({{x, Value::batch(double_rows)}});
        CHECK(s.dtype() == DType::f32);
        CHECK(s.value_data<float>(y)[0] == static_cast<float>(0.1) * 3.0f);
    }
    SUBCASE("a mix: one of each named, by the constructor and by the forward that meets it") {
        Affine m(DType::f32, DType::f64);
        check_mix_error(user_error([&] { Session s({m.y}, m.params()); }), "Session", "'w'", "'b'");
        to_precision({m.w}, DType::f64);
        Session s({m.y}, m.params());
        CHECK(s.dtype() == DType::f64);
        CHECK(s.next_dtype() == DType::f64);
        to_precision({m.b}, DType::f32);
        check_mix_error(user_error([&] { s.next_dtype("here"); }), "here", "'b'", "'w'");
        check_mix_error(user_error([&] {
                            s.forward({{m.x, Value::batch(float_rows)}});
                        }),
                        "Session::forward", "'b'", "'w'");
        to_precision({m.w}, DType::f32);
        CHECK(s.next_dtype() == DType::f32);
        CHECK(s.dtype() == DType::f64);  // until the next forward follows them
        s.forward({{m.x, Value::batch(float_rows)}});
        CHECK(s.dtype() == DType::f32);
    }
}

TEST_CASE("a Trainer names its call when its parameters come to mix") {
    Affine m(DType::f32, DType::f32);
    Variable t = input_variable({1}, "t");
    Variable loss = square(m.y - t);
    Trainer trainer(loss, Variable(), sgd(m.params(), 0.01));
    xt::xarray<double> targets = xt::zeros<double>({2, 1});
    targets(0, 0) = 0.5, targets(1, 0) = -0.5;
    const Bindings in{{m.x, Value::batch(double_rows)}, {t, Value::batch(targets)}};
    trainer.train_minibatch(in);  // double data into float parameters: converted
    CHECK(trainer.session().dtype() == DType::f32);
    to_precision(m.params(), DType::f64);
    trainer.train_minibatch(in);
    CHECK(trainer.session().dtype() == DType::f64);
    to_precision({m.b}, DType::f32);
    check_mix_error(user_error([&] { trainer.train_minibatch(in); }), "Trainer::train_minibatch", "'b'", "'w'");
}

namespace {
// A step whose logits are its memory's scores times a scale plus a bias.
layers::Decoder scores_decoder(const Parameter& scale, const Parameter& bias) {
    return layers::Decoder(
        [scale, bias](const Variable&, const std::vector<Variable>& states, const std::vector<Variable>& memory) {
            return layers::DecoderOutput{memory[0] * scale + bias, {states[0] + constant(1.0)}};
        },
        {Shape{1}});
}
const xt::xarray<double> scores = {{0.1, 0.2, 0.7}};
// log softmax(s)[2], in double.
double best_log_probability(const xt::xarray<double>& s) {
    return s(0, 2) - std::log(std::exp(s(0, 0)) + std::exp(s(0, 1)) + std::exp(s(0, 2)));
}
}  // namespace

TEST_CASE("a Generator runs in its step's parameters' type and names its call when they come to mix") {
    Variable memory = input_variable({3}, "memory");
    const layers::GenerateOptions greedy{1, 1, 0, 0};
    Parameter scale = parameter(xt::xarray<float>{1.0f, 1.0f, 1.0f}, "scale");
    Parameter bias = parameter(xt::xarray<float>{0.0f, 0.0f, 0.0f}, "bias");
    layers::Generator gen(scores_decoder(scale, bias), {memory});
    const Value double_memory = Value::batch(scores);

    // Float parameters, double memory: float, the memory rounded.
    const double in_float = gen.generate({double_memory}, greedy).items[0][0].log_probability;
    CHECK(in_float == doctest::Approx(best_log_probability(scores)).epsilon(1e-6));
    CHECK(float_representable(in_float));
    // Converted to double: double, nothing rounded.
    to_precision({scale, bias}, DType::f64);
    const double in_double = gen.generate({double_memory}, greedy).items[0][0].log_probability;
    CHECK(in_double == doctest::Approx(best_log_probability(scores)).epsilon(1e-14));
    // A mix: the UserError starts with the call the user made.
    to_precision({bias}, DType::f32);
    check_mix_error(user_error([&] { gen.generate({double_memory}, greedy); }), "Generator::generate", "'bias'",
                    "'scale'");
}

TEST_CASE("dtype() and precision() give the same, and Precision is DType") {
    static_assert(std::is_same_v<Precision, DType>);
    Affine d(DType::f64, DType::f32);
    CHECK(d.w.precision() == d.w.dtype());
    CHECK(d.w.dtype() == DType::f64);
    CHECK(d.b.dtype() == DType::f32);
    to_precision({d.b}, DType::f64);
    Session s({d.y}, d.params());
    CHECK(s.precision() == s.dtype());
    CHECK(s.dtype() == DType::f64);
}
