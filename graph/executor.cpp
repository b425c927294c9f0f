#include "graph/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/errors.hpp"
#include "graph/interrupt.hpp"

namespace loom {

namespace {
// Whether every padded position of time-major data [T_max, N, row] holds +0 (what zero_padding writes).
template <class T>
bool padding_is_zero(const T* data, const SequenceLayout& layout, std::size_t row) {
    const std::size_t n = layout.num_sequences();
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t t = layout.length(j); t < layout.max_length(); ++t) {
            const T* p = data + (t * n + j) * row;
            for (std::size_t k = 0; k < row; ++k)
                if (p[k] != T(0) || std::signbit(p[k])) return false;
        }
    return true;
}

// "caller: node": a binding error names the call the user made, then the input.
std::string named(std::string_view caller, const Node& n) { return std::string(caller) + ": " + n.label(); }
}  // namespace

template <class T>
Execution<T>::Execution(std::shared_ptr<const Plan> plan)
    : plan_(std::move(plan)), steps_(plan_steps(*plan_)), buffers_(*plan_), runner_(*plan_, buffers_, layouts_) {
    forward_tasks_ = steps_.forward;
    backward_tasks_ = steps_.backward;
}

template <class T>
void Execution<T>::bind(const Bindings& inputs, std::string_view caller) {
    std::unordered_map<const Node*, const Value*> by_node;
    for (const auto& [var, val] : inputs) by_node[var.node().get()] = &val;
    layouts_.clear();
    bound_.clear();
    has_batch_ = false;
    std::unordered_map<std::uint64_t, const Node*> axis_owner;
    const Node* batch_owner = nullptr;
    for (std::size_t i = 0; i < plan_->nodes.size(); ++i) {
        const Node& n = *plan_->nodes[i].node;
        const int index = static_cast<int>(i);
        if (n.kind == NodeKind::Input) {
            auto it = by_node.find(&n);
            if (it == by_node.end())
                throw UserError(named(caller, n) + " is needed but not bound; pass a Value for it");
            bind_input(index, *it->second, batch_owner, axis_owner, caller);
        } else if (n.kind == NodeKind::Parameter) {
            const xt::xarray<T>* own = n.parameter_as<T>();
            if (own && !copy_leaves_) {  // read in place from the parameter's storage
                buffers_.allocate(index, nullptr, n.type.shape, false);
                buffers_.place_external(index, own->data());
            } else {
                buffers_.allocate(index, nullptr, n.type.shape);
                std::visit(
                    [&](const auto& stored) {
                        buffers_.fill(index, std::span<const typename std::decay_t<decltype(*stored)>::value_type>(
                                                 stored->data(), stored->size()));
                    },
                    n.parameter_value);
            }
        } else if (n.kind == NodeKind::Constant) {
            buffers_.allocate(index, nullptr, n.type.shape, false);
            buffers_.place_constant(index, n.constant_value);
        }
    }
    for (const auto& pn : plan_->nodes)
        if (pn.type.axis.is_dynamic() && !has_batch_)
            throw UserError(named(caller, *pn.node) + " has a dynamic axis but no input was bound");
}

