#pragma once
// Branch-free float exp / tanh / sigmoid that the compiler can vectorize (libm's are scalar calls,
// which were a fifth of an LSTM step's time). Accuracy: a few ulp over the whole float range,
// checked against libm in tests/core/test_fast_math.cpp. double keeps libm: gradient checks run
// in double and want it exact.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace loom::fast {

// exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln(2) / 2, exp(r) by a degree-6 polynomial
// (Cephes' expf coefficients), 2^n assembled in the exponent bits.
inline float exp(float x) {
    const float input = x;
    // Plain selects and the round-to-nearest magic constant (not fmin / nearbyint, which stay libm
    // calls without -ffast-math) keep the loop vectorizable.
    x = x < -87.3f ? -87.3f : (x > 88.72f ? 88.72f : x);
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // 2^n as two factors, so that n = 128 (x near 88.7) needs no exponent beyond float's.
    // A NaN input gives NaN through p; n is zeroed first, as converting NaN to an integer is undefined.
    const std::int32_t ni = static_cast<std::int32_t>(n == n ? n : 0.0f), half = ni >> 1;
    const std::int32_t bits1 = (half + 127) << 23, bits2 = (ni - half + 127) << 23;
    float s1, s2;
    std::memcpy(&s1, &bits1, sizeof s1);
    std::memcpy(&s2, &bits2, sizeof s2);
    const float y = p * s1 * s2;
    // Past float's range: +inf like libm; far below it: 0 (the clamped value is ~1e-38).
    return input > 88.72f ? HUGE_VALF : (input < -87.3f ? 0.0f : y);
}

inline float sigmoid(float x) { return 1.0f / (1.0f + fast::exp(-x)); }

// Small |x|: an odd polynomial (Cephes' tanhf); otherwise 1 - 2 / (exp(2|x|) + 1), with the sign.
inline float tanh(float x) {
    const float a = x < 0 ? -x : x;
    const float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    const float small = x + x * z * p;
    const float magnitude = 1.0f - 2.0f / (fast::exp(2.0f * a) + 1.0f);
    const float large = x < 0 ? -magnitude : magnitude;
    return a < 0.625f ? small : large;
}

// The standard normal distribution function Phi(x) = (1 + erf(x / sqrt 2)) / 2, GELU's gate, by
// Abramowitz and Stegun's 7.1.26 (absolute error 0.75e-7, 2.1e-7 with float rounding) on |x|, the
// sign applied at the end:
// libm's erff is a scalar call, and it was a quarter of a GPT's training step.
inline float normal_cdf(float x) {
    const float z = (x < 0 ? -x : x) * 0.70710678118654752f;
    const float t = 1.0f / (1.0f + 0.3275911f * z);
    const float poly =
        t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float tail = 0.5f * poly * fast::exp(-z * z);  // Phi(-|x|)
    return x < 0 ? tail : 1.0f - tail;
}

// double: libm, for exact gradient checks. Overloads let templated kernels call fast::f(x).
inline double exp(double x) { return std::exp(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double normal_cdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752440); }
inline double sigmoid(double x) {
    if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
    const double e = std::exp(x);
    return e / (1.0 + e);
}

// The sum of term(0) .. term(n - 1) in sixteen partial sums, one per vector lane: a plain running
// sum is a chain the compiler may not reorder (no -ffast-math), so it stays scalar. The order of the
// additions differs from a running sum's, not their accuracy.
template <class T, class Term>
inline T lane_sum(std::size_t n, Term term) {
    constexpr std::size_t lanes = 16;
    T part[lanes] = {};
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes)
        for (std::size_t l = 0; l < lanes; ++l) part[l] += term(i + l);
    T sum = 0;
    for (; i < n; ++i) sum += term(i);
    for (std::size_t l = 0; l < lanes; ++l) sum += part[l];
    return sum;
}

// The largest of x[0] .. x[n - 1] (-infinity for none) in sixteen partial maxima, as lane_sum.
template <class T>
inline T lane_max(const T* x, std::size_t n) {
    constexpr std::size_t lanes = 16;
    T part[lanes];
    std::fill_n(part, lanes, -std::numeric_limits<T>::infinity());
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes)
        for (std::size_t l = 0; l < lanes; ++l) part[l] = std::max(part[l], x[i + l]);
    T top = -std::numeric_limits<T>::infinity();
    for (; i < n; ++i) top = std::max(top, x[i]);
    for (std::size_t l = 0; l < lanes; ++l) top = std::max(top, part[l]);
    return top;
}

template <class T>
inline T dot(const T* a, const T* b, std::size_t n) {
    return lane_sum<T>(n, [&](std::size_t i) { return a[i] * b[i]; });
}

}  // namespace loom::fast
