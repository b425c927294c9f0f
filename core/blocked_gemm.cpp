// gemm_blocked (core/packed_gemm.hpp): a whole GEMM made of the packed row kernels. B is packed by
// blocks of kc rows and nc columns; each pair of panels (kc x 32 floats, 32 KiB) then stays in L1
// while up to mc rows of A (in L2) pass over it, which is how BLIS orders its loops. A is read
// where it lies, or transposed into a buffer block by block when trans_a. On AVX-512 this reaches
// about 80 % of the FMA peak at the QA model's shapes, where OpenBLAS 0.3.21 reaches 40 % with its
// Haswell kernels and 12 % with the Prescott ones it falls back to on CPUs it does not know
// (bench/README.md).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/gemm.hpp"
#include "core/isa_kernels.hpp"
#include "core/pack_right.hpp"
#include "core/packed_gemm.hpp"
#include "core/parallel.hpp"

namespace loom {

namespace {

template <class T>
struct Blocking {
    static constexpr std::size_t kc = 256;  // a panel pair of kc rows: 32 KiB of floats, in L1
    static constexpr std::size_t mc = 240;  // rows of A per pass over a B block: 240 KiB, in L2
    // A packed B block of at most 2 MiB, its width a whole number of panel pairs.
    static constexpr std::size_t nc = (std::size_t{2} << 20) / (kc * sizeof(T)) / (128 / sizeof(T)) * (128 / sizeof(T));
};

template <class T>
struct Buffers {
    std::vector<T> b, a;
    std::vector<const T*> a_rows;
    std::vector<T*> c_rows;
    std::vector<const T*> d_rows;
};

template <class T>
Buffers<T>& buffers() {
    thread_local Buffers<T> bufs;
    return bufs;
}

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

// Rows [ic, ic + mc) of op(A), columns [pc, pc + kc), in blocks of kPackedRows rows stored
// [kc][kPackedRows], the last block padded with zero rows: the AVX-512 kernel's layout.
// `a_row(r)` is row r of A as stored: of op(A), or of A itself (a column of op(A)) when trans_a.
template <class T, class ARow>
void pack_interleaved(bool trans_a, std::size_t mc, std::size_t kc, std::size_t pc, std::size_t ic, ARow a_row,
                      T* out) {
    constexpr std::size_t mr = kernels::kPackedRows;
    for (std::size_t r0 = 0; r0 < mc; r0 += mr, out += mr * kc) {
        const std::size_t rows = std::min(mr, mc - r0);
        if (trans_a) {  // stored row p holds op(A)'s column p: the block's rows side by side
            for (std::size_t p = 0; p < kc; ++p) {
                const T* src = a_row(pc + p) + ic + r0;
                if (rows == mr) {  // a fixed-size copy the compiler inlines as vector moves
                    std::memcpy(out + p * mr, src, mr * sizeof(T));
                    continue;
                }
                for (std::size_t r = 0; r < rows; ++r) out[p * mr + r] = src[r];
                for (std::size_t r = rows; r < mr; ++r) out[p * mr + r] = T(0);
            }
        } else {
#if defined(__x86_64__)
            if constexpr (std::is_same_v<T, float>) {  // only reached on AVX-512 (rows_packed_avx512)
                const float* src[mr];
                for (std::size_t r = 0; r < rows; ++r) src[r] = a_row(ic + r0 + r) + pc;
                kernels::pack_rows_interleaved_avx512(rows, kc, src, out);
                continue;
            }
#endif
            for (std::size_t r = 0; r < rows; ++r) {
                const T* src = a_row(ic + r0 + r) + pc;
                for (std::size_t p = 0; p < kc; ++p) out[p * mr + r] = src[p];
            }
            for (std::size_t r = rows; r < mr; ++r)
                for (std::size_t p = 0; p < kc; ++p) out[p * mr + r] = T(0);
        }
    }
}

#if defined(__x86_64__)
// The loops of blocked() for float products with bfloat16 operands (bf16_products(): kernels in
// core/kernels_avx512_bf16.cpp). A pair of k takes the place of one float, so blocks of k are twice
// as deep for the same bytes: a panel pair of 512 k is again 32 KiB, a block of B at most 2 MiB.
// Both operands are rounded as they are packed.
template <class ARow, class BRow, class CRow, class DRow>
void blocked_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, ARow a_row,
                  BRow b_row, float beta, CRow c_row, DRow d_row) {
    constexpr std::size_t kc_most = 512, mc_most = 240, nc_most = 2048, mr = kernels::kPackedRows;
    struct Bf16Buffers {
        std::vector<unsigned> b, a;
        std::vector<const float*> src;
        std::vector<float*> c_rows;
        std::vector<const float*> d_rows;
    };
    thread_local Bf16Buffers buf;
    const std::size_t nc_max = std::min(n, nc_most), kc_max = std::min(k, kc_most), mc_max = std::min(m, mc_most);
    const std::size_t kp_max = (kc_max + 1) / 2;
    auto at_least = [](auto& v, std::size_t size) {
        if (v.size() < size) v.resize(size);
    };
    at_least(buf.b, round_up(nc_max, 16) * kp_max);
    at_least(buf.a, round_up(mc_max, mr) * kp_max);
    at_least(buf.src, std::max({kc_max, nc_max, mc_max}));
    at_least(buf.c_rows, mc_max);
    at_least(buf.d_rows, mc_max);
    const float** src = buf.src.data();
    for (std::size_t jc = 0; jc < n; jc += nc_max) {
        const std::size_t nc = std::min(nc_max, n - jc);
        for (std::size_t pc = 0; pc < k; pc += kc_max) {
            const std::size_t kc = std::min(kc_max, k - pc);
            if (trans_b)  // stored rows jc.. are op(B)'s columns
                for (std::size_t j = 0; j < nc; ++j) src[j] = b_row(jc + j) + pc;
            else
                for (std::size_t p = 0; p < kc; ++p) src[p] = b_row(pc + p) + jc;
            kernels::pack_right_bf16_avx512(trans_b, kc, nc, src, buf.b.data());
            const float beta_here = pc == 0 ? beta : 1.0f;  // the first block of k applies beta to D
            for (std::size_t ic = 0; ic < m; ic += mc_max) {
                const std::size_t mc = std::min(mc_max, m - ic);
                for (std::size_t i = 0; i < mc; ++i) {
                    buf.c_rows[i] = c_row(ic + i) + jc;
                    buf.d_rows[i] = pc == 0 ? d_row(ic + i) + jc : buf.c_rows[i];
                }
                if (trans_a)  // stored row p holds op(A)'s column p: the rows side by side
                    for (std::size_t p = 0; p < kc; ++p) src[p] = a_row(pc + p) + ic;
                else
                    for (std::size_t r = 0; r < mc; ++r) src[r] = a_row(ic + r) + pc;
                kernels::pack_rows_bf16_avx512(trans_a, mc, kc, src, buf.a.data());
                kernels::rows_packed_bf16_avx512(mc, nc, kc, buf.a.data(), buf.b.data(), buf.c_rows.data(),
                                                 buf.d_rows.data(), alpha, beta_here);
            }
        }
    }
}
#endif

// The loops of blocked() for products in T itself (no operands rounded), m, n and k not zero.
template <class T, class ARow, class BRow, class CRow, class DRow>
void blocked_unrounded(Isa isa, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
                       ARow a_row, BRow b_row, T beta, CRow c_row, DRow d_row) {
    using B = Blocking<T>;
    Buffers<T>& buf = buffers<T>();
    const std::size_t nc_max = std::min(n, B::nc), kc_max = std::min(k, B::kc), mc_max = std::min(m, B::mc);
    // Grown, never shrunk: a vector grown again after a smaller call zeroes what it regains.
    auto at_least = [](auto& v, std::size_t size) {
        if (v.size() < size) v.resize(size);
    };
    at_least(buf.b, packed_size<T>(kc_max, nc_max));
    at_least(buf.a, round_up(mc_max, kernels::kPackedRows) * kc_max);
    at_least(buf.a_rows, mc_max);
    at_least(buf.c_rows, mc_max);
    at_least(buf.d_rows, mc_max);
    for (std::size_t jc = 0; jc < n; jc += nc_max) {
        const std::size_t nc = std::min(nc_max, n - jc);
        for (std::size_t pc = 0; pc < k; pc += kc_max) {
            const std::size_t kc = std::min(kc_max, k - pc);
            if (trans_b)  // stored rows jc.. are op(B)'s columns
                detail::pack_right_from(
                    true, kc, nc, [&](std::size_t j) { return b_row(jc + j) + pc; }, buf.b.data());
            else
                detail::pack_right_from(
                    false, kc, nc, [&](std::size_t p) { return b_row(pc + p) + jc; }, buf.b.data());
            // The first block of k applies beta to D; the later ones add to C.
            const T beta_here = pc == 0 ? beta : T(1);
            for (std::size_t ic = 0; ic < m; ic += mc_max) {
                const std::size_t mc = std::min(mc_max, m - ic);
                for (std::size_t i = 0; i < mc; ++i) {
                    buf.c_rows[i] = c_row(ic + i) + jc;
                    buf.d_rows[i] = pc == 0 ? d_row(ic + i) + jc : buf.c_rows[i];
                }
#if defined(__x86_64__)
                if (isa == Isa::avx512) {
                    pack_interleaved<T>(trans_a, mc, kc, pc, ic, a_row, buf.a.data());
                    kernels::rows_packed_avx512(mc, nc, kc, buf.a.data(), buf.b.data(), buf.c_rows.data(),
                                                buf.d_rows.data(), alpha, beta_here);
                    continue;
                }
#endif
                if (trans_a) {  // op(A) rows ic.. are columns of A: copy them into rows of kc
                    for (std::size_t p = 0; p < kc; ++p) {
                        const T* src = a_row(pc + p) + ic;
                        for (std::size_t i = 0; i < mc; ++i) buf.a[i * kc + p] = src[i];
                    }
                    for (std::size_t i = 0; i < mc; ++i) buf.a_rows[i] = buf.a.data() + i * kc;
                } else {
                    for (std::size_t i = 0; i < mc; ++i) buf.a_rows[i] = a_row(ic + i) + pc;
                }
                gemm_rows<T>(isa, mc, nc, kc, buf.a_rows.data(), buf.b.data(), buf.c_rows.data(), alpha, beta_here,
                             buf.d_rows.data());
            }
        }
    }
}

// The loops of every entry point. Operands come by rows as stored: `a_row(r)` is row r of A (of
// op(A), or of A [k, m] when trans_a), `b_row(r)` row r of B (B [k, n], or [n, k] when trans_b),
// `c_row(i)` row i of C, `d_row(i)` the row beta multiplies (C's own, or an addend); rows may lie
// anywhere.
template <class T, class ARow, class BRow, class CRow, class DRow>
void blocked(Isa isa, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, ARow a_row,
             BRow b_row, T beta, CRow c_row, DRow d_row) {
    if (m == 0 || n == 0) return;
    if (k == 0 || alpha == T(0)) {
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) c_row(i)[j] = beta == T(0) ? T(0) : beta * d_row(i)[j];
        return;
    }
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>)
        if (isa == Isa::avx512 && bf16_products())
            return blocked_bf16(trans_a, trans_b, m, n, k, alpha, a_row, b_row, beta, c_row, d_row);
