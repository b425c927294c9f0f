// Generation on several threads: a call's items split into groups, one per inter-op thread, each
// group a search of its own over its own copy of the step (its session, caches and page lists).
// A step over a few streams is too small to share among threads op by op (the threads would wait
// on each other at every op of every step: a second thread made 8 streams of a small GPT slower),
// while whole groups share nothing until their texts are done. Every item generates what it
// generates alone (the batch-invariance contract), so the groups change no symbol.
#include <atomic>
#include <exception>
#include <mutex>

#include "core/gemm.hpp"
#include "core/parallel.hpp"
#include "layers/generator_state.hpp"

namespace loom::layers {

namespace {

// Items a group should hold at least: fewer make steps so small that a thread's own overhead
// (its pass over the plan, the search) outweighs what it computes.
constexpr std::size_t kItemsPerGroup = 4;

// Each group reads every weight once a step. Weights larger than half a last-level cache (32 MiB
// on the machines measured) come from memory, and a group of fewer than kRowsToReuse items does
// too little arithmetic per weight to hide that: there one group whose products are split by
// columns among the threads reads them once where two groups would read them twice. Zen 4, the
// wide GPT (6 x 384) at 2 threads, characters/s of groups against one group: 8 streams, float
// weights (42.6 MB) 1,725 against 1,983, bfloat16 (21.3 MB) 1,770 against 1,892, int8 (10.7 MB)
// 2,746 against 2,765; 16 streams, float, 2,389-2,554 against 2,367-2,379; 32 streams 2,706-3,166
// against 2,601-2,683.
constexpr std::size_t kWeightBytesFromMemory = std::size_t{16} << 20;
constexpr std::size_t kRowsToReuse = 8;
// Where int8 weights go through vdpbf16ps (core/quantized_gemm.hpp), each group also widens every
// weight into bfloat16 pairs as it reads it, work that a group of few rows does not amortize: one
// group pays from smaller weights. Zen 4, 8 streams at 2 threads, characters/s of groups against
// one group: the wide GPT in int8 (10.7 MB) 2,938-3,182 against 3,828-4,019; nano in int8 (0.8 MB,
// then widened at every product; now once: kWidenedInt8Bytes, core/quantized_gemm.hpp) 23,791-25,331
// against 19,238-20,570.
constexpr std::size_t kWidenedWeightBytes = std::size_t{4} << 20;

// A group's on_step stopping it because another group failed (never seen outside this file).
struct Stopped {};

}  // namespace

std::size_t Generator::State::groups_for(std::size_t items, const std::vector<Value>& memory_values,
                                         const std::vector<Value>& initial_states, WeightPrecision weights) const {
    // Memory and initial states are batch values of every item: a group would need its items'
    // rows of each. The language models' calls have neither.
    if (!memory_values.empty() || !initial_states.empty() || inter_op_threads() < 2) return 1;
    const std::size_t groups =
        std::min<std::size_t>(static_cast<std::size_t>(inter_op_threads()), items / kItemsPerGroup);
    if (groups < 2) return 1;
    const std::size_t element = weights == WeightPrecision::int8 ? 1 : weights == WeightPrecision::bfloat16 ? 2 : 4;
    std::size_t bytes = 0;
    for (const Parameter& p : parameters) bytes += p.shape().size() * element;
    const bool widened = weights == WeightPrecision::int8 && bf16_kernels_chosen();
    const std::size_t shared_from = widened ? kWidenedWeightBytes : kWeightBytesFromMemory;
    return bytes > shared_from && items / groups < kRowsToReuse ? 1 : groups;
}

// Group g holds items [items g / groups, items (g + 1) / groups). Its callbacks see the items'
// numbers in the whole call, and run one at a time whichever group calls (a program's on_symbol
// need not be thread-safe); on_step runs before each pass of each group. The first exception a
// group throws (its callback's, an error of its step) stops the others before their next pass and
// is rethrown here once all have stopped.
template <class T>
Generated Generator::State::run_in_groups(std::size_t groups, const GenerateOptions& o,
                                          const std::vector<std::vector<std::size_t>>& prompts,
                                          const std::vector<std::size_t>& starts,
                                          std::vector<search::SymbolStream>& streams) {
    const std::size_t items = starts.size();
    while (helpers.size() + 1 < groups) helpers.push_back(make(*decoder, memory_inputs));
    std::vector<Generated> parts(groups);
    std::mutex calls;
    std::atomic<bool> stop{false};
    std::exception_ptr failure;
    TaskGraph graph;
    graph.after.resize(groups);
    run_task_graph(graph, static_cast<int>(groups), [&](int task, int) {
        const auto g = static_cast<std::size_t>(task);
        const std::size_t begin = items * g / groups, end = items * (g + 1) / groups;
        const auto at = [&](const auto& all) {
            using V = std::decay_t<decltype(all)>;
            return all.empty() ? V{} : V(all.begin() + std::ptrdiff_t(begin), all.begin() + std::ptrdiff_t(end));
        };
        GenerateOptions mine = o;
        mine.items = 0;
        if (o.on_symbol)
            mine.on_symbol = [&, begin](std::size_t item, std::size_t symbol) {
                const std::lock_guard<std::mutex> one(calls);
                o.on_symbol(begin + item, symbol);
            };
        mine.on_step = [&](std::size_t pass) {
            if (stop) throw Stopped{};
            if (!o.on_step) return;
            const std::lock_guard<std::mutex> one(calls);
            o.on_step(pass);
        };
        State& s = g == 0 ? *this : *helpers[g - 1];
        const std::vector<std::vector<std::size_t>> my_prompts = at(prompts);
        const std::vector<std::size_t> my_starts = at(starts);
        std::vector<search::SymbolStream> my_streams = at(streams);
        try {
            parts[g] = s.generate_items<T>({}, mine, {}, my_prompts, my_starts, my_streams);
        } catch (const Stopped&) {
        } catch (...) {
            const std::lock_guard<std::mutex> one(calls);
            if (!failure) failure = std::current_exception();
            stop = true;
        }
    });
    if (failure) std::rethrow_exception(failure);
    Generated all;
    for (Generated& part : parts) {
        for (auto& item : part.items) all.items.push_back(std::move(item));
        all.unfinished += part.unfinished;
    }
    return all;
}

template Generated Generator::State::run_in_groups<float>(std::size_t, const GenerateOptions&,
                                                          const std::vector<std::vector<std::size_t>>&,
                                                          const std::vector<std::size_t>&,
                                                          std::vector<search::SymbolStream>&);
template Generated Generator::State::run_in_groups<double>(std::size_t, const GenerateOptions&,
                                                           const std::vector<std::vector<std::size_t>>&,
                                                           const std::vector<std::size_t>&,
                                                           std::vector<search::SymbolStream>&);

}  // namespace loom::layers
