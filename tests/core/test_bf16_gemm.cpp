// Float products at MatmulPrecision::medium (core/gemm.hpp): on CPUs with AVX-512 BF16 each
// operand is rounded to bfloat16 and the exact products are summed in float. Checked against the
// operands rounded here by their bits (to nearest, ties to even: an independent rounding) and
// multiplied in long double; elsewhere, and for double, medium must give highest's bits. The
// kernels' cases hold Bf16Products::always, so they run on every CPU that has the instructions,
// whether or not the automatic choice takes them there; the last cases check that choice.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu.hpp"
#include "core/errors.hpp"
#include "core/gemm.hpp"
#include "core/packed_gemm.hpp"
#include "core/parallel.hpp"

namespace {

float unchanged(float x) { return x; }

// x rounded to the nearest bfloat16 (the top 16 bits of a float), ties to even; NaN stays NaN.
float to_bf16(float x) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &x, 4);
    if (std::isnan(x)) return x;
    const std::uint32_t lower = bits & 0xffffu, keep = bits & 0xffff0000u;
    std::uint64_t rounded = keep;
    if (lower > 0x8000u || (lower == 0x8000u && (keep & 0x10000u))) rounded += 0x10000u;
    const auto out_bits = static_cast<std::uint32_t>(rounded);
    float out = 0;
    std::memcpy(&out, &out_bits, 4);
    return out;
}

using Precision = loom::MatmulPrecisionScope;
using Bf16Choice = loom::Bf16ProductsScope;

struct Case {
    bool ta, tb;
    std::size_t m, n, k;
};

// C = alpha op(A) op(B) + beta C0 through `multiply`, against the long double product of the
// operands as `round` leaves them; returns the largest error relative to the sum of |terms|.
template <class Multiply>
double worst_relative(const Case& s, float alpha, float beta, float (*round)(float), std::mt19937& rng,
                      Multiply multiply) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const std::size_t lda = (s.ta ? s.m : s.k) + 1, ldb = (s.tb ? s.k : s.n) + 3, ldc = s.n + 2;
    std::vector<float> a((s.ta ? s.k : s.m) * lda), b((s.tb ? s.n : s.k) * ldb), c0(s.m * ldc);
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
    for (float& v : c0) v = u(rng);
    std::vector<float> c = c0;
    multiply(s, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
    double worst = 0;
    for (std::size_t i = 0; i < s.m; ++i) {
        for (std::size_t j = 0; j < s.n; ++j) {
            long double dot = 0, size = 0;
            for (std::size_t p = 0; p < s.k; ++p) {
                const long double x = round(s.ta ? a[p * lda + i] : a[i * lda + p]);
                const long double y = round(s.tb ? b[j * ldb + p] : b[p * ldb + j]);
                dot += x * y;
                size += std::abs(x * y);
            }
            const long double want = alpha * dot + beta * static_cast<long double>(c0[i * ldc + j]);
            worst = std::max(worst, static_cast<double>(std::abs(c[i * ldc + j] - want) / (size + 1)));
        }
        for (std::size_t j = s.n; j < ldc; ++j) REQUIRE(c[i * ldc + j] == c0[i * ldc + j]);  // padding kept
    }
    return worst;
}

// Shapes that cross every block of the bfloat16 path: k odd, past a block of 512 and a 16-pair
// transpose; m past 240 rows and not a multiple of 12; n past 2,048 columns, not a multiple of 16.
const Case cases[] = {
    {false, false, 13, 33, 7},    {true, false, 13, 33, 7},    {false, true, 13, 33, 7},    {true, true, 13, 33, 7},
    {false, false, 250, 70, 601}, {true, false, 250, 70, 601}, {false, true, 250, 70, 601}, {true, true, 250, 70, 601},
    {false, false, 5, 2100, 35},  {false, true, 29, 47, 1},    {true, false, 37, 20, 1030},
};

}  // namespace

