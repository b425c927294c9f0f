#pragma once
/// \file
/// Row-major GEMM on contiguous buffers:
///   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C
/// On AVX-512 CPUs for which OpenBLAS has no AVX-512 kernels, through loom's own blocked kernels
/// (core/packed_gemm.hpp); elsewhere, where OpenBLAS has them (openblas_core_has_avx512), when
/// OpenBLAS runs several threads per GEMM (set_blas_threads(n > 1)), or with the environment
/// variable LOOM_GEMM=openblas, straight to OpenBLAS. LOOM_GEMM=loom asks for loom's kernels
/// wherever AVX-512 is active; LOOM_GEMM=auto (or unset) is the choice above.
#include <cstddef>
#include <string>
#include <string_view>

namespace loom {

/// C = alpha * op(A) * op(B) + beta * C on row-major float buffers (the choice of kernels is above).
/// \param trans_a, trans_b  use A, B transposed (op(X) = X^T)
/// \param m, n, k  op(A) is [m, k], op(B) is [k, n], C is [m, n]
/// \param alpha, beta  the scales of the product and of C's old values (beta 0: C is only written)
/// \param a, lda  A and its row stride in elements
/// \param b, ldb  B and its row stride
/// \param c, ldc  C and its row stride
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
          std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc);
/// The same product in double.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
          std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc);

/// A product is split among inter-op threads (share_range) when every part has at least this many
/// multiply-adds (2^20, about 10 microseconds of work; 4 times as many when no thread is idle
/// yet). That is also above OpenBLAS's bound for its small-matrix kernels (M N K <= 100^3 on its
/// AVX-512 cores), so a part runs the same kernels as the whole product would, and every element
/// is summed in the same order: equal bits on any number of threads (OpenBLAS running one thread
/// per call). gemm() and gemm_blocked_rows split along the longer of m and n, at multiples of 32
/// columns (a pair of packed panels) or 12 rows (a block of loom's kernel): each thread packs only
/// its part of the larger operand.
inline constexpr std::size_t kSplitGemmWork = std::size_t{1} << 20;

/// True when gemm() runs loom's own blocked kernels on a product of this shape (AVX-512, one
/// OpenBLAS thread, LOOM_GEMM not openblas): gemm_blocked_rows (core/packed_gemm.hpp) then runs
/// the same kernels on rows where they lie, so callers need not gather rows into a block first.
bool gemm_own_kernels(std::size_t m, std::size_t n, std::size_t k);

/// True when a product over rows where they lie (the real rows of a padded batch) runs loom's
/// kernels on them in place (gemm_blocked_rows) rather than gathering them into a block for gemm()
/// and scattering the result back: wherever gemm_own_kernels is true, and also where OpenBLAS has
/// AVX-512 kernels of its own, whose edge over loom's (none to ~20 % at the QA model's shapes) the
/// copies cost more than (on the g2p Transformer's training, Intel Xeon with AVX-512 and OpenBLAS's
/// SkylakeX kernels: 2-6 % faster at one thread, 10-13 % at two; bench/RESULTS.md).
/// LOOM_GEMM=openblas turns it off.
bool gemm_rows_in_place(std::size_t m, std::size_t n, std::size_t k);

/// Counts the time of its scope into gemm_seconds() when timing is on: every GEMM entry point
/// (gemm, gemm_rows) holds one.
class GemmTimer {
public:
    GemmTimer();
    ~GemmTimer();
    GemmTimer(const GemmTimer&) = delete;
    GemmTimer& operator=(const GemmTimer&) = delete;

private:
    long long start_ns_ = 0;
    bool on_;
};

/// Seconds spent inside gemm since start (for benchmarks' "share of time in GEMM"); off unless enabled.
void gemm_timing(bool on);
/// \return the seconds counted so far (0 unless gemm_timing(true)).
double gemm_seconds();
/// Sets gemm_seconds() back to 0.
void gemm_reset_timing();

/// True for the OpenBLAS core types (openblas_get_corename(), case-insensitive) whose GEMM kernels
/// use AVX-512: SkylakeX, Cooperlake, SapphireRapids.
bool openblas_core_has_avx512(std::string_view core);

/// How float products are computed, as PyTorch's `torch.set_float32_matmul_precision` names it.
enum class MatmulPrecision {
    highest,  ///< the operands as they are, float multiply-adds (the default)
    medium,   ///< the operands rounded to bfloat16 (8 significant bits), their products summed in float
};

/// Sets how float products are computed from now on, on every thread. `medium` means, as in
/// PyTorch, "may use bfloat16 where faster": it takes effect on CPUs with AVX-512 BF16
/// (cpu_supports_bf16(), core/cpu.hpp) while the AVX-512 kernels are active, where the bfloat16
/// kernels are faster than float's (set_bf16_products below: by default measured once per
/// process), for the products gemm() and gemm_blocked_rows run through loom's blocked kernels (all
/// but the smallest: n < 16 or m n k < 32,768). On AMD's Zen 4 and Zen 5 one instruction does
/// twice float's multiply-adds and the bfloat16 kernels run 1.4-1.5 times as fast; on Intel's Xeon
/// (family 6 model 207) it runs on one port, does no more than two FMAs, and the kernels run at
/// two thirds of float's rate, so there `medium` computes as `highest` unless told otherwise.
/// Elsewhere, for double, for the per-step products of recurrences and cached decoders
/// (gemm_rows), and where OpenBLAS is asked for (LOOM_GEMM=openblas) or runs several threads per
/// product (set_blas_threads(n > 1)), products are computed as at `highest`. Values below 2^-126 in
/// magnitude (float's subnormals) count as zero in a rounded product. Like PyTorch's bfloat16 autocast, it trades
/// the operands' precision (a relative error up to 2^-9 each) for speed: parameters, gradients,
/// sums and everything outside the products stay float.
void set_matmul_precision(MatmulPrecision precision);
/// \return the precision set (highest until set_matmul_precision).
MatmulPrecision matmul_precision();