#endif
    blocked_unrounded(isa, trans_a, trans_b, m, n, k, alpha, a_row, b_row, beta, c_row, d_row);
}

// Runs part(i0, i1, j0, j1) over C's rows [0, m) and columns [0, n), split among idle inter-op
// threads as gemm() splits a product (core/gemm.cpp): along the longer of m and n, at multiples
// of 12 rows or 32 columns, when each part has at least kSplitGemmWork multiply-adds. Each part
// computes whole elements of C with the same blocks of k, so the bits do not depend on the split.
template <class Part>
void split_product(std::size_t m, std::size_t n, std::size_t k, Part part) {
    const bool split =
        n >= m ? share_range(n, 32, m * k, kSplitGemmWork, [&](std::size_t j0, std::size_t j1) { part(0, m, j0, j1); })
               : share_range(m, kernels::kPackedRows, n * k, kSplitGemmWork,
                             [&](std::size_t i0, std::size_t i1) { part(i0, i1, 0, n); });
    if (!split) part(0, m, 0, n);
}

}  // namespace

template <class T>
void gemm_blocked(Isa isa, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
                  std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
    blocked(
        isa, trans_a, trans_b, m, n, k, alpha, [&](std::size_t r) { return a + r * lda; },
        [&](std::size_t r) { return b + r * ldb; }, beta, [&](std::size_t i) { return c + i * ldc; },
        [&](std::size_t i) { return c + i * ldc; });
}

