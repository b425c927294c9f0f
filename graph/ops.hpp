#pragma once
/// \file
/// The public ops: one line each, implemented in the family file named in the comment above each
/// group. Names and semantics follow CNTK.
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "core/page_lists.hpp"
#include "graph/variable.hpp"

namespace loom {

/// Reduce over every static axis (the default of the static reductions).
inline constexpr int all_static_axes = INT_MIN;

/// \name Matrix products (graph/ops/linear.cpp)
/// @{
/// times(x, w): x [a..., k] with w [k, m...] gives [a..., m...]; on x's dynamic axes (w is usually a
/// parameter). A UserError when x's last axis differs from w's first.
Variable times(const Variable& x, const Variable& w, const std::string& name = {});
/// a times b's transpose: a [..., k] with a matrix b [m, k] gives [..., m].
Variable times_transpose(const Variable& a, const Variable& b, const std::string& name = {});
/// times(x, w) + b in one op: the output starts as b (broadcast to the product's shape, never beyond
/// it) and the GEMM adds into it.
Variable affine(const Variable& x, const Variable& w, const Variable& b, const std::string& name = {});

/// @}

/// \name Element-wise ops (graph/ops/elementwise.cpp)
/// Binary ops broadcast their sample shapes numpy-style (right-aligned, size 1 stretches) and their
/// dynamic axes (a static or batch operand joins a sequence one); operands on two different sequence
/// axes are a UserError. Comparisons give 1 or 0 and pass no gradient.
/// @{
/// a + b.
Variable plus(const Variable& a, const Variable& b, const std::string& name = {});
/// a - b.
Variable minus(const Variable& a, const Variable& b, const std::string& name = {});
/// a * b, element by element.
Variable element_times(const Variable& a, const Variable& b, const std::string& name = {});
/// a / b, element by element.
Variable element_divide(const Variable& a, const Variable& b, const std::string& name = {});
/// log(exp(a) + exp(b)), computed without overflow.
Variable log_add_exp(const Variable& a, const Variable& b, const std::string& name = {});
/// 1 where a > b, else 0.
Variable greater(const Variable& a, const Variable& b, const std::string& name = {});
/// 1 where a < b, else 0.
Variable less(const Variable& a, const Variable& b, const std::string& name = {});
/// 1 where a == b, else 0.
Variable equal(const Variable& a, const Variable& b, const std::string& name = {});
/// 1 where a >= b, else 0.
Variable greater_equal(const Variable& a, const Variable& b, const std::string& name = {});
/// 1 where a <= b, else 0.
Variable less_equal(const Variable& a, const Variable& b, const std::string& name = {});
/// 1 where a != b, else 0.
Variable not_equal(const Variable& a, const Variable& b, const std::string& name = {});
/// max(a, b); at a tie the gradient goes to a.
Variable element_max(const Variable& a, const Variable& b, const std::string& name = {});
/// min(a, b); at a tie the gradient goes to a.
Variable element_min(const Variable& a, const Variable& b, const std::string& name = {});
/// a where cond != 0, else b; the gradient goes to the operand chosen.
Variable element_select(const Variable& cond, const Variable& a, const Variable& b, const std::string& name = {});
/// a limited to [lo, hi]; the gradient passes where lo <= a <= hi, and goes to lo or hi where they bind.
Variable clip(const Variable& a, const Variable& lo, const Variable& hi, const std::string& name = {});
/// -a.
Variable negate(const Variable& a, const std::string& name = {});
/// e^a.
Variable exp(const Variable& a, const std::string& name = {});
/// The natural logarithm of a.
Variable log(const Variable& a, const std::string& name = {});
/// The square root of a.
Variable sqrt(const Variable& a, const std::string& name = {});
/// a * a.
Variable square(const Variable& a, const std::string& name = {});
/// |a| (gradient 0 at 0).
Variable abs(const Variable& a, const std::string& name = {});
/// The sine of a (radians).
Variable sin(const Variable& a, const std::string& name = {});
/// The cosine of a (radians).
Variable cos(const Variable& a, const std::string& name = {});
/// The hyperbolic tangent of a.
Variable tanh(const Variable& a, const std::string& name = {});
/// 1 / (1 + e^-a).
Variable sigmoid(const Variable& a, const std::string& name = {});
/// max(a, 0).
Variable relu(const Variable& a, const std::string& name = {});
/// a Phi(a), Phi the standard normal's distribution function: the Gaussian error linear unit in its
/// exact (erf) form, as PyTorch's nn.GELU() and nanoGPT's MLP.
Variable gelu(const Variable& a, const std::string& name = {});
/// log(1 + e^a), computed without overflow.
Variable softplus(const Variable& a, const std::string& name = {});
/// 1 / a.
Variable reciprocal(const Variable& a, const std::string& name = {});
/// a itself, as a node of its own.
Variable identity(const Variable& a, const std::string& name = {});
/// Blocks the gradient: forward is the identity, backward passes nothing.
Variable stop_gradient(const Variable& a, const std::string& name = {});
/// The largest whole number not above a; gradient 0.
Variable floor(const Variable& a, const std::string& name = {});
/// The smallest whole number not below a; gradient 0.
Variable ceil(const Variable& a, const std::string& name = {});
/// a to the nearest whole number, halves up (floor(a + 0.5), as CNTK; numpy rounds halves to even);
/// gradient 0.
Variable round(const Variable& a, const std::string& name = {});

/// plus(a, b).
Variable operator+(const Variable& a, const Variable& b);
/// minus(a, b).
Variable operator-(const Variable& a, const Variable& b);
/// element_times(a, b) (not a matrix product: times() is).
Variable operator*(const Variable& a, const Variable& b);
/// element_divide(a, b).
Variable operator/(const Variable& a, const Variable& b);
/// negate(a).
Variable operator-(const Variable& a);

/// @}

/// \name Reductions and softmax over static axes (graph/ops/reduce.cpp)
/// `axis` counts the sample's axes from 0 (negative: from the last); reductions keep the reduced axes
/// with size 1, as in CNTK, and reduce every static axis by default (all_static_axes). Over an
/// empty axis (an any_size dimension of size 0 at run time) the sum is 0, the mean NaN (0/0), the
/// maximum -inf, the minimum inf and the log-sum-exp -inf.
/// @{
/// The sum over `axis`.
Variable reduce_sum(const Variable& a, int axis = all_static_axes, const std::string& name = {});
/// The mean over `axis`.
Variable reduce_mean(const Variable& a, int axis = all_static_axes, const std::string& name = {});
/// The maximum over `axis`.
Variable reduce_max(const Variable& a, int axis = all_static_axes, const std::string& name = {});
/// The minimum over `axis`.
Variable reduce_min(const Variable& a, int axis = all_static_axes, const std::string& name = {});
/// log(sum(exp(a))) over `axis`, computed without overflow.
Variable reduce_log_sum_exp(const Variable& a, int axis = all_static_axes, const std::string& name = {});
/// exp(a) / sum(exp(a)) along `axis` (the last by default); the shape is a's.
Variable softmax(const Variable& a, int axis = -1, const std::string& name = {});
/// log(softmax(a)) along `axis`, computed without overflow.
Variable log_softmax(const Variable& a, int axis = -1, const std::string& name = {});

/// @}

/// \name Shape ops (graph/ops/shape.cpp, graph/ops/top_k.cpp)
/// They move elements within the sample; dynamic axes pass through.
/// @{
/// The inputs concatenated along static `axis` (the last by default); they must have the same rank
/// and agree on every other axis; their dynamic axes broadcast.
Variable splice(const std::vector<Variable>& inputs, int axis = -1, const std::string& name = {});
/// Elements [begin, end) of static `axis`; a negative begin counts from the axis' end, and an end of
/// 0 or below counts from the end too (end 0: up to the end).
Variable slice(const Variable& a, int axis, int begin, int end, const std::string& name = {});
/// The same elements in a sample of `shape` (the element counts must be equal).
Variable reshape(const Variable& a, const Shape& shape, const std::string& name = {});
/// The sample's axes permuted: output axis i is input axis perm[i].
Variable transpose(const Variable& a, const std::vector<std::size_t>& perm, const std::string& name = {});
/// ids of sample shape [1] (whole numbers in [0, num_classes)) as samples [num_classes] with a single 1.
Variable one_hot(const Variable& ids, std::size_t num_classes, const std::string& name = {});
/// What top_k returns.
struct TopK {
    Variable values;   ///< the k largest along the last axis, largest first
    Variable indices;  ///< their positions (as numbers), no gradient
};
/// The k largest elements along the last axis, largest first, and their positions.
TopK top_k(const Variable& a, std::size_t k, const std::string& name = {});

/// @}

/// \name Losses and similarities (graph/ops/loss.cpp)
/// Each reduces the sample to shape [1], per item (or per step of a sequence).
/// @{
/// a.b / (|a| |b|): the cosine SIMILARITY, under CNTK's name for it (0 for a zero vector).
Variable cosine_distance(const Variable& a, const Variable& b, const std::string& name = {});  // the cosine SIMILARITY
/// sum_j (a_j - b_j)^2.
Variable squared_error(const Variable& a, const Variable& b, const std::string& name = {});
/// -sum_j (y_j log p_j + (1 - y_j) log(1 - p_j)), p a probability (a sigmoid's output, typically).
Variable binary_cross_entropy(const Variable& p, const Variable& y, const std::string& name = {});
/// -sum_j y_j log softmax(z)_j, as CNTK defines it: lse(z) - y.z for labels y that sum to 1.
Variable cross_entropy_with_softmax(const Variable& z, const Variable& y, const std::string& name = {});
/// 1 where argmax z differs from argmax y (the first maximum wins), else 0; no gradient.
Variable classification_error(const Variable& z, const Variable& y, const std::string& name = {});

/// @}

/// \name Delays (graph/ops/delay.cpp)
/// The value `time_step` steps before (past_value) or after (future_value) on the same sequence, or
/// `initial_state` where that step falls outside it. initial_state may be a scalar, a tensor of the
/// sample shape, a parameter, or a per-sequence (batch) value. Through a placeholder they close loops.
/// @{
/// a at step t - time_step, or initial_state for the first time_step steps of each sequence.
/// \param a  a sequence, or a placeholder that closes a loop through this delay
/// \param initial_state  the value where the step falls before the sequence's start
/// \param time_step  how many steps back (at least 1)
/// \param name  shown in messages and DOT
Variable past_value(const Variable& a, const Variable& initial_state = Variable(0.0), std::size_t time_step = 1,
                    const std::string& name = {});
/// a at step t + time_step, or initial_state for the last time_step steps of each sequence.
Variable future_value(const Variable& a, const Variable& initial_state = Variable(0.0), std::size_t time_step = 1,
                      const std::string& name = {});

/// @}

/// Sequence ops (CNTK's C.sequence): they read a sequence axis' layout.
namespace sequence {
/// The same as loom::future_value.
using loom::future_value;
/// The same as loom::past_value.
using loom::past_value;

/// \name Sequence ops (graph/ops/sequence.cpp)
/// Reductions over time treat padding as their identity. A result on the batch axis holds one value
/// per sequence.
/// @{
/// 1 on the first step of each sequence, else 0: shape [1] on a's sequence axis.
Variable is_first(const Variable& a, const std::string& name = {});
/// 1 on the last step of each sequence, else 0: shape [1] on a's sequence axis.
Variable is_last(const Variable& a, const std::string& name = {});
/// The first step of each sequence, as a batch value.
Variable first(const Variable& a, const std::string& name = {});
/// The last step of each sequence, as a batch value.
Variable last(const Variable& a, const std::string& name = {});
/// Steps [begin, end) of each sequence; negative indices count from each sequence's end, end 0 = to the end.
Variable slice(const Variable& a, int begin, int end, const std::string& name = {});
/// A per-sequence (batch) value repeated along every step of `like`'s sequences.
Variable broadcast_as(const Variable& v, const Variable& like, const std::string& name = {});
/// The sum over the steps of each sequence, as a batch value.
Variable reduce_sum(const Variable& a, const std::string& name = {});
/// The maximum over the steps of each sequence, as a batch value.
Variable reduce_max(const Variable& a, const std::string& name = {});
/// The mean over the steps of each sequence, as a batch value.
Variable reduce_mean(const Variable& a, const std::string& name = {});
/// Softmax over the steps of each sequence, element by element; on a's axis.
Variable softmax(const Variable& a, const std::string& name = {});
/// The length of each sequence, as a batch value of shape [1].
Variable length(const Variable& a, const std::string& name = {});
/// The steps where cond (a sequence of shape [1] on a's axis) is non-zero, as a new sequence axis.
Variable gather(const Variable& a, const Variable& cond, const std::string& name = {});
/// What unpack returns.
struct Unpacked {
    Variable data;  ///< batch value [T_max, sample...], padding filled with padding_value
    Variable mask;  ///< batch value [T_max], 1 on real steps and 0 on padding
};
/// Each sequence as a padded batch value [T_max, sample...] and its mask; T_max is known only at run
/// time (it shows as 0 in shape()).
Unpacked unpack(const Variable& a, double padding_value = 0.0, const std::string& name = {});

/// @}

/// \name Sequence ops that make or fill an axis (graph/ops/sequence_where.cpp)
/// An op whose result would hold an empty sequence is a UserError naming the sequence.
/// @{
/// The positions t (as numbers, shape [1]) where cond (a sequence of shape [1]) is non-zero, on a
/// new sequence axis; a whole count c > 1 repeats t c times (CNTK's repeat factor).
Variable where(const Variable& cond, const std::string& name = {});
/// The inverse of gather: x's steps placed, in order, at the steps of cond's sequence where cond is
/// non-zero, zeros elsewhere; the result is on cond's axis.
Variable scatter(const Variable& x, const Variable& cond, const std::string& name = {});
/// @}
}  // namespace sequence

/// graph/ops/sequence_where.cpp: the inverse of sequence::unpack. padded: a batch value
/// [T_max, sample...] per item; lengths: a batch value [1] of whole numbers 1..T_max. Item n's first
/// lengths[n] steps become a sequence on a new axis.
Variable to_sequence(const Variable& padded, const Variable& lengths, const std::string& name = {});

/// graph/ops/batch.cpp: across the N items of a batch value [N, sample...] (a sequence operand is an
/// error: reduce it first). The reductions return a static value [sample...] (no dynamic axis);
/// broadcast_as puts a static value back on each item of `like`'s batch. None of them can run inside
/// a recurrence loop.
namespace batch {
/// The sum over the items: a static [sample...].
Variable reduce_sum(const Variable& a, const std::string& name = {});
/// The mean over the items: a static [sample...].
Variable reduce_mean(const Variable& a, const std::string& name = {});
/// The maximum over the items: a static [sample...].
Variable reduce_max(const Variable& a, const std::string& name = {});
/// Softmax across the items, element by element (a listwise loss's): a batch value like a.
Variable softmax(const Variable& a, const std::string& name = {});
/// A static value v repeated on every item of `like`'s batch.
Variable broadcast_as(const Variable& v, const Variable& like, const std::string& name = {});
}  // namespace batch

/// graph/ops/normalization.cpp: layer normalization over the last axis,
/// (x - mean) / sqrt(var + epsilon) * scale + bias with the mean and (biased) variance of each row;
/// scale and bias are static [d], d = x's last axis. One op forward and backward.
Variable layer_norm(const Variable& x, const Variable& scale, const Variable& bias, double epsilon = 1e-5,
                    const std::string& name = {});

/// How attention() attends.
struct AttentionOptions {
    std::size_t heads = 1;  ///< H: the queries, keys and values are split into H equal slices, one per head
    bool causal = false;    ///< each query sees the keys up to its own step (one sequence axis only)
    /// Over a memory only: a batch value [Tk], 1 on each item's real keys (its first ones) and 0 on
    /// its padding, as sequence::unpack's mask. Empty: every key is real (a key/value cache).
    Variable key_mask{};
    /// Over a memory only: this step's own key [D] and value [Dv] (batch values), attended as the
    /// last ones after `keys` and `values`, a key/value cache of the steps before (which may hold
    /// none): the cache is read where it lies, not copied one row longer first. Both or neither.
    Variable step_key{};
    Variable step_value{};  ///< see step_key
    /// Over sequences only: dropout on the weights [torch.nn.MultiheadAttention's dropout]. In
    /// training mode (graph/mode.hpp) each weight is dropped with this probability after the
    /// softmax and the rest scaled by 1 / (1 - dropout), a fresh mask at every evaluation; nothing
    /// is dropped in inference mode. In [0, 1).
    double dropout = 0.0;
    /// The masks' seed: 0 takes one from global_rng(), as dropout()'s seed.
    std::uint64_t seed = 0;
};

/// graph/ops/attention.cpp (over a memory graph/ops/attention_memory.cpp): multi-head scaled
/// dot-product attention, per item and head h
///   softmax(Q_h K_h^T / sqrt(dk)) V_h,  dk = D / H,
/// computed as products of each item's rows where they lie, forward and backward; nothing larger
/// than one item's and head's scores [Tq, Tk] is made, and backward recomputes them. Two forms:
/// - over sequences: queries a sequence [D], keys [D] and values [Dv] sequences on one axis (the
///   queries' for self-attention, another for cross-attention); each item's padded keys are never
///   read; `causal` needs one axis. The result is a sequence [Dv] on the queries' axis.
/// - over a memory: one query per item (a batch value [D]) over keys [Tk, D] and values [Tk, Dv]
///   that are batch values (Tk may be a run-time size: a key/value cache, or sequence::unpack's
///   output with its mask as options.key_mask), and with options.step_key / step_value the step's
///   own key and value after them. The result is a batch value [Dv].
/// With options.dropout, over sequences, the weights are dropped in training mode (backward draws the
/// same mask again rather than keeping it).
/// Sizes that do not divide by the heads, and every other mismatch, are a UserError naming the shapes.
Variable attention(const Variable& queries, const Variable& keys, const Variable& values,
                   const AttentionOptions& options = {}, const std::string& name = {});
/// The weights attention() applies over sequences, averaged over the heads (for one head, slice
/// the queries and keys): a sequence [Tk_max] on the queries' axis, each row item n's weights over
/// its keys and 0 past them (Tk_max, the keys' longest sequence, is known when a batch is bound and
/// is 0 in shape()). For pictures of what a model attends to; differentiable. options.dropout is not
/// applied: the weights are those before dropout.
Variable attention_weights(const Variable& queries, const Variable& keys, const AttentionOptions& options = {},
                           const std::string& name = {});
/// Each head's weights attention() applies over sequences [torch.nn.MultiheadAttention's weights with
/// average_attn_weights=False]: a sequence [H, Tk_max] on the queries' axis, row h of query step i
/// head h's softmax(q_h . k_h / sqrt(dk)) over item n's keys (up to step i when causal) and 0 past
/// them (Tk_max, the keys' longest sequence, is known when a batch is bound and is 0 in shape()).
/// Their mean over the heads is attention_weights(). Differentiable; options.dropout is not applied
/// (the weights are those before dropout). The same checks as attention_weights: heads that do not
/// divide the width are a UserError naming the sizes.
Variable attention_head_weights(const Variable& queries, const Variable& keys, const AttentionOptions& options = {},
                                const std::string& name = {});

/// graph/ops/embedding.cpp: row ids[i] of table [V, D] for each id (sample shape [1], on any dynamic
/// axis) -> [D]. The backward adds into the used rows only; an id outside 0..V-1 is a UserError.
Variable embedding(const Variable& ids, const Variable& table, const std::string& name = {});
/// graph/ops/embedding.cpp: embedding(positions, table) for a table of learned positions [P, D] of
/// the model `positions_of` names ("TransformerLM 'gpt'"): the same rows and gradient, but positions
/// past the table are a UserError "`positions_of`: a sequence of T steps is longer than its learned
/// positions (max_positions P)", T the longest sequence's length, raised before any row is read.
Variable position_embedding(const Variable& positions, const Variable& table, const std::string& positions_of,
                            const std::string& name = {});
/// graph/ops/embedding.cpp: item index[r] of static items [N, sample...] for each row r (index: sample
/// shape [1], a whole number, on a dynamic axis) -> [sample...] on the index's axis, as torch's
/// index_select on axis 0 or CNTK's gather. The backward adds each row's gradient into its item's (rows
/// sharing an item accumulate); an index outside [0, N) is a UserError naming the index and N.
/// attention() over keys, values and mask picked by one index reads the items through it once
/// compiled (graph/fold_products.hpp), copying nothing per row.
Variable index_select(const Variable& items, const Variable& index, const std::string& name = {});
/// graph/ops/embedding.cpp: rows indices[r][0..k) of a static table [R, sample...] for each row r
/// (indices: sample shape [k], k fixed or any_size, whole numbers, on a dynamic axis) -> [k, sample...]
/// on the indices' axis, as CNTK's gather or torch's table[indices]. The backward adds into the rows
/// used; an index outside [0, R) is a UserError naming the index and R. (A key/value cache kept as
/// pages is paged_rows below, which attention() reads in place.)
Variable gather_rows(const Variable& table, const Variable& indices, const std::string& name = {});
/// graph/ops/paged_rows.cpp: a key/value cache kept as pages (core/page_lists.hpp): row r, one per
/// row of `like` (a batch value), is the rows pages->of(r) of a static table [R, sample...] ->
/// [Tk, sample...] on like's axis, Tk = pages->length() known at run time. The page lists are no
/// graph value: their owner (Generator) makes them between passes, checked once, and every node
/// holding them reads them. attention() over keys and values of this form (no mask) reads them in
/// the tables where they lie, for every head, copying nothing; only another reader runs this op's
/// copy. The backward adds into the table rows read. A UserError when the lists are not one per row
/// of `like` or name rows the table does not hold.
Variable paged_rows(const Variable& table, std::shared_ptr<const PageLists> pages, const Variable& like,
                    const std::string& name = {});

/// graph/ops/random.cpp: in training mode (graph/mode.hpp) a * a fresh Bernoulli mask / (1 - rate)
/// at every evaluation; the identity in inference mode. seed 0 takes a seed from global_rng().
Variable dropout(const Variable& a, double rate, std::uint64_t seed = 0, const std::string& name = {});

/// @{
/// graph/ops/rnn.cpp: the fused LSTM cell, from gate pre-activations z = [i, f, o, g] ([4n]):
/// lstm_cell_state(z, c) = c' = sigmoid(z_f) * c + sigmoid(z_i) * tanh(z_g), and
/// lstm_cell_output(z, c') = h' = sigmoid(z_o) * tanh(c').
Variable lstm_cell_state(const Variable& z, const Variable& c, const std::string& name = {});
Variable lstm_cell_output(const Variable& z, const Variable& c_next, const std::string& name = {});
/// @}

}  // namespace loom
