// The vectorizable float kernels against libm (computed in double), over the whole useful range.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/fast_math.hpp"

namespace {
// Relative error in units of float epsilon.
double ulps(double got, double want) { return std::abs(got - want) / (std::abs(want) * 1.1920929e-7 + 1e-45); }
}  // namespace

TEST_CASE("fast float exp, tanh and sigmoid stay within a few ulp of libm") {
    double worst_exp = 0, worst_tanh = 0, worst_sigmoid = 0;
    for (float x = -87.0f; x <= 88.7f; x += 0.0137f) {
        worst_exp = std::max(worst_exp, ulps(loom::fast::exp(x), std::exp(static_cast<double>(x))));
    }
    for (float x = -20.0f; x <= 20.0f; x += 0.00371f) {
        const double xd = x;
        worst_tanh = std::max(worst_tanh, x == 0 ? 0.0 : ulps(loom::fast::tanh(x), std::tanh(xd)));
        worst_sigmoid = std::max(worst_sigmoid, ulps(loom::fast::sigmoid(x), 1.0 / (1.0 + std::exp(-xd))));
    }
    INFO("exp " << worst_exp << " ulp, tanh " << worst_tanh << " ulp, sigmoid " << worst_sigmoid << " ulp");
    CHECK(worst_exp < 4);
    CHECK(worst_tanh < 8);
    CHECK(worst_sigmoid < 8);
    // Saturation and tiny arguments.
    CHECK(loom::fast::tanh(1e-6f) == doctest::Approx(1e-6f).epsilon(1e-6));
    CHECK(loom::fast::tanh(30.0f) == 1.0f);
    CHECK(loom::fast::tanh(-30.0f) == -1.0f);
    CHECK(loom::fast::sigmoid(-100.0f) >= 0.0f);
    CHECK(loom::fast::sigmoid(-100.0f) < 1e-30f);
    CHECK(loom::fast::exp(-200.0f) >= 0.0f);
    CHECK(std::isinf(loom::fast::exp(200.0f)));
    CHECK(loom::fast::exp(88.5f) == doctest::Approx(std::exp(88.5)).epsilon(1e-6));
}

TEST_CASE("fast float exp, tanh and sigmoid give NaN for NaN, as libm does") {
    // A NaN must come out (not a number built from an undefined float-to-integer conversion).
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(loom::fast::exp(nan)));
    CHECK(std::isnan(loom::fast::tanh(nan)));
    CHECK(std::isnan(loom::fast::sigmoid(nan)));
    CHECK(std::isnan(loom::fast::exp(-nan)));
}

TEST_CASE("fast float normal_cdf stays within 3e-7 of the exact Phi (2.5 float ulp at 1), and double is exact") {
    double worst = 0;
    for (double x = -12.0; x <= 12.0; x += 1.0 / 1024) {
        const auto xf = static_cast<float>(x);
        const double exact = 0.5 * std::erfc(-static_cast<double>(xf) / std::sqrt(2.0));
        worst = std::max(worst, std::abs(static_cast<double>(loom::fast::normal_cdf(xf)) - exact));
    }
    INFO("worst absolute error " << worst);
    CHECK(worst < 3e-7);  // the approximation's 0.75e-7 plus float rounding
    CHECK(loom::fast::normal_cdf(0.0f) == doctest::Approx(0.5).epsilon(1e-7));
    CHECK(loom::fast::normal_cdf(1.0) == doctest::Approx(0.8413447460685429).epsilon(1e-15));
    CHECK(loom::fast::normal_cdf(-40.0f) == 0.0f);
    CHECK(loom::fast::normal_cdf(40.0f) == 1.0f);
}

TEST_CASE("fast lane_sum and dot: every element counted once, for lengths around the 16 lanes") {
    for (std::size_t n : {0, 1, 7, 15, 16, 17, 32, 33, 100}) {
        std::vector<float> a(n), b(n);
        double exact_sum = 0, exact_dot = 0;
        for (std::size_t i = 0; i < n; ++i) {
            a[i] = static_cast<float>(i % 7) - 2.5f;  // halves and whole numbers: every sum is exact in float
            b[i] = static_cast<float>(i % 5) + 0.5f;
            exact_sum += a[i];
            exact_dot += static_cast<double>(a[i]) * b[i];
        }
        INFO("n = " << n);
        CHECK(loom::fast::lane_sum<float>(n, [&](std::size_t i) { return a[i]; }) == static_cast<float>(exact_sum));
        CHECK(loom::fast::dot(a.data(), b.data(), n) == static_cast<float>(exact_dot));
    }
}
