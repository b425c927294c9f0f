#pragma once
// Entry points of the kernels compiled for one instruction set each (core/kernels_avx2.cpp,
// core/kernels_avx512.cpp, with their own compiler flags). Internal to core/: callers go through
// gemm_rows() and gemm(), which pick a variant by active_isa() and never call one the CPU cannot run.
//
// Each computes, for i < m, c[i][0, n) = alpha * a[i][0, k) * B + beta * d[i][0, n), B packed by
// pack_right (panels of 64 bytes: 16 floats or 8 doubles wide, k rows each, the last one padded
// with zeros); d[i] is c[i] itself, or another row (an addend: a bias, an input projection's row),
// which saves copying it into c first. beta == 0 does not read d; alpha == 1 and beta == 1 add the
// product to d, exactly as the AVX2 and AVX-512 variants both do it (the same FMAs in the same
// order: equal bits).
//
// Those files include nothing from the standard library but <cstddef>: an inline function or
// template instantiated there is compiled for AVX-512, and the linker may keep that copy for the
// whole program, which would then fault on older CPUs.
#include <cstddef>

namespace loom::kernels {

#if defined(__x86_64__)
void rows_avx2(std::size_t m, std::size_t n, std::size_t k, const float* const* a, const float* packed, float* const* c,
               const float* const* d, float alpha, float beta);
void rows_avx2(std::size_t m, std::size_t n, std::size_t k, const double* const* a, const double* packed,
               double* const* c, const double* const* d, double alpha, double beta);
void rows_avx512(std::size_t m, std::size_t n, std::size_t k, const float* const* a, const float* packed,
                 float* const* c, const float* const* d, float alpha, float beta);
void rows_avx512(std::size_t m, std::size_t n, std::size_t k, const double* const* a, const double* packed,
                 double* const* c, const double* const* d, double alpha, double beta);
// The same with A packed in blocks of kPackedRows rows, each stored [k][kPackedRows] (zero rows
// past m): what gemm_blocked uses on AVX-512.
void rows_packed_avx512(std::size_t m, std::size_t n, std::size_t k, const float* a, const float* packed,
                        float* const* c, const float* const* d, float alpha, float beta);
void rows_packed_avx512(std::size_t m, std::size_t n, std::size_t k, const double* a, const double* packed,
                        double* const* c, const double* const* d, double alpha, double beta);
// out[p * kPackedRows + r] = src[r][p] for p < k and r < rows (at most kPackedRows), zeros for
// the rows past them: a block of A interleaved for rows_packed_avx512.
void pack_rows_interleaved_avx512(std::size_t rows, std::size_t k, const float* const* src, float* out);
// panel[p * 16 + j] = src[j][p] for p < k and j < 16: one whole panel of pack_right(transposed).
void pack_panel_transposed_avx512(std::size_t k, const float* const* src, float* panel);
// Float products with operands rounded to bfloat16 (core/kernels_avx512_bf16.cpp, for CPUs with
// AVX-512 BF16; its header comment gives the layouts, of pairs of k in 32-bit words). B [k, n]
// packed from its rows (src[p], p < k, n values each) or, when transposed, from its columns
// (src[j], j < n, k values each) into panels of 16 columns, (k + 1) / 2 pairs deep.
void pack_right_bf16_avx512(bool transposed, std::size_t k, std::size_t n, const float* const* src, unsigned* packed);
// `rows` rows of A, k wide, in blocks of 12 (block b at out + 12 b (k + 1) / 2, zero rows past
// the last), from its rows (src[r], r < rows) or, when transposed, from its columns (src[p],
// p < k, each holding the rows side by side).
void pack_rows_bf16_avx512(bool transposed, std::size_t rows, std::size_t k, const float* const* src, unsigned* out);
// c[i] = alpha * a[i] * B + beta * d[i] for i < m, A packed in blocks of 12 rows by
// pack_rows_bf16_avx512, B by pack_right_bf16_avx512, both with this k.
void rows_packed_bf16_avx512(std::size_t m, std::size_t n, std::size_t k, const unsigned* a, const unsigned* packed,
                             float* const* c, const float* const* d, float alpha, float beta);
// A generating step's few rows by a weight kept in bfloat16 (core/quantized_gemm.hpp: panels of 16
// columns, (k + 1) / 2 pairs deep, the layout of pack_right_bf16_avx512): each row's pairs first,
// rounded (pack_row_pairs_bf16_avx512: out[q] = (row[2q], row[2q + 1]), (k + 1) / 2 words), then
// c[i] = alpha * a[i] B + beta * d[i], a holding the m rows' pairs one row after another.
void pack_row_pairs_bf16_avx512(std::size_t k, const float* row, unsigned* out);
void rows_pairs_bf16_avx512(std::size_t m, std::size_t n, std::size_t k, const unsigned* a, const unsigned* packed,
                            float* const* c, const float* const* d, float alpha, float beta);
// The same by a weight kept in int8 (rows of 16 a panel, k deep, as pack_right lays float): each pair
// of rows widened and rounded into pairs as it is read (exact), each column's sum times scales[j].
void rows_pairs_int8_avx512(std::size_t m, std::size_t n, std::size_t k, const unsigned* a, const signed char* packed,
                            const float* scales, float* const* c, const float* const* d, float alpha, float beta);
// The same by an int8 weight widened once into bfloat16 pairs (the layout of rows_pairs_bf16_avx512,
// each pair exactly the int8 values): the same bits as rows_pairs_int8_avx512, no widening a call.
void rows_pairs_widened_int8_avx512(std::size_t m, std::size_t n, std::size_t k, const unsigned* a,
                                    const unsigned* packed, const float* scales, float* const* c, const float* const* d,
                                    float alpha, float beta);
// Float rows by B kept narrower than float (core/quantized_gemm.hpp: panels of 16 columns, 1 byte
// an element for int8 as pack_right lays float, and for bfloat16 2 bytes an element in pairs of
// rows, as above): each element widened to float as it is loaded, the same FMAs in the same order
// as the float kernels, and for int8 each column's sum times scales[j] (scales padded with the
// panels) before alpha and beta: c[i] = alpha * (a[i] B) + beta * d[i]. The AVX2 and AVX-512
// variants give the same bits.
void rows_bf16_weights_avx2(std::size_t m, std::size_t n, std::size_t k, const float* const* a,
                            const unsigned short* packed, float* const* c, const float* const* d, float alpha,
                            float beta);
void rows_int8_weights_avx2(std::size_t m, std::size_t n, std::size_t k, const float* const* a,
                            const signed char* packed, const float* scales, float* const* c, const float* const* d,
                            float alpha, float beta);
void rows_bf16_weights_avx512(std::size_t m, std::size_t n, std::size_t k, const float* const* a,
                              const unsigned short* packed, float* const* c, const float* const* d, float alpha,
                              float beta);
void rows_int8_weights_avx512(std::size_t m, std::size_t n, std::size_t k, const float* const* a,
                              const signed char* packed, const float* scales, float* const* c, const float* const* d,
                              float alpha, float beta);
#endif

inline constexpr std::size_t kPackedRows = 12;

}  // namespace loom::kernels
