// The packed row kernel for AVX2 + FMA (this file is compiled with -mavx2 -mfma; see
// core/isa_kernels.hpp for the contract and why nothing from the standard library is included).
// A block is up to 6 rows by one panel (two 256-bit vectors): 12 accumulators + 2 loads of B + 1
// broadcast of 16 registers.
#include "core/isa_kernels.hpp"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace loom::kernels {

namespace {

template <class T>
struct Vec;
template <>
struct Vec<float> {
    using V = __m256;
    static constexpr std::size_t width = 8;
    static V zero() { return _mm256_setzero_ps(); }
    static V load(const float* p) { return _mm256_loadu_ps(p); }
    static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
    static V set(float x) { return _mm256_set1_ps(x); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};
template <>
struct Vec<double> {
    using V = __m256d;
    static constexpr std::size_t width = 4;
    static V zero() { return _mm256_setzero_pd(); }
    static V load(const double* p) { return _mm256_loadu_pd(p); }
    static V broadcast(const double* p) { return _mm256_broadcast_sd(p); }
    static V set(double x) { return _mm256_set1_pd(x); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
    static V add(V a, V b) { return _mm256_add_pd(a, b); }
    static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
    static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
};

constexpr std::size_t max_rows = 6;

// How half h (columns 8h to 8h + 7) of a panel's row p of B is read (`load(panel, p, h)`), and how
// many rows a panel of k holds (`depth(k)`), as the AVX-512 file's: T's own panels, or a weight
// kept in bfloat16 (rows in pairs, one 32-bit word holding rows 2q and 2q + 1 of a column) or int8
// (core/quantized_gemm.hpp) widened to float as it is loaded, an int8 column's sum then multiplied
// by its scale.
template <class T>
struct OwnPanel {
    using E = T;
    static typename Vec<T>::V load(const E* panel, std::size_t p, std::size_t h) {
        return Vec<T>::load(panel + p * 2 * Vec<T>::width + h * Vec<T>::width);
    }
    static std::size_t depth(std::size_t k) { return k; }
    static constexpr bool scaled = false;
};
struct Bf16PairPanel {
    using E = unsigned short;
    static __m256 load(const E* panel, std::size_t p, std::size_t h) {  // bfloat16 bits are a float's upper half
        const __m256i words =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + (p & ~std::size_t{1}) * 16 + h * 16));
        return _mm256_castsi256_ps(p & 1 ? _mm256_and_si256(words, _mm256_set1_epi32(int(0xffff0000u)))
                                         : _mm256_slli_epi32(words, 16));
    }
    static std::size_t depth(std::size_t k) { return k + (k & 1); }
    static constexpr bool scaled = false;
};
struct Int8Panel {
    using E = signed char;
    static __m256 load(const E* panel, std::size_t p, std::size_t h) {
        return _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(panel + p * 16 + h * 8))));
    }
    static std::size_t depth(std::size_t k) { return k; }
    static constexpr bool scaled = true;
};

