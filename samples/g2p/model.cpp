#include "model.hpp"

#include <algorithm>
#include <cmath>

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

std::string architecture_name(Architecture a) { return a == Architecture::lstm ? "lstm" : "transformer"; }

Architecture architecture_named(const std::string& name) {
    if (name == "lstm") return Architecture::lstm;
    if (name == "transformer") return Architecture::transformer;
    throw UserError("g2p: --architecture " + name + " is neither lstm nor transformer");
}

std::map<std::string, std::string> model_records(const Sizes& s) {
    if (s.architecture == Architecture::lstm)
        return {{"settings",
                 settings_record(
                     {{"embed", double(s.embed)}, {"encoder", double(s.encoder)}, {"decoder", double(s.decoder)}})}};
    return {{"architecture", architecture_name(s.architecture)},
            {"settings", settings_record({{"layers", double(s.layers)},
                                          {"model", double(s.model)},
                                          {"heads", double(s.heads)},
                                          {"feedforward", double(s.feedforward)}})}};
}

Sizes sizes_of(const ModelFile& f) {
    Sizes s;
    // The record is the file's, not an option the user gave: named with the file.
    if (const auto a = f.records.find("architecture"); a != f.records.end()) {
        if (a->second != "lstm" && a->second != "transformer")
            throw DataError(f.path + ": its 'architecture' record is " + quoted_field(a->second) +
                            "; a g2p model file's is lstm or transformer (or none: lstm)");
        s.architecture = architecture_named(a->second);
    }
    if (s.architecture == Architecture::lstm) {
        s.embed = f.whole_setting("embed", 1, 4096);
        s.encoder = f.whole_setting("encoder", 1, 4096);
        s.decoder = f.whole_setting("decoder", 1, 4096);
    } else {
        s.layers = f.whole_setting("layers", 1, 64);
        s.model = f.whole_setting("model", 2, 4096);
        s.heads = f.whole_setting("heads", 1, 4096);
        s.feedforward = f.whole_setting("feedforward", 1, 65536);
        if (s.model % s.heads != 0 || s.model % 2 != 0)
            throw DataError(f.path + ": its settings say model " + std::to_string(s.model) + " and heads " +
                            std::to_string(s.heads) +
                            "; a g2p Transformer's model size is even and a multiple of "
                            "its heads");
    }
    return s;
}

Pronunciation phonemes_of(const std::vector<std::size_t>& ids) {
    Pronunciation p;
    for (std::size_t id : ids)
        if (id >= 2 && id < phoneme_count()) p.push_back(arpabet_phonemes()[id - 2]);
    return p;
}

std::vector<std::pair<std::string, std::vector<std::size_t>>> sizing_parameters(const Sizes& s) {
    if (s.architecture == Architecture::transformer) {
        const std::string last = std::to_string(s.layers - 1);  // the layer count: its last layer exists
        return {{"g2p.source_embedding", {letter_count(), s.model}},
                {"g2p.encoder.layers." + last + ".linear1.W", {s.model, s.feedforward}},
                {"g2p.decoder.layers." + last + ".linear1.W", {s.model, s.feedforward}}};
    }
    return {{"letter_embedding.E", {letter_count(), s.embed}},
            {"encoder_forward.U", {s.encoder, 4 * s.encoder}},
            {"decoder.feed_weights", {s.decoder, 4 * s.decoder}}};
}

struct Model::Parts {
    layers::Layer letter_embed, phoneme_embed, encoder, combine, output;
    layers::Cell cell;
    Parameter feed_weights;  // h~_{t-1}'s part of the LSTM gates (input feeding)
    layers::GeneralAttention attention;

    // The decoder, one step: the LSTM's input is [embedding(y_{t-1}); h~_{t-1}], written as two
    // products so that the embedding's part runs outside the loop over every step at once; the
    // input feeding's product is added to it by affine (no separate sum in the loop).
    layers::DecoderOutput step(const Variable& last_phoneme, const std::vector<Variable>& s,
                               const std::vector<Variable>& encoded) {
        Variable gates = affine(s[2], feed_weights, cell.project(phoneme_embed(last_phoneme)));
        const std::vector<Variable> hc = cell.step({s[0], s[1]}, gates);
        const layers::Attention a = attention(hc[0], layers::AttentionMemory::from_list(encoded));
        Variable feed = combine(splice({a.context, hc[0]}));
        return {output(feed), {hc[0], hc[1], feed}, {a.weights}};
    }
};

struct Model::TransformerParts {
    layers::Seq2SeqTransformer model;
};

