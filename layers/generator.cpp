// The Generator (layers/decoder.hpp): its step's session made once, and each call's inputs checked
// before any step. The search's passes are in layers/generator_search.cpp, the rounds past the
// context in layers/generator_rounds.cpp.
#include <algorithm>
#include <memory>
#include <utility>

#include "core/errors.hpp"
#include "core/finite.hpp"
#include "graph/mode.hpp"
#include "graph/ops.hpp"
#include "layers/generator_state.hpp"

namespace loom::layers {

using generation::FixedParameters;

namespace {

// Whether `actual` is a sample of `pattern`, where any_size matches every size.
bool fits(const Shape& pattern, const Shape& actual) {
    if (pattern.rank() != actual.rank()) return false;
    for (std::size_t i = 0; i < pattern.rank(); ++i)
        if (pattern[i] != any_size && pattern[i] != actual[i]) return false;
    return true;
}

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
    : state_(State::make(decoder, memory_inputs)) {}

std::unique_ptr<Generator::State> Generator::State::make(const Decoder& decoder,
                                                         const std::vector<Variable>& memory_inputs) {
    auto made = std::make_unique<State>();
    State& s = *made;
    s.decoder = decoder;
    s.memory_inputs = memory_inputs;
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
    // Generation never drops: the step is built without dropout's masks, whatever the mode it runs in.
    DecoderOutput out = [&] {
        const InferenceGraphScope inference;
        return decoder.step()(s.previous, step_states, picks);
    }();
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
    return made;
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
    if (const std::size_t groups = s.groups_for(items, distinct, initial_states, o.weights); groups > 1) {
        generated = f64 ? s.run_in_groups<double>(groups, o, fed, starts, streams)
                        : s.run_in_groups<float>(groups, o, fed, starts, streams);
    } else {
        generated = f64 ? s.generate_items<double>(distinct, o, initial_states, fed, starts, streams)
                        : s.generate_items<float>(distinct, o, initial_states, fed, starts, streams);
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

}  // namespace loom::layers
