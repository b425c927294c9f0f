#include "graph/op_calls.hpp"

#include <algorithm>
#include <type_traits>

namespace loom {

template <class T>
OpCalls<T>::OpCalls(const Plan& plan, Buffers<T>& buffers)
    : plan_(plan), buffers_(buffers), records_(plan.nodes.size()), fixed_(plan.nodes.size(), 0) {
    std::size_t total = 0;
    for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
        const PlanNode& pn = plan.nodes[i];
        Record& r = records_[i];
        r.first = total;
        r.count = pn.inputs.size();
        total += r.count;
        const NodeKind kind = pn.node->kind;
        fixed_[i] = kind == NodeKind::Parameter || kind == NodeKind::Constant;
        if (kind != NodeKind::Op) continue;
        // Inputs come before their readers in plan order. A node is fixed when it has no dynamic
        // axis and every input is fixed (a batch reduction's static value is not); it keeps a cache
        // across passes, outside loops, when every input without a dynamic axis is fixed.
        auto fixed = [&](int j) { return fixed_[static_cast<std::size_t>(j)] != 0; };
        auto dynamic = [&](int j) { return plan.nodes[static_cast<std::size_t>(j)].type.axis.is_dynamic(); };
        fixed_[i] = !pn.type.axis.is_dynamic() && std::all_of(pn.inputs.begin(), pn.inputs.end(), fixed);
        r.keeps = pn.loop < 0 &&
                  std::all_of(pn.inputs.begin(), pn.inputs.end(), [&](int j) { return dynamic(j) || fixed(j); });
        r.op = pn.node->op.get();
        const OpTraits traits = r.op->traits();
        r.reads_time = traits.reads_time;
    }
    full_.resize(total);
    in_.resize(total);
    grad_full_.resize(total);
    grad_.resize(total);
    layouts_.resize(total);
    stride_.resize(total);
    by_rows_.resize(total);
}

template <class T>
OpCall<T>& OpCalls<T>::start(Record& r, std::span<const View<const T>> in, Workspace<T>& work) {
    OpCall<T>& c = r.call;
    c = OpCall<T>{};
    c.in = in;
    c.in_layouts = part(layouts_, r);
    c.work = &work;
    return c;
}

template <class T>
bool OpCalls<T>::whole(int i, Grads grads, bool output, Workspace<T>& work) {
    const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(i)];
    Record& r = records_[static_cast<std::size_t>(i)];
    bool any = false, any_by_rows = false;
    for (std::size_t j = 0; j < r.count; ++j) {
        const int input = pn.inputs[j];
        const std::size_t k = r.first + j;
        full_[k] = buffers_.value(input);
        layouts_[k] = buffers_[input].layout.get();
        const bool selected = grads == Grads::all || (grads == Grads::other_loops &&
                                                      plan_.nodes[static_cast<std::size_t>(input)].loop != pn.loop);
        grad_[k] = selected ? buffers_.gradient(input) : View<T>{};
        by_rows_[k] = grads == Grads::all && buffers_.needs_gradient(input) ? buffers_[input].by_rows.get() : nullptr;
        any_by_rows |= by_rows_[k] != nullptr;
        any |= static_cast<bool>(grad_[k]) || by_rows_[k];
    }
    OpCall<T>& c = start(r, part(full_, r), work);
    if (grads == Grads::none && r.keeps && !kept_.empty()) c.memory = &kept_[static_cast<std::size_t>(i)];
    if (output) set_output(i);
    if (grads != Grads::none) {
        const auto& s = buffers_[i];
        c.out_grad = {s.grad.data(), s.dims, s.dyn};
        c.in_grad = part(grad_, r);
        if (any_by_rows) c.in_grad_by_rows = part(by_rows_, r);
    }
    return any;
}

template <class T>
void OpCalls<T>::keep_across_passes(bool keep, WeightPrecision weights, bool widen_int8) {
    kept_ = std::vector<LoopCache<T>>(keep ? plan_.nodes.size() : 0);
    if constexpr (std::is_same_v<T, float>)  // a double session computes in double
        for (LoopCache<T>& cache : kept_) cache.weights = weights, cache.widen_int8 = widen_int8;
}

template <class T>
void OpCalls<T>::set_output(int i) {
    auto& s = buffers_[i];
    OpCall<T>& c = records_[static_cast<std::size_t>(i)].call;
    c.layout = s.layout.get();
    c.padded = c.layout && c.layout->has_padding();
    if (c.padded) c.rows = c.layout->real_rows();
    c.out = {s.value.data(), s.dims, s.dyn};
}

