#include "model.hpp"

#include <algorithm>

using namespace loom;

namespace g2p {

namespace {

const std::string& letters_text() {
    static const std::string text = "'-.abcdefghijklmnopqrstuvwxyz";
    return text;
}

}  // namespace

std::size_t letter_count() { return letters_text().size(); }
std::size_t phoneme_count() { return 2 + arpabet_phonemes().size(); }

std::vector<std::size_t> letter_ids(const std::string& word) {
    if (word.empty()) throw UserError("g2p: an empty word");
    std::vector<std::size_t> ids;
    for (char ch : word) {
        const auto at = letters_text().find(ch);
        if (at == std::string::npos)
            throw UserError("g2p: the word '" + word + "' holds '" + std::string(1, ch) +
                            "'; words are lower-case letters, ' . and -");
        ids.push_back(at);
    }
    return ids;
}

std::vector<std::size_t> phoneme_ids(const Pronunciation& p) {
    const auto& all = arpabet_phonemes();
    std::vector<std::size_t> ids;
    for (const std::string& ph : p) {
        const auto it = std::find(all.begin(), all.end(), ph);
        if (it == all.end()) throw UserError("g2p: '" + ph + "' is not an ARPAbet phoneme");
        ids.push_back(2 + static_cast<std::size_t>(it - all.begin()));
    }
    return ids;
}

Pronunciation phonemes_of(const std::vector<std::size_t>& ids) {
    Pronunciation p;
    for (std::size_t id : ids)
        if (id >= 2 && id < phoneme_count()) p.push_back(arpabet_phonemes()[id - 2]);
    return p;
}

struct Model::Parts {
    layers::Layer letter_embed, phoneme_embed, encoder, combine, output;
    layers::Cell cell;
    Parameter feed_weights;  // h~_{t-1}'s part of the LSTM gates (input feeding)
    layers::GeneralAttention attention;
    Variable weights;  // the attention weights of the last step built

    // The decoder, one step: the LSTM's input is [embedding(y_{t-1}); h~_{t-1}], written as two
    // products so that the embedding's part runs outside the loop over every step at once; the
    // input feeding's product is added to it by affine (no separate sum in the loop).
    layers::DecoderOutput step(const Variable& previous, const std::vector<Variable>& s,
                               const std::vector<Variable>& memory) {
        Variable gates = affine(s[2], feed_weights, cell.project(phoneme_embed(previous)));
        const std::vector<Variable> hc = cell.step({s[0], s[1]}, gates);
        const layers::Attention a = attention(hc[0], layers::AttentionMemory::from_list(memory));
        weights = a.weights;
        Variable feed = combine(splice({a.context, hc[0]}));
        return {output(feed), {hc[0], hc[1], feed}};
    }
};

Model::Model(Sizes s)
    : parts_(std::make_shared<Parts>(
          Parts{layers::Embedding(s.embed, letter_count(), glorot_uniform(), "letter_embedding"),
                layers::Embedding(s.embed, phoneme_count(), glorot_uniform(), "phoneme_embedding"),
                layers::BiRecurrence(layers::LSTM(s.encoder, false, glorot_uniform(), "encoder_forward"),
                                     layers::LSTM(s.encoder, false, glorot_uniform(), "encoder_backward")),
                layers::Dense(s.decoder, layers::activations::tanh, false, glorot_uniform(), "combine"),
                layers::Dense(phoneme_count(), {}, true, glorot_uniform(), "output"),
                layers::LSTM(s.decoder, false, glorot_uniform(), "decoder"),
                parameter({s.decoder, 4 * s.decoder}, glorot_uniform(), "decoder.feed_weights"),
                layers::GeneralAttention("attention"),
                {}})),
      sizes(s),
      letters(sequence::input_variable({1}, "letters")),
      decoder(
          [parts = parts_](const Variable& previous_symbol, const std::vector<Variable>& states,
                           const std::vector<Variable>& keys_values) {
              return parts->step(previous_symbol, states, keys_values);
          },
          {Shape{s.decoder}, Shape{s.decoder}, Shape{s.decoder}}) {
    const SequenceAxis decoder_axis;
    previous = sequence::input_variable({1}, "previous_phonemes", decoder_axis);
    targets = sequence::input_variable({1}, "target_phonemes", decoder_axis);
    memory = layers::attention_memory(parts_->encoder(parts_->letter_embed(letters)));
    const layers::DecoderOutput out = decoder.unfold(previous, memory.list());
    alignment = parts_->weights;
    loss = sequence::reduce_sum(cross_entropy_with_softmax(out.logits, one_hot(targets, phoneme_count())), "loss");
}

std::vector<Parameter> Model::parameters() const {
    const Parts& p = *parts_;
    std::vector<Parameter> all = p.letter_embed.parameters();
    for (const auto& more : {p.encoder.parameters(), p.phoneme_embed.parameters(), p.cell.parameters(),
                             std::vector<Parameter>{p.feed_weights}, p.attention.parameters(), p.combine.parameters(),
                             p.output.parameters()})
        layers::append_unique(all, more);
    return all;
}

Bindings Model::bind(const std::vector<std::vector<std::size_t>>& words,
                     const std::vector<std::vector<std::size_t>>& pronunciations) const {
    std::vector<std::vector<std::size_t>> before, after;
    for (const auto& p : pronunciations) {
        before.push_back({start_symbol});
        before.back().insert(before.back().end(), p.begin(), p.end());
        after.push_back(p);
        after.back().push_back(end_symbol);
    }
    return {{letters, Value::index_sequences(words)},
            {previous, Value::index_sequences(before)},
            {targets, Value::index_sequences(after)}};
}

Model::Prediction Model::predict(const std::vector<std::vector<std::size_t>>& words, std::size_t beam,
                                 std::size_t max_length) {
    if (!generator_) {  // the same step over batch inputs; the parameters are read in place
        generator_ =
            std::make_unique<layers::Generator>(decoder, layers::attention_memory_inputs(2 * sizes.encoder).list());
        encoder_ = std::make_unique<Session>(memory.list());
    }
    encoder_->forward({{letters, Value::index_sequences(words)}});
    std::vector<Value> memory_values;
    for (const Variable& v : memory.list()) memory_values.push_back(encoder_->value(v));
    const layers::Generated g = generator_->generate(memory_values, {beam, max_length, start_symbol, end_symbol});
    Prediction p;
    p.unfinished = g.unfinished;
    for (const auto& item : g.items) p.phonemes.push_back(item.front().symbols);
    return p;
}

}  // namespace g2p
