// Backward half of the executor: which gradients and values a pass keeps (plan_backward), the
// reverse sweep with loops in reverse time, and the gradients as learners read them. The forward
// half and the buffers are in executor.cpp.
#include <algorithm>
#include <chrono>

#include "core/errors.hpp"
#include "graph/executor.hpp"

namespace loom {

template <class T>
void Execution<T>::ensure_grad(int i) {
    Slot& s = slots_[i];
    if (!s.needs_grad || s.by_rows || s.grad_alias >= 0 || s.grad.size() == s.dims.size()) return;
    pool_.resize(s.grad, s.dims.size());
    std::fill(s.grad.begin(), s.grad.end(), T(0));
}

template <class T>
void Execution<T>::ensure_step_grads(const PlanStep& step, bool outside) {
    const int loop = step.is_loop ? plan_->nodes[step.members.front()].loop : -1;
    for (int m : step.members) {
        if (!outside) ensure_grad(m);
        for (int j : plan_->nodes[m].inputs) {
            const bool from_outside = loop >= 0 && plan_->nodes[j].loop != loop;
            if (from_outside == outside) ensure_grad(j);
        }
    }
}

template <class T>
void Execution<T>::release_step(const PlanStep& step) {
    for (int m : step.members) {
        Slot& s = slots_[m];
        if (s.aliased_by >= 0) {  // the gradient lives on as its addend's
            Slot& addend = slots_[s.aliased_by];
            addend.grad = std::move(s.grad);
            addend.grad_alias = -1;
            s.aliased_by = -1;
        }
        if (!s.keep_grad) pool_.give(std::move(s.grad));
        if (!s.keep_value) pool_.give(std::move(s.value));
    }
}

template <class T>
void Execution<T>::back_node(int i, Workspace<T>& work) {
    const PlanNode& pn = plan_->nodes[i];
    Slot& s = slots_[i];
    if (pn.node->kind != NodeKind::Op || !s.needs_grad) return;
    if (s.layout) zero_padding(s.grad.data(), *s.layout, s.sample.size());
    const std::size_t k = pn.inputs.size();
    std::vector<View<const T>> in(k);
    std::vector<View<T>> in_grad(k);
    std::vector<const SequenceLayout*> in_layouts(k);
    std::vector<RowGradient<T>*> by_rows(k, nullptr);
    std::vector<TouchedRows> touched(k);
    bool any = false, any_by_rows = false;
    for (std::size_t j = 0; j < k; ++j) {
        Slot& in_slot = slots_[pn.inputs[j]];
        in[j] = view(pn.inputs[j]);
        in_grad[j] = grad_view(pn.inputs[j]);
        in_layouts[j] = in_slot.layout.get();
        if (in_slot.needs_grad && in_slot.by_rows) {
            by_rows[j] = in_slot.by_rows.get();
            any_by_rows = true;
        }
        if (in_grad[j] && in_slot.sparse) touched[j].rows = &in_slot.rows;
        any |= static_cast<bool>(in_grad[j]) || by_rows[j];
    }
    if (!any) return;
    OpCall<T> c;
    c.in = in;
    c.in_layouts = in_layouts;
    c.layout = s.layout.get();
    c.out = {s.value.data(), s.dims, s.dyn};
    c.out_grad = {s.grad.data(), s.dims, s.dyn};
    c.in_grad = in_grad;
    c.in_grad_full = in_grad;
    c.in_grad_rows = touched;
    if (any_by_rows) c.in_grad_by_rows = by_rows;
    c.work = &work;
    pn.node->op->backward(c);
    for (std::size_t j = 0; j < k; ++j)
        if (in_grad[j] && !touched[j].recorded) slots_[pn.inputs[j]].sparse = false;
}

template <class T>
void Execution<T>::back_loop(const PlanStep& step, Workspace<T>& work) {
    const SequenceLayout& layout = *slots_[step.members.front()].layout;
    const std::size_t n_seq = layout.num_sequences(), steps = layout.max_length();
    const int loop = plan_->nodes[step.members.front()].loop;
    if (scanned_[static_cast<std::size_t>(&step - plan_->steps.data())]) {
        ensure_step_grads(step, true);
        run_scan(step, true, work);
        return;
    }
    // Per time step only gradients between loop members flow. Gradients to inputs from outside
    // the loop (weights, input projections, initial states) are taken once after the loop, over
    // all steps at once: one big GEMM for dW instead of one small one per step.
    struct Member {
        int index;
        std::vector<View<const T>> full, in;
        std::vector<View<T>> grad_full, grad;
        std::vector<const SequenceLayout*> in_layouts;
        std::vector<std::size_t> stride;
        std::size_t out_stride;
        Dims out_dims;
        bool inside = false;
    };
    for (int m : step.members)
        for (int j : plan_->nodes[m].inputs) slots_[j].sparse = false;  // loop ops do not list rows
    std::vector<Member> members;
    for (int m : step.members) {
        Member mb;
        mb.index = m;
        for (int j : plan_->nodes[m].inputs) {
            const Slot& s = slots_[j];
            const bool in_loop = plan_->nodes[j].loop == loop;
            View<const T> full = view(j), v = full;
            View<T> gfull = grad_view(j), g = gfull;
            std::size_t stride = 0;
            if (s.dyn == 2) {
                stride = n_seq * s.sample.size();
                v.dims = g.dims = make_dims({n_seq}, s.sample);
                v.dyn = g.dyn = 1;
            }
            if (!in_loop) g.data = nullptr;  // taken after the loop (below)
            mb.inside |= in_loop && static_cast<bool>(gfull);
            mb.full.push_back(full);
            mb.in.push_back(v);
            mb.grad_full.push_back(in_loop ? gfull : View<T>{});
            mb.grad.push_back(g);
            mb.in_layouts.push_back(s.layout.get());
            mb.stride.push_back(stride);
        }
        mb.out_stride = n_seq * slots_[m].sample.size();
        mb.out_dims = make_dims({n_seq}, slots_[m].sample);
        members.push_back(std::move(mb));
    }
    std::vector<LoopCache<T>> caches = loop_caches(members.size());
    for (std::size_t k = 0; k < steps; ++k) {
        const std::size_t t = step.direction > 0 ? steps - 1 - k : k;
        for (std::size_t mi = members.size(); mi-- > 0;) {
            Member& mb = members[mi];
            Slot& s = slots_[mb.index];
            if (!s.needs_grad) continue;
            T* g_out = s.grad.data() + t * mb.out_stride;
            zero_padding_step(g_out, layout, t, s.sample.size());
            if (!mb.inside) continue;
            for (std::size_t j = 0; j < mb.in.size(); ++j) {
                // A value no backward reads may have been freed (null): it stays null.
                if (mb.full[j]) mb.in[j].data = mb.full[j].data + t * mb.stride[j];
                if (mb.grad[j]) mb.grad[j].data = mb.grad_full[j].data + t * mb.stride[j];
            }
            OpCall<T> c;
            c.in = mb.in;
            c.in_full = mb.full;
            c.in_layouts = mb.in_layouts;
            c.layout = &layout;
            c.in_step = true;
            c.t = t;
            c.work = &work;
            c.out = {s.value.data() + t * mb.out_stride, mb.out_dims, 1};
            c.out_grad = {g_out, mb.out_dims, 1};
            c.in_grad = mb.grad;
            c.in_grad_full = mb.grad_full;
            c.loop_cache = &caches[mi];
            plan_->nodes[mb.index].node->op->backward(c);
        }
    }
    caches.clear();  // the packed weights go back to the pool before the bulk products
    // The gradients of the loop's inputs from outside it take memory only now.
    ensure_step_grads(step, true);
    for (Member& mb : members) {
        Slot& s = slots_[mb.index];
        const auto& inputs = plan_->nodes[mb.index].inputs;
        std::vector<View<T>> outside_grad(inputs.size());
        bool outside = false;
        for (std::size_t j = 0; j < inputs.size(); ++j)
            if (plan_->nodes[inputs[j]].loop != loop) {
                outside_grad[j] = grad_view(inputs[j]);
                outside |= static_cast<bool>(outside_grad[j]);
            }
        if (!s.needs_grad || !outside) continue;
        OpCall<T> c;
        c.in = mb.full;
        c.in_full = mb.full;
        c.in_layouts = mb.in_layouts;
        c.layout = &layout;
        c.work = &work;
        c.out = {s.value.data(), s.dims, s.dyn};
        c.out_grad = {s.grad.data(), s.dims, s.dyn};
        c.in_grad = outside_grad;
        c.in_grad_full = outside_grad;
        plan_->nodes[mb.index].node->op->backward(c);
    }
}

template <class T>
void Execution<T>::finish_gradient(int i) {
    Slot& s = slots_[i];
    if (!s.needs_grad) return;
    ensure_grad(i);  // no step added into it: still to be zeroed
    if (s.layout && !s.by_rows) zero_padding(s.grad.data(), *s.layout, s.sample.size());
    if (s.sparse) {
        if (s.by_rows) s.rows = s.by_rows->rows;
        std::sort(s.rows.begin(), s.rows.end());
        s.rows.erase(std::unique(s.rows.begin(), s.rows.end()), s.rows.end());
    }
}

template <class T>
void Execution<T>::backward(const std::vector<int>& wrt, const std::unordered_map<int, const std::vector<T>*>& weights,
                            const std::function<void(int)>& on_ready) {
    if (backward_planned_ && gradient_plan_ && wrt != gradient_plan_->wrt)
        throw InternalError("backward: wrt differs from the one plan_backward was given (values it needs were freed)");
    const GradientPlan& gp = gradient_plan(wrt);
    const std::size_t n = plan_->nodes.size();
    for (std::size_t i = 0; i < n; ++i) {
        Slot& s = slots_[i];
        s.needs_grad = gp.needs_grad[i];
        s.keep_grad = gp.is_output[i] || gp.is_wrt[i];
        s.keep_value = s.keep_grad || plan_->nodes[i].node->kind != NodeKind::Op;
        s.grad_alias = s.aliased_by = -1;
        if (!s.keep_grad) pool_.give(std::move(s.grad));  // taken again when first needed
        if (!s.needs_grad || !s.keep_grad) {
            s.by_rows.reset();
            continue;
        }
        const std::size_t size = s.dims.size(), row = s.dims.rank ? size / s.dims[0] : 0;
        if (gp.by_rows[i]) {
            if (!s.by_rows) s.by_rows = std::make_unique<RowGradient<T>>();
            s.by_rows->reset(s.dims[0], row);
            pool_.give(std::move(s.grad));
            s.rows.clear();
            s.sparse = true;
            continue;
        }
        s.by_rows.reset();
        if (s.sparse && s.grad.size() == size) {  // only the rows written last time are non-zero
            for (std::size_t r : s.rows) std::fill_n(s.grad.data() + r * row, row, T(0));
        } else if (gp.is_output[i]) {  // its seed goes in next
            pool_.resize(s.grad, size);
            std::fill(s.grad.begin(), s.grad.end(), T(0));
        } else {
            // Taken from the pool and zeroed by the first step that adds into it: a parameter's
            // gradient takes memory only from the end of its layer's backward (when most values
            // have gone back to the pool), not across the whole pass.
            pool_.give(std::move(s.grad));
        }
        s.rows.clear();
        s.sparse = sparse_capable(static_cast<int>(i));
    }
    for (std::size_t j = 0; j < n; ++j) {
        const int k = gp.alias_of[j];
        if (k < 0 || slots_[j].dims != slots_[static_cast<std::size_t>(k)].dims) continue;  // run-time shapes
        slots_[j].grad_alias = k;
        slots_[static_cast<std::size_t>(k)].aliased_by = static_cast<int>(j);
    }
    for (int o : plan_->outputs) {
        Slot& s = slots_[o];
        if (!s.needs_grad) continue;
        auto it = weights.find(o);
        if (it != weights.end()) {
            if (it->second->size() != s.grad.size()) throw InternalError("backward: seed of the wrong size");
            for (std::size_t e = 0; e < s.grad.size(); ++e) s.grad[e] += (*it->second)[e];
        } else {
            for (auto& g : s.grad) g += T(1);
        }
    }
    const int threads = inter_op_threads(), last = static_cast<int>(plan_->steps.size()) - 1;
    if (threads > 1 && backward_tasks_.after.empty()) build_task_graphs();
    works_.resize(static_cast<std::size_t>(std::max(threads, 1)));
    auto run = [&](int task, int worker) {
        const PlanStep& step = plan_->steps[static_cast<std::size_t>(last - task)];
        Workspace<T>& work = works_[static_cast<std::size_t>(worker)];
        const auto start = std::chrono::steady_clock::now();
        ensure_step_grads(step, false);
        if (step.is_loop)
            back_loop(step, work);
        else
            back_node(step.members.front(), work);
        release_step(step);
        if (threads > 1)
            backward_cost_[static_cast<std::size_t>(task)] =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // Every step adding into a member's gradient ran before this one (backward order).
        for (int m : step.members)
            if (gp.is_wrt[static_cast<std::size_t>(m)]) {
                finish_gradient(m);
                if (on_ready) on_ready(m);
            }
    };
    if (threads > 1) {
        backward_cost_.resize(plan_->steps.size());
        run_task_graph(backward_tasks_, threads, run);
        backward_tasks_.priority = critical_path_priority(backward_tasks_, backward_cost_);
    } else {
        for (int task = 0; task <= last; ++task) run(task, 0);
    }
}

template <class T>
const typename Execution<T>::GradientPlan& Execution<T>::gradient_plan(const std::vector<int>& wrt) {
    if (gradient_plan_ && gradient_plan_->wrt == wrt) return *gradient_plan_;
    auto gp = std::make_unique<GradientPlan>();
    const std::size_t n = plan_->nodes.size();
    gp->wrt = wrt;
    gp->is_output.assign(n, 0);
    gp->is_wrt.assign(n, 0);
    for (int o : plan_->outputs) gp->is_output[static_cast<std::size_t>(o)] = 1;
    for (int w : wrt) gp->is_wrt[static_cast<std::size_t>(w)] = 1;
    // Gradients are needed on paths from a wrt node up to an output: nodes that depend on one.
    auto& needs = gp->needs_grad;
    needs = gp->is_wrt;
    for (bool changed = true; changed;) {  // loops' back edges settle in a second pass
        changed = false;
        for (std::size_t i = 0; i < n; ++i) {
            if (needs[i]) continue;
            for (int j : plan_->nodes[i].inputs)
                if (needs[static_cast<std::size_t>(j)]) {
                    needs[i] = 1;
                    changed = true;
                    break;
                }
        }
    }
    gp->by_rows.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) gp->by_rows[i] = gp->is_wrt[i] && by_rows_capable(static_cast<int>(i), needs);
    // An input whose one consumer passes its gradient through (an affine's addend, e.g. an LSTM's
    // input projection) shares the consumer's gradient buffer instead of receiving a copy; both
    // must be pooled gradients of ops outside loops, and the consumer not itself an alias.
    std::vector<int> uses(n, 0), consumer(n, -1);
    std::vector<std::size_t> position(n, 0);
    for (std::size_t k = 0; k < n; ++k)
        for (std::size_t p = 0; p < plan_->nodes[k].inputs.size(); ++p) {
            const auto j = static_cast<std::size_t>(plan_->nodes[k].inputs[p]);
            ++uses[j];
            consumer[j] = static_cast<int>(k);
            position[j] = p;
        }
    auto pooled = [&](std::size_t i) {
        return needs[i] && !gp->is_output[i] && !gp->is_wrt[i] && plan_->nodes[i].node->kind == NodeKind::Op;
    };
    std::vector<char> candidate(n, 0);
    for (std::size_t j = 0; j < n; ++j) {
        if (uses[j] != 1 || !pooled(j) || plan_->nodes[j].loop >= 0) continue;
        const auto k = static_cast<std::size_t>(consumer[j]);
        candidate[j] = pooled(k) && plan_->nodes[k].node->op->gradient_passes_through(position[j]) &&
                       plan_->nodes[j].type.shape == plan_->nodes[k].type.shape;
    }
    gp->alias_of.assign(n, -1);
    for (std::size_t j = 0; j < n; ++j)
        if (candidate[j] && !candidate[static_cast<std::size_t>(consumer[j])]) gp->alias_of[j] = consumer[j];
    gradient_plan_ = std::move(gp);
    return *gradient_plan_;
}