template <class T>
void OpCalls<T>::loop_member(int i, std::size_t n_seq, bool grads) {
    const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(i)];
    Record& r = records_[static_cast<std::size_t>(i)];
    r.inside = false;
    for (std::size_t j = 0; j < r.count; ++j) {
        const int input = pn.inputs[j];
        const std::size_t k = r.first + j;
        const auto& s = buffers_[input];
        const bool in_loop = plan_.nodes[static_cast<std::size_t>(input)].loop == pn.loop;
        View<const T> full = buffers_.value(input), v = full;
        View<T> gfull = grads ? buffers_.gradient(input) : View<T>{}, g = gfull;
        std::size_t stride = 0;
        if (s.dyn == 2) {
            stride = n_seq * s.sample.size();
            v.dims = g.dims = make_dims({n_seq}, s.sample);
            v.dyn = g.dyn = 1;
        }
        if (!in_loop) g.data = nullptr;  // taken after the loop, in bulk
        r.inside |= in_loop && static_cast<bool>(gfull);
        full_[k] = full;
        in_[k] = v;
        grad_full_[k] = in_loop ? gfull : View<T>{};
        grad_[k] = g;
        layouts_[k] = s.layout.get();
        stride_[k] = stride;
    }
    auto& out = buffers_[i];
    r.out_stride = n_seq * out.sample.size();
    r.out_dims = make_dims({n_seq}, out.sample);
    r.out_value = out.value.data();
    r.out_grad = out.grad.data();
}

template <class T>
void OpCalls<T>::window(int i, std::span<const int> members, const SequenceLayout& layout, std::size_t rows,
                        std::size_t base, std::span<Buffer<T>> values, std::span<Buffer<T>> grads) {
    loop_member(i, layout.num_sequences(), false);
    const PlanNode& pn = plan_.nodes[static_cast<std::size_t>(i)];
    Record& r = records_[static_cast<std::size_t>(i)];
    for (std::size_t j = 0; j < r.count; ++j) {
        const int input = pn.inputs[j];
        const std::size_t k = r.first + j;
        if (buffers_[input].dyn == 2) {
            layouts_[k] = &layout;
            full_[k].dims[0] = rows;
        }
        const auto member = std::find(members.begin(), members.end(), input);
        if (member == members.end()) {
            if (full_[k] && stride_[k]) full_[k].data += base * stride_[k];
            continue;
        }
        const auto mk = static_cast<std::size_t>(member - members.begin());
        full_[k].data = values[mk].data();
        if (!grads[mk].empty()) {
            grad_full_[k] = {grads[mk].data(), full_[k].dims, full_[k].dyn};
            grad_[k] = grad_full_[k];
            r.inside = true;
        }
    }
    const auto mi = static_cast<std::size_t>(std::find(members.begin(), members.end(), i) - members.begin());
    r.out_value = values[mi].data();
    r.out_grad = grads[mi].data();
}

template <class T>
const OpCall<T>& OpCalls<T>::at_step(int i, std::size_t t, const SequenceLayout& layout, LoopCache<T>& cache,
                                     Workspace<T>& work, bool backward) {
    Record& r = records_[static_cast<std::size_t>(i)];
    for (std::size_t k = r.first; k < r.first + r.count; ++k) {
        // A value no backward reads may have been freed (null): it stays null.
        if (full_[k]) in_[k].data = full_[k].data + t * stride_[k];
        if (grad_[k]) grad_[k].data = grad_full_[k].data + t * stride_[k];
    }
    OpCall<T>& c = start(r, part(in_, r), work);
    c.layout = &layout;
    c.padded = layout.has_padding();
    if (c.padded) c.rows = layout.real_rows_at(t);
    c.memory = &cache;
    // Step t's row of the output and its gradient; a freed output (null) stays null, as the inputs.
    c.out = {r.out_value ? r.out_value + t * r.out_stride : nullptr, r.out_dims, 1};
    if (backward) {
        c.out_grad = {r.out_grad ? r.out_grad + t * r.out_stride : nullptr, r.out_dims, 1};
        c.in_grad = part(grad_, r);
    }
    if (r.reads_time) {
        r.time = {t, part(full_, r), part(grad_full_, r)};
        c.time = &r.time;
    }
    return c;
}

template <class T>
Prepared OpCalls<T>::prepare(int i) const {
    const Record& r = records_[static_cast<std::size_t>(i)];
    Prepared prep;
    r.op->prepare(r.call, prep);
    return prep;
}

template <class T>
void OpCalls<T>::forward(int i) const {
    const Record& r = records_[static_cast<std::size_t>(i)];
    r.op->forward(r.call);
}

template <class T>
void OpCalls<T>::backward(int i) const {
    const Record& r = records_[static_cast<std::size_t>(i)];
    r.op->backward(r.call);
}

template class OpCalls<float>;
template class OpCalls<double>;

}  // namespace loom
