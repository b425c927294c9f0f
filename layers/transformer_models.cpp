// The Transformer models: what the layers and stacks of layers/transformer.cpp become with their
// embeddings, positions and output projection, the generating step over their key/value caches,
// and the model file that carries their architecture with their parameters.
#include <cmath>
#include <optional>

#include "core/errors.hpp"
#include "graph/ops.hpp"
#include "layers/attention.hpp"
#include "layers/transformer.hpp"

namespace loom::layers {

namespace {

// Symbols embedded (times sqrt(model_dim) when scaled) plus their positions' encoding, then dropout.
struct Embedded {
    TransformerOptions options;
    Parameter table;
    Layer learned_positions;

    Embedded() = default;
    // `model` names the model in the message for a sequence past the learned positions.
    Embedded(std::size_t vocabulary, const TransformerOptions& o, const std::string& name,
             const std::string& positions_name, const std::string& model)
        : options(o) {
        const double d = static_cast<double>(o.model_dim);
        table = parameter(Shape{vocabulary, o.model_dim}, normal(o.scale_embedding ? 1.0 / std::sqrt(d) : 0.02), name);
        if (o.positions == PositionalEncoding::learned)
            learned_positions = LearnedPositionalEncoding(o.max_positions, o.model_dim, positions_name, model);
    }
    Variable operator()(const Variable& symbols, const Variable& positions) const {
        Variable x = embedding(symbols, table);
        if (options.scale_embedding) x = x * constant(std::sqrt(static_cast<double>(options.model_dim)));
        x = x + (options.positions == PositionalEncoding::learned
                     ? learned_positions(positions)
                     : sinusoidal_positional_encoding(positions, options.model_dim));
        return dropout(x, options.dropout);
    }
    void add_to(std::vector<Parameter>& p) const {
        p.push_back(table);
        if (options.positions == PositionalEncoding::learned) append_unique(p, learned_positions.parameters());
    }
};

// What every model refuses before it makes a parameter (the stacks check the layers' options).
void check_model(const std::string& name, const std::vector<std::size_t>& vocabularies, const TransformerOptions& o) {
    for (std::size_t v : vocabularies)
        if (v == 0) throw UserError(name + ": the vocabulary must hold at least one symbol");
    if (o.positions != PositionalEncoding::sinusoidal && o.positions != PositionalEncoding::learned)
        throw UserError(name + ": positions must be sinusoidal or learned");
    if (o.positions == PositionalEncoding::learned && o.max_positions == 0)
        throw UserError(name + ": max_positions must be at least 1");
    if (o.positions == PositionalEncoding::sinusoidal && o.model_dim % 2 != 0)
        throw UserError(name + ": sinusoidal positions need an even model_dim, not " + std::to_string(o.model_dim));
}

void check_symbols(const std::string& name, const Variable& symbols, const char* what) {
    if (!symbols.axis().is_sequence() || !(symbols.shape() == Shape{1}))
        throw UserError(name + ": the " + what + " must be a sequence of ids [1], not " + symbols.label() + " of " +
                        symbols.shape().str());
}

TransformerOptions named(TransformerOptions o, const char* fallback) {
    if (o.name.empty()) o.name = fallback;
    return o;
}

// The target side both models share: the embedded symbols, the decoder stack, the logits.
struct TargetSide {
    TransformerOptions options;
    std::size_t vocabulary;
    std::optional<TransformerDecoder> stack;  // made in the order the model draws its parameters
    Embedded embed;
    Parameter project_w, project_b;  // without tying

