#include "layers/attention.hpp"

#include <cmath>
#include <limits>

#include "core/errors.hpp"

namespace loom::layers {

namespace {

std::size_t last_dim(const std::string& who, const Variable& x) {
    if (x.shape().rank() == 0)
        throw UserError(who + ": " + x.label() + " has no axis (sample shape " + x.shape().str() + ")");
    return x.shape()[x.shape().rank() - 1];
}

Variable scale_by(const Variable& v, double s) { return s == 1.0 ? v : v * constant(s); }

// Batch query: the context on the keys' own sequence axis; sequence::softmax ignores padding.
Attention attend_over_sequence(const Variable& scores, const Variable& values) {
    Variable weights = sequence::softmax(scores);
    return {sequence::reduce_sum(weights * values), weights, scores};
}

// Sequence query (each query step attends over all keys): the queries are unpacked to a batch
// tensor [Tq, ...] and broadcast onto the KEYS' axis, so that `scores` is a sequence on the keys'
// axis of [Tq, 1] (query i's score for key j at key step j). The normalization is then
// sequence::softmax along the keys' axis, which skips padded keys and is stable, and
// sequence::reduce_sum gives every query's context at once as a batch [Tq, dv]. Query step i then
// picks row i (a one-hot selector built from the step positions). Causal masking sets -inf where
// key j comes after query i. Cost: O(Tq * Tk) memory per sequence, as any full attention.
Variable unpack_queries(const Variable& query_like, const Variable& keys) {
    return sequence::broadcast_as(sequence::unpack(query_like).data, keys);  // [Tq, ...] on the keys' axis
}

Attention attend_steps(const Variable& query, const Variable& keys, Variable scores, const Variable& values,
                       bool causal) {
    Variable query_pos = sequence_positions(query);  // [1] on the query's axis
    if (causal) {
        if (!(query.axis() == keys.axis()))
            throw UserError("attention: causal masking needs the query and the keys on the same sequence axis (" +
                            query.label() + " is on the " + query.axis().str() + ", " + keys.label() + " on the " +
                            keys.axis().str() + ")");
        // Padded query rows read position 0, so they still see key 0 and never normalize an empty set.
        Variable i = unpack_queries(query_pos, keys);  // [Tq, 1]
        scores = element_select(greater_equal(i, sequence_positions(keys)), scores,
                                constant(-std::numeric_limits<double>::infinity()));
    }
    Variable weights = sequence::softmax(scores);                    // [Tq, 1] on the keys' axis
    Variable all_contexts = sequence::reduce_sum(weights * values);  // batch [Tq, dv]
    // Padded query rows hold -1, so no real step selects them.
    Variable rows = sequence::broadcast_as(sequence::unpack(query_pos, -1.0).data, query);  // [Tq, 1]
    Variable selector = equal(times(rows, constant(xt::xarray<double>{1.0})), query_pos);   // [Tq], one-hot at i
    return {times(selector, sequence::broadcast_as(all_contexts, query)), weights, scores};
}

// Over a memory: padded keys masked to -inf, a softmax over the block's axis, the context one
// product per item ([T_max] x [T_max, dv]).
Attention attend_memory(const Variable& scores, const AttentionMemory& m) {
    Variable masked = element_select(m.mask, scores, constant(-std::numeric_limits<double>::infinity()));
    Variable weights = softmax(masked);
    return {times(weights, m.values), weights, masked};
}

void check_memory(const std::string& who, const Variable& query, const AttentionMemory& m) {
    for (const Variable& v : m.list())
        if (!v || v.axis().kind != Axis::Kind::Batch)
            throw UserError(who +
                            ": every field of the attention memory must be a batch value (from attention_memory "
                            "or attention_memory_inputs); " +
                            (v ? v.label() + " is on the " + v.axis().str() : std::string("one is empty")));
    if (query.axis().kind == Axis::Kind::None)
        throw UserError(who + ": the query " + query.label() + " has no dynamic axis");
}

void check_query(const std::string& who, const Variable& query, const Variable& keys, const Variable& values) {
    if (!keys.axis().is_sequence() || !(keys.axis() == values.axis()))
        throw UserError(who + ": keys " + keys.label() + " and values " + values.label() +
                        " must be sequences on the same axis");
    if (!query.axis().is_dynamic())
        throw UserError(who + ": the query " + query.label() + " needs a batch or sequence axis");
}

}  // namespace

Variable sequence_softmax_weights(const Variable& scores) {
    Variable p = placeholder(scores.shape(), "log_cumsum_exp");
    Variable previous = element_select(sequence::is_first(scores), constant(-1e30), past_value(p));
    Variable log_cumsum_exp = log_add_exp(scores, previous);
    log_cumsum_exp.replace_placeholders({{p, log_cumsum_exp}});
    Variable log_sum_exp = sequence::last(log_cumsum_exp);
    return exp(scores - sequence::broadcast_as(log_sum_exp, scores));
}

Attention sequence_softmax_attention(const Variable& scores, const Variable& values) {
    Variable weights = sequence_softmax_weights(scores);
    return {sequence::reduce_sum(weights * values), weights, scores};
}

Variable sequence_positions(const Variable& x) {
    Variable p = placeholder({1}, "position");
    Variable pos = element_select(sequence::is_first(x), constant(0.0), past_value(p) + constant(1.0));
    pos.replace_placeholders({{p, pos}});
    return pos;
}

Attention dot_product_attention(const Variable& query, const Variable& keys, const Variable& values, bool scaled,
                                bool causal) {
    check_query("dot_product_attention", query, keys, values);
    const double scale = scaled ? 1.0 / std::sqrt(static_cast<double>(last_dim("dot_product_attention", keys))) : 1.0;
    if (!query.axis().is_sequence()) {
        if (causal)
            throw UserError("dot_product_attention: causal masking needs a sequence query, " + query.label() +
                            " is not");
        Variable scores = reduce_sum(sequence::broadcast_as(query, keys) * keys, -1);
        return attend_over_sequence(scale_by(scores, scale), values);
    }
    const std::size_t d = last_dim("dot_product_attention", keys);
    Variable scores = times(unpack_queries(query, keys), reshape(keys, Shape{d, 1}));  // [Tq, 1]
    return attend_steps(query, keys, scale_by(scores, scale), values, causal);
}

AttentionMemory AttentionMemory::from_list(const std::vector<Variable>& list) {
    if (list.size() != 5)
        throw UserError(
            "AttentionMemory::from_list: expects 5 variables (keys, values, mask, positions, length), got " +
            std::to_string(list.size()));
    return {list[0], list[1], list[2], list[3], list[4]};
}

AttentionMemory attention_memory(const Variable& keys, const Variable& values_in) {
    const Variable values = values_in ? values_in : keys;
    if (!keys.axis().is_sequence() || !(keys.axis() == values.axis()))
        throw UserError("attention_memory: keys " + keys.label() + " and values " + values.label() +
                        " must be sequences on one axis");
    const auto k = sequence::unpack(keys);
    // Keys that are also the values are unpacked once: one block per item to read (and to bind).
    return {k.data, values_in ? sequence::unpack(values).data : k.data, k.mask,
            times(sequence::unpack(sequence_positions(keys)).data, constant(xt::xarray<double>{1.0})),  // [T_max]
            sequence::length(keys)};
}

AttentionMemory attention_memory_inputs(std::size_t key_dim, std::size_t value_dim, const std::string& name) {
    Variable keys = input_variable({any_size, key_dim}, name + ".keys");
    return {keys, value_dim == 0 ? keys : input_variable({any_size, value_dim}, name + ".values"),
            input_variable({any_size}, name + ".mask"), input_variable({any_size}, name + ".positions"),
            input_variable({1}, name + ".length")};
}

Attention dot_product_attention(const Variable& query, const AttentionMemory& memory, bool scaled) {
    check_memory("dot_product_attention", query, memory);
    const double d = static_cast<double>(last_dim("dot_product_attention", memory.keys));
    Attention a = attend_memory(scale_by(times_transpose(query, memory.keys), scaled ? 1.0 / std::sqrt(d) : 1.0),
                                memory);  // [T_max]
    if (query.axis().is_sequence()) return a;
    // One query per item (a generating step): the context from the attention op, which reads each
    // row's keys and values where they lie (a Generator's memory once per item, through its
    // index; no copy per hypothesis). It scales by 1 / sqrt(d): an unscaled score's query is
    // multiplied by sqrt(d) first. The weights and scores above are computed only when read.
    a.context = attention(scale_by(query, scaled ? 1.0 : std::sqrt(d)), memory.keys, memory.values,
                          {.heads = 1, .key_mask = memory.mask});
    return a;
}

Attention self_attention(const Variable& x, bool scaled, bool causal) {
    return dot_product_attention(x, x, x, scaled, causal);
}

Layer ParametricSelfAttention(bool causal, const std::string& name) {
    struct State {
        Parameter wq, wk, wv, wo;
    };
    auto s = std::make_shared<State>();
    auto call = [=](const Variable& x) {
        const std::size_t d = last_dim(name, x);
        if (!s->wq) {
            s->wq = parameter(Shape{d, d}, glorot_uniform(), name + ".Wq");
            s->wk = parameter(Shape{d, d}, glorot_uniform(), name + ".Wk");
            s->wv = parameter(Shape{d, d}, glorot_uniform(), name + ".Wv");
            s->wo = parameter(Shape{d, d}, glorot_uniform(), name + ".Wo");
        }
        Variable q = times(x, s->wq), k = times(x, s->wk), v = times(x, s->wv);
        return times(tanh(dot_product_attention(q, k, v, true, causal).context), s->wo);
    };
    auto params = [s] { return s->wq ? std::vector<Parameter>{s->wq, s->wk, s->wv, s->wo} : std::vector<Parameter>{}; };
    return Layer(name, call, params);
}

// ---- multi-head ----

struct MultiHeadAttention::State {
    MultiHeadAttentionOptions options;
    Parameter q_w, q_b, k_w, k_b, v_w, v_b, out_w, out_b;

