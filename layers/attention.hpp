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
#include <cstddef>
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

/// Multi-head self-attention: `heads` heads of dimension model_dim / heads, each scaled dot-product
/// attention on its slice of the Q, K, V projections, spliced and projected by Wo [model_dim, model_dim].
Layer MultiHeadAttention(std::size_t heads, std::size_t model_dim, bool causal = false,
                         const std::string& name = "MultiHeadAttention");

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