Model::Model(Sizes s) : sizes(s), letters(sequence::input_variable({1}, "letters")), decoder(make_decoder(s)) {
    const SequenceAxis decoder_axis;
    previous = sequence::input_variable({1}, "previous_phonemes", decoder_axis);
    targets = sequence::input_variable({1}, "target_phonemes", decoder_axis);
    Variable logits, y = one_hot(targets, phoneme_count());
    if (transformer_) {
        const Variable encoded = transformer_->model.encode(letters);
        const layers::TransformerOutput out = transformer_->model.forward(previous, encoded, true);
        logits = out.output;
        memory = transformer_->model.memory(encoded);
        alignment = out.cross_attention_weights.back();
        const double e = s.label_smoothing;  // the targets' mass spread over every phoneme
        if (e > 0) y = y * (1.0 - e) + e / static_cast<double>(phoneme_count());
    } else {
        memory = layers::attention_memory(parts_->encoder(parts_->letter_embed(letters))).list();
        const layers::DecoderOutput unfolded = decoder.unfold(previous, memory);
        logits = unfolded.logits;
        alignment = unfolded.outputs[0];  // the attention weights of every step
    }
    loss = sequence::reduce_sum(cross_entropy_with_softmax(logits, y), "loss");
}

layers::Decoder Model::make_decoder(const Sizes& s) {
    if (s.architecture == Architecture::transformer) {
        transformer_ = std::make_shared<TransformerParts>(
            TransformerParts{layers::Seq2SeqTransformer(letter_count(), phoneme_count(),
                                                        {.model_dim = s.model,
                                                         .heads = s.heads,
                                                         .feedforward_dim = s.feedforward,
                                                         .dropout = s.dropout,
                                                         .encoder_layers = s.layers,
                                                         .decoder_layers = s.layers,
                                                         .name = "g2p"})});
        return transformer_->model.decoder();
    }
    parts_ = std::make_shared<Parts>(
        Parts{layers::Embedding(s.embed, letter_count(), glorot_uniform(), "letter_embedding"),
              layers::Embedding(s.embed, phoneme_count(), glorot_uniform(), "phoneme_embedding"),
              layers::BiRecurrence(layers::LSTM(s.encoder, false, glorot_uniform(), "encoder_forward"),
                                   layers::LSTM(s.encoder, false, glorot_uniform(), "encoder_backward")),
              layers::Dense(s.decoder, layers::activations::tanh, false, glorot_uniform(), "combine"),
              layers::Dense(phoneme_count(), {}, true, glorot_uniform(), "output"),
              layers::LSTM(s.decoder, false, glorot_uniform(), "decoder"),
              parameter({s.decoder, 4 * s.decoder}, glorot_uniform(), "decoder.feed_weights"),
              layers::GeneralAttention("attention")});
    return layers::Decoder(
        [parts = parts_](const Variable& previous_symbol, const std::vector<Variable>& states,
                         const std::vector<Variable>& keys_values) {
            return parts->step(previous_symbol, states, keys_values);
        },
        {Shape{s.decoder}, Shape{s.decoder}, Shape{s.decoder}});
}

std::vector<Parameter> Model::parameters() const {
    if (transformer_) return transformer_->model.parameters();
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
    // The same step over batch inputs, and the encoder that computes its memory from the letters;
    // the parameters are read in place.
    if (!generator_) generator_ = std::make_unique<layers::Generator>(decoder, memory);
    const layers::Generated g = generator_->generate_from({{letters, Value::index_sequences(words)}},
                                                          {beam, max_length, start_symbol, end_symbol});
    Prediction p;
    p.unfinished = g.unfinished;
    for (const auto& item : g.items) p.phonemes.push_back(item.front().symbols);
    return p;
}

void save_model(const std::string& path, const Model& m) {
    save_model_file(path, "g2p", m.parameters(), model_records(m.sizes));
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
    const Sizes sizes = sizes_of(f);
    // loom 0.2's Transformer kept its own letter table beside stacks named encoder.* and decoder.*;
    // 0.3 made it a Seq2SeqTransformer, whose parameters are named g2p.*.
    if (sizes.architecture == Architecture::transformer && f.parameters.count("letter_embedding") &&
        !f.parameters.count("g2p.source_embedding"))
        throw DataError(path +
                        ": a g2p Transformer written by loom 0.2, whose parameters are named letter_embedding, "
                        "encoder.* and decoder.*; since loom 0.3 the model is a Seq2SeqTransformer with parameters "
                        "g2p.* (its embeddings, positions and output projection its own), and its files are not "
                        "read across that change: retrain it with this version (--train ... --save)");
    // The settings must be those of the parameters the file holds: a file that claims 4096 everywhere
    // over small parameters would otherwise build a model of gigabytes before the shapes disagree.
    for (const auto& [name, shape] : sizing_parameters(sizes))
        if (const auto held = shape_in_file(f, name); held != shape)
            throw DataError(path + ": its settings make parameter '" + name + "' " + Shape(shape).str() +
                            ", but the file holds " +
                            (held.empty() ? std::string("no such parameter") : Shape(held).str()) +
                            "; it is not a model file this program wrote");
    auto m = std::make_unique<Model>(sizes);
    assign_parameters(f, m->parameters());
    return m;
}

}  // namespace g2p