template <class T>
void gemm_blocked_rows(bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* const* a_rows,
                       const T* b, std::size_t ldb, T beta, T* const* c_rows, const T* const* d_rows) {
    GemmTimer timer;
    const T* const* d = d_rows ? d_rows : c_rows;
    split_product(m, n, k, [&](std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1) {
        // op(B)'s columns [j0, j1): rows j0.. of B [n, k] when trans_b, else columns j0.. of B [k, n]
        blocked(
            active_isa(), false, trans_b, i1 - i0, j1 - j0, k, alpha, [&](std::size_t i) { return a_rows[i0 + i]; },
            [&](std::size_t r) { return trans_b ? b + (j0 + r) * ldb : b + r * ldb + j0; }, beta,
            [&](std::size_t i) { return c_rows[i0 + i] + j0; }, [&](std::size_t i) { return d[i0 + i] + j0; });
    });
}

template <class T>
void gemm_blocked_rows_tn(std::size_t m, std::size_t n, std::size_t k, T alpha, const T* const* a_rows,
                          const T* const* b_rows, T beta, T* c, std::size_t ldc) {
    GemmTimer timer;
    split_product(m, n, k, [&](std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1) {
        blocked(
            active_isa(), true, false, i1 - i0, j1 - j0, k, alpha, [&](std::size_t p) { return a_rows[p] + i0; },
            [&](std::size_t p) { return b_rows[p] + j0; }, beta, [&](std::size_t i) { return c + (i0 + i) * ldc + j0; },
            [&](std::size_t i) { return c + (i0 + i) * ldc + j0; });
    });
}