    // embedding_first: the embedding's parameters are drawn before the stack's (the encoder-decoder's
    // order; the language model draws the stack's first).
    TargetSide(std::size_t v, const TransformerOptions& o, bool cross_attention, bool embedding_first,
               const std::string& embedding_name, const std::string& positions_name, const std::string& stack_name,
               const std::string& model)
        : options(o), vocabulary(v) {
        if (embedding_first) embed = Embedded(v, o, embedding_name, positions_name, model);
        stack.emplace(o.decoder_layers, o, cross_attention, stack_name);
        if (!embedding_first) embed = Embedded(v, o, embedding_name, positions_name, model);
        if (!o.tie_embeddings) {
            project_w = parameter(Shape{o.model_dim, v}, glorot_uniform(), o.name + ".project.W");
            project_b = parameter(Shape{v}, zeros(), o.name + ".project.b");
        }
    }
    Variable logits(const Variable& h) const {
        return options.tie_embeddings ? times_transpose(h, embed.table) : affine(h, project_w, project_b);
    }
    void add_to(std::vector<Parameter>& p) const {
        embed.add_to(p);
        append_unique(p, stack->parameters());
        if (!options.tie_embeddings) p.insert(p.end(), {project_w, project_b});
    }
    // The generating step: states the position [1], then each layer's keys and values, appended a
    // row per step from empty caches.
    static Decoder decoder(std::shared_ptr<const TargetSide> t) {
        const std::size_t n = t->stack->layers();
        std::vector<Shape> shapes{Shape{1}};
        std::vector<StateUpdate> updates{StateUpdate::replace};
        for (std::size_t i = 0; i < 2 * n; ++i) {
            shapes.push_back(Shape{any_size, t->options.model_dim});
            updates.push_back(StateUpdate::append);
        }
        auto step = [t, n](const Variable& previous, const std::vector<Variable>& states,
                           const std::vector<Variable>& memory) -> DecoderOutput {
            if (states.size() != 1 + 2 * n)
                throw UserError(t->options.name + ": the step takes 1 + 2 x " + std::to_string(n) + " states, not " +
                                std::to_string(states.size()));
            std::vector<KeyValueCache> caches;
            for (std::size_t i = 0; i < n; ++i) caches.push_back({states[1 + 2 * i], states[2 + 2 * i]});
            const Variable h = t->stack->step(t->embed(previous, states[0]), caches, memory);
            std::vector<Variable> next{states[0] + constant(1.0)};
            for (const KeyValueCache& c : caches) next.insert(next.end(), {c.step_keys, c.step_values});
            return {t->logits(h), next};
        };
        return Decoder(step, shapes, updates);
    }
};

// TransformerInit::gpt: the weight matrices of a stack of `layers` blocks drawn again, as
// nanoGPT's _init_weights and its rule for c_proj after its modules made theirs.
void draw_gpt_weights(const std::vector<Parameter>& parameters, std::size_t layers) {
    for (const Parameter& p : parameters) {
        const std::string name = p.name();
        if (!name.ends_with(".W")) continue;  // biases, norms, embeddings and positions keep theirs
        const bool into_residual = name.ends_with(".out.W") || name.ends_with(".linear2.W");
        const double stddev = into_residual ? 0.02 / std::sqrt(2.0 * static_cast<double>(layers)) : 0.02;
        p.set_value(normal(stddev)(p.shape(), global_rng()));
    }
}

}  // namespace

// ---- the encoder-decoder model ----

struct Seq2SeqTransformer::State {
    TransformerOptions options;
    std::size_t source_vocabulary;
    Embedded source;
    TransformerEncoder encoder;
    std::shared_ptr<const TargetSide> target;

