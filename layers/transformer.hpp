#pragma once
/// \file
/// The Transformer (Vaswani et al. 2017) built on loom::attention: the three ways of attention
/// (bidirectional self-attention in the encoder, causal self-attention and cross-attention in the
/// decoder), positional encodings, and a decoder defined once that gives two graphs over the same
/// parameters:
/// - teacher forcing (TransformerDecoder::operator()): every target step at once, the causal mask
///   instead of a loop, so training runs in parallel over the steps;
/// - one generating step (the models' decoder(), for Generator): it reads each layer's
///   key/value cache ([t, model_dim], the keys and values of the steps before, which the Generator
///   keeps as pages and hands over as paged_rows of them), attends over it and this step's own key
///   and value, and returns the logits and only this step's rows of each cache
///   (StateUpdate::append), which the Generator stores once: no step copies a cache. The
///   cross-attention's keys and values of the encoder's output are computed once per source
///   (TransformerDecoder::memory).
/// The layers and stacks are PyTorch's nn.Transformer{Encoder,Decoder}{Layer,}; the models own
/// embeddings, positions and the output projection: Seq2SeqTransformer (both sides, the PyTorch
/// tutorial's) and TransformerLM (decoder-only, GPT's), each saved with its architecture and read
/// back in one call. Names follow PyTorch's where one exists (in brackets below).
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/decoder.hpp"
#include "layers/layer.hpp"
#include "training/model_file.hpp"

namespace loom::layers {

/// The feed-forward block's non-linearity [activation].
enum class FeedForwardActivation {
    relu,  ///< max(x, 0), PyTorch's default
    gelu   ///< x Phi(x) (loom::gelu, the exact form), GPT's
};

/// How a Transformer model encodes the positions of its symbols.
enum class PositionalEncoding {
    sinusoidal,  ///< sin and cos of the position at geometric frequencies (Vaswani et al.)
    learned      ///< a learned table of max_positions rows (GPT's)
};

/// How a Transformer's weight matrices are drawn when it is made.
enum class TransformerInit {
    glorot,  ///< Glorot (Xavier) uniform, every weight matrix (as nn.Transformer's _reset_parameters)
    /// GPT's (nanoGPT's _init_weights and its c_proj rule, GPT-2's): every weight matrix of a block
    /// and an untied output projection N(0, 0.02^2), the two of each block that write into the
    /// residual stream (attention's output projection and the feed-forward's second layer)
    /// N(0, (0.02 / sqrt(2 layers))^2), `layers` the blocks of their stack.
    gpt
};

/// Every setting of a Transformer: its layers, stacks and models read the fields that concern them.
/// PyTorch's name of each is in brackets (nn.Transformer*, or the tutorial's Seq2SeqTransformer and
/// nanoGPT's GPTConfig for what nn.Transformer does not hold); where the defaults differ, the comment
/// says so. The first four fields keep their order, so `{model_dim, heads, feedforward_dim, dropout}`
/// reads as before; set the others by name.
struct TransformerOptions {
    std::size_t model_dim = 256;         ///< the width of every layer's input and output [d_model; 512]
    std::size_t heads = 4;               ///< attention heads; must divide model_dim [nhead; 8]
    std::size_t feedforward_dim = 1024;  ///< the feed-forward block's inner width [dim_feedforward; 2048]
    /// Dropout on the attention and feed-forward outputs before each residual sum, inside the
    /// feed-forward block, and on a model's embedded symbols plus positions [dropout]; active in
    /// training mode only (graph/mode.hpp).
    double dropout = 0.1;
    /// Layer norm before each block, inside the residual branch (pre-norm; a stack then ends with a
    /// final norm), or after each residual sum (false: post-norm, the original) [norm_first; PyTorch's
    /// default is false, loom's true: pre-norm trains without a warm-up on the sizes loom's samples use].
    bool norm_first = true;
    double epsilon = 1e-5;                                           ///< the layer norms' epsilon [layer_norm_eps]
    FeedForwardActivation activation = FeedForwardActivation::relu;  ///< [activation]
    /// Dropout on the attention weights, in training mode (AttentionOptions::dropout)
    /// [MultiheadAttention's dropout; PyTorch's layers apply their one `dropout` here too, loom's
    /// default is 0 apart from `dropout`].
    double attention_dropout = 0.0;
    /// Dropout inside the feed-forward block, on the activation's output, in training mode;
    /// nullopt: `dropout` [PyTorch's layers apply their one `dropout` there too; GPT's MLP has none: 0].
    std::optional<double> feedforward_dropout = std::nullopt;
    /// The encoder's layers in a Seq2SeqTransformer [num_encoder_layers; 6].
    std::size_t encoder_layers = 6;
    /// The decoder's layers in a Seq2SeqTransformer and a TransformerLM [num_decoder_layers; 6; GPT's n_layer].
    std::size_t decoder_layers = 6;
    /// A model's positions: sinusoidal (Vaswani et al.) or a learned table (GPT's) [the tutorial's
    /// PositionalEncoding is sinusoidal].
    PositionalEncoding positions = PositionalEncoding::sinusoidal;
    /// A model's longest sequence with learned positions: the table's rows [GPT's block_size].
    std::size_t max_positions = 512;
    /// A model's logits are the decoder's output times the target embedding's transpose (no bias),
    /// as GPT ties wte and lm_head; false: a projection [model_dim, V] with a bias of its own
    /// [the tutorial's `generator`].
    bool tie_embeddings = false;
    /// A model's embedded symbols are multiplied by sqrt(model_dim) and drawn from N(0, 1/model_dim),
    /// as Vaswani et al. and the tutorial's TokenEmbedding; false: not scaled, drawn from
    /// N(0, 0.02^2), as GPT.
    bool scale_embedding = true;
    /// A model's prefix of its parameters' names; empty: "transformer" (Seq2SeqTransformer) or
    /// "lm" (TransformerLM). The layers and stacks take their names as an argument.
    std::string name = {};
    /// How the models (Seq2SeqTransformer, TransformerLM) draw their weight matrices; biases, norms,
    /// embeddings and positions are drawn as above whatever it says. The layers and stacks alone
    /// draw Glorot's. [nn.Transformer: xavier_uniform_; nanoGPT: normal 0.02, c_proj scaled]
    TransformerInit init = TransformerInit::glorot;

