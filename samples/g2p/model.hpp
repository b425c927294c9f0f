#pragma once
// The spelling -> pronunciation models of the g2p sample, in two architectures:
// - lstm (CNTK's sequence-to-sequence tutorial 204): letters -> embedding -> BiLSTM encoder; an LSTM
//   decoder that attends (Luong's general score) over the encoder states inside its loop and feeds
//   h~_t = tanh(W_c [c_t; h_t]) into its next step; the phoneme scores from h~_t. The decoder is
//   written once (Model::step) and serves teacher-forced training (Decoder::unfold) and beam search
//   (Generator).
// - transformer (Vaswani et al. 2017): letters -> embedding + sinusoidal positions -> encoder layers
//   (self-attention); decoder layers (causal self-attention, cross-attention over the letters) trained
//   on all steps at once; beam search through the decoder's cached step (layers/transformer.hpp).
// A library, so the bench measures the same models.
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <loom.hpp>

namespace g2p {

// Letters: "'-.abcdefghijklmnopqrstuvwxyz" (ids 0..28). Phonemes: 0 </s>, 1 <s>, then the 39 of
// loom::arpabet_phonemes() (ids 2..40).
inline constexpr std::size_t end_symbol = 0, start_symbol = 1;
std::size_t letter_count();
std::size_t phoneme_count();
// The id of a letter; letter_count() for any other byte.
std::size_t letter_index(char letter);
// A UserError naming the word and the character for anything outside the letters (words.hpp's
// model_word checks and folds a word before it gets here).
std::vector<std::size_t> letter_ids(const std::string& word);
std::vector<std::size_t> phoneme_ids(const loom::Pronunciation& p);
loom::Pronunciation phonemes_of(const std::vector<std::size_t>& ids);

enum class Architecture { lstm, transformer };

struct Sizes {
    std::size_t embed = 64, encoder = 128, decoder = 256;  // the LSTM's
    // The Transformer's: `layers` encoder and as many decoder layers, model size, heads, feed-forward
    // width, dropout, label smoothing of the targets. The G2P literature's 3 + 3 layers of 256 (ff
    // 1024) train for hours; at half the width a step costs about a third, so 30 minutes on two
    // cores see three times the epochs. No dropout: in 30 minutes the model is under-fitted (the
    // held-out error still falls in the last epochs), label smoothing regularizes, and the held-out
    // words choose the parameters kept; dropout 0.1 ran 18 epochs where none runs 22 (bench/RESULTS.md).
    std::size_t layers = 3, model = 128, heads = 4, feedforward = 512;
    double dropout = 0, label_smoothing = 0.1;
    Architecture architecture = Architecture::lstm;  // last, so that {embed, encoder, decoder} is an LSTM's
};

// "lstm" or "transformer", and back (a UserError naming the option's value otherwise).
std::string architecture_name(Architecture a);
Architecture architecture_named(const std::string& name);
// The sizes as a model file's records ("architecture", "settings"), and back: a file without an
// "architecture" record holds an LSTM (as every g2p file before the Transformer).
std::map<std::string, std::string> model_records(const Sizes& s);
Sizes sizes_of(const loom::ModelFile& f);
// The parameters that fix the sizes, by name, with the shapes `sizes` give them: a model file's
// settings are checked against its own parameters before a model of those settings is built.
std::vector<std::pair<std::string, std::vector<std::size_t>>> sizing_parameters(const Sizes& sizes);

class Model {
    struct Parts;
    struct TransformerParts;
    std::shared_ptr<Parts> parts_;                   // the LSTM's layers; first, as the decoder's step holds them
    std::shared_ptr<TransformerParts> transformer_;  // or the Transformer's

public:
    explicit Model(Sizes sizes);

    Sizes sizes;
    loom::Variable letters;              // a sequence of letter ids [1]
    loom::Variable previous, targets;    // phoneme ids [1] on the decoder's axis: <s> y1..yn, y1..yn </s>
    std::vector<loom::Variable> memory;  // what the decoder's generating step reads, per word
    loom::layers::Decoder decoder;       // one step: the LSTM's graphs both, the Transformer's generation
    loom::Variable loss;                 // per word: the summed cross entropy of its phonemes
    // The attention weights of each decoder step [T_max letters] (the Transformer's: its last decoder
    // layer's cross-attention, the mean of the heads).
    loom::Variable alignment;

    std::vector<loom::Parameter> parameters() const;
    // Teacher forcing: letters, previous and targets for these (word, pronunciation) id lists.
    loom::Bindings bind(const std::vector<std::vector<std::size_t>>& words,
                        const std::vector<std::vector<std::size_t>>& pronunciations) const;

    // Beam search (width 1: greedy) for a batch of words: each word's best phoneme ids.
    struct Prediction {
        std::vector<std::vector<std::size_t>> phonemes;
        std::size_t unfinished = 0;  // words that reached max_length without </s>
    };
    Prediction predict(const std::vector<std::vector<std::size_t>>& words, std::size_t beam, std::size_t max_length);

private:
    loom::layers::Decoder make_decoder(const Sizes& s);  // makes the parts of s.architecture
    std::unique_ptr<loom::layers::Generator> generator_;
};

// A model file of kind "g2p": the parameters, the architecture and its sizes (model_records).
void save_model(const std::string& path, const Model& m);
// Reads one back. Throws DataError when the file's settings are not those of the parameters it holds
// (sizing_parameters), before a model of those settings is built; UserError for another kind of file.
std::unique_ptr<Model> load_model(const std::string& path);

}  // namespace g2p
