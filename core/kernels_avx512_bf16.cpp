// Float products with bfloat16 operands, for AVX-512 BF16 CPUs (this file is compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mavx2 -mfma; see core/isa_kernels.hpp for the
// contract). Each operand is rounded to bfloat16 (to nearest, ties to even; NaN stays NaN) as it
// is packed; one vdpbf16ps then multiplies 16 pairs of them and adds both products of each pair
// to a float accumulator: twice the multiply-adds of an FMA on float, and half the bytes packed
// and read. A product of two bfloat16 values is exact in float, so the only rounding besides the
// operands' is the float sum's, as in the float kernels.
//
// Layouts (k pairs = (k + 1) / 2, the last pair's second value 0 when k is odd), 32-bit words
// each holding a pair, its even-k value in the low half:
//   B: panels of 16 columns, panel[q * 16 + j] = (B[2q][j], B[2q + 1][j]);
//   A: blocks of 12 rows, block[q * 12 + r] = (A[r][2q], A[r][2q + 1]), zero rows past the last.
// The kernel is the float one's (core/kernels_avx512.cpp) with a pair of k per step: up to 12 rows
// by two panels, 24 accumulators, one broadcast pair of A per row and two loads of B per step.
#include "core/isa_kernels.hpp"

#if defined(__x86_64__) && defined(__AVX512BF16__)
#include <immintrin.h>

#include "core/kernels_avx512_common.hpp"