    // x W + b over x's last axis (x W without bias).
    static Variable project(const Variable& x, const Parameter& w, const Parameter& b) {
        return b ? affine(x, w, b) : times(x, w);
    }
    // A UserError unless x's sample shape is [dim] (or [Tk, dim] over a memory, rank 2).
    void check_width(const Variable& x, const char* what, std::size_t dim, std::size_t rank = 1) const {
        const Shape& s = x.shape();
        if (s.rank() == rank && s[rank - 1] == dim) return;
        const std::string want = rank == 1 ? "[" + std::to_string(dim) + "]" : "[Tk, " + std::to_string(dim) + "]";
        throw UserError(options.name + ": the " + what + " " + x.label() + " has sample shape " + s.str() +
                        "; the layer takes " + want);
    }
    void check_sequence(const Variable& x, const char* what) const {
        if (!x.axis().is_sequence())
            throw UserError(options.name + ": the " + what + " " + x.label() + " is on the " + x.axis().str() +
                            "; attention over sequences takes sequences (over_memory takes one query per item)");
    }
};

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options) : state_(std::make_shared<State>()) {
    MultiHeadAttentionOptions& o = state_->options = options;
    if (o.model_dim == 0 || o.heads == 0 || o.model_dim % o.heads != 0)
        throw UserError(o.name + ": model_dim " + std::to_string(o.model_dim) +
                        " must be a positive multiple of heads (" + std::to_string(o.heads) + ")");
    if (!(o.dropout >= 0.0 && o.dropout < 1.0))
        throw UserError(o.name + ": dropout " + std::to_string(o.dropout) + " must be in [0, 1)");
    if (o.key_dim == 0) o.key_dim = o.model_dim;
    if (o.value_dim == 0) o.value_dim = o.model_dim;
    // Made in the order q, k, v, out, each W then b: the Transformer layers' draws, one for one.
    State& s = *state_;
    auto make = [&](Parameter& w, Parameter& b, std::size_t in, const std::string& part) {
        w = parameter(Shape{in, o.model_dim}, glorot_uniform(), o.name + "." + part + ".W");
        if (o.bias) b = parameter(Shape{o.model_dim}, zeros(), o.name + "." + part + ".b");
    };
    make(s.q_w, s.q_b, o.model_dim, "q");
    make(s.k_w, s.k_b, o.key_dim, "k");
    make(s.v_w, s.v_b, o.value_dim, "v");
    make(s.out_w, s.out_b, o.model_dim, "out");
}

