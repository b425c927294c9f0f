#pragma once
/// \file
/// The executor runs a Plan: leaves are filled from the bindings, then the steps run in plan order
/// (or as a task graph on several threads); backward seeds the outputs and runs the steps in reverse,
/// each parameter's gradient reported final as soon as no later step adds into it. What a pass does
/// is planned by pass_plan.hpp; buffers.hpp holds the memory and step_runner.hpp runs one step. It
/// owns all evaluation state; nodes hold none.
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/buffer.hpp"
#include "core/parallel.hpp"
#include "core/value.hpp"
#include "graph/buffers.hpp"
#include "graph/compile.hpp"
#include "graph/op.hpp"
#include "graph/pass_plan.hpp"
#include "graph/step_runner.hpp"

namespace loom {

/// The data of one evaluation: a Value for each input (sequence inputs take sequence Values, batch
/// inputs batch ones), keyed by the input's Variable.
using Bindings = std::unordered_map<Variable, Value>;

/// @cond
/// The executor behind Session, evaluate and gradients (internal: users hold a Session).
template <class T>
class Execution {
public:
    explicit Execution(std::shared_ptr<const Plan> plan);

    /// Checks the inputs and places them and the constants in the leaf buffers. A parameter or an
    /// input Value stored in T is read in place (the execution keeps a reference to the Value's
    /// storage until the next bind), unless a sequence Value holds anything but +0 in its padding;
    /// otherwise it is copied, converted, and its padding zeroed. A constant is read in place by a
    /// double execution and converted to float once by a float one. A binding error's message
    /// starts with `caller`, the call the user made ("evaluate", "Trainer::train_minibatch", ...).
    void bind(const Bindings& inputs, std::string_view caller = "Execution::bind");
    /// Every parameter and input is bound as a copy, which the caller may change through
    /// mutable_value_buffer (a gradient check perturbs it).
    void copy_leaves() { copy_leaves_ = true; }
    void forward();
    /// Whether the last forward's values are there for a backward: true after forward, false once
    /// a backward ran (it frees them as it goes) and before the first forward.
    bool has_forward_values() const { return has_forward_values_; }
    /// Declares that every forward will be followed by backward(wrt): values no backward step reads
    /// are then freed during forward, as soon as the steps using them are done (a Session that
    /// trains does this). backward() must then be given exactly these wrt.
    void plan_backward(const std::vector<int>& wrt);
    /// Declares that no backward follows any forward (a session that only scores): each value is
    /// freed once its last reader ran, and a loop's values read only inside it once the loop is
    /// done; only the outputs are kept. backward() then throws.
    void plan_forward_only();
    /// Seeds each output's gradient (ones on every real position, or `weights` when given) and runs
    /// backward for the nodes on a path from `wrt` to the outputs.
    /// `on_ready(w)`, when given, is called for each wrt node as soon as its gradient is final (every
    /// step adding into it has run), possibly on a worker thread while other steps still run: a
    /// learner can update that parameter then.
    void backward(const std::vector<int>& wrt, const std::unordered_map<int, const std::vector<T>*>& weights = {},
                  const std::function<void(int)>& on_ready = {});