template <class T>
void Execution<T>::bind_input(int i, const Value& v, const Node*& batch_owner,
                              std::unordered_map<std::uint64_t, const Node*>& axis_owner, std::string_view caller) {
    const Node& n = *plan_->nodes[static_cast<std::size_t>(i)].node;
    // A static input (no dynamic axis) takes no part in the batch size: it is read as a parameter is.
    if (!n.type.axis.is_dynamic() && v.kind() != Value::Kind::Static)
        throw UserError(named(caller, n) + " is a static input but was bound to a " + v.describe() +
                        "; use Value::tensor");
    const Shape sample = v.sample_shape();
    bool fits = sample.rank() == n.type.shape.rank();
    for (std::size_t k = 0; fits && k < sample.rank(); ++k)
        fits = n.type.shape[k] == 0 || n.type.shape[k] == sample[k];  // 0: any_size, set by this binding
    if (!fits)
        throw UserError(named(caller, n) + " has sample shape " + n.type.shape.str() +
                        (n.type.shape.size() == 0 ? " (0: any size)" : std::string()) + " but was bound to a " +
                        v.describe());
    LayoutPtr layout;
    if (n.type.axis.is_dynamic()) {
        const bool want_seq = n.type.axis.is_sequence();
        if (want_seq && v.kind() != Value::Kind::Sequence)
            throw UserError(named(caller, n) + " is a sequence input but was bound to a " + v.describe() +
                            "; use Value::sequences");
        if (!want_seq && v.kind() != Value::Kind::Batch)
            throw UserError(named(caller, n) + " is a batch input but was bound to a " + v.describe() +
                            "; use Value::batch");
        if (has_batch_ && v.num_items() != buffers_.batch_size)
            throw UserError(named(caller, n) + " is bound to " + std::to_string(v.num_items()) + " items but " +
                            batch_owner->label() + " to " + std::to_string(buffers_.batch_size));
        if (!has_batch_) {
            has_batch_ = true;
            buffers_.batch_size = v.num_items();
            batch_owner = &n;
        }
        if (want_seq) {
            layout = v.layout_ptr();
            if (LayoutPtr before = layouts_.insert(n.type.axis.id, layout); before && !(*before == *layout))
                throw UserError(named(caller, n) + " and " + axis_owner[n.type.axis.id]->label() +
                                " share a sequence axis but were bound to different lengths (" + layout->str() +
                                " vs " + before->str() + ")");
            axis_owner.emplace(n.type.axis.id, &n);
        }
    }
    // Read in place when the Value's storage is already what the buffer would hold: of precision T
    // (its shape is [T_max, N, sample...], [N, sample...] or [sample...], checked above) and, for sequences,
    // +0 in every padded position, which ops may read.
    const bool in_place = !copy_leaves_ && v.dtype() == dtype_of<T>() &&
                          (!layout || padding_is_zero(v.data<T>().data(), *layout, sample.size()));
    buffers_.allocate(i, layout, sample, !in_place);
    if (in_place) {
        buffers_.place_external(i, v.data<T>().data());
        bound_.push_back(v);  // shares the storage: the user's Value may go away before backward
        return;
    }
    if (v.dtype() == DType::f32)
        buffers_.fill(i, std::span<const float>(v.data<float>().data(), v.data<float>().size()));
    else
        buffers_.fill(i, std::span<const double>(v.data<double>().data(), v.data<double>().size()));
    if (layout) zero_padding(buffers_[i].value.data(), *layout, sample.size());
}

template <class T>
void Execution<T>::schedule(TaskGraph& tasks, std::vector<double>& cost,
                            const std::function<void(int, Workspace<T>&)>& run) {
    const int threads = inter_op_threads();
    works_.resize(static_cast<std::size_t>(std::max(threads, 1)));
    const std::size_t steps = plan_->steps.size();
    auto measured = [&](int step, int worker) {
        const auto start = std::chrono::steady_clock::now();
        run(step, works_[static_cast<std::size_t>(worker)]);
        cost[static_cast<std::size_t>(step)] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    // Steps that took less than this on average at the last pass run on this thread alone: handing
    // a step to another thread costs a few microseconds, more than such steps gain (a generating
    // step of a small model). Their ops may still share their work with the idle threads.
    constexpr double kSharedStepSeconds = 20e-6;
    const bool short_steps = cost.size() == steps && steps > 0 &&
                             std::accumulate(cost.begin(), cost.end(), 0.0) < kSharedStepSeconds * steps;
    if (threads <= 1 || short_steps) {
        // Run here, the pass timed whole (a clock read per step cost a small GPT's generating step
        // 6 % on two threads) and its time spread evenly over its steps: what decides the next pass
        // is their sum. A pass that then runs on the threads times each step again.
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t s = 0; s < steps; ++s) {
            interruption_point();
            run(static_cast<int>(s), works_[0]);
        }
        cost.assign(steps, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                               static_cast<double>(std::max<std::size_t>(steps, 1)));
        return;
    }
    cost.resize(steps);
    // Steps on other threads answer to the interrupt check of the thread that started the pass.
    const InterruptCheckScope* interrupt = InterruptCheckScope::current();
    run_task_graph(tasks, threads, [&](int task, int worker) {
        const InterruptCheckScope::Adopt adopted(interrupt);
        interruption_point();
        measured(task, worker);
    });
    // The next pass starts the longest chains first (critical path), e.g. the long answer tower's
    // loops before the question tower's.
    tasks.priority = critical_path_priority(tasks, cost);
}

