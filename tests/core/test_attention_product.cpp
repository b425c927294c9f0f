// Attention's math in core/: rows read where they lie (core/row_view.hpp), and one query over every
// head at once (core/attention_product.hpp) against a plain loop in double.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "core/attention_product.hpp"
#include "core/row_view.hpp"

namespace {

using loom::RowView;

}  // namespace

TEST_CASE("RowView: rows at a stride, through pages, and a last row of its own") {
    // A table of 5 rows of 3 elements, stride 4 (one element between rows unused).
    const std::vector<double> table{0, 1, 2, -1, 10, 11, 12, -1, 20, 21, 22, -1, 30, 31, 32, -1, 40, 41, 42, -1};
    const std::vector<double> own{90, 91, 92};
    const RowView<const double> strided{table.data() + 4, 4, 3};
    CHECK(strided.size() == 3);
    CHECK(strided.strided());
    CHECK(strided[2][1] == 31);
    const std::size_t pages[] = {4, 0, 4};
    const RowView<const double> paged{table.data(), 4, 3, pages, own.data()};
    CHECK(paged.size() == 4);
    CHECK_FALSE(paged.strided());
    CHECK_FALSE((RowView<const double>{table.data(), 4, 2, nullptr, own.data()}.strided()));
    std::vector<double> block(12, -7);
    paged.gather(3, block.data());
    CHECK(block == std::vector<double>{40, 41, 42, 0, 1, 2, 40, 41, 42, 90, 91, 92});
    const RowView<const double> only_own{nullptr, 0, 0, nullptr, own.data()};
    CHECK(only_own.size() == 1);
    CHECK(only_own[0][2] == 92);
}

TEST_CASE("attend_one_query equals a plain loop over rows through pages and a step's own row") {
    // Heads of 16 (the 16-lane path) and of 5 and 7 (the scalar path), in double and in float.
    struct Sizes {
        std::size_t heads, dk, dv;
    };
    for (const Sizes z : {Sizes{2, 16, 16}, Sizes{3, 5, 7}, Sizes{1, 32, 80}}) {
        CAPTURE(z.heads);
        CAPTURE(z.dk);
        const std::size_t kw = z.heads * z.dk, vw = z.heads * z.dv, rows = 6;
        std::mt19937 rng(7);
        std::normal_distribution<double> normal;
        auto draw = [&](std::size_t n) {
            std::vector<double> v(n);
            for (double& x : v) x = normal(rng);
            return v;
        };
        const std::vector<double> q = draw(kw), key_table = draw(rows * kw), value_table = draw(rows * vw);
        const std::vector<double> own_key = draw(kw), own_value = draw(vw);
        const std::size_t key_pages[] = {5, 2, 2, 0}, value_pages[] = {1, 4, 3, 0};
        const std::size_t lk = 5;  // four through the pages, then the step's own
        // Expected, in double by the formula: per head, softmax(q_h k_j,h / sqrt(dk)) over j, then the sum
        // of the weights times v_j,h.
        auto key = [&](std::size_t j) { return j < 4 ? key_table.data() + key_pages[j] * kw : own_key.data(); };
        auto value = [&](std::size_t j) { return j < 4 ? value_table.data() + value_pages[j] * vw : own_value.data(); };
        std::vector<double> expected(vw, 0.0);
        for (std::size_t h = 0; h < z.heads; ++h) {
            std::vector<double> s(lk);
            double top = -INFINITY, sum = 0;
            for (std::size_t j = 0; j < lk; ++j) {
                s[j] = 0;
                for (std::size_t d = 0; d < z.dk; ++d) s[j] += q[h * z.dk + d] * key(j)[h * z.dk + d];
                s[j] /= std::sqrt(static_cast<double>(z.dk));
                top = std::max(top, s[j]);
            }
            for (double& x : s) sum += x = std::exp(x - top);
            for (std::size_t j = 0; j < lk; ++j)
                for (std::size_t d = 0; d < z.dv; ++d) expected[h * z.dv + d] += s[j] / sum * value(j)[h * z.dv + d];
        }
        auto run = [&]<class T>(T tolerance) {
            auto cast = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
            const std::vector<T> qt = cast(q), kt = cast(key_table), vt = cast(value_table), ok = cast(own_key),
                                 ov = cast(own_value);
            std::vector<T> p(z.heads * lk), out(vw, T(-1));
            loom::attention_detail::attend_one_query<T>(
                z.heads, z.dk, z.dv, T(1) / std::sqrt(static_cast<T>(z.dk)), qt.data(),
                RowView<const T>{kt.data(), kw, 4, key_pages, ok.data()},
                RowView<const T>{vt.data(), vw, 4, value_pages, ov.data()}, p.data(), out.data());
            for (std::size_t e = 0; e < vw; ++e)
                CHECK(std::abs(static_cast<double>(out[e]) - expected[e]) <=
                      static_cast<double>(tolerance) * (1 + std::abs(expected[e])));
        };
        run(1e-12);
        run(1e-5f);
    }
}
