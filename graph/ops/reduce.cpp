// Reductions over static axes of the sample, and softmax / log_softmax along one. Every op here
// sees its input as [outer, r, inner]: `r` elements reduced (or normalized) with stride `inner`,
// where `outer` folds the dynamic positions and the sample axes before the reduced one. Reducing
// every static axis is the same with r = the sample size and inner = 1. Reduced axes stay with
// size 1, as in CNTK. All of these work on whole tensors or one time step alike.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/errors.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

// `axis` normalized against the sample rank, or the error naming op, axis and shapes.
std::size_t sample_axis(const std::string& op, int axis, std::span<const TypeInfo> in) {
    const std::size_t rank = in[0].shape.rank();
    const long a = axis < 0 ? static_cast<long>(rank) + axis : axis;
    if (a < 0 || a >= static_cast<long>(rank))
        shape_error(op, in,
                    "axis " + std::to_string(axis) + " is out of range for a sample of rank " + std::to_string(rank) +
                        " (use 0.." + std::to_string(rank) + "-1, or negative to count from the end)");
    return static_cast<std::size_t>(a);
}

struct Geometry {
    std::size_t outer = 1, r = 1, inner = 1;
};

// The [outer, r, inner] view of `v` for a reduction over sample axis `axis` (or all of them).
template <class T>
Geometry geometry(const View<T>& v, int axis) {
    Geometry g;
    const std::size_t rank = v.sample_rank();
    // The dynamic positions counted from the dims: rows() divides by the sample size, 0 for an
    // empty sample, whose reductions still have an output to write.
    for (std::size_t i = 0; i < v.dyn; ++i) g.outer *= v.dims[i];
    if (axis == all_static_axes) {
        g.r = v.sample_size();
        return g;
    }
    const std::size_t a = axis < 0 ? rank - static_cast<std::size_t>(-axis) : static_cast<std::size_t>(axis);
    for (std::size_t i = 0; i < a; ++i) g.outer *= v.dims[v.dyn + i];
    g.r = v.dims[v.dyn + a];
    for (std::size_t i = a + 1; i < rank; ++i) g.inner *= v.dims[v.dyn + i];
    return g;
}

// ---- reductions: y = f(x_0 .. x_{n-1}) over n elements `s` apart; d adds g * dy/dx_j ----

struct Sum {
    static constexpr const char* name = "reduce_sum";
    static constexpr bool reads_values = false;  // backward spreads the gradient only
    template <class T>
    static T f(const T* x, std::size_t n, std::size_t s) {
        T acc = 0;
        for (std::size_t j = 0; j < n; ++j) acc += x[j * s];
        return acc;
    }
    template <class T>
    static void d(const T*, std::size_t n, std::size_t s, T, T g, T* gx) {
        for (std::size_t j = 0; j < n; ++j) gx[j * s] += g;
    }
};

struct Mean {
    static constexpr const char* name = "reduce_mean";
    static constexpr bool reads_values = false;
    template <class T>
    static T f(const T* x, std::size_t n, std::size_t s) {
        return Sum::f(x, n, s) / static_cast<T>(n);
    }
    template <class T>
    static void d(const T*, std::size_t n, std::size_t s, T, T g, T* gx) {
        const T share = g / static_cast<T>(n);
        for (std::size_t j = 0; j < n; ++j) gx[j * s] += share;
    }
};

// Max and min send the gradient to the first element that attains the result, so a tie does not
// count twice.
template <bool Largest>
struct Extreme {
    static constexpr const char* name = Largest ? "reduce_max" : "reduce_min";
    static constexpr bool reads_values = true;
    template <class T>
    static T f(const T* x, std::size_t n, std::size_t s) {
        // Of no element: the identity, -inf for the largest and inf for the smallest (as
        // reduce_log_sum_exp of none is log 0 = -inf).
        if (n == 0) return Largest ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
        T best = x[0];
        for (std::size_t j = 1; j < n; ++j) best = Largest ? std::max(best, x[j * s]) : std::min(best, x[j * s]);
        return best;
    }
    template <class T>
    static void d(const T* x, std::size_t n, std::size_t s, T y, T g, T* gx) {
        for (std::size_t j = 0; j < n; ++j)
            if (x[j * s] == y) {
                gx[j * s] += g;
                return;
            }
    }
};

struct LogSumExp {
    static constexpr const char* name = "reduce_log_sum_exp";
    static constexpr bool reads_values = true;
    template <class T>
    static T f(const T* x, std::size_t n, std::size_t s) {
        const T m = Extreme<true>::f(x, n, s);
        if (m == -std::numeric_limits<T>::infinity() || m == std::numeric_limits<T>::infinity()) return m;
        T acc = 0;
        for (std::size_t j = 0; j < n; ++j) acc += std::exp(x[j * s] - m);
        return m + std::log(acc);
    }
    // dy/dx_j = softmax_j = exp(x_j - y); all -inf is the limit of equal arguments: 1/n each.
    template <class T>
    static void d(const T* x, std::size_t n, std::size_t s, T y, T g, T* gx) {
        if (y == -std::numeric_limits<T>::infinity()) return Mean::d(x, n, s, y, g, gx);
        for (std::size_t j = 0; j < n; ++j) gx[j * s] += g * std::exp(x[j * s] - y);
    }
};

