#pragma once
/// \file
/// The Transformer (Vaswani et al. 2017) built on loom::attention: the three ways of attention
/// (bidirectional self-attention in the encoder, causal self-attention and cross-attention in the
/// decoder), positional encodings, and a decoder defined once that gives two graphs over the same
/// parameters:
/// - teacher forcing (TransformerDecoder::operator()): every target step at once, the causal mask
///   instead of a loop, so training runs in parallel over the steps;
/// - one generating step (TransformerDecoder::decoder(), for Generator): it reads each layer's
///   key/value cache ([t, model_dim], the keys and values of the steps before, which the Generator
///   keeps as pages and hands over as gather_rows of them), attends over it and this step's own key
///   and value, and returns the logits and only this step's rows of each cache
///   (StateUpdate::append), which the Generator stores once: no step copies a cache. The
///   cross-attention's keys and values of the encoder's output are computed once per source
///   (TransformerDecoder::memory).
/// Names follow PyTorch's nn.Transformer*Layer where one exists (in brackets below).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "layers/decoder.hpp"
#include "layers/layer.hpp"

namespace loom::layers {

/// The feed-forward block's non-linearity [activation].
enum class FeedForwardActivation {
    relu,  ///< max(x, 0), PyTorch's default
    gelu   ///< x Phi(x) (loom::gelu, the exact form), GPT's
};

/// Sizes and options of a Transformer's layers. PyTorch's name of each is in brackets; where the
/// defaults differ, the comment says so.
struct TransformerOptions {
    std::size_t model_dim = 256;         ///< the width of every layer's input and output [d_model]
    std::size_t heads = 4;               ///< attention heads; must divide model_dim [nhead]
    std::size_t feedforward_dim = 1024;  ///< the feed-forward block's inner width [dim_feedforward]
    /// Dropout on the attention and feed-forward outputs before each residual sum, and inside the
    /// feed-forward block [dropout]; active in training mode only (graph/mode.hpp).
    double dropout = 0.1;
    /// Layer norm before each block, inside the residual branch (pre-norm; a stack then ends with a
    /// final norm), or after each residual sum (false: post-norm, the original) [norm_first; PyTorch's
    /// default is false, loom's true: pre-norm trains without a warm-up on the sizes loom's samples use].
    bool norm_first = true;
    double epsilon = 1e-5;                                           ///< the layer norms' epsilon [layer_norm_eps]
    FeedForwardActivation activation = FeedForwardActivation::relu;  ///< [activation]
    /// Dropout on the attention weights, in training mode (AttentionOptions::dropout) [PyTorch's
    /// layers apply `dropout` here too; loom's default is 0, apart from `dropout`].
    double attention_dropout = 0.0;
};

/// The sinusoidal encoding of positions (a [1] value of whole numbers, on any axis) as [dim]
/// (dim even): sin(p / 10000^(2i/dim)) at 2i, cos(...) at 2i + 1.
Variable sinusoidal_positional_encoding(const Variable& positions, std::size_t dim);

/// A learned table of `max_positions` positions [max_positions, dim]: positions (a [1] value of
/// whole numbers) -> [dim]. A position past the table is a UserError naming its size.
Layer LearnedPositionalEncoding(std::size_t max_positions, std::size_t dim,
                                const std::string& name = "LearnedPositionalEncoding");

/// One encoder layer: bidirectional self-attention and the feed-forward block, each with its
/// residual and layer norm [nn.TransformerEncoderLayer].
class TransformerEncoderLayer {
public:
    /// Makes the layer's parameters; heads that do not divide model_dim are a UserError.
    explicit TransformerEncoderLayer(const TransformerOptions& options,
                                     const std::string& name = "TransformerEncoderLayer");
    /// \param x  a sequence [model_dim]
    /// \return a sequence [model_dim] on x's axis
    Variable operator()(const Variable& x) const;
    /// \return the layer's parameters.
    std::vector<Parameter> parameters() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

/// `layers` encoder layers, and with pre-norm a final layer norm [nn.TransformerEncoder].
class TransformerEncoder {
public:
    /// Makes every layer's parameters.
    TransformerEncoder(std::size_t layers, const TransformerOptions& options,
                       const std::string& name = "TransformerEncoder");
    /// \param x  a sequence [model_dim]
    /// \return a sequence [model_dim] on x's axis
    Variable operator()(const Variable& x) const;
    /// \return every layer's parameters.
    std::vector<Parameter> parameters() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

/// A layer's key/value cache: the keys and values of every step so far, batch values [t, model_dim].
struct KeyValueCache {
    Variable keys;    ///< [t, model_dim]
    Variable values;  ///< [t, model_dim]
    /// Set by TransformerDecoderLayer::step: this step's own key and value, [1, model_dim], the rows
    /// `keys` and `values` end with on return. A decoder that returns these as its states, appended
    /// (StateUpdate::append), never copies the cache in its graph: the step reads the cache where it
    /// lies, and the Generator stores these rows once in its pages (no copy per step or hypothesis).
    Variable step_keys{};
    Variable step_values{};  ///< see step_keys
};

/// The cross-attention's keys and values of an encoder's output, unpacked per item (batch values),
/// read whole at every generating step.
struct CrossMemory {
    Variable keys;    ///< [T_max, model_dim]
    Variable values;  ///< [T_max, model_dim]
    Variable mask;    ///< [T_max]: 1 on the item's source steps, 0 on its padding
};

/// One decoder layer: causal self-attention, cross-attention over an encoder's output (unless made
/// without), and the feed-forward block, each with its residual and layer norm
/// [nn.TransformerDecoderLayer].
class TransformerDecoderLayer {
public:
    /// cross_attention false: a decoder-only layer (no encoder; seed 004's summarizing decoder).
    explicit TransformerDecoderLayer(const TransformerOptions& options, bool cross_attention = true,
                                     const std::string& name = "TransformerDecoderLayer");
    /// Teacher forcing: every step at once under the causal mask.
    /// \param x  a sequence [model_dim] (the targets' axis)
    /// \param memory  the encoder's output, a sequence [model_dim] on the source axis (empty
    ///   without cross-attention)
    Variable operator()(const Variable& x, const Variable& memory = {}) const;
    /// The cross-attention's keys and values of `memory` (a sequence [model_dim]), unpacked per item.
    CrossMemory cross_memory(const Variable& memory) const;
    /// The cross-attention's weights (attention_weights: the mean of the heads) at every step of x
    /// over memory, as operator()(x, memory) computes them: a sequence [T_max source] on x's axis.
    Variable cross_attention_weights(const Variable& x, const Variable& memory) const;
    /// One generating step.
    /// \param x  this step's input, a batch value [model_dim]
    /// \param cache  the keys and values of the steps before; on return, with this step's appended
    /// \param cross  cross_memory()'s values as batch inputs (empty without cross-attention)
    /// \return this step's output, a batch value [model_dim]
    Variable step(const Variable& x, KeyValueCache& cache, const CrossMemory& cross = {}) const;
    /// \return whether the layer attends over an encoder.
    bool has_cross_attention() const;
    /// \return the layer's parameters.
    std::vector<Parameter> parameters() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

/// How a TransformerDecoder encodes positions.
enum class PositionalEncoding { sinusoidal, learned };

/// A whole decoder: the target embedding (times sqrt(model_dim)) plus positional encoding, `layers`
/// decoder layers, a final layer norm with pre-norm, and the projection to the vocabulary.
class TransformerDecoder {
public:
    /// \param layers  decoder layers
    /// \param vocabulary  output symbols V (the ids of the previous symbols too)
    /// \param options  the layers' sizes
    /// \param cross_attention  false: decoder-only (no encoder)
    /// \param positions  sinusoidal, or learned (a table of max_positions)
    /// \param max_positions  the learned table's size (positions 0 .. max_positions - 1)
    /// \param name  prefix of the parameters' names
    TransformerDecoder(std::size_t layers, std::size_t vocabulary, const TransformerOptions& options,
                       bool cross_attention = true, PositionalEncoding positions = PositionalEncoding::sinusoidal,
                       std::size_t max_positions = 512, const std::string& name = "TransformerDecoder");
    /// Teacher forcing: the logits [V] at every step of `previous_symbols` (a sequence of ids [1]:
    /// the start symbol, then the targets but the last), attending over `memory` (the encoder's
    /// output, a sequence [model_dim]; empty when decoder-only).
    Variable operator()(const Variable& previous_symbols, const Variable& memory = {}) const;
    /// The cross-attention weights of decoder layer `layer` (0 first), the mean of its heads, at
    /// every step of the teacher-forced graph: a sequence [T_max source] on previous_symbols' axis.
    Variable cross_attention_weights(const Variable& previous_symbols, const Variable& memory, std::size_t layer) const;
    /// The values a generating step reads as its memory, computed from the encoder's output (a
    /// sequence [model_dim]): each layer's CrossMemory keys, values and mask, in that order. Evaluate
    /// them once per batch of sources and hand them to Generator::generate. Empty when decoder-only.
    std::vector<Variable> memory(const Variable& encoder_output) const;
    /// Batch inputs of the same shapes (any_size steps), for Generator's memory_inputs.
    std::vector<Variable> memory_inputs() const;
    /// The generating step as a Decoder: states [position [1], then per layer keys and values
    /// [any_size, model_dim]], the caches growing one row a step from empty; memory: memory_inputs().
    Decoder decoder() const;
    /// \return every parameter: embedding, layers, norm, projection.
    std::vector<Parameter> parameters() const;

private:
    friend class TransformerLM;
    struct State;
    explicit TransformerDecoder(std::shared_ptr<State> state);
    std::shared_ptr<State> state_;
};

/// A decoder-only Transformer language model's settings, GPT's shape (nanoGPT's names in brackets).
struct TransformerLMOptions {
    std::size_t layers = 4;           ///< decoder layers [n_layer]
    std::size_t vocabulary = 0;       ///< the symbols V it reads and predicts; required [vocab_size]
    std::size_t max_positions = 256;  ///< the longest context: the learned position table's size [block_size]
    /// Each layer's sizes: width [n_embd], heads [n_head], the feed-forward width (4 x width in GPT),
    /// dropout [dropout] (also on the embedded input; GPT's attention_dropout is the same rate),
    /// GELU, pre-norm.
    TransformerOptions layer{.model_dim = 128,
                             .heads = 4,
                             .feedforward_dim = 512,
                             .dropout = 0.0,
                             .norm_first = true,
                             .epsilon = 1e-5,
                             .activation = FeedForwardActivation::gelu,
                             .attention_dropout = 0.0};
    /// The logits are the final layer's output times the embedding table's transpose (no bias), as
    /// GPT ties wte and lm_head; false: a projection [model_dim, V] with a bias of its own.
    bool tie_embeddings = true;
    std::string name = "lm";  ///< prefix of the parameters' names
};

/// A decoder-only Transformer language model (GPT; nanoGPT's model.py): token embedding [V, d]
/// (normal, std 0.02) plus a learned position table [max_positions, d], dropout, `layers` decoder
/// layers of causal self-attention (no cross-attention), a final layer norm and the logits over
/// the vocabulary. Parameters: name.embedding, name.positions.table, name.layers.i.* (as
/// TransformerDecoderLayer's: self_attn.{q,k,v,out}.{W,b}, linear1, linear2, norm1, norm3),
/// name.norm, and name.project without tying.
class TransformerLM {
public:
    /// Makes every parameter; a UserError for a size of 0 or heads that do not divide the width.
    explicit TransformerLM(const TransformerLMOptions& options);
    /// The logits [V] at every step of `symbols` (a sequence of ids [1]), each from the symbols up
    /// to its own (causal). A sequence longer than max_positions is a UserError when it is bound.
    Variable operator()(const Variable& symbols) const;
    /// The generating step as a Decoder (TransformerDecoder::decoder(): states the position, then
    /// each layer's key/value cache), for Generator with no memory.
    Decoder decoder() const;
    /// \return every parameter: embedding, positions, layers, final norm (and projection).
    std::vector<Parameter> parameters() const;
    /// \return the options it was made with.
    const TransformerLMOptions& options() const { return options_; }

private:
    // A decoder-only TransformerDecoder's state with GPT's choices set.
    static std::shared_ptr<TransformerDecoder::State> gpt_state(const TransformerLMOptions& options);
    TransformerLMOptions options_;
    TransformerDecoder model_;  // the decoder-only TransformerDecoder it is
};

}  // namespace loom::layers
