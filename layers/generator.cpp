#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <utility>

#include "core/errors.hpp"
#include "core/finite.hpp"
#include "core/parallel.hpp"
#include "graph/ops.hpp"
#include "graph/session.hpp"
#include "layers/decoder.hpp"
#include "layers/search.hpp"

namespace loom::layers {

using search::Beam;
using search::Live;

namespace {

// A session's parameters fixed while it lives (Session::set_parameters_fixed).
struct FixedParameters {
    Session& s;
    explicit FixedParameters(Session& session) : s(session) { s.set_parameters_fixed(true); }
    ~FixedParameters() { s.set_parameters_fixed(false); }
    FixedParameters(const FixedParameters&) = delete;
    FixedParameters& operator=(const FixedParameters&) = delete;
};

// A state whose shape has an any_size dimension grows from step to step (a key/value cache: one
// more row per step); its size per row is read from each pass's output. The elements of such a
// shape, any_size counted as 1:
std::size_t fixed_size(const Shape& shape) {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d == any_size ? 1 : d;
    return n;
}

// Whether `actual` is a sample of `pattern`, where any_size matches every size.
bool fits(const Shape& pattern, const Shape& actual) {
    if (pattern.rank() != actual.rank()) return false;
    for (std::size_t i = 0; i < pattern.rank(); ++i)
        if (pattern[i] != any_size && pattern[i] != actual[i]) return false;
    return true;
}

// Batch dims {rows, sample...} of a state of `pattern` holding `width` elements per row.
std::vector<std::size_t> state_dims(std::size_t rows, const Shape& pattern, std::size_t width) {
    std::vector<std::size_t> dims{rows};
    const std::size_t fixed = fixed_size(pattern);
    for (std::size_t d : pattern) dims.push_back(d == any_size ? (fixed ? width / fixed : 0) : d);
    return dims;
}

}  // namespace

struct Generator::State {
    Variable previous;
    std::vector<Variable> states;  // a paged state's: null (the step reads paged_rows(rows, pages))
    // Per state appended by rows [any_size, D] (a key/value cache): kept as pages, every row the
    // step returned stored once in a static table `rows`, and each hypothesis's state the list
    // `pages` of its rows, in order (its ancestors', then its own): a step copies no cache. The
    // lists are set before each pass (shared by the states that grow alike: made once a pass).
    struct Paged {
        Variable rows;
        std::shared_ptr<PageLists> pages;
    };
    std::vector<Paged> paged;  // per state; null Variables where the state is not paged
    // Per distinct memory input, every item's memory [N, sample...] as a static input; the step reads
    // row r's item of it, row_item[r], through index_select (attention reads it in place).
    std::vector<Variable> memory;
    std::vector<std::size_t> memory_slot;  // per memory input given: its position in `memory`
    // Per memory input given: its name and the sample shapes it takes (any_size where it varies),
    // for the message that names a memory value of the wrong shape before any step.
    std::vector<std::string> memory_names;
    std::vector<Shape> memory_shapes;
    // The step's parameters (and the encoder's, made over its outputs): generate refuses NaN and
    // infinities in them, which no step would report.
    std::vector<Parameter> parameters, encoder_parameters;
    Variable row_item;
    std::vector<Shape> state_shapes;   // the decoder's, any_size where a state grows
    std::vector<StateUpdate> updates;  // the decoder's
    Variable log_probs;
    std::vector<Variable> next_states;
    std::unique_ptr<Session> session;
    std::size_t vocabulary = 0;
    // Made over an encoder's outputs: the session that computes them (the memory, in the order
    // given), else null.
    std::unique_ptr<Session> encoder;
    std::vector<Variable> encoder_outputs;

