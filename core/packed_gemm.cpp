#include "core/packed_gemm.hpp"

#include <algorithm>

#include "core/gemm.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define LOOM_PACKED_GEMM_AVX2 1
#endif

namespace loom {

namespace {

// A panel is two vectors wide: 16 floats or 8 doubles.
template <class T>
constexpr std::size_t panel_width = 64 / sizeof(T);

constexpr std::size_t max_rows = 6;  // rows per kernel call: 6 x 2 accumulators + 2 + 1 of 16 registers

#ifdef LOOM_PACKED_GEMM_AVX2
template <class T>
struct Vec;
template <>
struct Vec<float> {
    using V = __m256;
    static V zero() { return _mm256_setzero_ps(); }
    static V load(const float* p) { return _mm256_loadu_ps(p); }
    static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};
template <>
struct Vec<double> {
    using V = __m256d;
    static V zero() { return _mm256_setzero_pd(); }
    static V load(const double* p) { return _mm256_loadu_pd(p); }
    static V broadcast(const double* p) { return _mm256_broadcast_sd(p); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
    static V add(V a, V b) { return _mm256_add_pd(a, b); }
    static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
};

// R rows of C, columns [col, col + ncols) of one panel. The accumulators are named variables, not
// an array: GCC kept an array of them in memory and stored all twelve at every k (half the speed).
template <class T, std::size_t R>
void kernel(std::size_t k, const T* const* a, const T* panel, T* const* c, std::size_t col, std::size_t ncols,
            bool accumulate) {
    using W = Vec<T>;
    using V = typename W::V;
    constexpr std::size_t w = panel_width<T> / 2;
    V c00 = W::zero(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00,
      c41 = c00, c50 = c00, c51 = c00;
    const T *a0 = a[0], *a1 = a[R > 1 ? 1 : 0], *a2 = a[R > 2 ? 2 : 0], *a3 = a[R > 3 ? 3 : 0], *a4 = a[R > 4 ? 4 : 0],
            *a5 = a[R > 5 ? 5 : 0];
    for (std::size_t p = 0; p < k; ++p, panel += 2 * w) {
        const V b0 = W::load(panel), b1 = W::load(panel + w);
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
        if (ncols == 2 * w) {
            for (std::size_t h = 0; h < 2; ++h) {
                V v = W::load(tile[r] + h * w);
                if (accumulate) v = W::add(v, W::load(out + h * w));
                W::store(out + h * w, v);
            }
        } else {
            for (std::size_t j = 0; j < ncols; ++j) out[j] = accumulate ? out[j] + tile[r][j] : tile[r][j];
        }
    }
}

template <class T>
using Kernel = void (*)(std::size_t, const T* const*, const T*, T* const*, std::size_t, std::size_t, bool);
template <class T>
constexpr Kernel<T> kernels[max_rows + 1] = {nullptr,      kernel<T, 1>, kernel<T, 2>, kernel<T, 3>,
                                             kernel<T, 4>, kernel<T, 5>, kernel<T, 6>};
#else
// Portable fallback with the same packed layout.
template <class T>
void block(std::size_t rows, std::size_t k, const T* const* a, const T* panel, T* const* c, std::size_t col,
           std::size_t ncols, bool accumulate) {
    constexpr std::size_t nr = panel_width<T>;
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < ncols; ++j) {
            T s = 0;
            for (std::size_t p = 0; p < k; ++p) s += a[r][p] * panel[p * nr + j];
            c[r][col + j] = accumulate ? c[r][col + j] + s : s;
        }
}
#endif

}  // namespace

bool packed_gemm_vectorized() {
#ifdef LOOM_PACKED_GEMM_AVX2
    return true;
#else
    return false;
#endif
}

template <class T>
std::size_t packed_size(std::size_t k, std::size_t n) {
    constexpr std::size_t nr = panel_width<T>;
    return (n + nr - 1) / nr * nr * k;
}

template <class T>
void pack_right(bool transposed, std::size_t k, std::size_t n, const T* b, std::size_t ldb, T* packed) {
    constexpr std::size_t nr = panel_width<T>;
    for (std::size_t col = 0; col < n; col += nr) {
        const std::size_t nc = std::min(nr, n - col);
        T* panel = packed + col * k;
        if (transposed) {  // column j of B is row j of b: read the panel's rows side by side
            const T* src[panel_width<T>];
            for (std::size_t j = 0; j < nc; ++j) src[j] = b + (col + j) * ldb;
            for (std::size_t p = 0; p < k; ++p)
                for (std::size_t j = 0; j < nc; ++j) panel[p * nr + j] = src[j][p];
        } else {
            for (std::size_t p = 0; p < k; ++p) std::copy_n(b + p * ldb + col, nc, panel + p * nr);
        }
        if (nc < nr)  // the last panel's missing columns multiply to zeros that are never stored
            for (std::size_t p = 0; p < k; ++p) std::fill(panel + p * nr + nc, panel + (p + 1) * nr, T(0));
    }
}

template <class T>
void gemm_rows(std::size_t m, std::size_t n, std::size_t k, const T* const* a_rows, const T* packed, T* const* c_rows,
               bool accumulate) {
    if (m == 0 || n == 0) return;
    GemmTimer timer;
    if (k == 0) {
        if (!accumulate)
            for (std::size_t i = 0; i < m; ++i) std::fill_n(c_rows[i], n, T(0));
        return;
    }
    constexpr std::size_t nr = panel_width<T>;
    // Rows in blocks of nearly equal size (32 = 6 + 6 + 5 + 5 + 5 + 5), so no block runs with
    // too few accumulators to hide the FMA latency. Each panel (k x nr) is read from memory once
    // and stays in L1/L2 while every block of rows passes over it.
    const std::size_t blocks = (m + max_rows - 1) / max_rows;
    for (std::size_t col = 0; col < n; col += nr) {
        const T* panel = packed + col * k;
        const std::size_t nc = std::min(nr, n - col);
        for (std::size_t b = 0, start = 0; b < blocks; ++b) {
            const std::size_t rows = m / blocks + (b < m % blocks ? 1 : 0);
#ifdef LOOM_PACKED_GEMM_AVX2
            kernels<T>[rows](k, a_rows + start, panel, c_rows + start, col, nc, accumulate);
#else
            block(rows, k, a_rows + start, panel, c_rows + start, col, nc, accumulate);
#endif
            start += rows;
        }
    }
}

template std::size_t packed_size<float>(std::size_t, std::size_t);
template std::size_t packed_size<double>(std::size_t, std::size_t);
template void pack_right(bool, std::size_t, std::size_t, const float*, std::size_t, float*);
template void pack_right(bool, std::size_t, std::size_t, const double*, std::size_t, double*);
template void gemm_rows(std::size_t, std::size_t, std::size_t, const float* const*, const float*, float* const*, bool);
template void gemm_rows(std::size_t, std::size_t, std::size_t, const double* const*, const double*, double* const*,
                        bool);

}  // namespace loom
