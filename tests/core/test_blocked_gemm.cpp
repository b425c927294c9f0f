// gemm_blocked (loom's own cache-blocked GEMM) for every kernel variant this CPU runs, and
// loom::gemm (which uses it on AVX-512), against products summed in long double: all four
// transpositions, leading dimensions wider than the rows, alpha and beta, and shapes that cross
// the blocks of k (256), of rows (240) and of columns (2048 floats).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu.hpp"
#include "core/gemm.hpp"
#include "core/isa_kernels.hpp"
#include "core/packed_gemm.hpp"

namespace {

struct Shape3 {
    std::size_t m, n, k;
};

template <class T>
struct Operands {
    bool ta, tb;
    Shape3 s;
    std::size_t lda, ldb, ldc;
    std::vector<T> a, b, c0;

    Operands(bool trans_a, bool trans_b, Shape3 shape, std::mt19937& rng) : ta(trans_a), tb(trans_b), s(shape) {
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        lda = (ta ? s.m : s.k) + 1;
        ldb = (tb ? s.k : s.n) + 2;
        ldc = s.n + 3;
        a.resize((ta ? s.k : s.m) * lda);
        b.resize((tb ? s.n : s.k) * ldb);
        c0.resize(s.m * ldc);
        for (T& v : a) v = static_cast<T>(u(rng));
        for (T& v : b) v = static_cast<T>(u(rng));
        for (T& v : c0) v = static_cast<T>(u(rng));
    }
    T at_a(std::size_t i, std::size_t p) const { return ta ? a[p * lda + i] : a[i * lda + p]; }
    T at_b(std::size_t p, std::size_t j) const { return tb ? b[j * ldb + p] : b[p * ldb + j]; }

    // Largest |c - (alpha op(A) op(B) + beta c0)| over the product, and whether the padding
    // columns of C beyond n kept their values.
    double worst(const std::vector<T>& c, T alpha, T beta, bool& padding_kept) const {
        double w = 0;
        padding_kept = true;
        for (std::size_t i = 0; i < s.m; ++i) {
            for (std::size_t j = 0; j < s.n; ++j) {
                long double dot = 0;
                for (std::size_t p = 0; p < s.k; ++p) dot += static_cast<long double>(at_a(i, p)) * at_b(p, j);
                const long double want = alpha * dot + (beta == T(0) ? 0.0L : beta * (long double)c0[i * ldc + j]);
                w = std::max(w, static_cast<double>(std::abs(c[i * ldc + j] - want)));
            }
            for (std::size_t j = s.n; j < ldc; ++j) padding_kept &= c[i * ldc + j] == c0[i * ldc + j];
        }
        return w;
    }
};

template <class T>
void check_blocked(double tolerance) {
    std::mt19937 rng(11);
    int checked = 0;
    const Shape3 shapes[] = {{1, 16, 1}, {13, 33, 7}, {37, 70, 300}, {250, 40, 20}, {5, 2100, 3}};
    for (const Shape3& s : shapes)
        for (int t = 0; t < 4; ++t) {
            const Operands<T> op(t & 1, t & 2, s, rng);
            for (loom::Isa isa : loom::supported_isas())
                for (int ab = 0; ab < 3; ++ab) {
                    const T alphas[] = {1, 1, T(-1.5)}, betas[] = {0, 1, T(0.5)};
                    std::vector<T> c = op.c0;
                    // beta == 0 must not read C: NaN there would show.
                    if (betas[ab] == T(0))
                        for (std::size_t i = 0; i < s.m; ++i) c[i * op.ldc] = std::numeric_limits<T>::quiet_NaN();
                    loom::gemm_blocked<T>(isa, op.ta, op.tb, s.m, s.n, s.k, alphas[ab], op.a.data(), op.lda,
                                          op.b.data(), op.ldb, betas[ab], c.data(), op.ldc);
                    bool padding_kept = false;
                    const double w = op.worst(c, alphas[ab], betas[ab], padding_kept);
                    INFO(loom::isa_name(isa) << " m " << s.m << " n " << s.n << " k " << s.k << " ta " << op.ta
                                             << " tb " << op.tb << " alpha " << alphas[ab] << " beta " << betas[ab]);
                    CHECK(w < tolerance * static_cast<double>(s.k + 4));
                    CHECK(padding_kept);
                    ++checked;
                }
        }
    CHECK(checked == 5 * 4 * 3 * static_cast<int>(loom::supported_isas().size()));
}

}  // namespace

TEST_CASE("gemm_blocked of every kernel variant matches the product in long double") {
    check_blocked<float>(6e-7);
    check_blocked<double>(1e-15);
}