    std::size_t items_of(const std::vector<Value>& memory_values, const GenerateOptions& o,
                         const std::vector<Value>& initial_states, const std::vector<std::vector<std::size_t>>& prompts,
                         const std::string& who) const;
    // One search over every item: `starts` each item's first symbol, `lengths` how many symbols it
    // draws (0: it sits this one out), `streams` each item's random stream when sampling.
    template <class T>
    Generated run(const std::vector<Value>& memory_values, const GenerateOptions& o,
                  const std::vector<Value>& initial_states, const std::vector<std::vector<std::size_t>>& prompts,
                  const std::vector<std::size_t>& starts, const std::vector<std::size_t>& lengths,
                  std::vector<search::SymbolStream>& streams);
    // Searches with o.context: in rounds of run(), each item's context cropped between them, its
    // stream running on.
    template <class T>
    Generated run_in_rounds(const std::vector<Value>& memory_values, const GenerateOptions& o,
                            const std::vector<Value>& initial_states,
                            const std::vector<std::vector<std::size_t>>& prompts,
                            const std::vector<std::size_t>& starts, std::vector<search::SymbolStream>& streams);
};

namespace {

// The memory inputs of a generator made over an encoder's outputs: a batch input of each output's
// shape (a size known only at run time, 0 in the plan, is any_size).
std::vector<Variable> inputs_like(const std::vector<Variable>& outputs) {
    std::vector<Variable> inputs;
    for (std::size_t m = 0; m < outputs.size(); ++m) {
        const Variable& v = outputs[m];
        if (v && v.is_input())
            throw UserError("Generator: the memory mixes inputs (" + v.label() +
                            ") and computed values; give only memory inputs, or only an encoder's outputs");
        if (!v || v.axis().kind != Axis::Kind::Batch)
            throw UserError("Generator: memory " + std::to_string(m) + " must be a batch value (one per item, e.g. " +
                            "sequence::unpack of an encoder's output), not " + (v ? v.label() : "an empty Variable"));
        std::vector<std::size_t> dims(v.shape().begin(), v.shape().end());
        for (std::size_t& d : dims)
            if (d == 0) d = any_size;
        inputs.push_back(input_variable(Shape(dims), "memory_" + std::to_string(m)));
    }
    return inputs;
}

// A UserError naming the first parameter holding NaN or an infinity: a step over it would emit
// symbols of NaN log-probabilities without a word.
void check_finite(const std::vector<Parameter>& parameters, const std::string& who) {
    for (const Parameter& p : parameters) {
        const std::string bad = p.dtype() == DType::f64
                                    ? first_non_finite<double>({p.data<double>().data(), p.data<double>().size()})
                                    : first_non_finite<float>({p.data<float>().data(), p.data<float>().size()});
        if (!bad.empty())
            throw UserError(who + "parameter '" + (p.name().empty() ? p.label() : p.name()) + "' " + p.shape().str() +
                            " holds " + bad + "; its log-probabilities would be NaN, so nothing is generated");
    }
}

bool all_inputs(const std::vector<Variable>& memory) {
    return std::all_of(memory.begin(), memory.end(), [](const Variable& m) { return m && m.is_input(); });
}

}  // namespace

Generator::Generator(const Decoder& decoder, const std::vector<Variable>& memory)
    : Generator(decoder, all_inputs(memory) ? memory : inputs_like(memory), 0) {
    if (all_inputs(memory)) return;
    state_->encoder_outputs = memory;
    state_->encoder = std::make_unique<Session>(memory);
    state_->encoder_parameters = parameters_of(memory);
}

Generator::Generator(const Decoder& decoder, const std::vector<Variable>& memory_inputs, int)
    : state_(std::make_unique<State>()) {
    State& s = *state_;
    std::vector<Variable> distinct, picks;
    s.row_item = input_variable({1}, "row_item");
    for (const Variable& m : memory_inputs) {
        if (!m || !m.is_input() || m.axis().kind != Axis::Kind::Batch)
            throw UserError("Generator: every memory input must be a batch input_variable; " +
                            (m ? m.label() + " is not" : std::string("one is empty")));
        std::vector<std::size_t> sample;  // 0 in a sample shape: any_size
        for (std::size_t d : m.shape()) sample.push_back(d == 0 ? any_size : d);
        s.memory_names.push_back(m.name().empty() ? m.label() : m.name());
        s.memory_shapes.emplace_back(sample);
        const auto at = std::find(distinct.begin(), distinct.end(), m);
        s.memory_slot.push_back(static_cast<std::size_t>(at - distinct.begin()));
        if (at != distinct.end()) {
            picks.push_back(picks[s.memory_slot.back()]);
            continue;
        }
        distinct.push_back(m);
        std::vector<std::size_t> items{any_size};  // [N, sample...]
        items.insert(items.end(), sample.begin(), sample.end());
        s.memory.push_back(static_input_variable(Shape(items), m.node()->name + ".items"));
        picks.push_back(index_select(s.memory.back(), s.row_item, m.node()->name));
    }
    s.previous = input_variable({1}, "previous_symbol");
    s.state_shapes = decoder.state_shapes();
    s.updates = decoder.state_updates();
    for (std::size_t i = 0; i < s.state_shapes.size(); ++i) {
        const Shape& shape = s.state_shapes[i];
        if (std::count(shape.begin(), shape.end(), any_size) > 1)
            throw UserError("Generator: decoder state " + std::to_string(i) + " of shape " + shape.str() +
                            " has more than one any_size dimension; a growing state grows along one");
        const std::string name = "decoder_state_" + std::to_string(i);
        if (s.updates[i] == StateUpdate::append && shape.rank() == 2 && shape[0] == any_size) {
            s.paged.push_back(
                {static_input_variable({any_size, shape[1]}, name + ".rows"), std::make_shared<PageLists>()});
            s.states.emplace_back();
        } else {
            s.paged.emplace_back();
            s.states.push_back(input_variable(shape, name));
        }
    }
    std::vector<Variable> step_states = s.states;
    for (std::size_t i = 0; i < step_states.size(); ++i)
        if (s.paged[i].rows)
            step_states[i] =
                paged_rows(s.paged[i].rows, s.paged[i].pages, s.previous, "decoder_state_" + std::to_string(i));
    DecoderOutput out = decoder.step()(s.previous, step_states, picks);
    if (out.states.size() != s.states.size())
        throw UserError("Generator: the step returned " + std::to_string(out.states.size()) +
                        " states, the decoder has " + std::to_string(s.states.size()));
    const Shape& logits = out.logits.shape();
    if (logits.rank() != 1)
        throw UserError("Generator: the step's logits must have sample shape [V], not " + logits.str());
    s.vocabulary = logits[0];
    s.log_probs = log_softmax(out.logits);
    s.next_states = out.states;
    std::vector<Variable> outputs{s.log_probs};
    outputs.insert(outputs.end(), s.next_states.begin(), s.next_states.end());
    s.session = std::make_unique<Session>(outputs);  // no parameters of its own: it scores only
    s.parameters = parameters_of(outputs);
}

Generator::~Generator() = default;
Generator::Generator(Generator&&) noexcept = default;
Generator& Generator::operator=(Generator&&) noexcept = default;

std::size_t Generator::vocabulary() const { return state_->vocabulary; }

// The items of a generate call, counted by the memory, the initial states, the prompts or
// options.items, each checked against the step and the others (a UserError starting with `who`).
std::size_t Generator::State::items_of(const std::vector<Value>& memory_values, const GenerateOptions& o,
                                       const std::vector<Value>& initial_states,
                                       const std::vector<std::vector<std::size_t>>& prompts,
                                       const std::string& who) const {
    if (memory_values.size() != memory_slot.size())
        throw UserError(who + std::to_string(memory_values.size()) + " memory values for " +
                        std::to_string(memory_slot.size()) + " memory inputs");
    if (!initial_states.empty() && initial_states.size() != states.size())
        throw UserError(who + std::to_string(initial_states.size()) + " initial states for " +
                        std::to_string(states.size()) + " states");
    std::size_t items = 0;
    for (std::size_t m = 0; m < memory_values.size(); ++m) {
        const Value& v = memory_values[m];
        if (v.kind() != Value::Kind::Batch)
            throw UserError(who + "every memory value must be a batch value, not a " + v.describe());
        if (!fits(memory_shapes[m], v.sample_shape()))
            throw UserError(who + "memory value " + std::to_string(m) + " (for the memory input '" + memory_names[m] +
                            "') has sample shape " + v.sample_shape().str() + "; the input takes " +
                            memory_shapes[m].str() + " (any: every size)");
        if (items != 0 && v.num_items() != items)
            throw UserError(who + "the memory values have different numbers of items (" + std::to_string(items) +
                            " and " + std::to_string(v.num_items()) + ")");
        items = v.num_items();
    }
    for (std::size_t i = 0; i < initial_states.size(); ++i) {
        const Value& v = initial_states[i];
        if (v.kind() != Value::Kind::Batch || !fits(state_shapes[i], v.sample_shape()) ||
            (items != 0 && v.num_items() != items))
            throw UserError(who + "initial state " + std::to_string(i) + " must be a batch value of sample shape " +
                            state_shapes[i].str() + (items ? " with " + std::to_string(items) + " items" : "") +
                            ", not a " + v.describe());
        items = v.num_items();
    }
    if (items == 0 && !prompts.empty()) items = prompts.size();
    if (items == 0) items = o.items;
    if (items == 0)
        throw UserError(who + "with no memory, give the initial states, the prompts or options.items (the items)");
    if (o.items != 0 && o.items != items)
        throw UserError(who + "options.items is " + std::to_string(o.items) +
                        ", the memory, initial states or "
                        "prompts hold " +
                        std::to_string(items) + " items");
    if (!prompts.empty() && prompts.size() != items)
        throw UserError(who + std::to_string(prompts.size()) + " prompts for " + std::to_string(items) + " items");
    for (std::size_t n = 0; n < prompts.size(); ++n)
        for (std::size_t id : prompts[n])
            if (id >= vocabulary)
                throw UserError(who + "prompt " + std::to_string(n) + " holds the symbol " + std::to_string(id) +
                                ", outside the vocabulary of " + std::to_string(vocabulary) + " symbols");
    return items;
}

Generated Generator::generate(const GenerateOptions& options, const GenerationInputs& inputs) {
    return generate(inputs.memory, options, inputs.initial_states, inputs.prompts);
}

Generated Generator::generate(const std::vector<Value>& memory, const GenerateOptions& o,
                              const std::vector<Value>& initial_states,
                              const std::vector<std::vector<std::size_t>>& prompts) {
    State& s = *state_;
    const std::string who = "Generator::generate: ";
    search::check_options(o, s.vocabulary, who);
    const std::size_t items = s.items_of(memory, o, initial_states, prompts, who);
    // start_symbol no_symbol: each item starts from its prompt's first symbol (a language model has
    // no start symbol of its own), and the rest of the prompt follows it.
    std::vector<std::size_t> starts(items, o.start_symbol);
    std::vector<std::vector<std::size_t>> rests;
    if (o.start_symbol == no_symbol) {
        if (prompts.empty())
            throw UserError(who +
                            "start_symbol no_symbol starts each item from its prompt's first symbol: give "
                            "the prompts");
        rests = prompts;
        for (std::size_t n = 0; n < items; ++n) {
            if (rests[n].empty())
                throw UserError(who + "prompt " + std::to_string(n) +
                                " is empty; with start_symbol no_symbol each item starts from its prompt's first "
                                "symbol");
            starts[n] = rests[n].front();
            rests[n].erase(rests[n].begin());
        }
    }
    const std::vector<std::vector<std::size_t>>& fed = o.start_symbol == no_symbol ? rests : prompts;
    check_finite(s.parameters, who);
    // Distinct memory inputs bound once each.
    std::vector<Value> distinct(s.memory.size());
    for (std::size_t m = 0; m < memory.size(); ++m) distinct[s.memory_slot[m]] = memory[m];
    // The step's parameters' type now (to_precision may have converted them since the last call).
    const bool f64 = s.session->next_dtype("Generator::generate") == DType::f64;
    // Item n's stream is that of seed + n alone (GenerateOptions: the batch-invariance contract).
    std::vector<search::SymbolStream> streams;
    if (o.sample)
        for (std::size_t n = 0; n < items; ++n) streams.emplace_back(o.seed + n);
    Generated generated;
    if (o.context > 0) {
        generated = f64 ? s.run_in_rounds<double>(distinct, o, initial_states, fed, starts, streams)
                        : s.run_in_rounds<float>(distinct, o, initial_states, fed, starts, streams);
    } else {
        const std::vector<std::size_t> lengths(items, o.max_length);
        generated = f64 ? s.run<double>(distinct, o, initial_states, fed, starts, lengths, streams)
                        : s.run<float>(distinct, o, initial_states, fed, starts, lengths, streams);
    }
    for (auto& item : generated.items)  // keep_symbols false: the last symbols_kept(o) exactly
        for (Hypothesis& h : item) search::forget_old(h.symbols, o, true);
    return generated;
}

Generated Generator::generate_from(const Bindings& source, const GenerateOptions& o,
                                   const std::vector<Value>& initial_states,
                                   const std::vector<std::vector<std::size_t>>& prompts) {
    State& s = *state_;
    if (!s.encoder)
        throw UserError(
            "Generator::generate_from: this generator was made over memory inputs; give their values to "
            "generate(memory, ...), or make it over the encoder's outputs");
    check_finite(s.encoder_parameters, "Generator::generate_from: ");
    {
        FixedParameters fixed(*s.encoder);  // its products read each weight packed once
        s.encoder->forward(source, "Generator::generate_from");
    }
    std::vector<Value> memory;
    for (const Variable& v : s.encoder_outputs) memory.push_back(s.encoder->value(v));
    return generate(memory, o, initial_states, prompts);
}

namespace {

std::size_t prompt_length(const std::vector<std::vector<std::size_t>>& prompts, std::size_t n) {
    return prompts.empty() ? 0 : prompts[n].size();
}

// Each state of every item at the first step, [items, sample...]: the initial states given, or
// zeros (a growing state starting empty).
template <class T>
std::vector<xt::xarray<T>> first_states(const std::vector<Value>& initial_states, const std::vector<Shape>& shapes,
                                        std::size_t items) {
    std::vector<xt::xarray<T>> first;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        std::vector<std::size_t> dims{items};
        if (initial_states.empty()) {
            for (std::size_t d : shapes[i]) dims.push_back(d == any_size ? 0 : d);
        } else {
            const Shape& given = initial_states[i].sample_shape();
            dims.insert(dims.end(), given.begin(), given.end());
        }
        xt::xarray<T> a = xt::zeros<T>(dims);
        if (!initial_states.empty()) {
            const Value& v = initial_states[i];
            if (v.dtype() == DType::f32)
                std::copy(v.data<float>().begin(), v.data<float>().end(), a.begin());
            else
                std::copy(v.data<double>().begin(), v.data<double>().end(), a.begin());
        }
        first.push_back(std::move(a));
    }
    return first;
}

// Numbers the live hypotheses of the items still going as this pass's rows; returns each row's
// row in the last pass (its parent) and, in items_of_rows, its item.
std::vector<std::size_t> number_rows(std::vector<Beam>& beams, std::vector<std::size_t>& items_of_rows) {
    std::vector<std::size_t> parents;
    for (std::size_t n = 0; n < beams.size(); ++n) {
        if (beams[n].done) continue;
        for (Live& h : beams[n].live) {
            parents.push_back(h.row);
            items_of_rows.push_back(n);
            h.row = parents.size() - 1;
        }
    }
    return parents;
}

// The symbol each row is fed at step t, [rows, 1]: the start symbol, then the item's prompt,
// then the hypothesis' own last symbol.
xt::xarray<float> fed_symbols(const std::vector<Beam>& beams, std::size_t rows, std::size_t t,
                              const std::vector<std::size_t>& starts,
                              const std::vector<std::vector<std::size_t>>& prompts) {
    xt::xarray<float> ids = xt::xarray<float>::from_shape({rows, std::size_t{1}});
    for (std::size_t n = 0, r = 0; n < beams.size(); ++n) {
        if (beams[n].done) continue;
        for (const Live& h : beams[n].live) {
            const std::size_t symbol = t == 0                              ? starts[n]
                                       : t - 1 < prompt_length(prompts, n) ? prompts[n][t - 1]
                                                                           : h.symbols.back();
            ids(r++, 0) = static_cast<float>(symbol);
        }
    }
    return ids;
}

// Rows of the last pass, `width` elements each, from `data`.
template <class T>
struct PassRows {
    const T* data = nullptr;
    std::size_t width = 0;
};

// A state's rows for this pass, each the row its hypothesis came from: that row of `kept` (the
// state the last pass read, for an appended state; else nothing) followed by its row of `produced`
// (what the step returned), into `reused` when it has the right shape.
template <class T>
xt::xarray<T> state_rows(xt::xarray<T> reused, PassRows<T> kept, PassRows<T> produced,
                         const std::vector<std::size_t>& parents, const Shape& pattern) {
    const std::size_t rows = parents.size(), width = kept.width + produced.width;
    const auto dims = state_dims(rows, pattern, width);
    if (reused.size() != rows * width ||
        !std::equal(dims.begin(), dims.end(), reused.shape().begin(), reused.shape().end()))
        reused = xt::xarray<T>::from_shape(dims);
    // The rows split among idle inter-op threads: each writes its own.
    T* out = reused.data();
    const auto copy = [&](std::size_t begin, std::size_t end) {
        for (std::size_t r = begin; r < end; ++r) {
            T* to = out + r * width;
            std::copy_n(kept.data + parents[r] * kept.width, kept.width, to);
            std::copy_n(produced.data + parents[r] * produced.width, produced.width, to + kept.width);
        }
    };
    share_or_run(rows, 1, width, kShareElementWork, copy);
    return reused;
}

// The pages of the paged states (Generator::State::Paged) that start with as many rows and grow by
// as many a step (a Transformer's keys and values of every layer: none, then one each), made and
// checked once a pass for all of them: their tables are filled in lockstep, so a row's number is the
// same in each. Each row's list is its parent's followed by the rows its parent produced, stored
// once per parent that any row keeps; `stored` says where each such parent's rows went this pass.
// Beam search's reordering is this: new lists of row numbers, no row of a cache copied.
class PageList {
public:
    // This pass's lists for rows whose parents (rows of the last pass) are `parents`, each of which
    // produced `per_step` rows.
    const PageLists& next(const std::vector<std::size_t>& parents, std::size_t per_step) {
        const std::size_t rows = parents.size(), old_tk = lists_.length();
        const std::size_t tk = old_tk + per_step;
        std::vector<std::size_t> stored_at(parents.empty() ? 0 : *std::max_element(parents.begin(), parents.end()) + 1,
                                           kNone);
        stored.clear();
        std::vector<std::size_t> ids(rows * tk);
        for (std::size_t r = 0; r < rows; ++r) {
            const std::size_t p = parents[r];
            if (stored_at[p] == kNone) {
                stored_at[p] = used;
                stored.push_back({p, used});
                used += per_step;
            }
            std::size_t* to = ids.data() + r * tk;
            if (old_tk) std::copy_n(lists_.of(p).data(), old_tk, to);
            for (std::size_t j = 0; j < per_step; ++j) to[old_tk + j] = stored_at[p] + j;
        }
        lists_ = PageLists(std::move(ids), rows, used);
        return lists_;
    }
    // The last pass's lists, set into every state of the group (a copy shares the numbers).
    const PageLists& lists() const { return lists_; }
    std::vector<std::pair<std::size_t, std::size_t>> stored;  // this pass: (parent, its first row's index)
    std::size_t used = 0;                                     // rows stored so far, in every table
    std::size_t pass = kNone;                                 // the pass `stored` and the lists are of

private:
    static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
    PageLists lists_;
};

// A paged state's table of every row stored, bound as a static input and written in place between
// passes (the session reads it only during one).
template <class T>
class PageTable {
public:
    explicit PageTable(std::size_t width) : width_(width) {}
    // Stores the rows each parent of `list.stored` produced (`produced`, per row of the last pass).
    void store(PassRows<T> produced, const PageList& list) {
        reserve(std::max<std::size_t>(1, list.used));  // a table even before any row
        for (const auto& [parent, at] : list.stored)
            std::copy_n(produced.data + parent * produced.width, produced.width, table_ + at * width_);
    }
    // The table, bound at every pass: the same storage, so that what store() writes reaches the session.
    const Value& table() const { return value_; }

private:
    // Room for `rows` rows: a table twice as large when it is full, the stored rows copied over.
    void reserve(std::size_t rows) {
        if (rows <= capacity_) return;
        const std::size_t capacity = std::max({rows, 2 * capacity_, std::size_t{64}});
        xt::xarray<T> grown = xt::zeros<T>({capacity, width_});
        if (capacity_) std::copy_n(table_, capacity_ * width_, grown.data());
        value_ = Value::tensor(std::move(grown));
        table_ = value_.data<T>().data();  // taken before any copy of value_: it reaches the bound copies
        capacity_ = capacity;
    }