GemmRates gemm_blocked_rates() {
    GemmRates rates;
#if defined(__x86_64__)
    constexpr std::size_t m = 240, n = 256, k = 384;
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 13) * 0.125f - 0.75f;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
    const auto a_row = [&](std::size_t r) { return a.data() + r * k; };
    const auto b_row = [&](std::size_t r) { return b.data() + r * n; };
    const auto c_row = [&](std::size_t i) { return c.data() + i * n; };
    // Runs `product`, keeping the shortest time in `shortest`.
    const auto run_keeping_shortest = [](double& shortest, auto product) {
        const auto t0 = std::chrono::steady_clock::now();
        product();
        shortest = std::min(shortest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    const auto float_product = [&] {
        blocked_unrounded(Isa::avx512, false, false, m, n, k, 1.0f, a_row, b_row, 0.0f, c_row, c_row);
    };
    const auto bf16_product = [&] { blocked_bf16(false, false, m, n, k, 1.0f, a_row, b_row, 0.0f, c_row, c_row); };
    // The first run of each untimed (buffers grown, pages touched), then three of each in turns.
    double float_seconds = 1e9, bf16_seconds = 1e9, untimed = 1e9;
    run_keeping_shortest(untimed, float_product);
    run_keeping_shortest(untimed, bf16_product);
    for (int run = 0; run < 3; ++run) {
        run_keeping_shortest(float_seconds, float_product);
        run_keeping_shortest(bf16_seconds, bf16_product);
    }
    const double gflop = 2e-9 * double(m * n * k);
    rates = {gflop / float_seconds, gflop / bf16_seconds};
#endif
    return rates;
}

template void gemm_blocked(Isa, bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                           const float*, std::size_t, float, float*, std::size_t);
template void gemm_blocked(Isa, bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                           const double*, std::size_t, double, double*, std::size_t);

template void gemm_blocked_rows(bool, std::size_t, std::size_t, std::size_t, float, const float* const*, const float*,
                                std::size_t, float, float* const*, const float* const*);
template void gemm_blocked_rows(bool, std::size_t, std::size_t, std::size_t, double, const double* const*,
                                const double*, std::size_t, double, double* const*, const double* const*);
template void gemm_blocked_rows_tn(std::size_t, std::size_t, std::size_t, float, const float* const*,
                                   const float* const*, float, float*, std::size_t);
template void gemm_blocked_rows_tn(std::size_t, std::size_t, std::size_t, double, const double* const*,
                                   const double* const*, double, double*, std::size_t);

}  // namespace loom
