// A loop run in segments under a memory budget (square-root checkpointing): StepRunner's members
// for it. The forward computes segment after segment in small windows, keeping only the loop-
// carried states at each segment's start (and what steps outside the loop read whole); backward
// walks the segments in reverse, recomputes each from its saved states with the same ops on the
// same inputs, then runs that segment's steps backward. Every addition happens in the order the
// plain run makes it, so the gradients are the plain run's, bit for bit.
#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "graph/step_runner.hpp"

namespace loom {

// Segment i (in the loop's direction) as a window: rows [base, base + size) of the whole tensors,
// the segment's own steps [t0, t1) at local rows [first, first + t1 - t0), the rest its history
// (the states its delays read, computed by the segment before). `layout` is the window's: each
// sequence's part of it, so an op at local step t sees the rows it would see at base + t.
template <class T>
struct StepRunner<T>::Window {
    std::size_t t0 = 0, t1 = 0, base = 0, size = 0, first = 0;
    std::size_t history_begin = 0, history_size = 0;  // absolute rows of the history
    LayoutPtr layout;
};

namespace {

std::size_t segment_count(std::size_t steps, std::size_t length) { return (steps + length - 1) / length; }

}  // namespace

template <class T>
bool StepRunner<T>::plan_segments(const PlanStep& step, const SequenceLayout& layout, Segments& seg) const {
    const std::size_t steps = layout.max_length(), n_seq = layout.num_sequences(), k = step.members.size();
    if (budget_ == 0 || !pass_ || steps < 2) return false;
    const int loop = plan_.nodes[static_cast<std::size_t>(step.members.front())].loop;
    std::vector<std::size_t> row(k);  // elements per time step
    std::vector<int> member_of(plan_.nodes.size(), -1);
    std::size_t plain = 0;
    for (std::size_t mi = 0; mi < k; ++mi) {
        const auto m = static_cast<std::size_t>(step.members[mi]);
        member_of[m] = static_cast<int>(mi);
        row[mi] = n_seq * buffers_[static_cast<int>(m)].sample.size();  // set by forward: run-time sizes
        plain += steps * row[mi] * (pass_->needs_grad[m] ? 2 : 1);
    }
    if (plain * sizeof(T) <= budget_) return false;

    seg.full_value.assign(k, 0);
    seg.full_grad.assign(k, 0);
    seg.carried.assign(k, 0);
    seg.history = 0;
    for (std::size_t mi = 0; mi < k; ++mi) {
        const auto m = static_cast<std::size_t>(step.members[mi]);
        const PlanNode& pn = plan_.nodes[m];
        const Op& op = *pn.node->op;
        const OpTraits traits = op.traits();
        const std::size_t delay = traits.delay_steps;
        if (traits.reads_time && delay == 0)
            throw UserError("memory budget: the loop at " + pn.node->label() + " contains " + op.name() +
                            ", which reads sequence positions; such a loop cannot run in segments (raise the "
                            "budget to " +
                            std::to_string(plain * sizeof(T)) + " bytes or remove it)");
        if (delay > 0) {
            seg.history = std::max(seg.history, delay);
            const int source = member_of[static_cast<std::size_t>(pn.inputs[0])];
            if (source >= 0) seg.carried[static_cast<std::size_t>(source)] = 1;
        }
        // Read whole after the loop, or drawn at random (recomputing would draw anew): kept whole.
        seg.full_value[mi] |= pass_->readers[m] > 0 || pass_->keep_value[m] || traits.generator != nullptr;
        if (pass_->needs_grad[m] && (pass_->readers[m] > 0 || pass_->keep_grad[m])) seg.full_grad[mi] = 1;
        // The bulk backward to inputs from outside the loop reads this member's gradient whole and
        // whichever of its values and its inputs' values its backward declares.
        bool bulk = false;
        for (int j : pn.inputs)
            bulk |=
                plan_.nodes[static_cast<std::size_t>(j)].loop != loop && pass_->needs_grad[static_cast<std::size_t>(j)];
        if (!bulk || !pass_->needs_grad[m]) continue;
        seg.full_grad[mi] = 1;
        if (op.backward_reads_output()) seg.full_value[mi] = 1;
        for (std::size_t p = 0; p < pn.inputs.size(); ++p) {
            const int in = member_of[static_cast<std::size_t>(pn.inputs[p])];
            if (in >= 0 && op.backward_reads_input(p)) seg.full_value[static_cast<std::size_t>(in)] = 1;
        }
    }
    // Memory with segments of `len` steps: the whole members, value windows and gradient windows
    // of history + len rows, the history rows of the gradient carried to the next segment, and
    // the saved states at each segment's start.
    std::size_t whole = 0, window_row = 0, carry_row = 0, saved_row = 0;
    for (std::size_t mi = 0; mi < k; ++mi) {
        const bool grad = pass_->needs_grad[static_cast<std::size_t>(step.members[mi])];
        whole += steps * row[mi] * (seg.full_value[mi] + seg.full_grad[mi]);
        window_row += row[mi] * (grad ? 2 : 1);
        carry_row += grad ? row[mi] : 0;
        saved_row += seg.carried[mi] ? row[mi] : 0;
    }
    const std::size_t d = seg.history;
    auto bytes = [&](std::size_t len) {
        return sizeof(T) *
               (whole + window_row * (len + d) + carry_row * d + saved_row * d * (segment_count(steps, len) - 1));
    };
    // The least memory: len near sqrt(saved * steps / window) balances the windows and the saves.
    const double best = std::sqrt(double(saved_row) * double(steps) / double(std::max<std::size_t>(window_row, 1)));
    std::size_t len = std::clamp<std::size_t>(static_cast<std::size_t>(std::llround(best)), 1, steps);
    for (std::size_t c : {len > 1 ? len - 1 : len, len + 1})
        if (c <= steps && bytes(c) < bytes(len)) len = c;
    if (bytes(len) > budget_)
        throw UserError("memory budget: the loop at " +
                        plan_.nodes[static_cast<std::size_t>(step.members.front())].node->label() + " over " +
                        std::to_string(steps) + " steps x " + std::to_string(n_seq) + " sequences needs at least " +
                        std::to_string(bytes(len)) + " bytes even in segments of " + std::to_string(len) + " steps (" +
                        std::to_string(whole * sizeof(T)) +
                        " of them for values and gradients read whole outside the loop); the budget is " +
                        std::to_string(budget_) + " bytes");
    seg.length = len;
    seg.count = segment_count(steps, len);
    return true;
}

template <class T>
typename StepRunner<T>::Window StepRunner<T>::window(const PlanStep& step, const Segments& seg,
                                                     const SequenceLayout& layout, std::size_t i) const {
    const std::size_t steps = layout.max_length();
    Window w;
    if (step.direction > 0) {
        w.t0 = i * seg.length;
        w.t1 = std::min(w.t0 + seg.length, steps);
        w.history_size = std::min(seg.history, w.t0);
        w.base = w.t0 - w.history_size;
        w.first = w.history_size;
        w.history_begin = w.base;
    } else {
        w.t1 = steps - i * seg.length;
        w.t0 = w.t1 > seg.length ? w.t1 - seg.length : 0;
        w.history_size = std::min(seg.history, steps - w.t1);
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
void StepRunner<T>::run_loop_segments(std::size_t s, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    Segments& seg = segments_[s];
    const SequenceLayout& layout = loop_layout(step);
    const std::size_t k = step.members.size(), n_seq = layout.num_sequences();
    std::vector<Buffer<T>> values(k), grads(k);
    std::vector<std::size_t> row(k);
    seg.saved.resize(k);
    for (std::size_t mi = 0; mi < k; ++mi) {
        row[mi] = n_seq * buffers_[step.members[mi]].sample.size();
        values[mi] = buffers_.pool().take((seg.length + seg.history) * row[mi]);
        if (seg.carried[mi]) seg.saved[mi] = buffers_.pool().take((seg.count - 1) * seg.history * row[mi]);
    }
    std::vector<LoopCache<T>> caches = loop_caches(k);
    Window prev;
    for (std::size_t i = 0; i < seg.count; ++i) {
        const Window w = window(step, seg, layout, i);
        // This segment's history was computed by the previous one: saved, then moved into place.
        for (std::size_t mi = 0; mi < k; ++mi) {
            if (i == 0 || !seg.carried[mi]) continue;
            T* saved = seg.saved[mi].data() + (i - 1) * seg.history * row[mi];
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
            if (seg.full_value[mi])
                std::copy_n(values[mi].data() + w.first * row[mi], (w.t1 - w.t0) * row[mi],
                            buffers_[step.members[mi]].value.data() + w.t0 * row[mi]);
        prev = w;
    }
    std::size_t extra = 0;
    for (std::size_t mi = 0; mi < k; ++mi) extra += values[mi].size() * sizeof(T);
    record_peak(s, extra);
    for (Buffer<T>& b : values) buffers_.pool().give(std::move(b));
}

template <class T>
void StepRunner<T>::back_loop_segments(std::size_t s, Workspace<T>& work) {
    const PlanStep& step = plan_.steps[s];
    Segments& seg = segments_[s];
    const SequenceLayout& layout = loop_layout(step);
    const std::size_t k = step.members.size(), n_seq = layout.num_sequences();
    std::vector<Buffer<T>> values(k), grads(k), carry(k);
    std::vector<std::size_t> row(k);
    std::vector<char> needs(k);
    std::size_t extra = 0;
    for (std::size_t mi = 0; mi < k; ++mi) {
        const int m = step.members[mi];
        row[mi] = n_seq * buffers_[m].sample.size();
        needs[mi] = buffers_.needs_gradient(m);
        values[mi] = buffers_.pool().take((seg.length + seg.history) * row[mi]);
        if (needs[mi]) {
            grads[mi] = buffers_.pool().take((seg.length + seg.history) * row[mi]);
            carry[mi] = buffers_.pool().take(seg.history * row[mi]);
        }
        extra += (values[mi].size() + grads[mi].size() + carry[mi].size()) * sizeof(T);
    }
    record_peak(s, extra);
    std::vector<LoopCache<T>> forward_caches = loop_caches(k), caches = loop_caches(k);
    Window later;  // the segment processed before this one (later in the loop's direction)
    for (std::size_t i = seg.count; i-- > 0;) {
        const Window w = window(step, seg, layout, i);
        const std::size_t len = w.t1 - w.t0;
        for (int m : step.members) calls_.window(m, step.members, *w.layout, w.size, w.base, values, grads);
        // Recompute: the saved states as history, then the segment's steps.
        for (std::size_t mi = 0; mi < k; ++mi)
            if (i > 0 && seg.carried[mi])
                std::copy_n(seg.saved[mi].data() + (i - 1) * seg.history * row[mi], w.history_size * row[mi],
                            values[mi].data() + (w.history_begin - w.base) * row[mi]);
        for (std::size_t n = 0; n < len; ++n) {
            const std::size_t t = w.first + (step.direction > 0 ? n : len - 1 - n);
            for (std::size_t mi = 0; mi < k; ++mi) {
                const int m = step.members[mi];
                // A member kept whole is copied (a dropout mask must not be drawn again) unless a
                // step outside the loop freed it after its last read (run again, like the rest).
                if (seg.full_value[mi] && buffers_[m].value.size() == buffers_[m].dims.size()) {
                    std::copy_n(buffers_[m].value.data() + (w.base + t) * row[mi], row[mi],
                                values[mi].data() + t * row[mi]);
                    continue;
                }
                const OpCall<T>& c = calls_.at_step(m, t, *w.layout, forward_caches[mi], work, false);
                calls_.forward(m);
                zero_padding_step(c.out.data, *w.layout, t, buffers_[m].sample.size());
            }
        }
        // Gradients start as the plain run's buffers would be before this segment's steps: what
        // steps outside the loop added, and on the rows the later segment's delays reached, what
        // they added there (carried).
        for (std::size_t mi = 0; mi < k; ++mi) {
            if (!needs[mi]) continue;
            if (seg.full_grad[mi])
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
            if (seg.full_grad[mi])
                std::copy_n(grads[mi].data() + w.first * row[mi], len * row[mi],
                            buffers_[step.members[mi]].grad.data() + w.t0 * row[mi]);
        }
        later = w;
    }
    for (auto* list : {&values, &grads, &carry, &seg.saved})
        for (Buffer<T>& b : *list) buffers_.pool().give(std::move(b));
    seg.saved.clear();
    forward_caches.clear();
    caches.clear();
    // The gradients of inputs from outside the loop, in bulk from the members kept whole.
    back_from_outside(step, work);
}

template <class T>
void StepRunner<T>::record_peak(std::size_t s, std::size_t extra_bytes) {
    std::size_t bytes = extra_bytes;
    for (int m : plan_.steps[s].members) bytes += (buffers_[m].value.size() + buffers_[m].grad.size()) * sizeof(T);
    for (const Buffer<T>& b : segments_[s].saved) bytes += b.size() * sizeof(T);
    std::size_t seen = peak_.load();
    while (bytes > seen && !peak_.compare_exchange_weak(seen, bytes)) {
    }
}

template <class T>
std::size_t StepRunner<T>::bytes_held() const {
    std::size_t bytes = 0;
    for (const Segments& seg : segments_)
        for (const Buffer<T>& b : seg.saved) bytes += b.capacity() * sizeof(T);
    return bytes;
}

// step_runner.cpp instantiates the class with the members defined there; these are the rest.
#define LOOM_SEGMENT_MEMBERS(T)                                                                                   \
    template bool StepRunner<T>::plan_segments(const PlanStep&, const SequenceLayout&, Segments&) const;          \
    template StepRunner<T>::Window StepRunner<T>::window(const PlanStep&, const Segments&, const SequenceLayout&, \
                                                         std::size_t) const;                                      \
    template void StepRunner<T>::run_loop_segments(std::size_t, Workspace<T>&);                                   \
    template void StepRunner<T>::back_loop_segments(std::size_t, Workspace<T>&);                                  \
    template void StepRunner<T>::record_peak(std::size_t, std::size_t);                                           \
    template std::size_t StepRunner<T>::bytes_held() const;
LOOM_SEGMENT_MEMBERS(float)
LOOM_SEGMENT_MEMBERS(double)
#undef LOOM_SEGMENT_MEMBERS

}  // namespace loom
