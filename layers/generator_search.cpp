// The Generator's search (layers/decoder.hpp): one pass of the step's session per output step over
// every live hypothesis, its states carried from pass to pass (the key/value caches as pages,
// layers/generator_pages.hpp), each item's beam extended or its symbol drawn (layers/search.hpp).
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>

#include "core/parallel.hpp"
#include "layers/generator_pages.hpp"
#include "layers/generator_state.hpp"

namespace loom::layers {

using generation::PageList;
using generation::PageTable;
using generation::PassRows;
using search::Beam;
using search::Live;

namespace {

// A state whose shape has an any_size dimension grows from step to step (a key/value cache: one
// more row per step); its size per row is read from each pass's output. The elements of such a
// shape, any_size counted as 1:
std::size_t fixed_size(const Shape& shape) {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d == any_size ? 1 : d;
    return n;
}

// Batch dims {rows, sample...} of a state of `pattern` holding `width` elements per row.
std::vector<std::size_t> state_dims(std::size_t rows, const Shape& pattern, std::size_t width) {
    std::vector<std::size_t> dims{rows};
    const std::size_t fixed = fixed_size(pattern);
    for (std::size_t d : pattern) dims.push_back(d == any_size ? (fixed ? width / fixed : 0) : d);
    return dims;
}

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
    // Rows in bfloat16 where asked for and the session computes in float.
    const RowStorage storage =
        o.cache == CachePrecision::bfloat16 && std::is_same_v<T, float> ? RowStorage::bfloat16 : RowStorage::elements;
    for (std::size_t i = 0; i < states.size(); ++i) {
        if (!paged[i].rows) continue;
        pages[i] = std::make_unique<PageTable<T>>(state_shapes[i][1], storage);
        const std::size_t step_rows = next_states[i].shape()[0];
        const std::size_t growth = step_rows == any_size ? std::numeric_limits<std::size_t>::max() - i : step_rows;
        page_list[i] = &page_lists[{produced[i].width / state_shapes[i][1], growth}];
        page_list[i]->storage = storage;
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

template Generated Generator::State::run<float>(const std::vector<Value>&, const GenerateOptions&,
                                                const std::vector<Value>&, const std::vector<std::vector<std::size_t>>&,
                                                const std::vector<std::size_t>&, const std::vector<std::size_t>&,
                                                std::vector<search::SymbolStream>&);
template Generated Generator::State::run<double>(const std::vector<Value>&, const GenerateOptions&,
                                                 const std::vector<Value>&,
                                                 const std::vector<std::vector<std::size_t>>&,
                                                 const std::vector<std::size_t>&, const std::vector<std::size_t>&,
                                                 std::vector<search::SymbolStream>&);

}  // namespace loom::layers
