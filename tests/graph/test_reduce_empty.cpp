// Reductions over an axis that is empty at run time (an any_size dimension of size 0: a key/value
// cache before its first row, a generator state that starts empty) write their identity to every
// row, as math and PyTorch say (torch.sum of nothing is 0, torch.logsumexp -inf): they wrote
// nothing, leaving whatever the buffer held, and reduce_max read an element past the end.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "test_support.hpp"

using namespace loom;

TEST_CASE("reductions over an empty axis give their identity in every row, and gradients nothing") {
    constexpr double inf = std::numeric_limits<double>::infinity();
    Variable a = input_variable({any_size, 2}, "a");
    struct Case {
        const char* name;
        Variable (*op)(const Variable&, int, const std::string&);
        double want;
    };
    const Case cases[] = {{"reduce_sum", reduce_sum, 0.0},
                          {"reduce_max", reduce_max, -inf},
                          {"reduce_min", reduce_min, inf},
                          {"reduce_log_sum_exp", reduce_log_sum_exp, -inf}};
    const Value empty =
        Value::batch(xt::xarray<double>(xt::zeros<double>({std::size_t{3}, std::size_t{0}, std::size_t{2}})));
    for (const Case& c : cases) {
        for (int axis : {0, all_static_axes}) {
            CAPTURE(c.name);
            CAPTURE(axis);
            Variable y = c.op(a, axis, {});
            // Twice: the second evaluation reuses buffers the first one left holding other numbers.
            for (int run = 0; run < 2; ++run) {
                Variable noise = reduce_sum(input_variable({4}, "noise"), all_static_axes, {});
                (void)noise;
                const auto out = evaluate({y}, {{a, empty}})[y].data<double>();
                REQUIRE(out.size() == (axis == 0 ? 6u : 3u));  // [1, 2] or [1, 1] for each of 3 rows
                for (std::size_t i = 0; i < out.size(); ++i) CHECK(out.flat(i) == c.want);
            }
        }
    }
    Variable m = reduce_mean(a, 0);
    const auto mean = evaluate({m}, {{a, empty}})[m].data<double>();
    for (std::size_t i = 0; i < mean.size(); ++i) CHECK(std::isnan(mean.flat(i)));
    // The same reductions of one row are the row itself (the identity is not added to real elements).
    const Value one = Value::batch(xt::xarray<double>{{{1.5, -2.0}}});
    Variable s = reduce_sum(a, 0), mx = reduce_max(a, 0);
    auto v = evaluate({s, mx}, {{a, one}});
    CHECK(v[s].data<double>()(0, 0, 1) == -2.0);
    CHECK(v[mx].data<double>()(0, 0, 0) == 1.5);
}
