#pragma once
/// \file
/// The attention family. Every function returns the context and the weights.
///
/// Three constructions, chosen by the query's dynamic axis:
/// - One query per sequence (a batch value [d], e.g. a decoder state or a question summary) over a
///   sequence of keys: everything stays on the keys' sequence axis. The scores are a sequence of [1],
///   normalized by sequence::softmax (which only sees each sequence's real steps, so padding needs no
///   mask), and the context is sequence::reduce_sum(weights * values).
/// - A query on another axis than the keys, inside its own recurrence (a decoder step attending over
///   its encoder, seeds 001 and 002): the keys and values are unpacked ONCE per item, outside the
///   loop, into an AttentionMemory (batch values [T_max, d] and a mask); each step reads that block
///   in place (no copy per step), scores it with one small product per item, and normalizes with a
///   softmax over the block's axis whose padded keys are masked to -inf.
/// - A query that is itself a sequence (self-attention, or every decoder step at once): the queries
///   are unpacked (sequence::unpack) and broadcast onto the keys' axis, the scores [Tq, 1] are
///   normalized by sequence::softmax along the keys (padding skipped, numerically stable; causal
///   masking puts -inf on keys after the query's step), sequence::reduce_sum gives all contexts
///   [Tq, dv] at once, and each query step selects its own row. The weights are then [Tq, 1] on the
///   keys' axis. Memory is O(Tq * Tk) per sequence.
///
/// MultiHeadAttention is apart: a class over the attention op (graph/ops.hpp), which computes
/// every item's and head's product where the rows lie and keeps nothing of O(Tq * Tk).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace loom::layers {

/// What an attention function returns.
struct Attention {
    Variable context;  ///< [dv], on the query's dynamic axes
    /// On the keys' axis: [1] for a batch query, [Tq, 1] for a sequence query; over a memory [T_max]
    /// on the query's axis (0 on padded keys).
    Variable weights;
    Variable scores;  ///< the weights before the softmax (scaled; -inf where masked)
};

/// A sequence of keys and values unpacked per item, for queries on another axis (inside a loop).
/// Every field is a batch value; T_max is the batch's longest key sequence (a run-time size, 0 in
/// shape()).
struct AttentionMemory {
    Variable keys;       ///< [T_max, dk]
    Variable values;     ///< [T_max, dv]
    Variable mask;       ///< [T_max]: 1 on the item's real steps, 0 on its padding
    Variable positions;  ///< [T_max]: 0, 1, 2, ... (local-p's source positions)
    Variable length;     ///< [1]: the item's number of keys (local-p's S)

    /// The five as a list, in the order above, and back (a decoder's memory inputs, layers/decoder.hpp).
    std::vector<Variable> list() const { return {keys, values, mask, positions, length}; }
    /// \return the memory of a list() (five Variables, in that order).
    static AttentionMemory from_list(const std::vector<Variable>& list);
};
/// The memory of keys and values that are sequences on one axis. Without values the keys are the
/// values, and the two fields are one Variable (one block per item).
AttentionMemory attention_memory(const Variable& keys, const Variable& values = {});
/// The same memory as batch inputs of any T_max (input_variable's any_size), to bind to the values
/// of an attention_memory evaluated once: what a generating decoder's step reads. value_dim 0: the
/// keys are the values (one input, as attention_memory(keys) makes it).
AttentionMemory attention_memory_inputs(std::size_t key_dim, std::size_t value_dim = 0,
                                        const std::string& name = "memory");

/// Seed 000: softmax over each sequence of `scores` (a sequence of [1]) written as a cumulative
/// log-sum-exp recurrence; exp(z - broadcast_as(last(lse), z)). Equals sequence::softmax(scores).
Variable sequence_softmax_weights(const Variable& scores);
/// sequence::reduce_sum(sequence_softmax_weights(scores) * values).
Attention sequence_softmax_attention(const Variable& scores, const Variable& values);

/// The position of every step in its sequence (0, 1, ...), a sequence of [1] on x's axis.
Variable sequence_positions(const Variable& x);

/// Dot-product attention (seeds 002 and 004): score_j = q . k_j, times 1/sqrt(d) when `scaled`.
/// `causal` (only when query and keys share a sequence axis) masks every key after the query's step.
/// \param query  a batch value [d] (one query per sequence) or a sequence of queries [d]
/// \param keys  a sequence of keys [d]
/// \param values  a sequence of values [dv] on the keys' axis
/// \param scaled  divide the scores by sqrt(d)
/// \param causal  hide the keys after each query's step
Attention dot_product_attention(const Variable& query, const Variable& keys, const Variable& values,
                                bool scaled = false, bool causal = false);