    /// nanoGPT's GPT, for a TransformerLM named "gpt": `layers` pre-norm blocks of `heads`-head
    /// attention and a feed-forward of 4 x `width` with GELU and no dropout of its own, learned
    /// positions for `block` symbols, the embedding unscaled and tied to the output projection, and
    /// `dropout` on the attention weights, the residual branches and the embedded input, GPT's
    /// initialization [GPTConfig's n_layer, n_head, n_embd, block_size, dropout; bias true].
    static TransformerOptions gpt(std::size_t layers, std::size_t heads, std::size_t width, std::size_t block,
                                  double dropout = 0.0);
};

/// The sinusoidal encoding of positions (a [1] value of whole numbers, on any axis) as [dim]
/// (dim even): sin(p / 10000^(2i/dim)) at 2i, cos(...) at 2i + 1.
Variable sinusoidal_positional_encoding(const Variable& positions, std::size_t dim);

/// A learned table of `max_positions` positions [max_positions, dim]: positions (a [1] value of
/// whole numbers) -> [dim]. A position past the table is a UserError raised before any row is read,
/// "`model`: a sequence of T steps is longer than its learned positions (max_positions P)"; `model`
/// names the model the table belongs to (`name` when empty).
Layer LearnedPositionalEncoding(std::size_t max_positions, std::size_t dim,
                                const std::string& name = "LearnedPositionalEncoding", const std::string& model = {});

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
    Variable keys;    ///< [t, model_dim], the steps' before this one (left as given by step())
    Variable values;  ///< [t, model_dim], the steps' before this one (left as given by step())
    /// Set by TransformerDecoderLayer::step: this step's own key and value, [1, model_dim], which the
    /// cache of the next step ends with (splice({keys, step_keys}, 0) where a caller wants it whole).
    /// A decoder that returns these as its states, appended (StateUpdate::append), never copies the
    /// cache in its graph: the step reads the cache where it lies, and the Generator stores these rows
    /// once in its pages (no copy per step or hypothesis).
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

/// What a decoder's forward returns [PyTorch's (output, weights) with need_weights].
struct TransformerOutput {
    Variable output;  ///< a layer's or stack's output [model_dim], or a model's logits [V]
    /// With need_weights, each decoder layer's cross-attention weights, a sequence on the targets'
    /// axis (0 past each item's source), first layer first, computed in the same graph as `output`
    /// from the same queries and keys: [T_max source], the mean of the heads, or with
    /// average_weights false [heads, T_max source] [average_attn_weights]. Else empty.
    std::vector<Variable> cross_attention_weights = {};
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
    /// A graph of its own; forward() gives them from the layer's graph.
    Variable cross_attention_weights(const Variable& x, const Variable& memory) const;
    /// operator()(x, memory), and with need_weights the cross-attention's weights from the same
    /// graph (TransformerOutput::cross_attention_weights, one) [need_weights].
    TransformerOutput forward(const Variable& x, const Variable& memory, bool need_weights = true,
                              bool average_weights = true) const;
    /// One generating step.
    /// \param x  this step's input, a batch value [model_dim]
    /// \param cache  the keys and values of the steps before; on return, with this step's own key and
    ///   value set (KeyValueCache::step_keys, step_values)
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

/// `layers` decoder layers, and with pre-norm a final layer norm [nn.TransformerDecoder]: over an
/// embedded target sequence, all steps at once under the causal mask (teacher forcing), or one
/// generating step over each layer's key/value cache.
class TransformerDecoder {
public:
    /// Makes every layer's parameters (name.layers.i.*, name.norm); cross_attention false: a
    /// decoder-only stack (no encoder).
    TransformerDecoder(std::size_t layers, const TransformerOptions& options, bool cross_attention = true,
                       const std::string& name = "TransformerDecoder");
    /// Teacher forcing.
    /// \param x  a sequence [model_dim] (the embedded targets)
    /// \param memory  the encoder's output, a sequence [model_dim] on the source axis (empty
    ///   without cross-attention)
    /// \return a sequence [model_dim] on x's axis
    Variable operator()(const Variable& x, const Variable& memory = {}) const;
    /// operator()(x, memory), and with need_weights every layer's cross-attention weights from the
    /// same graph [need_weights].
    TransformerOutput forward(const Variable& x, const Variable& memory, bool need_weights = true,
                              bool average_weights = true) const;
    /// The values a generating step reads as its memory, computed from the encoder's output (a
    /// sequence [model_dim]): each layer's CrossMemory keys, values and mask, in that order. Evaluate
    /// them once per batch of sources and hand them to Generator::generate. Empty when decoder-only.
    std::vector<Variable> memory(const Variable& encoder_output) const;
    /// Batch inputs of the same shapes (any_size steps), for Generator's memory_inputs.
    std::vector<Variable> memory_inputs() const;
    /// One generating step through every layer.
    /// \param x  this step's input, a batch value [model_dim]
    /// \param caches  one per layer: the keys and values of the steps before; on return, with this
    ///   step's own set (KeyValueCache::step_keys, step_values)
    /// \param memory  memory_inputs()'s values (empty when decoder-only)
    /// \return this step's output, a batch value [model_dim] (after the final norm with pre-norm)
    Variable step(const Variable& x, std::vector<KeyValueCache>& caches,
                  const std::vector<Variable>& memory = {}) const;
    /// \return the number of layers.
    std::size_t layers() const;
    /// \return whether the layers attend over an encoder.
    bool has_cross_attention() const;
    /// \return every layer's parameters and the final norm's.
    std::vector<Parameter> parameters() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

/// An encoder-decoder Transformer that owns both sides [the PyTorch tutorial's Seq2SeqTransformer:
/// nn.Transformer plus its embeddings and output projection]: source symbols embedded plus their
/// positions (dropout) through a TransformerEncoder of options.encoder_layers; target symbols
/// likewise through a TransformerDecoder of options.decoder_layers attending over the encoder's
/// output; then the logits over the target vocabulary. Parameters: name.source_embedding,
/// name.target_embedding, name.source_positions.table and name.target_positions.table (learned
/// positions), name.encoder.*, name.decoder.* (as the stacks'), name.project without tying.
class Seq2SeqTransformer {
public:
    /// Makes every parameter; a UserError for a size of 0, heads that do not divide the width, or
    /// sinusoidal positions of an odd width.
    Seq2SeqTransformer(std::size_t source_vocabulary, std::size_t target_vocabulary, const TransformerOptions& options);
    /// The encoder's output for `source` (a sequence of ids [1]): a sequence [model_dim] on its axis.
    Variable encode(const Variable& source) const;
    /// Teacher forcing: the logits [V] at every step of `previous_symbols` (a sequence of ids [1]:
    /// the start symbol, then the targets but the last) attending over `encoded` (encode()'s output).
    Variable decode(const Variable& previous_symbols, const Variable& encoded) const;
    /// decode(previous_symbols, encode(source)).
    Variable operator()(const Variable& source, const Variable& previous_symbols) const;
    /// decode(), and with need_weights every decoder layer's cross-attention weights from the same
    /// graph as the logits [need_weights].
    TransformerOutput forward(const Variable& previous_symbols, const Variable& encoded, bool need_weights = true,
                              bool average_weights = true) const;
    /// The generating step's memory computed from encode()'s output (TransformerDecoder::memory).
    std::vector<Variable> memory(const Variable& encoded) const;
    /// The generating step as a Decoder: states [position [1], then per layer keys and values
    /// [any_size, model_dim]], the caches growing one row a step from empty; for a Generator made
    /// over memory(encoded) (or over memory_inputs()).
    Decoder decoder() const;
    /// Batch inputs of memory()'s shapes, for a Generator made over memory inputs.
    std::vector<Variable> memory_inputs() const;
    /// \return every parameter: embeddings, positions, encoder, decoder (and projection).
    std::vector<Parameter> parameters() const;
    /// \return the options it was made with (name filled in).
    const TransformerOptions& options() const;
    /// \return the source and the target vocabularies' sizes.
    std::size_t source_vocabulary() const;
    std::size_t target_vocabulary() const;  ///< see source_vocabulary

