// Element-wise ops. Each is a functor with its forward f and its derivative(s), written under it;
// the Unary/Binary templates supply shape rule, broadcasting and the accumulating backward.
#include <cmath>
#include <limits>

#include "core/errors.hpp"
#include "core/fast_math.hpp"
#include "graph/ops.hpp"
#include "graph/ops/broadcast.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

using detail::for_each_broadcast;
using detail::plan_broadcast;

// What an op's derivative reads: its operands (x; a and b) and its result (y; z). Backward loads
// only those, so the rest may be freed after forward (Op::backward_reads_*).
constexpr unsigned reads_x = 1, reads_y = 2;
constexpr unsigned reads_a = 1, reads_b = 2, reads_z = 4;

// run(begin, end) over [0, n), split among idle inter-op threads when n is large: for element-wise
// loops, where each element is computed alone, so that the values do not depend on the threads.
template <class Run>
void each_part(std::size_t n, Run&& run) {
    share_or_run(n, 64, 1, kShareElementWork, run);
}

// run(begin, end) over the elements of the output's rows to compute, in runs of consecutive rows:
// every element, or only the real rows of a padded sequence (OpCall::rows; the executor zeroes the
// padding's values, and its gradients are never read), split among idle inter-op threads as
// each_part splits. For operands laid out as the output.
template <class T, class Run>
void each_row_part(const OpCall<T>& c, Run&& run) {
    if (!c.padded) return each_part(c.out.size(), run);
    const std::size_t width = c.out.sample_size();
    const std::span<const std::size_t> rows = c.rows;
    share_or_run(rows.size(), 1, width, kShareElementWork, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end;) {
            std::size_t j = i + 1;
            while (j < end && rows[j] == rows[j - 1] + 1) ++j;
            run(rows[i] * width, (rows[j - 1] + 1) * width);
            i = j;
        }
    });
}

// ---- unary: y = f(x); derivative dy/dx from x and y ----

template <class F>
class Unary final : public OpBase<Unary<F>> {
public:
    std::string name() const override { return F::name; }
    TypeInfo infer(std::span<const TypeInfo> in) const override { return in[0]; }
    bool backward_reads_output() const override { return F::reads & reads_y; }
    bool backward_reads_input(std::size_t) const override { return F::reads & reads_x; }
    OpTraits traits() const override { return {.assigns_gradient = 1u}; }  // every row of dx computed

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const T* x = c.in[0].data;
        T* y = c.out.data;
        each_row_part(c, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) y[i] = F::f(x[i]);
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        // Only what the derivative uses is read: the other value may have been freed.
        const T *x = c.in[0].data, *y = c.out.data, *g = c.out_grad.data;
        T* gx = c.in_grad[0].data;
        c.store_gradient(0, [&](auto store) {
            each_row_part(c, [&](std::size_t begin, std::size_t end) {
                for (std::size_t i = begin; i < end; ++i) {
                    T xi = T(0), yi = T(0);
                    if constexpr ((F::reads & reads_x) != 0) xi = x[i];
                    if constexpr ((F::reads & reads_y) != 0) yi = y[i];
                    store(gx[i], detail::times_upstream(g[i], F::d(xi, yi)));
                }
            });
        });
    }
};

#define LOOM_UNARY(Name, str, reads_, forward, derivative)       \
    struct Name {                                                \
        static constexpr const char* name = str;                 \
        static constexpr unsigned reads = reads_;                \
        template <class T>                                       \
        static T f(T x) {                                        \
            return forward;                                      \
        }                                                        \
        template <class T>                                       \
        static T d([[maybe_unused]] T x, [[maybe_unused]] T y) { \
            return derivative;                                   \
        }                                                        \
    };