namespace loom::kernels {

namespace {

static_assert(sizeof(unsigned) == 4, "a pair of bfloat16 values is held in an unsigned int");

// Lanes [0, count) of a vector of 16 (count may exceed 16).
inline __mmask16 first(std::size_t count) { return lanes<float>(count); }

// Lane j: (lo[j], hi[j]) as a pair of bfloat16 values: both rounded by one instruction into
// halves of a vector (lo in 16-bit elements 0-15, hi in 16-31), then interleaved by one permute.
inline __m512i pairs_across(__m512 lo, __m512 hi) {
    const __m512i halves = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                                6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(interleave, halves);
}

// Lane q: (x[2q], x[2q + 1]) for the `count` (at most 32) floats from x, zeros past them.
inline __m512 pairs_along(const float* x, std::size_t count) {
    const __m512 lo = _mm512_maskz_loadu_ps(first(count), x);
    const __m512 hi = _mm512_maskz_loadu_ps(first(count > 16 ? count - 16 : 0), x + 16);
    return _mm512_castsi512_ps(reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}

constexpr std::size_t mr = kPackedRows;

}  // namespace

void pack_right_bf16_avx512(bool transposed, std::size_t k, std::size_t n, const float* const* src, unsigned* packed) {
    const std::size_t kp = (k + 1) / 2;
    if (!transposed) {  // src[p] is row p of B: two rows make a row of pairs
        // A block of pair rows at a time into every panel, as the float packing walks B (core/pack_right.hpp).
        constexpr std::size_t block = 8;
        for (std::size_t q0 = 0; q0 < kp; q0 += block) {
            const std::size_t q1 = q0 + block < kp ? q0 + block : kp;
            for (std::size_t col = 0; col < n; col += 16) {
                const __mmask16 mask = first(n - col);
                unsigned* panel = packed + col * kp;
                for (std::size_t q = q0; q < q1; ++q) {
                    const __m512 lo = _mm512_maskz_loadu_ps(mask, src[2 * q] + col);
                    const __m512 hi =
                        2 * q + 1 < k ? _mm512_maskz_loadu_ps(mask, src[2 * q + 1] + col) : _mm512_setzero_ps();
                    _mm512_storeu_si512(panel + q * 16, pairs_across(lo, hi));
                }
            }
        }
        return;
    }
    // src[j] is column j of B: its pairs lie side by side, 16 columns of them turned by a transpose.
    for (std::size_t col = 0; col < n; col += 16) {
        unsigned* panel = packed + col * kp;
        for (std::size_t q0 = 0; q0 < kp; q0 += 16) {
            __m512 r[16], cols[16];
            for (std::size_t j = 0; j < 16; ++j)
                r[j] = col + j < n ? pairs_along(src[col + j] + 2 * q0, k - 2 * q0) : _mm512_setzero_ps();
            transpose16(r, cols);
            for (std::size_t t = 0; t < 16 && q0 + t < kp; ++t)
                _mm512_storeu_ps(reinterpret_cast<float*>(panel + (q0 + t) * 16), cols[t]);
        }
    }
}

void pack_rows_bf16_avx512(bool transposed, std::size_t rows, std::size_t k, const float* const* src, unsigned* out) {
    const std::size_t kp = (k + 1) / 2;
    if (transposed) {  // src[p] is column p of A (row p as stored): two make a row of pairs
        // Each pair of stored rows read once from start to end, into every block: walking one
        // block's 12 values down all k rows before the next block's re-read their cache lines.
        for (std::size_t q = 0; q < kp; ++q) {
            const float* lo_row = src[2 * q];
            const float* hi_row = 2 * q + 1 < k ? src[2 * q + 1] : nullptr;
            for (std::size_t r0 = 0; r0 < rows; r0 += mr) {
                const __mmask16 mask = first(rows - r0 < mr ? rows - r0 : mr);
                const __m512 lo = _mm512_maskz_loadu_ps(mask, lo_row + r0);
                const __m512 hi = hi_row ? _mm512_maskz_loadu_ps(mask, hi_row + r0) : _mm512_setzero_ps();
                _mm512_mask_storeu_epi32(out + r0 * kp + q * mr, 0x0fff, pairs_across(lo, hi));
            }
        }
        return;
    }
    // src[r] is row r: its pairs lie side by side; 16 pairs of each of a block's rows turned by a
    // transpose (rows 12-15 are zeros and are not stored).
    for (std::size_t r0 = 0; r0 < rows; r0 += mr, out += mr * kp) {
        const std::size_t block_rows = rows - r0 < mr ? rows - r0 : mr;
        for (std::size_t q0 = 0; q0 < kp; q0 += 16) {
            __m512 r[16], cols[16];
            for (std::size_t i = 0; i < 16; ++i)
                r[i] = i < block_rows ? pairs_along(src[r0 + i] + 2 * q0, k - 2 * q0) : _mm512_setzero_ps();
            transpose16(r, cols);
            for (std::size_t t = 0; t < 16 && q0 + t < kp; ++t)
                _mm512_mask_storeu_ps(reinterpret_cast<float*>(out + (q0 + t) * mr), 0x0fff, cols[t]);
        }
    }
}

void pack_row_pairs_bf16_avx512(std::size_t k, const float* row, unsigned* out) {
    for (std::size_t p = 0; p < k; p += 32)
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(out + p / 2), first((k - p + 1) / 2),
                              pairs_along(row + p, k - p));
}

namespace {

// Where a kernel's pairs of B come from: a weight kept in bfloat16 pairs (read as they are), or
// one kept in int8 rows of 16 (core/quantized_gemm.hpp), each pair of rows widened to float and
// rounded into pairs as it is read (exact: an int8 is a bfloat16), its columns' scales applied to
// the sums.
struct Bf16Pairs {
    using E = unsigned;
    static std::size_t panel_size(std::size_t k) { return (k + 1) / 2 * 16; }
    static __m512bh pair(const E* panel, std::size_t q, std::size_t) {
        return reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + q * 16));
    }
    static const char* at(const E* panel, std::size_t q) { return reinterpret_cast<const char*>(panel + q * 16); }
    static constexpr bool scaled = false;
};
// An int8 weight widened once into pairs (exact): read as Bf16Pairs, scaled as Int8Rows.
struct WidenedInt8Pairs : Bf16Pairs {
    static constexpr bool scaled = true;
};
struct Int8Rows {
    using E = signed char;
    static std::size_t panel_size(std::size_t k) { return k * 16; }
    static __m512 widen(const E* row) {
        // The masked forms with every lane selected (the unmasked ones: kernels_avx512_common.hpp).
        const __m512i wide = _mm512_maskz_cvtepi8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row)));
        return _mm512_maskz_cvtepi32_ps(0xffff, wide);
    }
    static __m512bh pair(const E* panel, std::size_t q, std::size_t k) {
        const __m512 lo = widen(panel + 2 * q * 16);
        const __m512 hi = 2 * q + 1 < k ? widen(panel + (2 * q + 1) * 16) : _mm512_setzero_ps();
        return reinterpret_cast<__m512bh>(pairs_across(lo, hi));
    }
    static const char* at(const E* panel, std::size_t q) { return reinterpret_cast<const char*>(panel + 2 * q * 16); }
    static constexpr bool scaled = true;
};

// Each of the 12 rows a kernel may hold, as M(r): the accumulators are named variables, not an
// array, so that GCC keeps them in registers (core/kernels_avx512.cpp), and each row's code is a macro.
#define LOOM_EACH_ROW(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)