template <class T>
void Execution<T>::plan_backward(const std::vector<int>& wrt) {
    const std::size_t n = plan_->nodes.size();
    const std::vector<char>& depends = gradient_plan(wrt).needs_grad;
    value_needed_.assign(n, 0);
    for (int o : plan_->outputs) value_needed_[static_cast<std::size_t>(o)] = 1;
    for (std::size_t i = 0; i < n; ++i) {
        const PlanNode& pn = plan_->nodes[i];
        if (pn.node->kind != NodeKind::Op) {
            value_needed_[i] = 1;
            continue;
        }
        if (!depends[i]) continue;  // its backward never runs
        if (pn.node->op->backward_reads_output()) value_needed_[i] = 1;
        for (std::size_t j = 0; j < pn.inputs.size(); ++j)
            if (pn.node->op->backward_reads_input(j)) value_needed_[static_cast<std::size_t>(pn.inputs[j])] = 1;
    }
    // A fused scan's backward reads every value of its loop and the loop's inputs, whatever the
    // member ops declare for their own backward.
    for (const PlanStep& st : plan_->steps) {
        if (st.scan_op < 0) continue;
        for (int m : st.members) {
            value_needed_[static_cast<std::size_t>(m)] = 1;
            for (int j : plan_->nodes[static_cast<std::size_t>(m)].inputs)
                value_needed_[static_cast<std::size_t>(j)] = 1;
        }
    }
    step_inputs_.assign(plan_->steps.size(), {});
    readers_.assign(n, 0);
    for (std::size_t s = 0; s < plan_->steps.size(); ++s) {
        auto& ins = step_inputs_[s];
        for (int m : plan_->steps[s].members)
            for (int j : plan_->nodes[static_cast<std::size_t>(m)].inputs)
                if (step_of_[static_cast<std::size_t>(j)] != static_cast<int>(s) &&
                    std::find(ins.begin(), ins.end(), j) == ins.end())
                    ins.push_back(j);
        for (int j : ins) ++readers_[static_cast<std::size_t>(j)];
    }
    backward_planned_ = true;
}

