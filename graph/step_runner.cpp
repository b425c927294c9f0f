#include "graph/step_runner.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace loom {

template <class T>
void StepRunner<T>::forward(std::size_t s, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    if (!step.is_loop) return run_node(step.members.front(), work);
    const PlanNode& first = plan_.nodes[static_cast<std::size_t>(step.members.front())];
    const LayoutPtr layout = layouts_.find(first.type.axis.id);
    if (!layout) throw InternalError("executor: no layout for the loop at " + first.node->label());
    const std::vector<Shape> shapes = member_shapes(step);
    for (std::size_t mi = 0; mi < step.members.size(); ++mi) buffers_[step.members[mi]].sample = shapes[mi];
    Segments& seg = segments_[s];
    for (Buffer<T>& b : seg.saved) buffers_.pool().give(std::move(b));
    seg.active = false;  // until planned: plan_segments may throw (a budget too small)
    seg.active = plan_segments(step, *layout, seg);
    for (std::size_t mi = 0; mi < step.members.size(); ++mi) {
        const int m = step.members[mi];
        const bool whole = !seg.active || seg.full_value[mi];
        buffers_.allocate(m, layout, shapes[mi], whole);
        if (!whole) buffers_.pool().give(std::move(buffers_[m].value));
    }
    if (seg.active)
        run_loop_segments(s, work);
    else
        run_loop(step, work);
}

namespace {

// A run-time size nothing could settle would size a buffer for 0 elements: refused, naming the node.
void check_settled(const PlanNode& pn, const Shape& sample) {
    for (std::size_t k = 0; k < sample.rank(); ++k)
        if (sample[k] == 0)
            throw UserError("executor: " + pn.node->label() + " has sample shape " + sample.str() +
                            " at run time: a size known only at run time (sequence::unpack's T_max) did not reach "
                            "this node through its inputs");
}

}  // namespace

template <class T>
std::vector<Shape> StepRunner<T>::member_shapes(const PlanStep& step) const {
    const int loop = plan_.nodes[static_cast<std::size_t>(step.members.front())].loop;
    std::vector<Shape> shapes;
    bool runtime = false;
    for (int m : step.members) {
        const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(m)];
        shapes.push_back(pn.type.shape);
        for (int j : pn.inputs) {
            const PlanNode& in = plan_.nodes[static_cast<std::size_t>(j)];
            runtime |= in.loop != loop && !(buffers_[j].sample == in.type.shape);
        }
    }
    if (!runtime) return shapes;
    // An input from outside the loop has a size known only now (unpack's T_max, or anything made
    // from it): the members' shape rules run again on the inputs' run-time shapes. Sizes flow
    // along the loop's edges, through its delays too, so as many passes as members settle it.
    auto member = [&](int j) {
        return static_cast<std::size_t>(std::find(step.members.begin(), step.members.end(), j) - step.members.begin());
    };
    for (std::size_t pass = 0; pass <= step.members.size(); ++pass) {
        bool changed = false;
        for (std::size_t mi = 0; mi < step.members.size(); ++mi) {
            const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(step.members[mi])];
            if (pn.node->kind != NodeKind::Op) continue;
            std::vector<TypeInfo> types;
            for (int j : pn.inputs) {
                const PlanNode& in = plan_.nodes[static_cast<std::size_t>(j)];
                types.push_back({in.loop == loop ? shapes[member(j)] : buffers_[j].sample, in.type.axis});
            }
            Shape shape = pn.node->op->infer(types).shape;
            if (!(shape == shapes[mi])) {
                shapes[mi] = std::move(shape);
                changed = true;
            }
        }
        if (!changed) break;
    }
    for (std::size_t mi = 0; mi < step.members.size(); ++mi)
        check_settled(plan_.nodes[static_cast<std::size_t>(step.members[mi])], shapes[mi]);
    return shapes;
}