/// Sets the matmul precision for the scope's life and puts back the one before when it ends,
/// whether the scope is left normally or by an exception: evaluation at `highest` inside a program
/// that trains at `medium` (as torch.backends.cudnn.flags and autocast scopes do). The setting is
/// the process's (set_matmul_precision), not the thread's: scopes nest on one thread, and another
/// thread's products follow the innermost scope alive.
class MatmulPrecisionScope {
public:
    /// Sets `precision`, remembering the precision set before.
    explicit MatmulPrecisionScope(MatmulPrecision precision);
    /// Sets the precision remembered back.
    ~MatmulPrecisionScope();
    MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
    MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

private:
    MatmulPrecision before_;
};
/// True when float products are rounded to bfloat16 now: `medium`, on a CPU that has it, the
/// AVX-512 kernels active (core/cpu.hpp: active_isa), loom's kernels not refused (above), and the
/// bfloat16 kernels chosen (bf16_products_setting(): `always`, or `automatic` and measured faster).
/// Under `automatic` its first call that gets this far measures (bf16_speedup()).
bool bf16_products();
/// True when the bfloat16 kernels are chosen on this CPU, whatever the matmul precision: it has
/// AVX-512 BF16, the AVX-512 kernels are active, and bf16_products_setting() is `always`, or
/// `automatic` and they measured faster. A generating step's products with weights kept in
/// bfloat16 (core/quantized_gemm.hpp) then multiply pairs of them with vdpbf16ps.
bool bf16_kernels_chosen();
/// "highest" or "medium".
const char* matmul_precision_name(MatmulPrecision precision);
/// The precision named "highest" or "medium"; UserError naming the choices for anything else.
MatmulPrecision parse_matmul_precision(std::string_view name);

/// Whether `medium` rounds products to bfloat16 on CPUs that have the instructions.
enum class Bf16Products {
    automatic,  ///< where they measure kBf16MinSpeedup times float's rate or more (the default)
    always,     ///< wherever the CPU has them (the tests of the kernels; LOOM_BF16_PRODUCTS=on)
    never,      ///< nowhere: `medium` computes as `highest`, bit for bit
};

/// Sets the choice from now on, for every thread; it overrides the environment variable
/// LOOM_BF16_PRODUCTS=auto|on|off (automatic, always, never), which gives the choice until then.
void set_bf16_products(Bf16Products choice);
/// \return the choice: the one set, else LOOM_BF16_PRODUCTS's (read once; UserError naming the
/// choices for anything but auto, on, off or empty), else automatic.
Bf16Products bf16_products_setting();
/// Sets the choice for the scope's life and puts back the one before when it ends (as
/// MatmulPrecisionScope): tests and benchmarks that must run the bfloat16 kernels hold `always`.
class Bf16ProductsScope {
public:
    /// Sets `choice`, remembering the choice before.
    explicit Bf16ProductsScope(Bf16Products choice);
    /// Sets the choice remembered back.
    ~Bf16ProductsScope();
    Bf16ProductsScope(const Bf16ProductsScope&) = delete;
    Bf16ProductsScope& operator=(const Bf16ProductsScope&) = delete;

private:
    Bf16Products before_;
};
/// "auto", "on" or "off": the environment variable's names of the choices.
const char* bf16_products_name(Bf16Products choice);
/// The choice named "auto", "on" or "off"; UserError naming the choices for anything else.
Bf16Products parse_bf16_products(std::string_view name);

/// The smallest speed-up of the bfloat16 kernels over float's that makes `automatic` choose them:
/// clear of timing noise on a machine where both run alike, well below AMD Zen 4/5's 1.4-1.5.
inline constexpr double kBf16MinSpeedup = 1.15;
/// The decision of `automatic`, a pure function of the two measured rates (any unit, the same for
/// both): true when bf16_rate >= kBf16MinSpeedup * float_rate, both positive.
bool bf16_products_pay(double float_rate, double bf16_rate);
/// The rate of loom's bfloat16 blocked kernels over its float ones on this CPU, measured once per
/// process at its first call (one thread, the best of three runs of one product of a language
/// model's sizes, a few milliseconds: gemm_blocked_rates, core/packed_gemm.hpp); 0 on a CPU
/// without AVX-512 BF16. What `automatic` decides by; benchmarks print it. Against loom's float
/// kernels also where OpenBLAS's AVX-512 ones run float products (Zen 5: about 20 % faster than
/// loom's at a model's shapes, which the bfloat16 kernels still pass by far more than the margin).
double bf16_speedup();

/// OpenBLAS's thread count, set once by the program (benchmarks, samples). 1 also ends OpenBLAS's
/// idle threads (they would spin beside loom's), which OpenBLAS starts again at its next product on
/// several threads; call it while no BLAS call runs.
void set_blas_threads(int n);

/// Which kernels gemm() runs on large shapes now: "loom-avx512-bf16" (bf16_products(): at
/// `medium` where the bfloat16 kernels are chosen),
/// "loom-avx512", or "openblas-" and OpenBLAS's core name (e.g. "openblas-Haswell"), for
/// benchmarks to report.
std::string gemm_kernels();

}  // namespace loom