/// dot_product_attention with `scaled` set: score_j = q . k_j / sqrt(d).
inline Attention scaled_dot_product_attention(const Variable& query, const Variable& keys, const Variable& values,
                                              bool causal = false) {
    return dot_product_attention(query, keys, values, true, causal);
}

/// Over a memory: score_s = q . k_s (times 1/sqrt(dk) when `scaled`), for a query on any axis (a
/// decoder step inside its loop).
Attention dot_product_attention(const Variable& query, const AttentionMemory& memory, bool scaled = false);

/// Self-attention of a sequence over itself (seeds 003 and 004): bidirectional, or causal (each step
/// sees itself and the steps before it).
Attention self_attention(const Variable& x, bool scaled = true, bool causal = false);

/// Seed 003, parametric: Q, K, V = x Wq, x Wk, x Wv (each [d, d], no bias), weights =
/// softmax(Q K^T / sqrt(d)) over the (unpadded) steps, out = tanh(weights V) Wo. d = x's dimension.
Layer ParametricSelfAttention(bool causal = false, const std::string& name = "ParametricSelfAttention");

/// What a MultiHeadAttention is [torch.nn.MultiheadAttention's constructor arguments in brackets].
struct MultiHeadAttentionOptions {
    std::size_t model_dim = 0;  ///< [embed_dim], required: the query's width and the output's
    std::size_t heads = 1;      ///< [num_heads], must divide model_dim
    std::size_t key_dim = 0;    ///< [kdim]: the key input's width; 0: model_dim
    std::size_t value_dim = 0;  ///< [vdim]: the value input's width; 0: model_dim
    /// [dropout] on the attention weights in training mode (AttentionOptions::dropout), in [0, 1)
    double dropout = 0.0;
    bool bias = true;     ///< [bias] biases on the four projections
    bool causal = false;  ///< [is_causal] each query sees the keys up to its own step (one sequence axis)
    std::string name = "MultiHeadAttention";  ///< the parameters' prefix and the name in errors
};

/// What MultiHeadAttention::forward returns [torch's (attn_output, attn_weights)].
struct MultiHeadAttentionOutput {
    Variable output;  ///< [model_dim] on the query's axis
    /// Empty unless asked for: averaged, a sequence [Tk_max] on the query's axis (the mean over the
    /// heads, attention_weights); per head [H, Tk_max] (attention_head_weights). 0 past each item's keys.
    Variable weights;
};

/// Multi-head attention with its projections [torch.nn.MultiheadAttention], over the attention op
/// (graph/ops.hpp, one product per item and head, nothing of O(Tq * Tk) kept):
///   out = concat_h(softmax(Q_h K_h^T / sqrt(dh)) V_h) W_out + b_out,
///   Q = query W_q + b_q,  K = key W_k + b_k,  V = value W_v + b_v,  dh = model_dim / heads.
/// Its parameters, made at construction in this order (W glorot_uniform, b zeros; no b without
/// bias): name.q.W [model_dim, model_dim], name.q.b, name.k.W [key_dim, model_dim], name.k.b,
/// name.v.W [value_dim, model_dim], name.v.b, name.out.W [model_dim, model_dim], name.out.b.
/// Padded keys need no mask: each item's keys are its sequence's real steps. An input of another
/// width is a UserError naming the layer, the input and both shapes, when the graph is built.
class MultiHeadAttention {
public:
    /// The layer `options` describe; model_dim 0, heads not dividing it or dropout outside [0, 1)
    /// are UserErrors.
    explicit MultiHeadAttention(const MultiHeadAttentionOptions& options);
    /// The signature of loom 0.2, its argument order kept (heads first): the options
    /// {.model_dim = model_dim, .heads = heads, .causal = causal, .name = name}.
    MultiHeadAttention(std::size_t heads, std::size_t model_dim, bool causal = false,
                       const std::string& name = "MultiHeadAttention");

