// gemm_rows against the product summed in long double, for every kernel variant this CPU runs
// (portable, AVX2, AVX-512), over the shapes that reach every kernel height (1-12 rows per block),
// partial last panels and panel pairs, k = 1, scattered rows, both packings and alpha / beta.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu.hpp"
#include "core/packed_gemm.hpp"

namespace {

template <class T>
struct Case {
    std::size_t m, n, k;
    bool transposed;
    T alpha, beta;
};

// Runs gemm_rows of `isa` on one case; returns the result rows' buffer (result rows 2 apart,
// in reverse order) and checks that the rows in between are untouched.
template <class T>
std::vector<T> run_rows(loom::Isa isa, const Case<T>& cs, const std::vector<T>& a, const std::vector<T>& b,
                        std::size_t ldb, const std::vector<T>& c0) {
    std::vector<T> packed(loom::packed_size<T>(cs.k, cs.n));
    loom::pack_right(cs.transposed, cs.k, cs.n, b.data(), ldb, packed.data());
    std::vector<T> c = c0;
    std::vector<const T*> a_rows(cs.m);
    std::vector<T*> c_rows(cs.m);
    for (std::size_t i = 0; i < cs.m; ++i) {
        a_rows[i] = a.data() + 2 * (cs.m - 1 - i) * cs.k;
        c_rows[i] = c.data() + 2 * (cs.m - 1 - i) * cs.n;
    }
    loom::gemm_rows<T>(isa, cs.m, cs.n, cs.k, a_rows.data(), packed.data(), c_rows.data(), cs.alpha, cs.beta);
    bool untouched = true;
    for (std::size_t i = 0; i < cs.m; ++i)
        for (std::size_t j = 0; j < cs.n; ++j) untouched &= c[(2 * i + 1) * cs.n + j] == c0[(2 * i + 1) * cs.n + j];
    CHECK(untouched);
    return c;
}

template <class T>
void check_variants(double tolerance) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    const std::vector<loom::Isa> isas = loom::supported_isas();
    REQUIRE(isas.front() == loom::Isa::portable);
    int checked = 0;
    for (std::size_t m : {1, 2, 3, 5, 6, 7, 11, 12, 13, 25, 32})
        for (std::size_t n : {1, 7, 8, 16, 17, 31, 32, 40, 65})
            for (std::size_t k : {1, 3, 33})
                for (bool transposed : {false, true})
                    for (int ab = 0; ab < 4; ++ab) {
                        // accumulate (1, 1), overwrite (1, 0) and two general scalings
                        const T alphas[] = {1, 1, T(0.5), T(-2)}, betas[] = {1, 0, T(-0.25), T(3)};
                        const Case<T> cs{m, n, k, transposed, alphas[ab], betas[ab]};
                        // B as stored: [k, n], or [n, k] when transposed; rows padded to check ldb.
                        const std::size_t ldb = (transposed ? k : n) + 3;
                        std::vector<T> b((transposed ? n : k) * ldb), a(2 * m * k), c0(2 * m * n + 1);
                        for (T& v : b) v = static_cast<T>(u(rng));
                        for (T& v : a) v = static_cast<T>(u(rng));
                        for (T& v : c0) v = static_cast<T>(u(rng));
                        // beta == 0 must not read C: NaN there would show.
                        if (cs.beta == T(0))
                            for (std::size_t i = 0; i < m; ++i) c0[2 * i * n] = std::numeric_limits<T>::quiet_NaN();
                        auto b_at = [&](std::size_t p, std::size_t j) {
                            return transposed ? b[j * ldb + p] : b[p * ldb + j];
                        };
                        std::vector<T> avx2_result;
                        for (loom::Isa isa : isas) {
                            const std::vector<T> c = run_rows(isa, cs, a, b, ldb, c0);
                            double worst = 0;
                            for (std::size_t i = 0; i < m; ++i)
                                for (std::size_t j = 0; j < n; ++j) {
                                    const std::size_t at = 2 * (m - 1 - i) * n + j;
                                    long double dot = 0;
                                    for (std::size_t p = 0; p < k; ++p)
                                        dot += static_cast<long double>(a[2 * (m - 1 - i) * k + p]) * b_at(p, j);
                                    const long double want =
                                        cs.alpha * dot + (cs.beta == T(0) ? 0.0L : cs.beta * (long double)c0[at]);
                                    worst = std::max(worst, static_cast<double>(std::abs(c[at] - want)));
                                }
                            INFO(loom::isa_name(isa) << " m " << m << " n " << n << " k " << k << " transposed "
                                                     << transposed << " alpha " << cs.alpha << " beta " << cs.beta);
                            CHECK(worst < tolerance * static_cast<double>(k + 4));
                            // AVX2 and AVX-512 make the same FMAs in the same order: the same bits
                            // when adding to C or overwriting it (general alpha and beta scale in
                            // scalar code for AVX2's partial panels, fused for AVX-512).
                            const bool plain = cs.alpha == T(1) && (cs.beta == T(0) || cs.beta == T(1));
                            if (isa == loom::Isa::avx2) avx2_result = c;
                            if (plain && isa == loom::Isa::avx512 && !avx2_result.empty()) CHECK(c == avx2_result);
                            ++checked;
                        }
                    }
    CHECK(checked == 11 * 9 * 3 * 2 * 4 * static_cast<int>(isas.size()));
}

}  // namespace

