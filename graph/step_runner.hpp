#pragma once
// Running one plan step, forward or backward: the one place where an op's call is made for a node,
// whole or at one time step of its loop. A node outside loops runs once over all time steps; a
// loop runs its members step by step in its direction, and in reverse time
// for backward, taking the gradients of its inputs from outside the loop in bulk afterwards.
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
    void run_node(int i, Workspace<T>& work);
    void run_loop(const PlanStep& step, Workspace<T>& work);
    void back_node(int i, Workspace<T>& work);
    void back_loop(const PlanStep& step, Workspace<T>& work);
    void back_from_outside(const PlanStep& step, std::vector<Call>& members, Workspace<T>& work);
    std::vector<LoopCache<T>> loop_caches(std::size_t members);
    const SequenceLayout& loop_layout(const PlanStep& step) const;

    const Plan& plan_;
    Buffers<T>& buffers_;
    AxisLayouts& layouts_;
};

extern template class StepRunner<float>;
extern template class StepRunner<double>;

}  // namespace loom