    State(std::size_t sv, std::size_t tv, const TransformerOptions& o)
        : options(o),
          source_vocabulary(sv),
          source(sv, o, o.name + ".source_embedding", o.name + ".source_positions",
                 "Seq2SeqTransformer '" + o.name + "', its source"),
          encoder(o.encoder_layers, o, o.name + ".encoder"),
          target(std::make_shared<TargetSide>(tv, o, true, true, o.name + ".target_embedding",
                                              o.name + ".target_positions", o.name + ".decoder",
                                              "Seq2SeqTransformer '" + o.name + "', its target")) {}
};

Seq2SeqTransformer::Seq2SeqTransformer(std::size_t source_vocabulary, std::size_t target_vocabulary,
                                       const TransformerOptions& options) {
    const TransformerOptions o = named(options, "transformer");
    check_model(o.name, {source_vocabulary, target_vocabulary}, o);
    if (o.encoder_layers == 0) throw UserError(o.name + ": needs at least one encoder layer");
    state_ = std::make_shared<State>(source_vocabulary, target_vocabulary, o);
    if (o.init == TransformerInit::gpt) {
        draw_gpt_weights(state_->encoder.parameters(), o.encoder_layers);
        std::vector<Parameter> target;
        state_->target->add_to(target);
        draw_gpt_weights(target, o.decoder_layers);
    }
}

Variable Seq2SeqTransformer::encode(const Variable& source) const {
    const State& s = *state_;
    check_symbols(s.options.name, source, "source");
    return s.encoder(s.source(source, sequence_positions(source)));
}

TransformerOutput Seq2SeqTransformer::forward(const Variable& previous_symbols, const Variable& encoded,
                                              bool need_weights, bool average_weights) const {
    const TargetSide& t = *state_->target;
    check_symbols(state_->options.name, previous_symbols, "previous symbols");
    TransformerOutput out = t.stack->forward(t.embed(previous_symbols, sequence_positions(previous_symbols)), encoded,
                                             need_weights, average_weights);
    out.output = t.logits(out.output);
    return out;
}

Variable Seq2SeqTransformer::decode(const Variable& previous_symbols, const Variable& encoded) const {
    return forward(previous_symbols, encoded, false).output;
}

Variable Seq2SeqTransformer::operator()(const Variable& source, const Variable& previous_symbols) const {
    return decode(previous_symbols, encode(source));
}

std::vector<Variable> Seq2SeqTransformer::memory(const Variable& encoded) const {
    return state_->target->stack->memory(encoded);
}

std::vector<Variable> Seq2SeqTransformer::memory_inputs() const { return state_->target->stack->memory_inputs(); }

Decoder Seq2SeqTransformer::decoder() const { return TargetSide::decoder(state_->target); }

std::vector<Parameter> Seq2SeqTransformer::parameters() const {
    std::vector<Parameter> p;
    state_->source.add_to(p);
    append_unique(p, state_->encoder.parameters());
    state_->target->add_to(p);
    return p;
}

const TransformerOptions& Seq2SeqTransformer::options() const { return state_->options; }
std::size_t Seq2SeqTransformer::source_vocabulary() const { return state_->source_vocabulary; }
std::size_t Seq2SeqTransformer::target_vocabulary() const { return state_->target->vocabulary; }

// ---- the decoder-only model ----

struct TransformerLM::State {
    std::shared_ptr<const TargetSide> target;
};

TransformerLM::TransformerLM(std::size_t vocabulary, const TransformerOptions& options)
    : state_(std::make_shared<State>()) {
    const TransformerOptions o = named(options, "lm");
    check_model(o.name, {vocabulary}, o);
    // The stack is named as the model: name.layers.i, name.norm (GPT's transformer.h.i, ln_f).
    state_->target = std::make_shared<TargetSide>(vocabulary, o, false, false, o.name + ".embedding",
                                                  o.name + ".positions", o.name, "TransformerLM '" + o.name + "'");
    if (o.init == TransformerInit::gpt) draw_gpt_weights(parameters(), o.decoder_layers);
}

Variable TransformerLM::operator()(const Variable& symbols) const {
    const TargetSide& t = *state_->target;
    check_symbols(t.options.name, symbols, "symbols");
    return t.logits((*t.stack)(t.embed(symbols, sequence_positions(symbols))));
}

Decoder TransformerLM::decoder() const { return TargetSide::decoder(state_->target); }

std::vector<Parameter> TransformerLM::parameters() const {
    std::vector<Parameter> p;
    state_->target->add_to(p);
    return p;
}

const TransformerOptions& TransformerLM::options() const { return state_->target->options; }
std::size_t TransformerLM::vocabulary() const { return state_->target->vocabulary; }

// ---- the model file ----

namespace {

constexpr std::size_t max_vocabulary = std::size_t{1} << 24;  // the most symbols a model file may claim

// How many numbers a model of these options holds: its parameters' sizes summed, as the constructors
// make them (checked against a file before any parameter is made, so that a file claiming huge
// sizes over small parameters is refused instead of allocated).
double parameter_count(const TransformerOptions& o, const std::vector<std::size_t>& vocabularies, bool encoder) {
    const double d = static_cast<double>(o.model_dim), f = static_cast<double>(o.feedforward_dim);
    const double attention = 4 * (d * d + d), feedforward = 2 * d * f + f + d, norm = 2 * d;
    const double final_norm = o.norm_first ? norm : 0;
    const double positions = o.positions == PositionalEncoding::learned ? static_cast<double>(o.max_positions) * d : 0;
    double count = static_cast<double>(o.decoder_layers) *
                       ((encoder ? 2 : 1) * attention + feedforward + (encoder ? 3 : 2) * norm) +
                   final_norm;
    if (encoder) count += static_cast<double>(o.encoder_layers) * (attention + feedforward + 2 * norm) + final_norm;
    for (std::size_t v : vocabularies) count += static_cast<double>(v) * d + positions;
    const double target = static_cast<double>(vocabularies.back());
    if (!o.tie_embeddings) count += d * target + target;
    return count;
}

std::map<std::string, double> settings_of(const TransformerOptions& o) {
    return {{"model_dim", double(o.model_dim)},
            {"heads", double(o.heads)},
            {"feedforward_dim", double(o.feedforward_dim)},
            {"dropout", o.dropout},
            {"norm_first", o.norm_first ? 1.0 : 0.0},
            {"epsilon", o.epsilon},
            {"activation", o.activation == FeedForwardActivation::gelu ? 1.0 : 0.0},
            {"attention_dropout", o.attention_dropout},
            {"feedforward_dropout", o.feedforward_dropout.value_or(o.dropout)},
            {"encoder_layers", double(o.encoder_layers)},
            {"decoder_layers", double(o.decoder_layers)},
            {"positions", o.positions == PositionalEncoding::learned ? 1.0 : 0.0},
            {"max_positions", double(o.max_positions)},
            {"tie_embeddings", o.tie_embeddings ? 1.0 : 0.0},
            {"scale_embedding", o.scale_embedding ? 1.0 : 0.0},
            {"init", o.init == TransformerInit::gpt ? 1.0 : 0.0}};
}

void write_model(const std::string& path, const char* kind, const TransformerOptions& o,
                 std::map<std::string, double> settings, const std::vector<Parameter>& parameters,
                 std::map<std::string, std::string> records) {
    for (const char* mine : {"transformer", "transformer_name"})
        if (records.count(mine))
            throw UserError(std::string(kind) + "::save: the record '" + mine +
                            "' is the model's own; name yours otherwise");
    settings.merge(settings_of(o));
    records["transformer"] = settings_record(settings);
    records["transformer_name"] = o.name;
    save_model_file(path, kind, parameters, records);
}

// The options a file's "transformer" record holds (`s`: f.settings_in("transformer")), each within
// what a model can be; a DataError naming the file and the setting otherwise.
TransformerOptions read_options(const ModelFile& f, const ModelFile& s) {
    TransformerOptions o;
    auto flag = [&](const char* name) { return s.whole_setting(name, 0, 1) == 1; };
    o.model_dim = s.whole_setting("model_dim", 1, 1 << 16);
    o.heads = s.whole_setting("heads", 1, o.model_dim);
    o.feedforward_dim = s.whole_setting("feedforward_dim", 1, 1 << 20);
    o.dropout = s.setting("dropout", 0.0, 0.99);
    o.norm_first = flag("norm_first");
    o.epsilon = s.setting("epsilon", 1e-30, 1.0);
    o.activation = flag("activation") ? FeedForwardActivation::gelu : FeedForwardActivation::relu;
    o.attention_dropout = s.setting("attention_dropout", 0.0, 0.99);
    // Files of loom 0.4.0 and before have none: their feed-forward dropout was `dropout`.
    if (s.has_setting("feedforward_dropout")) o.feedforward_dropout = s.setting("feedforward_dropout", 0.0, 0.99);
    if (s.has_setting("init") && flag("init")) o.init = TransformerInit::gpt;  // files of loom 0.4.0 and before: Glorot
    o.encoder_layers = s.whole_setting("encoder_layers", 0, 1024);
    o.decoder_layers = s.whole_setting("decoder_layers", 1, 1024);
    o.positions = flag("positions") ? PositionalEncoding::learned : PositionalEncoding::sinusoidal;
    o.max_positions = s.whole_setting("max_positions", 0, std::size_t{1} << 24);
    o.tie_embeddings = flag("tie_embeddings");
    o.scale_embedding = flag("scale_embedding");
    o.name = f.record("transformer_name");
    if (o.model_dim % o.heads != 0)
        throw DataError(f.path + ": its model_dim " + std::to_string(o.model_dim) + " is not a multiple of its heads " +
                        std::to_string(o.heads) + "; it is not a model file loom wrote");
    return o;
}

}  // namespace

void Seq2SeqTransformer::save(const std::string& path, const std::map<std::string, std::string>& records) const {
    write_model(
        path, "seq2seq_transformer", options(),
        {{"source_vocabulary", double(source_vocabulary())}, {"target_vocabulary", double(target_vocabulary())}},
        parameters(), records);
}

Seq2SeqTransformer Seq2SeqTransformer::load(const ModelFile& f) {
    if (f.kind != "seq2seq_transformer")
        throw DataError(f.path + ": holds a model of kind '" + f.kind + "', not a Seq2SeqTransformer");
    const ModelFile s = f.settings_in("transformer");
    const TransformerOptions o = read_options(f, s);
    const std::size_t sv = s.whole_setting("source_vocabulary", 1, max_vocabulary);
    const std::size_t tv = s.whole_setting("target_vocabulary", 1, max_vocabulary);
    if (o.encoder_layers == 0) throw DataError(f.path + ": its encoder_layers is 0");
    f.check_parameter_count(parameter_count(o, {sv, tv}, true));
    Seq2SeqTransformer model(sv, tv, o);
    assign_parameters(f, model.parameters());
    return model;
}

Seq2SeqTransformer Seq2SeqTransformer::load(const std::string& path) {
    return load(read_model_file(path, "seq2seq_transformer"));
}

void TransformerLM::save(const std::string& path, const std::map<std::string, std::string>& records) const {
    write_model(path, "transformer_lm", options(), {{"vocabulary", double(vocabulary())}}, parameters(), records);
}

TransformerLM TransformerLM::load(const ModelFile& f) {
    if (f.kind != "transformer_lm")
        throw DataError(f.path + ": holds a model of kind '" + f.kind + "', not a TransformerLM");
    const ModelFile s = f.settings_in("transformer");
    const TransformerOptions o = read_options(f, s);
    const std::size_t v = s.whole_setting("vocabulary", 1, max_vocabulary);
    f.check_parameter_count(parameter_count(o, {v}, false));
    TransformerLM model(v, o);
    assign_parameters(f, model.parameters());
    return model;
}

TransformerLM TransformerLM::load(const std::string& path) { return load(read_model_file(path, "transformer_lm")); }

}  // namespace loom::layers
