// attend_one_query: one query over every head at once (core/attention_product.hpp).
#include "core/attention_product.hpp"

#include <cstdint>
#include <cstring>
#include <experimental/simd>
#include <type_traits>

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

// Lanes of bfloat16 elements, each widened to float as it is loaded.
template <class Lanes>
Lanes load(const std::uint16_t* at) {
    std::uint16_t bits[Lanes::size()];
    std::memcpy(bits, at, sizeof bits);
    alignas(64) float wide[Lanes::size()];
    for (std::size_t i = 0; i < Lanes::size(); ++i) wide[i] = widen_bf16(bits[i]);
    return Lanes(wide, stdx::vector_aligned);
}

// Rows this far ahead are fetched into cache while this one is read: a generator's cache rows lie
// wherever its pages put them (a stream's keys one row of each stream apart), where the hardware's
// prefetchers, which follow addresses a step apart within a page, do not look.
constexpr std::size_t kRowsAhead = 8;

// Blocks of 16 lanes the weighted values are summed in at once: with 32 vector registers (AVX-512)
// a whole row of 4 heads of 64, so the values are read in one pass over the keys; with 16 (AVX2,
// where a block takes two) 4 blocks, more of which would spill.
#if defined(__AVX512F__)
constexpr std::size_t kBlocks = 16;
#else
constexpr std::size_t kBlocks = 4;
#endif
// What is left of a row then goes 4 blocks at a time, then one.

// Asks for the cache lines of `bytes` bytes from `at` (a hint: no fault, no wait).
inline void fetch(const void* at, std::size_t bytes) {
    const char* c = static_cast<const char*>(at);
    for (std::size_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b);
}

}  // namespace

template <class T, class S>
void attend_one_query(std::size_t heads, std::size_t dk, std::size_t dv, T scale, const T* q,
                      const RowView<const S>& keys, const RowView<const S>& values, T* p, T* o) {
    using Lanes = stdx::fixed_size_simd<T, 16>;
    constexpr std::size_t lanes = Lanes::size();
    const std::size_t lk = keys.size();
    for (std::size_t j = 0; j < lk; ++j) {
        const S* key = keys[j];
        if (j + kRowsAhead < lk) fetch(keys[j + kRowsAhead], heads * dk * sizeof(S));
        for (std::size_t head = 0; head < heads; ++head) {
            const T* qh = q + head * dk;
            const S* kh = key + head * dk;
            T dot;
            if (dk % lanes == 0) {
                Lanes sum = load<Lanes>(qh) * load<Lanes>(kh);
                for (std::size_t c = lanes; c < dk; c += lanes) sum += load<Lanes>(qh + c) * load<Lanes>(kh + c);
                dot = stdx::reduce(sum);
            } else {
                dot = 0;
                if constexpr (std::is_same_v<S, T>)
                    dot = fast::dot(qh, kh, dk);
                else
                    for (std::size_t c = 0; c < dk; ++c) dot += qh[c] * widen(kh + c);
            }
            p[head * lk + j] = scale * dot;
        }
    }
    softmax_rows(p, heads, lk, [&](std::size_t) { return lk; });  // a row of scores per head
    const std::size_t width = heads * dv;
    std::size_t e = 0;
    // Elements [at, at + B * lanes), each block of lanes within one head.
    auto blocks = [&]<std::size_t B>(std::size_t at) {
        Lanes sum[B] = {};
        const T* w[B];
        for (std::size_t b = 0; b < B; ++b) w[b] = p + (at + b * lanes) / dv * lk;
        for (std::size_t j = 0; j < lk; ++j) {
            const S* v = values[j] + at;
            if (j + kRowsAhead < lk) fetch(values[j + kRowsAhead] + at, B * lanes * sizeof(S));
            for (std::size_t b = 0; b < B; ++b) sum[b] += w[b][j] * load<Lanes>(v + b * lanes);
        }
        for (std::size_t b = 0; b < B; ++b) sum[b].copy_to(o + at + b * lanes, stdx::element_aligned);
    };
    if (dv % lanes == 0) {
        for (; e + kBlocks * lanes <= width; e += kBlocks * lanes) blocks.template operator()<kBlocks>(e);
        for (; e + 4 * lanes <= width; e += 4 * lanes) blocks.template operator()<4>(e);
        for (; e < width; e += lanes) blocks.template operator()<1>(e);
    }
    for (; e < width; ++e) {
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