    /// Writes the model to `path` as a model file (training/model_file.hpp) of kind
    /// "seq2seq_transformer": its parameters, its options and vocabularies in a "transformer"
    /// record, and the caller's `records` (a vocabulary's symbols, anything a program needs besides).
    void save(const std::string& path, const std::map<std::string, std::string>& records = {}) const;
    /// A model as save() wrote it, its parameters set: the options come from the file. A DataError
    /// for a file that is not such a model (its records and parameters checked before any
    /// parameter is made).
    static Seq2SeqTransformer load(const std::string& path);
    /// The same from a file already read (its records are the caller's too).
    static Seq2SeqTransformer load(const ModelFile& file);

private:
    struct State;
    std::shared_ptr<State> state_;
};

/// A decoder-only Transformer language model: target symbols embedded plus their positions
/// (dropout), a TransformerDecoder of options.decoder_layers without cross-attention, and the logits
/// over the vocabulary. GPT (nanoGPT's model.py) is `{.model_dim = n_embd, .heads = n_head,
/// .feedforward_dim = 4 * n_embd, .dropout, .activation = FeedForwardActivation::gelu,
/// .attention_dropout = dropout, .feedforward_dropout = 0, .decoder_layers = n_layer, .positions =
/// PositionalEncoding::learned, .max_positions = block_size, .tie_embeddings = true, .scale_embedding = false}`.
/// Parameters: name.embedding, name.positions.table (learned positions), name.layers.i.* (as TransformerDecoderLayer's:
/// self_attn.{q,k,v,out}.{W,b}, linear1, linear2, norm1, norm3), name.norm, and name.project without tying.
class TransformerLM {
public:
    /// Makes every parameter; a UserError for a size of 0, heads that do not divide the width, or
    /// sinusoidal positions of an odd width.
    TransformerLM(std::size_t vocabulary, const TransformerOptions& options);
    /// The logits [V] at every step of `symbols` (a sequence of ids [1]), each from the symbols up
    /// to its own (causal). With learned positions, a sequence longer than max_positions is a
    /// UserError "TransformerLM 'name': a sequence of T steps is longer than its learned positions
    /// (max_positions P)", raised in the forward pass before the positions are read (the model's
    /// first op), as the generating step raises it past the table.
    Variable operator()(const Variable& symbols) const;
    /// The generating step as a Decoder (states: the position, then each layer's key/value cache),
    /// for a Generator with no memory.
    Decoder decoder() const;
    /// \return every parameter: embedding, positions, layers, final norm (and projection).
    std::vector<Parameter> parameters() const;
    /// \return the options it was made with (name filled in).
    const TransformerOptions& options() const;
    /// \return the vocabulary's size.
    std::size_t vocabulary() const;

    /// Writes the model to `path` as a model file of kind "transformer_lm" (as Seq2SeqTransformer::save).
    void save(const std::string& path, const std::map<std::string, std::string>& records = {}) const;
    /// A model as save() wrote it, its parameters set (as Seq2SeqTransformer::load).
    static TransformerLM load(const std::string& path);
    /// The same from a file already read.
    static TransformerLM load(const ModelFile& file);

private:
    struct State;
    std::shared_ptr<State> state_;
};

}  // namespace loom::layers
