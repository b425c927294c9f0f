#include "layers/transformer.hpp"

#include <cmath>
#include <optional>

#include "core/errors.hpp"
#include "graph/ops.hpp"
#include "layers/attention.hpp"

namespace loom::layers {

namespace {

// x W + b, W [in, out], b [out].
struct Projection {
    Parameter w, b;
    Projection() = default;
    Projection(std::size_t in, std::size_t out, const std::string& name)
        : w(parameter(Shape{in, out}, glorot_uniform(), name + ".W")), b(parameter(Shape{out}, zeros(), name + ".b")) {}
    Variable operator()(const Variable& x) const { return affine(x, w, b); }
    void add_to(std::vector<Parameter>& p) const { p.insert(p.end(), {w, b}); }
};

// Layer norm with its scale and bias made now (LayerNormalization makes them at its first call).
struct Norm {
    Layer layer;
    Norm() = default;
    Norm(std::size_t dim, double epsilon, const std::string& name) : layer(LayerNormalization(epsilon, name)) {
        layer(input_variable(Shape{dim}));  // makes the parameters
    }
    Variable operator()(const Variable& x) const { return layer(x); }
    void add_to(std::vector<Parameter>& p) const { append_unique(p, layer.parameters()); }
};

void check_options(const std::string& name, const TransformerOptions& o) {
    if (o.model_dim == 0 || o.heads == 0 || o.model_dim % o.heads != 0)
        throw UserError(name + ": model_dim " + std::to_string(o.model_dim) +
                        " must be a positive multiple of heads (" + std::to_string(o.heads) + ")");
    if (o.feedforward_dim == 0) throw UserError(name + ": feedforward_dim must be at least 1");
    if (!(o.dropout >= 0.0 && o.dropout < 1.0))
        throw UserError(name + ": dropout " + std::to_string(o.dropout) + " must be in [0, 1)");
    if (!(o.attention_dropout >= 0.0 && o.attention_dropout < 1.0))
        throw UserError(name + ": attention_dropout " + std::to_string(o.attention_dropout) + " must be in [0, 1)");
    if (o.feedforward_dropout && !(*o.feedforward_dropout >= 0.0 && *o.feedforward_dropout < 1.0))
        throw UserError(name + ": feedforward_dropout " + std::to_string(*o.feedforward_dropout) +
                        " must be in [0, 1)");
    if (!(o.epsilon > 0.0)) throw UserError(name + ": epsilon must be positive");
    if (o.activation != FeedForwardActivation::relu && o.activation != FeedForwardActivation::gelu)
        throw UserError(name + ": activation must be relu or gelu");
}

void check_width(const std::string& name, const Variable& x, std::size_t model_dim, const char* what = "input") {
    const Shape& s = x.shape();
    if (s.rank() != 1 || s[0] != model_dim)
        throw UserError(name + ": the " + what + " " + x.label() + " has sample shape " + s.str() +
                        "; the layer takes [" + std::to_string(model_dim) + "] (model_dim)");
}

// A layer's multi-head attention [nn.MultiheadAttention]: self-attention (causal in a decoder) or
// cross-attention, dropout on the weights in training.
std::optional<MultiHeadAttention> attention_block(const TransformerOptions& o, bool causal, const std::string& name) {
    return MultiHeadAttention(
        {.model_dim = o.model_dim, .heads = o.heads, .dropout = o.attention_dropout, .causal = causal, .name = name});
}

// The feed-forward block: W2 dropout(activation(x W1 + b1)) + b2 (GPT's MLP: no dropout there).
struct FeedForward {
    Projection inner, outer;
    double dropout_rate = 0;
    FeedForwardActivation activation = FeedForwardActivation::relu;
    FeedForward() = default;
    FeedForward(const TransformerOptions& o, const std::string& name)
        : inner(o.model_dim, o.feedforward_dim, name + ".linear1"),
          outer(o.feedforward_dim, o.model_dim, name + ".linear2"),
          dropout_rate(o.feedforward_dropout.value_or(o.dropout)),
          activation(o.activation) {}
    Variable operator()(const Variable& x) const {
        Variable h = activation == FeedForwardActivation::gelu ? gelu(inner(x)) : relu(inner(x));
        return outer(dropout(h, dropout_rate));  // rate 0: h itself
    }
    void add_to(std::vector<Parameter>& p) const {
        inner.add_to(p);
        outer.add_to(p);
    }
};

// x + block(x) with the norm before the block (pre-norm) or after the sum (post-norm); the block's
// output goes through dropout.
template <class Block>
Variable residual(const Variable& x, const Norm& norm, const TransformerOptions& o, Block&& block) {
    if (o.norm_first) return x + dropout(block(norm(x)), o.dropout);
    return norm(x + dropout(block(x), o.dropout));
}

}  // namespace

Variable sinusoidal_positional_encoding(const Variable& positions, std::size_t dim) {
    if (dim == 0 || dim % 2 != 0)
        throw UserError("sinusoidal_positional_encoding: dim " + std::to_string(dim) + " must be even and positive");
    if (!(positions.shape() == Shape{1}))
        throw UserError("sinusoidal_positional_encoding: positions must have sample shape [1], not " +
                        positions.shape().str());
    // angle_j = p * frequency_j, frequency of 2i and 2i + 1 = 10000^(-2i / dim); cos x = sin(x + pi/2).
    xt::xarray<double> frequency = xt::zeros<double>({std::size_t{1}, dim});
    xt::xarray<double> phase = xt::zeros<double>({dim});
    for (std::size_t j = 0; j < dim; ++j) {
        frequency(0, j) = std::pow(10000.0, -static_cast<double>(j - j % 2) / static_cast<double>(dim));
        phase(j) = j % 2 ? std::acos(0.0) : 0.0;
    }
    return sin(times(positions, constant(frequency)) + constant(phase));
}

Layer LearnedPositionalEncoding(std::size_t max_positions, std::size_t dim, const std::string& name,
                                const std::string& model) {
    if (max_positions == 0 || dim == 0) throw UserError(name + ": max_positions and dim must be positive");
    Parameter table = parameter(Shape{max_positions, dim}, normal(0.02), name + ".table");
    auto call = [=](const Variable& positions) {
        if (!(positions.shape() == Shape{1}))
            throw UserError(name + ": positions must have sample shape [1], not " + positions.shape().str());
        return position_embedding(positions, table, model.empty() ? name : model, name);
    };
    return Layer(name, call, [=] { return std::vector<Parameter>{table}; });
}

// ---- encoder ----

struct TransformerEncoderLayer::State {
    std::string name;
    TransformerOptions options;
    std::optional<MultiHeadAttention> self;
    FeedForward feedforward;
    Norm norm_self, norm_feedforward;
};

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerOptions& o, const std::string& name)
    : state_(std::make_shared<State>()) {
    check_options(name, o);
    State& s = *state_;
    s.name = name;
    s.options = o;
    s.self = attention_block(o, false, name + ".self_attn");
    s.feedforward = FeedForward(o, name);
    s.norm_self = Norm(o.model_dim, o.epsilon, name + ".norm1");
    s.norm_feedforward = Norm(o.model_dim, o.epsilon, name + ".norm2");
}

