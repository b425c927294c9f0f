#pragma once
/// \file
/// A decoder written once, as one step, that serves both teacher-forced training and generation
/// (CNTK's UnfoldFrom reuses the model it trained the same way).
///
/// The step maps the previous output symbol (its id, sample [1]), the previous states and a memory
/// (batch values the step reads whole at every step, e.g. an encoder's AttentionMemory) to the
/// scores over the output vocabulary and the next states. It is called twice, on two kinds of
/// Variables, and builds two graphs over the same parameters (create them outside the step, or use
/// layers, which create theirs at the first call and share them afterwards):
/// - Decoder::unfold: the previous symbols are a sequence (the start symbol, then the targets but
///   the last); every state goes through past_value, and the loop is closed with
///   replace_placeholders. One graph for the whole target sequence, trained as any other.
/// - Generator: the previous symbol and the states are batch inputs, the memory each row's pick of
///   every item's memory (index_select of a static input by the row's item); the step's graph is
///   compiled once and run once per output step, the chosen symbol fed back as the next input.
///   Greedy decoding, beam search and sampling (batched over items; each item's hypotheses are
///   rows of one batch) are drivers around that one session.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "core/value.hpp"
#include "core/weight_precision.hpp"
#include "graph/executor.hpp"
#include "graph/variable.hpp"

namespace loom::layers {

/// What a decoder step (and Decoder::unfold) returns.
struct DecoderOutput {
    Variable logits;               ///< [V], unnormalized scores over the output vocabulary
    std::vector<Variable> states;  ///< the next states, in the order the step received them
    /// Other values of the step its caller wants to read (an attention's weights): Decoder::unfold
    /// returns them as sequences on the symbols' axis, as the logits; generation does not compute them.
    std::vector<Variable> outputs = {};
};

/// One step of a decoder (above): (previous symbol, previous states, memory) -> logits and next states.
using DecoderStep = std::function<DecoderOutput(const Variable& previous_symbol, const std::vector<Variable>& states,
                                                const std::vector<Variable>& memory)>;

/// What a step returns for a state.
enum class StateUpdate {
    replace,  ///< the next state whole
    /// Only the rows this step adds along the state's any_size dimension (a key/value cache's one
    /// new row): the state grows by them. Generation keeps a state [any_size, D] as pages: each row
    /// the step returns is stored once, and each hypothesis's state is the list of its ancestors'
    /// rows, which the step receives as paged_rows(rows, pages) (graph/ops.hpp: attention reads it in
    /// place; the page lists are whole numbers made once a step for every such state); a step
    /// copies no cache. A state of another shape is kept whole, one copy per step.
    append
};

/// A decoder given as its step: unfold() trains it by teacher forcing, Generator generates with it.
class Decoder {
public:
    /// state_shapes: one per state; initial states are zeros unless unfold is given others.
    /// updates: empty (every state replaced) or one per state; an appended state's shape has one
    /// any_size dimension. A mismatch is a UserError.
    Decoder(DecoderStep step, std::vector<Shape> state_shapes, std::vector<StateUpdate> updates = {});

    /// Teacher forcing: previous_symbols is a sequence of ids [1] (start symbol, y_1 ... y_{n-1});
    /// a UserError for a decoder with a growing state (an any_size dimension), which a loop cannot carry;
    /// memory the batch values the step reads; initial_states empty (zeros) or one per state (a
    /// batch value per item or a static tensor). Returns the logits, states and the step's other
    /// outputs as sequences on previous_symbols' axis.
    /// \param previous_symbols  the step's input symbols, a sequence of ids [1]
    /// \param memory  the batch values the step reads whole at every step
    /// \param initial_states  empty, or one per state
    DecoderOutput unfold(const Variable& previous_symbols, const std::vector<Variable>& memory,
                         const std::vector<Variable>& initial_states = {}) const;

