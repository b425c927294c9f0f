#pragma once
/// \file
/// Products of a few float rows by a fixed weight kept in bfloat16 or int8
/// (core/weight_precision.hpp): gemm_rows (core/packed_gemm.hpp) reading half or a quarter of the
/// bytes. The weight is packed once into panels of 16 columns (the last panel padded with zero
/// columns): int8 as pack_right packs float, k rows of 16 one byte each, with one float scale per
/// column; bfloat16 in pairs of rows, a 32-bit word holding rows 2q and 2q + 1 of a column (the
/// even one in its low half; an odd k's last pair has a zero second row), the layout vdpbf16ps
/// reads. Where the bfloat16 kernels are chosen (core/gemm.hpp: bf16_kernels_chosen, on CPUs with
/// AVX-512 BF16), a product rounds its rows into pairs of bfloat16 and multiplies pairs by pairs,
/// twice the multiply-adds of an FMA an instruction: a bfloat16 weight's pairs as they are kept, an
/// int8 weight's widened into pairs as they are read (exact: every int8 is a bfloat16). Elsewhere
/// the kernels widen each element to float as they load it and multiply-add in float, in k order:
/// the AVX-512 (12 rows x 32 columns) and AVX2 + FMA (6 rows x 16 columns) kernels give the same
/// bits, and equal the portable loop up to float's rounding of the sums (it may fuse differently).
///
/// The value computed is exactly what the rounded operands give: c = alpha * (a' B') + beta * d,
/// B' the weight as kept (int8: q[p][j] * scale[j], with the scale applied once to each column's
/// sum) and a' the rows, rounded to bfloat16 for a bfloat16 weight and wherever the pairs kernels
/// run, else as they are (an int8 weight widened to float), summed in float (each pair's two
/// products added in turn where vdpbf16ps does it). The tests check it against a double
/// computation over the same rounded operands.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/cpu.hpp"
#include "core/weight_precision.hpp"

namespace loom {

/// B [k, n] kept in bfloat16 or int8 for gemm_rows_quantized.
struct QuantizedWeight {
    WeightPrecision precision = WeightPrecision::int8;  ///< bfloat16 or int8
    std::size_t k = 0;                                  ///< B's rows (the products' inner size)
    std::size_t n = 0;                                  ///< B's columns (the products' outputs)
    /// bfloat16: panels of 16 columns in pairs of rows, element [p][j] at col * k2 + p / 2 * 32 + j * 2 + p % 2
    /// (k2: k rounded up to even)
    std::vector<std::uint16_t> bf16;
    std::vector<std::int8_t> int8;  ///< int8: panels of 16 columns, element [p][j] at col * k + p * 16 + j
    std::vector<float> scales;      ///< int8: each column's scale, zeros for the padding columns
    /// int8, once widen_int8 ran: the same values as bfloat16 pairs, in bf16's layout (else empty)
    std::vector<std::uint16_t> widened;
    /// The bytes the products read per call: what the precision saves (a widened int8 weight's
    /// pairs where the vdpbf16ps kernels read them, else its int8 values).
    std::size_t bytes() const;
};

/// The float a bfloat16 element (its 16 bits) is: exact, as bfloat16 is float's upper half.
inline float widen_bf16(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t{bits} << 16); }
/// `x` rounded to bfloat16 (to nearest, ties to even; NaN stays NaN), as a float.
float round_to_bfloat16(float x);
/// The bfloat16 bits of round_to_bfloat16(x).
std::uint16_t bfloat16_bits(float x);
/// bfloat16_bits of x[0, n), written to `out` as n elements of 2 bytes each (copied as bytes: `out`
/// may lie in another type's storage), in vector lanes: a row stored in a bfloat16 cache.
void bfloat16_bits(const float* x, std::size_t n, void* out);

/// Packs B [k, n] = op(b) (b is [k, n] with row stride ldb, or [n, k] when transposed) into `out`
/// at `precision` (bfloat16 or int8; UserError for float32, which pack_right packs). A column of
/// zeros gets the scale 0; an int8 column holding NaN or an infinity the scale NaN, so that its
/// products are NaN as float's would be (bfloat16 keeps NaN and infinities as they are).
void quantize_right(WeightPrecision precision, bool transposed, std::size_t k, std::size_t n, const float* b,
                    std::size_t ldb, QuantizedWeight& out);

/// Keeps an int8 weight's values also as bfloat16 pairs (exact: every int8 is a bfloat16), which
/// the vdpbf16ps kernels then read as they are instead of widening each pair at every product: the
/// same bits, twice the int8 weight's bytes read and kept. For a weight read by few rows from
/// cache, where widening, not reading, bounds the product (a group of 4 streams of a small GPT).
/// UserError for a weight not kept in int8.
void widen_int8(QuantizedWeight& w);

/// The most bytes of widened copies a model's int8 weights are kept widened in (widen_int8), so that
/// the copies stay in the last-level cache beside the step's caches. Nano's products alone (4 x 128,
/// 0.8 MB in int8, decode_roofline, Zen 4) took 55.9 us a step at 4 streams widening each pair as it
/// read it, 32.9 reading bfloat16 pairs; the whole step, 8 streams, a bfloat16 cache, 6 runs each
/// alternated, characters/s: 1 thread 24,100 -> 26,300, 2 threads (groups of 4 streams) 30,800 ->
/// 39,900. The wide GPT's (10.7 MB in int8) come from memory, where reading half the bytes pays.
inline constexpr std::size_t kWidenedInt8Bytes = std::size_t{4} << 20;
/// Whether int8 weights of `elements` elements in all are to be widened: where the vdpbf16ps kernels
/// run (bf16_kernels_chosen) and their copies take at most kWidenedInt8Bytes.
bool widen_int8_pays(std::size_t elements);

/// For i < m: c_rows[i][0, n) = alpha * a_rows[i][0, k) B + beta * d_rows[i][0, n), B as `w` keeps
/// it (w.k == k, w.n == n), through the kernels of `isa`; d_rows = c_rows when null; beta == 0
/// does not read d_rows. Rows may lie anywhere (c not overlapping a). A product of enough work is
/// split by columns among idle inter-op threads, as gemm_rows is: the same bits on any number.
void gemm_rows_quantized(Isa isa, std::size_t m, std::size_t n, std::size_t k, const float* const* a_rows,
                         const QuantizedWeight& w, float* const* c_rows, float alpha, float beta,
                         const float* const* d_rows = nullptr);
/// The same through the active kernels (core/cpu.hpp: active_isa).
void gemm_rows_quantized(std::size_t m, std::size_t n, std::size_t k, const float* const* a_rows,
                         const QuantizedWeight& w, float* const* c_rows, float alpha, float beta,
                         const float* const* d_rows = nullptr);

}  // namespace loom