Variable TransformerEncoderLayer::operator()(const Variable& x) const {
    const State& s = *state_;
    check_width(s.name, x, s.options.model_dim);
    if (!x.axis().is_sequence()) throw UserError(s.name + ": the input " + x.label() + " must be a sequence");
    Variable h = residual(x, s.norm_self, s.options, [&](const Variable& y) { return (*s.self)(y); });
    return residual(h, s.norm_feedforward, s.options, s.feedforward);
}

std::vector<Parameter> TransformerEncoderLayer::parameters() const {
    std::vector<Parameter> p;
    append_unique(p, state_->self->parameters());
    state_->feedforward.add_to(p);
    state_->norm_self.add_to(p);
    state_->norm_feedforward.add_to(p);
    return p;
}

struct TransformerEncoder::State {
    std::vector<TransformerEncoderLayer> layers;
    Norm final_norm;
    bool norm_first = true;
};

TransformerEncoder::TransformerEncoder(std::size_t layers, const TransformerOptions& o, const std::string& name)
    : state_(std::make_shared<State>()) {
    if (layers == 0) throw UserError(name + ": needs at least one layer");
    check_options(name, o);
    for (std::size_t i = 0; i < layers; ++i) state_->layers.emplace_back(o, name + ".layers." + std::to_string(i));
    state_->norm_first = o.norm_first;
    if (o.norm_first) state_->final_norm = Norm(o.model_dim, o.epsilon, name + ".norm");
}

Variable TransformerEncoder::operator()(const Variable& x) const {
    Variable h = x;
    for (const auto& layer : state_->layers) h = layer(h);
    return state_->norm_first ? state_->final_norm(h) : h;
}

std::vector<Parameter> TransformerEncoder::parameters() const {
    std::vector<Parameter> p;
    for (const auto& layer : state_->layers) append_unique(p, layer.parameters());
    if (state_->norm_first) state_->final_norm.add_to(p);
    return p;
}

// ---- decoder layer ----

struct TransformerDecoderLayer::State {
    std::string name;
    TransformerOptions options;
    bool cross_attention = true;
    std::optional<MultiHeadAttention> self, cross;
    FeedForward feedforward;
    Norm norm_self, norm_cross, norm_feedforward;

