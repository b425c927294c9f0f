// Sequence ops that change the shape of the time axis: slice and gather make a NEW sequence axis
// (each node gets a fresh axis id when it is built, and its layout is computed at run time in
// `prep`); unpack turns a sequence into a padded batch tensor whose length is only known at run time.
#include <algorithm>
#include <string>

#include "core/errors.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

void require_sequence(const std::string& op, std::span<const TypeInfo> in, std::size_t i) {
    if (in[i].axis.kind != Axis::Kind::Sequence && in[i].axis.kind != Axis::Kind::Any)
        shape_error(op, in,
                    "operand " + std::to_string(i) + " must be a sequence (it is on the " + in[i].axis.str() + ")");
}

// Adds `row` elements of g into dst.
template <class T>
void add_row(T* dst, const T* g, std::size_t row) {
    for (std::size_t j = 0; j < row; ++j) dst[j] += g[j];
}

// sequence::slice: steps [begin, end) of each sequence on a new axis.
class SequenceSlice final : public OpBase<SequenceSlice> {
public:
    SequenceSlice(int begin, int end, std::uint64_t axis_id) : begin_(begin), end_(end), axis_id_(axis_id) {}
    std::string name() const override { return "sequence::slice"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_sequence(name(), in, 0);
        return {in[0].shape, Axis::sequence(axis_id_)};
    }

    template <class T>
    void prep(const OpCall<T>& c, Prepared& p) const {
        const SequenceLayout& l = *c.in_layouts[0];
        std::vector<std::size_t> lengths(l.num_sequences());
        for (std::size_t n = 0; n < l.num_sequences(); ++n) {
            const auto [b, e] = range(l.length(n));
            if (e <= b)
                throw UserError(name() + "(begin=" + std::to_string(begin_) + ", end=" + std::to_string(end_) +
                                "): sequence " + std::to_string(n) + " of length " + std::to_string(l.length(n)) +
                                " would become empty; every sequence needs at least one step");
            lengths[n] = e - b;
        }
        p.layout = std::make_shared<const SequenceLayout>(std::move(lengths));
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout &src = *c.in_layouts[0], &dst = *c.layout;
        const std::size_t n_seq = src.num_sequences(), row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n) {
            const std::size_t b = range(src.length(n)).first;
            for (std::size_t t = 0; t < dst.length(n); ++t)
                std::copy_n(c.in[0].data + ((b + t) * n_seq + n) * row, row, c.out.data + (t * n_seq + n) * row);
        }
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        const SequenceLayout &src = *c.in_layouts[0], &dst = *c.layout;
        const std::size_t n_seq = src.num_sequences(), row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n) {
            const std::size_t b = range(src.length(n)).first;
            for (std::size_t t = 0; t < dst.length(n); ++t)
                add_row(c.in_grad[0].data + ((b + t) * n_seq + n) * row, c.out_grad.data + (t * n_seq + n) * row, row);
        }
    }

private:
    // [b, e) within a sequence of length len; negative indices count from its end, end 0 = to the end.
    std::pair<std::size_t, std::size_t> range(std::size_t len) const {
        const long L = static_cast<long>(len);
        auto clamp = [&](long i) { return std::clamp(i < 0 ? L + i : i, 0L, L); };
        const long b = clamp(begin_), e = end_ == 0 ? L : clamp(end_);
        return {static_cast<std::size_t>(b), static_cast<std::size_t>(std::max(b, e))};
    }

    int begin_, end_;
    std::uint64_t axis_id_;
};

// sequence::gather: the steps where cond != 0, packed to the front of each sequence on a new axis.
class SequenceGather final : public OpBase<SequenceGather> {
public:
    explicit SequenceGather(std::uint64_t axis_id) : axis_id_(axis_id) {}
    std::string name() const override { return "sequence::gather"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_sequence(name(), in, 0);
        require_sequence(name(), in, 1);
        unify_axes(name(), in);  // a and cond must share their sequence axis
        if (in[1].shape.size() != 1)
            shape_error(name(), in, "the condition must have one element per step (shape [1])");
        return {in[0].shape, Axis::sequence(axis_id_)};
    }

