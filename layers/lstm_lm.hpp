#pragma once
/// \file
/// LstmLM: char-rnn's language model (Karpathy's char-rnn; torch.nn.LSTM stacked under an embedding
/// and a linear head, as in PyTorch's word_language_model example): an embedding, stacked LSTMs with
/// dropout after each, a projection to the vocabulary. Its state can be carried from one window of
/// a text to the next (truncated back-propagation through time), and it generates through a
/// Generator with its states as the cache.
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "layers/decoder.hpp"
#include "training/model_file.hpp"

namespace loom::layers {

/// LstmLM's settings (char-rnn's names: num_layers, rnn_size, dropout).
struct LstmLMOptions {
    std::size_t layers = 2;        ///< stacked LSTMs (torch.nn.LSTM's num_layers)
    std::size_t hidden = 128;      ///< each LSTM's width, and the embedding's (hidden_size)
    double dropout = 0.0;          ///< after each LSTM's output, in training
    std::string name = "lstm_lm";  ///< prefix of every parameter's name
};

/// What LstmLM gives over a sequence of symbols.
struct LstmLMOutput {
    Variable logits;                    ///< [V] at every step
    std::vector<Variable> last_states;  ///< h, c of each layer at each sequence's last step: batch values [hidden]
};

/// char-rnn's language model (see the file's comment).
class LstmLM {
public:
    /// Makes every parameter; a UserError for a size of 0 or a dropout outside [0, 1).
    LstmLM(std::size_t vocabulary, const LstmLMOptions& options = {});
    /// The logits at every step of `symbols` (a sequence of ids [1]), each from the symbols up to
    /// its own, starting from `initial_states` (empty: zeros; else h, c of each layer, batch values
    /// [hidden], as last_states gives them: the state carried over from the previous window).
    LstmLMOutput operator()(const Variable& symbols, const std::vector<Variable>& initial_states = {}) const;
    /// The generating step as a Decoder (states: h, c of each layer), for a Generator with no memory.
    Decoder decoder() const;
    /// \return every parameter: embedding, each LSTM's, projection.
    std::vector<Parameter> parameters() const;
    /// The settings it was made with.
    const LstmLMOptions& options() const;
    /// How many symbols it reads and predicts.
    std::size_t vocabulary() const;

    /// Writes the model to `path` as a model file of kind "lstm_lm": its options in an "lstm_lm"
    /// record beside `records` (the caller's: an alphabet, say) and the parameters.
    void save(const std::string& path, const std::map<std::string, std::string>& records = {}) const;
    /// A model as save() wrote it, its parameters set. A file whose settings do not make the
    /// parameters it holds is a DataError before any parameter is made.
    static LstmLM load(const std::string& path);
    /// The same from a file already read.
    static LstmLM load(const ModelFile& file);

private:
    struct State;
    std::shared_ptr<State> state_;
};

}  // namespace loom::layers
