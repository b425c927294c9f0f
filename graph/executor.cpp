// Forward half of the executor: binding inputs, running steps (loops step by step, scans fused,
// independent steps at once on several threads) and the buffers values and gradients live in. The
// backward half is in executor_backward.cpp.
#include "graph/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/errors.hpp"

namespace loom {

namespace {
template <class T, class S>
void copy_converted(Buffer<T>& dst, const S* src, std::size_t n) {
    dst.resize(n);
    for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
}
}  // namespace

template <class T>
Execution<T>::Execution(std::shared_ptr<const Plan> plan)
    : plan_(std::move(plan)), step_of_(plan_->nodes.size(), -1), slots_(plan_->nodes.size()) {
    for (std::size_t s = 0; s < plan_->steps.size(); ++s)
        for (int m : plan_->steps[s].members) step_of_[static_cast<std::size_t>(m)] = static_cast<int>(s);
}

template <class T>
std::size_t Execution<T>::row_size(int i) const {
    return slots_[i].sample.size();
}

template <class T>
void Execution<T>::allocate(int i, LayoutPtr layout, const Shape& sample, bool own) {
    Slot& s = slots_[i];
    const Axis& axis = plan_->nodes[i].type.axis;
    s.sample = sample;
    s.layout = std::move(layout);
    if (axis.is_sequence()) {
        if (!s.layout) throw InternalError("executor: no layout for " + plan_->nodes[i].node->label());
        s.dims = make_dims({s.layout->max_length(), s.layout->num_sequences()}, sample);
        s.dyn = 2;
    } else if (axis.kind == Axis::Kind::Batch) {
        s.dims = make_dims({batch_size_}, sample);
        s.dyn = 1;
    } else {
        s.dims = make_dims({}, sample);
        s.dyn = 0;
    }
    s.external = nullptr;
    if (own) pool_.resize(s.value, s.dims.size());
}

template <class T>
std::vector<LoopCache<T>> Execution<T>::loop_caches(std::size_t members) {
    std::vector<LoopCache<T>> caches(members);
    for (auto& c : caches) c.pool = &pool_;
    return caches;
}

template <class T>
std::size_t Execution<T>::bytes_held() const {
    std::size_t total = pool_.free_bytes();
    for (const auto& s : slots_) {
        total += (s.value.capacity() + s.grad.capacity() + s.dense.capacity()) * sizeof(T);
        if (s.by_rows)
            total += s.by_rows->data.capacity() * sizeof(T) + s.by_rows->index.capacity() * sizeof(std::int32_t);
    }
    return total;
}

template <class T>
void Execution<T>::bind(const Bindings& inputs) {
    std::unordered_map<const Node*, const Value*> by_node;
    for (const auto& [var, val] : inputs) by_node[var.node().get()] = &val;
    axis_layouts_.clear();
    has_batch_ = false;
    std::unordered_map<std::uint64_t, const Node*> axis_owner;
    const Node* batch_owner = nullptr;

    for (std::size_t i = 0; i < plan_->nodes.size(); ++i) {
        const PlanNode& pn = plan_->nodes[i];
        const Node& n = *pn.node;
        if (n.kind == NodeKind::Input) {
            auto it = by_node.find(&n);
            if (it == by_node.end())
                throw UserError("evaluate: " + n.label() + " is needed but not bound; pass a Value for it");
            const Value& v = *it->second;
            if (v.sample_shape() != n.type.shape)
                throw UserError("evaluate: " + n.label() + " has sample shape " + n.type.shape.str() +
                                " but was bound to a " + v.describe());
            const bool want_seq = n.type.axis.is_sequence();
            if (want_seq && v.kind() != Value::Kind::Sequence)
                throw UserError("evaluate: " + n.label() + " is a sequence input but was bound to a " + v.describe() +
                                "; use Value::sequences");
            if (!want_seq && v.kind() != Value::Kind::Batch)
                throw UserError("evaluate: " + n.label() + " is a batch input but was bound to a " + v.describe() +
                                "; use Value::batch");
            if (has_batch_ && v.num_items() != batch_size_)
                throw UserError("evaluate: " + n.label() + " is bound to " + std::to_string(v.num_items()) +
                                " items but " + batch_owner->label() + " to " + std::to_string(batch_size_));
            if (!has_batch_) {
                has_batch_ = true;
                batch_size_ = v.num_items();
                batch_owner = &n;
            }
            LayoutPtr layout;
            if (want_seq) {
                layout = v.layout_ptr();
                auto [pos, fresh] = axis_layouts_.emplace(n.type.axis.id, layout);
                if (!fresh && !(*pos->second == *layout))
                    throw UserError("evaluate: " + n.label() + " and " + axis_owner[n.type.axis.id]->label() +
                                    " share a sequence axis but were bound to different lengths (" + layout->str() +
                                    " vs " + pos->second->str() + ")");
                axis_owner.emplace(n.type.axis.id, &n);
            }
            allocate(static_cast<int>(i), layout, n.type.shape);
            if (v.dtype() == DType::f32)
                copy_converted(slots_[i].value, v.data<float>().data(), v.data<float>().size());
            else
                copy_converted(slots_[i].value, v.data<double>().data(), v.data<double>().size());
            if (layout) zero_padding(slots_[i].value.data(), *layout, n.type.shape.size());
        } else if (n.kind == NodeKind::Parameter) {
            if constexpr (std::is_same_v<T, float>) {
                allocate(static_cast<int>(i), nullptr, n.type.shape, false);
                slots_[i].external = n.parameter_value->data();
            } else {  // double runs (gradient checks) work on, and perturb, their own copy
                allocate(static_cast<int>(i), nullptr, n.type.shape);
                copy_converted(slots_[i].value, n.parameter_value->data(), n.parameter_value->size());
            }
        } else if (n.kind == NodeKind::Constant) {
            allocate(static_cast<int>(i), nullptr, n.type.shape);
            copy_converted(slots_[i].value, n.constant_value.data(), n.constant_value.size());
        }
    }
    for (const auto& pn : plan_->nodes)
        if (pn.type.axis.is_dynamic() && !has_batch_)
            throw UserError("evaluate: " + pn.node->label() + " has a dynamic axis but no input was bound");
}

template <class T>
View<const T> Execution<T>::view(int i) const {
    const Slot& s = slots_[i];
    return {data(i), s.dims, s.dyn};
}

template <class T>
View<T> Execution<T>::grad_view(int i) {
    Slot& s = slots_[i];
    if (!s.needs_grad) return {};
    if (s.grad_alias >= 0) return {slots_[s.grad_alias].grad.data(), s.dims, s.dyn};
    return {s.grad.data(), s.dims, s.dyn};
}

template <class T>
void Execution<T>::run_node(int i, Workspace<T>& work) {
    const PlanNode& pn = plan_->nodes[i];
    if (pn.node->kind != NodeKind::Op) return;
    const std::size_t k = pn.inputs.size();
    std::vector<View<const T>> in(k);
    std::vector<const SequenceLayout*> in_layouts(k);
    bool shapes_static = true;
    for (std::size_t j = 0; j < k; ++j) {
        in[j] = view(pn.inputs[j]);
        in_layouts[j] = slots_[pn.inputs[j]].layout.get();
        shapes_static &= slots_[pn.inputs[j]].sample == plan_->nodes[pn.inputs[j]].type.shape;
    }
    OpCall<T> c;
    c.in = in;
    c.in_layouts = in_layouts;
    c.work = &work;
    Prepared prep;
    pn.node->op->prepare(c, prep);

    LayoutPtr layout;
    if (pn.type.axis.is_sequence()) {
        if (prep.layout) {
            layout = prep.layout;
            std::lock_guard lock(layouts_mutex_);
            axis_layouts_[pn.type.axis.id] = layout;
        } else {
            layout = axis_layout(pn.type.axis.id);
            if (!layout) throw InternalError("executor: no layout known for " + pn.node->label());
        }
    }
    Shape sample = pn.type.shape;
    if (prep.has_shape) {
        sample = prep.shape;
    } else if (!shapes_static) {  // downstream of a run-time shape (sequence::unpack)
        std::vector<TypeInfo> types;
        for (std::size_t j = 0; j < k; ++j)
            types.push_back({slots_[pn.inputs[j]].sample, plan_->nodes[pn.inputs[j]].type.axis});
        sample = pn.node->op->infer(types).shape;
    }
    allocate(i, layout, sample);
    c.layout = layout.get();
    c.out = {slots_[i].value.data(), slots_[i].dims, slots_[i].dyn};
    pn.node->op->forward(c);
    if (layout) zero_padding(slots_[i].value.data(), *layout, sample.size());
}

template <class T>
void Execution<T>::run_loop(const PlanStep& step, Workspace<T>& work) {
    const SequenceLayout* layout = nullptr;
    {
        LayoutPtr l = axis_layout(plan_->nodes[step.members.front()].type.axis.id);
        if (!l)
            throw InternalError("executor: no layout for the loop at " +
                                plan_->nodes[step.members.front()].node->label());
        for (int m : step.members) allocate(m, l, plan_->nodes[m].type.shape);
        layout = l.get();
    }
    const std::size_t n_seq = layout->num_sequences(), steps = layout->max_length();
    const auto step_index = static_cast<std::size_t>(&step - plan_->steps.data());
    scanned_[step_index] = step.scan_op >= 0 && run_scan(step, false, work);
    if (scanned_[step_index]) return;

    // Everything that does not change from step to step is set up once.
    struct Member {
        const PlanNode* pn;
        std::vector<View<const T>> full, in;
        std::vector<const SequenceLayout*> in_layouts;
        std::vector<std::size_t> stride;  // per input: elements per time step, 0 if not a sequence
        View<T> out;
        std::size_t out_stride;
    };
    std::vector<Member> members;
    for (int m : step.members) {
        Member mb;
        mb.pn = &plan_->nodes[m];
        for (int j : mb.pn->inputs) {
            const Slot& s = slots_[j];
            View<const T> full = view(j);
            View<const T> v = full;
            std::size_t stride = 0;
            if (s.dyn == 2) {
                stride = n_seq * s.sample.size();
                v.dims = make_dims({n_seq}, s.sample);
                v.dyn = 1;
            }
            mb.full.push_back(full);
            mb.in.push_back(v);
            mb.in_layouts.push_back(s.layout.get());
            mb.stride.push_back(stride);
        }
        const Slot& o = slots_[m];
        mb.out = {slots_[m].value.data(), make_dims({n_seq}, o.sample), 1};
        mb.out_stride = n_seq * o.sample.size();
        members.push_back(std::move(mb));
    }
    std::vector<LoopCache<T>> caches = loop_caches(members.size());
    for (std::size_t k = 0; k < steps; ++k) {
        const std::size_t t = step.direction > 0 ? k : steps - 1 - k;
        for (std::size_t mi = 0; mi < members.size(); ++mi) {
            Member& mb = members[mi];
            for (std::size_t j = 0; j < mb.in.size(); ++j) mb.in[j].data = mb.full[j].data + t * mb.stride[j];
            OpCall<T> c;
            c.in = mb.in;
            c.in_full = mb.full;
            c.in_layouts = mb.in_layouts;
            c.layout = layout;
            c.in_step = true;
            c.t = t;
            c.work = &work;
            c.loop_cache = &caches[mi];
            c.out = mb.out;
            c.out.data = slots_[step.members[mi]].value.data() + t * mb.out_stride;
            mb.pn->node->op->forward(c);
            zero_padding_step(c.out.data, *layout, t, slots_[step.members[mi]].sample.size());
        }
    }
}

template <class T>
bool Execution<T>::run_scan(const PlanStep& step, bool backward, Workspace<T>& work) {
    const PlanNode &r = plan_->nodes[step.scan_op], &sel = plan_->nodes[step.scan_select],
                   &d = plan_->nodes[step.scan_delay];
    ScanArgs<T> a;
    a.layout = slots_[step.scan_op].layout.get();
    a.direction = step.direction;
    a.z = view(r.inputs[0]);
    a.cond = view(sel.inputs[0]);
    a.c = view(sel.inputs[1]);
    a.init = view(d.inputs[1]);
    a.r = slots_[step.scan_op].value.data();
    a.s = slots_[step.scan_select].value.data();
    a.d = slots_[step.scan_delay].value.data();
    a.work = &work;
    if (!backward) return r.node->op->scan_forward(a);
    Slot& rs = slots_[step.scan_op];
    if (!rs.needs_grad) return true;
    zero_padding(rs.grad.data(), *a.layout, rs.sample.size());
    a.r_grad = rs.grad.data();
    a.z_grad = grad_view(r.inputs[0]).data;
    a.c_grad = grad_view(sel.inputs[1]).data;
    a.init_grad = grad_view(d.inputs[1]).data;
    r.node->op->scan_backward(a);
    return true;
}

template <class T>
LayoutPtr Execution<T>::axis_layout(std::uint64_t axis) const {
    std::lock_guard lock(layouts_mutex_);
    auto it = axis_layouts_.find(axis);
    return it == axis_layouts_.end() ? nullptr : it->second;
}

template <class T>
void Execution<T>::build_task_graphs() {
    const std::size_t n_steps = plan_->steps.size();
    auto add = [](std::vector<int>& after, int d) {
        if (std::find(after.begin(), after.end(), d) == after.end()) after.push_back(d);
    };
    forward_tasks_.after.assign(n_steps, {});
    backward_tasks_.after.assign(n_steps, {});
    const int last = static_cast<int>(n_steps) - 1;
    std::vector<int> last_consumer(plan_->nodes.size(), -1);  // in the backward sweep so far
    for (int s = last; s >= 0; --s) {
        const int task = last - s;
        for (int m : plan_->steps[static_cast<std::size_t>(s)].members)
            for (int j : plan_->nodes[static_cast<std::size_t>(m)].inputs) {
                const int producer = step_of_[static_cast<std::size_t>(j)];
                if (producer == s) continue;
                add(forward_tasks_.after[static_cast<std::size_t>(s)], producer);
                // Backward: the producer waits for this step (it adds into j's gradient), and this
                // step waits for the later step that added into j's gradient before it.
                add(backward_tasks_.after[static_cast<std::size_t>(last - producer)], task);
                int& prev = last_consumer[static_cast<std::size_t>(j)];
                if (prev >= 0 && prev != task) add(backward_tasks_.after[static_cast<std::size_t>(task)], prev);
                prev = task;
            }
    }
}

template <class T>
void Execution<T>::forward() {
    scanned_.assign(plan_->steps.size(), 0);
    const int threads = inter_op_threads();
    if (threads > 1 && forward_tasks_.after.empty()) build_task_graphs();
    works_.resize(static_cast<std::size_t>(std::max(threads, 1)));
    auto run = [&](int s, int worker) {
        const PlanStep& step = plan_->steps[static_cast<std::size_t>(s)];
        Workspace<T>& work = works_[static_cast<std::size_t>(worker)];
        const auto start = std::chrono::steady_clock::now();
        if (step.is_loop)
            run_loop(step, work);
        else
            run_node(step.members.front(), work);
        if (backward_planned_) release_inputs(s);
        if (threads > 1)
            forward_cost_[static_cast<std::size_t>(s)] =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    if (backward_planned_) readers_left_ = readers_;
    if (threads > 1) {
        forward_cost_.resize(plan_->steps.size());
        run_task_graph(forward_tasks_, threads, run);
        forward_tasks_.priority = critical_path_priority(forward_tasks_, forward_cost_);
    } else {
        for (std::size_t s = 0; s < plan_->steps.size(); ++s) run(static_cast<int>(s), 0);
    }
}

template <class T>
Value Execution<T>::to_value(int i, const T* from) const {
    const Slot& s = slots_[i];
    std::vector<std::size_t> shape(s.dims.begin(), s.dims.end());
    xt::xarray<T> a = xt::zeros<T>(shape);
    std::copy_n(from, s.dims.size(), a.data());
    if (s.dyn == 2) return Value::padded(std::move(a), s.layout);
    if (s.dyn == 1) return Value::batch(a);
    return Value::tensor(std::move(a));
}

template <class T>
Value Execution<T>::value(int i) const {
    if (!slots_[i].external && slots_[i].value.size() != slots_[i].dims.size())
        throw InternalError("executor: the value of " + plan_->nodes[i].node->label() +
                            " was not kept after backward; request it as an output");
    return to_value(i, data(i));
}

template <class T>
Value Execution<T>::gradient(int i) const {
    if (!slots_[i].needs_grad || (!slots_[i].by_rows && slots_[i].grad.size() != slots_[i].dims.size()))
        throw InternalError("executor: no gradient kept for " + plan_->nodes[i].node->label());
    return to_value(i, gradient_buffer(i).data());
}

template class Execution<float>;
template class Execution<double>;

}  // namespace loom
