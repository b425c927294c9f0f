#pragma once
// The executor runs a Plan: leaves are filled from the bindings, nodes outside loops run once over
// all time steps, loops run step by step in their direction; backward runs the plan in reverse,
// loops in reverse time. It owns all evaluation state; nodes hold none.
#include <memory>
#include <unordered_map>
#include <vector>

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
    // Seeds each output's gradient (ones on every real position, or `weights` when given) and runs
    // backward for the nodes on a path from `wrt` to the outputs.
    void backward(const std::vector<int>& wrt, const std::unordered_map<int, const std::vector<T>*>& weights = {});

    const Plan& plan() const { return *plan_; }
    Value value(int i) const;
    Value gradient(int i) const;
    // Raw buffers, for the gradient checker and learners.
    std::vector<T>& value_buffer(int i) { return slots_[i].value; }
    const std::vector<T>& value_buffer(int i) const { return slots_[i].value; }
    const std::vector<T>& gradient_buffer(int i) const { return slots_[i].grad; }
    const SequenceLayout* layout(int i) const { return slots_[i].layout.get(); }
    // The rows (first axis, sorted, unique) of node i's gradient that the last backward wrote, when
    // every op that wrote it listed them (an embedding table); nullptr when the gradient is dense.
    const std::vector<std::size_t>* gradient_rows(int i) const;
    std::size_t row_size(int i) const;  // elements per (time step, sequence) row

private:
    struct Slot {
        std::vector<T> value, grad;
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
    };

    void allocate(int i, LayoutPtr layout, const Shape& sample, bool own = true);
    const T* data(int i) const { return slots_[i].external ? slots_[i].external : slots_[i].value.data(); }
    void run_node(int i);
    void run_loop(const PlanStep& step);
    bool run_scan(const PlanStep& step, bool backward);
    void back_node(int i);
    void back_loop(const PlanStep& step);
    View<const T> view(int i) const;
    View<T> grad_view(int i);
    bool sparse_capable(int i) const;
    Value to_value(int i, const T* from) const;

    std::shared_ptr<const Plan> plan_;
    std::vector<Slot> slots_;
    std::unordered_map<std::uint64_t, LayoutPtr> axis_layouts_;
    std::vector<char> scanned_;  // per plan step: its loop ran as a fused scan
    std::size_t batch_size_ = 0;
    bool has_batch_ = false;
    Workspace<T> work_;
};

extern template class Execution<float>;
extern template class Execution<double>;

}  // namespace loom