TEST_CASE("gemm_blocked with k = 0 or alpha = 0 scales C by beta") {
    std::vector<float> c = {1, 2, 3, 4}, a(4, std::numeric_limits<float>::quiet_NaN());
    loom::gemm_blocked<float>(loom::active_isa(), false, false, 2, 2, 0, 1.0f, a.data(), 1, a.data(), 2, 2.0f, c.data(),
                              2);
    CHECK(c == std::vector<float>{2, 4, 6, 8});
    loom::gemm_blocked<float>(loom::active_isa(), false, false, 2, 2, 0, 1.0f, a.data(), 1, a.data(), 2, 0.0f, c.data(),
                              2);
    CHECK(c == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("loom gemm agrees with the product in long double on large shapes in every transposition") {
    std::mt19937 rng(5);
    for (int t = 0; t < 4; ++t) {
        const Operands<float> op(t & 1, t & 2, {300, 260, 270}, rng);
        std::vector<float> c = op.c0;
        loom::gemm(op.ta, op.tb, 300, 260, 270, 1.0f, op.a.data(), op.lda, op.b.data(), op.ldb, 1.0f, c.data(), op.ldc);
        bool padding_kept = false;
        INFO("ta " << op.ta << " tb " << op.tb << " kernels " << loom::gemm_kernels());
        CHECK(op.worst(c, 1.0f, 1.0f, padding_kept) < 6e-7 * 274);
        CHECK(padding_kept);
    }
}

TEST_CASE("gemm_blocked_rows multiplies scattered rows and leaves the rows between them") {
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (bool tb : {false, true})
        for (const Shape3 s : {Shape3{7, 40, 300}, Shape3{250, 17, 5}}) {
            // Rows of A and C two apart and in reverse order; B stored [k, n] or [n, k].
            const std::size_t ldb = (tb ? s.k : s.n) + 1;
            std::vector<float> a(2 * s.m * s.k), b((tb ? s.n : s.k) * ldb), c0(2 * s.m * s.n);
            for (float& v : a) v = static_cast<float>(u(rng));
            for (float& v : b) v = static_cast<float>(u(rng));
            for (float& v : c0) v = static_cast<float>(u(rng));
            std::vector<float> c = c0;
            std::vector<const float*> a_rows(s.m);
            std::vector<float*> c_rows(s.m);
            for (std::size_t i = 0; i < s.m; ++i) {
                a_rows[i] = a.data() + 2 * (s.m - 1 - i) * s.k;
                c_rows[i] = c.data() + 2 * (s.m - 1 - i) * s.n;
            }
            loom::gemm_blocked_rows<float>(tb, s.m, s.n, s.k, 2.0f, a_rows.data(), b.data(), ldb, 1.0f, c_rows.data());
            double worst = 0;
            bool untouched = true;
            for (std::size_t i = 0; i < s.m; ++i) {
                const std::size_t row = 2 * (s.m - 1 - i);
                for (std::size_t j = 0; j < s.n; ++j) {
                    long double dot = 0;
                    for (std::size_t p = 0; p < s.k; ++p)
                        dot += static_cast<long double>(a[row * s.k + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
                    worst = std::max(worst,
                                     static_cast<double>(std::abs(c[row * s.n + j] - (2 * dot + c0[row * s.n + j]))));
                    untouched &= c[(row + 1) * s.n + j] == c0[(row + 1) * s.n + j];
                }
            }
            INFO("tb " << tb << " m " << s.m << " n " << s.n << " k " << s.k);
            CHECK(worst < 6e-7 * static_cast<double>(2 * s.k + 4));
            CHECK(untouched);
        }
}

TEST_CASE("gemm_blocked_rows_tn multiplies the transpose of scattered rows by scattered rows") {
    std::mt19937 rng(9);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    // k crosses the blocks of k (256), m the blocks of rows (240); C rows wider than n (ldc).
    for (const Shape3 s : {Shape3{7, 40, 300}, Shape3{250, 17, 5}, Shape3{33, 1, 12}}) {
        // A [k, m] and B [k, n] stored one row apart and in reverse order.
        std::vector<double> a(2 * s.k * s.m), b(2 * s.k * s.n);
        for (double& v : a) v = u(rng);
        for (double& v : b) v = u(rng);
        std::vector<const double*> a_rows(s.k), b_rows(s.k);
        for (std::size_t p = 0; p < s.k; ++p) {
            a_rows[p] = a.data() + 2 * (s.k - 1 - p) * s.m;
            b_rows[p] = b.data() + 2 * (s.k - 1 - p) * s.n;
        }
        const std::size_t ldc = s.n + 2;
        std::vector<double> c0(s.m * ldc);
        for (double& v : c0) v = u(rng);
        for (double beta : {0.0, 1.0}) {
            std::vector<double> c = c0;
            loom::gemm_blocked_rows_tn<double>(s.m, s.n, s.k, -0.5, a_rows.data(), b_rows.data(), beta, c.data(), ldc);
            double worst = 0;
            bool padding_kept = true;
            for (std::size_t i = 0; i < s.m; ++i) {
                for (std::size_t j = 0; j < s.n; ++j) {
                    long double dot = 0;
                    for (std::size_t p = 0; p < s.k; ++p)
                        dot += static_cast<long double>(a_rows[p][i]) * static_cast<long double>(b_rows[p][j]);
                    const long double want = -0.5L * dot + beta * static_cast<long double>(c0[i * ldc + j]);
                    worst = std::max(worst, static_cast<double>(std::abs(c[i * ldc + j] - want)));
                }
                for (std::size_t j = s.n; j < ldc; ++j) padding_kept &= c[i * ldc + j] == c0[i * ldc + j];
            }
            INFO("m " << s.m << " n " << s.n << " k " << s.k << " beta " << beta);
            CHECK(worst < 1e-15 * static_cast<double>(s.k + 4));
            CHECK(padding_kept);
        }
    }
}

TEST_CASE("gemm_blocked_rows adds a bias row to every row without reading the result rows") {
    std::mt19937 rng(13);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    // k = 300 crosses a block of k: the bias goes in with the first block only.
    for (bool tb : {false, true}) {
        const Shape3 s{37, 70, 300};
        std::vector<float> a(s.m * s.k), b(s.k * s.n), bias(s.n);
        for (float& v : a) v = static_cast<float>(u(rng));
        for (float& v : b) v = static_cast<float>(u(rng));
        for (float& v : bias) v = static_cast<float>(u(rng));
        std::vector<float> c(s.m * s.n, std::numeric_limits<float>::quiet_NaN()), copied(s.m * s.n);
        std::vector<const float*> a_rows(s.m), bias_rows(s.m, bias.data());
        std::vector<float*> c_rows(s.m), copied_rows(s.m);
        for (std::size_t i = 0; i < s.m; ++i) {
            a_rows[i] = a.data() + i * s.k;
            c_rows[i] = c.data() + i * s.n;
            copied_rows[i] = copied.data() + i * s.n;
            std::copy_n(bias.data(), s.n, copied_rows[i]);
        }
        const std::size_t ldb = tb ? s.k : s.n;
        loom::gemm_blocked_rows<float>(tb, s.m, s.n, s.k, 1.0f, a_rows.data(), b.data(), ldb, 1.0f, c_rows.data(),
                                       bias_rows.data());
        loom::gemm_blocked_rows<float>(tb, s.m, s.n, s.k, 1.0f, a_rows.data(), b.data(), ldb, 1.0f, copied_rows.data());
        double worst = 0;
        for (std::size_t i = 0; i < s.m; ++i)
            for (std::size_t j = 0; j < s.n; ++j) {
                long double dot = bias[j];
                for (std::size_t p = 0; p < s.k; ++p)
                    dot += static_cast<long double>(a[i * s.k + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
                worst = std::max(worst, static_cast<double>(std::abs(c[i * s.n + j] - dot)));
            }
        INFO("tb " << tb);
        CHECK(worst < 6e-7 * static_cast<double>(s.k + 4));
        CHECK(c == copied);  // the same sums as copying the bias in first
    }
}

#if defined(__x86_64__)
TEST_CASE("the AVX-512 interleaving of A blocks puts every value where the packed kernel reads it") {
    if (!loom::cpu_supports(loom::Isa::avx512)) return;
    constexpr std::size_t mr = loom::kernels::kPackedRows;
    int checked = 0;
    for (std::size_t rows = 1; rows <= mr; ++rows)
        for (std::size_t k : {1, 15, 16, 17, 40, 256}) {
            // Row r holds 1000 r + p + 1 (never 0), rows 3 apart in memory.
            std::vector<float> a(3 * mr * k);
            std::vector<const float*> src(rows);
            for (std::size_t r = 0; r < rows; ++r) {
                src[r] = a.data() + 3 * r * k;
                for (std::size_t p = 0; p < k; ++p) a[3 * r * k + p] = static_cast<float>(1000 * r + p + 1);
            }
            std::vector<float> out(mr * k + 16, -1.0f);
            loom::kernels::pack_rows_interleaved_avx512(rows, k, src.data(), out.data());
            bool placed = true;
            for (std::size_t p = 0; p < k; ++p)
                for (std::size_t r = 0; r < mr; ++r)
                    placed &= out[p * mr + r] == (r < rows ? static_cast<float>(1000 * r + p + 1) : 0.0f);
            bool beyond_untouched = true;
            for (std::size_t e = mr * k; e < out.size(); ++e) beyond_untouched &= out[e] == -1.0f;
            INFO("rows " << rows << " k " << k);
            CHECK(placed);
            CHECK(beyond_untouched);
            ++checked;
        }
    CHECK(checked == 12 * 6);
}
#endif
