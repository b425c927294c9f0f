// gemm_rows against the product summed in long double, over the shapes that reach every kernel
// height (1-6 rows per block), partial last panels, k = 1, scattered rows and both packings.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/packed_gemm.hpp"

namespace {

template <class T>
void check_shapes(double tolerance) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    int checked = 0;
    for (std::size_t m : {1, 2, 3, 5, 6, 7, 13, 32})
        for (std::size_t n : {1, 7, 8, 16, 17, 40})
            for (std::size_t k : {1, 3, 33})
                for (bool transposed : {false, true})
                    for (bool accumulate : {false, true}) {
                        // B as stored: [k, n], or [n, k] when transposed; rows padded to check ldb.
                        const std::size_t ldb = (transposed ? k : n) + 3;
                        std::vector<T> b((transposed ? n : k) * ldb);
                        for (T& v : b) v = static_cast<T>(u(rng));
                        auto b_at = [&](std::size_t p, std::size_t j) {
                            return transposed ? b[j * ldb + p] : b[p * ldb + j];
                        };
                        std::vector<T> packed(loom::packed_size<T>(k, n));
                        loom::pack_right(transposed, k, n, b.data(), ldb, packed.data());
                        // Left and result rows in reverse order, two rows apart, in one buffer each.
                        std::vector<T> a(2 * m * k), c(2 * m * n + 1);
                        for (T& v : a) v = static_cast<T>(u(rng));
                        for (T& v : c) v = static_cast<T>(u(rng));
                        const std::vector<T> c0 = c;
                        std::vector<const T*> a_rows(m);
                        std::vector<T*> c_rows(m);
                        for (std::size_t i = 0; i < m; ++i) {
                            a_rows[i] = a.data() + 2 * (m - 1 - i) * k;
                            c_rows[i] = c.data() + 2 * (m - 1 - i) * n;
                        }
                        loom::gemm_rows<T>(m, n, k, a_rows.data(), packed.data(), c_rows.data(), accumulate);
                        double worst = 0;
                        for (std::size_t i = 0; i < m; ++i)
                            for (std::size_t j = 0; j < n; ++j) {
                                long double want = accumulate ? c0[2 * (m - 1 - i) * n + j] : 0;
                                for (std::size_t p = 0; p < k; ++p)
                                    want += static_cast<long double>(a_rows[i][p]) * b_at(p, j);
                                worst = std::max(worst, static_cast<double>(std::abs(c_rows[i][j] - want)));
                            }
                        // Rows between the result rows are untouched.
                        bool untouched = true;
                        for (std::size_t i = 0; i < m; ++i)
                            for (std::size_t j = 0; j < n; ++j)
                                untouched &= c[(2 * i + 1) * n + j] == c0[(2 * i + 1) * n + j];
                        INFO("m " << m << " n " << n << " k " << k << " transposed " << transposed << " accumulate "
                                  << accumulate);
                        CHECK(worst < tolerance * static_cast<double>(k + 1));
                        CHECK(untouched);
                        ++checked;
                    }
    CHECK(checked == 8 * 6 * 3 * 4);
}

}  // namespace

TEST_CASE("gemm_rows matches the product in long double, float and double") {
    check_shapes<float>(4e-7);
    check_shapes<double>(1e-15);
}

TEST_CASE("gemm_rows with k = 0 writes zeros or leaves the rows") {
    std::vector<float> packed(loom::packed_size<float>(0, 5)), c(5, 2.0f);
    float* rows[] = {c.data()};
    const float* a_rows[] = {nullptr};
    loom::gemm_rows<float>(1, 5, 0, a_rows, packed.data(), rows, true);
    CHECK(c[4] == 2.0f);
    loom::gemm_rows<float>(1, 5, 0, a_rows, packed.data(), rows, false);
    CHECK(c[0] == 0.0f);
    CHECK(c[4] == 0.0f);
}