TEST_CASE("bfloat16 rounding of the test: to nearest, ties to even, NaN kept") {
    // bfloat16 keeps 7 bits after the point: its neighbours of 1 are 1 and 1 + 2^-7.
    CHECK(to_bf16(1.0f) == 1.0f);
    CHECK(to_bf16(1.0f + 0x1p-9f) == 1.0f);                       // below the half
    CHECK(to_bf16(1.0f + 0x1p-8f + 0x1p-12f) == 1.0f + 0x1p-7f);  // above it
    CHECK(to_bf16(1.0f + 0x1p-8f) == 1.0f);                       // a tie: to 1, even
    CHECK(to_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);         // a tie: to 1 + 2^-6, even
    CHECK(to_bf16(-1.0f - 0x1p-10f) == -1.0f);
    CHECK(std::isnan(to_bf16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(to_bf16(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
}

TEST_CASE("MatmulPrecisionScope sets the precision for its life and puts the one before back, on an exception too") {
    REQUIRE(loom::matmul_precision() == loom::MatmulPrecision::highest);
    {
        const Precision medium(loom::MatmulPrecision::medium);
        CHECK(loom::matmul_precision() == loom::MatmulPrecision::medium);
        {
            const Precision highest(loom::MatmulPrecision::highest);  // nested: evaluation inside training
            CHECK(loom::matmul_precision() == loom::MatmulPrecision::highest);
        }
        CHECK(loom::matmul_precision() == loom::MatmulPrecision::medium);
        // An evaluation that throws inside its scope leaves training's precision set.
        auto evaluate = [] {
            const Precision highest(loom::MatmulPrecision::highest);
            CHECK(loom::matmul_precision() == loom::MatmulPrecision::highest);
            throw loom::DataError("the evaluated file is bad");
        };
        CHECK_THROWS_AS(evaluate(), loom::DataError);
        CHECK(loom::matmul_precision() == loom::MatmulPrecision::medium);
    }
    CHECK(loom::matmul_precision() == loom::MatmulPrecision::highest);
}

TEST_CASE("medium matmul precision multiplies operands rounded to bfloat16 where the CPU has it") {
    CHECK(loom::matmul_precision() == loom::MatmulPrecision::highest);
    CHECK(loom::parse_matmul_precision("medium") == loom::MatmulPrecision::medium);
    CHECK_THROWS_WITH(loom::parse_matmul_precision("low"), doctest::Contains("expected highest or medium"));
    const Precision medium(loom::MatmulPrecision::medium);
    const Bf16Choice always(loom::Bf16Products::always);
    if (!loom::bf16_products()) {  // no AVX-512 BF16, other kernels asked for (LOOM_ISA, LOOM_GEMM)
        MESSAGE("medium does not round here: a case below checks medium == highest");
        return;
    }
    CHECK(loom::cpu_supports_bf16());
    CHECK(loom::gemm_kernels() == "loom-avx512-bf16");
    std::mt19937 rng(17);
    const auto blocked = [](const Case& s, float alpha, const float* a, std::size_t lda, const float* b,
                            std::size_t ldb, float beta, float* c, std::size_t ldc) {
        loom::gemm_blocked<float>(loom::Isa::avx512, s.ta, s.tb, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, c, ldc);
    };
    const auto gemm = [](const Case& s, float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb,
                         float beta, float* c, std::size_t ldc) {
        loom::gemm(s.ta, s.tb, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, c, ldc);
    };
    for (const Case& s : cases)
        for (int ab = 0; ab < 3; ++ab) {
            const float alphas[] = {1.0f, 1.0f, -1.5f}, betas[] = {0.0f, 1.0f, 0.5f};
            INFO("m " << s.m << " n " << s.n << " k " << s.k << " ta " << s.ta << " tb " << s.tb << " alpha "
                      << alphas[ab] << " beta " << betas[ab]);
            // The float sum's own rounding only: far below what unrounded operands would differ by.
            CHECK(worst_relative(s, alphas[ab], betas[ab], to_bf16, rng, blocked) < 2e-6);
            // gemm() leaves the smallest products (gemm_own_kernels false) to OpenBLAS, unrounded.
            CHECK(worst_relative(s, alphas[ab], betas[ab], loom::gemm_own_kernels(s.m, s.n, s.k) ? to_bf16 : unchanged,
                                 rng, gemm) < 2e-6);
        }
    // And the rounding shows: against the unrounded operands the error is bfloat16's.
    const double unrounded = worst_relative({false, false, 40, 40, 64}, 1.0f, 0.0f, unchanged, rng, gemm);
    CHECK(unrounded > 1e-4);
    CHECK(unrounded < 1e-2);
}

TEST_CASE(
    "medium matmul precision: a value between two bfloat16 values rounds to the nearer, subnormals are zero, NaN "
    "propagates") {
    const Precision medium(loom::MatmulPrecision::medium);
    const Bf16Choice always(loom::Bf16Products::always);
    if (!loom::bf16_products()) return;
    // [24 x 64] x [64 x 32], every product 1 * x: C = 64 x the rounded x.
    const std::size_t m = 24, n = 32, k = 64;
    std::vector<float> a(m * k, 1.0f), b(k * n), c(m * n);
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t p = 0; p < k; ++p) b[p * n + j] = j % 2 ? 1.0f + 0x1p-8f + 0x1p-12f : 1.0f + 0x1p-10f;
    loom::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    CHECK(c[0] == 64.0f);                     // 1 + 2^-10 rounds down to 1
    CHECK(c[1] == 64.0f * (1.0f + 0x1p-7f));  // 1 + 2^-8 + 2^-12 rounds up to 1 + 2^-7
    // A subnormal operand counts as zero (as the BF16 instructions read it): 2^-130 * 2^126 would add 2^-4.
    a[2 * k + 1] = 0x1p-130f;
    b[1 * n + 0] = 0x1p126f;
    loom::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    CHECK(c[2 * n] == 63.0f);
    a[5 * k + 3] = std::numeric_limits<float>::quiet_NaN();
    loom::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    CHECK(std::isnan(c[5 * n + 7]));
    CHECK(c[4 * n + 7] == 64.0f * (1.0f + 0x1p-7f));
}

TEST_CASE("medium matmul precision leaves double products, and CPUs without AVX-512 BF16, at highest's bits") {
    std::mt19937 rng(23);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const std::size_t m = 50, n = 40, k = 300;
    std::vector<float> a(m * k), b(k * n);
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
    std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
    std::vector<float> high(m * n), med(m * n);
    std::vector<double> high_d(m * n), med_d(m * n);
    const Bf16Choice always(loom::Bf16Products::always);
    const loom::Isa before = loom::active_isa();
    for (loom::Isa isa : loom::supported_isas()) {
        loom::set_active_isa(isa);
        {
            const Precision p(loom::MatmulPrecision::highest);
            loom::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, high.data(), n);
            loom::gemm(false, false, m, n, k, 1.0, ad.data(), k, bd.data(), n, 0.0, high_d.data(), n);
        }
        {
            const Precision p(loom::MatmulPrecision::medium);
            loom::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, med.data(), n);
            loom::gemm(false, false, m, n, k, 1.0, ad.data(), k, bd.data(), n, 0.0, med_d.data(), n);
            INFO(loom::isa_name(isa) << " bf16 " << loom::bf16_products());
            CHECK(med_d == high_d);
            CHECK((med == high) == !loom::bf16_products());
        }
    }
    loom::set_active_isa(before);
}

TEST_CASE("medium matmul precision rounds the products over scattered rows too (gemm_blocked_rows, _tn)") {
    const Precision medium(loom::MatmulPrecision::medium);
    const Bf16Choice always(loom::Bf16Products::always);
    if (!loom::bf16_products()) return;
    std::mt19937 rng(29);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const std::size_t m = 30, n = 50, k = 77;
    // Rows of A, B and C two apart and in reverse order.
    std::vector<float> a(2 * m * k), b(2 * k * n), c(2 * m * n, 0.5f);
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
    std::vector<const float*> a_rows(m), b_rows(k), a_cols(k);
    std::vector<float*> c_rows(m);
    for (std::size_t i = 0; i < m; ++i)
        a_rows[i] = a.data() + 2 * (m - 1 - i) * k, c_rows[i] = c.data() + 2 * (m - 1 - i) * n;
    for (std::size_t p = 0; p < k; ++p) b_rows[p] = b.data() + 2 * (k - 1 - p) * n;
    // C = A B over rows; then C' = A'^T B with A' [k, m] read from the same storage as columns.
    loom::gemm_blocked_rows<float>(false, m, n, k, 1.0f, a_rows.data(), b.data() + n, 2 * n, 0.0f, c_rows.data());
    double worst = 0;
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            long double dot = 0, size = 0;
            for (std::size_t p = 0; p < k; ++p) {
                const long double t = static_cast<long double>(to_bf16(a_rows[i][p])) * to_bf16(b[n + p * 2 * n + j]);
                dot += t, size += std::abs(t);
            }
            worst = std::max(worst, static_cast<double>(std::abs(c_rows[i][j] - dot) / (size + 1)));
        }
    CHECK(worst < 2e-6);
    for (std::size_t p = 0; p < k; ++p) a_cols[p] = a.data() + 2 * p * m;  // A' [k, m], rows 2 apart
    std::vector<float> d(m * n);
    loom::gemm_blocked_rows_tn<float>(m, n, k, 1.0f, a_cols.data(), b_rows.data(), 0.0f, d.data(), n);
    worst = 0;
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            long double dot = 0, size = 0;
            for (std::size_t p = 0; p < k; ++p) {
                const long double t = static_cast<long double>(to_bf16(a_cols[p][i])) * to_bf16(b_rows[p][j]);
                dot += t, size += std::abs(t);
            }
            worst = std::max(worst, static_cast<double>(std::abs(d[i * n + j] - dot) / (size + 1)));
        }
    CHECK(worst < 2e-6);
}

