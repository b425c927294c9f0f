#pragma once
// Running one plan step, forward or backward: what runs when, a node whole or a loop's members at
// one time step each (their calls are built and made by OpCalls). A node outside loops runs once over all time steps; a
// loop runs its members step by step in its direction, and in reverse time
// for backward, taking the gradients of its inputs from outside the loop in bulk afterwards.
// Under a memory budget a loop runs in segments (square-root checkpointing, LoopSegments).
#include <atomic>
#include <vector>

#include "graph/buffers.hpp"
#include "graph/compile.hpp"
#include "graph/op.hpp"
#include "graph/op_calls.hpp"
#include "graph/step_segments.hpp"

namespace loom {

template <class T>
class StepRunner {
public:
    StepRunner(const Plan& plan, Buffers<T>& buffers, AxisLayouts& layouts)
        : plan_(plan), buffers_(buffers), layouts_(layouts) {}

    void forward(std::size_t step, Workspace<T>& work);
    void backward(std::size_t step, Workspace<T>& work);

    // The bytes one loop may keep for backward (0: no limit); `pass`: what each step's backward
    // takes (loops run in segments only when it is a training pass: backward follows every forward).
    void set_budget(std::size_t bytes) { budget_ = bytes; }
    void set_pass(const PassSchedule* pass) { pass_ = pass; }
    // The most bytes one loop held for backward (values, gradients, checkpoints) so far.
    std::size_t loop_bytes_peak() const { return peak_.load(); }
    // Whether plan step `step`'s last forward ran in segments: its backward then recomputes from
    // its inputs, which must outlive the forward.
    bool segmented(std::size_t step) const { return segments_.active(step); }
    // Checkpoints a segmented loop's forward keeps for its backward.
    std::size_t bytes_held() const { return segments_.bytes_held(); }
    // See OpCalls::keep_across_passes.
    void keep_across_passes(bool keep, WeightPrecision weights, bool widen_int8) {
        calls_.keep_across_passes(keep, weights, widen_int8);
    }

private:
    using Grads = typename OpCalls<T>::Grads;

    // Each loop member's sample shape in this run (its plan shape unless a run-time size reaches it),
    // into `shapes` (kept per step, so that a pass copies shapes without allocating).
    void member_shapes(const PlanStep& step, std::vector<Shape>& shapes) const;
    void run_node(int i, Workspace<T>& work);
    void run_loop(const PlanStep& step, Workspace<T>& work);
    void back_node(int i, Workspace<T>& work, const PassSchedule::Backward& planned);
    void back_loop(std::size_t step, Workspace<T>& work);
    // Node i's gradient memory, not zeroed, as the pass schedule planned (else an InternalError).
    void take_unzeroed(int i);
    void back_from_outside(std::size_t step, Workspace<T>& work);
    const SequenceLayout& loop_layout(const PlanStep& step) const;

    void record_peak(std::size_t step, std::size_t extra_bytes);  // loop_bytes_peak: the step's buffers and these

    const Plan& plan_;
    Buffers<T>& buffers_;
    AxisLayouts& layouts_;
    std::size_t budget_ = 0;
    const PassSchedule* pass_ = nullptr;
    OpCalls<T> calls_{plan_, buffers_};
    LoopSegments<T> segments_{plan_, buffers_, calls_};
    std::vector<std::vector<Shape>> shapes_ = std::vector<std::vector<Shape>>(plan_.steps.size());  // member_shapes
    std::atomic<std::size_t> peak_{0};
};

extern template class StepRunner<float>;
extern template class StepRunner<double>;

}  // namespace loom
