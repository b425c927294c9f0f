#pragma once
// The math of attention for one item, on rows read where they lie (the ops in graph/ops/attention.cpp
// over sequences and graph/ops/attention_memory.cpp over a memory decode their inputs into these):
//   S = Q K^T / sqrt(dk)  [Tq, Tk],   P = softmax over each row's visible keys,   O = P V  [Tq, dv],
// with backward recomputing S and P in workspace of 2 * Tq * Tk, then
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)) / sqrt(dk),  dQ += dS K,  dK += dS^T Q.
// Dropout on the weights (over sequences, in training mode) multiplies P by a mask M of 0 and
// 1 / (1 - rate) before the product with V: O = (P * M) V, so dV += (P * M)^T dO and dP = (dO V^T) * M.
// M is decided by a stream seeded from the evaluation's seed and the item and head, so backward draws
// the same M again instead of keeping it.
// Two ways to compute it, the op choosing: a GEMM per head over rows at a stride (HeadProduct), or,
// for one query, every head at once over rows lying anywhere (attend_one_query: dot products and
// row updates, where a GEMM per head would spend most of its time setting up one row). Internal to
// the library.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/fast_math.hpp"
#include "core/gemm.hpp"
#include "core/random.hpp"
#include "core/row_view.hpp"

namespace loom::attention_detail {

// Softmax of each row of s ([rows, cols], row stride cols) over its first visible(i) columns; the
// columns after them get 0. A row with no visible column is all 0.
template <class T, class Visible>
void softmax_rows(T* s, std::size_t rows, std::size_t cols, Visible visible) {
    for (std::size_t i = 0; i < rows; ++i) {
        T* row = s + i * cols;
        const std::size_t n = visible(i);
        T top = -std::numeric_limits<T>::infinity();
        for (std::size_t j = 0; j < n; ++j) top = std::max(top, row[j]);
        T sum = 0;
        for (std::size_t j = 0; j < n; ++j) sum += row[j] = fast::exp(row[j] - top);
        const T inv = n ? T(1) / sum : T(0);
        for (std::size_t j = 0; j < n; ++j) row[j] *= inv;
        std::fill(row + n, row + cols, T(0));
    }
}

// dS = P * (dP - rowsum(P * dP)) * scale, in place of dP.
template <class T>
void softmax_backward_rows(const T* p, T* dp, std::size_t rows, std::size_t cols, T scale) {
    for (std::size_t i = 0; i < rows; ++i) {
        const T* pr = p + i * cols;
        T* g = dp + i * cols;
        T dot = 0;
        for (std::size_t j = 0; j < cols; ++j) dot += pr[j] * g[j];
        for (std::size_t j = 0; j < cols; ++j) g[j] = pr[j] * (g[j] - dot) * scale;
    }
}

// One item's and head's operands: a matrix of `rows` rows of which row i starts at data + i * stride.
// A gradient's rows are added into, or written where `assign` is set (OpCall::assign_grad).
template <class T>
struct Rows {
    T* data;
    std::size_t stride;
    bool assign = false;
    T beta() const { return assign ? T(0) : T(1); }
};

// Dropout on one item's and head's weights: which of its lq x lk weights (row-major) are dropped,
// decided by a stream of its own (for_each_dropout), so that backward drops the same ones.
struct WeightDrops {
    std::uint64_t threshold = 0;  // dropout_threshold(rate); 0: nothing is dropped
    std::uint64_t seed = 0;
    double keep = 1;  // the kept weights' scale, 1 / (1 - rate)
    explicit operator bool() const { return threshold != 0; }
    // The drops of item-and-head number `block`: the seed mixed with it by splitmix64's finalizer
    // (adding the block to the seed would give neighbouring blocks overlapping streams).
    WeightDrops of_block(std::uint64_t block) const {
        std::uint64_t z = block + 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return {threshold, seed ^ z ^ (z >> 31), keep};
    }
    template <class T>
    void apply(T* x, std::size_t count) const {
        const T scale = static_cast<T>(keep);
        for_each_dropout(seed, count, threshold, [&](std::size_t i, bool kept) { x[i] = kept ? x[i] * scale : T(0); });
    }
};

// What one item's and head's forward and backward compute, given its rows (see the file comment).
template <class T>
struct HeadProduct {
    std::size_t lq, lk, dk, dv;
    bool causal;
    T scale;

    // P = softmax(Q K^T * scale) into p [lq, lk].
    void weights(Rows<const T> q, Rows<const T> k, T* p) const {
        gemm(false, true, lq, lk, dk, scale, q.data, q.stride, k.data, k.stride, T(0), p, lk);
        softmax_rows(p, lq, lk, [&](std::size_t i) { return causal ? std::min(lk, i + 1) : lk; });
    }
    // Given dP in ds (overwritten with dS), adds dS K into dq and dS^T Q into dkey where they have data.
    void weights_backward(Rows<const T> q, Rows<const T> k, const T* p, T* ds, Rows<T> dq, Rows<T> dkey) const {
        softmax_backward_rows(p, ds, lq, lk, scale);
        if (dq.data) gemm(false, false, lq, dk, lk, T(1), ds, lk, k.data, k.stride, dq.beta(), dq.data, dq.stride);
        if (dkey.data)
            gemm(true, false, lk, dk, lq, T(1), ds, lk, q.data, q.stride, dkey.beta(), dkey.data, dkey.stride);
    }
    void forward(Rows<const T> q, Rows<const T> k, Rows<const T> v, Rows<T> o, T* p,
                 const WeightDrops& drops = {}) const {
        weights(q, k, p);
        if (drops) drops.apply(p, lq * lk);
        gemm(false, false, lq, dv, lk, T(1), p, lk, v.data, v.stride, T(0), o.data, o.stride);
    }
    // Adds into (or writes) whichever of dq, dk, dv has data; work holds 2 * lq * lk.
    void backward(Rows<const T> q, Rows<const T> k, Rows<const T> v, Rows<const T> dout, Rows<T> dq, Rows<T> dkey,
                  Rows<T> dval, T* work, const WeightDrops& drops = {}) const {
        T* p = work;
        T* ds = work + lq * lk;
        weights(q, k, p);
        if (dval.data) {
            const T* applied = p;  // the weights the values were multiplied by: P, or P * M in ds for now
            if (drops) {
                std::copy_n(p, lq * lk, ds);
                drops.apply(ds, lq * lk);
                applied = ds;
            }
            gemm(true, false, lk, dv, lq, T(1), applied, lk, dout.data, dout.stride, dval.beta(), dval.data,
                 dval.stride);
        }
        if (!dq.data && !dkey.data) return;
        gemm(false, true, lq, lk, dv, T(1), dout.data, dout.stride, v.data, v.stride, T(0), ds, lk);
        if (drops) drops.apply(ds, lq * lk);
        weights_backward(q, k, p, ds, dq, dkey);
    }
};

// One query row q [heads * dk] over the keys [Tk][heads * dk] and values [Tk][heads * dv] the views
// name, every head at once: o [heads * dv] gets, for each head, softmax(q_h K_h^T * scale) V_h.
// p: scratch of heads * Tk. Where a head's size is a multiple of 16, a score is 16 lanes of products
// reduced in a tree (a running sum would be a serial chain), and the weighted values are summed in
// registers, 64 elements at a time over all the keys.
template <class T>
void attend_one_query(std::size_t heads, std::size_t dk, std::size_t dv, T scale, const T* q,
                      const RowView<const T>& keys, const RowView<const T>& values, T* p, T* o);

}  // namespace loom::attention_detail
