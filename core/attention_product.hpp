#pragma once
// The math of attention for one item, on rows read where they lie (the ops in graph/ops/attention.cpp
// over sequences and graph/ops/attention_memory.cpp over a memory decode their inputs into these):
//   S = Q K^T / sqrt(dk)  [Tq, Tk],   P = softmax over each row's visible keys,   O = P V  [Tq, dv],
// with backward recomputing S and P, then
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)) / sqrt(dk),  dQ += dS K,  dK += dS^T Q,
// a block of query rows at a time (HeadProduct::block): each row's softmax is its own, so a block's
// rows need only the keys they see, and its scratch is [block, Tk], not [Tq, Tk].
// Dropout on the weights (over sequences, in training mode) multiplies P by a mask M of 0 and
// 1 / (1 - rate) before the product with V: O = (P * M) V, so dV += (P * M)^T dO and dP = (dO V^T) * M.
// M is decided by a stream for each row seeded from the evaluation's seed, the item, the head and the
// row, so backward draws the same M again instead of keeping it.
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
        const T top = fast::lane_max(row, n);
        for (std::size_t j = 0; j < n; ++j) row[j] = fast::exp(row[j] - top);
        const T sum = fast::lane_sum<T>(n, [&](std::size_t j) { return row[j]; });
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
        const T dot = fast::dot(pr, g, cols);
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

// Dropout on one item's and head's weights: which of its lq x lk weights are dropped, decided by a
// stream for each row (for_each_dropout over the row's visible keys), so that backward drops the
// same ones.
struct WeightDrops {
    std::uint64_t threshold = 0;  // dropout_threshold(rate); 0: nothing is dropped
    std::uint64_t seed = 0;
    double keep = 1;  // the kept weights' scale, 1 / (1 - rate)
    explicit operator bool() const { return threshold != 0; }
    // The drops of item-and-head number `head`: the seed mixed with it by splitmix64's finalizer
    // (adding the number to the seed would give neighbouring heads overlapping streams).
    WeightDrops of_head(std::uint64_t head) const {
        return {threshold, seed ^ splitmix64_mix(head + 0x9e3779b97f4a7c15ull), keep};
    }
    // The drops of weight row `row` of this item's head: the seed and the row through splitmix64 (a
    // stream for each row, so that the rows of a block of queries are drawn in any order).
    WeightDrops of_row(std::uint64_t row) const {
        return {threshold, splitmix64_mix(seed + (row + 1) * 0x9e3779b97f4a7c15ull), keep};
    }
    template <class T>
    void apply(T* x, std::size_t count) const {
        const T scale = static_cast<T>(keep);
        for_each_dropout(seed, count, threshold, [&](std::size_t i, bool kept) { x[i] = kept ? x[i] * scale : T(0); });
    }
};

// What one item's and head's forward and backward compute, given its rows (see the file comment).
// The queries are taken `block` rows at a time: a block's scores [rows, keys] stay in cache where a
// whole [lq, lk] would not (a long context's 4,096 x 4,096 is 64 MB a head), and under a causal mask
// a block multiplies only the keys its last row sees, which halves the products of a long context.
template <class T>
struct HeadProduct {
    // Query rows a block takes by default: 128 rows of 4,096 keys, the scores and their gradients, are
    // 4 MB (the last-level cache's). Measured on Zen 4 at block 4,096 (width 256, 4 heads), training:
    // 32 rows 0.90 of 128's tokens/s, 64 rows 0.96, 256 rows 1.00: fewer rows pack the keys and
    // values more often for products that sum over fewer rows.
    static constexpr std::size_t kQueryBlock = 128;

    std::size_t lq, lk, dk, dv;
    bool causal;
    T scale;
    std::size_t block = kQueryBlock;

    // The keys query row i sees, and those the rows before row `end` see together.
    std::size_t visible(std::size_t i) const { return causal ? std::min(lk, i + 1) : lk; }
    std::size_t keys_before(std::size_t end) const { return causal ? std::min(lk, end) : lk; }
    // Scratch the forward and backward need (T elements).
    std::size_t forward_work() const { return std::min(block, lq) * lk; }
    std::size_t backward_work() const { return 2 * forward_work(); }

