#pragma once
/// \file
/// How to multiply: the place that chooses how a batch of products y = x op(W) (+ an addend), and
/// its gradients dX += dY op(W)^T and dW += x^T dY, are computed for the graph's matrix ops (the
/// embedding product and attention call gemm themselves). The graph's matrix ops
/// (times, times_transpose, affine in graph/ops/linear.cpp) describe their operands as plain
/// row-major buffers and their batch (Product); this file picks one of five ways (MultiplyWay) by
/// the shapes, which rows are real, whether the call is a step of a loop, and the CPU:
///
/// - packed_weight: a step of a loop with a static W, or a batch product whose W stays the same
///   across a session's passes (Session::set_parameters_fixed): W packed once for all the steps
///   or passes (pack_right_once), each call's real rows multiplied where they lie (gemm_rows);
/// - real_rows_in_place: a padded batch with a static W and at most 7/8 of its rows real, on an
///   AVX-512 CPU (gemm_rows_in_place): the real rows multiplied where they lie (gemm_blocked_rows);
/// - real_rows_gathered: the same batch otherwise: the real rows gathered into a block, one gemm(),
///   the result scattered back (a padded batch then skips the padding's share of the FLOPs);
/// - item_vectors: one row per item times the item's own matrix (attention's q K^T and a V):
///   dot products and row updates, which a GEMM call would spend most of its time setting up;
/// - gemm: one gemm() over every row when W is static, else one per position of the batch (W's
///   positions broadcast against x's as the element-wise ops broadcast dynamic dims).
///
/// The choice changes which rows are visited and how they are laid out for the kernels, never the
/// value of an element beyond rounding: every way sums each element over k.
#include <cstddef>
#include <functional>
#include <span>

#include "core/buffer.hpp"
#include "core/shape.hpp"

namespace loom {

/// The ways a product runs; see the file's comment.
enum class MultiplyWay { packed_weight, real_rows_in_place, real_rows_gathered, item_vectors, gemm };

/// "packed_weight", "real_rows_in_place", ... (for messages and tests).
const char* multiply_way_name(MultiplyWay way);

/// A batch of products y = x op(W) over row-major buffers.
///
/// y has `positions` (its dynamic dims: [T, N], [N] or none), each an [m, n] block. x and W have
/// their own dynamic dims, aligned with y's from the right; a missing or size-1 dim is broadcast.
/// Each position of x is an [m, k] block; each of W a [k, n] block, or [n, k] when `transposed`.
template <class T>
struct Product {
    const T* x = nullptr;
    const T* w = nullptr;
    T* y = nullptr;  ///< may be null in backward (the value may have been freed)
    std::size_t m = 0, k = 0, n = 0;
    bool transposed = false;
    Dims positions, x_positions, w_positions;
    /// When set, only the positions listed in `real` (increasing) are computed: the rest are
    /// padding, whose value the caller zeroes and whose gradient is zero.
    bool padded = false;
    std::span<const std::size_t> real;
    /// Memory kept across calls that see the same W, where it is packed once (else null): a loop's
    /// run, or a session's passes while its parameters are fixed.
    LoopCache<T>* loop = nullptr;
    /// Scratch for the gathered rows.
    Workspace<T>* scratch = nullptr;
    /// multiply_backward only: dx (dw) holds no values yet and is written rather than added to,
    /// every element or, where `padded`, the real positions' rows.
    bool assign_dx = false, assign_dw = false;
    /// The beta of dX's and of dW's GEMM: 0 to write them, 1 to add into them.
    T beta_dx() const { return assign_dx ? T(0) : T(1); }
    T beta_dw() const { return assign_dw ? T(0) : T(1); }
};

/// How the addend of y = x op(W) + d lies, as multiply reads it.
enum class AddendForm {
    none,      ///< y = x op(W)
    row,       ///< one row of n values (a bias), added to every row of y
    rows,      ///< a row for each row of y, laid out as y
    broadcast  ///< any other form, which only the caller's `write` knows how to broadcast
};

/// The addend d of y = x op(W) + d: its form, its data (for row and rows), and a function that
/// writes it into the whole of y, broadcast, for the ways that then add the product to y.
template <class T>
struct Addend {
    AddendForm form = AddendForm::none;
    const T* data = nullptr;
    std::function<void()> write;
};

/// The way multiply takes for this product and form of addend.
template <class T>
MultiplyWay multiply_way(const Product<T>& p, AddendForm addend);

/// The way multiply_backward takes when it computes dX (dx) and/or dW (dw).
template <class T>
MultiplyWay multiply_backward_way(const Product<T>& p, bool dx, bool dw);

/// y = x op(W) + addend on the positions to compute (multiply_way says how).
template <class T>
void multiply(const Product<T>& p, const Addend<T>& addend = {});

/// dX += dY op(W)^T into `dx` (laid out as x) and dW += the product's gradient into `dw` (laid out
/// as W: x^T dY, or dY^T x when transposed), each only when non-null; dY is laid out as y. With
/// Product::assign_dx (assign_dw), dX = ... (dW = ...) instead.
template <class T>
void multiply_backward(const Product<T>& p, const T* dy, T* dx, T* dw);

}  // namespace loom
