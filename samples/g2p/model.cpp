#include "model.hpp"

#include <algorithm>

#include "core/utf8.hpp"

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

std::size_t letter_index(char letter) {
    const auto at = letters_text().find(letter);
    return at == std::string::npos ? letter_count() : at;
}

std::vector<std::size_t> letter_ids(const std::string& word) {
    if (word.empty()) throw UserError("g2p: an empty word");
    std::vector<std::size_t> ids;
    for (std::size_t i = 0; i < word.size(); ++i) {
        ids.push_back(letter_index(word[i]));
        if (ids.back() == letter_count()) {
            const std::size_t length = std::max<std::size_t>(utf8_sequence_length(std::string_view(word).substr(i)), 1);
            throw UserError("g2p: the word " + quoted_field(word) + " holds " + quoted_field(word.substr(i, length)) +
                            "; words are lower-case letters, ' . and -");
        }
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

std::vector<std::pair<std::string, std::vector<std::size_t>>> sizing_parameters(const Sizes& s) {
    return {{"letter_embedding.E", {letter_count(), s.embed}},
            {"encoder_forward.U", {s.encoder, 4 * s.encoder}},
            {"decoder.feed_weights", {s.decoder, 4 * s.decoder}}};
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

void save_model(const std::string& path, const Model& m) {
    save_model_file(path, "g2p", m.parameters(),
                    {{"settings", settings_record({{"embed", double(m.sizes.embed)},
                                                   {"encoder", double(m.sizes.encoder)},
                                                   {"decoder", double(m.sizes.decoder)}})}});
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

std::unique_ptr<Model> load_model(const std::string& path) {
    const ModelFile f = read_model_file(path, "g2p");
    auto size = [&](const char* name) { return f.whole_setting(name, 1, 4096); };
    const Sizes sizes{size("embed"), size("encoder"), size("decoder")};
    // The settings must be those of the parameters the file holds: a file that claims 4096 everywhere
    // over small parameters would otherwise build a model of gigabytes before the shapes disagree.
    for (const auto& [name, shape] : sizing_parameters(sizes))
        if (const auto held = shape_in_file(f, name); held != shape)
            throw DataError(path + ": its settings (embed " + std::to_string(sizes.embed) + ", encoder " +
                            std::to_string(sizes.encoder) + ", decoder " + std::to_string(sizes.decoder) +
                            ") make parameter '" + name + "' " + Shape(shape).str() + ", but the file holds " +
                            (held.empty() ? std::string("no such parameter") : Shape(held).str()) +
                            "; it is not a model file this program wrote");
    auto m = std::make_unique<Model>(sizes);
    assign_parameters(f, m->parameters());
    return m;
}

}  // namespace g2p
