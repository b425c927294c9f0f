#pragma once
// The memory of one Execution: per plan node its value and gradient buffer (from one pool, so a
// pass reuses what an earlier part of it gave back), the gradient aliases of a PassSchedule, the
// row form of an embedding table's gradient, and the layouts the sequence axes were bound to.
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/buffer.hpp"
#include "core/value.hpp"
#include "graph/compile.hpp"
#include "graph/op.hpp"
#include "graph/pass_plan.hpp"

namespace loom {

// The layout each sequence axis has in this evaluation: bound with an input, or made by an op
// (sequence::where, unpack). Steps running in parallel add to it, hence the lock.
class AxisLayouts {
public:
    LayoutPtr find(std::uint64_t axis) const;
    // Records `layout` for `axis`; returns the layout the axis already had, if any (left as it was).
    LayoutPtr insert(std::uint64_t axis, LayoutPtr layout);
    void set(std::uint64_t axis, LayoutPtr layout);
    void clear();

private:
    mutable std::mutex mutex_;
    std::unordered_map<std::uint64_t, LayoutPtr> layouts_;
};

template <class T>
class Buffers {
public:
    struct Slot {
        Buffer<T> value, grad;
        // Read in place instead of `value`: a parameter's storage, an input Value's (of precision T,
        // zero padded) or a constant's (double) or `converted`.
        const T* external = nullptr;
        Buffer<T> converted;  // a float execution's copy of a constant, made once (constants never change)
        Dims dims;            // [T, N, sample...], [N, sample...] or [sample...]
        std::size_t dyn = 0;  // how many of the dims are dynamic
        Shape sample;
        LayoutPtr layout;
        // grad_alias: the consumer whose gradient buffer this node's gradient is (PassSchedule::
        // alias_of) until that consumer's step hands the buffer over; aliased_by: the reverse link.
        int grad_alias = -1, aliased_by = -1;
        // A gradient kept by rows (`grad` then holds nothing); `dense` is its spread-out copy, made
        // only when someone asks for the dense gradient.
        std::unique_ptr<RowGradient<T>> by_rows;
        mutable Buffer<T> dense;
    };

    explicit Buffers(const Plan& plan) : plan_(plan), slots_(plan.nodes.size()) {}
    Slot& operator[](int i) { return slots_[static_cast<std::size_t>(i)]; }
    const Slot& operator[](int i) const { return slots_[static_cast<std::size_t>(i)]; }

    // Sizes node i's slot for a layout (its sequence axis) or the batch size (a batch axis) and a
    // sample shape; `own`: its value buffer is taken from the pool (else it is given back and the
    // value placed externally).
    void allocate(int i, LayoutPtr layout, const Shape& sample, bool own = true);
    std::size_t batch_size = 0;  // of this evaluation's batch axis
    void place_external(int i, const T* data) { slots_[static_cast<std::size_t>(i)].external = data; }
    // Copies `from` into node i's own value buffer, converted to T.
    template <class S>
    void fill(int i, std::span<const S> from);
    // Places constant node i's value: read in place when T is double, else from its slot's copy
    // converted to float on the first call.
    void place_constant(int i, const xt::xarray<double>& value);
    // Elements copied or converted into leaf buffers so far (fill and place_constant).
    std::size_t elements_copied() const { return elements_copied_; }
    const T* data(int i) const;
    View<const T> value(int i) const;
    // Node i's gradient during and after a backward pass, or an empty view when it gets none.
    View<T> gradient(int i);
    bool needs_gradient(int i) const { return pass_ && pass_->needs_grad[static_cast<std::size_t>(i)]; }

    // A forward value no later step and no backward reads.
    void release_value(int i) { pool_.give(std::move(slots_[static_cast<std::size_t>(i)].value)); }
    // Backward: resets every gradient for `pass` and links the aliases it planned (where the
    // run-time shapes agree).
    void begin_backward(const PassSchedule& pass);
    // Adds each output's seed: `weights` when given, else ones on every position.
    void seed(const std::vector<int>& outputs, const std::unordered_map<int, const std::vector<T>*>& weights);
    // Node i's gradient buffer, zeroed, from the pool on first use.
    void ensure_gradient(int i);
    // The same, not zeroed: true when it took the buffer now, whose contents the caller then sets
    // before anything adds into them (back_loop zeroes it a step at a time, just ahead of its sweep).
    bool take_gradient_unzeroed(int i);
    // After a step's backward ran, what the schedule says: each consumer's gradient buffer lent to
    // an addend becomes the addend's, then the gradients and values it lists go back to the pool.
    void after_backward(const PassSchedule::Backward& step);
    // A wrt node's gradient is final: padding zeroed, a row gradient's rows sorted.
    void finish_gradient(int i);
    std::span<const T> dense_gradient(int i) const;
    const RowGradient<T>* row_gradient(int i) const;
    // The same memory, to change in place (a reduction summing over processes): node i's dense
    // gradient buffer (empty when it is kept by rows or was released), its row form or nullptr.
    std::span<T> mutable_dense_gradient(int i);
    RowGradient<T>* mutable_row_gradient(int i);
    void release_gradient(int i);

    Value to_value(int i, const T* from) const;
    std::size_t bytes_held() const;
    BufferPool<T>& pool() { return pool_; }

private:
    const Plan& plan_;
    std::vector<Slot> slots_;
    const PassSchedule* pass_ = nullptr;  // the last backward's
    BufferPool<T> pool_;
    std::size_t elements_copied_ = 0;
};

extern template class Buffers<float>;
extern template class Buffers<double>;

}  // namespace loom
