#include "model.hpp"

#include <algorithm>
#include <variant>

using namespace loom;

namespace lm {

std::string architecture_name(Architecture a) { return a == Architecture::lstm ? "lstm" : "transformer"; }

Model::Model(const Settings& s, std::size_t v) : settings(s), vocabulary(v) {
    const SequenceAxis steps;
    symbols = sequence::input_variable({1}, "symbols", steps);
    targets = sequence::input_variable({1}, "targets", steps);
    if (s.architecture == Architecture::transformer) {
        // nanoGPT's GPT: 4 x width feed-forward, GELU, pre-norm, learned positions, tied embedding.
        const layers::TransformerLM gpt(v, {.model_dim = s.width,
                                            .heads = s.heads,
                                            .feedforward_dim = 4 * s.width,
                                            .dropout = s.dropout,
                                            .activation = layers::FeedForwardActivation::gelu,
                                            .attention_dropout = s.dropout,
                                            .decoder_layers = s.layers,
                                            .positions = layers::PositionalEncoding::learned,
                                            .max_positions = s.block,
                                            .tie_embeddings = true,
                                            .scale_embedding = false,
                                            .name = "gpt"});
        logits = gpt(symbols);
        decoder_ = gpt.decoder();
        parameters_ = gpt.parameters();
    } else {
        // char-rnn: an embedding, stacked LSTMs with dropout after each, a projection to the characters.
        const Parameter table = parameter({v, s.width}, glorot_uniform(), "lstm.embedding");
        const auto embed = [table](const Variable& ids) { return embedding(ids, table); };
        const layers::Layer output = layers::Dense(v, {}, true, glorot_uniform(), "lstm.project");
        std::vector<layers::Cell> cells;
        Variable x = embed(symbols);
        for (std::size_t l = 0; l < s.layers; ++l) {
            const std::string name = "lstm.layers." + std::to_string(l);
            cells.push_back(layers::LSTM(s.width, false, glorot_uniform(), name));
            initial_states.push_back(input_variable({s.width}, name + ".h0"));
            initial_states.push_back(input_variable({s.width}, name + ".c0"));
            const std::vector<Variable> hc =
                layers::recurrence_states(cells.back(), x, false, {initial_states[2 * l], initial_states[2 * l + 1]});
            last_states.push_back(sequence::last(hc[0]));
            last_states.push_back(sequence::last(hc[1]));
            x = dropout(hc[0], s.dropout);
        }
        logits = output(x);
        // The same cells one step at a time: states h, c per layer.
        decoder_ = layers::Decoder(
            [=](const Variable& previous, const std::vector<Variable>& states, const std::vector<Variable>&) {
                Variable h = embed(previous);
                std::vector<Variable> next;
                for (std::size_t l = 0; l < cells.size(); ++l) {
                    const std::vector<Variable> hc = cells[l](states[2 * l], states[2 * l + 1], h);
                    next.insert(next.end(), hc.begin(), hc.end());
                    h = hc[0];
                }
                return layers::DecoderOutput{output(h), next};
            },
            std::vector<Shape>(2 * s.layers, Shape{s.width}));
        parameters_ = {table};
        for (const layers::Cell& c : cells) layers::append_unique(parameters_, c.parameters());
        layers::append_unique(parameters_, output.parameters());
    }
    loss = cross_entropy_with_softmax(logits, one_hot(targets, v), "loss");
}

std::vector<Parameter> Model::parameters() const { return parameters_; }

Bindings Model::bind(const std::vector<std::vector<std::size_t>>& inputs,
                     const std::vector<std::vector<std::size_t>>& next, const std::vector<Value>& states) const {
    Bindings b{{symbols, Value::index_sequences(inputs)}, {targets, Value::index_sequences(next)}};
    for (std::size_t i = 0; i < initial_states.size(); ++i)
        b.emplace(initial_states[i],
                  states.empty() ? Value::batch(xt::xarray<float>(xt::zeros<float>({inputs.size(), settings.width})))
                                 : states[i]);
    return b;
}

namespace {

// The shape of the file's parameter `name`; empty when it has none.
std::vector<std::size_t> shape_in_file(const ModelFile& f, const std::string& name) {
    const auto it = f.parameters.find(name);
    if (it == f.parameters.end()) return {};
    return std::visit([](const auto& a) { return std::vector<std::size_t>(a.shape().begin(), a.shape().end()); },
                      it->second);
}

}  // namespace

void save_model(const std::string& path, const Model& m, const Alphabet& alphabet) {
    const Settings& s = m.settings;
    save_model_file(path, "lm", m.parameters(),
                    {{"architecture", architecture_name(s.architecture)},
                     {"alphabet", alphabet.utf8()},
                     {"settings", settings_record({{"layers", double(s.layers)},
                                                   {"heads", double(s.heads)},
                                                   {"width", double(s.width)},
                                                   {"block", double(s.block)},
                                                   {"dropout", s.dropout}})}});
}

Loaded load_model(const std::string& path) {
    const ModelFile f = read_model_file(path, "lm");
    Settings s;
    const std::string& a = f.record("architecture");
    if (a != "transformer" && a != "lstm")
        throw DataError(path + ": its architecture record says '" + a + "'; this program writes transformer or lstm");
    s.architecture = a == "lstm" ? Architecture::lstm : Architecture::transformer;
    s.layers = f.whole_setting("layers", 1, 64);
    s.heads = f.whole_setting("heads", 1, 4096);
    s.width = f.whole_setting("width", 1, 16384);
    s.block = f.whole_setting("block", 1, 1 << 20);
    s.dropout = f.setting("dropout", 0.0, 0.99);
    Alphabet alphabet = Alphabet::stored(f.record("alphabet"), path);
    // The settings must be those of the parameters the file holds: a file that claims huge sizes
    // over small parameters would otherwise build a model of gigabytes before the shapes disagree.
    const std::size_t v = alphabet.size(), w = s.width, last = s.layers - 1;
    const std::vector<std::pair<std::string, std::vector<std::size_t>>> sizing =
        s.architecture == Architecture::transformer
            ? std::vector<std::pair<std::string, std::vector<std::size_t>>>{{"gpt.embedding", {v, w}},
                                                                            {"gpt.positions.table", {s.block, w}},
                                                                            {"gpt.layers." + std::to_string(last) +
                                                                                 ".linear1.W",
                                                                             {w, 4 * w}}}
            : std::vector<std::pair<std::string, std::vector<std::size_t>>>{
                  {"lstm.embedding", {v, w}}, {"lstm.layers." + std::to_string(last) + ".U", {w, 4 * w}}};
    for (const auto& [name, shape] : sizing)
        if (const auto held = shape_in_file(f, name); held != shape)
            throw DataError(path + ": its settings make parameter '" + name + "' " + Shape(shape).str() +
                            ", but the file holds " +
                            (held.empty() ? std::string("no such parameter") : Shape(held).str()) +
                            "; it is not a model file this program wrote");
    if (s.architecture == Architecture::transformer && s.width % s.heads != 0)
        throw DataError(path + ": its settings say width " + std::to_string(w) + " and heads " +
                        std::to_string(s.heads) + "; the width must be a multiple of the heads");
    Loaded out{std::make_unique<Model>(s, v), std::move(alphabet)};
    assign_parameters(f, out.model->parameters());
    return out;
}

}  // namespace lm
