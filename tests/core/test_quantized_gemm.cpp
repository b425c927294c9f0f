// Weights kept in bfloat16 and int8 (core/quantized_gemm.hpp): the rounding itself by hand, the
// packing against the weight it came from, and gemm_rows_quantized of every kernel variant this
// CPU runs (portable, AVX2, AVX-512) against a double computation over the same rounded operands,
// over shapes that reach every kernel height, partial panels and panel pairs, alpha / beta and a
// separate addend, and the kernels of pairs (vdpbf16ps, the rows rounded) where the CPU has them; the
// AVX2 and AVX-512 variants that widen give the same bits, and a product split between two threads
// gives the bits of one.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu.hpp"
#include "core/errors.hpp"
#include "core/gemm.hpp"
#include "core/parallel.hpp"
#include "core/quantized_gemm.hpp"

using namespace loom;

namespace {

float from_bits(std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// B [k, n] as `w` keeps it, element (p, j), in double: bfloat16 widened (panels of 16 columns in
// pairs of rows, k rounded up to even), or int8 times its scale (panels of 16 columns, k rows).
double kept(const QuantizedWeight& w, std::size_t p, std::size_t j) {
    if (w.precision == WeightPrecision::bfloat16) {
        const std::size_t k2 = w.k + w.k % 2;
        return from_bits(std::uint32_t{w.bf16[(j / 16 * 16) * k2 + p / 2 * 32 + j % 16 * 2 + p % 2]} << 16);
    }
    return double(w.int8[(j / 16 * 16) * w.k + p * 16 + j % 16]) * w.scales[j];
}

struct Operands {
    std::size_t m, n, k;
    std::vector<float> a, b, c0, d;
};

Operands random_operands(std::size_t m, std::size_t n, std::size_t k, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    Operands o{m,
               n,
               k,
               std::vector<float>(m * k),
               std::vector<float>(k * n),
               std::vector<float>(m * n),
               std::vector<float>(m * n)};
    for (auto* v : {&o.a, &o.b, &o.c0, &o.d})
        for (float& x : *v) x = g(rng);
    return o;
}

// c = alpha * a' B' + beta * d over the rounded operands, in double, with the bound of float's
// rounding of the sums: k * 2^-23 * sum |a' b'| (and the epilogue's few roundings).
struct Reference {
    std::vector<double> c, bound;
};
// `rounded_rows`: the rows rounded to bfloat16 too (bfloat16 weights; int8 ones through vdpbf16ps).
Reference reference(const Operands& o, const QuantizedWeight& w, float alpha, float beta, bool separate_d,
                    bool rounded_rows) {
    Reference r{std::vector<double>(o.m * o.n), std::vector<double>(o.m * o.n)};
    for (std::size_t i = 0; i < o.m; ++i)
        for (std::size_t j = 0; j < o.n; ++j) {
            double s = 0, size = 0;
            for (std::size_t p = 0; p < o.k; ++p) {
                const float a = o.a[i * o.k + p];
                const double ar = rounded_rows ? round_to_bfloat16(a) : a;
                // int8: the sum of a q, times the scale once (as the kernels do)
                const double b = w.precision == WeightPrecision::int8
                                     ? double(w.int8[(j / 16 * 16) * w.k + p * 16 + j % 16])
                                     : kept(w, p, j);
                s += ar * b;
                size += std::abs(ar * b);
            }
            const double scale = w.precision == WeightPrecision::int8 ? w.scales[j] : 1.0;
            const double addend = (separate_d ? o.d : o.c0)[i * o.n + j];
            r.c[i * o.n + j] = alpha * s * scale + beta * addend;
            r.bound[i * o.n + j] =
                (double(o.k) + 4) * std::ldexp(1.0, -23) * (std::abs(alpha) * size * scale + std::abs(beta * addend)) +
                1e-30;
        }
    return r;
}

// The product through `isa`, result rows 2 apart in reverse order (the rows between checked
// untouched), the addend in its own rows when `separate_d`.
std::vector<float> run(Isa isa, const Operands& o, const QuantizedWeight& w, float alpha, float beta, bool separate_d) {
    std::vector<float> c(2 * o.m * o.n, -7.0f);
    std::vector<const float*> a_rows(o.m), d_rows(o.m);
    std::vector<float*> c_rows(o.m);
    for (std::size_t i = 0; i < o.m; ++i) {
        a_rows[i] = o.a.data() + i * o.k;
        c_rows[i] = c.data() + 2 * (o.m - 1 - i) * o.n;
        d_rows[i] = o.d.data() + i * o.n;
        if (!separate_d) std::copy_n(o.c0.data() + i * o.n, o.n, c_rows[i]);
    }
    gemm_rows_quantized(isa, o.m, o.n, o.k, a_rows.data(), w, c_rows.data(), alpha, beta,
                        separate_d ? d_rows.data() : nullptr);
    bool untouched = true;
    for (std::size_t i = 0; i < o.m; ++i)
        for (std::size_t j = 0; j < o.n; ++j) untouched &= c[(2 * i + 1) * o.n + j] == -7.0f;
    CHECK(untouched);
    std::vector<float> out(o.m * o.n);
    for (std::size_t i = 0; i < o.m; ++i) std::copy_n(c_rows[i], o.n, out.data() + i * o.n);
    return out;
}

}  // namespace

TEST_CASE("quantized weights: bfloat16 rounds to nearest, ties to even, and keeps NaN") {
    CHECK(round_to_bfloat16(1.0f) == 1.0f);
    CHECK(round_to_bfloat16(-2.5f) == -2.5f);
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to the even one, 1.
    CHECK(round_to_bfloat16(from_bits(0x3f808000)) == 1.0f);
    // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to the even one, 1 + 2^-6.
    CHECK(round_to_bfloat16(from_bits(0x3f818000)) == from_bits(0x3f820000));
    // just above halfway rounds up, just below down
    CHECK(round_to_bfloat16(from_bits(0x3f808001)) == from_bits(0x3f810000));
    CHECK(round_to_bfloat16(from_bits(0x3f807fff)) == 1.0f);
    CHECK(bfloat16_bits(1.0f) == 0x3f80);
    CHECK(std::isnan(round_to_bfloat16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(std::isinf(round_to_bfloat16(std::numeric_limits<float>::infinity())));
    CHECK(round_to_bfloat16(0.0f) == 0.0f);

    // Many at once (a cache's row): the bits of each one's rounding, written as bytes at an odd
    // address; NaNs of either sign and payload, infinities, ties, subnormals, the largest floats.
    std::vector<float> x;
    for (std::uint32_t bits :
         {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
          0x7f800001u, 0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x807fffffu, 0x00008000u, 0x80000000u})
        x.push_back(from_bits(bits));
    std::mt19937 rng(9);
    for (int i = 0; i < 200; ++i) x.push_back(from_bits(static_cast<std::uint32_t>(rng())));
    std::vector<char> bytes(2 * x.size() + 1, 0);
    bfloat16_bits(x.data(), x.size(), bytes.data() + 1);
    bool same = true;
    for (std::size_t e = 0; e < x.size(); ++e) {
        std::uint16_t got;
        std::memcpy(&got, bytes.data() + 1 + 2 * e, sizeof got);
        same &= got == bfloat16_bits(x[e]);
    }
    CHECK(same);
    CHECK(bytes[0] == 0);
}

TEST_CASE("quantized weights: int8 keeps each column as int8 times its largest magnitude / 127") {
    const std::size_t k = 5, n = 19;  // a whole panel and a part of one
    std::vector<float> b(k * n);
    std::mt19937_64 rng(3);
    std::normal_distribution<float> g(0.0f, 2.0f);
    for (float& x : b) x = g(rng);
    for (std::size_t p = 0; p < k; ++p) b[p * n + 4] = 0.0f;  // a column of zeros: scale 0
    b[2 * n + 7] = 100.0f;                                    // one large weight sets its column's scale
    QuantizedWeight w;
    quantize_right(WeightPrecision::int8, false, k, n, b.data(), n, w);
    REQUIRE(w.scales.size() == 32);
    CHECK(w.int8.size() == 32 * k);
    for (std::size_t j = 0; j < n; ++j) {
        float largest = 0;
        for (std::size_t p = 0; p < k; ++p) largest = std::max(largest, std::abs(b[p * n + j]));
        CHECK(w.scales[j] == doctest::Approx(largest / 127.0f).epsilon(1e-6));
        for (std::size_t p = 0; p < k; ++p) {
            // each weight within half a step of its column's grid, the largest exactly on it
            CHECK(std::abs(kept(w, p, j) - b[p * n + j]) <= 0.5 * w.scales[j] * (1 + 1e-5));
            CHECK(std::abs(int(w.int8[(j / 16 * 16) * k + p * 16 + j % 16])) <= 127);
        }
    }
    CHECK(w.scales[4] == 0.0f);
    CHECK(kept(w, 2, 7) == doctest::Approx(100.0));
    CHECK(w.int8[2 * 16 + 7] == 127);                                 // column 7 of panel 0, row 2
    for (std::size_t j = n; j < 32; ++j) CHECK(w.scales[j] == 0.0f);  // the padding columns
    CHECK(w.bytes() == 32 * k + 32 * sizeof(float));

    // Packed from the transpose (the stored matrix [n, k]): the same weight.
    std::vector<float> bt(n * k);
    for (std::size_t p = 0; p < k; ++p)
        for (std::size_t j = 0; j < n; ++j) bt[j * k + p] = b[p * n + j];
    QuantizedWeight wt;
    quantize_right(WeightPrecision::int8, true, k, n, bt.data(), k, wt);
    CHECK(wt.int8 == w.int8);
    CHECK(wt.scales == w.scales);
    QuantizedWeight h, ht;
    quantize_right(WeightPrecision::bfloat16, false, k, n, b.data(), n, h);
    quantize_right(WeightPrecision::bfloat16, true, k, n, bt.data(), k, ht);
    CHECK(h.bf16 == ht.bf16);
    CHECK(h.bf16.size() == 32 * (k + 1));  // in pairs of rows: an odd k's last pair has a zero second row
    for (std::size_t j = 0; j < 32; ++j) CHECK(h.bf16[(j / 16 * 16) * (k + 1) + k / 2 * 32 + j % 16 * 2 + 1] == 0);
    CHECK(h.bytes() == 32 * (k + 1) * sizeof(std::uint16_t));
    for (std::size_t p = 0; p < k; ++p)
        for (std::size_t j = 0; j < n; ++j) CHECK(kept(h, p, j) == round_to_bfloat16(b[p * n + j]));
    CHECK_THROWS_AS(quantize_right(WeightPrecision::float32, false, k, n, b.data(), n, h), UserError);

    // A NaN or an infinity makes its column's products NaN, not a number made up by the rounding.
    b[1 * n + 3] = std::numeric_limits<float>::quiet_NaN();
    b[3 * n + 17] = -std::numeric_limits<float>::infinity();
    quantize_right(WeightPrecision::int8, false, k, n, b.data(), n, w);
    CHECK(std::isnan(w.scales[3]));
    CHECK(std::isnan(w.scales[17]));
    CHECK(w.scales[2] > 0);
    std::vector<float> ones(k, 1.0f), c(n);
    const float* a_row = ones.data();
    float* c_row = c.data();
    for (Isa isa : supported_isas()) {
        gemm_rows_quantized(isa, 1, n, k, &a_row, w, &c_row, 1.0f, 0.0f);
        CHECK(std::isnan(c[3]));
        CHECK(std::isnan(c[17]));
        CHECK(std::isfinite(c[2]));
    }
}

TEST_CASE("quantized weights: int8 widened into bfloat16 pairs holds each int8 where bfloat16 keeps it") {
    const std::size_t k = 5, n = 19;  // an odd k (a last pair half zero), a partial second panel
    const Operands o = random_operands(1, n, k, 3);
    QuantizedWeight w;
    quantize_right(WeightPrecision::int8, true, k, n, o.b.data(), k, w);  // transposed: b is [n, k]
    CHECK(w.widened.empty());
    CHECK(w.bytes() == 32 * 5 + 32 * 4);  // int8 panels and scales
    widen_int8(w);
    REQUIRE(w.widened.size() == 32 * 6);  // 2 panels of 16 columns, k rounded up to 6
    CHECK(w.bytes() == (bf16_kernels_chosen() ? 32 * 6 * 2 : 32 * 5) + 32 * 4);  // what the kernels read
    bool same = true;
    for (std::size_t j = 0; j < 32; ++j)
        for (std::size_t p = 0; p < 6; ++p) {
            const std::uint16_t bits = w.widened[j / 16 * 16 * 6 + p / 2 * 32 + j % 16 * 2 + p % 2];
            const float want = p < k && j < n ? float(w.int8[j / 16 * 16 * k + p * 16 + j % 16]) : 0.0f;
            same &= from_bits(std::uint32_t{bits} << 16) == want;
        }
    CHECK(same);
    quantize_right(WeightPrecision::int8, true, k, n, o.b.data(), k, w);  // quantized afresh: no stale copy
    CHECK(w.widened.empty());
    QuantizedWeight h;
    quantize_right(WeightPrecision::bfloat16, true, k, n, o.b.data(), k, h);
    CHECK_THROWS_WITH_AS(widen_int8(h), "widen_int8: the weight is kept in bfloat16, not int8", UserError);
}

TEST_CASE("quantized weights: every kernel variant against double over the rounded operands") {
    const std::vector<Isa> isas = supported_isas();
    REQUIRE(isas.front() == Isa::portable);
    int checked = 0, pair_checked = 0;
    for (WeightPrecision precision : {WeightPrecision::bfloat16, WeightPrecision::int8})
        for (std::size_t m : {1, 2, 5, 6, 7, 12, 13, 32})
            for (std::size_t n : {1, 9, 16, 17, 32, 33, 70})
                for (std::size_t k : {1, 3, 64, 129}) {
                    const Operands o = random_operands(m, n, k, 100 * m + 10 * n + k);
                    QuantizedWeight w;
                    quantize_right(precision, false, k, n, o.b.data(), n, w);
                    for (int ab = 0; ab < 4; ++ab) {
                        const float alphas[] = {1, 1, 0.5f, 1}, betas[] = {0, 1, -0.25f, 1};
                        const bool separate = ab == 3;
                        const bool bf16 = precision == WeightPrecision::bfloat16;
                        std::vector<float> vectorized;
                        auto check = [&](Isa isa, const char* kernels, bool rounded_rows) {
                            const Reference want = reference(o, w, alphas[ab], betas[ab], separate, rounded_rows);
                            const std::vector<float> got = run(isa, o, w, alphas[ab], betas[ab], separate);
                            bool close = true;
                            for (std::size_t e = 0; e < got.size(); ++e)
                                close &= std::abs(got[e] - want.c[e]) <= want.bound[e];
                            INFO(weight_precision_name(precision) << " " << isa_name(isa) << " " << kernels << " m "
                                                                  << m << " n " << n << " k " << k << " case " << ab);
                            CHECK(close);
                            return got;
                        };
                        {
                            const Bf16ProductsScope widening(Bf16Products::never);
                            for (Isa isa : isas) {
                                const std::vector<float> got = check(isa, "widening", bf16);
                                if (isa == Isa::portable) continue;
                                if (vectorized.empty())
                                    vectorized = got;
                                else
                                    CHECK(got == vectorized);  // AVX2 and AVX-512: the same bits
                            }
                        }
                        if (cpu_supports_bf16()) {  // vdpbf16ps: the rows rounded for either weight
                            const Bf16ProductsScope pairs(Bf16Products::always);
                            const std::vector<float> got = check(Isa::avx512, "pairs", true);
                            if (!bf16) {  // widened once: the bits of widening at every product
                                QuantizedWeight widened = w;
                                widen_int8(widened);
                                CHECK(run(Isa::avx512, o, widened, alphas[ab], betas[ab], separate) == got);
                            }
                            ++pair_checked;
                        }
                        ++checked;
                    }
                }
    CHECK(checked == 2 * 8 * 7 * 4 * 4);
    CHECK(pair_checked == (cpu_supports_bf16() ? 2 * 8 * 7 * 4 * 4 : 0));
}

TEST_CASE("quantized weights: a product split between threads gives the bits of one thread") {
    const Operands o = random_operands(8, 1536, 384, 11);  // a wide GPT's feed-forward, 8 streams
    for (WeightPrecision precision : {WeightPrecision::bfloat16, WeightPrecision::int8})
        for (Bf16Products choice :
             {Bf16Products::never, Bf16Products::always}) {  // widening, and pairs where the CPU has them
            const Bf16ProductsScope scope(choice);
            QuantizedWeight w;
            quantize_right(precision, false, o.k, o.n, o.b.data(), o.n, w);
            const Isa isa = active_isa();
            const int before = inter_op_threads();
            set_inter_op_threads(1);
            const std::vector<float> one = run(isa, o, w, 1, 0, false);
            set_inter_op_threads(2);
            const std::vector<float> two = run(isa, o, w, 1, 0, false);
            set_inter_op_threads(before);
            CHECK(one == two);
        }
}

TEST_CASE("quantized weights: a product whose weight was kept for other sizes is refused") {
    const Operands o = random_operands(2, 8, 4, 5);
    QuantizedWeight w;
    quantize_right(WeightPrecision::int8, false, 4, 8, o.b.data(), 8, w);
    std::vector<const float*> a{o.a.data(), o.a.data() + 4};
    std::vector<float> c(16);
    std::vector<float*> c_rows{c.data(), c.data() + 8};
    CHECK_THROWS_WITH_AS(gemm_rows_quantized(2, 8, 3, a.data(), w, c_rows.data(), 1.0f, 0.0f),
                         "gemm_rows_quantized: a [3, 8] product given a weight kept as [4, 8] in int8", UserError);
    CHECK(parse_weight_precision("int8") == WeightPrecision::int8);
    CHECK(parse_weight_precision("float") == WeightPrecision::float32);
    CHECK(parse_weight_precision("bfloat16") == WeightPrecision::bfloat16);
    CHECK_THROWS_WITH_AS(parse_weight_precision("int4"), "weight precision 'int4': expected float, bfloat16 or int8",
                         UserError);
}