template <class R>
class Reduce final : public OpBase<Reduce<R>> {
public:
    explicit Reduce(int axis) : axis_(axis) {}
    std::string name() const override { return R::name; }
    bool backward_reads_output() const override { return R::reads_values; }
    bool backward_reads_input(std::size_t) const override { return R::reads_values; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        std::vector<std::size_t> out(in[0].shape.begin(), in[0].shape.end());
        if (axis_ == all_static_axes) {
            std::fill(out.begin(), out.end(), std::size_t{1});
        } else {
            out[sample_axis(name(), axis_, in)] = 1;
        }
        return {Shape(out), in[0].axis};
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const Geometry g = geometry(c.in[0], axis_);
        const T* x = c.in[0].data;
        T* y = c.out.data;
        for (std::size_t o = 0; o < g.outer; ++o)
            for (std::size_t i = 0; i < g.inner; ++i)
                // An empty axis (r = 0) reads nothing: x may be null, and null plus an offset is undefined.
                y[o * g.inner + i] = R::f(g.r ? x + o * g.r * g.inner + i : x, g.r, g.inner);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        const Geometry g = geometry(c.in[0], axis_);
        if (!c.in_grad[0] || g.r == 0) return;  // an empty axis has no gradient to write
        const T *x = c.in[0].data, *y = c.out.data, *gy = c.out_grad.data;
        T* gx = c.in_grad[0].data;
        for (std::size_t o = 0; o < g.outer; ++o)
            for (std::size_t i = 0; i < g.inner; ++i) {
                const std::size_t k = o * g.inner + i, base = o * g.r * g.inner + i;
                // Sum and mean never look at x or y (which may have been freed).
                if constexpr (R::reads_values)
                    R::d(x + base, g.r, g.inner, y[k], gy[k], gx + base);
                else
                    R::d(static_cast<const T*>(nullptr), g.r, g.inner, T(0), gy[k], gx + base);
            }
    }

private:
    int axis_;
};

template <class R>
Variable reduce(const Variable& a, int axis, const std::string& name) {
    return Variable(apply_op(std::make_shared<const Reduce<R>>(axis), {a.node()}, name));
}

// ---- softmax and log_softmax along one axis, each with its own stable backward ----

class Softmax final : public OpBase<Softmax> {
public:
    Softmax(int axis, bool log) : axis_(axis), log_(log) {}
    std::string name() const override { return log_ ? "log_softmax" : "softmax"; }
    bool backward_reads_output() const override { return true; }  // both backwards use y only
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        if (axis_ != all_static_axes) sample_axis(name(), axis_, in);
        return in[0];
    }

    // y = (x - m) - log(sum) (log) or exp(x - m) / sum, sum = sum_j exp(x_j - m), m the max. Not
    // x - lse(x): lse = m + log(sum) rounds to m's precision, and in float a large m (1e4: an ulp of
    // 1e-3) would shift every output by that much.
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const Geometry g = geometry(c.in[0], axis_);
        for (std::size_t o = 0; o < g.outer; ++o)
            for (std::size_t i = 0; i < g.inner; ++i) {
                const std::size_t base = o * g.r * g.inner + i;
                const T* x = c.in[0].data + base;
                T* y = c.out.data + base;
                const T m = Extreme<true>::f(x, g.r, g.inner);
                if (std::isinf(m)) {  // all -inf, or an inf among them: lse's limits
                    const T lse = LogSumExp::f(x, g.r, g.inner);
                    for (std::size_t j = 0; j < g.r; ++j) {
                        const T v = x[j * g.inner] - lse;
                        y[j * g.inner] = log_ ? v : std::exp(v);
                    }
                    continue;
                }
                T sum = 0;
                for (std::size_t j = 0; j < g.r; ++j) sum += std::exp(x[j * g.inner] - m);
                const T log_sum = std::log(sum);
                for (std::size_t j = 0; j < g.r; ++j) {
                    const T shifted = x[j * g.inner] - m;
                    y[j * g.inner] = log_ ? shifted - log_sum : std::exp(shifted) / sum;
                }
            }
    }
    // softmax:     dx_j = y_j (g_j - sum_k g_k y_k)
    // log_softmax: dx_j = g_j - exp(y_j) sum_k g_k
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        const Geometry g = geometry(c.in[0], axis_);
        for (std::size_t o = 0; o < g.outer; ++o)
            for (std::size_t i = 0; i < g.inner; ++i) {
                const std::size_t base = o * g.r * g.inner + i;
                const T *y = c.out.data + base, *gy = c.out_grad.data + base;
                T* gx = c.in_grad[0].data + base;
                T acc = 0;
                for (std::size_t j = 0; j < g.r; ++j) acc += log_ ? gy[j * g.inner] : gy[j * g.inner] * y[j * g.inner];
                for (std::size_t j = 0; j < g.r; ++j) {
                    const std::size_t k = j * g.inner;
                    gx[k] += log_ ? gy[k] - std::exp(y[k]) * acc : y[k] * (gy[k] - acc);
                }
            }
    }

private:
    int axis_;
    bool log_;
};

}  // namespace

Variable reduce_sum(const Variable& a, int axis, const std::string& name) { return reduce<Sum>(a, axis, name); }
Variable reduce_mean(const Variable& a, int axis, const std::string& name) { return reduce<Mean>(a, axis, name); }
Variable reduce_max(const Variable& a, int axis, const std::string& name) {
    return reduce<Extreme<true>>(a, axis, name);
}
Variable reduce_min(const Variable& a, int axis, const std::string& name) {
    return reduce<Extreme<false>>(a, axis, name);
}
Variable reduce_log_sum_exp(const Variable& a, int axis, const std::string& name) {
    return reduce<LogSumExp>(a, axis, name);
}

Variable softmax(const Variable& a, int axis, const std::string& name) {
    return Variable(apply_op(std::make_shared<const Softmax>(axis, false), {a.node()}, name));
}
Variable log_softmax(const Variable& a, int axis, const std::string& name) {
    return Variable(apply_op(std::make_shared<const Softmax>(axis, true), {a.node()}, name));
}

}  // namespace loom
