// LstmLM: char-rnn's model over a sequence (each LSTM run over the whole window by
// recurrence_states, its input projection one product outside the loop), the same cells one step
// at a time for generation, and its model file.
#include "layers/lstm_lm.hpp"

#include "core/errors.hpp"
#include "graph/ops.hpp"
#include "layers/recurrent.hpp"

namespace loom::layers {

struct LstmLM::State {
    std::size_t vocabulary = 0;
    LstmLMOptions options;
    Parameter table;
    std::vector<Cell> cells;
    Layer project;
    std::vector<Parameter> parameters;
};

namespace {

// The numbers LstmLM(v, o) holds: embedding, per layer W [h, 4h], b [4h], U [h, 4h], projection.
double parameter_count(std::size_t v, const LstmLMOptions& o) {
    const double h = static_cast<double>(o.hidden), vd = static_cast<double>(v);
    return vd * h + static_cast<double>(o.layers) * (8 * h * h + 4 * h) + h * vd + vd;
}

constexpr std::size_t max_vocabulary = std::size_t{1} << 24;  // the most symbols a model file may claim

}  // namespace

LstmLM::LstmLM(std::size_t v, const LstmLMOptions& o) : state_(std::make_shared<State>()) {
    const std::string& name = o.name;
    if (v == 0) throw UserError(name + ": the vocabulary must hold at least one symbol");
    if (o.layers == 0 || o.hidden == 0) throw UserError(name + ": layers and hidden must be at least 1");
    if (!(o.dropout >= 0 && o.dropout < 1))
        throw UserError(name + ": dropout must be in [0, 1), not " + std::to_string(o.dropout));
    State& s = *state_;
    s.vocabulary = v, s.options = o;
    s.table = parameter({v, o.hidden}, glorot_uniform(), name + ".embedding");
    s.project = Dense(v, {}, true, glorot_uniform(), name + ".project");
    // Each cell's input projection, and the head's, are made at their first call: called once here
    // on a stand-in of their input, so that every parameter exists (in this order) from the start.
    const Variable stand_in = input_variable({o.hidden});
    for (std::size_t l = 0; l < o.layers; ++l) {
        s.cells.push_back(LSTM(o.hidden, false, glorot_uniform(), name + ".layers." + std::to_string(l)));
        s.cells.back().project(stand_in);
    }
    s.project(stand_in);
    s.parameters = {s.table};
    for (const Cell& c : s.cells) append_unique(s.parameters, c.parameters());
    append_unique(s.parameters, s.project.parameters());
}

LstmLMOutput LstmLM::operator()(const Variable& symbols, const std::vector<Variable>& initial_states) const {
    const State& s = *state_;
    const std::string& name = s.options.name;
    if (!symbols.axis().is_sequence() || !(symbols.shape() == Shape{1}))
        throw UserError(name + ": the symbols must be a sequence of ids [1], not " + symbols.label() + " of " +
                        symbols.shape().str());
    if (!initial_states.empty() && initial_states.size() != 2 * s.cells.size())
        throw UserError(name + ": " + std::to_string(initial_states.size()) + " initial states given; it takes none " +
                        "(zeros) or h and c of each of its " + std::to_string(s.cells.size()) + " layers");
    LstmLMOutput out;
    Variable x = embedding(symbols, s.table);
    for (std::size_t l = 0; l < s.cells.size(); ++l) {
        std::vector<Variable> from;
        if (!initial_states.empty()) from = {initial_states[2 * l], initial_states[2 * l + 1]};
        const std::vector<Variable> hc =
            recurrence_states(s.cells[l], x, false, from.empty() ? std::vector<Variable>{Variable(0.0)} : from);
        out.last_states.push_back(sequence::last(hc[0]));
        out.last_states.push_back(sequence::last(hc[1]));
        x = dropout(hc[0], s.options.dropout);
    }
    out.logits = s.project(x);
    return out;
}

Decoder LstmLM::decoder() const {
    const std::shared_ptr<const State> s = state_;
    return Decoder(
        [s](const Variable& previous, const std::vector<Variable>& states, const std::vector<Variable>&) {
            Variable h = embedding(previous, s->table);
            std::vector<Variable> next;
            for (std::size_t l = 0; l < s->cells.size(); ++l) {
                const std::vector<Variable> hc = s->cells[l](states[2 * l], states[2 * l + 1], h);
                next.insert(next.end(), hc.begin(), hc.end());
                h = hc[0];
            }
            return DecoderOutput{s->project(h), next};
        },
        std::vector<Shape>(2 * s->cells.size(), Shape{s->options.hidden}));
}

std::vector<Parameter> LstmLM::parameters() const { return state_->parameters; }
const LstmLMOptions& LstmLM::options() const { return state_->options; }
std::size_t LstmLM::vocabulary() const { return state_->vocabulary; }

void LstmLM::save(const std::string& path, const std::map<std::string, std::string>& records) const {
    for (const char* mine : {"lstm_lm", "lstm_lm_name"})
        if (records.count(mine))
            throw UserError("LstmLM::save: the record '" + std::string(mine) +
                            "' is the model's own; name yours otherwise");
    std::map<std::string, std::string> all = records;
    const LstmLMOptions& o = options();
    all["lstm_lm"] = settings_record({{"vocabulary", double(vocabulary())},
                                      {"layers", double(o.layers)},
                                      {"hidden", double(o.hidden)},
                                      {"dropout", o.dropout}});
    all["lstm_lm_name"] = o.name;
    save_model_file(path, "lstm_lm", parameters(), all);
}

LstmLM LstmLM::load(const ModelFile& f) {
    if (f.kind != "lstm_lm") throw DataError(f.path + ": holds a model of kind '" + f.kind + "', not an LstmLM");
    const ModelFile settings = f.settings_in("lstm_lm");
    LstmLMOptions o;
    const std::size_t v = settings.whole_setting("vocabulary", 1, max_vocabulary);
    o.layers = settings.whole_setting("layers", 1, 1024);
    o.hidden = settings.whole_setting("hidden", 1, 1 << 16);
    o.dropout = settings.setting("dropout", 0.0, 0.99);
    o.name = f.record("lstm_lm_name");
    f.check_parameter_count(parameter_count(v, o));  // before a parameter is made
    LstmLM model(v, o);
    assign_parameters(f, model.parameters());
    return model;
}

LstmLM LstmLM::load(const std::string& path) { return load(read_model_file(path, "lstm_lm")); }

}  // namespace loom::layers