    // The layer, written once for every way it runs (teacher-forced with or without its weights, and
    // a generating step): self-attention, cross-attention when made with it, feed-forward, each a
    // residual sublayer; `self_attend` and `cross_attend` say how each attention reads its keys.
    template <class Self, class Cross>
    Variable chain(const Variable& x, Self&& self_attend, Cross&& cross_attend) const {
        Variable h = residual(x, norm_self, options, self_attend);
        if (cross_attention) h = residual(h, norm_cross, options, cross_attend);
        return residual(h, norm_feedforward, options, feedforward);
    }
};

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerOptions& o, bool cross_attention,
                                                 const std::string& name)
    : state_(std::make_shared<State>()) {
    check_options(name, o);
    State& s = *state_;
    s.name = name;
    s.options = o;
    s.cross_attention = cross_attention;
    s.self = attention_block(o, true, name + ".self_attn");
    if (cross_attention) {
        s.cross = attention_block(o, false, name + ".multihead_attn");
        s.norm_cross = Norm(o.model_dim, o.epsilon, name + ".norm2");
    }
    s.feedforward = FeedForward(o, name);
    s.norm_self = Norm(o.model_dim, o.epsilon, name + ".norm1");
    s.norm_feedforward = Norm(o.model_dim, o.epsilon, name + ".norm3");
}

bool TransformerDecoderLayer::has_cross_attention() const { return state_->cross_attention; }

Variable TransformerDecoderLayer::operator()(const Variable& x, const Variable& memory) const {
    return forward(x, memory, false).output;
}

TransformerOutput TransformerDecoderLayer::forward(const Variable& x, const Variable& memory, bool need_weights,
                                                   bool average_weights) const {
    const State& s = *state_;
    check_width(s.name, x, s.options.model_dim);
    if (!x.axis().is_sequence()) throw UserError(s.name + ": the input " + x.label() + " must be a sequence");
    if (s.cross_attention != static_cast<bool>(memory))
        throw UserError(s.name + (s.cross_attention ? ": attends over an encoder; give its output as memory"
                                                    : ": has no cross-attention (made decoder-only); give no memory"));
    if (s.cross_attention) check_width(s.name, memory, s.options.model_dim, "memory");
    TransformerOutput out;
    out.output = s.chain(
        x, [&](const Variable& y) { return (*s.self)(y); },
        [&](const Variable& y) {
            // The weights read the very queries and keys the attention reads: one graph.
            MultiHeadAttentionOutput a = s.cross->forward(y, memory, memory, need_weights, average_weights);
            if (need_weights) out.cross_attention_weights.push_back(a.weights);
            return a.output;
        });
    return out;
}

CrossMemory TransformerDecoderLayer::cross_memory(const Variable& memory) const {
    const State& s = *state_;
    if (!s.cross_attention) throw UserError(s.name + ": has no cross-attention (made decoder-only)");
    check_width(s.name, memory, s.options.model_dim, "memory");
    sequence::Unpacked keys = sequence::unpack(s.cross->project_key(memory));
    return {keys.data, sequence::unpack(s.cross->project_value(memory)).data, keys.mask};
}

Variable TransformerDecoderLayer::cross_attention_weights(const Variable& x, const Variable& memory) const {
    if (!state_->cross_attention) throw UserError(state_->name + ": has no cross-attention (made decoder-only)");
    return forward(x, memory, true).cross_attention_weights.at(0);  // the layer written once: forward's graph
}

Variable TransformerDecoderLayer::step(const Variable& x, KeyValueCache& cache, const CrossMemory& cross) const {
    const State& s = *state_;
    const TransformerOptions& o = s.options;
    check_width(s.name, x, o.model_dim);
    if (s.cross_attention != static_cast<bool>(cross.keys))
        throw UserError(s.name + (s.cross_attention ? ": attends over an encoder; give its cross memory"
                                                    : ": has no cross-attention; give no cross memory"));
    const Shape row{1, o.model_dim};
    auto self = [&](const Variable& y) {
        Variable key = s.self->project_key(y), value = s.self->project_value(y);
        Variable attended = attention(s.self->project_query(y), cache.keys, cache.values,
                                      {.heads = o.heads, .step_key = key, .step_value = value});
        cache.step_keys = reshape(key, row);
        cache.step_values = reshape(value, row);
        return s.self->project_output(attended);
    };
    return s.chain(x, self, [&](const Variable& y) {
        return s.cross->project_output(
            attention(s.cross->project_query(y), cross.keys, cross.values, {.heads = o.heads, .key_mask = cross.mask}));
    });
}

std::vector<Parameter> TransformerDecoderLayer::parameters() const {
    const State& s = *state_;
    std::vector<Parameter> p;
    append_unique(p, s.self->parameters());
    if (s.cross_attention) append_unique(p, s.cross->parameters());
    s.feedforward.add_to(p);
    s.norm_self.add_to(p);
    if (s.cross_attention) s.norm_cross.add_to(p);
    s.norm_feedforward.add_to(p);
    return p;
}