// R rows of C, columns [col, col + ncols) of one panel, read as P says (`scales`: the panel's
// column scales where P is scaled). The accumulators are named variables, not an array: GCC kept
// an array of them in memory and stored all twelve at every k (half the speed).
template <class T, std::size_t R, class P = OwnPanel<T>>
void kernel(std::size_t k, const T* const* a, const typename P::E* panel, T* const* c, const T* const* d,
            std::size_t col, std::size_t ncols, T alpha, T beta, const float* scales = nullptr) {
    using W = Vec<T>;
    using V = typename W::V;
    constexpr std::size_t w = W::width;
    V c00 = W::zero(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00,
      c41 = c00, c50 = c00, c51 = c00;
    const T *a0 = a[0], *a1 = a[R > 1 ? 1 : 0], *a2 = a[R > 2 ? 2 : 0], *a3 = a[R > 3 ? 3 : 0], *a4 = a[R > 4 ? 4 : 0],
            *a5 = a[R > 5 ? 5 : 0];
    // The rows of C (and of the addend d) the block ends by reading and writing are fetched while
    // the k loop runs, as in the AVX-512 kernel: a loop step's C is often a fresh buffer and d a
    // slice of a projection of every step, and their misses at the end stalled the block.
    for (std::size_t r = 0; r < R; ++r) {
        if (beta != T(0) && d[r] != c[r]) {
            __builtin_prefetch(d[r] + col);
            __builtin_prefetch(d[r] + col + 2 * w - 1);
        }
        __builtin_prefetch(c[r] + col, 1);
        __builtin_prefetch(c[r] + col + 2 * w - 1, 1);
    }
    for (std::size_t p = 0; p < k; ++p) {
        const V b0 = P::load(panel, p, 0), b1 = P::load(panel, p, 1);
// One row of the block: broadcast a[r][p], two FMAs. A macro, because the accumulators are
// separate named variables.
#define LOOM_ROW(r)                             \
    do {                                        \
        if constexpr (R > r) {                  \
            const V x = W::broadcast(a##r + p); \
            c##r##0 = W::fma(x, b0, c##r##0);   \
            c##r##1 = W::fma(x, b1, c##r##1);   \
        }                                       \
    } while (false)
        LOOM_ROW(0);
        LOOM_ROW(1);
        LOOM_ROW(2);
        LOOM_ROW(3);
        LOOM_ROW(4);
        LOOM_ROW(5);
#undef LOOM_ROW
    }
    alignas(32) T tile[R][2 * w];
#define LOOM_STORE(r)                       \
    do {                                    \
        if constexpr (R > r) {              \
            W::store(tile[r], c##r##0);     \
            W::store(tile[r] + w, c##r##1); \
        }                                   \
    } while (false)
    LOOM_STORE(0);
    LOOM_STORE(1);
    LOOM_STORE(2);
    LOOM_STORE(3);
    LOOM_STORE(4);
    LOOM_STORE(5);
#undef LOOM_STORE
    for (std::size_t r = 0; r < R; ++r) {
        T* out = c[r] + col;
        const T* in = d[r] + col;  // may be out
        if constexpr (P::scaled)   // the scales are padded with the panel: every lane has one
            for (std::size_t h = 0; h < 2; ++h)
                W::store(tile[r] + h * w, W::mul(W::load(tile[r] + h * w), W::load(scales + h * w)));
        if (ncols == 2 * w) {
            for (std::size_t h = 0; h < 2; ++h) {
                V v = W::load(tile[r] + h * w);
                if (alpha != T(1)) v = W::mul(v, W::set(alpha));
                if (beta == T(1))
                    v = W::add(v, W::load(in + h * w));
                else if (beta != T(0))
                    v = W::fma(W::set(beta), W::load(in + h * w), v);
                W::store(out + h * w, v);
            }
        } else {
            for (std::size_t j = 0; j < ncols; ++j) {
                T v = alpha == T(1) ? tile[r][j] : alpha * tile[r][j];
                out[j] = beta == T(0) ? v : beta == T(1) ? v + in[j] : v + beta * in[j];
            }
        }
    }
}

template <class T, class P>
using Kernel = void (*)(std::size_t, const T* const*, const typename P::E*, T* const*, const T* const*, std::size_t,
                        std::size_t, T, T, const float*);
template <class T, class P = OwnPanel<T>>
constexpr Kernel<T, P> by_rows[max_rows + 1] = {nullptr,         kernel<T, 1, P>, kernel<T, 2, P>, kernel<T, 3, P>,
                                                kernel<T, 4, P>, kernel<T, 5, P>, kernel<T, 6, P>};

// `scales`: each column's, where P is scaled (padded with the panels), else null.
template <class T, class P = OwnPanel<T>>
void rows(std::size_t m, std::size_t n, std::size_t k, const T* const* a, const typename P::E* packed, T* const* c,
          const T* const* d, T alpha, T beta, const float* scales = nullptr) {
    constexpr std::size_t nr = 2 * Vec<T>::width;
    // Rows in blocks of nearly equal size (32 = 6 + 6 + 5 + 5 + 5 + 5), so no block runs with
    // too few accumulators to hide the FMA latency. Each panel (k x nr) is read from memory once
    // and stays in L1/L2 while every block of rows passes over it.
    const std::size_t blocks = (m + max_rows - 1) / max_rows;
    for (std::size_t col = 0; col < n; col += nr) {
        const typename P::E* panel = packed + col * P::depth(k);
        const std::size_t nc = n - col < nr ? n - col : nr;
        for (std::size_t b = 0, start = 0; b < blocks; ++b) {
            const std::size_t r = m / blocks + (b < m % blocks ? 1 : 0);
            by_rows<T, P>[r](k, a + start, panel, c + start, d + start, col, nc, alpha, beta,
                             scales ? scales + col : nullptr);
            start += r;
        }
    }
}

}  // namespace

void rows_avx2(std::size_t m, std::size_t n, std::size_t k, const float* const* a, const float* packed, float* const* c,
               const float* const* d, float alpha, float beta) {
    rows<float>(m, n, k, a, packed, c, d, alpha, beta);
}
void rows_avx2(std::size_t m, std::size_t n, std::size_t k, const double* const* a, const double* packed,
               double* const* c, const double* const* d, double alpha, double beta) {
    rows<double>(m, n, k, a, packed, c, d, alpha, beta);
}

void rows_bf16_weights_avx2(std::size_t m, std::size_t n, std::size_t k, const float* const* a,
                            const unsigned short* packed, float* const* c, const float* const* d, float alpha,
                            float beta) {
    rows<float, Bf16PairPanel>(m, n, k, a, packed, c, d, alpha, beta);
}
void rows_int8_weights_avx2(std::size_t m, std::size_t n, std::size_t k, const float* const* a,
                            const signed char* packed, const float* scales, float* const* c, const float* const* d,
                            float alpha, float beta) {
    rows<float, Int8Panel>(m, n, k, a, packed, c, d, alpha, beta, scales);
}

}  // namespace loom::kernels
#endif
