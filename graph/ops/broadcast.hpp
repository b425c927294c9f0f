#pragma once
// Broadcasting iteration shared by the element-wise ops (internal header).
// Operands are aligned to the output in two groups: dynamic dims ([T, N] / [N] / none) are
// left-padded to the output's, sample dims right-aligned numpy-style. A missing or size-1 dim gets
// stride 0, so one pass over the output both computes the forward and, in backward, accumulates
// (sums out) the broadcast dims of each operand's gradient: no temporary, no separate reduction.
#include <array>
#include <cstddef>

#include "graph/op.hpp"

namespace loom::detail {

template <std::size_t K>
struct BroadcastPlan {
    Dims out;
    std::array<std::array<std::size_t, max_rank>, K> strides{};
    std::array<std::size_t, K> flat_step{};  // 1 or 0 when the operand is the output's size or a scalar
    bool flat = true;                        // every operand is out-sized or a scalar
};

template <class T>
std::array<std::size_t, max_rank> aligned_strides(const View<T>& in, const Dims& out, std::size_t out_dyn) {
    std::array<std::size_t, max_rank> own{};
    std::size_t s = 1;
    for (std::size_t i = in.dims.rank; i-- > 0;) {
        own[i] = s;
        s *= in.dims[i];
    }
    std::array<std::size_t, max_rank> st{};
    const std::size_t out_sample = out.rank - out_dyn, in_sample = in.dims.rank - in.dyn;
    for (std::size_t j = 0; j < out.rank; ++j) {
        long k;
        if (j < out_dyn) {
            k = static_cast<long>(j) - static_cast<long>(out_dyn - in.dyn);
        } else {
            const long sj = static_cast<long>(j - out_dyn) - static_cast<long>(out_sample - in_sample);
            k = sj < 0 ? -1 : static_cast<long>(in.dyn) + sj;
        }
        st[j] = (k < 0 || in.dims[static_cast<std::size_t>(k)] == 1) ? 0 : own[static_cast<std::size_t>(k)];
    }
    return st;
}

template <class T, std::size_t K>
BroadcastPlan<K> plan_broadcast(const Dims& out, std::size_t out_dyn, const std::array<View<T>, K>& in) {
    BroadcastPlan<K> p;
    p.out = out;
    const std::size_t n = out.size();
    for (std::size_t k = 0; k < K; ++k) {
        p.strides[k] = aligned_strides(in[k], out, out_dyn);
        const std::size_t sz = in[k].size();
        if (sz == n)
            p.flat_step[k] = 1;
        else if (sz == 1)
            p.flat_step[k] = 0;
        else
            p.flat = false;
    }
    return p;
}

// Calls f(out_offset, in_offsets, n, in_steps) for each run of n output elements along the
// innermost dim; operand k's elements in the run are at in_offsets[k] + i * in_steps[k]. Adjacent
// dims that every operand walks contiguously are merged first, so runs are as long as possible.
template <std::size_t K, class F>
void for_each_run(const BroadcastPlan<K>& p, F&& f) {
    const std::size_t n = p.out.size();
    if (n == 0) return;
    if (p.flat) {
        std::array<std::size_t, K> zero{};
        f(std::size_t{0}, zero, n, p.flat_step);
        return;
    }
    // Merge dims (from the innermost out) while every operand is contiguous across the boundary.
    std::array<std::size_t, max_rank> size{};
    std::array<std::array<std::size_t, max_rank>, K> st{};
    std::size_t rank = 0;
    for (std::size_t d = 0; d < p.out.rank; ++d) {
        if (p.out[d] == 1) continue;  // size-1 dims contribute nothing
        bool merge = rank > 0;
        for (std::size_t k = 0; k < K && merge; ++k) merge = st[k][rank - 1] == p.strides[k][d] * p.out[d];
        if (merge) {
            size[rank - 1] *= p.out[d];
            for (std::size_t k = 0; k < K; ++k) st[k][rank - 1] = p.strides[k][d];
        } else {
            size[rank] = p.out[d];
            for (std::size_t k = 0; k < K; ++k) st[k][rank] = p.strides[k][d];
            ++rank;
        }
    }
    if (rank == 0) {  // a single element
        std::array<std::size_t, K> zero{}, steps{};
        f(std::size_t{0}, zero, std::size_t{1}, steps);
        return;
    }
    const std::size_t inner = size[rank - 1];
    std::array<std::size_t, K> steps{};
    for (std::size_t k = 0; k < K; ++k) steps[k] = st[k][rank - 1];
    std::array<std::size_t, max_rank> counter{};
    std::array<std::size_t, K> base{};
    for (std::size_t o = 0; o < n; o += inner) {
        f(o, base, inner, steps);
        for (std::size_t d = rank - 1; d-- > 0;) {
            if (++counter[d] < size[d]) {
                for (std::size_t k = 0; k < K; ++k) base[k] += st[k][d];
                break;
            }
            for (std::size_t k = 0; k < K; ++k) base[k] -= st[k][d] * (size[d] - 1);
            counter[d] = 0;
        }
    }
}

// Calls f(out_index, in_indices) for every output element.
template <std::size_t K, class F>
void for_each_broadcast(const BroadcastPlan<K>& p, F&& f) {
    for_each_run(p, [&](std::size_t o, const std::array<std::size_t, K>& base, std::size_t n,
                        const std::array<std::size_t, K>& steps) {
        std::array<std::size_t, K> idx;
        for (std::size_t i = 0; i < n; ++i) {
            for (std::size_t k = 0; k < K; ++k) idx[k] = base[k] + i * steps[k];
            f(o + i, idx);
        }
    });
}

// The chain rule's product for one element, with a zero upstream gradient contributing exactly
// zero even where the local derivative is infinite or NaN: padding (whose gradient the executor
// zeroes) and positions a loss does not use never turn a sum over broadcast axes into NaN
// (0 * (1/0) would). Every element-wise backward and loss multiplies through this.
template <class T>
inline T times_upstream(T upstream, T local) {
    return upstream == T(0) ? T(0) : upstream * local;
}

template <class T>
View<const T> as_const(const View<T>& v) {
    return {v.data, v.dims, v.dyn};
}

}  // namespace loom::detail