// exp, tanh and sigmoid use core/fast_math.hpp: vectorizable kernels for float, libm for double.
LOOM_UNARY(Negate, "negate", 0, -x, T(-1))
LOOM_UNARY(Exp, "exp", reads_y, fast::exp(x), y)
LOOM_UNARY(Log, "log", reads_x, std::log(x), T(1) / x)
LOOM_UNARY(Sqrt, "sqrt", reads_y, std::sqrt(x), T(0.5) / y)
LOOM_UNARY(Square, "square", reads_x, x* x, T(2) * x)
LOOM_UNARY(Abs, "abs", reads_x, std::abs(x), x > 0 ? T(1) : (x < 0 ? T(-1) : T(0)))
LOOM_UNARY(Sin, "sin", reads_x, std::sin(x), std::cos(x))
LOOM_UNARY(Cos, "cos", reads_x, std::cos(x), -std::sin(x))
LOOM_UNARY(Tanh, "tanh", reads_y, fast::tanh(x), T(1) - y * y)
LOOM_UNARY(Sigmoid, "sigmoid", reads_y, fast::sigmoid(x), y*(T(1) - y))
LOOM_UNARY(Relu, "relu", reads_x, x > 0 ? x : T(0), x > 0 ? T(1) : T(0))
// GELU as PyTorch's nn.GELU() (the exact form): x Phi(x), its derivative Phi(x) + x phi(x) with
// phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
LOOM_UNARY(Gelu, "gelu", reads_x, x* fast::normal_cdf(x),
           fast::normal_cdf(x) + x * T(0.39894228040143267794) * fast::exp(T(-0.5) * x * x))
LOOM_UNARY(Softplus, "softplus", reads_x, (x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x))),
           fast::sigmoid(x))
LOOM_UNARY(Reciprocal, "reciprocal", reads_y, T(1) / x, -y* y)
LOOM_UNARY(Identity, "identity", 0, x, T(1))
LOOM_UNARY(StopGradient, "stop_gradient", 0, x, T(0))
// Steps: piecewise constant, so their gradient is 0 (also at the jumps, as CNTK's). round takes
// halves up (CNTK's floor(x + 0.5)), not to even as numpy.round.
LOOM_UNARY(Floor, "floor", 0, std::floor(x), T(0))
LOOM_UNARY(Ceil, "ceil", 0, std::ceil(x), T(0))
LOOM_UNARY(Round, "round", 0, std::floor(x + T(0.5)), T(0))
#undef LOOM_UNARY

template <class F>
Variable unary(const Variable& a, const std::string& name) {
    static const auto op = std::make_shared<const Unary<F>>();
    return Variable(apply_op(op, {a.node()}, name));
}

// ---- binary with broadcasting: z = f(a, b); partials from a, b and z ----

// What binary_kernels() (graph/ops/kinds.hpp) reads of every Binary<F>.
class HasKernels {
public:
    virtual ~HasKernels() = default;
    virtual const BinaryKernels* kernels() const = 0;
};

