#include "graph/step_runner.hpp"

#include <algorithm>

#include "core/errors.hpp"
#include "graph/interrupt.hpp"

namespace loom {

template <class T>
void StepRunner<T>::forward(std::size_t s, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    if (!step.is_loop) return run_node(step.members.front(), work);
    const PlanNode& first = plan_.nodes[static_cast<std::size_t>(step.members.front())];
    const LayoutPtr layout = layouts_.find(first.type.axis.id);
    if (!layout) throw InternalError("executor: no layout for the loop at " + first.node->label());
    std::vector<Shape>& shapes = shapes_[s];
    member_shapes(step, shapes);
    for (std::size_t mi = 0; mi < step.members.size(); ++mi) buffers_[step.members[mi]].sample = shapes[mi];
    const bool segmented = segments_.plan(s, *layout, pass_, budget_);
    for (std::size_t mi = 0; mi < step.members.size(); ++mi) {
        const int m = step.members[mi];
        const bool whole = segments_.whole_value(s, mi);
        buffers_.allocate(m, layout, shapes[mi], whole);
        if (!whole) buffers_.pool().give(std::move(buffers_[m].value));
    }
    if (segmented)
        record_peak(s, segments_.forward(s, work));
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
void StepRunner<T>::member_shapes(const PlanStep& step, std::vector<Shape>& shapes) const {
    const int loop = plan_.nodes[static_cast<std::size_t>(step.members.front())].loop;
    shapes.resize(step.members.size());
    bool runtime = false;
    for (std::size_t mi = 0; mi < step.members.size(); ++mi) {
        const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(step.members[mi])];
        shapes[mi] = pn.type.shape;
        for (int j : pn.inputs) {
            const PlanNode& in = plan_.nodes[static_cast<std::size_t>(j)];
            runtime |= in.loop != loop && !(buffers_[j].sample == in.type.shape);
        }
    }
    if (!runtime) return;
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
}

template <class T>
void StepRunner<T>::backward(std::size_t s, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    // The gradients this step adds into take memory now, as the pass schedule lists them; for a
    // loop, those of its inputs from outside it only after the loop ran (back_from_outside).
    const PassSchedule::Backward& planned = pass_->backward[s];
    if (step.is_loop && segments_.active(s)) {  // only the gradients kept whole take memory
        for (int m : planned.take) buffers_.ensure_gradient(m);
        segments_.backward(s, work, [&](std::size_t extra) { record_peak(s, extra); });
        // The gradients of inputs from outside the loop, in bulk from the members kept whole.
        return back_from_outside(s, work);
    }
    if (step.is_loop) {
        // The members' gradients the loop takes first (no reader outside it added into them):
        // back_loop zeroes them a step at a time just before its steps are reached, while they are
        // in cache, rather than all of them here. (Their inputs in the loop are members.)
        for (int m : planned.take_unzeroed) take_unzeroed(m);
        record_peak(s, 0);
        back_loop(s, work);
        return;
    }
    back_node(step.members.front(), work, planned);
}

template <class T>
void StepRunner<T>::take_unzeroed(int i) {
    if (!buffers_.take_gradient_unzeroed(i))
        throw InternalError("backward: the pass schedule has " +
                            plan_.nodes[static_cast<std::size_t>(i)].node->label() +
                            "'s gradient taken unzeroed by its first adder, but it has memory already");
}

template <class T>
void StepRunner<T>::run_node(int i, Workspace<T>& work) {
    const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(i)];
    if (pn.node->kind != NodeKind::Op) return;
    bool shapes_static = true;
    for (int j : pn.inputs) shapes_static &= buffers_[j].sample == plan_.nodes[static_cast<std::size_t>(j)].type.shape;
    calls_.whole(i, Grads::none, false, work);
    const Prepared prep = calls_.prepare(i);

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
    const Shape* sample = prep.has_shape ? &prep.shape : &pn.type.shape;
    Shape inferred;
    if (!prep.has_shape && !shapes_static) {  // downstream of a run-time shape (sequence::unpack)
        std::vector<TypeInfo> types;
        for (int j : pn.inputs)
            types.push_back({buffers_[j].sample, plan_.nodes[static_cast<std::size_t>(j)].type.axis});
        inferred = pn.node->op->infer(types).shape;
        check_settled(pn, inferred);
        sample = &inferred;
    }
    buffers_.allocate(i, layout, *sample);
    calls_.set_output(i);
    calls_.forward(i);
    if (layout) zero_padding(buffers_[i].value.data(), *layout, sample->size());
}

template <class T>
const SequenceLayout& StepRunner<T>::loop_layout(const PlanStep& step) const {
    return *buffers_[step.members.front()].layout;
}