MultiHeadAttention::MultiHeadAttention(std::size_t heads, std::size_t model_dim, bool causal, const std::string& name)
    : MultiHeadAttention(
          MultiHeadAttentionOptions{.model_dim = model_dim, .heads = heads, .causal = causal, .name = name}) {}

Variable MultiHeadAttention::operator()(const Variable& x) const { return forward(x, x, x, false).output; }

Variable MultiHeadAttention::operator()(const Variable& query, const Variable& key, const Variable& value) const {
    return forward(query, key, value, false).output;
}

MultiHeadAttentionOutput MultiHeadAttention::forward(const Variable& query, const Variable& key, const Variable& value,
                                                     bool need_weights, bool average_weights) const {
    const State& s = *state_;
    const MultiHeadAttentionOptions& o = s.options;
    s.check_width(query, "query", o.model_dim);
    s.check_width(key, "key", o.key_dim);
    s.check_width(value, "value", o.value_dim);
    s.check_sequence(query, "query");
    s.check_sequence(key, "key");
    s.check_sequence(value, "value");
    if (!(key.axis() == value.axis()))
        throw UserError(o.name + ": the key " + key.label() + " and the value " + value.label() +
                        " must be on one sequence axis");
    if (o.causal && !(query.axis() == key.axis()))
        throw UserError(o.name + ": causal attention needs the query " + query.label() +
                        " and the key on one sequence axis");
    const Variable q = project_query(query), k = project_key(key);
    MultiHeadAttentionOutput out;
    out.output = project_output(
        attention(q, k, project_value(value), {.heads = o.heads, .causal = o.causal, .dropout = o.dropout}));
    if (need_weights) {
        const AttentionOptions weights{.heads = o.heads, .causal = o.causal};
        out.weights = average_weights ? attention_weights(q, k, weights) : attention_head_weights(q, k, weights);
    }
    return out;
}

