#include "core/packed_gemm.hpp"

#include <algorithm>
#include <vector>

#include "core/gemm.hpp"
#include "core/isa_kernels.hpp"
#include "core/pack_right.hpp"
#include "core/parallel.hpp"

namespace loom {

namespace {

using detail::panel_width;

// Portable fallback with the same packed layout.
template <class T>
void rows_portable(std::size_t m, std::size_t n, std::size_t k, const T* const* a, const T* packed, T* const* c,
                   const T* const* d, T alpha, T beta) {
    constexpr std::size_t nr = panel_width<T>;
    for (std::size_t col = 0; col < n; col += nr) {
        const T* panel = packed + col * k;
        const std::size_t nc = std::min(nr, n - col);
        for (std::size_t r = 0; r < m; ++r) {
            T s[panel_width<T>] = {};
            for (std::size_t p = 0; p < k; ++p)
                for (std::size_t j = 0; j < nr; ++j) s[j] += a[r][p] * panel[p * nr + j];
            T* out = c[r] + col;
            const T* in = d[r] + col;
            for (std::size_t j = 0; j < nc; ++j) {
                const T v = alpha * s[j];
                out[j] = beta == T(0) ? v : v + beta * in[j];
            }
        }
    }
}

template <class T>
void rows(Isa isa, std::size_t m, std::size_t n, std::size_t k, const T* const* a, const T* packed, T* const* c,
          const T* const* d, T alpha, T beta) {
#if defined(__x86_64__)
    if (isa == Isa::avx512) return kernels::rows_avx512(m, n, k, a, packed, c, d, alpha, beta);
    if (isa == Isa::avx2) return kernels::rows_avx2(m, n, k, a, packed, c, d, alpha, beta);
#endif
    (void)isa;
    rows_portable(m, n, k, a, packed, c, d, alpha, beta);
}

}  // namespace

bool packed_gemm_vectorized() { return active_isa() != Isa::portable; }

template <class T>
std::size_t packed_size(std::size_t k, std::size_t n) {
    constexpr std::size_t nr = panel_width<T>;
    return (n + nr - 1) / nr * nr * k;
}

template <class T>
void pack_right(bool transposed, std::size_t k, std::size_t n, const T* b, std::size_t ldb, T* packed) {
    detail::pack_right_from(
        transposed, k, n, [&](std::size_t r) { return b + r * ldb; }, packed);
}

template <class T>
void gemm_rows(Isa isa, std::size_t m, std::size_t n, std::size_t k, const T* const* a_rows, const T* packed,
               T* const* c_rows, T alpha, T beta, const T* const* d_rows) {
    if (m == 0 || n == 0) return;
    if (!d_rows) d_rows = c_rows;
    if (k == 0) {
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) c_rows[i][j] = beta == T(0) ? T(0) : beta * d_rows[i][j];
        return;
    }
    // A product of at least 2^18 multiply-adds per part (share_range) is split by columns among
    // inter-op threads, at pairs of panels: each thread reads its own panels of the packed weight (which
    // then stay in its core's cache step after step), and computes every element as the whole
    // product would, with the same FMAs in the same order.
    constexpr std::size_t min_work = std::size_t{1} << 18;
    const bool split = share_range(n, 2 * panel_width<T>, m * k, min_work, [&](std::size_t j0, std::size_t j1) {
        thread_local std::vector<T*> c_part;
        thread_local std::vector<const T*> d_part;
        c_part.resize(m);
        d_part.resize(m);
        for (std::size_t i = 0; i < m; ++i) c_part[i] = c_rows[i] + j0, d_part[i] = d_rows[i] + j0;
        rows(isa, m, j1 - j0, k, a_rows, packed + j0 * k, c_part.data(), d_part.data(), alpha, beta);
    });
    if (!split) rows(isa, m, n, k, a_rows, packed, c_rows, d_rows, alpha, beta);
}

template <class T>
void gemm_rows(std::size_t m, std::size_t n, std::size_t k, const T* const* a_rows, const T* packed, T* const* c_rows,
               bool accumulate) {
    GemmTimer timer;
    gemm_rows<T>(active_isa(), m, n, k, a_rows, packed, c_rows, T(1), accumulate ? T(1) : T(0));
}

template <class T>
void gemm_rows_add(std::size_t m, std::size_t n, std::size_t k, const T* const* a_rows, const T* packed,
                   const T* const* d_rows, T* const* c_rows) {
    GemmTimer timer;
    gemm_rows<T>(active_isa(), m, n, k, a_rows, packed, c_rows, T(1), T(1), d_rows);
}

template std::size_t packed_size<float>(std::size_t, std::size_t);
template std::size_t packed_size<double>(std::size_t, std::size_t);
template void pack_right(bool, std::size_t, std::size_t, const float*, std::size_t, float*);
template void pack_right(bool, std::size_t, std::size_t, const double*, std::size_t, double*);
template void gemm_rows(std::size_t, std::size_t, std::size_t, const float* const*, const float*, float* const*, bool);
template void gemm_rows(std::size_t, std::size_t, std::size_t, const double* const*, const double*, double* const*,
                        bool);
template void gemm_rows(Isa, std::size_t, std::size_t, std::size_t, const float* const*, const float*, float* const*,
                        float, float, const float* const*);
template void gemm_rows(Isa, std::size_t, std::size_t, std::size_t, const double* const*, const double*, double* const*,
                        double, double, const double* const*);
template void gemm_rows_add(std::size_t, std::size_t, std::size_t, const float* const*, const float*,
                            const float* const*, float* const*);
template void gemm_rows_add(std::size_t, std::size_t, std::size_t, const double* const*, const double*,
                            const double* const*, double* const*);

}  // namespace loom
