// The vectorizable float kernels against libm (computed in double), over the whole useful range.
#include <doctest/doctest.h>

#include <cmath>

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
