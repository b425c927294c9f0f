// Matrix products. times(x, W): x [a..., k] with W [k, m...] gives [a..., m...]; times_transpose(a, b)
// multiplies by b's transpose: a [..., k], b [m, k] gives [..., m]. With a static right operand
// every row of every time step goes through one GEMM; with a dynamic one, one GEMM per item.
#include "core/errors.hpp"
#include "core/gemm.hpp"
#include "graph/ops.hpp"
#include "graph/ops/broadcast.hpp"

namespace loom {

namespace {

class Times final : public OpBase<Times> {
public:
    explicit Times(bool transpose_right) : transpose_(transpose_right) {}
    std::string name() const override { return transpose_ ? "times_transpose" : "times"; }

    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const Shape &x = in[0].shape, &w = in[1].shape;
        if (x.rank() == 0 || w.rank() == 0) shape_error(name(), in, "both operands need at least one axis");
        if (transpose_ && w.rank() != 2) shape_error(name(), in, "the right operand must be a matrix [m, k]");
        const std::size_t k = transpose_ ? w[1] : w[0];
        if (x[x.rank() - 1] != k)
            shape_error(name(), in,
                        "the last axis of the left operand (" + std::to_string(x[x.rank() - 1]) +
                            ") must match the " + (transpose_ ? "last" : "first") + " axis of the right (" +
                            std::to_string(k) + ")");
        std::vector<std::size_t> out(x.begin(), x.end() - 1);
        if (transpose_)
            out.push_back(w[0]);
        else
            out.insert(out.end(), w.begin() + 1, w.end());
        return {Shape(out), unify_axes(name(), in)};
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        for_each_product(c, [&](std::size_t m, std::size_t n, std::size_t k, const T* x, const T* w, T* y) {
            gemm(false, transpose_, m, n, k, T(1), x, k, w, transpose_ ? k : n, T(0), y, n);
        });
    }

    template <class T>
    void bwd(const OpCall<T>& c) const {
        const View<T>&gx = c.in_grad[0], &gw = c.in_grad[1];
        const T* g0 = c.out_grad.data;
        const T* y0 = c.out.data;
        for_each_product(c, [&](std::size_t m, std::size_t n, std::size_t k, const T* x, const T* w, T* y) {
            const T* g = g0 + (y - y0);
            if (gx) {  // dX[m,k] += dY[m,n] * W^T  (W is [k,n], or [n,k] when transposed)
                T* dx = gx.data + (x - c.in[0].data);
                gemm(false, !transpose_, m, k, n, T(1), g, n, w, transpose_ ? k : n, T(1), dx, k);
            }
            if (gw) {
                T* dw = gw.data + (w - c.in[1].data);
                if (transpose_)  // dW[n,k] += dY^T X
                    gemm(true, false, n, k, m, T(1), g, n, x, k, T(1), dw, k);
                else  // dW[k,n] += X^T dY
                    gemm(true, false, k, n, m, T(1), x, k, g, n, T(1), dw, n);
            }
        });
    }

private:
    // Calls f(m, n, k, x, w, y) for each product: once when the right operand is static, else once
    // per dynamic position (with the dynamic dims broadcast between the operands).
    template <class T, class F>
    void for_each_product(const OpCall<T>& c, F&& f) const {
        const View<const T>&x = c.in[0], &w = c.in[1];
        const std::size_t k = x.dims[x.dims.rank - 1];
        const std::size_t n = w.sample_size() / k;
        if (w.dyn == 0) {
            f(x.size() / k, n, k, x.data, w.data, const_cast<T*>(c.out.data));
            return;
        }
        // One product per dynamic position of the output; rows per position come from x's sample.
        const std::size_t m = x.sample_size() / k;
        Dims pos;
        for (std::size_t i = 0; i < c.out.dyn; ++i) pos.push_back(c.out.dims[i]);
        View<const T> xr{x.data, {}, x.dyn}, wr{w.data, {}, w.dyn};
        for (std::size_t i = 0; i < x.dyn; ++i) xr.dims.push_back(x.dims[i]);
        for (std::size_t i = 0; i < w.dyn; ++i) wr.dims.push_back(w.dims[i]);
        const auto plan = detail::plan_broadcast<const T, 2>(pos, pos.rank, {xr, wr});
        T* y = const_cast<T*>(c.out.data);
        const std::size_t ys = c.out.sample_size(), xs = x.sample_size(), ws = w.sample_size();
        detail::for_each_broadcast(plan, [&](std::size_t p, const std::array<std::size_t, 2>& idx) {
            f(m, n, k, x.data + idx[0] * xs, w.data + idx[1] * ws, y + p * ys);
        });
    }

    bool transpose_;
};

}  // namespace

Variable times(const Variable& x, const Variable& w, const std::string& name) {
    static const auto op = std::make_shared<const Times>(false);
    return Variable(apply_op(op, {x.node(), w.node()}, name));
}

Variable times_transpose(const Variable& a, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const Times>(true);
    return Variable(apply_op(op, {a.node(), b.node()}, name));
}

}  // namespace loom
