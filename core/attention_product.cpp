// attend_one_query: one query over every head at once (core/attention_product.hpp).
#include "core/attention_product.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <experimental/simd>
#include <type_traits>
#include <utility>

#include "core/quantized_gemm.hpp"

namespace loom::attention_detail {

namespace {

namespace stdx = std::experimental;

template <class Lanes, class T>
Lanes load(const T* at) {
    return Lanes(at, stdx::element_aligned);
}

// Rows kept in bfloat16 may lie in another type's storage (a float table holding two such rows to
// one of its own: core/page_lists.hpp), so their bits are read by memcpy, never as std::uint16_t
// objects; the compilers make that a plain load.

// The element at `at`: the bfloat16 one widened to the float it is, or T's as it is.
inline float widen(const std::uint16_t* at) {
    std::uint16_t bits;
    std::memcpy(&bits, at, sizeof bits);
    return widen_bf16(bits);
}
template <class T>
T widen(const T* at) {
    return *at;
}

// Lanes of bfloat16 elements, each widened to float as it is loaded: the 16 bits moved to the top
// of a 32-bit lane are the float (bfloat16 is float's upper half).
template <class Lanes>
[[gnu::always_inline]] inline Lanes load(const std::uint16_t* at) {
    using Wide = stdx::fixed_size_simd<std::uint32_t, Lanes::size()>;
    std::uint16_t bits[Lanes::size()];
    std::memcpy(bits, at, sizeof bits);
    const Wide wide([&](auto i) { return std::uint32_t{bits[i]} << 16; });
    return stdx::__proposed::simd_bit_cast<Lanes>(wide);
}

// Rows this far ahead are fetched into cache while this one is read, where they do not follow the
// row before them: a generator's cache rows lie in runs (pages), one after another within a run,
// where the hardware's prefetchers find them (fetching every row by hand measured slower), and
// wherever the page lists put the runs, where they do not look.
constexpr std::size_t kRowsAhead = 8;

// Vectors of 16 lanes the weighted values are summed in at once, in registers: with 32 of them
// (AVX-512) 16, four heads of 64; with 16 (AVX2, where a vector takes two) 4.
#if defined(__AVX512F__)
constexpr std::size_t kSums = 16;
#else
constexpr std::size_t kSums = 4;
#endif

// Asks for the cache lines of `bytes` bytes from row j + kRowsAhead (its elements from `at`) when
// it does not follow row j + kRowsAhead - 1 (a hint: no fault, no wait).
template <class S>
void fetch_ahead(const RowView<const S>& rows, std::size_t j, std::size_t at, std::size_t bytes) {
    const std::size_t ahead = j + kRowsAhead;
    if (ahead >= rows.size() || rows[ahead] == rows[ahead - 1] + rows.stride) return;
    const char* c = reinterpret_cast<const char*>(rows[ahead] + at);
    for (std::size_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b);
}

// o's heads [h0, h0 + G) (dv = C vectors each): the weighted sum of the values' rows, p's row of
// each head giving the weights; G * C sums in registers over one pass of the rows.
template <std::size_t G, std::size_t C, class Lanes, class T, class S>
[[gnu::noinline]] void weighted_values(std::size_t h0, std::size_t lk, const T* p, const RowView<const S>& values,
                                       T* o) {
    constexpr std::size_t lanes = Lanes::size(), dv = C * lanes;
    Lanes sum[G][C] = {};
    for (std::size_t j = 0; j < lk; ++j) {
        const S* v = values[j] + h0 * dv;
        fetch_ahead(values, j, h0 * dv, G * dv * sizeof(S));
#pragma GCC unroll 16
        for (std::size_t g = 0; g < G; ++g) {
            const Lanes w(p[(h0 + g) * lk + j]);
#pragma GCC unroll 16
            for (std::size_t c = 0; c < C; ++c) sum[g][c] += w * load<Lanes>(v + g * dv + c * lanes);
        }
    }
    for (std::size_t g = 0; g < G; ++g)
        for (std::size_t c = 0; c < C; ++c) sum[g][c].copy_to(o + (h0 + g) * dv + c * lanes, stdx::element_aligned);
}

// Each head's scaled dot products of q with the keys' rows into p [heads, lk], dk = C vectors a
// head: 16 lanes of products summed in k order, then reduced in a tree.
template <std::size_t C, class Lanes, class T, class S>
[[gnu::noinline]] void key_scores(std::size_t heads, std::size_t lk, T scale, const T* q, const RowView<const S>& keys,
                                  T* p) {
    constexpr std::size_t lanes = Lanes::size(), dk = C * lanes;
    for (std::size_t j = 0; j < lk; ++j) {
        const S* key = keys[j];
        fetch_ahead(keys, j, 0, heads * dk * sizeof(S));
        for (std::size_t head = 0; head < heads; ++head) {
            const T* qh = q + head * dk;
            const S* kh = key + head * dk;
            Lanes sum = load<Lanes>(qh) * load<Lanes>(kh);
#pragma GCC unroll 16
            for (std::size_t c = 1; c < C; ++c) sum += load<Lanes>(qh + c * lanes) * load<Lanes>(kh + c * lanes);
            p[head * lk + j] = scale * stdx::reduce(sum);
        }
    }
}

// Every head's weighted values, C vectors a head: as many heads at a time as kSums holds, then the
// rest by ones.
template <std::size_t C, class Lanes, class T, class S>
void all_weighted_values(std::size_t heads, std::size_t lk, const T* p, const RowView<const S>& values, T* o) {
    constexpr std::size_t group = kSums / C > 0 ? kSums / C : 1;
    std::size_t h = 0;
    for (; h + group <= heads; h += group) weighted_values<group, C, Lanes>(h, lk, p, values, o);
    for (; h < heads; ++h) weighted_values<1, C, Lanes>(h, lk, p, values, o);
}

// The key and value kernels for heads of 1 to sizeof...(C) vectors, [vectors - 1].
template <class Lanes, class T, class S, std::size_t... C>
constexpr auto sized_kernels(std::index_sequence<C...>) {
    using Keys = void (*)(std::size_t, std::size_t, T, const T*, const RowView<const S>&, T*);
    using Values = void (*)(std::size_t, std::size_t, const T*, const RowView<const S>&, T*);
    return std::pair{std::array<Keys, sizeof...(C)>{&key_scores<C + 1, Lanes, T, S>...},
                     std::array<Values, sizeof...(C)>{&all_weighted_values<C + 1, Lanes, T, S>...}};
}

}  // namespace

template <class T, class S>
void attend_one_query(std::size_t heads, std::size_t dk, std::size_t dv, T scale, const T* q,
                      const RowView<const S>& keys, const RowView<const S>& values, T* p, T* o) {
    using Lanes = stdx::fixed_size_simd<T, 16>;
    constexpr std::size_t lanes = Lanes::size();
    const std::size_t lk = keys.size();
    // Heads of 16 to 128 elements, a multiple of 16, go through the kernels above, sized when
    // compiled; others through plain loops.
    auto vectors = [&](std::size_t size) { return size % lanes == 0 ? size / lanes : 0; };
    constexpr auto by_head_keys = sized_kernels<Lanes, T, S>(std::make_index_sequence<8>{}).first;
    constexpr auto by_head_values = sized_kernels<Lanes, T, S>(std::make_index_sequence<8>{}).second;
    if (const std::size_t n = vectors(dk); n >= 1 && n <= by_head_keys.size())
        by_head_keys[n - 1](heads, lk, scale, q, keys, p);
    else
        for (std::size_t j = 0; j < lk; ++j)
            for (std::size_t head = 0; head < heads; ++head) {
                const T* qh = q + head * dk;
                const S* kh = keys[j] + head * dk;
                T dot = 0;
                if constexpr (std::is_same_v<S, T>)
                    dot = fast::dot(qh, kh, dk);
                else
                    for (std::size_t c = 0; c < dk; ++c) dot += qh[c] * widen(kh + c);
                p[head * lk + j] = scale * dot;
            }
    softmax_rows(p, heads, lk, [&](std::size_t) { return lk; });  // a row of scores per head
    if (const std::size_t n = vectors(dv); n >= 1 && n <= by_head_values.size())
        return by_head_values[n - 1](heads, lk, p, values, o);
    for (std::size_t e = 0; e < heads * dv; ++e) {
        const T* w = p + e / dv * lk;
        T sum = 0;
        for (std::size_t j = 0; j < lk; ++j) sum += w[j] * widen(values[j] + e);
        o[e] = sum;
    }
}

template void attend_one_query<float, float>(std::size_t, std::size_t, std::size_t, float, const float*,
                                             const RowView<const float>&, const RowView<const float>&, float*, float*);
template void attend_one_query<double, double>(std::size_t, std::size_t, std::size_t, double, const double*,
                                               const RowView<const double>&, const RowView<const double>&, double*,
                                               double*);
template void attend_one_query<float, std::uint16_t>(std::size_t, std::size_t, std::size_t, float, const float*,
                                                     const RowView<const std::uint16_t>&,
                                                     const RowView<const std::uint16_t>&, float*, float*);

}  // namespace loom::attention_detail