Variable MultiHeadAttention::over_memory(const Variable& query, const Variable& keys, const Variable& values,
                                         const Variable& key_mask) const {
    const State& s = *state_;
    const MultiHeadAttentionOptions& o = s.options;
    s.check_width(query, "query", o.model_dim);
    s.check_width(keys, "keys", o.key_dim, 2);
    s.check_width(values, "values", o.value_dim, 2);
    for (const Variable* v : {&query, &keys, &values, &key_mask})
        if (*v && v->axis().is_sequence())
            throw UserError(o.name + ": over a memory, the query, keys, values and mask are batch values; " +
                            v->label() + " is on the " + v->axis().str());
    return project_output(attention(project_query(query), project_key(keys), project_value(values),
                                    {.heads = o.heads, .key_mask = key_mask}));
}

Variable MultiHeadAttention::project_query(const Variable& x) const {
    return State::project(x, state_->q_w, state_->q_b);
}
Variable MultiHeadAttention::project_key(const Variable& x) const {
    return State::project(x, state_->k_w, state_->k_b);
}
Variable MultiHeadAttention::project_value(const Variable& x) const {
    return State::project(x, state_->v_w, state_->v_b);
}
Variable MultiHeadAttention::project_output(const Variable& context) const {
    return State::project(context, state_->out_w, state_->out_b);
}

