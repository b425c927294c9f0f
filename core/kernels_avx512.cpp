// The packed row kernel for AVX-512F (this file is compiled with -mavx512f -mavx2 -mfma; see
// core/isa_kernels.hpp for the contract and why nothing from the standard library is included).
// A block is up to 12 rows by two panels (two 512-bit vectors, 32 floats or 16 doubles): 24
// accumulators, two loads of B and 12 broadcasts of A per k, so the two FMA ports stay busy with
// registers to spare (32 of them). Each accumulator sums its products in k order with one FMA
// each, as the AVX2 kernel does: both give the same bits.
#include "core/isa_kernels.hpp"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#include "core/kernels_avx512_common.hpp"

namespace loom::kernels {

namespace {

// How a panel's row p of B is read (`load(panel, p)`), and how many rows a panel of k holds
// (`depth(k)`): elements of type E widened to T as they are loaded, each column's sum scaled
// before the epilogue or not. T's own panels (pack_right: rows of 64 bytes, 16 floats or 8 doubles); a weight
// kept in int8 (core/quantized_gemm.hpp) laid out the same, widened to float, each column's sum
// multiplied by its scale; one kept in bfloat16, its rows in pairs (each 32-bit word holds rows
// 2q and 2q + 1 of one column, the even one in the low half; k rounded up to even), widened by
// moving the row's half to the top of the word.
template <class T>
struct OwnPanel {
    using E = T;
    static typename Vec<T>::V load(const E* panel, std::size_t p) { return Vec<T>::load(panel + p * Vec<T>::width); }
    static std::size_t depth(std::size_t k) { return k; }
    static constexpr bool scaled = false;
};
struct Bf16PairPanel {
    using E = unsigned short;
    // The masked forms with every lane selected (the unmasked ones: kernels_avx512_common.hpp).
    static __m512 load(const E* panel, std::size_t p) {  // bfloat16 bits are a float's upper half
        const __m512i words = _mm512_loadu_si512(panel + (p & ~std::size_t{1}) * 16);
        const __m512i bits = p & 1 ? _mm512_maskz_and_epi32(0xffff, words, _mm512_set1_epi32(int(0xffff0000u)))
                                   : _mm512_maskz_slli_epi32(0xffff, words, 16);
        return _mm512_castsi512_ps(bits);
    }
    static std::size_t depth(std::size_t k) { return k + (k & 1); }
    static constexpr bool scaled = false;
};
struct Int8Panel {
    using E = signed char;
    static __m512 load(const E* panel, std::size_t p) {
        const __m512i wide =
            _mm512_maskz_cvtepi8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + p * 16)));
        return _mm512_maskz_cvtepi32_ps(0xffff, wide);
    }
    static std::size_t depth(std::size_t k) { return k; }
    static constexpr bool scaled = true;
};