template <class T>
void Execution<T>::release_inputs(int step) {
    std::lock_guard lock(release_mutex_);
    for (int j : step_inputs_[static_cast<std::size_t>(step)])
        if (--readers_left_[static_cast<std::size_t>(j)] == 0 && !value_needed_[static_cast<std::size_t>(j)])
            pool_.give(std::move(slots_[static_cast<std::size_t>(j)].value));
}

template <class T>
bool Execution<T>::sparse_capable(int i) const {
    return plan_->nodes[i].node->kind == NodeKind::Parameter && slots_[i].dims.rank >= 2;
}

template <class T>
bool Execution<T>::by_rows_capable(int i, const std::vector<char>& needs_grad) const {
    // A parameter matrix that gets a gradient, whose every consumer is an op outside loops (loop
    // ops get their outside gradients in bulk, densely) that adds into it by rows.
    if (!needs_grad[static_cast<std::size_t>(i)] || plan_->nodes[i].node->kind != NodeKind::Parameter ||
        plan_->nodes[i].type.shape.rank() < 2)
        return false;
    bool any = false;
    for (const auto& pn : plan_->nodes)
        for (std::size_t j = 0; j < pn.inputs.size(); ++j) {
            if (pn.inputs[j] != i) continue;
            if (pn.node->kind != NodeKind::Op || pn.loop >= 0 || !pn.node->op->writes_gradient_rows(j)) return false;
            any = true;
        }
    return any;
}

template <class T>
std::span<const T> Execution<T>::gradient_buffer(int i) const {
    const Slot& s = slots_[i];
    if (!s.by_rows) return s.grad;
    s.dense.assign(s.dims.size(), T(0));
    const std::size_t width = s.by_rows->width;
    for (std::size_t k = 0; k < s.by_rows->rows.size(); ++k)
        std::copy_n(s.by_rows->data.data() + k * width, width, s.dense.data() + s.by_rows->rows[k] * width);
    return s.dense;
}

template <class T>
void Execution<T>::release_gradient(int i) {
    Slot& s = slots_[i];
    if (!s.by_rows) pool_.give(std::move(s.grad));
}

template <class T>
const RowGradient<T>* Execution<T>::gradient_by_rows(int i) const {
    return slots_[i].needs_grad ? slots_[i].by_rows.get() : nullptr;
}

template <class T>
const std::vector<std::size_t>* Execution<T>::gradient_rows(int i) const {
    const Slot& s = slots_[i];
    return s.needs_grad && s.sparse ? &s.rows : nullptr;
}

template class Execution<float>;
template class Execution<double>;

}  // namespace loom