std::size_t MultiHeadAttention::heads() const { return state_->options.heads; }
std::size_t MultiHeadAttention::model_dim() const { return state_->options.model_dim; }
const MultiHeadAttentionOptions& MultiHeadAttention::options() const { return state_->options; }

std::vector<Parameter> MultiHeadAttention::parameters() const {
    const State& s = *state_;
    std::vector<Parameter> p;
    for (const Parameter* x : {&s.q_w, &s.q_b, &s.k_w, &s.k_b, &s.v_w, &s.v_b, &s.out_w, &s.out_b})
        if (*x) p.push_back(*x);
    return p;
}

MultiHeadAttention::operator Layer() const {
    const MultiHeadAttention self = *this;
    return Layer(
        state_->options.name, [self](const Variable& x) { return self(x); }, [self] { return self.parameters(); });
}

// ---- additive (Bahdanau) ----

struct AdditiveAttention::State {
    std::size_t dim;
    std::string name;
    Parameter w_k, w_q, v;
};

AdditiveAttention::AdditiveAttention(std::size_t attention_dim, const std::string& name)
    : state_(std::make_shared<State>(State{attention_dim, name, {}, {}, {}})) {
    state_->v = parameter(Shape{attention_dim}, glorot_uniform(), name + ".v");
}

Attention AdditiveAttention::operator()(const Variable& query, const Variable& keys, const Variable& values) const {
    State& s = *state_;
    check_query(s.name, query, keys, values);
    if (!s.w_k) {
        s.w_k = parameter(Shape{last_dim(s.name, keys), s.dim}, glorot_uniform(), s.name + ".W_k");
        s.w_q = parameter(Shape{last_dim(s.name, query), s.dim}, glorot_uniform(), s.name + ".W_q");
    }
    Variable kp = times(keys, s.w_k), qp = times(query, s.w_q);  // the keys' projection runs once over all steps
    if (!query.axis().is_sequence()) {
        Variable hidden = tanh(kp + sequence::broadcast_as(qp, keys));
        return attend_over_sequence(reduce_sum(hidden * s.v, -1), values);
    }
    Variable hidden = tanh(unpack_queries(qp, keys) + kp);                                          // [Tq, a] + [a]
    return attend_steps(query, keys, times(hidden, reshape(s.v, Shape{s.dim, 1})), values, false);  // [Tq, 1]
}

Attention AdditiveAttention::operator()(const Variable& query, const AttentionMemory& memory) const {
    State& s = *state_;
    check_memory(s.name, query, memory);
    if (!s.w_k) {
        s.w_k = parameter(Shape{last_dim(s.name, memory.keys), s.dim}, glorot_uniform(), s.name + ".W_k");
        s.w_q = parameter(Shape{last_dim(s.name, query), s.dim}, glorot_uniform(), s.name + ".W_q");
    }
    Variable hidden = tanh(times(memory.keys, s.w_k) + times(query, s.w_q));  // [T_max, a] + [a]
    return attend_memory(times_transpose(s.v, hidden), memory);               // [T_max]
}

std::vector<Parameter> AdditiveAttention::parameters() const {
    std::vector<Parameter> p;
    if (state_->w_k) p.insert(p.end(), {state_->w_k, state_->w_q});
    p.push_back(state_->v);
    return p;
}

// ---- general (Luong) ----

struct GeneralAttention::State {
    std::string name;
    Parameter w;
};

GeneralAttention::GeneralAttention(const std::string& name) : state_(std::make_shared<State>(State{name, {}})) {}