TEST_CASE("bfloat16 products: auto, on and off name the choices, anything else is refused naming them") {
    CHECK(loom::parse_bf16_products("auto") == loom::Bf16Products::automatic);
    CHECK(loom::parse_bf16_products("on") == loom::Bf16Products::always);
    CHECK(loom::parse_bf16_products("off") == loom::Bf16Products::never);
    for (loom::Bf16Products choice :
         {loom::Bf16Products::automatic, loom::Bf16Products::always, loom::Bf16Products::never})
        CHECK(loom::parse_bf16_products(loom::bf16_products_name(choice)) == choice);
    CHECK_THROWS_WITH_AS(loom::parse_bf16_products("yes"),
                         "unknown choice of bfloat16 products 'yes': expected auto, on or off", loom::UserError);
    CHECK_THROWS_AS(loom::parse_bf16_products("automatic"), loom::UserError);
}

TEST_CASE("bfloat16 products pay when they run at least 1.15 times float's rate") {
    CHECK(loom::kBf16MinSpeedup == 1.15);
    CHECK_FALSE(loom::bf16_products_pay(104.5, 69.2));   // Intel Xeon, family 6 model 207 (peak_bench)
    CHECK(loom::bf16_products_pay(239.0, 345.7));        // AMD Zen 5
    CHECK_FALSE(loom::bf16_products_pay(100.0, 100.0));  // alike: noise must not choose bfloat16
    CHECK_FALSE(loom::bf16_products_pay(100.0, 114.9));
    CHECK(loom::bf16_products_pay(100.0, 115.0));
    CHECK(loom::bf16_products_pay(1e-3, 2e-3));  // any unit, the same for both
    CHECK_FALSE(loom::bf16_products_pay(0.0, 50.0));
}

