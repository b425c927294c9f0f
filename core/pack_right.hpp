#pragma once
// Internal to core/: packing the right operand of the packed kernels from rows that may lie
// anywhere, shared by pack_right (rows a stride apart) and gemm_blocked's entry points that take
// row pointers (the real rows of a padded sequence, read where they lie).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "core/cpu.hpp"
#include "core/isa_kernels.hpp"

namespace loom::detail {

// A panel is 64 bytes wide: 16 floats or 8 doubles (one AVX-512 vector, two AVX2 vectors).
template <class T>
constexpr std::size_t panel_width = 64 / sizeof(T);

// Packs B [k, n] into panels of panel_width<T> columns, each k rows deep, the last one padded with
// zero columns. `row(r)` is row r of B as stored: row r of B [k, n], or when `transposed` row r of
// b [n, k] (column r of B).
template <class T, class Row>
void pack_right_from(bool transposed, std::size_t k, std::size_t n, Row row, T* packed) {
    constexpr std::size_t nr = panel_width<T>;
    if (!transposed) {
        // A block of rows at a time, each read whole, into every panel: walking a panel's column
        // strip down all k rows instead reads 64 bytes per row at a stride of the row length,
        // which for rows of 4 KiB falls into one cache set (a third of the speed at k 256, n 1024).
        constexpr std::size_t block = 16;
        for (std::size_t p0 = 0; p0 < k; p0 += block) {
            const std::size_t p1 = std::min(k, p0 + block);
            for (std::size_t col = 0; col < n; col += nr) {
                const std::size_t nc = std::min(nr, n - col);
                T* panel = packed + col * k;
                for (std::size_t p = p0; p < p1; ++p) {
                    if (nc == nr) {  // a whole panel row is 64 bytes: a fixed-size copy, not a memmove call
                        std::memcpy(panel + p * nr, row(p) + col, nr * sizeof(T));
                    } else {  // the last panel's missing columns multiply to zeros that are never stored
                        std::copy_n(row(p) + col, nc, panel + p * nr);
                        std::fill(panel + p * nr + nc, panel + (p + 1) * nr, T(0));
                    }
                }
            }
        }
        return;
    }
    for (std::size_t col = 0; col < n; col += nr) {  // column j of B is row j of b: the panel's rows side by side
        const std::size_t nc = std::min(nr, n - col);
        T* panel = packed + col * k;
        const T* src[panel_width<T>];
        for (std::size_t j = 0; j < nc; ++j) src[j] = row(col + j);
#if defined(__x86_64__)
        if constexpr (std::is_same_v<T, float>)
            if (nc == nr && active_isa() == Isa::avx512) {
                kernels::pack_panel_transposed_avx512(k, src, panel);
                continue;
            }
#endif
        for (std::size_t p = 0; p < k; ++p)
            for (std::size_t j = 0; j < nc; ++j) panel[p * nr + j] = src[j][p];
        if (nc < nr)  // the last panel's missing columns multiply to zeros that are never stored
            for (std::size_t p = 0; p < k; ++p) std::fill(panel + p * nr + nc, panel + (p + 1) * nr, T(0));
    }
}

}  // namespace loom::detail
