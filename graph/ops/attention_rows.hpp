#pragma once
// What attention's two forms share (graph/ops/attention.cpp over sequences, graph/ops/attention_memory.cpp
// over a memory): one item's and head's product, forward and backward, on rows read where they lie,
//   S = Q K^T / sqrt(dk)  [Tq, Tk],   P = softmax over each row's visible keys,   O = P V  [Tq, dv],
// with backward recomputing S and P in workspace of 2 * Tq * Tk, then
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)) / sqrt(dk),  dQ += dS K,  dK += dS^T Q.
// Dropout on the weights (over sequences, in training mode) multiplies P by a mask M of 0 and
// 1 / (1 - rate) before the product with V: O = (P * M) V, so dV += (P * M)^T dO and dP = (dO V^T) * M.
// M is decided by a stream seeded from the evaluation's seed and the item and head, so backward draws
// the same M again instead of keeping it. Internal to graph/ops/.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "core/errors.hpp"
#include "core/fast_math.hpp"
#include "core/gemm.hpp"
#include "core/random.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

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

// The rows of input i's gradient where `r` lies in input i (none when it needs no gradient).
template <class T>
Rows<T> gradient_rows(const OpCall<T>& c, std::size_t i, const Rows<const T>& r) {
    if (!c.in_grad[i]) return {nullptr, 0};
    return {c.in_grad[i].data + (r.data - c.in[i].data), r.stride};
}

inline std::size_t dim_of(const TypeInfo& t, std::size_t i) { return t.shape.rank() > i ? t.shape[i] : 0; }

inline void check_heads(const std::string& op, std::span<const TypeInfo> in, std::size_t key_dim, std::size_t query_dim,
                        std::size_t value_dim, std::size_t heads) {
    if (heads == 0) shape_error(op, in, "heads must be at least 1");
    if (query_dim != key_dim)
        shape_error(op, in,
                    "the queries (" + std::to_string(query_dim) + ") and keys (" + std::to_string(key_dim) +
                        ") must have one size");
    if (key_dim % heads != 0 || value_dim % heads != 0)
        shape_error(op, in,
                    "the key size " + std::to_string(key_dim) + " and value size " + std::to_string(value_dim) +
                        " must be multiples of the " + std::to_string(heads) + " heads");
}

// attention_memory.cpp: attention() whose queries and keys are not sequences (one query per item
// over a memory): its checks, and the form of MemoryAttention its inputs call for.
Variable memory_attention(const Variable& queries, const Variable& keys, const Variable& values,
                          const AttentionOptions& options, const std::string& name);

}  // namespace loom::attention_detail
