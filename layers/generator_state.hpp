#pragma once
// Internal to the Generator (layers/decoder.hpp): what its files share. Its state (the step's
// session, its inputs, the memory and the caches' inputs), made by layers/generator.cpp with the
// checks of each call; the search's passes over it, layers/generator_search.cpp, with the caches'
// pages, layers/generator_pages.hpp; the rounds past the context, layers/generator_rounds.cpp.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/page_lists.hpp"
#include "graph/session.hpp"
#include "layers/decoder.hpp"
#include "layers/search.hpp"

namespace loom::layers {

struct Generator::State {
    // The step compiled over `decoder` reading `memory_inputs` (Generator's constructor, and each
    // helper below).
    static std::unique_ptr<State> make(const Decoder& decoder, const std::vector<Variable>& memory_inputs);
    std::optional<Decoder> decoder;
    std::vector<Variable> memory_inputs;
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
    // A call's items generated: in rounds (run_in_rounds) where o.context is set, else one run()
    // of o.max_length symbols each; the step's parameters fixed, its weights packed, once for all.
    template <class T>
    Generated generate_items(const std::vector<Value>& memory_values, const GenerateOptions& o,
                             const std::vector<Value>& initial_states,
                             const std::vector<std::vector<std::size_t>>& prompts,
                             const std::vector<std::size_t>& starts, std::vector<search::SymbolStream>& streams);
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

    // Items generated in groups, one per inter-op thread (layers/generator_groups.cpp): how many
    // groups a call's items make (1: the call runs as one batch), and the call run so, each group a
    // search of its own on its own copy of the step (`helpers`, made at the first such call).
    std::size_t groups_for(std::size_t items, const std::vector<Value>& memory_values,
                           const std::vector<Value>& initial_states, WeightPrecision weights) const;
    template <class T>
    Generated run_in_groups(std::size_t groups, const GenerateOptions& o,
                            const std::vector<std::vector<std::size_t>>& prompts,
                            const std::vector<std::size_t>& starts, std::vector<search::SymbolStream>& streams);
    std::vector<std::unique_ptr<State>> helpers;
};

namespace generation {

// A session's parameters fixed while it lives (Session::set_parameters_fixed), its fixed
// products reading their weights in `weights`.
struct FixedParameters {
    Session& s;
    explicit FixedParameters(Session& session, WeightPrecision weights = WeightPrecision::float32) : s(session) {
        s.set_parameters_fixed(true, weights);
    }
    ~FixedParameters() { s.set_parameters_fixed(false); }
    FixedParameters(const FixedParameters&) = delete;
    FixedParameters& operator=(const FixedParameters&) = delete;
};

}  // namespace generation

}  // namespace loom::layers
