// The Transformer models, attention, generation and safetensors under the C++ names (C.layers and
// C's top level): TransformerOptions, TransformerLM, Seq2SeqTransformer, MultiHeadAttention, the
// attention functions, each model's generate (greedy, beam, sampling, streamed to a callback), and
// save_safetensors / load_safetensors / read_safetensors. Generation runs with the GIL released; it
// is taken back only to call the user's callback and, before every step, to let Ctrl-C stop the
// generation (GenerateOptions::on_step).
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace loom_python {

using namespace loom;

namespace {

template <class Enum>
Enum enum_of(const std::string& given, const std::map<std::string, Enum>& names, const std::string& what) {
    auto it = names.find(given);
    if (it != names.end()) return it->second;
    std::string choices;
    for (const auto& [name, value] : names) choices += (choices.empty() ? "'" : ", '") + name + "'";
    throw UserError("TransformerOptions: " + what + " is one of " + choices + "; got '" + given + "'");
}

template <class Enum>
std::string name_of(Enum value, const std::map<std::string, Enum>& names) {
    for (const auto& [name, v] : names)
        if (v == value) return name;
    return "?";
}

const std::map<std::string, layers::FeedForwardActivation> activations{{"relu", layers::FeedForwardActivation::relu},
                                                                       {"gelu", layers::FeedForwardActivation::gelu}};
const std::map<std::string, layers::PositionalEncoding> position_kinds{
    {"sinusoidal", layers::PositionalEncoding::sinusoidal}, {"learned", layers::PositionalEncoding::learned}};
const std::map<std::string, layers::TransformerInit> inits{{"glorot", layers::TransformerInit::glorot},
                                                           {"gpt", layers::TransformerInit::gpt}};

/// A symbol id from Python: None is no_symbol; a negative number is a UserError naming `what`.
std::size_t symbol_of(const py::object& given, const std::string& what) {
    if (given.is_none()) return layers::no_symbol;
    const long long id = given.cast<long long>();
    if (id < 0) throw UserError(what + " is a symbol id (0 or more) or None; got " + std::to_string(id));
    return static_cast<std::size_t>(id);
}

/// Prompts from Python: a list of lists of ids (each item's prompt); a negative id is a UserError.
std::vector<std::vector<std::size_t>> prompts_of(const py::object& given, const std::string& who) {
    std::vector<std::vector<std::size_t>> prompts;
    if (given.is_none()) return prompts;
    for (py::handle item : given) {
        std::vector<std::size_t> prompt;
        for (py::handle symbol : item) {
            const long long id = symbol.cast<long long>();
            if (id < 0)
                throw UserError(who + ": prompt " + std::to_string(prompts.size()) + " holds the symbol " +
                                std::to_string(id) + "; symbols are ids from 0");
            prompt.push_back(static_cast<std::size_t>(id));
        }
        prompts.push_back(std::move(prompt));
    }
    return prompts;
}

/// GenerateOptions from the keyword arguments every model's generate takes. on_symbol (a Python
/// callable or None) is called with the GIL taken back; before every step the GIL is taken back
/// briefly to run Python's signal handlers, so Ctrl-C stops a long generation with KeyboardInterrupt.
layers::GenerateOptions generate_options(std::size_t max_length, std::size_t beam_width, bool sample,
                                         double temperature, std::size_t top_k, double top_p, std::uint64_t seed,
                                         std::size_t start_symbol, std::size_t end_symbol, std::size_t context,
                                         std::size_t items, const py::object& on_symbol, bool keep_symbols = true) {
    layers::GenerateOptions o{.beam_width = beam_width,
                              .max_length = max_length,
                              .start_symbol = start_symbol,
                              .end_symbol = end_symbol,
                              .sample = sample,
                              .temperature = temperature,
                              .top_k = top_k,
                              .top_p = top_p,
                              .seed = seed};
    o.items = items;
    o.context = context;
    o.keep_symbols = keep_symbols;
    if (!on_symbol.is_none()) {
        if (!PyCallable_Check(on_symbol.ptr()))
            throw UserError("generate: on_symbol is a function of (item, symbol) or None; got " +
                            std::string(py::str(py::repr(on_symbol))).substr(0, 100));
        o.on_symbol = [on_symbol](std::size_t item, std::size_t symbol) {
            py::gil_scoped_acquire held;
            on_symbol(item, symbol);
        };
    }
    o.on_step = [](std::size_t) { raise_pending_signals(); };
    return o;
}

/// The Python object of one hypothesis.
py::dict hypothesis_dict(const layers::Hypothesis& h) {
    py::dict d;
    d["symbols"] = h.symbols;
    d["log_probability"] = h.log_probability;
    d["score"] = h.score;
    d["ended"] = h.ended;
    return d;
}

py::list generated_list(const layers::Generated& g) {
    py::list items;
    for (const auto& hypotheses : g.items) {
        py::list item;
        for (const layers::Hypothesis& h : hypotheses) item.append(hypothesis_dict(h));
        items.append(item);
    }
    return items;
}

/// A language model and its generator, compiled at the first generate and kept. A generator runs
/// one generation at a time: a call that finds it busy (another thread's, or a stream still open in
/// this one) compiles one of its own for the call rather than wait, so nothing can deadlock.
struct LanguageModel {
    explicit LanguageModel(layers::TransformerLM m) : model(std::move(m)) {}
    layers::TransformerLM model;
    std::unique_ptr<layers::Generator> generator;
    std::unique_ptr<std::mutex> running = std::make_unique<std::mutex>();

    layers::Generated generate(const layers::GenerateOptions& o, const std::vector<std::vector<std::size_t>>& prompts) {
        std::unique_lock<std::mutex> kept(*running, std::try_to_lock);
        py::gil_scoped_release released;
        std::unique_ptr<layers::Generator> own;
        if (!kept.owns_lock() || !generator) {
            (kept.owns_lock() ? generator : own) =
                std::make_unique<layers::Generator>(model.decoder(), std::vector<Variable>{});
        }
        return (kept.owns_lock() ? *generator : *own).generate(o, {.prompts = prompts});
    }
};

/// An encoder-decoder model and its generator over the encoder's output of a source input of its
/// own, made at the first generate and kept (a busy one: as LanguageModel's).
struct EncoderDecoderModel {
    explicit EncoderDecoderModel(layers::Seq2SeqTransformer m) : model(std::move(m)) {}
    layers::Seq2SeqTransformer model;
    struct Compiled {
        Variable source;  // a sequence of ids [1]
        layers::Generator generator;
    };
    std::unique_ptr<Compiled> kept_generator;
    std::unique_ptr<std::mutex> running = std::make_unique<std::mutex>();

    std::unique_ptr<Compiled> compile() const {
        Variable source = sequence::input_variable(Shape{1}, "source");
        return std::make_unique<Compiled>(
            Compiled{source, layers::Generator(model.decoder(), model.memory(model.encode(source)))});
    }

    layers::Generated generate(const py::object& sources, const layers::GenerateOptions& o) {
        std::unique_lock<std::mutex> kept(*running, std::try_to_lock);
        std::unique_ptr<Compiled> own;
        {
            py::gil_scoped_release released;
            if (!kept.owns_lock())
                own = compile();
            else if (!kept_generator)
                kept_generator = compile();
        }
        Compiled& use = kept.owns_lock() ? *kept_generator : *own;
        const Bindings source{{use.source, to_value(use.source, sources, "Seq2SeqTransformer.generate")}};
        py::gil_scoped_release released;
        return use.generator.generate_from(source, o);
    }
};

std::vector<Parameter> parameters_of(const py::iterable& parameters) {
    std::vector<Parameter> out;
    for (py::handle p : parameters) out.push_back(p.cast<Parameter>());
    return out;
}

void bind_options(py::module_& l) {
    using layers::TransformerOptions;
    py::class_<TransformerOptions> options(l, "TransformerOptions",
                                           R"doc(Every setting of a Transformer (C++ loom::layers::TransformerOptions).

Keyword arguments, PyTorch's names in brackets: model_dim [d_model] 256, heads [nhead] 4,
feedforward_dim [dim_feedforward] 1024, dropout 0.1, norm_first True (pre-norm; PyTorch's default is
False), epsilon [layer_norm_eps] 1e-5, activation 'relu' or 'gelu', attention_dropout 0,
feedforward_dropout None (= dropout), encoder_layers 6, decoder_layers 6 [n_layer],
positions 'sinusoidal' or 'learned', max_positions 512 [block_size], tie_embeddings False,
scale_embedding True, name '' (the parameters' prefix: 'lm' or 'transformer'), init 'glorot' or 'gpt'.
TransformerOptions.gpt(layers, heads, width, block, dropout=0) is nanoGPT's GPT. loom's; CNTK has no
Transformer.)doc");
    options
        .def(py::init([](std::size_t model_dim, std::size_t heads, std::size_t feedforward_dim, double dropout,
                         bool norm_first, double epsilon, const std::string& activation, double attention_dropout,
                         std::optional<double> feedforward_dropout, std::size_t encoder_layers,
                         std::size_t decoder_layers, const std::string& positions, std::size_t max_positions,
                         bool tie_embeddings, bool scale_embedding, const std::string& name, const std::string& init) {
                 TransformerOptions o;
                 o.model_dim = model_dim;
                 o.heads = heads;
                 o.feedforward_dim = feedforward_dim;
                 o.dropout = dropout;
                 o.norm_first = norm_first;
                 o.epsilon = epsilon;
                 o.activation = enum_of(activation, activations, "activation");
                 o.attention_dropout = attention_dropout;
                 o.feedforward_dropout = feedforward_dropout;
                 o.encoder_layers = encoder_layers;
                 o.decoder_layers = decoder_layers;
                 o.positions = enum_of(positions, position_kinds, "positions");
                 o.max_positions = max_positions;
                 o.tie_embeddings = tie_embeddings;
                 o.scale_embedding = scale_embedding;
                 o.name = name;
                 o.init = enum_of(init, inits, "init");
                 return o;
             }),
             py::kw_only(), py::arg("model_dim") = 256, py::arg("heads") = 4, py::arg("feedforward_dim") = 1024,
             py::arg("dropout") = 0.1, py::arg("norm_first") = true, py::arg("epsilon") = 1e-5,
             py::arg("activation") = "relu", py::arg("attention_dropout") = 0.0,
             py::arg("feedforward_dropout") = py::none(), py::arg("encoder_layers") = 6, py::arg("decoder_layers") = 6,
             py::arg("positions") = "sinusoidal", py::arg("max_positions") = 512, py::arg("tie_embeddings") = false,
             py::arg("scale_embedding") = true, py::arg("name") = "", py::arg("init") = "glorot")
        .def_static("gpt", &TransformerOptions::gpt, py::arg("layers"), py::arg("heads"), py::arg("width"),
                    py::arg("block"), py::arg("dropout") = 0.0,
                    "nanoGPT's GPT (GPTConfig's n_layer, n_head, n_embd, block_size, dropout).")
        .def_readwrite("model_dim", &TransformerOptions::model_dim)
        .def_readwrite("heads", &TransformerOptions::heads)
        .def_readwrite("feedforward_dim", &TransformerOptions::feedforward_dim)
        .def_readwrite("dropout", &TransformerOptions::dropout)
        .def_readwrite("norm_first", &TransformerOptions::norm_first)
        .def_readwrite("epsilon", &TransformerOptions::epsilon)
        .def_property(
            "activation", [](const TransformerOptions& o) { return name_of(o.activation, activations); },
            [](TransformerOptions& o, const std::string& v) { o.activation = enum_of(v, activations, "activation"); })
        .def_readwrite("attention_dropout", &TransformerOptions::attention_dropout)
        .def_readwrite("feedforward_dropout", &TransformerOptions::feedforward_dropout)
        .def_readwrite("encoder_layers", &TransformerOptions::encoder_layers)
        .def_readwrite("decoder_layers", &TransformerOptions::decoder_layers)
        .def_property(
            "positions", [](const TransformerOptions& o) { return name_of(o.positions, position_kinds); },
            [](TransformerOptions& o, const std::string& v) { o.positions = enum_of(v, position_kinds, "positions"); })
        .def_readwrite("max_positions", &TransformerOptions::max_positions)
        .def_readwrite("tie_embeddings", &TransformerOptions::tie_embeddings)
        .def_readwrite("scale_embedding", &TransformerOptions::scale_embedding)
        .def_readwrite("name", &TransformerOptions::name)
        .def_property(
            "init", [](const TransformerOptions& o) { return name_of(o.init, inits); },
            [](TransformerOptions& o, const std::string& v) { o.init = enum_of(v, inits, "init"); })
        .def("__repr__", [](const TransformerOptions& o) {
            return "TransformerOptions(model_dim=" + std::to_string(o.model_dim) +
                   ", heads=" + std::to_string(o.heads) + ", feedforward_dim=" + std::to_string(o.feedforward_dim) +
                   ", decoder_layers=" + std::to_string(o.decoder_layers) + ", ...)";
        });
    options.attr("__module__") = "loom.layers";
}

/// The generate arguments of both models, after their own first ones.
#define LOOM_GENERATE_ARGS                                                                                        \
    py::arg("max_length"), py::kw_only(),                                                                         \
        py::arg("beam_width") = 1, py::arg("sample") = false, py::arg("temperature") = 1.0, py::arg("top_k") = 0, \
        py::arg("top_p") = 1.0, py::arg("seed") = 0, py::arg("start_symbol") = py::none(),                        \
        py::arg("end_symbol") = py::none(), py::arg("context") = 0, py::arg("on_symbol") = py::none()

void bind_models(py::module_& l) {
    py::class_<LanguageModel> lm(
        l, "TransformerLM",
        R"doc(A decoder-only Transformer language model (GPT's shape; C++ loom::layers::TransformerLM).

TransformerLM(vocabulary, options): lm(symbols) over a C.sequence.input_variable(1) of ids gives the
logits [vocabulary] at every step, each from the symbols up to its own. lm.parameters lists every
parameter (a Trainer trains them); save/load write and read a model file with the architecture;
generate draws from it. loom's; CNTK has no Transformer.)doc");
    lm.def(py::init([](std::size_t vocabulary, const layers::TransformerOptions& o) {
               return LanguageModel(layers::TransformerLM(vocabulary, o));
           }),
           py::arg("vocabulary"), py::arg("options"))
        .def(
            "__call__", [](const LanguageModel& self, const Variable& symbols) { return self.model(symbols); },
            py::arg("symbols"), "The logits [vocabulary] at every step of symbols (a sequence of ids [1]).")
        .def_property_readonly(
            "parameters", [](const LanguageModel& self) { return self.model.parameters(); },
            "Every parameter: embedding, positions, layers, final norm (and projection without tying).")
        .def_property_readonly(
            "options", [](const LanguageModel& self) { return self.model.options(); },
            "The options it was made with (a copy).")
        .def_property_readonly(
            "vocabulary", [](const LanguageModel& self) { return self.model.vocabulary(); }, "The vocabulary's size.")
        .def(
            "save",
            [](const LanguageModel& self, const std::string& path, const std::map<std::string, std::string>& records) {
                self.model.save(path, records);
            },
            py::arg("path"), py::arg("records") = std::map<std::string, std::string>{},
            "Writes the model file (kind 'transformer_lm'): parameters, options and your records.")
        .def_static(
            "load", [](const std::string& path) { return LanguageModel(layers::TransformerLM::load(path)); },
            py::arg("path"), "The model a save wrote (a DataError naming the file for anything else).")
        .def(
            "_generate",
            [](LanguageModel& self, const py::object& prompts, std::size_t max_length, std::size_t beam_width,
               bool sample, double temperature, std::size_t top_k, double top_p, std::uint64_t seed,
               const py::object& start_symbol, const py::object& end_symbol, std::size_t context,
               const py::object& on_symbol, std::size_t items, bool keep_symbols, const std::string& weights,
               const std::string& cache) {
                const auto p = prompts_of(prompts, "TransformerLM.generate");
                layers::GenerateOptions o =
                    generate_options(max_length, beam_width, sample, temperature, top_k, top_p, seed,
                                     symbol_of(start_symbol, "start_symbol"), symbol_of(end_symbol, "end_symbol"),
                                     context, p.empty() ? items : 0, on_symbol, keep_symbols);
                o.weights = parse_weight_precision(weights);
                o.cache = parse_cache_precision(cache);
                return generated_list(self.generate(o, p));
            },
            py::arg("prompts"), LOOM_GENERATE_ARGS, py::arg("items") = 0, py::arg("keep_symbols") = true,
            py::arg("weights") = "float", py::arg("cache") = "float");
    lm.attr("__module__") = "loom.layers";

    py::class_<EncoderDecoderModel> s2s(
        l, "Seq2SeqTransformer",
        R"doc(An encoder-decoder Transformer with its embeddings and output projection (the PyTorch tutorial's; C++ loom::layers::Seq2SeqTransformer).

Seq2SeqTransformer(source_vocabulary, target_vocabulary, options): model(source, previous_symbols)
gives the logits at every target step (teacher forcing; previous_symbols are the start symbol then
the targets but the last, on their own sequence axis); encode and decode apart; forward also returns
the cross-attention weights. loom's; CNTK has no Transformer.)doc");
    s2s.def(py::init(
                [](std::size_t source_vocabulary, std::size_t target_vocabulary, const layers::TransformerOptions& o) {
                    return EncoderDecoderModel(layers::Seq2SeqTransformer(source_vocabulary, target_vocabulary, o));
                }),
            py::arg("source_vocabulary"), py::arg("target_vocabulary"), py::arg("options"))
        .def(
            "__call__",
            [](const EncoderDecoderModel& self, const Variable& source, const Variable& previous_symbols) {
                return self.model(source, previous_symbols);
            },
            py::arg("source"), py::arg("previous_symbols"))
        .def(
            "encode", [](const EncoderDecoderModel& self, const Variable& source) { return self.model.encode(source); },
            py::arg("source"), "The encoder's output [model_dim] on the source's axis.")
        .def(
            "decode",
            [](const EncoderDecoderModel& self, const Variable& previous_symbols, const Variable& encoded) {
                return self.model.decode(previous_symbols, encoded);
            },
            py::arg("previous_symbols"), py::arg("encoded"), "The logits at every target step over encode()'s output.")
        .def(
            "forward",
            [](const EncoderDecoderModel& self, const Variable& previous_symbols, const Variable& encoded,
               bool need_weights, bool average_weights) {
                const layers::TransformerOutput out =
                    self.model.forward(previous_symbols, encoded, need_weights, average_weights);
                return py::make_tuple(out.output, out.cross_attention_weights);
            },
            py::arg("previous_symbols"), py::arg("encoded"), py::arg("need_weights") = true,
            py::arg("average_weights") = true,
            "(logits, [each decoder layer's cross-attention weights]) from one graph [need_weights].")
        .def_property_readonly(
            "parameters", [](const EncoderDecoderModel& self) { return self.model.parameters(); }, "Every parameter.")
        .def_property_readonly(
            "options", [](const EncoderDecoderModel& self) { return self.model.options(); }, "The options (a copy).")
        .def_property_readonly("source_vocabulary",
                               [](const EncoderDecoderModel& self) { return self.model.source_vocabulary(); })
        .def_property_readonly("target_vocabulary",
                               [](const EncoderDecoderModel& self) { return self.model.target_vocabulary(); })
        .def(
            "save",
            [](const EncoderDecoderModel& self, const std::string& path,
               const std::map<std::string, std::string>& records) { self.model.save(path, records); },
            py::arg("path"), py::arg("records") = std::map<std::string, std::string>{},
            "Writes the model file (kind 'seq2seq_transformer').")
        .def_static(
            "load", [](const std::string& path) { return EncoderDecoderModel(layers::Seq2SeqTransformer::load(path)); },
            py::arg("path"), "The model a save wrote.")
        .def(
            "_generate",
            [](EncoderDecoderModel& self, const py::object& sources, std::size_t max_length, std::size_t beam_width,
               bool sample, double temperature, std::size_t top_k, double top_p, std::uint64_t seed,
               const py::object& start_symbol, const py::object& end_symbol, std::size_t context,
               const py::object& on_symbol) {
                const layers::GenerateOptions o =
                    generate_options(max_length, beam_width, sample, temperature, top_k, top_p, seed,
                                     symbol_of(start_symbol, "start_symbol"), symbol_of(end_symbol, "end_symbol"),
                                     context, 0, on_symbol);
                return generated_list(self.generate(sources, o));
            },
            py::arg("sources"), LOOM_GENERATE_ARGS);
    s2s.attr("__module__") = "loom.layers";
}

void bind_attention(py::module_& l) {
    py::class_<layers::MultiHeadAttention> mha(
        l, "MultiHeadAttention",
        R"doc(Multi-head attention with its projections (torch.nn.MultiheadAttention; C++ loom::layers::MultiHeadAttention).

MultiHeadAttention(model_dim, heads=1, key_dim=0, value_dim=0, dropout=0, bias=True, causal=False,
name='MultiHeadAttention'): mha(x) is self-attention, mha(query, key, value) attends over another
sequence; forward(...) also returns the weights. CNTK's MultiHeadAttention (a cntkx addition) takes
its arguments in another order; loom's are PyTorch's.)doc");
    mha.def(py::init([](std::size_t model_dim, std::size_t heads, std::size_t key_dim, std::size_t value_dim,
                        double dropout, bool bias, bool causal, const std::string& name) {
                return layers::MultiHeadAttention({.model_dim = model_dim,
                                                   .heads = heads,
                                                   .key_dim = key_dim,
                                                   .value_dim = value_dim,
                                                   .dropout = dropout,
                                                   .bias = bias,
                                                   .causal = causal,
                                                   .name = name});
            }),
            py::arg("model_dim"), py::arg("heads") = 1, py::arg("key_dim") = 0, py::arg("value_dim") = 0,
            py::arg("dropout") = 0.0, py::arg("bias") = true, py::arg("causal") = false,
            py::arg("name") = "MultiHeadAttention")
        .def(
            "__call__",
            [](const layers::MultiHeadAttention& self, const Variable& query, const std::optional<Variable>& key,
               const std::optional<Variable>& value) {
                if (!key && !value) return self(query);
                if (!key || !value) throw UserError(self.options().name + ": give both key and value, or neither");
                return self(query, *key, *value);
            },
            py::arg("query"), py::arg("key") = py::none(), py::arg("value") = py::none())
        .def(
            "forward",
            [](const layers::MultiHeadAttention& self, const Variable& query, const Variable& key,
               const Variable& value, bool need_weights, bool average_weights) {
                const layers::MultiHeadAttentionOutput out =
                    self.forward(query, key, value, need_weights, average_weights);
                return py::make_tuple(out.output, need_weights ? py::cast(out.weights) : py::none());
            },
            py::arg("query"), py::arg("key"), py::arg("value"), py::arg("need_weights") = true,
            py::arg("average_weights") = true, "(output, weights or None), torch's forward.")
        .def_property_readonly("parameters", &layers::MultiHeadAttention::parameters)
        .def_property_readonly("heads", &layers::MultiHeadAttention::heads)
        .def_property_readonly("model_dim", &layers::MultiHeadAttention::model_dim);
    mha.attr("__module__") = "loom.layers";

    auto attention_tuple = [](const layers::Attention& a) { return py::make_tuple(a.context, a.weights); };
    l.def(
        "dot_product_attention",
        [attention_tuple](const Variable& query, const Variable& keys, const Variable& values, bool scaled,
                          bool causal) {
            return attention_tuple(layers::dot_product_attention(query, keys, values, scaled, causal));
        },
        py::arg("query"), py::arg("keys"), py::arg("values"), py::arg("scaled") = false, py::arg("causal") = false,
        R"doc((context, weights): score_j = q . k_j (over sqrt(d) when scaled), softmax over each item's keys.

query: a batch value [d] or a sequence of queries; keys and values: sequences on one axis. loom's.)doc");
    l.def(
        "scaled_dot_product_attention",
        [attention_tuple](const Variable& query, const Variable& keys, const Variable& values, bool causal) {
            return attention_tuple(layers::scaled_dot_product_attention(query, keys, values, causal));
        },
        py::arg("query"), py::arg("keys"), py::arg("values"), py::arg("causal") = false,
        "dot_product_attention with scaled=True: (context, weights).");
    l.def(
        "self_attention",
        [attention_tuple](const Variable& x, bool scaled, bool causal) {
            return attention_tuple(layers::self_attention(x, scaled, causal));
        },
        py::arg("x"), py::arg("scaled") = true, py::arg("causal") = false,
        "(context, weights) of a sequence over itself, bidirectional or causal.");
    py::class_<layers::AdditiveAttention> additive(l, "AdditiveAttention",
                                                   "Bahdanau's attention: score_j = v . tanh(k_j W_k + q W_q); "
                                                   "att(query, keys, values) gives (context, weights).");
    additive
        .def(py::init<std::size_t, const std::string&>(), py::arg("attention_dim"),
             py::arg("name") = "AdditiveAttention")
        .def(
            "__call__",
            [attention_tuple](const layers::AdditiveAttention& self, const Variable& q, const Variable& k,
                              const Variable& v) { return attention_tuple(self(q, k, v)); },
            py::arg("query"), py::arg("keys"), py::arg("values"))
        .def_property_readonly("parameters", &layers::AdditiveAttention::parameters);
    additive.attr("__module__") = "loom.layers";
    // CNTK's AttentionModel (loom/_attention_model.py): the query on any axis, inside a loop too; the
    // keys are unpacked once per item (layers::attention_memory) and are the values.
    l.def(
        "_additive_over_memory",
        [attention_tuple](const layers::AdditiveAttention& attention, const Variable& keys, const Variable& query) {
            return attention_tuple(attention(query, layers::attention_memory(keys)));
        },
        py::arg("attention"), py::arg("keys"), py::arg("query"));
    py::class_<layers::GeneralAttention> general(l, "GeneralAttention",
                                                 "Luong's general attention: score_j = q^T W k_j; att(query, keys, "
                                                 "values) gives (context, weights).");
    general.def(py::init<const std::string&>(), py::arg("name") = "GeneralAttention")
        .def(
            "__call__",
            [attention_tuple](const layers::GeneralAttention& self, const Variable& q, const Variable& k,
                              const Variable& v) { return attention_tuple(self(q, k, v)); },
            py::arg("query"), py::arg("keys"), py::arg("values"))
        .def_property_readonly("parameters", &layers::GeneralAttention::parameters);
    general.attr("__module__") = "loom.layers";
}

void bind_safetensors(py::module_& m) {
    m.def(
        "save_safetensors",
        [](const std::string& path, const py::iterable& parameters,
           const std::map<std::string, std::string>& metadata) {
            const std::vector<Parameter> p = parameters_of(parameters);
            py::gil_scoped_release released;
            save_safetensors(path, p, metadata);
        },
        py::arg("path"), py::arg("parameters"), py::arg("metadata") = std::map<std::string, std::string>{},
        R"doc(Writes the parameters to a safetensors file, each under its name (float32 as F32, float64 as F64).

A UserError before anything is written for unnamed or twice-named parameters, NaN or infinite
values. loom's (CNTK has no safetensors).)doc");
    m.def(
        "load_safetensors",
        [](const std::string& path, const py::iterable& parameters, bool ignore_extra) {
            const std::vector<Parameter> p = parameters_of(parameters);
            SafetensorsFile file;
            {
                py::gil_scoped_release released;
                file = read_safetensors(path);
                assign_safetensors(file, p, ignore_extra ? ExtraTensors::ignore : ExtraTensors::refuse);
            }
            return file.metadata;
        },
        py::arg("path"), py::arg("parameters"), py::arg("ignore_extra") = false,
        R"doc(Sets each parameter from the file's tensor of its name; returns the file's metadata.

A DataError naming the file for a file that is not well-formed safetensors (truncated, a bad
header); a UserError naming the file for missing parameters, shapes that differ, or tensors no
parameter is named after (unless ignore_extra). Nothing is changed when it raises. loom's.)doc");
    m.def(
        "read_safetensors",
        [](const std::string& path) {
            SafetensorsFile file;
            {
                py::gil_scoped_release released;
                file = read_safetensors(path);
            }
            py::dict tensors;
            for (const auto& [name, t] : file.tensors) {
                const std::vector<std::size_t> shape = t.shape();
                tensors[py::str(name)] = std::visit(
                    [&](const auto& a) {
                        using T = typename std::decay_t<decltype(a)>::value_type;
                        py::array_t<T> out(std::vector<py::ssize_t>(shape.begin(), shape.end()));
                        std::copy(a.begin(), a.end(), out.mutable_data());
                        return py::object(out);
                    },
                    t.values);
            }
            return py::make_tuple(tensors, file.metadata);
        },
        py::arg("path"), "(tensors by name as numpy arrays, metadata) of a safetensors file. loom's.");
}

}  // namespace

void bind_transformer_models(py::module_& m) {
    py::module_ l = m.attr("layers").cast<py::module_>();
    bind_options(l);
    bind_models(l);
    bind_attention(l);
    bind_safetensors(m);
}

}  // namespace loom_python
