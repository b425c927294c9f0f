// Ops that move elements around within the sample: splice, slice, reshape, transpose, one_hot. Dynamic axes pass
// through untouched (splice broadcasts them between its operands), so every op here works on a whole tensor or one time
// step alike.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/errors.hpp"
#include "graph/ops.hpp"
#include "graph/ops/broadcast.hpp"

namespace loom {

namespace {

// The output rows (dynamic positions) and, for each, the row of `in` it reads: `in` may have fewer
// dynamic axes (a static or batch operand spliced to a sequence) and is then repeated.
template <class T, class U, class F>
void for_each_row(const View<U>& out, const View<const T>& in, F&& f) {
    Dims pos, in_pos;
    for (std::size_t i = 0; i < out.dyn; ++i) pos.push_back(out.dims[i]);
    for (std::size_t i = 0; i < in.dyn; ++i) in_pos.push_back(in.dims[i]);
    const auto plan = detail::plan_broadcast<const T, 1>(pos, pos.rank, {View<const T>{in.data, in_pos, in.dyn}});
    detail::for_each_broadcast(plan, [&](std::size_t r, const std::array<std::size_t, 1>& k) { f(r, k[0]); });
}

// ---- splice: concatenation along one static axis ----

class Splice final : public OpBase<Splice> {
public:
    explicit Splice(int axis) : axis_(axis) {}
    std::string name() const override { return "splice"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }  // gradients are routed only
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        if (in.empty()) throw UserError("splice: needs at least one input");
        const Shape& first = in[0].shape;
        for (const auto& t : in)
            if (t.shape.rank() != first.rank())
                shape_error(name(), in, "all inputs must have the same rank (reshape them first)");
        const std::size_t a = axis_index(in);
        std::vector<std::size_t> out(first.begin(), first.end());
        out[a] = 0;
        for (const auto& t : in) {
            for (std::size_t i = 0; i < first.rank(); ++i)
                if (i != a && t.shape[i] != first[i])
                    shape_error(name(), in,
                                "inputs must agree on every axis but the spliced one (axis " + std::to_string(a) + ")");
            out[a] += t.shape[a];
        }
        return {Shape(out), unify_axes(name(), in)};
    }