template <class F>
class Binary final : public OpBase<Binary<F>>, public HasKernels {
public:
    std::string name() const override { return F::name; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        return {broadcast_shapes(F::name, in), unify_axes(F::name, in)};
    }
    bool backward_reads_output() const override { return F::reads & reads_z; }
    bool backward_reads_input(std::size_t i) const override { return F::reads & (i == 0 ? reads_a : reads_b); }
    OpTraits traits() const override { return {.assigns_gradient = F::differentiable ? 3u : 0u}; }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const T *a0 = c.in[0].data, *b0 = c.in[1].data;
        T* z0 = c.out.data;
        const std::size_t size = c.out.size();
        if (c.in[0].size() == size && c.in[1].size() == size) {  // no broadcast: the rows to compute, shared
            each_row_part(c, [&](std::size_t begin, std::size_t end) {
                for (std::size_t i = begin; i < end; ++i) z0[i] = F::f(a0[i], b0[i]);
            });
            return;
        }
        const auto plan = plan_broadcast<const T, 2>(c.out.dims, c.out.dyn, {c.in[0], c.in[1]});
        detail::for_each_run(plan, [&](std::size_t o, const std::array<std::size_t, 2>& base, std::size_t n,
                                       const std::array<std::size_t, 2>& step) {
            const T *a = a0 + base[0], *b = b0 + base[1];
            T* z = z0 + o;
            // The common strides get loops the compiler can vectorize.
            if (step[0] == 1 && step[1] == 1)
                for (std::size_t i = 0; i < n; ++i) z[i] = F::f(a[i], b[i]);
            else if (step[0] == 1 && step[1] == 0)
                for (std::size_t i = 0; i < n; ++i) z[i] = F::f(a[i], b[0]);
            else if (step[0] == 0 && step[1] == 1)
                for (std::size_t i = 0; i < n; ++i) z[i] = F::f(a[0], b[i]);
            else
                for (std::size_t i = 0; i < n; ++i) z[i] = F::f(a[i * step[0]], b[i * step[1]]);
        });
    }

    template <class T>
    void bwd(const OpCall<T>& c) const {
        if constexpr (F::differentiable) {
            const auto plan = plan_broadcast<const T, 2>(c.out.dims, c.out.dyn, {c.in[0], c.in[1]});
            const T *a0 = c.in[0].data, *b0 = c.in[1].data, *z0 = c.out.data, *g0 = c.out_grad.data;
            // The loop over operand `which`'s gradient, each element's term given to store(element, term).
            auto run = [&](T* grad, std::size_t which, auto partial, auto store) {
                detail::for_each_run(plan, [&](std::size_t o, const std::array<std::size_t, 2>& base, std::size_t n,
                                               const std::array<std::size_t, 2>& step) {
                    // Values the derivative does not read are never touched (they may be freed).
                    const T *a = nullptr, *b = nullptr, *z = nullptr, *g = g0 + o;
                    if constexpr ((F::reads & reads_a) != 0) a = a0 + base[0];
                    if constexpr ((F::reads & reads_b) != 0) b = b0 + base[1];
                    if constexpr ((F::reads & reads_z) != 0) z = z0 + o;
                    auto va = [&](std::size_t i) {
                        if constexpr ((F::reads & reads_a) != 0) return a[i];
                        return T(0);
                    };
                    auto vb = [&](std::size_t i) {
                        if constexpr ((F::reads & reads_b) != 0) return b[i];
                        return T(0);
                    };
                    auto vz = [&](std::size_t i) {
                        if constexpr ((F::reads & reads_z) != 0) return z[i];
                        return T(0);
                    };
                    const std::size_t sa = step[0], sb = step[1];
                    T* dst = grad + base[which];
                    using detail::times_upstream;
                    if (step[which] == 0) {
                        T acc = 0;
                        for (std::size_t i = 0; i < n; ++i)
                            acc += times_upstream(g[i], partial(va(i * sa), vb(i * sb), vz(i)));
                        store(dst[0], acc);
                    } else if (sa == 1 && sb == 1) {
                        for (std::size_t i = 0; i < n; ++i)
                            store(dst[i], times_upstream(g[i], partial(va(i), vb(i), vz(i))));
                    } else {
                        const std::size_t sd = step[which];
                        for (std::size_t i = 0; i < n; ++i)
                            store(dst[i * sd], times_upstream(g[i], partial(va(i * sa), vb(i * sb), vz(i))));
                    }
                });
            };
            // One pass per operand; a broadcast operand (step 0) sums its run locally first. An
            // operand of the output's size is reached once per element, so its gradient can be
            // written where it is to be assigned; a broadcast one is zeroed first and added into.
            auto pass = [&](T* grad, std::size_t which, auto partial) {
                if (!grad) return;
                if (c.in[which].size() == c.out.size())
                    return c.store_gradient(which, [&](auto store) { run(grad, which, partial, store); });
                if (c.assigns(which)) std::fill_n(grad, c.in[which].size(), T(0));
                run(grad, which, partial, [](T& to, T term) { to += term; });
            };
            const bool broadcast = c.in[0].size() != c.out.size() || c.in[1].size() != c.out.size();
            auto da = [](T a, T b, T z) { return F::da(a, b, z); };
            auto db = [](T a, T b, T z) { return F::db(a, b, z); };
            if (broadcast) {
                pass(c.in_grad[0].data, 0, da);
                pass(c.in_grad[1].data, 1, db);
            } else {
                same_shape_gradient(c, 0, da);
                same_shape_gradient(c, 1, db);
            }
        }
    }

    // No broadcast: the rows to compute only, as forward, for an operand laid out as the output;
    // every element for one of the same size without its dynamic axes (a static tensor shaped as
    // the batch), whose gradient has no padding to be zeroed later.
    template <class T, class Partial>
    static void same_shape_gradient(const OpCall<T>& c, std::size_t which, Partial partial) {
        T* grad = c.in_grad[which].data;
        if (!grad) return;
        const T *a0 = c.in[0].data, *b0 = c.in[1].data, *z0 = c.out.data, *g0 = c.out_grad.data;
        c.store_gradient(which, [&](auto store) {
            const auto elements = [&](std::size_t begin, std::size_t end) {
                for (std::size_t i = begin; i < end; ++i) {
                    T a = T(0), b = T(0), z = T(0);
                    if constexpr ((F::reads & reads_a) != 0) a = a0[i];
                    if constexpr ((F::reads & reads_b) != 0) b = b0[i];
                    if constexpr ((F::reads & reads_z) != 0) z = z0[i];
                    store(grad[i], detail::times_upstream(g0[i], partial(a, b, z)));
                }
            };
            if (c.in[which].dyn == c.out.dyn)
                each_row_part(c, elements);
            else
                each_part(c.out.size(), elements);
        });
    }

    const BinaryKernels* kernels() const override {
        if constexpr (!F::differentiable) {
            return nullptr;
        } else {
            static const BinaryKernels k{F::name,
                                         {&F::template f<float>, &F::template da<float>, &F::template db<float>},
                                         {&F::template f<double>, &F::template da<double>, &F::template db<double>}};
            return &k;
        }
    }
};

