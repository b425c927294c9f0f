#pragma once
/// \file
/// The op interface. An op is a small class in its family file under graph/ops/: its name, shape
/// rule, forward and accumulating backward sit together. Ops do not know about time: the executor
/// hands them either the whole [T, N, ...] tensor or one time step [N, ...] and the list of real
/// rows to compute; only the delay and sequence ops look at layouts and time steps.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/sequence_layout.hpp"
#include "core/shape.hpp"
#include "graph/node.hpp"
#include "graph/row_gradient.hpp"

namespace loom {

/// @cond
/// The op interface (View, OpCall, Prepared, Op, OpBase, apply_op and the shape-rule
/// helpers) is the engine's own: ops are added inside the library (graph/ops/, one line in
/// graph/ops.hpp), and no public function takes or returns these types. RowGradient, which
/// Session and the learners hand out, is in graph/row_gradient.hpp.

/// A contiguous tensor: `dyn` leading dynamic dims ([T, N], [N] or none) then the sample dims.
template <class T>
struct View {
    T* data = nullptr;
    Dims dims;
    std::size_t dyn = 0;

    std::size_t size() const { return dims.size(); }
    std::size_t sample_rank() const { return dims.rank - dyn; }
    std::size_t sample_size() const {
        std::size_t n = 1;
        for (std::size_t i = dyn; i < dims.rank; ++i) n *= dims[i];
        return n;
    }
    std::size_t rows() const { return size() / (sample_size() ? sample_size() : 1); }  ///< dynamic positions
    explicit operator bool() const { return data != nullptr; }
};

/// @endcond

/// @cond
/// Everything one forward or backward call sees. Built only by OpCalls (graph/op_calls.hpp), which
/// keeps one per node, viewing lists sized once per plan.
template <class T>
struct OpCall {
    std::span<const View<const T>> in;
    View<T> out;
    /// The layout of the output's sequence axis and of each input's (nullptr where none).
    const SequenceLayout* layout = nullptr;
    std::span<const SequenceLayout* const> in_layouts;

    /// The rows of `out` to compute: its dynamic positions (t * N + n of a [T, N, ...] tensor, n of
    /// [N, ...]) that are not padding. Every row when `padded` is false. Padding rows of the output
    /// are zeroed by the executor, and their output gradient is zero.
    bool padded = false;
    std::span<const std::size_t> rows;
    /// This op's memory across calls whose static inputs do not change (see LoopCache): inside a
    /// loop, across one run of the loop; outside, across a session's passes while its parameters
    /// are fixed (Session::set_parameters_fixed). Null otherwise.
    LoopCache<T>* memory = nullptr;
    /// Only for ops whose OpTraits::reads_time is set (the delay and sequence ops), inside a loop: the step
    /// computed and the whole [T, N, ...] buffers of the inputs and, backward, of their gradients.
    struct Time {
        std::size_t t = 0;
        std::span<const View<const T>> in;
        std::span<const View<T>> in_grad;
    };
    const Time* time = nullptr;

    /// Calls f(r) for each row of `out` to compute (see rows).
    template <class F>
    void for_each_row(F&& f) const {
        if (padded) {
            for (std::size_t r : rows) f(r);
        } else {
            for (std::size_t r = 0, n = out.rows(); r < n; ++r) f(r);
        }
    }

    /// for_each_row with the rows split among idle inter-op threads (share_range) when there are
    /// enough of them, a row costing about `row_work` element operations: for ops whose f(r) reads
    /// anything but writes only row r of the output, so that the values do not depend on the
    /// threads.
    template <class F>
    void for_each_row_shared(std::size_t row_work, F&& f) const {
        const std::size_t n = padded ? rows.size() : out.rows();
        const auto range = [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) f(padded ? rows[i] : i);
        };
        share_or_run(n, 1, row_work, kShareElementWork, range);
    }

    /// Backward only. An input gradient with data == nullptr is not needed.
    View<const T> out_grad;
    std::span<const View<T>> in_grad;
    /// Backward only. Bit i set (only for inputs whose OpTraits::assigns_gradient bit is set):
    /// in_grad[i] holds no values yet, not even zeros, and backward writes it rather than adding
    /// into it: every element, or every real row where input i is a padded sequence (the executor
    /// zeroes a gradient's padding before its node reads it). Clear: backward adds, as always.
    std::uint32_t assign_grad = 0;
    bool assigns(std::size_t input) const { return input < 32 && ((assign_grad >> input) & 1u); }
    /// Calls f(store), store(element, term) writing the term into input i's gradient where it is
    /// assigned and adding it otherwise: a backward loop written once for both.
    template <class F>
    void store_gradient(std::size_t input, F&& f) const {
        if (assigns(input))
            f([](auto& to, auto term) { to = term; });
        else
            f([](auto& to, auto term) { to += term; });
    }
    /// Empty, or one per input: non-null where that input's gradient is kept by rows (in_grad[i]
    /// then has no data); only for inputs whose OpTraits::writes_gradient_rows is true.
    std::span<RowGradient<T>* const> in_grad_by_rows;

    Workspace<T>* work = nullptr;
};

/// What an op decides before its output is allocated: a new sequence axis' layout, a sample shape
/// that is only known at run time (sequence::unpack). Left empty: the executor's defaults.
struct Prepared {
    LayoutPtr layout;
    bool has_shape = false;
    Shape shape;
};