// ---- the decoder stack ----

struct TransformerDecoder::State {
    std::string name;
    TransformerOptions options;
    bool cross_attention = true;
    std::vector<TransformerDecoderLayer> layers;
    Norm final_norm;

    Variable finish(const Variable& h) const { return options.norm_first ? final_norm(h) : h; }
};

TransformerDecoder::TransformerDecoder(std::size_t layers, const TransformerOptions& o, bool cross_attention,
                                       const std::string& name)
    : state_(std::make_shared<State>()) {
    if (layers == 0) throw UserError(name + ": needs at least one layer");
    check_options(name, o);
    State& s = *state_;
    s.name = name;
    s.options = o;
    s.cross_attention = cross_attention;
    for (std::size_t i = 0; i < layers; ++i)
        s.layers.emplace_back(o, cross_attention, name + ".layers." + std::to_string(i));
    if (o.norm_first) s.final_norm = Norm(o.model_dim, o.epsilon, name + ".norm");
}

Variable TransformerDecoder::operator()(const Variable& x, const Variable& memory) const {
    return forward(x, memory, false).output;
}

TransformerOutput TransformerDecoder::forward(const Variable& x, const Variable& memory, bool need_weights,
                                              bool average_weights) const {
    const State& s = *state_;
    TransformerOutput out{x};
    for (const auto& layer : s.layers) {
        TransformerOutput o = layer.forward(out.output, memory, need_weights, average_weights);
        out.output = o.output;
        out.cross_attention_weights.insert(out.cross_attention_weights.end(), o.cross_attention_weights.begin(),
                                           o.cross_attention_weights.end());
    }
    out.output = s.finish(out.output);
    return out;
}

std::vector<Variable> TransformerDecoder::memory(const Variable& encoder_output) const {
    std::vector<Variable> m;
    if (!state_->cross_attention) return m;
    for (const auto& layer : state_->layers) {
        CrossMemory c = layer.cross_memory(encoder_output);
        m.insert(m.end(), {c.keys, c.values, c.mask});
    }
    return m;
}

std::vector<Variable> TransformerDecoder::memory_inputs() const {
    const State& s = *state_;
    std::vector<Variable> m;
    if (!s.cross_attention) return m;
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
        const std::string layer = s.name + ".layers." + std::to_string(i);
        m.push_back(input_variable({any_size, s.options.model_dim}, layer + ".cross_keys"));
        m.push_back(input_variable({any_size, s.options.model_dim}, layer + ".cross_values"));
        m.push_back(input_variable({any_size}, layer + ".cross_mask"));
    }
    return m;
}

Variable TransformerDecoder::step(const Variable& x, std::vector<KeyValueCache>& caches,
                                  const std::vector<Variable>& memory) const {
    const State& s = *state_;
    const std::size_t n = s.layers.size(), memory_size = s.cross_attention ? 3 * n : 0;
    if (caches.size() != n || memory.size() != memory_size)
        throw UserError(s.name + ": a step takes " + std::to_string(n) + " caches and " + std::to_string(memory_size) +
                        " memory inputs, not " + std::to_string(caches.size()) + " and " +
                        std::to_string(memory.size()));
    Variable h = x;
    for (std::size_t i = 0; i < n; ++i) {
        CrossMemory cross;
        if (s.cross_attention) cross = {memory[3 * i], memory[3 * i + 1], memory[3 * i + 2]};
        h = s.layers[i].step(h, caches[i], cross);
    }
    return s.finish(h);
}

std::size_t TransformerDecoder::layers() const { return state_->layers.size(); }

bool TransformerDecoder::has_cross_attention() const { return state_->cross_attention; }

std::vector<Parameter> TransformerDecoder::parameters() const {
    std::vector<Parameter> p;
    for (const auto& layer : state_->layers) append_unique(p, layer.parameters());
    if (state_->options.norm_first) state_->final_norm.add_to(p);
    return p;
}

TransformerOptions TransformerOptions::gpt(std::size_t layers, std::size_t heads, std::size_t width, std::size_t block,
                                           double dropout) {
    return {.model_dim = width,
            .heads = heads,
            .feedforward_dim = 4 * width,
            .dropout = dropout,
            .activation = FeedForwardActivation::gelu,
            .attention_dropout = dropout,
            .feedforward_dropout = 0.0,
            .decoder_layers = layers,
            .positions = PositionalEncoding::learned,
            .max_positions = block,
            .tie_embeddings = true,
            .scale_embedding = false,
            .name = "gpt",
            .init = TransformerInit::gpt};
}

}  // namespace loom::layers
