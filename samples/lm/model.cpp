#include "model.hpp"

using namespace loom;

namespace lm {

Model::Model(const Settings& s, std::size_t v)
    : Model(s, s.architecture == Architecture::lstm
                   ? Network(layers::LstmLM(v, {s.layers, s.width, s.dropout, "lstm"}))
                   : Network(layers::TransformerLM(
                         v, layers::TransformerOptions::gpt(s.layers, s.heads, s.width, s.block, s.dropout)))) {}

Model::Model(const Settings& s, Network network) : settings(s), network_(std::move(network)) {
    const SequenceAxis steps;
    symbols = sequence::input_variable({1}, "symbols", steps);
    targets = sequence::input_variable({1}, "targets", steps);
    if (const auto* gpt = std::get_if<layers::TransformerLM>(&network_)) {
        logits = (*gpt)(symbols);
    } else {
        for (std::size_t l = 0; l < s.layers; ++l)
            for (const char* state : {".h0", ".c0"})
                initial_states.push_back(input_variable({s.width}, "lstm.layers." + std::to_string(l) + state));
        const layers::LstmLMOutput out = std::get<layers::LstmLM>(network_)(symbols, initial_states);
        logits = out.logits, last_states = out.last_states;
    }
    const std::size_t v = std::visit([](const auto& n) { return n.vocabulary(); }, network_);
    loss = cross_entropy_with_softmax(logits, one_hot(targets, v), "loss");
}

std::vector<Parameter> Model::parameters() const {
    return std::visit([](const auto& n) { return n.parameters(); }, network_);
}

layers::Decoder Model::decoder() const {
    return std::visit([](const auto& n) { return n.decoder(); }, network_);
}

Bindings Model::bind(const std::vector<std::vector<std::size_t>>& inputs,
                     const std::vector<std::vector<std::size_t>>& next, const std::vector<Value>& states) const {
    Bindings b{{symbols, Value::index_sequences(inputs)}, {targets, Value::index_sequences(next)}};
    for (std::size_t i = 0; i < initial_states.size(); ++i)
        b.emplace(initial_states[i],
                  states.empty() ? Value::batch(xt::xarray<float>(xt::zeros<float>({inputs.size(), settings.width})))
                                 : states[i]);
    return b;
}

TrainingMemory training_memory(const Settings& s, std::size_t batch, std::size_t vocabulary) {
    const double layers = double(s.layers), width = double(s.width), v = double(vocabulary);
    const double block = double(s.block), tokens = double(batch) * block;
    TrainingMemory m;
    if (s.architecture == Architecture::transformer) {
        // Each block's attention (4 W^2) and feed-forward (8 W^2) weights; the tied embedding and the
        // learned positions. Biases and norms left out.
        m.parameters = layers * 12 * width * width + (v + block) * width;
        // Each token keeps at least the input of both sublayers and the feed-forward's 4 W hidden
        // values in each block, and its logits; attention recomputes a [block, block] product and
        // its softmax in backward, for one item and head at a time at least.
        m.activation_bytes = 4 * (tokens * (layers * 6 * width + v) + 2 * block * block);
    } else {
        // Each layer's four gates over its input and its state (8 W^2); the embedding and the head.
        m.parameters = layers * 8 * width * width + 2 * v * width;
        // Each step of each layer keeps its four gates, its cell and its output.
        m.activation_bytes = 4 * tokens * (layers * 6 * width + v);
    }
    m.parameter_bytes = 16 * m.parameters;
    return m;
}

void save_model(const std::string& path, const Model& m, const Alphabet& alphabet) {
    const std::map<std::string, std::string> records{
        {"alphabet", alphabet.utf8()}, {"settings", settings_record({{"block", double(m.settings.block)}})}};
    std::visit([&](const auto& n) { n.save(path, records); }, m.network());
}

Loaded load_model(const std::string& path) {
    const ModelFile f = read_model_file(path);
    if (f.kind != "transformer_lm" && f.kind != "lstm_lm")
        throw DataError(path + ": holds a model of kind '" + f.kind +
                        "'; this program writes transformer_lm and lstm_lm" +
                        (f.kind == "lm" ? " (kind lm is this sample's before loom 0.4: train it again)" : ""));
    Alphabet alphabet = Alphabet::stored(f.record("alphabet"), path);
    Settings s{.block = f.whole_setting("block", 1, 1 << 20)};
    auto loaded = [&](Model::Network n) {
        if (std::visit([](const auto& x) { return x.vocabulary(); }, n) != alphabet.size())
            throw DataError(path + ": its alphabet of " + std::to_string(alphabet.size()) +
                            " characters is not its model's vocabulary; it is not a model file this program wrote");
        return Loaded{std::make_unique<Model>(s, std::move(n)), std::move(alphabet)};
    };
    if (f.kind == "transformer_lm") {
        layers::TransformerLM gpt = layers::TransformerLM::load(f);
        const layers::TransformerOptions& o = gpt.options();
        s.layers = o.decoder_layers, s.heads = o.heads, s.width = o.model_dim, s.dropout = o.dropout;
        s.block = o.max_positions;  // the context the model was made for
        return loaded(std::move(gpt));
    }
    layers::LstmLM lstm = layers::LstmLM::load(f);
    s.architecture = Architecture::lstm;
    s.layers = lstm.options().layers, s.width = lstm.options().hidden, s.dropout = lstm.options().dropout;
    return loaded(std::move(lstm));
}

}  // namespace lm