/// What an op is, as compile, pass planning, the executor and the trainer need to know it: one
/// value per op (Op::traits), so that nothing outside an op's file casts to its class.
struct OpTraits {
    /// May run one time step at a time inside a recurrence loop.
    bool step_capable = true;
    /// +1 for past_value, -1 for future_value, 0 for every other op; delay_steps is the delay's
    /// time_step (0 for every other op).
    int delay_direction = 0;
    std::size_t delay_steps = 0;
    /// Inside a loop it needs the time step and the inputs' whole buffers (OpCall::time): the delay
    /// ops and the sequence ops that run in loops. Every other op sees rows only.
    bool reads_time = false;
    /// element_select(cond, a, b), the select of the fused scan's pattern (graph/fuse_scans.hpp).
    bool element_select = false;
    /// The generator the op draws from in forward (dropout's masks), or null. A Trainer's
    /// checkpoint keeps its state, so that a resumed run draws what the uninterrupted run would have.
    Rng* generator = nullptr;
    /// Bit i: input i's gradient is added by whole rows and can be handed over as a RowGradient
    /// (OpCall::in_grad_by_rows): an embedding's table.
    std::uint32_t gradient_rows = 0;
    /// Bit i: input i's gradient is the output gradient itself when their shapes match (an
    /// affine's addend): the executor may alias the two buffers, the op then adds nothing.
    std::uint32_t passes_gradient = 0;
    /// Bit i: backward can write input i's gradient instead of adding into it (OpCall::assign_grad),
    /// so that the pass schedule leaves it unzeroed where this op is the first to reach it.
    std::uint32_t assigns_gradient = 0;

    bool writes_gradient_rows(std::size_t input) const { return input < 32 && ((gradient_rows >> input) & 1u); }
    bool passes_gradient_through(std::size_t input) const { return input < 32 && ((passes_gradient >> input) & 1u); }
};

class Op {
public:
    virtual ~Op() = default;
    virtual std::string name() const = 0;
    /// Shape rule: the output type from the inputs' types; throws UserError naming the op and shapes.
    virtual TypeInfo infer(std::span<const TypeInfo> in) const = 0;
    /// What the op is (OpTraits); the defaults for an op that is none of those things.
    virtual OpTraits traits() const { return {}; }

    /// Which values backward reads besides out_grad (default: all). A value no backward reads is
    /// freed as soon as the forward steps using it are done; backward then sees its data as null.
    virtual bool backward_reads_output() const { return true; }
    virtual bool backward_reads_input(std::size_t /*input*/) const { return true; }

    virtual void prepare(const OpCall<float>&, Prepared&) const {}
    virtual void prepare(const OpCall<double>&, Prepared&) const {}
    virtual void forward(const OpCall<float>&) const = 0;
    virtual void forward(const OpCall<double>&) const = 0;
    /// Adds d(out)/d(in_i) * out_grad into every in_grad[i] that is present.
    virtual void backward(const OpCall<float>&) const = 0;
    virtual void backward(const OpCall<double>&) const = 0;
};

/// Writes the float and double virtuals once: the derived op defines
///   template <class T> void fwd(const OpCall<T>&) const;  template <class T> void bwd(const OpCall<T>&) const;
/// and optionally  template <class T> void prep(const OpCall<T>&, Prepared&) const.
template <class Derived>
class OpBase : public Op {
public:
    void forward(const OpCall<float>& c) const override { self().fwd(c); }
    void forward(const OpCall<double>& c) const override { self().fwd(c); }
    void backward(const OpCall<float>& c) const override { self().bwd(c); }
    void backward(const OpCall<double>& c) const override { self().bwd(c); }
    void prepare(const OpCall<float>& c, Prepared& p) const override { self().prep(c, p); }
    void prepare(const OpCall<double>& c, Prepared& p) const override { self().prep(c, p); }

    template <class T>
    void prep(const OpCall<T>&, Prepared&) const {}

private:
    const Derived& self() const { return static_cast<const Derived&>(*this); }
};

/// Builds a node for `op` applied to `inputs`, running the shape rule now so that errors surface
/// where the graph is built.
NodePtr apply_op(std::shared_ptr<const Op> op, std::vector<NodePtr> inputs, std::string name = {});

/// Helpers for shape rules.
std::string describe_types(std::span<const TypeInfo> in);
[[noreturn]] void shape_error(const std::string& op, std::span<const TypeInfo> in, const std::string& why);
/// Dynamic axes of an element-wise combination; throws if two sequence axes differ.
Axis unify_axes(const std::string& op, std::span<const TypeInfo> in);
/// Numpy-style broadcast of sample shapes (right-aligned); throws naming the op and shapes.
Shape broadcast_shapes(const std::string& op, std::span<const TypeInfo> in);
/// Normalizes a possibly negative static axis against `rank`; throws naming the op.
std::size_t normalize_axis(const std::string& op, int axis, std::size_t rank);
/// Whether `v`, a number read from a Value, is a whole number in [0, count): an index of one of
/// `count` rows, items or ids (NaN is not).
inline bool is_index(double v, std::size_t count) {
    return v >= 0 && v < static_cast<double>(count) && v == static_cast<double>(static_cast<std::size_t>(v));
}

/// @endcond

}  // namespace loom
