// attend_one_query: one query over every head at once (core/attention_product.hpp).
#include "core/attention_product.hpp"

#include <experimental/simd>

namespace loom::attention_detail {

namespace {

namespace stdx = std::experimental;

template <class Lanes, class T>
Lanes load(const T* at) {
    return Lanes(at, stdx::element_aligned);
}

}  // namespace

template <class T>
void attend_one_query(std::size_t heads, std::size_t dk, std::size_t dv, T scale, const T* q,
                      const RowView<const T>& keys, const RowView<const T>& values, T* p, T* o) {
    using Lanes = stdx::fixed_size_simd<T, 16>;
    constexpr std::size_t lanes = Lanes::size();
    const std::size_t lk = keys.size();
    for (std::size_t j = 0; j < lk; ++j) {
        const T* key = keys[j];
        for (std::size_t head = 0; head < heads; ++head) {
            const T *qh = q + head * dk, *kh = key + head * dk;
            T dot;
            if (dk % lanes == 0) {
                Lanes sum = load<Lanes>(qh) * load<Lanes>(kh);
                for (std::size_t c = lanes; c < dk; c += lanes) sum += load<Lanes>(qh + c) * load<Lanes>(kh + c);
                dot = stdx::reduce(sum);
            } else {
                dot = fast::dot(qh, kh, dk);
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
            const T* v = values[j] + at;
            for (std::size_t b = 0; b < B; ++b) sum[b] += w[b][j] * load<Lanes>(v + b * lanes);
        }
        for (std::size_t b = 0; b < B; ++b) sum[b].copy_to(o + at + b * lanes, stdx::element_aligned);
    };
    if (dv % lanes == 0) {
        for (; e + 4 * lanes <= width; e += 4 * lanes) blocks.template operator()<4>(e);
        for (; e < width; e += lanes) blocks.template operator()<1>(e);
    }
    for (; e < width; ++e) {
        const T* w = p + e / dv * lk;
        T sum = 0;
        for (std::size_t j = 0; j < lk; ++j) sum += w[j] * values[j][e];
        o[e] = sum;
    }
}

template void attend_one_query<float>(std::size_t, std::size_t, std::size_t, float, const float*,
                                      const RowView<const float>&, const RowView<const float>&, float*, float*);
template void attend_one_query<double>(std::size_t, std::size_t, std::size_t, double, const double*,
                                       const RowView<const double>&, const RowView<const double>&, double*, double*);

}  // namespace loom::attention_detail