template <class T>
void StepRunner<T>::backward(std::size_t s, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    // The gradients this step adds into take memory now; for a loop, those of its inputs from
    // outside it only after the loop ran (back_from_outside).
    const int loop = step.is_loop ? plan_.nodes[static_cast<std::size_t>(step.members.front())].loop : -1;
    if (step.is_loop && segments_[s].active) {  // only the gradients kept whole take memory
        for (std::size_t mi = 0; mi < step.members.size(); ++mi)
            if (segments_[s].full_grad[mi]) buffers_.ensure_gradient(step.members[mi]);
        return back_loop_segments(s, work);
    }
    for (int m : step.members) {
        buffers_.ensure_gradient(m);
        for (int j : plan_.nodes[static_cast<std::size_t>(m)].inputs)
            if (plan_.nodes[static_cast<std::size_t>(j)].loop == loop || loop < 0) buffers_.ensure_gradient(j);
    }
    if (step.is_loop) {
        record_peak(s, 0);
        back_loop(step, work);
    } else {
        back_node(step.members.front(), work);
    }
}

template <class T>
typename StepRunner<T>::Call StepRunner<T>::gather(int m, int loop, std::size_t n_seq, bool grads) {
    Call c;
    c.node = m;
    c.reads_time = plan_.nodes[static_cast<std::size_t>(m)].node->op->traits().reads_time;
    for (int j : plan_.nodes[static_cast<std::size_t>(m)].inputs) {
        const auto& s = buffers_[j];
        const bool in_loop = plan_.nodes[static_cast<std::size_t>(j)].loop == loop;
        View<const T> full = buffers_.value(j), v = full;
        View<T> gfull = grads ? buffers_.gradient(j) : View<T>{}, g = gfull;
        std::size_t stride = 0;
        if (s.dyn == 2) {
            stride = n_seq * s.sample.size();
            v.dims = g.dims = make_dims({n_seq}, s.sample);
            v.dyn = g.dyn = 1;
        }
        if (!in_loop) g.data = nullptr;  // taken after the loop, in bulk
        c.inside |= in_loop && static_cast<bool>(gfull);
        c.full.push_back(full);
        c.in.push_back(v);
        c.grad_full.push_back(in_loop ? gfull : View<T>{});
        c.grad.push_back(g);
        c.layouts.push_back(s.layout.get());
        c.stride.push_back(stride);
    }
    c.out_stride = n_seq * buffers_[m].sample.size();
    c.out_dims = make_dims({n_seq}, buffers_[m].sample);
    c.out_value = buffers_[m].value.data();
    c.out_grad = buffers_[m].grad.data();
    return c;
}

template <class T>
OpCall<T> StepRunner<T>::at_step(Call& call, std::size_t t, const SequenceLayout& layout, LoopCache<T>& cache,
                                 Workspace<T>& work, bool backward) {
    for (std::size_t j = 0; j < call.in.size(); ++j) {
        // A value no backward reads may have been freed (null): it stays null.
        if (call.full[j]) call.in[j].data = call.full[j].data + t * call.stride[j];
        if (call.grad[j]) call.grad[j].data = call.grad_full[j].data + t * call.stride[j];
    }
    OpCall<T> c;
    c.in = call.in;
    c.in_layouts = call.layouts;
    c.layout = &layout;
    c.padded = layout.has_padding();
    if (c.padded) c.rows = layout.real_rows_at(t);
    c.work = &work;
    c.memory = &cache;
    c.out = {call.out_value + t * call.out_stride, call.out_dims, 1};
    if (backward) {
        c.out_grad = {call.out_grad + t * call.out_stride, call.out_dims, 1};
        c.in_grad = call.grad;
    }
    if (call.reads_time) {
        call.time = {t, call.full, call.grad_full};
        c.time = &call.time;
    }
    return c;
}

template <class T>
void StepRunner<T>::set_layout(OpCall<T>& c, const SequenceLayout* layout) {
    c.layout = layout;
    c.padded = layout && layout->has_padding();
    if (c.padded) c.rows = layout->real_rows();
}

