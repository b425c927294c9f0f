#pragma once
// Internal to the AVX-512 kernel files (core/kernels_avx512.cpp, core/kernels_avx512_bf16.cpp),
// which alone include it: vectors of float and double, the kernels' epilogue and a 16 x 16
// transpose in registers. Everything here has internal linkage, so no copy compiled for AVX-512
// can stand in for a function of the same name elsewhere (core/isa_kernels.hpp).
#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#include <cstddef>

#include "core/isa_kernels.hpp"

namespace loom::kernels {

namespace {

template <class T>
struct Vec;
template <>
struct Vec<float> {
    using V = __m512;
    using Mask = __mmask16;
    static constexpr std::size_t width = 16;
    static V zero() { return _mm512_setzero_ps(); }
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
    static V set(float x) { return _mm512_set1_ps(x); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V load_masked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
    static void store_masked(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
};
template <>
struct Vec<double> {
    using V = __m512d;
    using Mask = __mmask8;
    static constexpr std::size_t width = 8;
    static V zero() { return _mm512_setzero_pd(); }
    static V load(const double* p) { return _mm512_loadu_pd(p); }
    static V broadcast(const double* p) { return _mm512_set1_pd(*p); }
    static V set(double x) { return _mm512_set1_pd(x); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
    static V add(V a, V b) { return _mm512_add_pd(a, b); }
    static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
    static V load_masked(const double* p, Mask m) { return _mm512_maskz_loadu_pd(m, p); }
    static void store_masked(double* p, Mask m, V v) { _mm512_mask_storeu_pd(p, m, v); }
};

constexpr std::size_t max_rows = kPackedRows;

// Lanes [0, count) of a vector (count may exceed the width).
template <class T>
typename Vec<T>::Mask lanes(std::size_t count) {
    constexpr std::size_t w = Vec<T>::width;
    return static_cast<typename Vec<T>::Mask>(count >= w ? (1u << w) - 1 : (1u << count) - 1);
}

template <class T>
struct Epilogue {
    T alpha, beta;
    // c = alpha * acc + beta * d over the lanes in mask (d may be c).
    void store(T* c, const T* d, typename Vec<T>::Mask mask, typename Vec<T>::V acc) const {
        using W = Vec<T>;
        if (alpha != T(1)) acc = W::mul(acc, W::set(alpha));
        if (beta == T(1))
            acc = W::add(acc, W::load_masked(d, mask));
        else if (beta != T(0))
            acc = W::fma(W::set(beta), W::load_masked(d, mask), acc);
        W::store_masked(c, mask, acc);
    }
};

// The unmasked forms of these intrinsics pass GCC 12 an undefined vector, which it then reports as
// maybe uninitialized (-Wmaybe-uninitialized); with every lane selected the masked forms are the
// same instructions.
inline __m512 unpacklo_ps(__m512 a, __m512 b) { return _mm512_mask_unpacklo_ps(_mm512_setzero_ps(), 0xffff, a, b); }
inline __m512 unpackhi_ps(__m512 a, __m512 b) { return _mm512_mask_unpackhi_ps(_mm512_setzero_ps(), 0xffff, a, b); }
inline __m512d unpacklo_pd(__m512d a, __m512d b) { return _mm512_mask_unpacklo_pd(_mm512_setzero_pd(), 0xff, a, b); }
inline __m512d unpackhi_pd(__m512d a, __m512d b) { return _mm512_mask_unpackhi_pd(_mm512_setzero_pd(), 0xff, a, b); }
// 128-bit lanes 0 and 2 of a, then of b (0x88); lanes 1 and 3 (0xdd).
inline __m512 lanes_0x88(__m512 a, __m512 b) {
    return _mm512_mask_shuffle_f32x4(_mm512_setzero_ps(), 0xffff, a, b, 0x88);
}
inline __m512 lanes_0xdd(__m512 a, __m512 b) {
    return _mm512_mask_shuffle_f32x4(_mm512_setzero_ps(), 0xffff, a, b, 0xdd);
}

// The columns of a 16 x 16 block of floats: col[j] lane i = row[i] lane j. Pairs of rows
// interleaved, then pairs of pairs, so that r[4q + s] holds in its 128-bit lane L column 4L + s of
// rows 4q .. 4q + 3; then the 128-bit lanes are gathered: columns s, 4 + s, 8 + s and 12 + s.
inline void transpose16(__m512 (&r)[16], __m512 (&col)[16]) {
    __m512 t[16];
    for (std::size_t i = 0; i < 16; i += 2) {
        t[i] = unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = unpackhi_ps(r[i], r[i + 1]);
    }
    for (std::size_t q = 0; q < 16; q += 4) {
        const __m512d a = _mm512_castps_pd(t[q]), b = _mm512_castps_pd(t[q + 1]), c = _mm512_castps_pd(t[q + 2]),
                      d = _mm512_castps_pd(t[q + 3]);
        r[q] = _mm512_castpd_ps(unpacklo_pd(a, c));
        r[q + 1] = _mm512_castpd_ps(unpackhi_pd(a, c));
        r[q + 2] = _mm512_castpd_ps(unpacklo_pd(b, d));
        r[q + 3] = _mm512_castpd_ps(unpackhi_pd(b, d));
    }
    for (std::size_t s = 0; s < 4; ++s) {
        const __m512 lo_even = lanes_0x88(r[s], r[4 + s]), lo_odd = lanes_0xdd(r[s], r[4 + s]),
                     hi_even = lanes_0x88(r[8 + s], r[12 + s]), hi_odd = lanes_0xdd(r[8 + s], r[12 + s]);
        col[s] = lanes_0x88(lo_even, hi_even);
        col[8 + s] = lanes_0xdd(lo_even, hi_even);
        col[4 + s] = lanes_0x88(lo_odd, hi_odd);
        col[12 + s] = lanes_0xdd(lo_odd, hi_odd);
    }
}

}  // namespace

}  // namespace loom::kernels
#endif
