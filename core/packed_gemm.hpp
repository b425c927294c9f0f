#pragma once
// Products of a few rows by a matrix that stays the same across many calls: a recurrence's weight,
// multiplied at every time step by the rows of the sequences still running (M = 1 to 32).
// OpenBLAS repacks the weight at every call and runs these shapes at 40-90 % of its large-GEMM
// rate (bench/README.md). Here the weight is packed once per loop into panels of `packed_width`
// columns, and a register-blocked kernel (up to 6 rows x 2 vectors, AVX2 + FMA) reads the left
// rows where they are and adds into the result rows where they are: nothing is gathered, scattered
// or repacked per step.
#include <cstddef>

namespace loom {

// True when the vector kernel is compiled in (AVX2 and FMA); otherwise gemm_rows runs a plain
// loop, correct but slow, and callers should prefer gemm().
bool packed_gemm_vectorized();

// Elements needed to pack a [k, n] right operand.
template <class T>
std::size_t packed_size(std::size_t k, std::size_t n);

// Packs the right operand B [k, n] = op(b): b is [k, n] (row stride ldb), or [n, k] when transposed.
template <class T>
void pack_right(bool transposed, std::size_t k, std::size_t n, const T* b, std::size_t ldb, T* packed);

// For i < m: c_rows[i][0, n) = (accumulate ? c_rows[i][0, n) : 0) + a_rows[i][0, k) * B, where B
// was packed by pack_right with the same k and n. Rows may lie anywhere (not overlapping c).
template <class T>
void gemm_rows(std::size_t m, std::size_t n, std::size_t k, const T* const* a_rows, const T* packed, T* const* c_rows,
               bool accumulate);

}  // namespace loom