// How far ahead of its reads (bytes) a few-rows kernel below fetches its panels. A generating step reads
// each weight once; between its products the attention reads the caches, and the weights come back
// from memory (the wide GPT's 10.7 MB in int8 with a 9 MB cache): there the hardware's prefetch of
// the two panels fell behind. Zen 4, the wide GPT at 8 streams on 1 thread, int8 weights and a
// bfloat16 cache, 6 runs each alternated: 2,977 characters/s without, 3,267 at 512 bytes ahead
// (bfloat16 weights 2,642 and 2,692; the products alone after an 8 MB read, int8: 1,318 us, 1,217 at
// 512, 1,243 at 2,048; ahead of a panel's end it fetches what is next or nothing, a hint that never
// faults). Training's blocks (`blocked`) reuse their panels and fetch nothing.
constexpr std::size_t kFetchAhead = 512;

// R rows of A's pairs by V panels (1 or 2) of B's pairs as P reads them; `stored` of the R rows are
// stored. A is laid out as pack_rows_bf16_avx512 lays a block of 12 rows (`blocked`: a[q * 12 + r],
// training's products) or as rows of pairs one after another (a[r * kp + q], a generating step's
// few rows, pack_row_pairs_bf16_avx512). R x V accumulators, one broadcast pair a row and one
// vdpbf16ps a panel per pair of k. Not inlined, for the reason the float kernel gives.
template <class P, bool blocked, std::size_t R, std::size_t V>
__attribute__((noinline)) void kernel(std::size_t k, const unsigned* a, std::size_t stored, const typename P::E* panel0,
                                      const typename P::E* panel1, const float* scales, float* const* c,
                                      const float* const* d, std::size_t col, std::size_t ncols,
                                      const Epilogue<float>& e) {
    using W = Vec<float>;
    const std::size_t kp = (k + 1) / 2;
    __m512 c0_0 = W::zero(), c0_1 = c0_0, c1_0 = c0_0, c1_1 = c0_0, c2_0 = c0_0, c2_1 = c0_0, c3_0 = c0_0, c3_1 = c0_0,
           c4_0 = c0_0, c4_1 = c0_0, c5_0 = c0_0, c5_1 = c0_0, c6_0 = c0_0, c6_1 = c0_0, c7_0 = c0_0, c7_1 = c0_0,
           c8_0 = c0_0, c8_1 = c0_0, c9_0 = c0_0, c9_1 = c0_0, c10_0 = c0_0, c10_1 = c0_0, c11_0 = c0_0, c11_1 = c0_0;
    for (std::size_t q = 0; q < kp; ++q) {
        if constexpr (!blocked) {  // a generating step's weights, read once a step: fetched ahead
            _mm_prefetch(P::at(panel0, q) + kFetchAhead, _MM_HINT_T0);
            if constexpr (V > 1) _mm_prefetch(P::at(panel1, q) + kFetchAhead, _MM_HINT_T0);
        }
        const __m512bh b0 = P::pair(panel0, q, k);
        const __m512bh b1 = V > 1 ? P::pair(panel1, q, k) : b0;
#define LOOM_ROW(r)                                                                               \
    if constexpr (R > r) {                                                                        \
        const unsigned pair = blocked ? a[q * mr + r] : a[r * kp + q];                            \
        const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair))); \
        c##r##_0 = _mm512_dpbf16_ps(c##r##_0, x, b0);                                             \
        if constexpr (V > 1) c##r##_1 = _mm512_dpbf16_ps(c##r##_1, x, b1);                        \
    }
        LOOM_EACH_ROW(LOOM_ROW)
#undef LOOM_ROW
    }
    if constexpr (P::scaled) {
        const __m512 s0 = W::load(scales), s1 = V > 1 ? W::load(scales + 16) : s0;
#define LOOM_SCALE(r)                                                \
    if constexpr (R > r) {                                           \
        c##r##_0 = _mm512_mul_ps(c##r##_0, s0);                      \
        if constexpr (V > 1) c##r##_1 = _mm512_mul_ps(c##r##_1, s1); \
    }
        LOOM_EACH_ROW(LOOM_SCALE)
#undef LOOM_SCALE
    }
    const auto m0 = first(ncols), m1 = first(ncols > 16 ? ncols - 16 : 0);