Attention GeneralAttention::operator()(const Variable& query, const Variable& keys, const Variable& values) const {
    State& s = *state_;
    check_query(s.name, query, keys, values);
    if (!s.w) s.w = parameter(Shape{last_dim(s.name, query), last_dim(s.name, keys)}, glorot_uniform(), s.name + ".W");
    return dot_product_attention(times(query, s.w), keys, values);
}

Attention GeneralAttention::operator()(const Variable& query, const AttentionMemory& memory) const {
    State& s = *state_;
    check_memory(s.name, query, memory);
    if (!s.w)
        s.w = parameter(Shape{last_dim(s.name, query), last_dim(s.name, memory.keys)}, glorot_uniform(), s.name + ".W");
    return dot_product_attention(times(query, s.w), memory);
}

std::vector<Parameter> GeneralAttention::parameters() const {
    return state_->w ? std::vector<Parameter>{state_->w} : std::vector<Parameter>{};
}

// ---- local-p ----

struct LocalAttention::State {
    double half_window;
    std::string name;
    Parameter w_p, v_p;
    Variable p_t;
};

LocalAttention::LocalAttention(double half_window, const std::string& name)
    : state_(std::make_shared<State>(State{half_window, name, {}, {}, {}})) {
    if (!(half_window > 0)) throw UserError(name + ": the half window D must be positive");
}

Attention LocalAttention::operator()(const Variable& target, const Variable& source) const {
    State& s = *state_;
    check_query(s.name, target, source, source);
    if (target.axis().is_sequence())
        throw UserError(s.name + ": the target state " + target.label() +
                        " must be one vector per sequence (a batch value), e.g. sequence::last of the decoder");
    const std::size_t h = last_dim(s.name, source);
    if (!s.w_p) {
        s.w_p = parameter(Shape{last_dim(s.name, target), h}, glorot_uniform(), s.name + ".W_p");
        s.v_p = parameter(Shape{h}, glorot_uniform(), s.name + ".v_p");
    }
    // eq. 9: the aligned position, a real number in (0, S).
    s.p_t = sequence::length(source) * sigmoid(reduce_sum(tanh(times(target, s.w_p)) * s.v_p, -1));
    // eq. 10: the (dot-score) alignment times a Gaussian centred on p_t with sigma = D / 2.
    Variable scores = reduce_sum(sequence::broadcast_as(target, source) * source, -1);
    Variable align = sequence::softmax(scores);
    Variable distance = sequence_positions(source) - sequence::broadcast_as(s.p_t, source);
    const double sigma = s.half_window / 2.0;
    Variable weights = align * exp(square(distance) * constant(-1.0 / (2.0 * sigma * sigma)));
    return {sequence::reduce_sum(weights * source), weights, scores};
}

Attention LocalAttention::operator()(const Variable& target, const AttentionMemory& memory) const {
    State& s = *state_;
    check_memory(s.name, target, memory);
    const std::size_t h = last_dim(s.name, memory.values);
    if (!s.w_p) {
        s.w_p = parameter(Shape{last_dim(s.name, target), h}, glorot_uniform(), s.name + ".W_p");
        s.v_p = parameter(Shape{h}, glorot_uniform(), s.name + ".v_p");
    }
    s.p_t = memory.length * sigmoid(reduce_sum(tanh(times(target, s.w_p)) * s.v_p, -1));  // [1]
    Attention a = attend_memory(times_transpose(target, memory.values), memory);          // the dot alignment
    const double sigma = s.half_window / 2.0;
    Variable weights = a.weights * exp(square(memory.positions - s.p_t) * constant(-1.0 / (2.0 * sigma * sigma)));
    return {times(weights, memory.values), weights, a.scores};
}

Variable LocalAttention::aligned_position() const { return state_->p_t; }

std::vector<Parameter> LocalAttention::parameters() const {
    return state_->w_p ? std::vector<Parameter>{state_->w_p, state_->v_p} : std::vector<Parameter>{};
}

}  // namespace loom::layers