    std::size_t width_, capacity_ = 0;
    Value value_;
    T* table_ = nullptr;
};

// Each value as a tensor of T: converted once, then read in place at every pass.
template <class T>
std::vector<Value> tensors_of(const std::vector<Value>& values) {
    std::vector<Value> out;
    for (const Value& v : values)
        out.push_back(Value::tensor(v.dtype() == dtype_of<T>() ? v.data<T>() : v.tensor<T>()));
    return out;
}

// Step t's choices from its log-probabilities lp [rows, vocabulary]: every item still going and
// past its prompt extends its beam (greedy decoding, beam search) or draws from streams[n]; each
// choice goes to o.on_symbol.
template <class T>
void choose(std::vector<Beam>& beams, const T* lp, std::size_t vocabulary, std::size_t t, const GenerateOptions& o,
            const std::vector<std::vector<std::size_t>>& prompts, const std::vector<std::size_t>& lengths,
            std::vector<search::SymbolStream>& streams, search::SampleScratch& scratch) {
    const bool sampling = o.sample && o.temperature > 0;  // temperature 0 is greedy decoding
    for (std::size_t n = 0; n < beams.size(); ++n) {
        Beam& b = beams[n];
        if (b.done || t < prompt_length(prompts, n)) continue;  // a prompt's symbols are given, not chosen
        const bool last = t + 1 == prompt_length(prompts, n) + lengths[n];
        if (sampling) {
            const std::size_t symbol = search::sample(b, lp, vocabulary, o, last, streams[n], scratch, n);
            if (o.on_symbol) o.on_symbol(n, symbol);
            continue;
        }
        search::extend(b, lp, vocabulary, o, last);
        if (o.on_symbol) o.on_symbol(n, search::last_choice(b, o.end_symbol));
    }
}

}  // namespace

