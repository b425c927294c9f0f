// ParameterAverage: the mean of parameters' values over the points a training run adds.
#include <doctest/doctest.h>

#include <loom.hpp>
#include "test_support.hpp"

using namespace loom;
using loom::testing::expect_user_error;

TEST_CASE("ParameterAverage: the mean of the values added, in each parameter's precision") {
    Parameter f = parameter(xt::xarray<float>{1.0f, -2.0f}, "f");
    Parameter d = parameter({2}, constant_initializer(0.0), "d", DType::f64);
    ParameterAverage average({f, d});
    CHECK(average.count() == 0);
    // f takes 1, 2, 4 times its first value; d takes 0.1, 0.2, 0.4 (not exact in binary: double
    // keeps digits float cannot).
    for (double k : {1.0, 2.0, 4.0}) {
        f.set_value(xt::xarray<float>{float(k), float(-2 * k)});
        d.set_value(xt::xarray<double>{0.1 * k, 1e-9 * k});
        average.add();
    }
    CHECK(average.count() == 3);
    f.set_value(xt::xarray<float>{100.0f, 100.0f});  // the current values play no part
    average.assign();
    CHECK(f.value()(0) == doctest::Approx(7.0 / 3));
    CHECK(f.value()(1) == doctest::Approx(-14.0 / 3));
    CHECK(d.dtype() == DType::f64);
    CHECK(d.value<double>()(0) == doctest::Approx(0.7 / 3).epsilon(1e-15));
    CHECK(d.value<double>()(1) == doctest::Approx(7e-9 / 3).epsilon(1e-12));
}

TEST_CASE("ParameterAverage: assign before add is an error and leaves the values") {
    Parameter f = parameter(xt::xarray<float>{3.0f}, "f");
    ParameterAverage average({f});
    expect_user_error([&] { average.assign(); }, {"ParameterAverage", "no values were added"});
    CHECK(f.value()(0) == 3.0f);
}
