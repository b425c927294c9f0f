// The Generator's rounds past the context (GenerateOptions::context): searches of
// layers/generator_search.cpp, each item's text cropped between them; and the choice of rounds or
// one search, with the weights packed once for either.
#include <algorithm>
#include <vector>

#include "layers/generator_state.hpp"

namespace loom::layers {

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

template Generated Generator::State::run_in_rounds<float>(const std::vector<Value>&, const GenerateOptions&,
                                                          const std::vector<Value>&,
                                                          const std::vector<std::vector<std::size_t>>&,
                                                          const std::vector<std::size_t>&,
                                                          std::vector<search::SymbolStream>&);
template Generated Generator::State::run_in_rounds<double>(const std::vector<Value>&, const GenerateOptions&,
                                                           const std::vector<Value>&,
                                                           const std::vector<std::vector<std::size_t>>&,
                                                           const std::vector<std::size_t>&,
                                                           std::vector<search::SymbolStream>&);

// The parameters do not change during a call: every pass of every round reads the weights packed
// once, in the precision asked for (each round fixing them anew would pack them again).
template <class T>
Generated Generator::State::generate_items(const std::vector<Value>& memory_values, const GenerateOptions& o,
                                           const std::vector<Value>& initial_states,
                                           const std::vector<std::vector<std::size_t>>& prompts,
                                           const std::vector<std::size_t>& starts,
                                           std::vector<search::SymbolStream>& streams) {
    const generation::FixedParameters fixed(*session, o.weights);
    if (o.context > 0) return run_in_rounds<T>(memory_values, o, initial_states, prompts, starts, streams);
    const std::vector<std::size_t> lengths(starts.size(), o.max_length);
    return run<T>(memory_values, o, initial_states, prompts, starts, lengths, streams);
}

template Generated Generator::State::generate_items<float>(const std::vector<Value>&, const GenerateOptions&,
                                                           const std::vector<Value>&,
                                                           const std::vector<std::vector<std::size_t>>&,
                                                           const std::vector<std::size_t>&,
                                                           std::vector<search::SymbolStream>&);
template Generated Generator::State::generate_items<double>(const std::vector<Value>&, const GenerateOptions&,
                                                            const std::vector<Value>&,
                                                            const std::vector<std::vector<std::size_t>>&,
                                                            const std::vector<std::size_t>&,
                                                            std::vector<search::SymbolStream>&);

}  // namespace loom::layers