template <class T>
void Execution<T>::forward() {
    has_forward_values_ = false;  // until this forward is whole
    const bool frees = pass_ && pass_->kind != PassSchedule::Kind::keep_all;
    if (frees) {
        readers_left_ = pass_->readers;
        held_.assign(readers_left_.size(), 0);
    }
    schedule(forward_tasks_, forward_cost_, [&](int s, Workspace<T>& work) {
        runner_.forward(static_cast<std::size_t>(s), work);
        if (frees) release_after(s);
    });
    has_forward_values_ = true;
}

template <class T>
void Execution<T>::plan_backward(const std::vector<int>& wrt) {
    pass_ = std::make_unique<PassSchedule>(plan_pass(*plan_, steps_, PassSchedule::Kind::training, wrt));
    runner_.set_pass(pass_.get());
}

template <class T>
void Execution<T>::plan_forward_only() {
    if (pass_ && pass_->kind == PassSchedule::Kind::training)
        throw InternalError("plan_forward_only: backward was planned");
    pass_ = std::make_unique<PassSchedule>(plan_pass(*plan_, steps_, PassSchedule::Kind::forward_only));
    runner_.set_pass(pass_.get());
}

template <class T>
void Execution<T>::release_after(int step) {
    const auto s = static_cast<std::size_t>(step);
    std::lock_guard lock(release_mutex_);
    for (auto [j, loop] : pass_->hold_if_segmented[s])
        if (runner_.segmented(static_cast<std::size_t>(loop))) held_[static_cast<std::size_t>(j)] = 1;
    for (int j : steps_.step_inputs[s]) {
        const auto ju = static_cast<std::size_t>(j);
        if (--readers_left_[ju] == 0 && pass_->free_when_read[ju] && !held_[ju]) buffers_.release_value(j);
    }
    for (int m : pass_->free_own[s]) buffers_.release_value(m);
}

// The reverse sweep: every step's backward after those of the steps that consume its outputs, and
// a wrt node reported as soon as its own step ran (every step adding into it ran before).
template <class T>
void Execution<T>::backward(const std::vector<int>& wrt, const std::unordered_map<int, const std::vector<T>*>& weights,
                            const std::function<void(int)>& on_ready) {
    using Kind = PassSchedule::Kind;
    if (!has_forward_values_)
        throw InternalError("backward: no forward since the last backward (backward frees the forward's values)");
    has_forward_values_ = false;  // this backward frees them as it goes
    if (pass_ && pass_->kind == Kind::forward_only)
        throw InternalError("backward: this execution was planned forward only (its values are freed)");
    if (!pass_ || pass_->wrt != wrt) {
        if (pass_ && pass_->kind == Kind::training)
            throw InternalError(
                "backward: wrt differs from the one plan_backward was given (values it needs were freed)");
        pass_ = std::make_unique<PassSchedule>(plan_pass(*plan_, steps_, Kind::keep_all, wrt));
        runner_.set_pass(pass_.get());
    }
    buffers_.begin_backward(*pass_);
    buffers_.seed(plan_->outputs, weights);
    const int last = static_cast<int>(plan_->steps.size()) - 1;
    schedule(backward_tasks_, backward_cost_, [&](int task, Workspace<T>& work) {
        const auto s = static_cast<std::size_t>(last - task);
        runner_.backward(s, work);
        const PassSchedule::Backward& planned = pass_->backward[s];
        buffers_.after_backward(planned);
        for (int m : planned.final) {
            buffers_.finish_gradient(m);
            if (on_ready) on_ready(m);
        }
    });
}

template <class T>
Value Execution<T>::value(int i) const {
    if (!buffers_[i].external && buffers_[i].value.size() != buffers_[i].dims.size())
        throw InternalError("executor: the value of " + plan_->nodes[static_cast<std::size_t>(i)].node->label() +
                            " was not kept after backward; request it as an output");
    return buffers_.to_value(i, buffers_.data(i));
}

template <class T>
Value Execution<T>::gradient(int i) const {
    const auto& s = buffers_[i];
    if (!buffers_.needs_gradient(i) || (!s.by_rows && s.grad.size() != s.dims.size()))
        throw InternalError("executor: no gradient kept for " +
                            plan_->nodes[static_cast<std::size_t>(i)].node->label());
    return buffers_.to_value(i, gradient_buffer(i).data());
}

template class Execution<float>;
template class Execution<double>;

}  // namespace loom
