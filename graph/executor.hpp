#pragma once
// The executor runs a Plan: leaves are filled from the bindings, nodes outside loops run once over
// all time steps, loops run step by step in their direction; backward runs the plan in reverse,
// loops in reverse time. It owns all evaluation state; nodes hold none.
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/buffer.hpp"
#include "core/parallel.hpp"
#include "core/value.hpp"
#include "graph/compile.hpp"
#include "graph/op.hpp"

namespace loom {

using Bindings = std::unordered_map<Variable, Value>;

template <class T>
class Execution {
public:
    explicit Execution(std::shared_ptr<const Plan> plan);

    // Checks and copies the inputs, parameters and constants into the leaf buffers.
    void bind(const Bindings& inputs);
    void forward();
    // Declares that every forward will be followed by backward(wrt): values no backward step reads
    // are then freed during forward, as soon as the steps using them are done (a Session that
    // trains does this). backward() must then be given exactly these wrt.
    void plan_backward(const std::vector<int>& wrt);
    // Seeds each output's gradient (ones on every real position, or `weights` when given) and runs
    // backward for the nodes on a path from `wrt` to the outputs.
    // `on_ready(w)`, when given, is called for each wrt node as soon as its gradient is final (every
    // step adding into it has run), possibly on a worker thread while other steps still run: a
    // learner can update that parameter then.
    void backward(const std::vector<int>& wrt, const std::unordered_map<int, const std::vector<T>*>& weights = {},
                  const std::function<void(int)>& on_ready = {});

    const Plan& plan() const { return *plan_; }
    Value value(int i) const;
    Value gradient(int i) const;
    // Raw buffers, for the gradient checker and learners. After backward only the outputs', the
    // leaves' (inputs, parameters, constants) and the wrt nodes' gradients are kept: the memory of
    // every other value and gradient went back to the pool once backward was done with it.
    std::span<T> value_buffer(int i) { return slots_[i].value; }
    std::span<const T> value_buffer(int i) const { return slots_[i].value; }
    // A gradient kept by rows (see RowGradient) is spread into a dense copy on request.
    std::span<const T> gradient_buffer(int i) const;
    // Hands wrt node i's dense gradient back to the pool once its reader (a learner) is done with
    // it, so later buffers of the pass reuse the memory; gradient_buffer(i) is then empty until the
    // next backward.
    void release_gradient(int i);
    // The gradient of node i when it is kept by rows (an embedding table's), else nullptr.
    const RowGradient<T>* gradient_by_rows(int i) const;
    // Bytes held: live values and gradients, and free buffers kept for reuse.
    std::size_t bytes_held() const;
    const SequenceLayout* layout(int i) const { return slots_[i].layout.get(); }
    // The rows (first axis, sorted, unique) of node i's gradient that the last backward wrote, when
    // every op that wrote it listed them (an embedding table); nullptr when the gradient is dense.
    const std::vector<std::size_t>* gradient_rows(int i) const;
    std::size_t row_size(int i) const;  // elements per (time step, sequence) row

private:
    struct Slot {
        Buffer<T> value, grad;
        // After backward: whether this value / gradient outlives the pass (outputs, leaves, wrt).
        bool keep_value = true, keep_grad = true;
        // An input whose only consumer passes its gradient through (an affine's addend) uses the
        // consumer's gradient buffer: grad_alias is that consumer until it hands the buffer over
        // (when its step is done); aliased_by is the reverse link.
        int grad_alias = -1, aliased_by = -1;
        Dims dims;
        std::size_t dyn = 0;
        Shape sample;
        LayoutPtr layout;
        bool needs_grad = false;
        // A float parameter is read in place from its storage (no copy per evaluation).
        const T* external = nullptr;
        // Row-sparse gradient bookkeeping (parameter matrices only): rows written by the last
        // backward; when `sparse`, the rest of `grad` is known to be zero.
        std::vector<std::size_t> rows;
        bool sparse = false;
        // Set when the gradient is kept by rows (`grad` then holds nothing); `dense` is its spread-out
        // copy, made only when someone asks for the dense gradient.
        std::unique_ptr<RowGradient<T>> by_rows;
        mutable Buffer<T> dense;
    };

