#pragma once
// Every plan node's op call: the one place where a call is built and the one place where an op's
// prepare, forward and backward are called. A node's lists (its inputs' values and gradients, whole
// and at one time step, their layouts, per-step strides and rows-kept gradients) are sized once per
// plan and refreshed in place by each call, so a pass allocates nothing for them; the OpCall an op
// sees is a view of them, kept with them. StepRunner decides what runs when; it builds through
// here and calls through here.
#include <span>
#include <vector>

#include "graph/buffers.hpp"
#include "graph/compile.hpp"
#include "graph/op.hpp"

namespace loom {

template <class T>
class OpCalls {
public:
    // Which of its inputs' gradients a backward call adds into.
    enum class Grads {
        none,        // a forward call
        all,         // a node outside loops (a gradient kept by rows included)
        other_loops  // a loop member's inputs from outside its loop, in bulk after the loop
    };

    OpCalls(const Plan& plan, Buffers<T>& buffers);

    // Node i over its whole buffers ([T, N, ...]): its inputs' values and layouts and the gradients
    // `grads` selects, its output when it is allocated (`output`: prepare runs before). Returns
    // whether some selected input gets a gradient.
    bool whole(int i, Grads grads, bool output, Workspace<T>& work);
    // After the output was allocated: node i's output and the rows to compute (OpCall::rows).
    void set_output(int i);
    // Node i's backward call (whole built it) writes the input gradients of `bits` rather than
    // adding into them (OpCall::assign_grad).
    void assign_gradients(int i, std::uint32_t bits) { records_[static_cast<std::size_t>(i)].call.assign_grad = bits; }

    // Node i as a member of its loop over n_seq sequences, run step by step (at_step); with
    // `grads`, the gradients of its inputs from the same loop, the others being taken in bulk after
    // the loop (whole with Grads::other_loops).
    void loop_member(int i, std::size_t n_seq, bool grads);
    // The same member on a segment's window (step_segments.cpp): the loop `members`' values and
    // gradients in the window buffers `values` and `grads` (empty: no gradient), inputs from outside
    // the loop viewed from row `base` on, and sequence inputs under the window's `layout` of `rows`
    // rows.
    void window(int i, std::span<const int> members, const SequenceLayout& layout, std::size_t rows, std::size_t base,
                std::span<Buffer<T>> values, std::span<Buffer<T>> grads);
    // Member i's call moved to time step t of its buffers (loop_member or window built them).
    const OpCall<T>& at_step(int i, std::size_t t, const SequenceLayout& layout, LoopCache<T>& cache,
                             Workspace<T>& work, bool backward);
    // Whether some input of member i from its own loop gets a gradient at each step.
    bool inside(int i) const { return records_[static_cast<std::size_t>(i)].inside; }
    // While `keep` is set, the forward call of each node outside loops whose static inputs derive
    // only from parameters and constants gets a LoopCache kept across passes (OpCall::memory: what
    // a product packs its weight into once); the caller promises the parameters do not change
    // meanwhile. Setting it (again) or clearing it drops what the caches held. `weights`: the
    // precision the products among them read their weight in (LoopCache::weights); `widen_int8`:
    // int8 weights are kept widened too (LoopCache::widen_int8).
    void keep_across_passes(bool keep, WeightPrecision weights = WeightPrecision::float32, bool widen_int8 = false);

    // Node i's op on the call last built for it.
    Prepared prepare(int i) const;
    void forward(int i) const;
    void backward(int i) const;

private:
    struct Record {
        const Op* op = nullptr;
        std::size_t first = 0, count = 0;  // its inputs' entries in the lists below
        OpCall<T> call;
        typename OpCall<T>::Time time;  // for an op that reads time
        bool reads_time = false;        // OpTraits::reads_time, asked once per plan
        bool keeps = false;  // outside loops, its static inputs fixed: a cache across passes (keep_across_passes)
        bool inside = false;
        std::size_t out_stride = 0;  // a loop member: elements per time step of its output
        Dims out_dims;
        T* out_value = nullptr;  // a loop member's value and gradient buffers (whole, or a window)
        T* out_grad = nullptr;
    };
    // Where every call starts: no field left from the last one, the inputs `in` (whole or at one
    // step) and their layouts, the workspace.
    OpCall<T>& start(Record& r, std::span<const View<const T>> in, Workspace<T>& work);
    template <class V>
    static std::span<V> part(std::vector<V>& list, const Record& r) {
        return {list.data() + r.first, r.count};
    }

    const Plan& plan_;
    Buffers<T>& buffers_;
    std::vector<Record> records_;  // per plan node
    // Per input of every node, in plan order: whole and per-step values, gradients, the layouts,
    // elements per time step (0: not a sequence), gradients kept by rows.
    std::vector<View<const T>> full_, in_;
    std::vector<View<T>> grad_full_, grad_;
    std::vector<const SequenceLayout*> layouts_;
    std::vector<std::size_t> stride_;
    std::vector<RowGradient<T>*> by_rows_;
    // Per plan node: whether its value depends on parameters and constants only (then it is the
    // same at every pass while they do not change; asked once per plan), and the caches
    // keep_across_passes gives.
    std::vector<char> fixed_;
    std::vector<LoopCache<T>> kept_;
};

extern template class OpCalls<float>;
extern template class OpCalls<double>;

}  // namespace loom