    // Within one output row of [outer, total * inner], input k fills columns [offset_k, offset_k + d_k * inner).
    template <class T>
    void fwd(const OpCall<T>& c) const {
        walk(c, false, [&](std::size_t k, std::size_t ii, std::size_t oi, std::size_t n) {
            std::copy_n(c.in[k].data + ii, n, c.out.data + oi);
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        walk(c, true, [&](std::size_t k, std::size_t ii, std::size_t oi, std::size_t n) {
            T* dst = c.in_grad[k].data + ii;
            const T* src = c.out_grad.data + oi;
            for (std::size_t j = 0; j < n; ++j) dst[j] += src[j];
        });
    }

private:
    std::size_t axis_index(std::span<const TypeInfo> in) const {
        const std::size_t rank = in[0].shape.rank();
        const long a = axis_ < 0 ? static_cast<long>(rank) + axis_ : axis_;
        if (a < 0 || a >= static_cast<long>(rank))
            shape_error(
                name(), in,
                "axis " + std::to_string(axis_) + " is out of range for samples of rank " + std::to_string(rank));
        return static_cast<std::size_t>(a);
    }

    // f(input k, its element offset, the output's element offset, run length) for every contiguous
    // run; in backward, inputs that need no gradient are skipped.
    template <class T, class F>
    void walk(const OpCall<T>& c, bool backward, F&& f) const {
        const std::size_t rank = c.out.sample_rank();
        const std::size_t a = axis_ < 0 ? rank - static_cast<std::size_t>(-axis_) : static_cast<std::size_t>(axis_);
        std::size_t outer = 1, inner = 1;
        for (std::size_t i = 0; i < a; ++i) outer *= c.out.dims[c.out.dyn + i];
        for (std::size_t i = a + 1; i < rank; ++i) inner *= c.out.dims[c.out.dyn + i];
        const std::size_t out_row = c.out.sample_size(), out_chunk = c.out.dims[c.out.dyn + a] * inner;
        std::size_t offset = 0;
        for (std::size_t k = 0; k < c.in.size(); ++k) {
            const View<const T>& in = c.in[k];
            const std::size_t chunk = in.dims[in.dyn + a] * inner, in_row = in.sample_size();
            if (!backward || c.in_grad[k])
                for_each_row(c.out, in, [&](std::size_t r, std::size_t ir) {
                    for (std::size_t o = 0; o < outer; ++o)
                        f(k, ir * in_row + o * chunk, r * out_row + o * out_chunk + offset, chunk);
                });
            offset += chunk;
        }
    }

    int axis_;
};

// ---- slice: [begin, end) of one static axis ----

class Slice final : public OpBase<Slice> {
public:
    Slice(int axis, int begin, int end) : axis_(axis), begin_(begin), end_(end) {}
    std::string name() const override { return "slice"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const Shape& s = in[0].shape;
        const long rank = static_cast<long>(s.rank());
        const long a = axis_ < 0 ? rank + axis_ : axis_;
        if (a < 0 || a >= rank)
            shape_error(
                name(), in,
                "axis " + std::to_string(axis_) + " is out of range for a sample of rank " + std::to_string(rank));
        const long n = static_cast<long>(s[static_cast<std::size_t>(a)]);
        const long b = begin_ < 0 ? n + begin_ : begin_, e = end_ <= 0 ? n + end_ : end_;
        if (b < 0 || e > n || b >= e)
            shape_error(name(), in,
                        "range [" + std::to_string(begin_) + ", " + std::to_string(end_) +
                            ") selects nothing valid of axis " + std::to_string(a) + " of size " + std::to_string(n) +
                            " (negative indices count from the end; end 0 means to the end)");
        std::vector<std::size_t> out(s.begin(), s.end());
        out[static_cast<std::size_t>(a)] = static_cast<std::size_t>(e - b);
        return {Shape(out), in[0].axis};
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const auto g = geometry(c.in[0]);
        for (std::size_t o = 0; o < g.outer; ++o)
            std::copy_n(c.in[0].data + o * g.in_chunk + g.skip, g.out_chunk, c.out.data + o * g.out_chunk);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        const auto g = geometry(c.in[0]);
        for (std::size_t o = 0; o < g.outer; ++o) {
            T* dst = c.in_grad[0].data + o * g.in_chunk + g.skip;
            const T* src = c.out_grad.data + o * g.out_chunk;
            for (std::size_t j = 0; j < g.out_chunk; ++j) dst[j] += src[j];
        }
    }

private:
    struct Geometry {
        std::size_t outer, in_chunk, out_chunk, skip;
    };
    // Rows of [outer, n * inner]; the output keeps [begin * inner, end * inner) of each.
    template <class T>
    Geometry geometry(const View<const T>& in) const {
        const std::size_t rank = in.sample_rank();
        const std::size_t a = axis_ < 0 ? rank - static_cast<std::size_t>(-axis_) : static_cast<std::size_t>(axis_);
        std::size_t outer = in.rows(), inner = 1;
        for (std::size_t i = 0; i < a; ++i) outer *= in.dims[in.dyn + i];
        for (std::size_t i = a + 1; i < rank; ++i) inner *= in.dims[in.dyn + i];
        const long n = static_cast<long>(in.dims[in.dyn + a]);
        const long b = begin_ < 0 ? n + begin_ : begin_, e = end_ <= 0 ? n + end_ : end_;
        return {outer, static_cast<std::size_t>(n) * inner, static_cast<std::size_t>(e - b) * inner,
                static_cast<std::size_t>(b) * inner};
    }

    int axis_, begin_, end_;
};

// ---- reshape: same elements, new sample shape ----

class Reshape final : public OpBase<Reshape> {
public:
    explicit Reshape(Shape shape) : shape_(std::move(shape)) {}
    std::string name() const override { return "reshape"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        if (in[0].shape.size() != shape_.size())
            shape_error(name(), in,
                        "cannot reshape to " + shape_.str() + ": " + std::to_string(in[0].shape.size()) +
                            " elements vs " + std::to_string(shape_.size()));
        return {shape_, in[0].axis};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        std::copy_n(c.in[0].data, c.out.size(), c.out.data);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        T* gx = c.in_grad[0].data;
        const T* g = c.out_grad.data;
        for (std::size_t i = 0, n = c.out.size(); i < n; ++i) gx[i] += g[i];
    }

private:
    Shape shape_;
};

// ---- transpose: permutes the static axes; output axis i is input axis perm[i] ----

class Transpose final : public OpBase<Transpose> {
public:
    explicit Transpose(std::vector<std::size_t> perm) : perm_(std::move(perm)) {}
    std::string name() const override { return "transpose"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const Shape& s = in[0].shape;
        std::string p;
        for (auto v : perm_) p += (p.empty() ? "" : ", ") + std::to_string(v);
        if (perm_.size() != s.rank())
            shape_error(
                name(), in,
                "permutation (" + p + ") must name each of the " + std::to_string(s.rank()) + " sample axes once");
        std::vector<char> seen(s.rank(), 0);
        for (auto v : perm_) {
            if (v >= s.rank() || seen[v])
                shape_error(name(), in, "(" + p + ") is not a permutation of 0.." + std::to_string(s.rank()) + "-1");
            seen[v] = 1;
        }
        std::vector<std::size_t> out;
        for (auto v : perm_) out.push_back(s[v]);
        return {Shape(out), in[0].axis};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        walk(c.in[0], [&](std::size_t o, std::size_t i) { c.out.data[o] = c.in[0].data[i]; });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        walk(c.in[0], [&](std::size_t o, std::size_t i) { c.in_grad[0].data[i] += c.out_grad.data[o]; });
    }

private:
    // f(output index, input index) for every element, walking the output in order.
    template <class T, class F>
    void walk(const View<const T>& in, F&& f) const {
        const std::size_t rank = perm_.size(), row = in.sample_size();
        std::array<std::size_t, max_rank> in_stride{}, stride{}, dims{}, counter{};
        std::size_t s = 1;
        for (std::size_t i = rank; i-- > 0;) {
            in_stride[i] = s;
            s *= in.dims[in.dyn + i];
        }
        for (std::size_t i = 0; i < rank; ++i) {
            stride[i] = in_stride[perm_[i]];
            dims[i] = in.dims[in.dyn + perm_[i]];
        }
        for (std::size_t r = 0, rows = in.rows(); r < rows; ++r) {
            std::size_t src = 0;
            counter.fill(0);
            for (std::size_t o = 0; o < row; ++o) {
                f(r * row + o, r * row + src);
                for (std::size_t d = rank; d-- > 0;) {  // odometer over the output's axes
                    src += stride[d];
                    if (++counter[d] < dims[d]) break;
                    src -= stride[d] * dims[d];
                    counter[d] = 0;
                }
            }
        }
    }

    std::vector<std::size_t> perm_;
};

// ---- one_hot: an id (a whole number) in [0, n) becomes a row of n with a single 1 ----

class OneHot final : public OpBase<OneHot> {
public:
    explicit OneHot(std::size_t n) : n_(n) {}
    std::string name() const override { return "one_hot"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        if (in[0].shape != Shape{1})
            shape_error(name(), in, "ids must have sample shape [1] (one id per item or step)");
        if (n_ == 0) shape_error(name(), in, "the number of classes must be positive");
        return {Shape{n_}, in[0].axis};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t rows = c.in[0].size();
        std::fill_n(c.out.data, c.out.size(), T(0));
        for (std::size_t r = 0; r < rows; ++r) {
            const T id = c.in[0].data[r];
            if (!(id >= 0 && id < static_cast<T>(n_) && id == std::floor(id)))
                throw UserError("one_hot: id " + std::to_string(static_cast<double>(id)) +
                                " is not a whole number in [0, " + std::to_string(n_) +
                                "); check the data or raise num_classes");
            c.out.data[r * n_ + static_cast<std::size_t>(id)] = T(1);
        }
    }
    template <class T>
    void bwd(const OpCall<T>&) const {}  // ids are not differentiable

private:
    std::size_t n_;
};

}  // namespace

Variable splice(const std::vector<Variable>& inputs, int axis, const std::string& name) {
    std::vector<NodePtr> nodes;
    for (const auto& v : inputs) nodes.push_back(v.node());
    return Variable(apply_op(std::make_shared<const Splice>(axis), std::move(nodes), name));
}

Variable slice(const Variable& a, int axis, int begin, int end, const std::string& name) {
    return Variable(apply_op(std::make_shared<const Slice>(axis, begin, end), {a.node()}, name));
}

Variable reshape(const Variable& a, const Shape& shape, const std::string& name) {
    check_shape(shape, "reshape: the target");
    return Variable(apply_op(std::make_shared<const Reshape>(shape), {a.node()}, name));
}

Variable transpose(const Variable& a, const std::vector<std::size_t>& perm, const std::string& name) {
    return Variable(apply_op(std::make_shared<const Transpose>(perm), {a.node()}, name));
}

Variable one_hot(const Variable& ids, std::size_t num_classes, const std::string& name) {
    return Variable(apply_op(std::make_shared<const OneHot>(num_classes), {ids.node()}, name));
}

}  // namespace loom