    /// \return the step given at construction.
    const DecoderStep& step() const { return step_; }
    /// \return the shape of each state, in the step's order.
    const std::vector<Shape>& state_shapes() const { return state_shapes_; }
    /// \return how the step returns each state, in the step's order.
    const std::vector<StateUpdate>& state_updates() const { return updates_; }

private:
    DecoderStep step_;
    std::vector<Shape> state_shapes_;
    std::vector<StateUpdate> updates_;
};

/// An end_symbol that is no symbol: nothing ends a hypothesis, each runs max_length symbols (a
/// character language model has no end symbol).
inline constexpr std::size_t no_symbol = std::numeric_limits<std::size_t>::max();

/// How Generator::generate searches. The first four fields keep their order, so {beam, length, start,
/// end} still reads as before; the others are best set by name.
///
/// Sampling (sample = true) draws each symbol from the model's distribution at that step, reshaped
/// in this order: the log-probabilities divided by temperature; only the top_k likeliest symbols
/// kept; of those, only the nucleus kept: the fewest likeliest symbols whose probability
/// (renormalized over the top k) reaches top_p (a symbol is kept when the mass of the symbols ranked
/// before it is below top_p, the first one always, as Hugging Face's TopPLogitsWarper); then
/// renormalized and drawn. Ranks order symbols by their score, equal scores by id (the lower first),
/// so top_k keeps exactly k (Hugging Face's TopKLogitsWarper keeps every symbol tied with the k-th,
/// and its sort ranks equals in no stated order). temperature 0 is greedy decoding (the likeliest
/// symbol, the lower id of equals), as is top_k 1, whatever the seed.
///
/// Random streams (the batch-invariance contract): item i of a call draws from its own stream,
/// determined by seed + i alone (a wrapping uint64 sum), one number per symbol it samples. So an
/// item's draws do not depend on the other items, on how many there are or on when they end: item i
/// of a call with seed s gives what the same item (its memory, initial states or prompt) gives alone,
/// as item 0 of a call with seed s + i. (The step's arithmetic may differ in its last bit between
/// batch sizes; that changes a draw only where it falls exactly on a boundary between two symbols.)
struct GenerateOptions {
    std::size_t beam_width = 1;  ///< 1: greedy decoding (or sampling, with sample)
    std::size_t max_length = 0;  ///< the most symbols a hypothesis emits, the end symbol included; required
    /// The id fed as the previous symbol of the first step; no_symbol: each item's prompt's first
    /// symbol (a language model without a start symbol; every prompt must hold one).
    std::size_t start_symbol = 0;
    std::size_t end_symbol = 0;  ///< the id that ends a hypothesis; no_symbol: none, run max_length symbols
    /// Draw each symbol instead of searching (see above); needs beam_width 1. false: greedy decoding or
    /// beam search, and the sampling fields below must keep their defaults.
    bool sample = false;
    double temperature = 1.0;  ///< divides the log-probabilities before drawing; >= 0, 0: greedy
    std::size_t top_k = 0;     ///< draw among the top_k likeliest symbols only; 0: no limit
    double top_p = 1.0;        ///< nucleus: in (0, 1]; 1: no limit
    std::uint64_t seed = 0;    ///< item i draws from the stream of seed + i
    /// Called as each symbol is chosen, by greedy decoding and sampling, item by item within a step,
    /// with the item's index and the symbol (the end symbol too, when an item ends with it; never a
    /// prompt's symbols): a program prints text as it is drawn. An exception it throws stops the
    /// generation and propagates. Beam search chooses its symbols only at its end: with beam_width
    /// above 1 a callback is a UserError. With several inter-op threads (set_inter_op_threads) and
    /// at least 4 items a thread, without memory or initial states, the items are generated in
    /// groups, one per thread, each its own search: the callback then runs on those threads, one
    /// call at a time, each item's symbols in order but the groups' interleaved. (Not where the
    /// weights, at `weights`' precision, exceed 16 MiB, or 4 MiB of int8 read through vdpbf16ps,
    /// and a thread would hold fewer than 8 items: each group reads every weight a step, so there
    /// one search shares its products instead.)
    std::function<void(std::size_t item, std::size_t symbol)> on_symbol = {};
    /// How many items to generate when nothing else says it (no memory, no initial states, no
    /// prompts: a decoder-only model sampled from its start symbol); 0: taken from those. Given
    /// together with them, it must agree.
    std::size_t items = 0;
    /// The most symbols the step may be fed for one item in a row, the start symbol included (a
    /// Transformer with learned positions: its max_positions); 0: no limit. An item whose next
    /// symbol would go past it starts over from the last max(1, context / 2) symbols it was fed or
    /// chose (its states from the initial states again: a key/value cache rebuilt over them), as
    /// nanoGPT's sampling crops its input to the block (it recomputes every step; this, once every
    /// context / 2 symbols); a prompt longer than the context is cropped to its last symbols. With
    /// a start symbol, every round starts with it. max_length still counts every symbol drawn, and a
    /// hypothesis's log_probability sums each symbol's under the context it was chosen in. Greedy
    /// decoding and sampling only (beam_width 1); the random streams run on across rounds.
    std::size_t context = 0;
    /// false: a streamed generation keeps only the symbols its next steps read, so that its memory
    /// does not grow with max_length (every symbol kept takes about 16 bytes: 17 GB for 2^30 of
    /// them). Each hypothesis then holds at most its last max(1, context) symbols, while it runs and
    /// in the result (Hypothesis::symbols); on_symbol sees every symbol, the same ones for the same
    /// seed, and log_probability and score still count every symbol. Needs on_symbol (it is where
    /// the text goes); a UserError otherwise.
    bool keep_symbols = true;
    /// Called before each pass of the step over the batch (greedy decoding, beam search and sampling
    /// alike, prompts' steps too), with the pass's number from 0 in its round: a program's hook to
    /// stop a long generation (an interrupt, a deadline). An exception it throws stops the generation
    /// before that pass and propagates; nothing is returned. Items generated in groups (on_symbol)
    /// call it before each pass of each group, one call at a time; an exception in one group stops
    /// the others before their next pass.
    std::function<void(std::size_t pass)> on_step = {};
    /// The precision the step's products read its weights in (core/weight_precision.hpp): float as
    /// they are (the default), bfloat16 (weights and the rows they multiply rounded, sums in float)
    /// or int8 (each output column's weights as int8 times a scale, the rows as they are), each
    /// weight rounded once per generate. A step reads every weight once per symbol, so it reads
    /// half or a quarter of the bytes; the log-probabilities are those of the rounded weights. The
    /// products over the keys and values cached, and an encoder's, stay float; a double session
    /// computes in double whatever this says.
    WeightPrecision weights = WeightPrecision::float32;
    /// The precision a key/value cache kept as pages (a Transformer's) keeps its rows in
    /// (core/weight_precision.hpp): float as the step computes them (the default), or bfloat16,
    /// each row rounded once as stored (the step's own too, so that a step reads its row as the
    /// steps after it will): half the bytes the attention reads a step, which bound the step at
    /// long contexts; its arithmetic stays float. A double session keeps its cache in double.
    CachePrecision cache = CachePrecision::float32;
};

/// What a generation starts from, each part by name and each optional (Generator::generate):
/// `generate(options)` for options.items items of a decoder-only model, `generate(options,
/// {.prompts = p})`, `generate(options, {.memory = m, .initial_states = s})`.
struct GenerationInputs {
    std::vector<Value> memory = {};          ///< one batch Value per memory input
    std::vector<Value> initial_states = {};  ///< empty (zeros), or one batch Value per state
    /// Empty, or one per item: symbols fed after the start symbol before the item's search begins.
    std::vector<std::vector<std::size_t>> prompts = {};
};

/// One generated output of an item.
struct Hypothesis {
    /// the emitted symbols, without the end symbol (GenerateOptions::keep_symbols false: the last ones)
    std::vector<std::size_t> symbols;
    /// Summed over every emitted symbol, the end symbol included: the model's log-probabilities
    /// (log_softmax of the step's logits), also when sampling (not those of the tempered or truncated
    /// distribution the symbols were drawn from).
    double log_probability = 0;
    double score = 0;    ///< log_probability / that number of symbols (length-normalized)
    bool ended = false;  ///< emitted the end symbol; false: stopped at max_length
};

/// What Generator::generate returns.
struct Generated {
    /// Per item, its hypotheses best (highest score) first: at most beam_width of them (fewer when the
    /// vocabulary and max_length allow fewer outputs; 1 for greedy decoding and sampling).
    std::vector<std::vector<Hypothesis>> items;
    /// Items whose best hypothesis never emitted the end symbol (it stopped at max_length).
    std::size_t unfinished = 0;
    /// The best hypothesis of each item as ordinary sequences of ids [1] with their lengths (the end
    /// symbol is appended where it was emitted, so a hypothesis of no symbol is one step long; with
    /// no_symbol, a hypothesis holds at least one symbol and nothing is appended).
    Value best_sequences(std::size_t end_symbol) const;
};

/// Generation with a trained Decoder. The step is compiled once over batch inputs, the previous
/// symbol [1] and each state, and its memory: for each of `memory_inputs` (batch inputs, any_size
/// where the memory's length varies, e.g. attention_memory_inputs(...).list()) the step is given
/// index_select(items, row_item) of the same sample shape, items every item's memory (a static
/// input bound once per generate) and row_item each row's item, so the memory is never copied per
/// hypothesis where the step only attends over it (attention reads it through the index); the step
/// must read its memory through that argument. A state whose shape has an any_size dimension
/// grows: it starts with that dimension 0 (unless given) and takes whatever size the step returns,
/// or, appended (StateUpdate::append), grows by the rows the step returns (a Transformer's
/// key/value cache, one more row per step); like every state it is reordered by each kept
/// hypothesis's parent: an appended state [any_size, D] by its pages (StateUpdate::append), which
/// copies no row, any other by a copy of its rows. Generation runs in the
/// precision of the step's parameters at the time of the call (to_precision may change it between
/// calls).
class Generator {
public:
    /// Compiles `decoder`'s step over batch inputs, reading `memory` as its memory: either batch
    /// input_variables, whose values generate(memory_values, ...) takes; or an encoder's outputs
    /// (batch values computed from its inputs, e.g. attention_memory(encoder(x)).list() or
    /// TransformerDecoder::memory(encoded)): the generator then makes the memory inputs itself, of
    /// the outputs' shapes, and generate_from(source, ...) runs the encoder on the source's bindings.
    Generator(const Decoder& decoder, const std::vector<Variable>& memory);
    ~Generator();
    /// @{
    /// Moves the compiled step; the moved-from generator is left empty.
    Generator(Generator&&) noexcept;
    Generator& operator=(Generator&&) noexcept;
    /// @}