TEST_CASE("bfloat16 products: set_bf16_products chooses, a scope puts the choice before back") {
    const loom::Bf16Products start = loom::bf16_products_setting();
    {
        const Bf16Choice never(loom::Bf16Products::never);
        CHECK(loom::bf16_products_setting() == loom::Bf16Products::never);
        {
            const Bf16Choice always(loom::Bf16Products::always);
            CHECK(loom::bf16_products_setting() == loom::Bf16Products::always);
        }
        CHECK(loom::bf16_products_setting() == loom::Bf16Products::never);
    }
    CHECK(loom::bf16_products_setting() == start);
}

TEST_CASE("bfloat16 products off: medium gives highest's bits, on every CPU") {
    std::mt19937 rng(31);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const std::size_t m = 64, n = 96, k = 200;  // large enough for loom's kernels
    std::vector<float> a(m * k), b(k * n), high(m * n), off(m * n), on(m * n);
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
    const auto multiply = [&](std::vector<float>& c) {
        loom::gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
    };
    {
        const Precision p(loom::MatmulPrecision::highest);
        multiply(high);
    }
    const Precision medium(loom::MatmulPrecision::medium);
    {
        const Bf16Choice never(loom::Bf16Products::never);
        CHECK_FALSE(loom::bf16_products());
        CHECK(loom::gemm_kernels() != "loom-avx512-bf16");
        multiply(off);
    }
    CHECK(off == high);
    const Bf16Choice always(loom::Bf16Products::always);
    multiply(on);
    // The same product with bfloat16 operands differs, where the CPU rounds them.
    CHECK((on == high) == !loom::bf16_products());
}