// R rows by V panels (1 or 2) of C at columns [col, col + ncols), B's panels read as P says
// (scale0, scale1: the panels' column scales where P is scaled). The accumulators are named
// variables, not an array, so that GCC keeps them in registers.
template <class T, std::size_t R, std::size_t V, class P = OwnPanel<T>>
void kernel(std::size_t k, const T* const* a, const typename P::E* panel0, const typename P::E* panel1, T* const* c,
            const T* const* d, std::size_t col, std::size_t ncols, const Epilogue<T>& e, const float* scale0 = nullptr,
            const float* scale1 = nullptr) {
    using W = Vec<T>;
    using Vr = typename W::V;
    constexpr std::size_t w = W::width;
    Vr c0_0 = W::zero(), c0_1 = c0_0, c1_0 = c0_0, c1_1 = c0_0, c2_0 = c0_0, c2_1 = c0_0, c3_0 = c0_0, c3_1 = c0_0,
       c4_0 = c0_0, c4_1 = c0_0, c5_0 = c0_0, c5_1 = c0_0, c6_0 = c0_0, c6_1 = c0_0, c7_0 = c0_0, c7_1 = c0_0,
       c8_0 = c0_0, c8_1 = c0_0, c9_0 = c0_0, c9_1 = c0_0, c10_0 = c0_0, c10_1 = c0_0, c11_0 = c0_0, c11_1 = c0_0;
#define LOOM_ROW_PTR(r) const T* a##r = a[R > r ? r : 0];
    LOOM_ROW_PTR(0)
    LOOM_ROW_PTR(1)
    LOOM_ROW_PTR(2)
    LOOM_ROW_PTR(3)
    LOOM_ROW_PTR(4)
    LOOM_ROW_PTR(5)
    LOOM_ROW_PTR(6)
    LOOM_ROW_PTR(7)
    LOOM_ROW_PTR(8)
    LOOM_ROW_PTR(9)
    LOOM_ROW_PTR(10)
    LOOM_ROW_PTR(11)
#undef LOOM_ROW_PTR
    // The rows of C (and of the addend d) this block ends by reading and writing are fetched now,
    // while the k loop runs: a loop step's C is often a fresh buffer and d a slice of a projection
    // of every step, neither in cache, and their misses at the end stalled the block.
    for (std::size_t r = 0; r < R; ++r) {
        if (e.beta != T(0) && d[r] != c[r]) {
            __builtin_prefetch(d[r] + col);
            if constexpr (V > 1) __builtin_prefetch(d[r] + col + w);
        }
        __builtin_prefetch(c[r] + col, 1);
        if constexpr (V > 1) __builtin_prefetch(c[r] + col + w, 1);
    }
    for (std::size_t p = 0; p < k; ++p) {
        const Vr b0 = P::load(panel0, p);
        const Vr b1 = V > 1 ? P::load(panel1, p) : b0;
#define LOOM_ROW(r)                                              \
    if constexpr (R > r) {                                       \
        const Vr x = W::broadcast(a##r + p);                     \
        c##r##_0 = W::fma(x, b0, c##r##_0);                      \
        if constexpr (V > 1) c##r##_1 = W::fma(x, b1, c##r##_1); \
    }
        LOOM_ROW(0)
        LOOM_ROW(1)
        LOOM_ROW(2)
        LOOM_ROW(3)
        LOOM_ROW(4)
        LOOM_ROW(5)
        LOOM_ROW(6)
        LOOM_ROW(7)
        LOOM_ROW(8)
        LOOM_ROW(9)
        LOOM_ROW(10)
        LOOM_ROW(11)
#undef LOOM_ROW
    }
    const auto m0 = lanes<T>(ncols), m1 = lanes<T>(ncols > w ? ncols - w : 0);
    if constexpr (P::scaled) {
        const Vr s0 = W::load(scale0), s1 = V > 1 ? W::load(scale1) : s0;
#define LOOM_SCALE(r)                                         \
    if constexpr (R > r) {                                    \
        c##r##_0 = W::mul(c##r##_0, s0);                      \
        if constexpr (V > 1) c##r##_1 = W::mul(c##r##_1, s1); \
    }
        LOOM_SCALE(0)
        LOOM_SCALE(1)
        LOOM_SCALE(2)
        LOOM_SCALE(3)
        LOOM_SCALE(4)
        LOOM_SCALE(5)
        LOOM_SCALE(6)
        LOOM_SCALE(7)
        LOOM_SCALE(8)
        LOOM_SCALE(9)
        LOOM_SCALE(10)
        LOOM_SCALE(11)
#undef LOOM_SCALE
    }
#define LOOM_STORE(r)                                                               \
    if constexpr (R > r) {                                                          \
        e.store(c[r] + col, d[r] + col, m0, c##r##_0);                              \
        if constexpr (V > 1) e.store(c[r] + col + w, d[r] + col + w, m1, c##r##_1); \
    }
    LOOM_STORE(0)
    LOOM_STORE(1)
    LOOM_STORE(2)
    LOOM_STORE(3)
    LOOM_STORE(4)
    LOOM_STORE(5)
    LOOM_STORE(6)
    LOOM_STORE(7)
    LOOM_STORE(8)
    LOOM_STORE(9)
    LOOM_STORE(10)
    LOOM_STORE(11)
#undef LOOM_STORE
}

template <class T, class P>
using Kernel = void (*)(std::size_t, const T* const*, const typename P::E*, const typename P::E*, T* const*,
                        const T* const*, std::size_t, std::size_t, const Epilogue<T>&, const float*, const float*);

template <class T, std::size_t V, class P = OwnPanel<T>>
constexpr Kernel<T, P> by_rows[max_rows + 1] = {nullptr,
                                                kernel<T, 1, V, P>,
                                                kernel<T, 2, V, P>,
                                                kernel<T, 3, V, P>,
                                                kernel<T, 4, V, P>,
                                                kernel<T, 5, V, P>,
                                                kernel<T, 6, V, P>,
                                                kernel<T, 7, V, P>,
                                                kernel<T, 8, V, P>,
                                                kernel<T, 9, V, P>,
                                                kernel<T, 10, V, P>,
                                                kernel<T, 11, V, P>,
                                                kernel<T, 12, V, P>};

// `scales`: each column's, where P is scaled (padded with the panels), else null.
template <class T, class P = OwnPanel<T>>
void rows(std::size_t m, std::size_t n, std::size_t k, const T* const* a, const typename P::E* packed, T* const* c,
          const T* const* d, T alpha, T beta, const float* scales = nullptr) {
    constexpr std::size_t w = Vec<T>::width;
    const Epilogue<T> e{alpha, beta};
    // Rows in blocks of nearly equal size (32 = 11 + 11 + 10), so no block runs with too few
    // accumulators to hide the FMA latency. Each pair of panels (k x 2w) stays in L1/L2 while
    // every block of rows passes over it.
    const std::size_t blocks = (m + max_rows - 1) / max_rows;
    for (std::size_t col = 0; col < n; col += 2 * w) {
        const typename P::E* panel0 = packed + col * P::depth(k);
        const std::size_t nc = n - col < 2 * w ? n - col : 2 * w;
        const typename P::E* panel1 = nc > w ? panel0 + w * P::depth(k) : panel0;
        const float* scale0 = scales ? scales + col : nullptr;
        const float* scale1 = scales && nc > w ? scale0 + w : scale0;
        for (std::size_t b = 0, start = 0; b < blocks; ++b) {
            const std::size_t r = m / blocks + (b < m % blocks ? 1 : 0);
            (nc > w ? by_rows<T, 2, P> : by_rows<T, 1, P>)[r](k, a + start, panel0, panel1, c + start, d + start, col,
                                                              nc, e, scale0, scale1);
            start += r;
        }
    }
}

// The same product with A packed for the kernel (pack_rows_interleaved_avx512: per block of 12 rows,
// a[p][r] for p < k, the block padded with zero rows): one pointer to A instead of twelve, so
// the loop needs no more integer registers than x86-64 has. With twelve row pointers GCC moved
// three of them through vector registers at every k, on the port the FMAs need (80 % of the peak,
// against about 90 % here). Stores `rows` rows of the 12.
// Not inlined: inside the caller's loop GCC kept the epilogue's constants in vector registers and
// spilled an accumulator to the stack at every k.
template <class T, std::size_t V>
__attribute__((noinline)) void kernel_packed(std::size_t k, const T* a, std::size_t rows, const T* panel0,
                                             const T* panel1, T* const* c, const T* const* d, std::size_t col,
                                             std::size_t ncols, const Epilogue<T>& e) {
    using W = Vec<T>;
    using Vr = typename W::V;
    constexpr std::size_t w = W::width;
    Vr c0_0 = W::zero(), c0_1 = c0_0, c1_0 = c0_0, c1_1 = c0_0, c2_0 = c0_0, c2_1 = c0_0, c3_0 = c0_0, c3_1 = c0_0,
       c4_0 = c0_0, c4_1 = c0_0, c5_0 = c0_0, c5_1 = c0_0, c6_0 = c0_0, c6_1 = c0_0, c7_0 = c0_0, c7_1 = c0_0,
       c8_0 = c0_0, c8_1 = c0_0, c9_0 = c0_0, c9_1 = c0_0, c10_0 = c0_0, c10_1 = c0_0, c11_0 = c0_0, c11_1 = c0_0;
    for (std::size_t p = 0; p < k; ++p, a += max_rows) {
        const Vr b0 = W::load(panel0 + p * w);
        const Vr b1 = V > 1 ? W::load(panel1 + p * w) : b0;
#define LOOM_ROW(r)                                              \
    {                                                            \
        const Vr x = W::broadcast(a + r);                        \
        c##r##_0 = W::fma(x, b0, c##r##_0);                      \
        if constexpr (V > 1) c##r##_1 = W::fma(x, b1, c##r##_1); \
    }
        LOOM_ROW(0)
        LOOM_ROW(1)
        LOOM_ROW(2)
        LOOM_ROW(3)
        LOOM_ROW(4)
        LOOM_ROW(5)
        LOOM_ROW(6)
        LOOM_ROW(7)
        LOOM_ROW(8)
        LOOM_ROW(9)
        LOOM_ROW(10)
        LOOM_ROW(11)
#undef LOOM_ROW
    }
    const auto m0 = lanes<T>(ncols), m1 = lanes<T>(ncols > w ? ncols - w : 0);
#define LOOM_STORE(r)                                                               \
    if (rows > r) {                                                                 \
        e.store(c[r] + col, d[r] + col, m0, c##r##_0);                              \
        if constexpr (V > 1) e.store(c[r] + col + w, d[r] + col + w, m1, c##r##_1); \
    }
    LOOM_STORE(0)
    LOOM_STORE(1)
    LOOM_STORE(2)
    LOOM_STORE(3)
    LOOM_STORE(4)
    LOOM_STORE(5)
    LOOM_STORE(6)
    LOOM_STORE(7)
    LOOM_STORE(8)
    LOOM_STORE(9)
    LOOM_STORE(10)
    LOOM_STORE(11)
#undef LOOM_STORE
}

template <class T>
void rows_packed(std::size_t m, std::size_t n, std::size_t k, const T* a, const T* packed, T* const* c,
                 const T* const* d, T alpha, T beta) {
    constexpr std::size_t w = Vec<T>::width;
    const Epilogue<T> e{alpha, beta};
    for (std::size_t col = 0; col < n; col += 2 * w) {
        const T* panel0 = packed + col * k;
        const std::size_t nc = n - col < 2 * w ? n - col : 2 * w;
        const T* panel1 = nc > w ? panel0 + w * k : panel0;
        for (std::size_t start = 0; start < m; start += max_rows) {
            const std::size_t r = m - start < max_rows ? m - start : max_rows;
            const T* block = a + start * k;
            if (nc > w)
                kernel_packed<T, 2>(k, block, r, panel0, panel1, c + start, d + start, col, nc, e);
            else
                kernel_packed<T, 1>(k, block, r, panel0, panel1, c + start, d + start, col, nc, e);
        }
    }
}

}  // namespace

// out[p * kPackedRows + r] = src[r][p] for p < k: rows r < `rows` (at most 12) of A interleaved
// for kernel_packed, zeros for the rows past them. Sixteen values of each row at a time, turned
// by a 16 x 16 transpose in registers (rows 12-15 are zeros and are not stored): about a quarter
// of the instructions of copying one float at a time.
void pack_rows_interleaved_avx512(std::size_t rows, std::size_t k, const float* const* src, float* out) {
    constexpr std::size_t mr = max_rows;
    std::size_t p0 = 0;
    for (; p0 + 16 <= k; p0 += 16) {
        __m512 r[16], col[16];
        for (std::size_t i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_loadu_ps(src[i] + p0) : _mm512_setzero_ps();
        transpose16(r, col);
        for (std::size_t j = 0; j < 16; ++j) _mm512_mask_storeu_ps(out + (p0 + j) * mr, 0x0fff, col[j]);
    }
    for (; p0 < k; ++p0)
        for (std::size_t i = 0; i < mr; ++i) out[p0 * mr + i] = i < rows ? src[i][p0] : 0.0f;
}

// panel[p * 16 + j] = src[j][p] for p < k, j < 16: one whole panel of a transposed right operand
// (its 16 columns are rows of the stored matrix), by the same transposes.
void pack_panel_transposed_avx512(std::size_t k, const float* const* src, float* panel) {
    std::size_t p0 = 0;
    for (; p0 + 16 <= k; p0 += 16) {
        __m512 r[16], col[16];
        for (std::size_t j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(src[j] + p0);
        transpose16(r, col);
        for (std::size_t p = 0; p < 16; ++p) _mm512_storeu_ps(panel + (p0 + p) * 16, col[p]);
    }
    for (; p0 < k; ++p0)
        for (std::size_t j = 0; j < 16; ++j) panel[p0 * 16 + j] = src[j][p0];
}

void rows_packed_avx512(std::size_t m, std::size_t n, std::size_t k, const float* a, const float* packed,
                        float* const* c, const float* const* d, float alpha, float beta) {
    rows_packed<float>(m, n, k, a, packed, c, d, alpha, beta);
}
void rows_packed_avx512(std::size_t m, std::size_t n, std::size_t k, const double* a, const double* packed,
                        double* const* c, const double* const* d, double alpha, double beta) {
    rows_packed<double>(m, n, k, a, packed, c, d, alpha, beta);
}

void rows_avx512(std::size_t m, std::size_t n, std::size_t k, const float* const* a, const float* packed,
                 float* const* c, const float* const* d, float alpha, float beta) {
    rows<float>(m, n, k, a, packed, c, d, alpha, beta);
}
void rows_avx512(std::size_t m, std::size_t n, std::size_t k, const double* const* a, const double* packed,
                 double* const* c, const double* const* d, double alpha, double beta) {
    rows<double>(m, n, k, a, packed, c, d, alpha, beta);
}

void rows_bf16_weights_avx512(std::size_t m, std::size_t n, std::size_t k, const float* const* a,
                              const unsigned short* packed, float* const* c, const float* const* d, float alpha,
                              float beta) {
    rows<float, Bf16PairPanel>(m, n, k, a, packed, c, d, alpha, beta);
}
void rows_int8_weights_avx512(std::size_t m, std::size_t n, std::size_t k, const float* const* a,
                              const signed char* packed, const float* scales, float* const* c, const float* const* d,
                              float alpha, float beta) {
    rows<float, Int8Panel>(m, n, k, a, packed, c, d, alpha, beta, scales);
}

}  // namespace loom::kernels
#endif