#define LOOM_BINARY(Name, str, reads_, forward, da_, db_)                               \
    struct Name {                                                                       \
        static constexpr const char* name = str;                                        \
        static constexpr unsigned reads = reads_;                                       \
        static constexpr bool differentiable = true;                                    \
        template <class T>                                                              \
        static T f(T a, T b) {                                                          \
            return forward;                                                             \
        }                                                                               \
        template <class T>                                                              \
        static T da([[maybe_unused]] T a, [[maybe_unused]] T b, [[maybe_unused]] T z) { \
            return da_;                                                                 \
        }                                                                               \
        template <class T>                                                              \
        static T db([[maybe_unused]] T a, [[maybe_unused]] T b, [[maybe_unused]] T z) { \
            return db_;                                                                 \
        }                                                                               \
    };

// Comparisons are flat: no gradient flows through them.
#define LOOM_COMPARISON(Name, str, test)              \
    struct Name {                                     \
        static constexpr const char* name = str;      \
        static constexpr bool differentiable = false; \
        static constexpr unsigned reads = 0;          \
        template <class T>                            \
        static T f(T a, T b) {                        \
            return (test) ? T(1) : T(0);              \
        }                                             \
    };

template <class T>
T log_add_exp_f(T a, T b) {
    const T m = std::max(a, b);
    if (m == -std::numeric_limits<T>::infinity()) return m;
    return m + std::log1p(std::exp(-std::abs(a - b)));
}
// d/da log(e^a + e^b) = e^(a - z); when both are -inf the limit of equal arguments, 1/2.
template <class T>
T log_add_exp_d(T a, T z) {
    if (z == -std::numeric_limits<T>::infinity()) return T(0.5);
    return std::exp(a - z);
}

LOOM_BINARY(Plus, "plus", 0, a + b, T(1), T(1))
LOOM_BINARY(Minus, "minus", 0, a - b, T(1), T(-1))
LOOM_BINARY(ElementTimes, "element_times", reads_a | reads_b, a* b, b, a)
LOOM_BINARY(ElementDivide, "element_divide", reads_a | reads_b, a / b, T(1) / b, -a / (b * b))
LOOM_BINARY(LogAddExp, "log_add_exp", reads_a | reads_b | reads_z, log_add_exp_f(a, b), log_add_exp_d(a, z),
            log_add_exp_d(b, z))