    const Plan& plan() const { return *plan_; }
    Value value(int i) const;
    Value gradient(int i) const;
    /// Raw buffers, for the gradient checker and learners. After backward only the outputs', the
    /// leaves' (inputs, parameters, constants) and the wrt nodes' gradients are kept: the memory of
    /// every other value and gradient went back to the pool once backward was done with it.
    std::span<const T> value_buffer(int i) const {
        const auto& s = buffers_[i];
        return s.external ? std::span<const T>(s.external, s.dims.size()) : std::span<const T>(s.value);
    }
    /// Node i's own value buffer, to change: empty for a leaf read in place (see copy_leaves).
    std::span<T> mutable_value_buffer(int i) { return buffers_[i].value; }
    /// Elements copied or converted into leaf buffers since this execution was made.
    std::size_t elements_copied() const { return buffers_.elements_copied(); }
    /// A gradient kept by rows (see RowGradient) is spread into a dense copy on request.
    std::span<const T> gradient_buffer(int i) const { return buffers_.dense_gradient(i); }
    /// Hands wrt node i's dense gradient back to the pool once its reader (a learner) is done with
    /// it, so later buffers of the pass reuse the memory; gradient_buffer(i) is then empty until the
    /// next backward.
    void release_gradient(int i) { buffers_.release_gradient(i); }
    /// The gradient of node i when it is kept by rows (an embedding table's), else nullptr.
    const RowGradient<T>* gradient_by_rows(int i) const { return buffers_.row_gradient(i); }
    /// The same gradients, to change in place (Session::mutable_gradient).
    std::span<T> mutable_gradient_buffer(int i) { return buffers_.mutable_dense_gradient(i); }
    RowGradient<T>* mutable_gradient_by_rows(int i) { return buffers_.mutable_row_gradient(i); }
    /// Bytes held: live values and gradients, free buffers kept for reuse, and the states a loop
    /// run in segments saved for its backward.
    std::size_t bytes_held() const { return buffers_.bytes_held() + runner_.bytes_held(); }
    /// The bytes one loop may keep for backward; beyond them it runs in segments (square-root
    /// checkpointing, see StepRunner). Applies once plan_backward was called. 0: no limit.
    void set_memory_budget(std::size_t bytes) { runner_.set_budget(bytes); }
    std::size_t loop_bytes_peak() const { return runner_.loop_bytes_peak(); }
    /// While set, products outside loops keep a weight that derives from parameters and constants
    /// only packed across passes (OpCalls::keep_across_passes): the caller promises the parameters
    /// do not change meanwhile; in float, they read it in `weights` (core/weight_precision.hpp),
    /// int8 ones kept widened too where `widen_int8` (LoopCache::widen_int8).
    void keep_across_passes(bool keep, WeightPrecision weights = WeightPrecision::float32, bool widen_int8 = false) {
        runner_.keep_across_passes(keep, weights, widen_int8);
    }
    const SequenceLayout* layout(int i) const { return buffers_[i].layout.get(); }
    std::size_t row_size(int i) const { return buffers_[i].sample.size(); }  ///< elements per (step, sequence)

private:
    void bind_input(int i, const Value& v, const Node*& batch_owner,
                    std::unordered_map<std::uint64_t, const Node*>& axis_owner, std::string_view caller);
    /// Runs run(step or task, worker) over every step, serially or as a task graph on several
    /// threads; `cost` records how long each took, so the next pass starts the longest chains first.
    void schedule(TaskGraph& tasks, std::vector<double>& cost, const std::function<void(int, Workspace<T>&)>& run);
    void release_after(int step);  ///< forward: after `step` ran, what the schedule frees

    std::shared_ptr<const Plan> plan_;
    StepGraph steps_;
    Buffers<T> buffers_;
    AxisLayouts layouts_;
    StepRunner<T> runner_;
    std::unique_ptr<PassSchedule> pass_;  ///< planned, or made for the last wrt given (keep_all)
    bool has_batch_ = false;
    bool has_forward_values_ = false;  ///< see has_forward_values
    bool copy_leaves_ = false;
    std::vector<Value> bound_;  ///< the input Values read in place, kept alive until the next bind
    /// A pass that frees during forward: per node, how many steps still have to read it, and
    /// whether the schedule holds it (a loop ran in segments).
    std::vector<int> readers_left_;
    std::vector<char> held_;
    std::mutex release_mutex_;
    std::vector<Workspace<T>> works_{1};  ///< one scratch space per worker thread
    TaskGraph forward_tasks_, backward_tasks_;
    std::vector<double> forward_cost_, backward_cost_;
};

extern template class Execution<float>;
extern template class Execution<double>;
/// @endcond

}  // namespace loom
