// CNTK's remaining sequence ops. where and to_sequence make a NEW sequence axis whose layout is
// computed at run time (in `prep`), as gather and slice do; scatter, gather's inverse, writes onto
// its condition's axis. An op whose result would hold an empty sequence refuses it, naming the
// sequence (docs/semantics.md: loom has no empty sequences).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "core/errors.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

void require_axis(const std::string& op, std::span<const TypeInfo> in, std::size_t i, Axis::Kind kind) {
    if (in[i].axis.kind == kind || in[i].axis.kind == Axis::Kind::Any) return;
    shape_error(op, in,
                "operand " + std::to_string(i) + " must be " +
                    (kind == Axis::Kind::Sequence ? "a sequence" : "a batch value [N, sample...]") + " (it is on the " +
                    in[i].axis.str() + ")");
}

void require_one_element(const std::string& op, std::span<const TypeInfo> in, std::size_t i, const char* what) {
    if (in[i].shape.size() != 1)
        shape_error(op, in, std::string(what) + " must have one element per step or item (shape [1])");
}

// The shortest text that reads back as v: 1e-310 and 1.0000001 as themselves, never "0" or "1".
std::string number(double v) {
    char text[32];
    const auto [end, error] = std::to_chars(text, text + sizeof text, v);
    return error == std::errc() ? std::string(text, end) : std::to_string(v);
}

// sequence::where(cond): the positions where cond is non-zero, each repeated cond times.
class Where final : public OpBase<Where> {
public:
    explicit Where(std::uint64_t axis_id) : axis_id_(axis_id) {}
    std::string name() const override { return "sequence::where"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_axis(name(), in, 0, Axis::Kind::Sequence);
        require_one_element(name(), in, 0, "the condition");
        return {Shape{1}, Axis::sequence(axis_id_)};
    }

    // A count must be a whole number >= 0: a fraction or a negative has no meaning as a repeat.
    template <class T>
    void prep(const OpCall<T>& c, Prepared& p) const {
        const SequenceLayout& l = *c.in_layouts[0];
        const std::size_t n_seq = l.num_sequences();
        std::vector<std::size_t> lengths(n_seq, 0);
        for (std::size_t n = 0; n < n_seq; ++n) {
            for (std::size_t t = 0; t < l.length(n); ++t) {
                const T v = c.in[0].data[t * n_seq + n];
                if (!(v >= T(0)) || v != std::floor(v) || v > T(1 << 24))
                    throw UserError(name() + ": the condition of sequence " + std::to_string(n) + " is " +
                                    number(static_cast<double>(v)) + " at step " + std::to_string(t) +
                                    "; it must be 0, 1 or a whole repeat count (at most 2^24)");
                lengths[n] += static_cast<std::size_t>(v);
            }
            if (lengths[n] == 0)
                throw UserError(name() + ": the condition is zero on every step of sequence " + std::to_string(n) +
                                " (of length " + std::to_string(l.length(n)) +
                                "), which would give an empty sequence; loom refuses empty sequences");
        }
        p.layout = std::make_shared<const SequenceLayout>(std::move(lengths));
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout& l = *c.in_layouts[0];
        const std::size_t n_seq = l.num_sequences();
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t t = 0, k = 0; t < l.length(n); ++t)
                for (auto r = static_cast<std::size_t>(c.in[0].data[t * n_seq + n]); r > 0; --r)
                    c.out.data[k++ * n_seq + n] = static_cast<T>(t);
    }
    template <class T>
    void bwd(const OpCall<T>&) const {}  // positions are piecewise constant in cond: no gradient

private:
    std::uint64_t axis_id_;
};