    /// memory: one batch Value per memory input, N items each (e.g. the evaluated attention_memory
    /// of a batch of source sequences); initial_states empty (zeros) or one batch Value per state.
    /// Every item runs until its beam holds beam_width ended hypotheses that no live one scores
    /// better than so far (the usual stopping rule of beam search, a heuristic: a live hypothesis's
    /// length-normalized score can still rise as it grows), or until max_length; items that end stop
    /// costing work. The items are counted by the memory, the initial states, the prompts or
    /// options.items. Bad input is a UserError before any step:
    /// beam_width 0, max_length 0, a start or end symbol outside the vocabulary, sampling options
    /// out of range or without sample, a memory value whose sample shape its input refuses (named by
    /// its position and the input's name), a parameter of the step holding NaN or an infinity
    /// (named, with the element).
    /// \param memory  one batch Value per memory input
    /// \param options  the search: beam width or sampling, length limit, start and end symbols
    /// \param initial_states  empty, or one batch Value per state
    /// \return each item's hypotheses, best first.
    /// \param prompts  empty, or one per item: symbols fed after the start symbol, one a step, before
    ///   the item's search begins (a decoder-only model's prompt); they are not in its hypotheses
    ///   and max_length counts only what follows them
    Generated generate(const std::vector<Value>& memory, const GenerateOptions& options,
                       const std::vector<Value>& initial_states = {},
                       const std::vector<std::vector<std::size_t>>& prompts = {});
    /// The same with every input named (no positional empties): generate(inputs.memory, options,
    /// inputs.initial_states, inputs.prompts).
    Generated generate(const GenerateOptions& options, const GenerationInputs& inputs = {});
    /// The same for a generator made over an encoder's outputs: runs the encoder on `source` (a
    /// Value for each input the memory is computed from), then generates from its memory. A
    /// UserError for a generator made over memory inputs.
    Generated generate_from(const Bindings& source, const GenerateOptions& options,
                            const std::vector<Value>& initial_states = {},
                            const std::vector<std::vector<std::size_t>>& prompts = {});
    /// \return the size V of the step's logits (the output vocabulary).
    std::size_t vocabulary() const;

private:
    Generator(const Decoder& decoder, const std::vector<Variable>& memory_inputs, int);  // over memory inputs
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace loom::layers
