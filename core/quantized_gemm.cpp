#include "core/quantized_gemm.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/errors.hpp"
#include "core/gemm.hpp"
#include "core/isa_kernels.hpp"
#include "core/packed_gemm.hpp"
#include "core/parallel.hpp"

namespace loom {

const char* weight_precision_name(WeightPrecision precision) {
    switch (precision) {
        case WeightPrecision::float32:
            return "float";
        case WeightPrecision::bfloat16:
            return "bfloat16";
        case WeightPrecision::int8:
            return "int8";
    }
    return "unknown";
}

WeightPrecision parse_weight_precision(std::string_view name) {
    if (name == "float" || name == "float32") return WeightPrecision::float32;
    if (name == "bfloat16") return WeightPrecision::bfloat16;
    if (name == "int8") return WeightPrecision::int8;
    throw UserError("weight precision '" + std::string(name) + "': expected float, bfloat16 or int8");
}

const char* cache_precision_name(CachePrecision precision) {
    return precision == CachePrecision::bfloat16 ? "bfloat16" : "float";
}

CachePrecision parse_cache_precision(std::string_view name) {
    if (name == "float" || name == "float32") return CachePrecision::float32;
    if (name == "bfloat16") return CachePrecision::bfloat16;
    throw UserError("cache precision '" + std::string(name) + "': expected float or bfloat16");
}

namespace {
// The bfloat16 bits of the float whose bits are b: to nearest, ties to even; a NaN stays a NaN
// (quiet). Without branches, so that a loop over many runs in vector lanes.
std::uint16_t rounded_bits(std::uint32_t b) {
    const std::uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    const std::uint32_t quiet = (b >> 16) | 0x40u;
    return static_cast<std::uint16_t>((b & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}
}  // namespace

std::uint16_t bfloat16_bits(float x) { return rounded_bits(std::bit_cast<std::uint32_t>(x)); }

float round_to_bfloat16(float x) { return widen_bf16(bfloat16_bits(x)); }

void bfloat16_bits(const float* x, std::size_t n, void* out) {
    // A block of elements at a time into a buffer copied out as bytes.
    constexpr std::size_t block = 64;
    std::uint16_t bits[block];
    for (std::size_t at = 0; at < n; at += block) {
        const std::size_t count = std::min(block, n - at);
        for (std::size_t e = 0; e < count; ++e) bits[e] = rounded_bits(std::bit_cast<std::uint32_t>(x[at + e]));
        std::memcpy(static_cast<char*>(out) + at * sizeof(std::uint16_t), bits, count * sizeof(std::uint16_t));
    }
}

namespace {

constexpr std::size_t nr = 16;  // columns per panel, as pack_right's for float

std::size_t padded_columns(std::size_t n) { return (n + nr - 1) / nr * nr; }

// Where element (p, j) of a panel lies, and how many rows a panel of k holds: int8 as pack_right
// lays float (rows of 16), bfloat16 in pairs of rows (a 32-bit word holds rows 2q and 2q + 1 of a
// column, the even one first; k rounded up to even).
std::size_t depth(WeightPrecision precision, std::size_t k) {
    return precision == WeightPrecision::bfloat16 ? k + (k & 1) : k;
}
std::size_t element_at(WeightPrecision precision, std::size_t p, std::size_t j) {
    return precision == WeightPrecision::bfloat16 ? p / 2 * 2 * nr + j * 2 + p % 2 : p * nr + j;
}

// Pairs of rows of B in bfloat16's layout into `out`: panels of 16 columns (`columns`, a multiple of
// 16), rows 2q and 2q + 1 of a column side by side, each pair of rows of a panel rounded in vector
// lanes. value(p, j): element (p, j) of B, 0 past its k rows and its real columns.
template <class Value>
void pack_pairs(std::size_t k, std::size_t columns, Value value, std::uint16_t* out) {
    const std::size_t rows = depth(WeightPrecision::bfloat16, k);
    float pair[2 * nr];
    for (std::size_t col = 0; col < columns; col += nr)
        for (std::size_t p = 0; p < k; p += 2) {
            for (std::size_t j = 0; j < nr; ++j)
                pair[2 * j] = value(p, col + j), pair[2 * j + 1] = value(p + 1, col + j);
            bfloat16_bits(pair, 2 * nr, out + col * rows + p / 2 * 2 * nr);
        }
}

// The portable loop over the same layouts: each column's sum in k order, in float.
template <class E, class Widen>
void rows_portable(WeightPrecision precision, std::size_t m, std::size_t n, std::size_t k, const float* const* a,
                   const E* packed, const float* scales, float* const* c, const float* const* d, float alpha,
                   float beta, Widen widen) {
    for (std::size_t col = 0; col < n; col += nr) {
        const E* panel = packed + col * depth(precision, k);
        const std::size_t nc = std::min(nr, n - col);
        for (std::size_t r = 0; r < m; ++r) {
            float s[nr] = {};
            for (std::size_t p = 0; p < k; ++p)
                for (std::size_t j = 0; j < nr; ++j) s[j] += a[r][p] * widen(panel[element_at(precision, p, j)]);
            for (std::size_t j = 0; j < nc; ++j) {
                const float v = alpha * (scales ? s[j] * scales[col + j] : s[j]);
                c[r][col + j] = beta == 0.0f ? v : v + beta * d[r][col + j];
            }
        }
    }
}

// Columns [j0, j1) of the product (j0 a multiple of the panel width) through the kernels of `isa`;
// `pairs`: the rows' pairs, rounded (bfloat16 through vdpbf16ps), else null.
void rows(Isa isa, std::size_t m, std::size_t k, const float* const* a, const unsigned* pairs, const QuantizedWeight& w,
          float* const* c, const float* const* d, float alpha, float beta, std::size_t j0, std::size_t j1) {
    const std::size_t n = j1 - j0;
    if (w.precision == WeightPrecision::bfloat16) {
        const std::uint16_t* packed = w.bf16.data() + j0 * depth(w.precision, k);
#if defined(__x86_64__)
        if (pairs)
            return kernels::rows_pairs_bf16_avx512(m, n, k, pairs, reinterpret_cast<const unsigned*>(packed), c, d,
                                                   alpha, beta);
        const auto* e = reinterpret_cast<const unsigned short*>(packed);
        if (isa == Isa::avx512) return kernels::rows_bf16_weights_avx512(m, n, k, a, e, c, d, alpha, beta);
        if (isa == Isa::avx2) return kernels::rows_bf16_weights_avx2(m, n, k, a, e, c, d, alpha, beta);
#endif
        return rows_portable(w.precision, m, n, k, a, packed, nullptr, c, d, alpha, beta, widen_bf16);
    }
    const std::int8_t* packed = w.int8.data() + j0 * k;
    const float* scales = w.scales.data() + j0;
#if defined(__x86_64__)
    const auto* e = reinterpret_cast<const signed char*>(packed);
    if (pairs && !w.widened.empty()) {
        const std::uint16_t* widened = w.widened.data() + j0 * depth(WeightPrecision::bfloat16, k);
        return kernels::rows_pairs_widened_int8_avx512(m, n, k, pairs, reinterpret_cast<const unsigned*>(widened),
                                                       scales, c, d, alpha, beta);
    }
    if (pairs) return kernels::rows_pairs_int8_avx512(m, n, k, pairs, e, scales, c, d, alpha, beta);
    if (isa == Isa::avx512) return kernels::rows_int8_weights_avx512(m, n, k, a, e, scales, c, d, alpha, beta);
    if (isa == Isa::avx2) return kernels::rows_int8_weights_avx2(m, n, k, a, e, scales, c, d, alpha, beta);
#endif
    rows_portable(w.precision, m, n, k, a, packed, scales, c, d, alpha, beta, [](std::int8_t q) { return float(q); });
}

}  // namespace

void quantize_right(WeightPrecision precision, bool transposed, std::size_t k, std::size_t n, const float* b,
                    std::size_t ldb, QuantizedWeight& out) {
    if (precision == WeightPrecision::float32)
        throw UserError("quantize_right: float32 weights are packed by pack_right, not quantized");
    out.precision = precision;
    out.k = k;
    out.n = n;
    out.bf16.clear();
    out.int8.clear();
    out.scales.clear();
    out.widened.clear();
    // Narrowed from the weight where it lies, not from a float copy packed first: that copy (43 MB
    // for the wide GPT, allocated and zeroed at every call) was a third of a generating call's start.
    // Element (p, j) of op(W), 0 past its k rows and n columns (an odd k's last pair, the padding):
    const auto at = [&](std::size_t p, std::size_t j) {
        return p >= k || j >= n ? 0.0f : transposed ? b[j * ldb + p] : b[p * ldb + j];
    };
    if (precision == WeightPrecision::bfloat16) {
        out.bf16.resize(padded_columns(n) * depth(precision, k));
        pack_pairs(k, padded_columns(n), at, out.bf16.data());
        return;
    }
    // int8: each column's largest magnitude; a column holding NaN or an infinity (a magnitude not
    // <= the largest float) gets the scale NaN, so that its sums are NaN, as float's would be,
    // instead of a number the rounding made up, and its weights 0. Read along b's rows, so that the
    // loops over a row run in vector lanes.
    out.int8.resize(padded_columns(n) * k);
    out.scales.assign(padded_columns(n), 0.0f);
    std::vector<float> largest(n, 0.0f);
    std::vector<int> bad(n, 0);
    const auto note = [&](std::size_t j, float w) {
        const float a = std::fabs(w);
        bad[j] |= !(a <= std::numeric_limits<float>::max());
        largest[j] = a > largest[j] ? a : largest[j];
    };
    for (std::size_t r = 0; r < (transposed ? n : k); ++r)
        for (std::size_t e = 0; e < (transposed ? k : n); ++e) note(transposed ? r : e, b[r * ldb + e]);
    float* scale = out.scales.data();
    for (std::size_t j = 0; j < n; ++j)
        scale[j] = bad[j] ? std::numeric_limits<float>::quiet_NaN() : largest[j] / 127.0f;
    // A NaN scale fails scale > 0 too.
    const auto narrow = [](float w, float s) {
        const float v = s > 0 ? std::nearbyint(w / s) : 0.0f;
        return static_cast<std::int8_t>(v < -127.0f ? -127.0f : (v > 127.0f ? 127.0f : v));
    };
    if (transposed) {
        for (std::size_t j = 0; j < n; ++j)
            for (std::size_t p = 0; p < k; ++p)
                out.int8[j / nr * nr * k + p * nr + j % nr] = narrow(at(p, j), scale[j]);
        return;
    }
    std::vector<std::int8_t> line(n);  // row p of op(W), narrowed, then cut into the panels' rows
    for (std::size_t p = 0; p < k; ++p) {
        const float* row = b + p * ldb;
        for (std::size_t j = 0; j < n; ++j) line[j] = narrow(row[j], scale[j]);
        for (std::size_t col = 0; col < n; col += nr)
            std::copy_n(line.data() + col, std::min(nr, n - col), out.int8.data() + col * k + p * nr);
    }
}

std::size_t QuantizedWeight::bytes() const {
    const std::size_t values =
        bf16_kernels_chosen() && !widened.empty() ? widened.size() * sizeof(std::uint16_t) : int8.size();
    return bf16.size() * sizeof(std::uint16_t) + values + scales.size() * sizeof(float);
}

void widen_int8(QuantizedWeight& w) {
    if (w.precision != WeightPrecision::int8)
        throw UserError(std::string("widen_int8: the weight is kept in ") + weight_precision_name(w.precision) +
                        ", not int8");
    // The int8 values as bfloat16 packs them (the padding columns' zeros too).
    const std::size_t k = w.k, columns = w.scales.size();
    w.widened.resize(columns * depth(WeightPrecision::bfloat16, k));
    const auto value = [&](std::size_t p, std::size_t j) {
        return p < k ? float(w.int8[j / nr * nr * k + p * nr + j % nr]) : 0.0f;
    };
    pack_pairs(k, columns, value, w.widened.data());
}

bool widen_int8_pays(std::size_t elements) {
    return elements * sizeof(std::uint16_t) <= kWidenedInt8Bytes && bf16_kernels_chosen();
}

void gemm_rows_quantized(Isa isa, std::size_t m, std::size_t n, std::size_t k, const float* const* a_rows,
                         const QuantizedWeight& w, float* const* c_rows, float alpha, float beta,
                         const float* const* d_rows) {
    if (w.k != k || w.n != n || w.precision == WeightPrecision::float32)
        throw UserError("gemm_rows_quantized: a [" + std::to_string(k) + ", " + std::to_string(n) +
                        "] product given a weight kept as [" + std::to_string(w.k) + ", " + std::to_string(w.n) +
                        "] in " + weight_precision_name(w.precision));
    if (m == 0 || n == 0) return;
    if (!d_rows) d_rows = c_rows;
    if (k == 0) {
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) c_rows[i][j] = beta == 0.0f ? 0.0f : beta * d_rows[i][j];
        return;
    }
    // bfloat16 rounds the rows too (both operands, as MatmulPrecision::medium): into this thread's
    // copy, which the column parts below read; as pairs where vdpbf16ps multiplies them, which it
    // does for int8 weights too (each pair of weights widened on the way: the rows rounded so).
    thread_local std::vector<float> rounded;
    thread_local std::vector<const float*> rounded_rows;
    thread_local std::vector<unsigned> pairs;
    const bool pair_kernels = isa == Isa::avx512 && bf16_kernels_chosen();
#if defined(__x86_64__)
    if (pair_kernels) {
        const std::size_t kp = (k + 1) / 2;
        pairs.resize(m * kp);
        for (std::size_t i = 0; i < m; ++i) kernels::pack_row_pairs_bf16_avx512(k, a_rows[i], pairs.data() + i * kp);
    }
#endif
    if (w.precision == WeightPrecision::bfloat16 && !pair_kernels) {
        rounded.resize(m * k);
        rounded_rows.resize(m);
        for (std::size_t i = 0; i < m; ++i) {
            std::transform(a_rows[i], a_rows[i] + k, rounded.data() + i * k, round_to_bfloat16);
            rounded_rows[i] = rounded.data() + i * k;
        }
        a_rows = rounded_rows.data();
    }
    const unsigned* row_pairs = pair_kernels ? pairs.data() : nullptr;
    // Split by columns at pairs of panels among idle inter-op threads, as gemm_rows splits: each
    // thread reads its own panels, and every element is computed as the whole product computes it.
    constexpr std::size_t min_work = std::size_t{1} << 18;
    const bool split = share_range(n, 2 * nr, m * k, min_work, [&](std::size_t j0, std::size_t j1) {
        thread_local std::vector<float*> c_part;
        thread_local std::vector<const float*> d_part;
        c_part.resize(m);
        d_part.resize(m);
        for (std::size_t i = 0; i < m; ++i) c_part[i] = c_rows[i] + j0, d_part[i] = d_rows[i] + j0;
        rows(isa, m, k, a_rows, row_pairs, w, c_part.data(), d_part.data(), alpha, beta, j0, j1);
    });
    if (!split) rows(isa, m, k, a_rows, row_pairs, w, c_rows, d_rows, alpha, beta, 0, n);
}

void gemm_rows_quantized(std::size_t m, std::size_t n, std::size_t k, const float* const* a_rows,
                         const QuantizedWeight& w, float* const* c_rows, float alpha, float beta,
                         const float* const* d_rows) {
    GemmTimer timer;
    gemm_rows_quantized(active_isa(), m, n, k, a_rows, w, c_rows, alpha, beta, d_rows);
}

}  // namespace loom