// One session pass per output step over every live hypothesis of every item still going (its
// rows), the chosen symbols fed back. Buffers go around: the states' arrays are moved into the
// bindings, and the session reads a bound array in place and holds it until its next pass binds
// again, so each state has two arrays taking turns: the one bound two passes ago is ours alone
// again (taking it back earlier would copy it). The memory is bound once per item, each row reading
// its item's through the row -> item index, and the outputs are read in place. An item's
// prompt is fed first, one symbol a step, while its one hypothesis follows it; a growing state
// (a key/value cache) is copied by rows as any other, at its size of the step, and an appended one
// as the row the last pass read followed by the rows the step returned for it. Each item's search
// (search.hpp) then chooses from its rows' log-probabilities: extends its beam, or draws.
template <class T>
Generated Generator::State::run(const std::vector<Value>& memory_values, const GenerateOptions& o,
                                const std::vector<Value>& initial_states,
                                const std::vector<std::vector<std::size_t>>& prompts,
                                const std::vector<std::size_t>& starts, const std::vector<std::size_t>& lengths,
                                std::vector<search::SymbolStream>& streams) {
    const std::size_t items = starts.size();
    // The parameters do not change during a decoding: every pass reads the weights packed once.
    FixedParameters fixed(*session);
    std::vector<Beam> beams(items);
    std::size_t passes = 0;
    for (std::size_t n = 0; n < items; ++n) {
        beams[n].live.push_back({{}, 0.0, n});
        beams[n].done = lengths[n] == 0;
        if (lengths[n] > 0) passes = std::max(passes, prompt_length(prompts, n) + lengths[n]);
    }
    search::SampleScratch scratch;
    // The states each row of the last pass produced (its outputs, or the initial states), and
    // their elements per row.
    const std::vector<xt::xarray<T>> initial = first_states<T>(initial_states, state_shapes, items);
    std::vector<PassRows<T>> produced, kept(states.size());
    for (const xt::xarray<T>& a : initial) produced.push_back({a.data(), a.size() / items});
    // Per state, the Values bound at the last two passes (pass t's in [t % 2]).
    std::vector<std::array<Value, 2>> bound(states.size());
    // Per paged state its table and its page list, one list for the states that start with as many
    // rows and grow by as many a step (the step's static row count; a varying one has its own).
    std::vector<std::unique_ptr<PageTable<T>>> pages(states.size());
    std::vector<PageList*> page_list(states.size(), nullptr);
    std::map<std::pair<std::size_t, std::size_t>, PageList> page_lists;  // map: the pointers stay
    for (std::size_t i = 0; i < states.size(); ++i) {
        if (!paged[i].rows) continue;
        pages[i] = std::make_unique<PageTable<T>>(state_shapes[i][1]);
        const std::size_t step_rows = next_states[i].shape()[0];
        const std::size_t growth = step_rows == any_size ? std::numeric_limits<std::size_t>::max() - i : step_rows;
        page_list[i] = &page_lists[{produced[i].width / state_shapes[i][1], growth}];
    }
    // Every item's memory, bound as it is each pass: converted to T here once, then read in place.
    const std::vector<Value> memory_items = tensors_of<T>(memory_values);

    for (std::size_t t = 0; t < passes; ++t) {
        if (o.on_step) o.on_step(t);
        std::vector<std::size_t> items_of_rows;
        const std::vector<std::size_t> parents = number_rows(beams, items_of_rows);
        if (parents.empty()) break;
        const std::size_t rows = parents.size();
        Bindings in{{previous, Value::batch(fed_symbols(beams, rows, t, starts, prompts))}};
        for (std::size_t i = 0; i < states.size(); ++i) {
            if (pages[i]) {
                PageList& list = *page_list[i];
                if (list.pass != t) list.next(parents, produced[i].width / state_shapes[i][1]), list.pass = t;
                pages[i]->store(produced[i], list);
                *paged[i].pages = list.lists();  // the numbers made once this pass, shared
                in.emplace(paged[i].rows, pages[i]->table());
                continue;
            }
            // Bound two passes ago: the session let it go when the last pass bound its inputs.
            Value& turn = bound[i][t % 2];
            xt::xarray<T> a = turn.empty() ? xt::xarray<T>() : std::move(turn.data<T>());
            turn = Value();
            in.emplace(states[i],
                       Value::batch(state_rows(std::move(a), kept[i], produced[i], parents, state_shapes[i])));
        }
        xt::xarray<T> item = xt::xarray<T>::from_shape({rows, std::size_t{1}});
        std::copy(items_of_rows.begin(), items_of_rows.end(), item.begin());
        in.emplace(row_item, Value::batch(std::move(item)));
        for (std::size_t m = 0; m < memory.size(); ++m) in.emplace(memory[m], memory_items[m]);
        session->forward(in, "Generator::generate");
        for (std::size_t i = 0; i < states.size(); ++i) {
            const std::span<const T> next = session->value_data<T>(next_states[i]);
            produced[i] = {next.data(), next.size() / rows};
            if (pages[i]) continue;
            bound[i][t % 2] = std::move(in.at(states[i]));  // shared with the session until its next pass
            if (updates[i] == StateUpdate::append) {
                const xt::xarray<T>& read = std::as_const(bound[i][t % 2]).data<T>();
                kept[i] = {read.data(), read.size() / rows};
            }
        }
        choose(beams, session->value_data<T>(log_probs).data(), vocabulary, t, o, prompts, lengths, streams, scratch);
    }
    return search::best_of(beams, o.beam_width);
}