TEST_CASE("bfloat16 products automatic: chosen by the speed-up measured once, float where it is too small") {
    const double speedup = loom::bf16_speedup();
    INFO("bfloat16 kernels at " << speedup << " times float's rate; gemm kernels " << loom::gemm_kernels());
    if (!loom::cpu_supports_bf16()) {
        CHECK(speedup == 0);
        return;
    }
    CHECK(speedup > 0.2);  // a rate, not a failed measurement
    CHECK(speedup < 5.0);
    CHECK(loom::bf16_speedup() == speedup);  // measured once: the same value again
    const Bf16Choice automatic(loom::Bf16Products::automatic);
    CHECK_FALSE(loom::bf16_products());  // highest: nothing rounds
    const Precision medium(loom::MatmulPrecision::medium);
    const loom::Isa before = loom::active_isa();
    loom::set_active_isa(loom::Isa::avx512);
    bool possible = false;  // not with LOOM_GEMM=openblas or several OpenBLAS threads per product
    {
        const Bf16Choice always(loom::Bf16Products::always);
        possible = loom::bf16_products();
    }
    if (possible) {
        CHECK(loom::bf16_products() == (speedup >= loom::kBf16MinSpeedup));
        CHECK((loom::gemm_kernels() == "loom-avx512-bf16") == (speedup >= loom::kBf16MinSpeedup));
    }
    loom::set_active_isa(before);
}

// Run by CTest with LOOM_BF16_PRODUCTS set to "off" and to a wrong value (tests/CMakeLists.txt): the
// variable is read once per process, so each is a process of its own.
TEST_CASE("bfloat16 products: LOOM_BF16_PRODUCTS chooses until set_bf16_products, a wrong value is refused") {
    const char* env = std::getenv("LOOM_BF16_PRODUCTS");
    const std::string value = env ? env : "";
    if (value.empty() || value == "auto") {
        CHECK(loom::bf16_products_setting() == loom::Bf16Products::automatic);
    } else if (value == "on" || value == "off") {
        CHECK(loom::bf16_products_setting() == loom::parse_bf16_products(value));
    } else {
        CHECK_THROWS_WITH_AS(loom::bf16_products_setting(),
                             ("LOOM_BF16_PRODUCTS=" + value + ": expected auto, on or off").c_str(), loom::UserError);
        // The function overrides the variable, a wrong one too.
        loom::set_bf16_products(loom::Bf16Products::automatic);
    }
    {
        const Bf16Choice on(loom::Bf16Products::always);
        CHECK(loom::bf16_products_setting() == loom::Bf16Products::always);
    }
    CHECK_NOTHROW(loom::bf16_products_setting());
}
