#pragma once
/// \file
/// Products of a few rows by a matrix that stays the same across many calls: a recurrence's weight,
/// multiplied at every time step by the rows of the sequences still running (M = 1 to 32).
/// OpenBLAS repacks the weight at every call and runs these shapes at 40-90 % of its large-GEMM
/// rate (bench/README.md). Here the weight is packed once per loop into panels of 64 bytes (16
/// floats), and a register-blocked kernel reads the left rows where they are and adds into the
/// result rows where they are: nothing is gathered, scattered or repacked per step.
///
/// The kernel is chosen at run time (core/cpu.hpp): AVX-512 (12 rows x 32 floats), AVX2 + FMA (6
/// rows x 16 floats) or a portable loop; the packed layout is the same for all three. The same
/// kernels also make a cache-blocked GEMM (gemm_blocked), which loom::gemm uses for float on
/// AVX-512 machines.
#include <cstddef>

#include "core/buffer.hpp"
#include "core/cpu.hpp"

namespace loom {

/// True when the active kernel is vectorized (AVX2 or AVX-512); otherwise gemm_rows runs a plain
/// loop, correct but slow, and callers should prefer gemm().
bool packed_gemm_vectorized();

/// Elements needed to pack a [k, n] right operand.
template <class T>
std::size_t packed_size(std::size_t k, std::size_t n);

/// Packs the right operand B [k, n] = op(b): b is [k, n] (row stride ldb), or [n, k] when transposed.
template <class T>
void pack_right(bool transposed, std::size_t k, std::size_t n, const T* b, std::size_t ldb, T* packed);

/// pack_right into `cache` at its first use in a loop run, then the same packing for every later step.
template <class T>
const T* pack_right_once(LoopCache<T>& cache, bool transposed, std::size_t k, std::size_t n, const T* b,
                         std::size_t ldb) {
    T* packed = cache.get(packed_size<T>(k, n));
    if (!cache.ready) {
        pack_right(transposed, k, n, b, ldb, packed);
        cache.ready = true;
    }
    return packed;
}

/// For i < m: c_rows[i][0, n) = (accumulate ? c_rows[i][0, n) : 0) + a_rows[i][0, k) * B, where B
/// was packed by pack_right with the same k and n. Rows may lie anywhere (not overlapping c).
template <class T>
void gemm_rows(std::size_t m, std::size_t n, std::size_t k, const T* const* a_rows, const T* packed, T* const* c_rows,
               bool accumulate);

/// For i < m: c_rows[i][0, n) = d_rows[i][0, n) + a_rows[i][0, k) * B: the product added to
/// other rows than the result's (an addend such as a bias or an input projection, which then need
/// not be copied into the result first). d_rows[i] may be c_rows[i] or shared by several rows.
template <class T>
void gemm_rows_add(std::size_t m, std::size_t n, std::size_t k, const T* const* a_rows, const T* packed,
                   const T* const* d_rows, T* const* c_rows);

/// The same through the kernel of `isa` (tests run every variant the CPU supports), computing
/// c_rows[i] = alpha * a_rows[i] * B + beta * d_rows[i], d_rows = c_rows when null; beta == 0 does
/// not read d_rows.
template <class T>
void gemm_rows(Isa isa, std::size_t m, std::size_t n, std::size_t k, const T* const* a_rows, const T* packed,
               T* const* c_rows, T alpha, T beta, const T* const* d_rows = nullptr);

/// Row-major C [m, n] = alpha * op(A) [m, k] * op(B) [k, n] + beta * C, as loom::gemm, through the
/// packed kernels of `isa`: B packed by blocks of k that stay in L2, A read in place (or transposed
/// into a buffer when trans_a). beta == 0 does not read C. Single-threaded; each thread has its
/// own packing buffers.
template <class T>
void gemm_blocked(Isa isa, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
                  std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

/// The same with the rows of A and C where they lie (not overlapping): c_rows[i] = alpha *
/// a_rows[i] [0, k) * op(B) + beta * d_rows[i], B [k, n] = op(b) as in pack_right, d_rows = c_rows
/// when null (a bias row for every row saves copying it into C first), through the active
/// kernels. For products over the real rows of a padded sequence without gathering them into a
/// block and scattering the result back. Split among idle inter-op threads as gemm() is
/// (kSplitGemmWork, core/gemm.hpp): the same bits on any number of threads.
template <class T>
void gemm_blocked_rows(bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* const* a_rows,
                       const T* b, std::size_t ldb, T beta, T* const* c_rows, const T* const* d_rows = nullptr);

/// C [m, n] = alpha * A^T B + beta * C (row stride ldc), the k rows of A [k, m] and B [k, n] where
/// they lie (a_rows[p], b_rows[p]), through the active kernels: a weight's gradient X^T dY over the
/// real rows of a padded sequence, without gathering them. Split among idle inter-op threads as
/// gemm_blocked_rows is.
template <class T>
void gemm_blocked_rows_tn(std::size_t m, std::size_t n, std::size_t k, T alpha, const T* const* a_rows,
                          const T* const* b_rows, T beta, T* c, std::size_t ldc);

/// GFLOP/s of gemm_blocked's AVX-512 float kernels and of its bfloat16 ones on the calling thread.
struct GemmRates {
    double float_gflops = 0;  ///< the float kernels' rate
    double bf16_gflops = 0;   ///< the bfloat16 kernels' rate (operands rounded, sums in float)
};
/// Times the two on one product of a language model's sizes ([240 x 384] x [384 x 256]: one block
/// of 240 rows as the kernels take them, k past float's block of 256 as the lm sample's products'
/// k of 192 to 1,536 often are), operands packed and rounded as in use, the best of three runs
/// each after one untimed, in turns so that a busy moment slows both: about 5 ms where float runs
/// 100 GFLOP/s and bfloat16 70 (the Xeon). For CPUs with AVX-512 BF16 only (cpu_supports_bf16()):
/// what bf16_speedup() (core/gemm.hpp) measures.
GemmRates gemm_blocked_rates();

}  // namespace loom