// sequence::scatter(x, cond): step k of x's sequence n goes to the k-th step of cond's sequence n
// where cond is non-zero; the other steps are 0. x must have exactly that many steps.
class Scatter final : public OpBase<Scatter> {
public:
    std::string name() const override { return "sequence::scatter"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t i) const override { return i == 1; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_axis(name(), in, 0, Axis::Kind::Sequence);
        require_axis(name(), in, 1, Axis::Kind::Sequence);
        require_one_element(name(), in, 1, "the condition");
        return {in[0].shape, in[1].axis};
    }
    template <class T>
    void prep(const OpCall<T>& c, Prepared&) const {
        const SequenceLayout &x = *c.in_layouts[0], &cond = *c.in_layouts[1];
        const std::size_t n_seq = cond.num_sequences();
        for (std::size_t n = 0; n < n_seq; ++n) {
            std::size_t kept = 0;
            for (std::size_t t = 0; t < cond.length(n); ++t) kept += c.in[1].data[t * n_seq + n] != T(0);
            if (kept != x.length(n))
                throw UserError(name() + ": sequence " + std::to_string(n) + " of x has " +
                                std::to_string(x.length(n)) + " steps but its condition (of length " +
                                std::to_string(cond.length(n)) + ") is non-zero on " + std::to_string(kept) +
                                "; they must be equal (x is usually sequence::gather(..., cond))");
        }
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        std::fill_n(c.out.data, c.out.size(), T(0));
        for_each_pair(c, [&](std::size_t from, std::size_t to, std::size_t row) {
            std::copy_n(c.in[0].data + from * row, row, c.out.data + to * row);
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {  // none to the condition: it is piecewise constant
        if (!c.in_grad[0]) return;
        for_each_pair(c, [&](std::size_t from, std::size_t to, std::size_t row) {
            T* dst = c.in_grad[0].data + from * row;
            const T* g = c.out_grad.data + to * row;
            for (std::size_t j = 0; j < row; ++j) dst[j] += g[j];
        });
    }

private:
    // f(row of x, row of the output, row size) for every step of x.
    template <class T, class F>
    void for_each_pair(const OpCall<T>& c, F f) const {
        const SequenceLayout& cond = *c.in_layouts[1];
        const std::size_t n_seq = cond.num_sequences(), row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t t = 0, k = 0; t < cond.length(n); ++t)
                if (c.in[1].data[t * n_seq + n] != T(0)) f(k++ * n_seq + n, t * n_seq + n, row);
    }
};

// to_sequence(padded, lengths): item n's rows [0, lengths[n]) of [T_max, sample...] as a sequence.
class ToSequence final : public OpBase<ToSequence> {
public:
    explicit ToSequence(std::uint64_t axis_id) : axis_id_(axis_id) {}
    std::string name() const override { return "to_sequence"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_axis(name(), in, 0, Axis::Kind::Batch);
        require_axis(name(), in, 1, Axis::Kind::Batch);
        require_one_element(name(), in, 1, "the lengths");
        if (in[0].shape.rank() < 1)
            shape_error(name(), in, "the padded value needs a time axis: a sample [T_max, sample...]");
        // A per-item [T_max] tensor (a mask, a score per step) becomes steps of shape [1].
        if (in[0].shape.rank() == 1) return {Shape{1}, Axis::sequence(axis_id_)};
        return {Shape(std::vector<std::size_t>(in[0].shape.begin() + 1, in[0].shape.end())), Axis::sequence(axis_id_)};
    }
    template <class T>
    void prep(const OpCall<T>& c, Prepared& p) const {
        const std::size_t n_items = c.in[1].rows(), steps = c.in[0].dims[1];
        std::vector<std::size_t> lengths(n_items);
        for (std::size_t n = 0; n < n_items; ++n) {
            const T v = c.in[1].data[n];
            if (!(v >= T(1)) || v != std::floor(v) || v > static_cast<T>(steps))
                throw UserError(name() + ": item " + std::to_string(n) + " has length " +
                                number(static_cast<double>(v)) + " but the padded value holds " +
                                std::to_string(steps) + " steps; a length must be a whole number in 1.." +
                                std::to_string(steps));
            lengths[n] = static_cast<std::size_t>(v);
        }
        p.layout = std::make_shared<const SequenceLayout>(std::move(lengths));
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout& l = *c.layout;
        const std::size_t n_seq = l.num_sequences(), steps = c.in[0].dims[1], row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t t = 0; t < l.length(n); ++t)
                std::copy_n(c.in[0].data + (n * steps + t) * row, row, c.out.data + (t * n_seq + n) * row);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {  // none to the lengths; none to padded steps past them
        const View<T>& gx = c.in_grad[0];
        if (!gx) return;
        const SequenceLayout& l = *c.layout;
        const std::size_t n_seq = l.num_sequences(), steps = gx.dims[1], row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t t = 0; t < l.length(n); ++t) {
                T* dst = gx.data + (n * steps + t) * row;
                const T* g = c.out_grad.data + (t * n_seq + n) * row;
                for (std::size_t j = 0; j < row; ++j) dst[j] += g[j];
            }
    }

private:
    std::uint64_t axis_id_;
};

}  // namespace

namespace sequence {
Variable where(const Variable& cond, const std::string& name) {
    return Variable(apply_op(std::make_shared<const Where>(Axis::new_sequence_id()), {cond.node()}, name));
}
Variable scatter(const Variable& x, const Variable& cond, const std::string& name) {
    return Variable(apply_op(std::make_shared<const Scatter>(), {x.node(), cond.node()}, name));
}
}  // namespace sequence

Variable to_sequence(const Variable& padded, const Variable& lengths, const std::string& name) {
    return Variable(
        apply_op(std::make_shared<const ToSequence>(Axis::new_sequence_id()), {padded.node(), lengths.node()}, name));
}

}  // namespace loom
