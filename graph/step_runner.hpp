#pragma once
// Running one plan step, forward or backward: the one place where an op's call is made for a node,
// whole or at one time step of its loop. A node outside loops runs once over all time steps; a
// loop runs its members step by step in its direction, and in reverse time
// for backward, taking the gradients of its inputs from outside the loop in bulk afterwards.
// Under a memory budget a loop runs in segments (square-root checkpointing, step_segments.cpp).
#include <atomic>
#include <vector>

#include "graph/buffers.hpp"
#include "graph/compile.hpp"
#include "graph/op.hpp"

namespace loom {

template <class T>
class StepRunner {
public:
    StepRunner(const Plan& plan, Buffers<T>& buffers, AxisLayouts& layouts)
        : plan_(plan), buffers_(buffers), layouts_(layouts) {}

    void forward(std::size_t step, Workspace<T>& work);
    void backward(std::size_t step, Workspace<T>& work);

    // The bytes one loop may keep for backward (0: no limit); `pass`: the backward every forward
    // is followed by (loops run in segments only then).
    void set_budget(std::size_t bytes) { budget_ = bytes; }
    void set_pass(const BackwardPlan* pass) { pass_ = pass; }
    // The most bytes one loop held for backward (values, gradients, checkpoints) so far.
    std::size_t loop_bytes_peak() const { return peak_.load(); }
    // Whether plan step `step`'s last forward ran in segments: its backward then recomputes from
    // its inputs, which must outlive the forward.
    bool segmented(std::size_t step) const { return segments_[step].active; }
    // Checkpoints a segmented loop's forward keeps for its backward.
    std::size_t bytes_held() const;

private:
    // A node's op call: its inputs (and their gradients) whole, and per time step.
    struct Call {
        int node = -1;
        std::vector<View<const T>> full, in;
        std::vector<View<T>> grad_full, grad;
        std::vector<const SequenceLayout*> layouts;
        std::vector<std::size_t> stride;  // per input: elements per time step, 0 if not a sequence
        std::size_t out_stride = 0;
        Dims out_dims;
        T* out_value = nullptr;  // the member's value and gradient buffers (whole, or a segment's window)
        T* out_grad = nullptr;
        bool inside = false;            // some input of the same loop gets a gradient
        bool reads_time = false;        // Op::reads_time, asked once per loop run, not per step
        typename OpCall<T>::Time time;  // for an op that reads time
    };
    // The call of node `m`; inside loop `loop` with n_seq sequences, gradients (when `grads`) only
    // of the inputs from the same loop.
    Call gather(int m, int loop, std::size_t n_seq, bool grads);
    OpCall<T> at_step(Call& call, std::size_t t, const SequenceLayout& layout, LoopCache<T>& cache, Workspace<T>& work,
                      bool backward);

    // A whole-tensor call's output layout and the real rows it gives (OpCall::rows).
    static void set_layout(OpCall<T>& c, const SequenceLayout* layout);
    // Each loop member's sample shape in this run (its plan shape unless a run-time size reaches it).
    std::vector<Shape> member_shapes(const PlanStep& step) const;
    void run_node(int i, Workspace<T>& work);
    void run_loop(const PlanStep& step, Workspace<T>& work);
    void back_node(int i, Workspace<T>& work);
    void back_loop(const PlanStep& step, Workspace<T>& work);
    void back_from_outside(const PlanStep& step, std::vector<Call>& members, Workspace<T>& work);
    std::vector<LoopCache<T>> loop_caches(std::size_t members);
    const SequenceLayout& loop_layout(const PlanStep& step) const;

    // A loop run in segments of `length` steps: each segment's steps are computed in windows of
    // `history` + `length` rows (the rows before the segment are what its delays read), only the
    // loop-carried states at each segment's start are saved, and backward recomputes a segment
    // from them before running its steps' backward. Members whose whole value or gradient a step
    // outside the loop (or the loop's bulk gradients) reads are kept whole as well.
    struct Segments {
        bool active = false;
        std::size_t length = 0, history = 0, count = 0;
        std::vector<char> full_value, full_grad, carried;  // per member
        std::vector<Buffer<T>> saved;                      // per carried member: its history rows at segment i's start
    };
    struct Window;
    bool plan_segments(const PlanStep& step, const SequenceLayout& layout, Segments& seg) const;
    Window window(const PlanStep& step, const Segments& seg, const SequenceLayout& layout, std::size_t i) const;
    Call gather_window(const PlanStep& step, std::size_t mi, const Window& w, std::vector<Buffer<T>>& values,
                       std::vector<Buffer<T>>& grads);
    void run_loop_segments(std::size_t s, Workspace<T>& work);
    void back_loop_segments(std::size_t s, Workspace<T>& work);
    void record_peak(std::size_t step, std::size_t extra_bytes);  // loop_bytes_peak

    const Plan& plan_;
    Buffers<T>& buffers_;
    AxisLayouts& layouts_;
    std::size_t budget_ = 0;
    const BackwardPlan* pass_ = nullptr;
    std::vector<Segments> segments_ = std::vector<Segments>(plan_.steps.size());  // per plan step
    std::atomic<std::size_t> peak_{0};
};

extern template class StepRunner<float>;
extern template class StepRunner<double>;

}  // namespace loom
