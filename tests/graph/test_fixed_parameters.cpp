// Session::set_parameters_fixed: while the caller promises the parameters do not change, a product
// over a parameter packs its weight once and reads the packed copy at every later forward. The
// values are checked against a triple loop; that the copy is kept is seen by changing the parameter
// while it is fixed (the promise broken on purpose): the product still reads the old weight where
// the packed kernels run (every CPU type but the portable one), and the new one once released.
#include <doctest/doctest.h>

#include <random>

#include <loom.hpp>
#include "core/cpu.hpp"
#include "core/packed_gemm.hpp"

using namespace loom;

namespace {

// y[n][j] = sum_i x[n][i] w[i][j] (+ b[j]), in double.
xt::xarray<double> product(const xt::xarray<float>& x, const xt::xarray<float>& w, const xt::xarray<float>* b) {
    xt::xarray<double> y = xt::zeros<double>({x.shape(0), w.shape(1)});
    for (std::size_t n = 0; n < x.shape(0); ++n)
        for (std::size_t j = 0; j < w.shape(1); ++j) {
            double s = b ? (*b)(j) : 0.0;
            for (std::size_t i = 0; i < w.shape(0); ++i) s += double(x(n, i)) * double(w(i, j));
            y(n, j) = s;
        }
    return y;
}

xt::xarray<float> random_array(std::vector<std::size_t> shape, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    xt::xarray<float> a = xt::zeros<float>(shape);
    for (auto& v : a) v = d(rng);
    return a;
}

void check_close(std::span<const float> got, const xt::xarray<double>& want, const char* what) {
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(double(got[i]) - want.flat(i)) / (1.0 + std::abs(want.flat(i))));
    INFO(what << ": largest relative error " << worst);
    CHECK(worst < 1e-5);
}

}  // namespace

TEST_CASE("set_parameters_fixed: products read the weight packed at the first forward until released") {
    const Isa before = active_isa();
    for (Isa isa : supported_isas()) {
        set_active_isa(isa);
        INFO(isa_name(isa));
        // Two products: x W1 (times) and affine h W2 + b, 37 rows (not a multiple of a kernel's tile).
        const xt::xarray<float> x = random_array({37, 24}, 1), w1 = random_array({24, 40}, 2),
                                w2 = random_array({40, 19}, 3), bias = random_array({19}, 4);
        Variable in = input_variable({24}, "x");
        Parameter p1 = parameter(Shape{24, 40}, glorot_uniform(), "w1");
        Parameter p2 = parameter(Shape{40, 19}, glorot_uniform(), "w2");
        Parameter pb = parameter(Shape{19}, glorot_uniform(), "b");
        p1.set_value(w1);
        p2.set_value(w2);
        pb.set_value(bias);
        Variable h = times(in, p1);
        Variable y = times(h, p2) + pb;
        Session s({y, h});
        const Value xv = Value::batch(x);
        const xt::xarray<float> h_old = xt::cast<float>(product(x, w1, nullptr));

        s.set_parameters_fixed(true);
        for (int pass = 0; pass < 2; ++pass) {
            s.forward({{in, xv}});
            check_close(s.value_data<float>(h), product(x, w1, nullptr), "h, fixed");
            check_close(s.value_data<float>(y), product(h_old, w2, &bias), "y, fixed");
        }
        // The promise broken: W1 changes while fixed.
        const xt::xarray<float> w1_new = random_array({24, 40}, 5);
        p1.set_value(w1_new);
        s.forward({{in, xv}});
        if (packed_gemm_vectorized())
            check_close(s.value_data<float>(h), product(x, w1, nullptr), "h reads the packed old W1");
        else
            check_close(s.value_data<float>(h), product(x, w1_new, nullptr), "h, portable kernels: packs nothing");
        // Released: the new weight is read; fixed again: packed afresh from the new weight.
        const xt::xarray<float> h_new = xt::cast<float>(product(x, w1_new, nullptr));
        for (bool fixed : {false, true}) {
            s.set_parameters_fixed(fixed);
            s.forward({{in, xv}});
            INFO("fixed " << fixed);
            check_close(s.value_data<float>(h), product(x, w1_new, nullptr), "h after the change");
            check_close(s.value_data<float>(y), product(h_new, w2, &bias), "y after the change");
        }
        // A change of precision keeps the setting and packs the converted weights.
        to_precision({p1, p2, pb}, DType::f64);
        s.forward({{in, xv}});
        const std::span<const double> hd = s.value_data<double>(h);
        const xt::xarray<double> want = product(x, w1_new, nullptr);
        double worst = 0;
        for (std::size_t i = 0; i < hd.size(); ++i) worst = std::max(worst, std::abs(hd[i] - want.flat(i)));
        CHECK(worst < 1e-12);
        s.set_parameters_fixed(false);
    }
    set_active_isa(before);
}