// At a tie the gradient goes to the first operand, as in a max-pooling argmax.
LOOM_BINARY(ElementMax, "element_max", reads_a | reads_b, std::max(a, b), a >= b ? T(1) : T(0), a >= b ? T(0) : T(1))
LOOM_BINARY(ElementMin, "element_min", reads_a | reads_b, std::min(a, b), a <= b ? T(1) : T(0), a <= b ? T(0) : T(1))
LOOM_COMPARISON(Greater, "greater", a > b)
LOOM_COMPARISON(Less, "less", a < b)
LOOM_COMPARISON(Equal, "equal", a == b)
LOOM_COMPARISON(GreaterEqual, "greater_equal", a >= b)
LOOM_COMPARISON(LessEqual, "less_equal", a <= b)
LOOM_COMPARISON(NotEqual, "not_equal", a != b)
#undef LOOM_BINARY
#undef LOOM_COMPARISON

template <class F>
Variable binary(const Variable& a, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const Binary<F>>();
    return Variable(apply_op(op, {a.node(), b.node()}, name));
}

// ---- ternary ----

// element_select(cond, a, b): a where cond != 0, else b. The gradient goes to the chosen operand.
class ElementSelect final : public OpBase<ElementSelect> {
public:
    std::string name() const override { return "element_select"; }
    OpTraits traits() const override { return {.element_select = true}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        return {broadcast_shapes(name(), in), unify_axes(name(), in)};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const auto plan = plan_broadcast<const T, 3>(c.out.dims, c.out.dyn, {c.in[0], c.in[1], c.in[2]});
        const T *cond = c.in[0].data, *a = c.in[1].data, *b = c.in[2].data;
        T* z = c.out.data;
        for_each_broadcast(plan, [&](std::size_t i, const std::array<std::size_t, 3>& k) {
            z[i] = cond[k[0]] != T(0) ? a[k[1]] : b[k[2]];
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        T *ga = c.in_grad[1].data, *gb = c.in_grad[2].data;
        if (!ga && !gb) return;
        const auto plan = plan_broadcast<const T, 3>(c.out.dims, c.out.dyn, {c.in[0], c.in[1], c.in[2]});
        const T *cond = c.in[0].data, *g = c.out_grad.data;
        for_each_broadcast(plan, [&](std::size_t i, const std::array<std::size_t, 3>& k) {
            if (cond[k[0]] != T(0)) {
                if (ga) ga[k[1]] += g[i];
            } else if (gb) {
                gb[k[2]] += g[i];
            }
        });
    }
};

// clip(a, lo, hi): the gradient passes where lo <= a <= hi, and to lo / hi where they bind.
class Clip final : public OpBase<Clip> {
public:
    std::string name() const override { return "clip"; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        return {broadcast_shapes(name(), in), unify_axes(name(), in)};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const auto plan = plan_broadcast<const T, 3>(c.out.dims, c.out.dyn, {c.in[0], c.in[1], c.in[2]});
        const T *a = c.in[0].data, *lo = c.in[1].data, *hi = c.in[2].data;
        T* z = c.out.data;
        for_each_broadcast(plan, [&](std::size_t i, const std::array<std::size_t, 3>& k) {
            z[i] = std::min(std::max(a[k[0]], lo[k[1]]), hi[k[2]]);
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        T *ga = c.in_grad[0].data, *glo = c.in_grad[1].data, *ghi = c.in_grad[2].data;
        if (!ga && !glo && !ghi) return;
        const auto plan = plan_broadcast<const T, 3>(c.out.dims, c.out.dyn, {c.in[0], c.in[1], c.in[2]});
        const T *a = c.in[0].data, *lo = c.in[1].data, *hi = c.in[2].data, *g = c.out_grad.data;
        for_each_broadcast(plan, [&](std::size_t i, const std::array<std::size_t, 3>& k) {
            const T x = a[k[0]];
            if (x > hi[k[2]]) {
                if (ghi) ghi[k[2]] += g[i];
            } else if (x < lo[k[1]]) {
                if (glo) glo[k[1]] += g[i];
            } else if (ga) {
                ga[k[0]] += g[i];
            }
        });
    }
};

}  // namespace

Variable plus(const Variable& a, const Variable& b, const std::string& name) { return binary<Plus>(a, b, name); }
Variable minus(const Variable& a, const Variable& b, const std::string& name) { return binary<Minus>(a, b, name); }
Variable element_times(const Variable& a, const Variable& b, const std::string& name) {
    return binary<ElementTimes>(a, b, name);
}
Variable element_divide(const Variable& a, const Variable& b, const std::string& name) {
    return binary<ElementDivide>(a, b, name);
}
Variable log_add_exp(const Variable& a, const Variable& b, const std::string& name) {
    return binary<LogAddExp>(a, b, name);
}
Variable element_max(const Variable& a, const Variable& b, const std::string& name) {
    return binary<ElementMax>(a, b, name);
}
Variable element_min(const Variable& a, const Variable& b, const std::string& name) {
    return binary<ElementMin>(a, b, name);
}
Variable greater(const Variable& a, const Variable& b, const std::string& name) { return binary<Greater>(a, b, name); }
Variable less(const Variable& a, const Variable& b, const std::string& name) { return binary<Less>(a, b, name); }
Variable equal(const Variable& a, const Variable& b, const std::string& name) { return binary<Equal>(a, b, name); }
Variable greater_equal(const Variable& a, const Variable& b, const std::string& name) {
    return binary<GreaterEqual>(a, b, name);
}
Variable less_equal(const Variable& a, const Variable& b, const std::string& name) {
    return binary<LessEqual>(a, b, name);
}
Variable not_equal(const Variable& a, const Variable& b, const std::string& name) {
    return binary<NotEqual>(a, b, name);
}

const BinaryKernels* binary_kernels(const Op& op) {
    const auto* b = dynamic_cast<const HasKernels*>(&op);
    return b ? b->kernels() : nullptr;
}

Variable element_select(const Variable& cond, const Variable& a, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const ElementSelect>();
    return Variable(apply_op(op, {cond.node(), a.node(), b.node()}, name));
}
Variable clip(const Variable& a, const Variable& lo, const Variable& hi, const std::string& name) {
    static const auto op = std::make_shared<const Clip>();
    return Variable(apply_op(op, {a.node(), lo.node(), hi.node()}, name));
}

Variable negate(const Variable& a, const std::string& name) { return unary<Negate>(a, name); }
Variable exp(const Variable& a, const std::string& name) { return unary<Exp>(a, name); }
Variable log(const Variable& a, const std::string& name) { return unary<Log>(a, name); }
Variable sqrt(const Variable& a, const std::string& name) { return unary<Sqrt>(a, name); }
Variable square(const Variable& a, const std::string& name) { return unary<Square>(a, name); }
Variable abs(const Variable& a, const std::string& name) { return unary<Abs>(a, name); }
Variable sin(const Variable& a, const std::string& name) { return unary<Sin>(a, name); }
Variable cos(const Variable& a, const std::string& name) { return unary<Cos>(a, name); }
Variable tanh(const Variable& a, const std::string& name) { return unary<Tanh>(a, name); }
Variable sigmoid(const Variable& a, const std::string& name) { return unary<Sigmoid>(a, name); }
Variable relu(const Variable& a, const std::string& name) { return unary<Relu>(a, name); }
Variable gelu(const Variable& a, const std::string& name) { return unary<Gelu>(a, name); }
Variable softplus(const Variable& a, const std::string& name) { return unary<Softplus>(a, name); }
Variable reciprocal(const Variable& a, const std::string& name) { return unary<Reciprocal>(a, name); }
Variable identity(const Variable& a, const std::string& name) { return unary<Identity>(a, name); }
Variable stop_gradient(const Variable& a, const std::string& name) { return unary<StopGradient>(a, name); }
Variable floor(const Variable& a, const std::string& name) { return unary<Floor>(a, name); }
Variable ceil(const Variable& a, const std::string& name) { return unary<Ceil>(a, name); }
Variable round(const Variable& a, const std::string& name) { return unary<Round>(a, name); }

Variable operator+(const Variable& a, const Variable& b) { return plus(a, b); }
Variable operator-(const Variable& a, const Variable& b) { return minus(a, b); }
Variable operator*(const Variable& a, const Variable& b) { return element_times(a, b); }
Variable operator/(const Variable& a, const Variable& b) { return element_divide(a, b); }
Variable operator-(const Variable& a) { return negate(a); }

}  // namespace loom