template <class T>
void StepRunner<T>::run_node(int i, Workspace<T>& work) {
    const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(i)];
    if (pn.node->kind != NodeKind::Op) return;
    Call call = gather(i, -2, 0, false);
    bool shapes_static = true;
    for (int j : pn.inputs) shapes_static &= buffers_[j].sample == plan_.nodes[static_cast<std::size_t>(j)].type.shape;
    OpCall<T> c;
    c.in = call.full;
    c.in_layouts = call.layouts;
    c.work = &work;
    Prepared prep;
    pn.node->op->prepare(c, prep);

    LayoutPtr layout;
    if (pn.type.axis.is_sequence()) {
        if (prep.layout) {
            layout = prep.layout;
            layouts_.set(pn.type.axis.id, layout);
        } else {
            layout = layouts_.find(pn.type.axis.id);
            if (!layout) throw InternalError("executor: no layout known for " + pn.node->label());
        }
    }
    Shape sample = pn.type.shape;
    if (prep.has_shape) {
        sample = prep.shape;
    } else if (!shapes_static) {  // downstream of a run-time shape (sequence::unpack)
        std::vector<TypeInfo> types;
        for (int j : pn.inputs)
            types.push_back({buffers_[j].sample, plan_.nodes[static_cast<std::size_t>(j)].type.axis});
        sample = pn.node->op->infer(types).shape;
        check_settled(pn, sample);
    }
    buffers_.allocate(i, layout, sample);
    set_layout(c, layout.get());
    c.out = {buffers_[i].value.data(), buffers_[i].dims, buffers_[i].dyn};
    pn.node->op->forward(c);
    if (layout) zero_padding(buffers_[i].value.data(), *layout, sample.size());
}

template <class T>
const SequenceLayout& StepRunner<T>::loop_layout(const PlanStep& step) const {
    return *buffers_[step.members.front()].layout;
}

template <class T>
std::vector<LoopCache<T>> StepRunner<T>::loop_caches(std::size_t members) {
    std::vector<LoopCache<T>> caches(members);
    for (auto& c : caches) c.pool = &buffers_.pool();
    return caches;
}

template <class T>
void StepRunner<T>::run_loop(const PlanStep& step, Workspace<T>& work) {
    const SequenceLayout& layout = loop_layout(step);
    const std::size_t n_seq = layout.num_sequences(), steps = layout.max_length();
    const int loop = plan_.nodes[static_cast<std::size_t>(step.members.front())].loop;
    std::vector<Call> members;
    for (int m : step.members) members.push_back(gather(m, loop, n_seq, false));
    std::vector<LoopCache<T>> caches = loop_caches(members.size());
    for (std::size_t k = 0; k < steps; ++k) {
        const std::size_t t = step.direction > 0 ? k : steps - 1 - k;
        for (std::size_t mi = 0; mi < members.size(); ++mi) {
            const OpCall<T> c = at_step(members[mi], t, layout, caches[mi], work, false);
            plan_.nodes[static_cast<std::size_t>(members[mi].node)].node->op->forward(c);
            zero_padding_step(c.out.data, layout, t, buffers_[members[mi].node].sample.size());
        }
    }
}

template <class T>
void StepRunner<T>::back_node(int i, Workspace<T>& work) {
    const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(i)];
    auto& s = buffers_[i];
    if (pn.node->kind != NodeKind::Op || !buffers_.needs_gradient(i)) return;
    if (s.layout) zero_padding(s.grad.data(), *s.layout, s.sample.size());
    const std::size_t k = pn.inputs.size();
    std::vector<View<const T>> in(k);
    std::vector<View<T>> in_grad(k);
    std::vector<const SequenceLayout*> in_layouts(k);
    std::vector<RowGradient<T>*> by_rows(k, nullptr);
    bool any = false, any_by_rows = false;
    for (std::size_t j = 0; j < k; ++j) {
        const int input = pn.inputs[j];
        in[j] = buffers_.value(input);
        in_grad[j] = buffers_.gradient(input);
        in_layouts[j] = buffers_[input].layout.get();
        if (buffers_.needs_gradient(input) && buffers_[input].by_rows) {
            by_rows[j] = buffers_[input].by_rows.get();
            any_by_rows = true;
        }
        any |= static_cast<bool>(in_grad[j]) || by_rows[j];
    }
    if (!any) return;
    OpCall<T> c;
    c.in = in;
    c.in_layouts = in_layouts;
    set_layout(c, s.layout.get());
    c.out = {s.value.data(), s.dims, s.dyn};
    c.out_grad = {s.grad.data(), s.dims, s.dyn};
    c.in_grad = in_grad;
    if (any_by_rows) c.in_grad_by_rows = by_rows;
    c.work = &work;
    pn.node->op->backward(c);
}