TEST_CASE("set_parameters_fixed: int8 weights are widened for a small model, counted over every parameter read") {
    // Sessions given no parameters (as a Generator's step is made): one reads W and a bias,
    // 1,049,600 elements (widened copies of 2 MiB + 2 KiB, within kWidenedInt8Bytes), the other V
    // too (4 MiB + 2 KiB, past it).
    Variable in = input_variable({1024}, "x");
    Parameter w = parameter(Shape{1024, 1024}, glorot_uniform(), "w");
    Parameter v = parameter(Shape{1024, 1024}, glorot_uniform(), "v");
    Parameter b = parameter(Shape{1024}, glorot_uniform(), "b");
    Session one({times(in, w) + b});
    Session two({times(times(in, w), v) + b});
    CHECK_FALSE(one.int8_weights_widened());  // not fixed yet
    one.set_parameters_fixed(true, WeightPrecision::int8);
    two.set_parameters_fixed(true, WeightPrecision::int8);
    CHECK(one.int8_weights_widened() == bf16_kernels_chosen());
    CHECK_FALSE(two.int8_weights_widened());
    one.set_parameters_fixed(true, WeightPrecision::bfloat16);
    CHECK_FALSE(one.int8_weights_widened());
    one.set_parameters_fixed(false);
    CHECK_FALSE(one.int8_weights_widened());
}

TEST_CASE("set_parameters_fixed: a weight computed from parameters and constants is packed once too") {
    // W = P * 0.5 + Q: a static value made by ops, the same at every pass while P and Q are.
    Variable in = input_variable({6}, "x");
    Parameter p = parameter(Shape{6, 5}, glorot_uniform(), "p");
    Parameter q = parameter(Shape{6, 5}, glorot_uniform(), "q");
    const xt::xarray<float> pv = random_array({6, 5}, 7), qv = random_array({6, 5}, 8), x = random_array({9, 6}, 9);
    p.set_value(pv);
    q.set_value(qv);
    Variable y = times(in, p * constant(0.5) + q);
    Session s({y});
    s.set_parameters_fixed(true);
    const xt::xarray<float> w = pv * 0.5f + qv;
    s.forward({{in, Value::batch(x)}});
    check_close(s.value_data<float>(y), product(x, w, nullptr), "x (P/2 + Q)");
    p.set_value(random_array({6, 5}, 10));  // the promise broken: the packed weight stays
    s.forward({{in, Value::batch(x)}});
    if (packed_gemm_vectorized()) check_close(s.value_data<float>(y), product(x, w, nullptr), "the packed old weight");
}

TEST_CASE("set_parameters_fixed: a product over a static input reads the weight bound at each pass") {
    // An input is no parameter: the weight bound to it may change at every pass, fixed or not.
    Variable in = input_variable({6}, "x");
    Variable w = static_input_variable({6, 5}, "w");
    Variable y = times(in, w);
    Session s({y});
    s.set_parameters_fixed(true);
    const xt::xarray<float> x = random_array({9, 6}, 11);
    for (std::uint64_t seed : {12, 13}) {
        const xt::xarray<float> wv = random_array({6, 5}, seed);
        s.forward({{in, Value::batch(x)}, {w, Value::tensor(wv)}});
        check_close(s.value_data<float>(y), product(x, wv, nullptr), "x W, W bound anew");
    }
}
