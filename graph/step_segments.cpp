// A loop run in segments under a memory budget (square-root checkpointing, graph/step_segments.hpp).
// The forward computes segment after segment in small windows, keeping only the loop-
// carried states at each segment's start (and what steps outside the loop read whole); backward
// walks the segments in reverse, recomputes each from its saved states with the same ops on the
// same inputs, then runs that segment's steps backward. Every addition happens in the order the
// plain run makes it, so the gradients are the plain run's, bit for bit.
#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "graph/step_segments.hpp"

namespace loom {

// Segment i (in the loop's direction) as a window: rows [base, base + size) of the whole tensors,
// the segment's own steps [t0, t1) at local rows [first, first + t1 - t0), the rest its history
// (the states its delays read, computed by the segment before). `layout` is the window's: each
// sequence's part of it, so an op at local step t sees the rows it would see at base + t.
template <class T>
struct LoopSegments<T>::Window {
    std::size_t t0 = 0, t1 = 0, base = 0, size = 0, first = 0;
    std::size_t history_begin = 0, history_size = 0;  // absolute rows of the history
    LayoutPtr layout;
};

template <class T>
bool LoopSegments<T>::plan(std::size_t s, const SequenceLayout& layout, const PassSchedule* pass, std::size_t budget) {
    Segments& seg = segments_[s];
    for (Buffer<T>& b : seg.saved) buffers_.pool().give(std::move(b));
    seg.saved.clear();
    seg.active = false;
    if (budget == 0 || !pass || pass->kind != PassSchedule::Kind::training) return false;
    const PlanStep& step = plan_.steps[s];
    const std::size_t steps = layout.max_length(), n_seq = layout.num_sequences(), k = step.members.size();
    std::vector<std::size_t> row(k);  // elements per time step, of this run's sizes
    std::vector<char> grad(k);
    for (std::size_t mi = 0; mi < k; ++mi) {
        row[mi] = n_seq * buffers_[step.members[mi]].sample.size();
        grad[mi] = pass->needs_grad[static_cast<std::size_t>(step.members[mi])];
    }
    const LoopRoles& roles = pass->loops[s];
    const SegmentSizes z = size_segments(roles, row, grad, steps, budget, sizeof(T));
    if (!z.segmented) return false;
    if (roles.reads_time >= 0) {
        const Node& n = *plan_.nodes[static_cast<std::size_t>(roles.reads_time)].node;
        throw UserError("memory budget: the loop at " + n.label() + " contains " + n.op->name() +
                        ", which reads sequence positions; such a loop cannot run in segments (raise the budget to " +
                        std::to_string(z.plain_bytes) + " bytes or remove it)");
    }
    if (z.least_bytes > budget)
        throw UserError("memory budget: the loop at " +
                        plan_.nodes[static_cast<std::size_t>(step.members.front())].node->label() + " over " +
                        std::to_string(steps) + " steps x " + std::to_string(n_seq) + " sequences needs at least " +
                        std::to_string(z.least_bytes) + " bytes even in segments of " + std::to_string(z.length) +
                        " steps (" + std::to_string(z.whole_bytes) +
                        " of them for values and gradients read whole outside the loop); the budget is " +
                        std::to_string(budget) + " bytes");
    seg.length = z.length;
    seg.count = z.count;
    seg.roles = &roles;
    seg.active = true;
    return true;
}

template <class T>
typename LoopSegments<T>::Window LoopSegments<T>::window(const PlanStep& step, const Segments& seg,
                                                         const SequenceLayout& layout, std::size_t i) const {
    const std::size_t steps = layout.max_length();
    Window w;
    if (step.direction > 0) {
        w.t0 = i * seg.length;
        w.t1 = std::min(w.t0 + seg.length, steps);
        w.history_size = std::min(seg.roles->history, w.t0);
        w.base = w.t0 - w.history_size;
        w.first = w.history_size;
        w.history_begin = w.base;
    } else {
        w.t1 = steps - i * seg.length;
        w.t0 = w.t1 > seg.length ? w.t1 - seg.length : 0;
        w.history_size = std::min(seg.roles->history, steps - w.t1);
        w.base = w.t0;
        w.first = 0;
        w.history_begin = w.t1;
    }
    w.size = w.t1 - w.t0 + w.history_size;
    std::vector<std::size_t> lengths(layout.num_sequences());
    for (std::size_t n = 0; n < lengths.size(); ++n)
        lengths[n] = layout.length(n) > w.base ? std::min(layout.length(n) - w.base, w.size) : 0;
    w.layout = std::make_shared<const SequenceLayout>(std::move(lengths));
    return w;
}

template <class T>
std::size_t LoopSegments<T>::forward(std::size_t s, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    Segments& seg = segments_[s];
    const SequenceLayout& layout = this->layout(step);
    const std::size_t k = step.members.size(), n_seq = layout.num_sequences();
    std::vector<Buffer<T>> values(k), grads(k);
    std::vector<std::size_t> row(k);
    seg.saved.resize(k);
    for (std::size_t mi = 0; mi < k; ++mi) {
        row[mi] = n_seq * buffers_[step.members[mi]].sample.size();
        values[mi] = buffers_.pool().take((seg.length + seg.roles->history) * row[mi]);
        if (seg.roles->carried[mi])
            seg.saved[mi] = buffers_.pool().take((seg.count - 1) * seg.roles->history * row[mi]);
    }
    std::vector<LoopCache<T>> caches = loop_caches(k, buffers_.pool());
    Window prev;
    for (std::size_t i = 0; i < seg.count; ++i) {
        const Window w = window(step, seg, layout, i);
        // This segment's history was computed by the previous one: saved, then moved into place.
        for (std::size_t mi = 0; mi < k; ++mi) {
            if (i == 0 || !seg.roles->carried[mi]) continue;
            T* saved = seg.saved[mi].data() + (i - 1) * seg.roles->history * row[mi];
            std::copy_n(values[mi].data() + (w.history_begin - prev.base) * row[mi], w.history_size * row[mi], saved);
            std::copy_n(saved, w.history_size * row[mi], values[mi].data() + (w.history_begin - w.base) * row[mi]);
        }
        for (int m : step.members) calls_.window(m, step.members, *w.layout, w.size, w.base, values, grads);
        for (std::size_t n = 0; n < w.t1 - w.t0; ++n) {
            const std::size_t t = w.first + (step.direction > 0 ? n : w.t1 - w.t0 - 1 - n);
            for (std::size_t mi = 0; mi < k; ++mi) {
                const int m = step.members[mi];
                const OpCall<T>& c = calls_.at_step(m, t, *w.layout, caches[mi], work, false);
                calls_.forward(m);
                zero_padding_step(c.out.data, *w.layout, t, buffers_[m].sample.size());
            }
        }
        for (std::size_t mi = 0; mi < k; ++mi)
            if (seg.roles->full_value[mi])
                std::copy_n(values[mi].data() + w.first * row[mi], (w.t1 - w.t0) * row[mi],
                            buffers_[step.members[mi]].value.data() + w.t0 * row[mi]);
        prev = w;
    }
    std::size_t extra = 0;
    for (std::size_t mi = 0; mi < k; ++mi) extra += values[mi].size() * sizeof(T);
    for (Buffer<T>& b : values) buffers_.pool().give(std::move(b));
    return extra;
}

template <class T>
void LoopSegments<T>::backward(std::size_t s, Workspace<T>& work, const std::function<void(std::size_t)>& peak) {
    const PlanStep& step = plan_.steps[s];
    Segments& seg = segments_[s];
    const SequenceLayout& layout = this->layout(step);
    const std::size_t k = step.members.size(), n_seq = layout.num_sequences();
    std::vector<Buffer<T>> values(k), grads(k), carry(k);
    std::vector<std::size_t> row(k);
    std::vector<char> needs(k);
    std::size_t extra = 0;
    for (std::size_t mi = 0; mi < k; ++mi) {
        const int m = step.members[mi];
        row[mi] = n_seq * buffers_[m].sample.size();
        needs[mi] = buffers_.needs_gradient(m);
        values[mi] = buffers_.pool().take((seg.length + seg.roles->history) * row[mi]);
        if (needs[mi]) {
            grads[mi] = buffers_.pool().take((seg.length + seg.roles->history) * row[mi]);
            carry[mi] = buffers_.pool().take(seg.roles->history * row[mi]);
        }
        extra += (values[mi].size() + grads[mi].size() + carry[mi].size()) * sizeof(T);
    }
    peak(extra);
    std::vector<LoopCache<T>> forward_caches = loop_caches(k, buffers_.pool()),
                              caches = loop_caches(k, buffers_.pool());
    Window later;  // the segment processed before this one (later in the loop's direction)
    for (std::size_t i = seg.count; i-- > 0;) {
        const Window w = window(step, seg, layout, i);
        const std::size_t len = w.t1 - w.t0;
        for (int m : step.members) calls_.window(m, step.members, *w.layout, w.size, w.base, values, grads);
        recompute(s, i, w, row, values, forward_caches, work);
        // Gradients start as the plain run's buffers would be before this segment's steps: what
        // steps outside the loop added, and on the rows the later segment's delays reached, what
        // they added there (carried).
        for (std::size_t mi = 0; mi < k; ++mi) {
            if (!needs[mi]) continue;
            if (seg.roles->full_grad[mi])
                std::copy_n(buffers_[step.members[mi]].grad.data() + w.base * row[mi], w.size * row[mi],
                            grads[mi].data());
            else
                std::fill_n(grads[mi].data(), w.size * row[mi], T(0));
            if (i + 1 < seg.count)
                std::copy_n(carry[mi].data(), later.history_size * row[mi],
                            grads[mi].data() + (later.history_begin - w.base) * row[mi]);
        }
        for (std::size_t n = 0; n < len; ++n) {
            const std::size_t t = w.first + (step.direction > 0 ? len - 1 - n : n);
            for (std::size_t mi = k; mi-- > 0;) {
                if (!needs[mi]) continue;
                const int m = step.members[mi];
                zero_padding_step(grads[mi].data() + t * row[mi], *w.layout, t, buffers_[m].sample.size());
                if (!calls_.inside(m)) continue;
                calls_.at_step(m, t, *w.layout, caches[mi], work, true);
                calls_.backward(m);
            }
        }
        for (std::size_t mi = 0; mi < k; ++mi) {
            if (!needs[mi]) continue;
            std::copy_n(grads[mi].data() + (w.history_begin - w.base) * row[mi], w.history_size * row[mi],
                        carry[mi].data());
            if (seg.roles->full_grad[mi])
                std::copy_n(grads[mi].data() + w.first * row[mi], len * row[mi],
                            buffers_[step.members[mi]].grad.data() + w.t0 * row[mi]);
        }
        later = w;
    }
    for (auto* list : {&values, &grads, &carry, &seg.saved})
        for (Buffer<T>& b : *list) buffers_.pool().give(std::move(b));
    seg.saved.clear();
}

template <class T>
void LoopSegments<T>::recompute(std::size_t s, std::size_t i, const Window& w, const std::vector<std::size_t>& row,
                                std::vector<Buffer<T>>& values, std::vector<LoopCache<T>>& caches, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    const Segments& seg = segments_[s];
    const std::size_t k = step.members.size(), len = w.t1 - w.t0;
    for (std::size_t mi = 0; mi < k; ++mi)
        if (i > 0 && seg.roles->carried[mi])
            std::copy_n(seg.saved[mi].data() + (i - 1) * seg.roles->history * row[mi], w.history_size * row[mi],
                        values[mi].data() + (w.history_begin - w.base) * row[mi]);
    for (std::size_t n = 0; n < len; ++n) {
        const std::size_t t = w.first + (step.direction > 0 ? n : len - 1 - n);
        for (std::size_t mi = 0; mi < k; ++mi) {
            const int m = step.members[mi];
            // A member kept whole is copied (a dropout mask must not be drawn again) unless a
            // step outside the loop freed it after its last read (run again, like the rest).
            if (seg.roles->full_value[mi] && buffers_[m].value.size() == buffers_[m].dims.size()) {
                std::copy_n(buffers_[m].value.data() + (w.base + t) * row[mi], row[mi],
                            values[mi].data() + t * row[mi]);
                continue;
            }
            const OpCall<T>& c = calls_.at_step(m, t, *w.layout, caches[mi], work, false);
            calls_.forward(m);
            zero_padding_step(c.out.data, *w.layout, t, buffers_[m].sample.size());
        }
    }
}

template <class T>
std::size_t LoopSegments<T>::saved_bytes(std::size_t s) const {
    std::size_t bytes = 0;
    for (const Buffer<T>& b : segments_[s].saved) bytes += b.size() * sizeof(T);
    return bytes;
}

template <class T>
std::size_t LoopSegments<T>::bytes_held() const {
    std::size_t bytes = 0;
    for (const Segments& seg : segments_)
        for (const Buffer<T>& b : seg.saved) bytes += b.capacity() * sizeof(T);
    return bytes;
}

template class LoopSegments<float>;
template class LoopSegments<double>;

}  // namespace loom