    // P = softmax(Q K^T * scale) into p [lq, lk], every row whole (0 past its visible keys).
    void weights(Rows<const T> q, Rows<const T> k, T* p) const { block_weights(q, k, 0, lq, lk, p); }
    // Given dP in ds (overwritten with dS), adds dS K into dq and dS^T Q into dkey where they have data.
    void weights_backward(Rows<const T> q, Rows<const T> k, const T* p, T* ds, Rows<T> dq, Rows<T> dkey) const {
        softmax_backward_rows(p, ds, lq, lk, scale);
        if (dq.data) gemm(false, false, lq, dk, lk, T(1), ds, lk, k.data, k.stride, dq.beta(), dq.data, dq.stride);
        if (dkey.data)
            gemm(true, false, lk, dk, lq, T(1), ds, lk, q.data, q.stride, dkey.beta(), dkey.data, dkey.stride);
    }
    // O = P V (P dropped where drops say), a block of queries at a time; p: forward_work().
    void forward(Rows<const T> q, Rows<const T> k, Rows<const T> v, Rows<T> o, T* p,
                 const WeightDrops& drops = {}) const {
        for (std::size_t begin = 0; begin < lq; begin += block) {
            const std::size_t rows = std::min(block, lq - begin), keys = keys_before(begin + rows);
            block_weights(q, k, begin, rows, keys, p);
            if (drops) drop(drops, begin, rows, keys, p);
            gemm(false, false, rows, dv, keys, T(1), p, keys, v.data, v.stride, T(0), o.data + begin * o.stride,
                 o.stride);
        }
    }
    // Adds into (or writes) whichever of dq, dk, dv has data, a block of queries at a time (dk and dv
    // sum over the blocks: where written, zeroed first); work: backward_work().
    void backward(Rows<const T> q, Rows<const T> k, Rows<const T> v, Rows<const T> dout, Rows<T> dq, Rows<T> dkey,
                  Rows<T> dval, T* work, const WeightDrops& drops = {}) const {
        if (dval.data && dval.assign) zero(dval, dv);  // dv and dk: lk rows each
        if (dkey.data && dkey.assign) zero(dkey, dk);
        for (std::size_t begin = 0; begin < lq; begin += block) {
            const std::size_t rows = std::min(block, lq - begin), keys = keys_before(begin + rows);
            T* p = work;
            T* ds = work + rows * keys;
            block_weights(q, k, begin, rows, keys, p);
            const T* dout_rows = dout.data + begin * dout.stride;
            if (dval.data) {
                const T* applied = p;  // the weights the values were multiplied by: P, or P * M in ds for now
                if (drops) {
                    std::copy_n(p, rows * keys, ds);
                    drop(drops, begin, rows, keys, ds);
                    applied = ds;
                }
                gemm(true, false, keys, dv, rows, T(1), applied, keys, dout_rows, dout.stride, T(1), dval.data,
                     dval.stride);
            }
            if (!dq.data && !dkey.data) continue;
            gemm(false, true, rows, keys, dv, T(1), dout_rows, dout.stride, v.data, v.stride, T(0), ds, keys);
            if (drops) drop(drops, begin, rows, keys, ds);
            softmax_backward_rows(p, ds, rows, keys, scale);
            if (dq.data)
                gemm(false, false, rows, dk, keys, T(1), ds, keys, k.data, k.stride, dq.beta(),
                     dq.data + begin * dq.stride, dq.stride);
            if (dkey.data)
                gemm(true, false, keys, dk, rows, T(1), ds, keys, q.data + begin * q.stride, q.stride, T(1), dkey.data,
                     dkey.stride);
        }
    }

private:
    // Query rows [begin, begin + rows)'s weights over the first `keys` keys into p [rows, keys].
    void block_weights(Rows<const T> q, Rows<const T> k, std::size_t begin, std::size_t rows, std::size_t keys,
                       T* p) const {
        gemm(false, true, rows, keys, dk, scale, q.data + begin * q.stride, q.stride, k.data, k.stride, T(0), p, keys);
        softmax_rows(p, rows, keys, [&](std::size_t i) { return visible(begin + i); });
    }
    // Drops query row i's visible weights by its own stream (the same whichever block holds it).
    void drop(const WeightDrops& drops, std::size_t begin, std::size_t rows, std::size_t keys, T* x) const {
        for (std::size_t i = 0; i < rows; ++i) drops.of_row(begin + i).apply(x + i * keys, visible(begin + i));
    }
    void zero(Rows<T> r, std::size_t width) const {
        for (std::size_t j = 0; j < lk; ++j) std::fill_n(r.data + j * r.stride, width, T(0));
    }
};

// One query row q [heads * dk] over the keys [Tk][heads * dk] and values [Tk][heads * dv] the views
// name, every head at once: o [heads * dv] gets, for each head, softmax(q_h K_h^T * scale) V_h.
// p: scratch of heads * Tk. Where a head's size is a multiple of 16, a score is 16 lanes of products
// reduced in a tree (a running sum would be a serial chain), and the weighted values are summed in
// registers, 256 elements at a time over all the keys (64 on AVX2). Rows a few keys ahead are
// prefetched: a cache's rows lie where its pages put them, apart. The rows are stored as S: T, or
// (T float) std::uint16_t, bfloat16's bits, each element widened to the float it is as it is read
// (a key/value cache kept in bfloat16: half the bytes read; the arithmetic float's).
template <class T, class S = T>
void attend_one_query(std::size_t heads, std::size_t dk, std::size_t dv, T scale, const T* q,
                      const RowView<const S>& keys, const RowView<const S>& values, T* p, T* o);

}  // namespace loom::attention_detail
