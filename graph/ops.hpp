#pragma once
// The public ops: one line each, implemented in the family file named in the comment above each
// group. Names and semantics follow CNTK.
#include <climits>
#include <string>
#include <vector>

#include "graph/variable.hpp"

namespace loom {

// Reduce over every static axis (the default of the static reductions).
inline constexpr int all_static_axes = INT_MIN;

// graph/ops/linear.cpp
Variable times(const Variable& x, const Variable& w, const std::string& name = {});
Variable times_transpose(const Variable& a, const Variable& b, const std::string& name = {});
// times(x, w) + b in one op: the output starts as b (broadcast) and the GEMM adds into it.
Variable affine(const Variable& x, const Variable& w, const Variable& b, const std::string& name = {});

// graph/ops/elementwise.cpp
Variable plus(const Variable& a, const Variable& b, const std::string& name = {});
Variable minus(const Variable& a, const Variable& b, const std::string& name = {});
Variable element_times(const Variable& a, const Variable& b, const std::string& name = {});
Variable element_divide(const Variable& a, const Variable& b, const std::string& name = {});
Variable log_add_exp(const Variable& a, const Variable& b, const std::string& name = {});
Variable greater(const Variable& a, const Variable& b, const std::string& name = {});
Variable less(const Variable& a, const Variable& b, const std::string& name = {});
Variable equal(const Variable& a, const Variable& b, const std::string& name = {});
Variable greater_equal(const Variable& a, const Variable& b, const std::string& name = {});
Variable less_equal(const Variable& a, const Variable& b, const std::string& name = {});
Variable not_equal(const Variable& a, const Variable& b, const std::string& name = {});
Variable element_max(const Variable& a, const Variable& b, const std::string& name = {});
Variable element_min(const Variable& a, const Variable& b, const std::string& name = {});
Variable element_select(const Variable& cond, const Variable& a, const Variable& b, const std::string& name = {});
Variable clip(const Variable& a, const Variable& lo, const Variable& hi, const std::string& name = {});
Variable negate(const Variable& a, const std::string& name = {});
Variable exp(const Variable& a, const std::string& name = {});
Variable log(const Variable& a, const std::string& name = {});
Variable sqrt(const Variable& a, const std::string& name = {});
Variable square(const Variable& a, const std::string& name = {});
Variable abs(const Variable& a, const std::string& name = {});
Variable tanh(const Variable& a, const std::string& name = {});
Variable sigmoid(const Variable& a, const std::string& name = {});
Variable relu(const Variable& a, const std::string& name = {});
Variable softplus(const Variable& a, const std::string& name = {});
Variable reciprocal(const Variable& a, const std::string& name = {});
Variable identity(const Variable& a, const std::string& name = {});
// Blocks the gradient: forward is the identity, backward passes nothing.
Variable stop_gradient(const Variable& a, const std::string& name = {});

Variable operator+(const Variable& a, const Variable& b);
Variable operator-(const Variable& a, const Variable& b);
Variable operator*(const Variable& a, const Variable& b);
Variable operator/(const Variable& a, const Variable& b);
Variable operator-(const Variable& a);

// graph/ops/reduce.cpp (static axes of the sample; reduced axes are kept with size 1, as in CNTK)
Variable reduce_sum(const Variable& a, int axis = all_static_axes, const std::string& name = {});
Variable reduce_mean(const Variable& a, int axis = all_static_axes, const std::string& name = {});
Variable reduce_max(const Variable& a, int axis = all_static_axes, const std::string& name = {});
Variable reduce_min(const Variable& a, int axis = all_static_axes, const std::string& name = {});
Variable reduce_log_sum_exp(const Variable& a, int axis = all_static_axes, const std::string& name = {});
Variable softmax(const Variable& a, int axis = -1, const std::string& name = {});
Variable log_softmax(const Variable& a, int axis = -1, const std::string& name = {});

// graph/ops/shape.cpp
Variable splice(const std::vector<Variable>& inputs, int axis = -1, const std::string& name = {});
Variable slice(const Variable& a, int axis, int begin, int end, const std::string& name = {});
Variable reshape(const Variable& a, const Shape& shape, const std::string& name = {});
Variable transpose(const Variable& a, const std::vector<std::size_t>& perm, const std::string& name = {});
Variable one_hot(const Variable& ids, std::size_t num_classes, const std::string& name = {});
struct TopK {
    Variable values;   // the k largest along the last axis, largest first
    Variable indices;  // their positions (as numbers), no gradient
};
TopK top_k(const Variable& a, std::size_t k, const std::string& name = {});

// graph/ops/loss.cpp (per item: the sample is reduced to shape [1])
Variable cosine_distance(const Variable& a, const Variable& b, const std::string& name = {});  // the cosine SIMILARITY
Variable squared_error(const Variable& a, const Variable& b, const std::string& name = {});
Variable binary_cross_entropy(const Variable& p, const Variable& y, const std::string& name = {});
Variable cross_entropy_with_softmax(const Variable& z, const Variable& y, const std::string& name = {});
Variable classification_error(const Variable& z, const Variable& y, const std::string& name = {});

// graph/ops/delay.cpp: the value `time_step` steps before (after) on the same sequence, or
// `initial_state` where that falls outside it. initial_state may be a scalar, a tensor of the
// sample shape, a parameter, or a per-sequence (batch) value.
Variable past_value(const Variable& a, const Variable& initial_state = Variable(0.0), std::size_t time_step = 1,
                    const std::string& name = {});
Variable future_value(const Variable& a, const Variable& initial_state = Variable(0.0), std::size_t time_step = 1,
                      const std::string& name = {});

namespace sequence {
using loom::future_value;
using loom::past_value;

// graph/ops/sequence.cpp
Variable is_first(const Variable& a, const std::string& name = {});
Variable is_last(const Variable& a, const std::string& name = {});
Variable first(const Variable& a, const std::string& name = {});
Variable last(const Variable& a, const std::string& name = {});
// Steps [begin, end) of each sequence; negative indices count from each sequence's end, end 0 = to the end.
Variable slice(const Variable& a, int begin, int end, const std::string& name = {});
// A per-sequence (batch) value repeated along every step of `like`'s sequences.
Variable broadcast_as(const Variable& v, const Variable& like, const std::string& name = {});
Variable reduce_sum(const Variable& a, const std::string& name = {});
Variable reduce_max(const Variable& a, const std::string& name = {});
Variable reduce_mean(const Variable& a, const std::string& name = {});
Variable softmax(const Variable& a, const std::string& name = {});
Variable length(const Variable& a, const std::string& name = {});
// The steps where cond (a sequence of shape [1] on a's axis) is non-zero, as a new sequence axis.
Variable gather(const Variable& a, const Variable& cond, const std::string& name = {});
struct Unpacked {
    Variable data;  // batch value [T_max, sample...], padding filled with padding_value
    Variable mask;  // batch value [T_max], 1 on real steps and 0 on padding
};
Unpacked unpack(const Variable& a, double padding_value = 0.0, const std::string& name = {});

// graph/ops/sequence_where.cpp
// The positions t (as numbers, shape [1]) where cond (a sequence of shape [1]) is non-zero, on a
// new sequence axis; a whole count c > 1 repeats t c times (CNTK's repeat factor).
Variable where(const Variable& cond, const std::string& name = {});
// The inverse of gather: x's steps placed, in order, at the steps of cond's sequence where cond is
// non-zero, zeros elsewhere; the result is on cond's axis.
Variable scatter(const Variable& x, const Variable& cond, const std::string& name = {});
}  // namespace sequence

// graph/ops/sequence_where.cpp: the inverse of sequence::unpack. padded: a batch value
// [T_max, sample...] per item; lengths: a batch value [1] of whole numbers 1..T_max. Item n's first
// lengths[n] steps become a sequence on a new axis.
Variable to_sequence(const Variable& padded, const Variable& lengths, const std::string& name = {});

// graph/ops/batch.cpp: across the N items of a batch value [N, sample...] (a sequence operand is an
// error: reduce it first). The reductions return a static value [sample...] (no dynamic axis);
// broadcast_as puts a static value back on each item of `like`'s batch.
namespace batch {
Variable reduce_sum(const Variable& a, const std::string& name = {});
Variable reduce_mean(const Variable& a, const std::string& name = {});
Variable reduce_max(const Variable& a, const std::string& name = {});
Variable softmax(const Variable& a, const std::string& name = {});
Variable broadcast_as(const Variable& v, const Variable& like, const std::string& name = {});
}  // namespace batch

// graph/ops/embedding.cpp: row ids[i] of table [V, D] for each id (sample shape [1], on any dynamic
// axis) -> [D]. The backward adds into the used rows only; an id outside 0..V-1 is a UserError.
Variable embedding(const Variable& ids, const Variable& table, const std::string& name = {});

// graph/ops/random.cpp: in training mode (graph/mode.hpp) a * a fresh Bernoulli mask / (1 - rate)
// at every evaluation; the identity in inference mode. seed 0 takes a seed from global_rng().
Variable dropout(const Variable& a, double rate, std::uint64_t seed = 0, const std::string& name = {});

// graph/ops/rnn.cpp: the fused LSTM cell, from gate pre-activations z = [i, f, o, g] ([4n]):
// c' = sigmoid(z_f) * c + sigmoid(z_i) * tanh(z_g), and h' = sigmoid(z_o) * tanh(c').
Variable lstm_cell_state(const Variable& z, const Variable& c, const std::string& name = {});
Variable lstm_cell_output(const Variable& z, const Variable& c_next, const std::string& name = {});

}  // namespace loom