    template <class T>
    void prep(const OpCall<T>& c, Prepared& p) const {
        const SequenceLayout& l = *c.in_layouts[1];
        const std::size_t n_seq = l.num_sequences();
        std::vector<std::size_t> lengths(n_seq, 0);
        for (std::size_t n = 0; n < n_seq; ++n) {
            for (std::size_t t = 0; t < l.length(n); ++t) lengths[n] += c.in[1].data[t * n_seq + n] != T(0);
            if (lengths[n] == 0)
                throw UserError(name() + ": the condition keeps no step of sequence " + std::to_string(n) +
                                " (of length " + std::to_string(l.length(n)) +
                                "); every sequence needs at least one kept step");
        }
        p.layout = std::make_shared<const SequenceLayout>(std::move(lengths));
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        for_each_kept(
            c, [&](const T* src, T* dst, std::size_t row) { std::copy_n(src, row, dst); }, c.out.data);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {  // no gradient to the condition: it is piecewise constant
        if (!c.in_grad[0]) return;
        const std::size_t n_seq = c.in_layouts[0]->num_sequences(), row = c.out.sample_size();
        const T* cond = c.in[1].data;
        const SequenceLayout& l = *c.in_layouts[0];
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t t = 0, k = 0; t < l.length(n); ++t)
                if (cond[t * n_seq + n] != T(0))
                    add_row(c.in_grad[0].data + (t * n_seq + n) * row, c.out_grad.data + (k++ * n_seq + n) * row, row);
    }

private:
    template <class T, class F>
    void for_each_kept(const OpCall<T>& c, F f, T* out) const {
        const SequenceLayout& l = *c.in_layouts[0];
        const std::size_t n_seq = l.num_sequences(), row = c.out.sample_size();
        const T* cond = c.in[1].data;
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t t = 0, k = 0; t < l.length(n); ++t)
                if (cond[t * n_seq + n] != T(0))
                    f(c.in[0].data + (t * n_seq + n) * row, out + (k++ * n_seq + n) * row, row);
    }

    std::uint64_t axis_id_;
};

// sequence::unpack: a sequence [T, N, sample] as a batch value [N, T_max, sample] (data) or [N, T_max]
// (mask). T_max is only known at run time, so the static shape says 0 there.
class Unpack final : public OpBase<Unpack> {
public:
    Unpack(bool mask, double padding_value) : mask_(mask), padding_(padding_value) {}
    std::string name() const override { return mask_ ? "sequence::unpack (mask)" : "sequence::unpack"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_sequence(name(), in, 0);
        return {sample_shape(0, in[0].shape), Axis::batch()};
    }

    template <class T>
    void prep(const OpCall<T>& c, Prepared& p) const {
        const View<const T>& a = c.in[0];
        std::vector<std::size_t> sample(a.dims.begin() + a.dyn, a.dims.end());
        p.has_shape = true;
        p.shape = sample_shape(c.in_layouts[0]->max_length(), Shape(sample));
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout& l = *c.in_layouts[0];
        const std::size_t n_seq = l.num_sequences(), steps = l.max_length();
        const std::size_t row = mask_ ? 1 : c.in[0].sample_size();
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t t = 0; t < steps; ++t) {
                T* dst = c.out.data + (n * steps + t) * row;
                if (mask_)
                    dst[0] = l.valid(t, n) ? T(1) : T(0);
                else if (l.valid(t, n))
                    std::copy_n(c.in[0].data + (t * n_seq + n) * row, row, dst);
                else
                    std::fill_n(dst, row, static_cast<T>(padding_));
            }
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {  // the padding value and the mask carry no gradient
        if (mask_ || !c.in_grad[0]) return;
        const SequenceLayout& l = *c.in_layouts[0];
        const std::size_t n_seq = l.num_sequences(), steps = l.max_length(), row = c.in[0].sample_size();
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t t = 0; t < l.length(n); ++t)
                add_row(c.in_grad[0].data + (t * n_seq + n) * row, c.out_grad.data + (n * steps + t) * row, row);
    }

private:
    Shape sample_shape(std::size_t steps, const Shape& sample) const {
        if (mask_) return Shape{steps};
        std::vector<std::size_t> d{steps};
        d.insert(d.end(), sample.begin(), sample.end());
        return Shape(std::move(d));
    }

    bool mask_;
    double padding_;
};

}  // namespace

namespace sequence {

Variable slice(const Variable& a, int begin, int end, const std::string& name) {
    if (end != 0 && ((begin >= 0) == (end >= 0)) && end <= begin)
        throw UserError("sequence::slice(begin=" + std::to_string(begin) + ", end=" + std::to_string(end) +
                        "): the range is empty for every sequence; end must be after begin (or 0 for 'to the end')");
    auto op = std::make_shared<const SequenceSlice>(begin, end, Axis::new_sequence_id());
    return Variable(apply_op(std::move(op), {a.node()}, name));
}

Variable gather(const Variable& a, const Variable& cond, const std::string& name) {
    auto op = std::make_shared<const SequenceGather>(Axis::new_sequence_id());
    return Variable(apply_op(std::move(op), {a.node(), cond.node()}, name));
}

Unpacked unpack(const Variable& a, double padding_value, const std::string& name) {
    Variable data(apply_op(std::make_shared<const Unpack>(false, padding_value), {a.node()}, name));
    Variable mask(apply_op(std::make_shared<const Unpack>(true, padding_value), {a.node()},
                           name.empty() ? name : name + "_mask"));
    return {data, mask};
}

}  // namespace sequence

}  // namespace loom