// Rounds (GenerateOptions::context). An item's round starts from what it is fed before its first
// draw, its start symbol and the last symbols of its text (its prompt and draws so far), as many as
// the context holds in the first round and max(1, context / 2) after; it draws until its next
// symbol would go past the context. Items run their rounds together, each from its own stream, which
// runs on from round to round; an item that ended or drew max_length symbols sits the next ones out.
template <class T>
Generated Generator::State::run_in_rounds(const std::vector<Value>& memory_values, const GenerateOptions& o,
                                          const std::vector<Value>& initial_states,
                                          const std::vector<std::vector<std::size_t>>& prompts,
                                          const std::vector<std::size_t>& starts,
                                          std::vector<search::SymbolStream>& streams) {
    const std::size_t items = starts.size();
    const bool own_start = o.start_symbol != no_symbol;  // every round starts with it
    std::vector<std::vector<std::size_t>> text(items);
    for (std::size_t n = 0; n < items; ++n) {
        if (!own_start) text[n].push_back(starts[n]);  // the prompt's first symbol
        if (!prompts.empty()) text[n].insert(text[n].end(), prompts[n].begin(), prompts[n].end());
    }
    Generated all;
    all.items.assign(items, {Hypothesis{}});
    // Symbols each item drew (its hypothesis keeps only the last ones with keep_symbols false).
    std::vector<std::size_t> drawn(items, 0);
    std::vector<std::size_t> round_starts(items), lengths(items);
    std::vector<std::vector<std::size_t>> round_prompts(items);
    for (std::size_t fed_at_most = o.context;; fed_at_most = std::max<std::size_t>(1, o.context / 2)) {
        bool going = false;
        for (std::size_t n = 0; n < items; ++n) {
            const Hypothesis& h = all.items[n].front();
            lengths[n] = 0;
            if (h.ended || drawn[n] >= o.max_length) continue;
            const std::size_t take = std::min(text[n].size(), own_start ? fed_at_most - 1 : fed_at_most);
            std::vector<std::size_t> tail(text[n].end() - static_cast<std::ptrdiff_t>(take), text[n].end());
            round_starts[n] = own_start ? o.start_symbol : tail.front();
            if (!own_start) tail.erase(tail.begin());
            lengths[n] = std::min(o.max_length - drawn[n], o.context - tail.size());  // fed: 1 + tail
            round_prompts[n] = std::move(tail);
            going = true;
        }
        if (!going) break;
        const Generated round = run<T>(memory_values, o, initial_states, round_prompts, round_starts, lengths, streams);
        for (std::size_t n = 0; n < items; ++n) {
            if (lengths[n] == 0) continue;
            // A round draws at most `context` symbols, fewer than keep_symbols false drops at: its
            // hypothesis holds every symbol it drew.
            const Hypothesis& got = round.items[n].front();
            Hypothesis& h = all.items[n].front();
            h.symbols.insert(h.symbols.end(), got.symbols.begin(), got.symbols.end());
            search::forget_old(h.symbols, o);
            drawn[n] += got.symbols.size();
            text[n].insert(text[n].end(), got.symbols.begin(), got.symbols.end());
            // The next round is fed at most `context` symbols of the text: the rest goes.
            if (text[n].size() >= 2 * o.context)
                text[n].erase(text[n].begin(), text[n].end() - static_cast<std::ptrdiff_t>(o.context));
            h.log_probability += got.log_probability;
            h.ended = got.ended;
        }
    }
    for (std::size_t n = 0; n < items; ++n) {
        Hypothesis& h = all.items[n].front();
        h.score = h.log_probability / static_cast<double>(drawn[n] + (h.ended ? 1 : 0));
        if (!h.ended) ++all.unfinished;
    }
    return all;
}

}  // namespace loom::layers
