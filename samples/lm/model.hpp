#pragma once
// The language models of samples/lm, a GPT (loom::layers::TransformerLM) or char-rnn's LSTM
// (loom::layers::LstmLM), each as a training graph over windows of characters and a generating step.
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <loom.hpp>

namespace lm {

enum class Architecture { transformer, lstm };

/// The sizes a model is built from, and saved with.
struct Settings {
    Architecture architecture = Architecture::transformer;
    std::size_t layers = 4;   ///< Transformer blocks, or stacked LSTMs
    std::size_t heads = 4;    ///< attention heads (transformer)
    std::size_t width = 128;  ///< the residual stream's width, or each LSTM's
    std::size_t block = 64;   ///< characters per training window; the Transformer's longest context
    double dropout = 0.0;
};

/// A language model over `vocabulary` characters.
class Model {
public:
    using Network = std::variant<loom::layers::TransformerLM, loom::layers::LstmLM>;
    Model(const Settings& settings, std::size_t vocabulary);
    Model(const Settings& settings, Network network);

    Settings settings;
    loom::Variable symbols;  ///< a window's characters but the last: a sequence of ids [1]
    loom::Variable targets;  ///< the characters that follow each, on the same axis
    loom::Variable logits;   ///< [vocabulary] at every step
    loom::Variable loss;     ///< -log p(target) in nats at every step
    /// The LSTM's states a window starts from (batch inputs [width]: h, c of each layer) and where
    /// it ends (their last steps), carried into the next window; empty for the Transformer.
    std::vector<loom::Variable> initial_states, last_states;

    std::vector<loom::Parameter> parameters() const;
    const Network& network() const { return network_; }
    /// The generating step (a key/value cache, or the LSTM's states), for layers::Generator.
    loom::layers::Decoder decoder() const;
    /// Windows of ids: inputs[i] predicts targets[i] (each as long), starting from `states` (the
    /// LSTM's, as last_states gave them; empty: zeros).
    loom::Bindings bind(const std::vector<std::vector<std::size_t>>& inputs,
                        const std::vector<std::vector<std::size_t>>& targets,
                        const std::vector<loom::Value>& states = {}) const;

private:
    Network network_;
};

/// What training a model of `settings` over `vocabulary` characters, `batch` windows an iteration,
/// allocates at least, estimated from the sizes alone before anything is built: a lower bound, so
/// that a run refused for it could never have fitted.
struct TrainingMemory {
    double parameters = 0;        ///< the model's parameters, at least
    double parameter_bytes = 0;   ///< 16 bytes each: the weight, its gradient and AdamW's two moments
    double activation_bytes = 0;  ///< what an iteration's forward keeps for backward, and attention's workspace
    double total() const { return parameter_bytes + activation_bytes; }
};
TrainingMemory training_memory(const Settings& settings, std::size_t batch, std::size_t vocabulary);

/// Writes the model with its alphabet to `path` (the architecture travels in the file).
void save_model(const std::string& path, const Model& model, const loom::Alphabet& alphabet);

/// A model read back.
struct Loaded {
    std::unique_ptr<Model> model;
    loom::Alphabet alphabet;
};
/// Reads a file save_model wrote; a DataError names the file and what is wrong with it.
Loaded load_model(const std::string& path);

}  // namespace lm