#define LOOM_STORE(r)                                                                 \
    if (R > r && stored > r) {                                                        \
        e.store(c[r] + col, d[r] + col, m0, c##r##_0);                                \
        if constexpr (V > 1) e.store(c[r] + col + 16, d[r] + col + 16, m1, c##r##_1); \
    }
    LOOM_EACH_ROW(LOOM_STORE)
#undef LOOM_STORE
}

template <class P>
using FewRows = void (*)(std::size_t, const unsigned*, std::size_t, const typename P::E*, const typename P::E*,
                         const float*, float* const*, const float* const*, std::size_t, std::size_t,
                         const Epilogue<float>&);
template <class P, std::size_t V>
constexpr FewRows<P> few_rows[mr + 1] = {nullptr,
                                         kernel<P, false, 1, V>,
                                         kernel<P, false, 2, V>,
                                         kernel<P, false, 3, V>,
                                         kernel<P, false, 4, V>,
                                         kernel<P, false, 5, V>,
                                         kernel<P, false, 6, V>,
                                         kernel<P, false, 7, V>,
                                         kernel<P, false, 8, V>,
                                         kernel<P, false, 9, V>,
                                         kernel<P, false, 10, V>,
                                         kernel<P, false, 11, V>,
                                         kernel<P, false, 12, V>};

// Rows in blocks of nearly equal size (as the float kernels' rows()); each pair of panels stays in
// L1/L2 while every block passes over it. `scales`: each column's, where P is scaled.
template <class P>
void few_rows_by_panels(std::size_t m, std::size_t n, std::size_t k, const unsigned* a, const typename P::E* packed,
                        const float* scales, float* const* c, const float* const* d, float alpha, float beta) {
    const std::size_t kp = (k + 1) / 2, panel = P::panel_size(k);
    const Epilogue<float> e{alpha, beta};
    const std::size_t blocks = (m + mr - 1) / mr;
    for (std::size_t col = 0; col < n; col += 32) {
        const typename P::E* panel0 = packed + col / 16 * panel;
        const std::size_t nc = n - col < 32 ? n - col : 32;
        const typename P::E* panel1 = nc > 16 ? panel0 + panel : panel0;
        for (std::size_t b = 0, start = 0; b < blocks; ++b) {
            const std::size_t r = m / blocks + (b < m % blocks ? 1 : 0);
            (nc > 16 ? few_rows<P, 2> : few_rows<P, 1>)[r](k, a + start * kp, r, panel0, panel1,
                                                           scales ? scales + col : nullptr, c + start, d + start, col,
                                                           nc, e);
            start += r;
        }
    }
}

}  // namespace

void rows_pairs_bf16_avx512(std::size_t m, std::size_t n, std::size_t k, const unsigned* a, const unsigned* packed,
                            float* const* c, const float* const* d, float alpha, float beta) {
    few_rows_by_panels<Bf16Pairs>(m, n, k, a, packed, nullptr, c, d, alpha, beta);
}

void rows_pairs_int8_avx512(std::size_t m, std::size_t n, std::size_t k, const unsigned* a, const signed char* packed,
                            const float* scales, float* const* c, const float* const* d, float alpha, float beta) {
    few_rows_by_panels<Int8Rows>(m, n, k, a, packed, scales, c, d, alpha, beta);
}

void rows_pairs_widened_int8_avx512(std::size_t m, std::size_t n, std::size_t k, const unsigned* a,
                                    const unsigned* packed, const float* scales, float* const* c, const float* const* d,
                                    float alpha, float beta) {
    few_rows_by_panels<WidenedInt8Pairs>(m, n, k, a, packed, scales, c, d, alpha, beta);
}

void rows_packed_bf16_avx512(std::size_t m, std::size_t n, std::size_t k, const unsigned* a, const unsigned* packed,
                             float* const* c, const float* const* d, float alpha, float beta) {
    const std::size_t kp = (k + 1) / 2;
    const Epilogue<float> e{alpha, beta};
    for (std::size_t col = 0; col < n; col += 32) {
        const unsigned* panel0 = packed + col * kp;
        const std::size_t nc = n - col < 32 ? n - col : 32;
        const unsigned* panel1 = nc > 16 ? panel0 + 16 * kp : panel0;
        for (std::size_t start = 0; start < m; start += mr) {
            const std::size_t r = m - start < mr ? m - start : mr;
            const unsigned* block = a + start * kp;
            if (nc > 16)
                kernel<Bf16Pairs, true, mr, 2>(k, block, r, panel0, panel1, nullptr, c + start, d + start, col, nc, e);
            else
                kernel<Bf16Pairs, true, mr, 1>(k, block, r, panel0, panel1, nullptr, c + start, d + start, col, nc, e);
        }
    }
}

}  // namespace loom::kernels
#endif