    /// Self-attention of a sequence x [model_dim]: forward(x, x, x, false).output.
    Variable operator()(const Variable& x) const;
    /// The query [model_dim] over key [key_dim] and value [value_dim] sequences on one axis (the
    /// query's, or another for cross-attention): forward(query, key, value, false).output.
    Variable operator()(const Variable& query, const Variable& key, const Variable& value) const;
    /// torch's forward: the output and, with need_weights, the weights from the same projections
    /// (average_weights: their mean over the heads, else each head's [average_attn_weights]). The
    /// weights are those before dropout (torch returns them after it in training mode).
    MultiHeadAttentionOutput forward(const Variable& query, const Variable& key, const Variable& value,
                                     bool need_weights = true, bool average_weights = true) const;
    /// Over a memory (a generating step): one query per item, a batch value [model_dim], over keys
    /// [Tk, key_dim] and values [Tk, value_dim] that are batch values (Tk may be a run-time size),
    /// with an optional key mask [Tk] (AttentionOptions::key_mask: 1 on each item's first, real keys).
    /// No causal mask (the memory holds only what the query may see) and no dropout.
    Variable over_memory(const Variable& query, const Variable& keys, const Variable& values,
                         const Variable& key_mask = {}) const;

    /// @{
    /// One projection, x W + b on x's last axis, for callers that keep a key/value cache (a
    /// decoder's step): the query's, the key's, the value's, and the output's of the heads' context.
    Variable project_query(const Variable& x) const;
    Variable project_key(const Variable& x) const;
    Variable project_value(const Variable& x) const;
    Variable project_output(const Variable& context) const;
    /// @}

    /// \return the number of heads.
    std::size_t heads() const;
    /// \return the query's and the output's width.
    std::size_t model_dim() const;
    /// \return the options, key_dim and value_dim filled in.
    const MultiHeadAttentionOptions& options() const;
    /// \return q.W, q.b, k.W, k.b, v.W, v.b, out.W, out.b (the b's only with bias).
    std::vector<Parameter> parameters() const;
    /// The self-attention as a Layer (what loom 0.2's MultiHeadAttention returned), sharing the parameters.
    operator Layer() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

/// Additive (Bahdanau) attention: score_j = v . tanh(k_j W_k + q W_q), W_k [dk, a], W_q [dq, a], v [a].
class AdditiveAttention {
public:
    /// An attention of inner size `attention_dim` (a): v is made now, W_k and W_q at the first call.
    explicit AdditiveAttention(std::size_t attention_dim, const std::string& name = "AdditiveAttention");
    /// \return the attention of `query` over sequences of `keys` and `values` (the constructions above).
    Attention operator()(const Variable& query, const Variable& keys, const Variable& values) const;
    /// Over a memory (a decoder step, Bahdanau's query h_{t-1}): k_s W_k is computed once per item,
    /// outside the loop; each step adds q W_q.
    Attention operator()(const Variable& query, const AttentionMemory& memory) const;
    /// \return the parameters made so far (W_k, W_q, v once called).
    std::vector<Parameter> parameters() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

/// General (Luong) attention: score_j = q^T W k_j with W [dq, dk], i.e. dot-product attention of q W.
class GeneralAttention {
public:
    /// An attention whose W is made at the first call, from the query's and keys' sizes.
    explicit GeneralAttention(const std::string& name = "GeneralAttention");
    /// @{
    /// \return the attention of `query` over sequences of `keys` and `values`, or over a memory.
    Attention operator()(const Variable& query, const Variable& keys, const Variable& values) const;
    Attention operator()(const Variable& query, const AttentionMemory& memory) const;
    /// @}
    /// \return the parameters made so far (W once called).
    std::vector<Parameter> parameters() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

/// Local-p attention (Luong et al. 2015, eq. 9-10; seed 001), for one target state h_t per sequence
/// (a batch value [H]) over the source states (a sequence [H]):
///   p_t = S * sigmoid(v_p . tanh(h_t W_p)),  S = the source's length,
///   a_s = softmax_s(h_t . hbar_s) * exp(-(s - p_t)^2 / (2 (D/2)^2)).
/// No hard window: the Gaussian factor keeps it differentiable in p_t. D = half_window.
class LocalAttention {
public:
    /// An attention of half window D = `half_window` (> 0, else a UserError); its weights are made at
    /// the first call.
    explicit LocalAttention(double half_window, const std::string& name = "LocalAttention");
    /// \return the attention of the target state over the source sequence (above).
    Attention operator()(const Variable& target, const Variable& source) const;
    /// Over a memory (its values are the source states h̄_s), for a target state on any axis: inside
    /// a decoder's loop p_t follows the decoder state step by step.
    Attention operator()(const Variable& target, const AttentionMemory& memory) const;
    /// p_t of the last call (a batch value [1]), for inspection and tests.
    Variable aligned_position() const;
    /// \return the parameters made so far (W_p and v_p once called).
    std::vector<Parameter> parameters() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

}  // namespace loom::layers