template <class T>
void StepRunner<T>::back_loop(const PlanStep& step, Workspace<T>& work) {
    const SequenceLayout& layout = loop_layout(step);
    const std::size_t n_seq = layout.num_sequences(), steps = layout.max_length();
    const int loop = plan_.nodes[static_cast<std::size_t>(step.members.front())].loop;
    // Per time step only gradients between loop members flow. Gradients to inputs from outside
    // the loop (weights, input projections, initial states) are taken once after the loop, over
    // all steps at once: one big GEMM for dW instead of one small one per step.
    std::vector<Call> members;
    for (int m : step.members) members.push_back(gather(m, loop, n_seq, true));
    {
        std::vector<LoopCache<T>> caches = loop_caches(members.size());
        for (std::size_t k = 0; k < steps; ++k) {
            const std::size_t t = step.direction > 0 ? steps - 1 - k : k;
            for (std::size_t mi = members.size(); mi-- > 0;) {
                Call& mb = members[mi];
                if (!buffers_.needs_gradient(mb.node)) continue;
                auto& s = buffers_[mb.node];
                zero_padding_step(s.grad.data() + t * mb.out_stride, layout, t, s.sample.size());
                if (!mb.inside) continue;
                const OpCall<T> c = at_step(mb, t, layout, caches[mi], work, true);
                plan_.nodes[static_cast<std::size_t>(mb.node)].node->op->backward(c);
            }
        }
    }  // the packed weights go back to the pool before the bulk products
    back_from_outside(step, members, work);
}

template <class T>
void StepRunner<T>::back_from_outside(const PlanStep& step, std::vector<Call>& members, Workspace<T>& work) {
    // The gradients of the loop's inputs from outside it take memory only now.
    const int loop = plan_.nodes[static_cast<std::size_t>(step.members.front())].loop;
    for (int m : step.members)
        for (int j : plan_.nodes[static_cast<std::size_t>(m)].inputs)
            if (plan_.nodes[static_cast<std::size_t>(j)].loop != loop) buffers_.ensure_gradient(j);
    for (Call& mb : members) {
        auto& s = buffers_[mb.node];
        const auto& inputs = plan_.nodes[static_cast<std::size_t>(mb.node)].inputs;
        std::vector<View<T>> outside_grad(inputs.size());
        bool outside = false;
        for (std::size_t j = 0; j < inputs.size(); ++j)
            if (plan_.nodes[static_cast<std::size_t>(inputs[j])].loop != loop) {
                outside_grad[j] = buffers_.gradient(inputs[j]);
                outside |= static_cast<bool>(outside_grad[j]);
            }
        if (!buffers_.needs_gradient(mb.node) || !outside) continue;
        OpCall<T> c;
        c.in = mb.full;
        c.in_layouts = mb.layouts;
        set_layout(c, s.layout.get());
        c.work = &work;
        c.out = {s.value.data(), s.dims, s.dyn};
        c.out_grad = {s.grad.data(), s.dims, s.dyn};
        c.in_grad = outside_grad;
        plan_.nodes[static_cast<std::size_t>(mb.node)].node->op->backward(c);
    }
}

template class StepRunner<float>;
template class StepRunner<double>;

}  // namespace loom