TEST_CASE("gemm_rows of every kernel variant matches the product in long double, float and double") {
    check_variants<float>(6e-7);
    check_variants<double>(1e-15);
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

// The addend rows (d_rows) the AVX2 / AVX-512 kernels read instead of C's own: the result never
// reads C (NaN there), equals the product plus the addend, and has the bits of copying the addend
// into C first and adding the product to it (what Times did before the kernels took addends).
TEST_CASE("gemm_rows adds addend rows that lie apart from the result in every kernel variant") {
    std::mt19937 rng(17);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    int checked = 0;
    for (loom::Isa isa : loom::supported_isas())
        for (std::size_t m : {1, 5, 13, 32})
            for (std::size_t n : {17, 40})
                for (std::size_t k : {3, 33})
                    for (bool one_bias : {false, true}) {
                        std::vector<float> b(k * n), a(m * k), d(m * n), packed(loom::packed_size<float>(k, n));
                        for (float& v : b) v = static_cast<float>(u(rng));
                        for (float& v : a) v = static_cast<float>(u(rng));
                        for (float& v : d) v = static_cast<float>(u(rng));
                        loom::pack_right(false, k, n, b.data(), n, packed.data());
                        std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN()), copied(m * n);
                        std::vector<const float*> a_rows(m), d_rows(m);
                        std::vector<float*> c_rows(m), copied_rows(m);
                        for (std::size_t i = 0; i < m; ++i) {
                            a_rows[i] = a.data() + i * k;
                            d_rows[i] = d.data() + (one_bias ? 0 : i * n);
                            c_rows[i] = c.data() + i * n;
                            copied_rows[i] = copied.data() + i * n;
                            std::copy_n(d_rows[i], n, copied_rows[i]);
                        }
                        loom::gemm_rows<float>(isa, m, n, k, a_rows.data(), packed.data(), c_rows.data(), 1.0f, 1.0f,
                                               d_rows.data());
                        loom::gemm_rows<float>(isa, m, n, k, a_rows.data(), packed.data(), copied_rows.data(), 1.0f,
                                               1.0f);
                        double worst = 0;
                        for (std::size_t i = 0; i < m; ++i)
                            for (std::size_t j = 0; j < n; ++j) {
                                long double dot = d_rows[i][j];
                                for (std::size_t p = 0; p < k; ++p)
                                    dot += static_cast<long double>(a[i * k + p]) * b[p * n + j];
                                worst = std::max(worst, static_cast<double>(std::abs(c[i * n + j] - dot)));
                            }
                        INFO(loom::isa_name(isa) << " m " << m << " n " << n << " k " << k << " one bias " << one_bias);
                        CHECK(worst < 6e-7 * static_cast<double>(k + 4));
                        CHECK(c == copied);
                        ++checked;
                    }
    CHECK(checked == 4 * 2 * 2 * 2 * static_cast<int>(loom::supported_isas().size()));
}

// pack_right of a transposed operand turns whole panels by 16 x 16 transposes on AVX-512 and
// copies one float at a time otherwise: every value must land at the same place either way.
TEST_CASE("pack_right of a transposed operand puts every value in its panel for every kernel variant") {
    const loom::Isa before = loom::active_isa();
    int checked = 0;
    for (loom::Isa isa : loom::supported_isas()) {
        loom::set_active_isa(isa);
        for (std::size_t n : {16, 32, 40})
            for (std::size_t k : {1, 15, 16, 17, 300}) {
                // b [n, k] with a row stride of k + 5; b[j][p] = 1000 j + p + 1.
                const std::size_t ldb = k + 5, width = 16;
                std::vector<float> b(n * ldb, -7.0f);
                for (std::size_t j = 0; j < n; ++j)
                    for (std::size_t p = 0; p < k; ++p) b[j * ldb + p] = static_cast<float>(1000 * j + p + 1);
                std::vector<float> packed(loom::packed_size<float>(k, n), -1.0f);
                loom::pack_right(true, k, n, b.data(), ldb, packed.data());
                bool placed = true;
                for (std::size_t j = 0; j < (n + width - 1) / width * width; ++j)
                    for (std::size_t p = 0; p < k; ++p) {
                        const float want = j < n ? static_cast<float>(1000 * j + p + 1) : 0.0f;
                        placed &= packed[(j / width) * width * k + p * width + j % width] == want;
                    }
                INFO(loom::isa_name(isa) << " n " << n << " k " << k);
                CHECK(placed);
                ++checked;
            }
    }
    loom::set_active_isa(before);
    CHECK(checked == 3 * 5 * static_cast<int>(loom::supported_isas().size()));
}
