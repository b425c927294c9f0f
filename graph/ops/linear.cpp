// Matrix products. times(x, W): x [a..., k] with W [k, m...] gives [a..., m...]; times_transpose(a, b)
// multiplies by b's transpose: a [..., k], b [m, k] gives [..., m]; affine(x, W, b) adds b, which
// broadcasts to the product's shape. Here is the math: y = x W (+ b), dX += dY W^T, dW += X^T dY,
// db += dY summed over b's broadcast dims. How to multiply (a loop's packed weight, the real rows of
// a padded batch, dot products per item, GEMM) is core/multiply.hpp's choice.
#include <algorithm>
#include <array>
#include <vector>

#include "core/errors.hpp"
#include "core/multiply.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"
#include "graph/ops/broadcast.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

class Times final : public OpBase<Times> {
public:
    Times(bool transpose_right, bool addend) : transpose_(transpose_right), addend_(addend) {}
    std::string name() const override { return addend_ ? "affine" : transpose_ ? "times_transpose" : "times"; }
    bool transposed() const { return transpose_; }
    int addends() const { return addend_ ? 1 : 0; }
    // dX and dW need X and W; the addend's gradient is out_grad itself.
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t i) const override { return i < 2; }
    // The addend's gradient is out_grad itself; dX and dW can be written rather than added to.
    OpTraits traits() const override { return {.passes_gradient = addend_ ? 1u << 2 : 0u, .assigns_gradient = 3u}; }

    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const Shape &x = in[0].shape, &w = in[1].shape;
        if (x.rank() == 0 || w.rank() == 0) shape_error(name(), in, "both operands need at least one axis");
        if (transpose_ && w.rank() != 2) shape_error(name(), in, "the right operand must be a matrix [m, k]");
        const std::size_t k = transpose_ ? w[1] : w[0];
        if (x[x.rank() - 1] != k)
            shape_error(name(), in,
                        "the last axis of the left operand (" + std::to_string(x[x.rank() - 1]) + ") must match the " +
                            (transpose_ ? "last" : "first") + " axis of the right (" + std::to_string(k) + ")");
        std::vector<std::size_t> out(x.begin(), x.end() - 1);
        if (transpose_)
            out.push_back(w[0]);
        else
            out.insert(out.end(), w.begin() + 1, w.end());
        if (addend_) {  // the addend broadcasts to the product's shape, never beyond it
            const Shape product(out);
            const TypeInfo pair[] = {{product, in[0].axis}, in[2]};
            if (broadcast_shapes(name(), pair) != product)
                shape_error(name(), in, "the addend must broadcast to the product's shape " + product.str());
        }
        return {Shape(out), unify_axes(name(), in)};
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {  // y = x W (+ b)
        const Product<T> p = product(c);
        if (!addend_) return multiply(p);
        multiply(p, Addend<T>{addend_form(c, p.n), c.in[2].data, [&] { write_addend(c); }});
    }

    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (addend_ && c.in_grad[2]) addend_gradient(c);  // db += dY, summed over b's broadcast dims
        // dX += dY W^T, dW += X^T dY (dY^T X for times_transpose's W [n, k])
        Product<T> p = product(c);
        p.assign_dx = c.assigns(0);
        p.assign_dw = c.assigns(1);
        multiply_backward(p, c.out_grad.data, c.in_grad[0].data, c.in_grad[1].data);
    }