template <class T>
void StepRunner<T>::run_loop(const PlanStep& step, Workspace<T>& work) {
    const SequenceLayout& layout = loop_layout(step);
    const std::size_t n_seq = layout.num_sequences(), steps = layout.max_length();
    for (int m : step.members) calls_.loop_member(m, n_seq, false);
    std::vector<LoopCache<T>> caches = loop_caches(step.members.size(), buffers_.pool());
    for (std::size_t k = 0; k < steps; ++k) {
        interruption_point();
        const std::size_t t = step.direction > 0 ? k : steps - 1 - k;
        for (std::size_t mi = 0; mi < step.members.size(); ++mi) {
            const int m = step.members[mi];
            const OpCall<T>& c = calls_.at_step(m, t, layout, caches[mi], work, false);
            calls_.forward(m);
            zero_padding_step(c.out.data, layout, t, buffers_[m].sample.size());
        }
    }
}

template <class T>
void StepRunner<T>::back_node(int i, Workspace<T>& work, const PassSchedule::Backward& planned) {
    const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(i)];
    auto& s = buffers_[i];
    // The gradients node i is the first to add into get memory now: zeroed, or left for its op to
    // write whole (OpCall::assign_grad), as the pass schedule says.
    for (int m : planned.take) buffers_.ensure_gradient(m);
    for (int m : planned.write) take_unzeroed(m);
    if (pn.node->kind != NodeKind::Op || !buffers_.needs_gradient(i)) return;
    if (s.layout) zero_padding(s.grad.data(), *s.layout, s.sample.size());
    if (calls_.whole(i, Grads::all, true, work)) {
        calls_.assign_gradients(i, planned.assign);
        calls_.backward(i);
    }
}

template <class T>
void StepRunner<T>::back_loop(std::size_t s, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    const SequenceLayout& layout = loop_layout(step);
    const std::size_t n_seq = layout.num_sequences(), steps = layout.max_length();
    // Step t's slice of a member's gradient is added into by the members at t and by the delays
    // at the steps up to `reach` later in the sweep's order; the sweep zeroes each slice `reach`
    // steps ahead of itself (LoopRoles::zero_reach: all of it when an op reads time).
    const std::size_t reach = std::min(pass_->loops[s].zero_reach, steps);
    const std::vector<int>& unzeroed = pass_->backward[s].take_unzeroed;
    std::size_t zeroed = 0;  // slices zeroed, in the sweep's order
    auto zero_ahead = [&](std::size_t k) {
        for (; zeroed < steps && zeroed <= k + reach; ++zeroed) {
            const std::size_t t = step.direction > 0 ? steps - 1 - zeroed : zeroed;
            for (int m : unzeroed) {
                auto& slot = buffers_[m];
                const std::size_t slice = n_seq * slot.sample.size();
                std::fill_n(slot.grad.data() + t * slice, slice, T(0));
            }
        }
    };
    // Per time step only gradients between loop members flow. Gradients to inputs from outside
    // the loop (weights, input projections, initial states) are taken once after the loop, over
    // all steps at once: one big GEMM for dW instead of one small one per step.
    for (int m : step.members) calls_.loop_member(m, n_seq, true);
    {
        std::vector<LoopCache<T>> caches = loop_caches(step.members.size(), buffers_.pool());
        for (std::size_t k = 0; k < steps; ++k) {
            interruption_point();
            const std::size_t t = step.direction > 0 ? steps - 1 - k : k;
            zero_ahead(k);
            for (std::size_t mi = step.members.size(); mi-- > 0;) {
                const int m = step.members[mi];
                if (!buffers_.needs_gradient(m)) continue;
                auto& slot = buffers_[m];
                zero_padding_step(slot.grad.data() + t * n_seq * slot.sample.size(), layout, t, slot.sample.size());
                if (!calls_.inside(m)) continue;
                calls_.at_step(m, t, layout, caches[mi], work, true);
                calls_.backward(m);
            }
        }
    }  // the packed weights go back to the pool before the bulk products
    back_from_outside(s, work);
}

template <class T>
void StepRunner<T>::back_from_outside(std::size_t s, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    // The gradients of the loop's inputs from outside it take memory only now.
    for (int j : pass_->backward[s].take_after) buffers_.ensure_gradient(j);
    for (int m : step.members)
        if (buffers_.needs_gradient(m) && calls_.whole(m, Grads::other_loops, true, work)) calls_.backward(m);
}

template <class T>
void StepRunner<T>::record_peak(std::size_t s, std::size_t extra_bytes) {
    std::size_t bytes = extra_bytes + segments_.saved_bytes(s);
    for (int m : plan_.steps[s].members) bytes += (buffers_[m].value.size() + buffers_[m].grad.size()) * sizeof(T);
    std::size_t seen = peak_.load();
    while (bytes > seen && !peak_.compare_exchange_weak(seen, bytes)) {
    }
}

template class StepRunner<float>;
template class StepRunner<double>;

}  // namespace loom