    void allocate(int i, LayoutPtr layout, const Shape& sample, bool own = true);
    // One op memory per member of a loop, for one run of it (see LoopCache).
    std::vector<LoopCache<T>> loop_caches(std::size_t members);
    // Backward: a node's gradient buffer, zeroed, from the pool on first use; and the buffers of a
    // step's members handed back once its backward ran (no later step reads them).
    void ensure_grad(int i);
    // Of the step's members and inputs; for a loop, `outside` selects its inputs from outside the
    // loop (weights, input projections, initial states), whose gradients are only added into
    // after the loop, so their buffers are taken then.
    void ensure_step_grads(const PlanStep& step, bool outside);
    void release_step(const PlanStep& step);
    void finish_gradient(int i);  // a wrt node's gradient is final: padding zeroed, rows sorted
    const T* data(int i) const { return slots_[i].external ? slots_[i].external : slots_[i].value.data(); }
    void run_node(int i, Workspace<T>& work);
    void run_loop(const PlanStep& step, Workspace<T>& work);
    bool run_scan(const PlanStep& step, bool backward, Workspace<T>& work);
    void back_node(int i, Workspace<T>& work);
    void back_loop(const PlanStep& step, Workspace<T>& work);
    // The order constraints between plan steps for running several at once (built on first use):
    // forward, a step waits for the steps producing its inputs; backward (tasks numbered in reverse
    // plan order), for the steps consuming its outputs, and steps adding into the same input's
    // gradient run in reverse plan order, as serially, so results do not depend on the schedule.
    void build_task_graphs();
    // What a backward for `wrt` does, derived from the plan alone, once per set of wrt: which nodes
    // get a gradient, which gradients outlive the pass, which are kept by rows, and which inputs
    // share their one consumer's gradient buffer (an affine's addend: alias_of[j] = that consumer).
    struct GradientPlan {
        std::vector<int> wrt;
        std::vector<char> needs_grad, is_output, is_wrt, by_rows;
        std::vector<int> alias_of;
    };
    const GradientPlan& gradient_plan(const std::vector<int>& wrt);
    void release_inputs(int step);  // forward: after `step` ran
    LayoutPtr axis_layout(std::uint64_t axis) const;
    View<const T> view(int i) const;
    View<T> grad_view(int i);
    bool sparse_capable(int i) const;
    bool by_rows_capable(int i, const std::vector<char>& needs_grad) const;
    Value to_value(int i, const T* from) const;

    std::shared_ptr<const Plan> plan_;
    std::vector<int> step_of_;  // per node: the plan step it runs in
    std::vector<Slot> slots_;
    std::unique_ptr<GradientPlan> gradient_plan_;  // for the last wrt backward was given
    std::unordered_map<std::uint64_t, LayoutPtr> axis_layouts_;
    std::vector<char> scanned_;  // per plan step: its loop ran as a fused scan
    std::size_t batch_size_ = 0;
    bool has_batch_ = false;
    BufferPool<T> pool_;
    // plan_backward: which values backward reads, the wrt it was planned for, and per step its
    // inputs from other steps with, per node, how many steps still have to read it this forward.
    bool backward_planned_ = false;
    std::vector<char> value_needed_;
    std::vector<std::vector<int>> step_inputs_;
    std::vector<int> readers_, readers_left_;
    std::mutex release_mutex_;
    std::vector<Workspace<T>> works_{1};  // one scratch space per worker thread
    TaskGraph forward_tasks_, backward_tasks_;
    // How long each task took in the last parallel pass: the next pass starts the longest chains
    // first (critical path), e.g. the long answer tower's loops before the question tower's.
    std::vector<double> forward_cost_, backward_cost_;
    mutable std::mutex layouts_mutex_;  // axis_layouts_ grows while steps run in parallel
};

extern template class Execution<float>;
extern template class Execution<double>;

}  // namespace loom