private:
    // The product as core/multiply.hpp reads it: x [positions of x..., m, k], W [k, n] (or [n, k])
    // per position of W, y [positions..., m, n], and the call's real rows and loop memory.
    template <class T>
    Product<T> product(const OpCall<T>& c) const {
        const View<const T>&x = c.in[0], &w = c.in[1];
        Product<T> p;
        p.x = x.data;
        p.w = w.data;
        p.y = c.out.data;
        p.k = x.dims[x.dims.rank - 1];
        p.m = x.sample_size() / p.k;
        p.n = w.sample_size() / p.k;
        p.transposed = transpose_;
        p.positions = leading(c.out.dims, c.out.dyn);
        p.x_positions = leading(x.dims, x.dyn);
        p.w_positions = leading(w.dims, w.dyn);
        p.padded = c.padded;
        p.real = c.rows;
        p.loop = c.memory;
        p.scratch = c.work;
        return p;
    }
    static Dims leading(const Dims& dims, std::size_t count) {
        Dims out;
        for (std::size_t i = 0; i < count; ++i) out.push_back(dims[i]);
        return out;
    }

    // The addend as one bias row [n] for every output row, a row per output row, or another shape.
    // A row is b of n values whose dims (leading 1s aside) are the output's last ones: b [2, 1, 3]
    // against an output [2, 2, 3] has n = 6 values too, but broadcasts along the middle axis.
    template <class T>
    static AddendForm addend_form(const OpCall<T>& c, std::size_t n) {
        const View<const T>& b = c.in[2];
        if (b.dyn == 0 && b.size() == n && ends_the_output(b, c.out)) return AddendForm::row;
        if (b.dyn == c.out.dyn && b.sample_size() == c.out.sample_size()) return AddendForm::rows;
        return AddendForm::broadcast;
    }
    template <class T>
    static bool ends_the_output(const View<const T>& b, const View<T>& out) {
        std::size_t first = 0;
        while (first < b.dims.rank && b.dims[first] == 1) ++first;
        const std::size_t rank = b.dims.rank - first;
        if (rank > out.sample_rank()) return false;
        for (std::size_t i = 0; i < rank; ++i)
            if (b.dims[first + i] != out.dims[out.dims.rank - rank + i]) return false;
        return true;
    }
    // The output := the addend, broadcast (the product is then added to it).
    template <class T>
    static void write_addend(const OpCall<T>& c) {
        const auto plan = detail::plan_broadcast<const T, 1>(c.out.dims, c.out.dyn, {c.in[2]});
        const T* b = c.in[2].data;
        detail::for_each_run(plan, [&](std::size_t o, const std::array<std::size_t, 1>& base, std::size_t n,
                                       const std::array<std::size_t, 1>& step) {
            T* y = c.out.data + o;
            if (step[0] == 1)
                std::copy_n(b + base[0], n, y);
            else
                for (std::size_t i = 0; i < n; ++i) y[i] = b[base[0] + i * step[0]];
        });
    }
    // d(addend) = the output gradient summed over the dims the addend was broadcast along.
    template <class T>
    static void addend_gradient(const OpCall<T>& c) {
        if (c.in_grad[2].data == c.out_grad.data) return;  // the executor aliased them: already there
        const std::size_t width = c.in[2].size(), per = c.out.sample_size();  // a position's elements
        if (width != 0 && per % width == 0 && addend_form(c, width) == AddendForm::row) {
            // A bias row: the rows of dY at the positions to compute (OpCall::rows) summed into it.
            T* gb = c.in_grad[2].data;
            c.for_each_row([&](std::size_t r) {
                for (const T *g = c.out_grad.data + r * per, *end = g + per; g != end; g += width)
                    for (std::size_t j = 0; j < width; ++j) gb[j] += g[j];
            });
            return;
        }
        const auto plan = detail::plan_broadcast<const T, 1>(c.out.dims, c.out.dyn, {detail::as_const(c.in_grad[2])});
        const T* g = c.out_grad.data;
        T* gb = c.in_grad[2].data;
        detail::for_each_run(plan, [&](std::size_t o, const std::array<std::size_t, 1>& base, std::size_t n,
                                       const std::array<std::size_t, 1>& step) {
            if (step[0] == 0) {
                T acc = 0;
                for (std::size_t i = 0; i < n; ++i) acc += g[o + i];
                gb[base[0]] += acc;
            } else {
                for (std::size_t i = 0; i < n; ++i) gb[base[0] + i * step[0]] += g[o + i];
            }
        });
    }

    bool transpose_, addend_;
};

}  // namespace

int plain_product_addends(const Op& op) {
    const auto* t = dynamic_cast<const Times*>(&op);
    return t && !t->transposed() ? t->addends() : -1;
}

Variable times(const Variable& x, const Variable& w, const std::string& name) {
    static const auto op = std::make_shared<const Times>(false, false);
    return Variable(apply_op(op, {x.node(), w.node()}, name));
}

Variable times_transpose(const Variable& a, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const Times>(true, false);
    return Variable(apply_op(op, {a.node(), b.node()}, name));
}

Variable affine(const Variable& x, const Variable& w, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const Times>(false, true);
    return Variable(apply_op(op, {x.node(), w.node(), b.node()}, name));
}

}  // namespace loom
