// Losses and similarities: each reduces the sample to shape [1], per item.
#include <cmath>

#include "core/errors.hpp"
#include "graph/ops.hpp"
#include "graph/ops/broadcast.hpp"

namespace loom {

namespace {

// Both operands' rows (one sample each) matched up over the dynamic axes, which may broadcast.
template <class T, class F>
void for_each_row_pair(const OpCall<T>& c, F&& f) {
    Dims pos;
    for (std::size_t i = 0; i < c.out.dyn; ++i) pos.push_back(c.out.dims[i]);
    auto rows_of = [](const View<const T>& v) {
        View<const T> r{v.data, {}, v.dyn};
        for (std::size_t i = 0; i < v.dyn; ++i) r.dims.push_back(v.dims[i]);
        return r;
    };
    const auto plan = detail::plan_broadcast<const T, 2>(pos, pos.rank, {rows_of(c.in[0]), rows_of(c.in[1])});
    detail::for_each_broadcast(plan, [&](std::size_t r, const std::array<std::size_t, 2>& k) { f(r, k[0], k[1]); });
}

TypeInfo pairwise_type(const std::string& op, std::span<const TypeInfo> in) {
    if (in[0].shape != in[1].shape) shape_error(op, in, "both operands must have the same shape");
    return {Shape{1}, unify_axes(op, in)};
}

// A loss over matching rows: Derived::row(a, b, d) gives the value of one item and
// Derived::grad(a, b, d, y, g, ga, gb) adds its gradients (ga / gb may be null).
template <class Derived>
class RowLoss : public OpBase<Derived> {
public:
    TypeInfo infer(std::span<const TypeInfo> in) const override { return pairwise_type(this->name(), in); }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t d = c.in[0].sample_size();
        for_each_row_pair(c, [&](std::size_t r, std::size_t ia, std::size_t ib) {
            c.out.data[r] = Derived::row(c.in[0].data + ia * d, c.in[1].data + ib * d, d);
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        T *ga = c.in_grad[0].data, *gb = c.in_grad[1].data;
        if (!ga && !gb) return;
        const std::size_t d = c.in[0].sample_size();
        for_each_row_pair(c, [&](std::size_t r, std::size_t ia, std::size_t ib) {
            // A row whose loss gradient is zero (padding, an unused item) contributes nothing, even
            // where its derivative is infinite (log 0): see detail::times_upstream.
            if (c.out_grad.data[r] == T(0)) return;
            Derived::grad(c.in[0].data + ia * d, c.in[1].data + ib * d, d, c.out.data[r], c.out_grad.data[r],
                          ga ? ga + ia * d : nullptr, gb ? gb + ib * d : nullptr);
        });
    }
};

// cosine_distance(a, b) = a.b / (|a| |b|): the cosine similarity, as CNTK names it.
// dy/da = b / (|a||b|) - y a / |a|^2, and symmetrically for b.
class CosineDistance final : public RowLoss<CosineDistance> {
public:
    std::string name() const override { return "cosine_distance"; }
    template <class T>
    static T row(const T* a, const T* b, std::size_t d) {
        T ab = 0, aa = 0, bb = 0;
        for (std::size_t j = 0; j < d; ++j) {
            ab += a[j] * b[j];
            aa += a[j] * a[j];
            bb += b[j] * b[j];
        }
        return ab / (norm(aa) * norm(bb));
    }
    template <class T>
    static void grad(const T* a, const T* b, std::size_t d, T y, T g, T* ga, T* gb) {
        T aa = 0, bb = 0;
        for (std::size_t j = 0; j < d; ++j) {
            aa += a[j] * a[j];
            bb += b[j] * b[j];
        }
        const T na = norm(aa), nb = norm(bb);
        for (std::size_t j = 0; j < d; ++j) {
            if (ga) ga[j] += g * (b[j] / (na * nb) - y * a[j] / (na * na));
            if (gb) gb[j] += g * (a[j] / (na * nb) - y * b[j] / (nb * nb));
        }
    }

private:
    // A zero vector has no direction; a tiny floor keeps the result finite (0) instead of NaN.
    template <class T>
    static T norm(T sq) {
        return std::sqrt(std::max(sq, T(1e-24)));
    }
};

// squared_error(a, b) = sum_j (a_j - b_j)^2.
class SquaredError final : public RowLoss<SquaredError> {
public:
    std::string name() const override { return "squared_error"; }
    template <class T>
    static T row(const T* a, const T* b, std::size_t d) {
        T acc = 0;
        for (std::size_t j = 0; j < d; ++j) acc += (a[j] - b[j]) * (a[j] - b[j]);
        return acc;
    }
    template <class T>
    static void grad(const T* a, const T* b, std::size_t d, T, T g, T* ga, T* gb) {
        for (std::size_t j = 0; j < d; ++j) {
            const T v = T(2) * g * (a[j] - b[j]);
            if (ga) ga[j] += v;
            if (gb) gb[j] -= v;
        }
    }
};

// binary_cross_entropy(p, y) = -sum_j (y_j log p_j + (1 - y_j) log(1 - p_j)), as CNTK's
// binary_cross_entropy (p is a probability, typically a sigmoid's output).
class BinaryCrossEntropy final : public RowLoss<BinaryCrossEntropy> {
public:
    std::string name() const override { return "binary_cross_entropy"; }
    template <class T>
    static T row(const T* p, const T* y, std::size_t d) {
        T acc = 0;
        for (std::size_t j = 0; j < d; ++j) acc -= y[j] * std::log(p[j]) + (T(1) - y[j]) * std::log(T(1) - p[j]);
        return acc;
    }
    template <class T>
    static void grad(const T* p, const T* y, std::size_t d, T, T g, T* gp, T* gy) {
        for (std::size_t j = 0; j < d; ++j) {
            if (gp) gp[j] += g * ((T(1) - y[j]) / (T(1) - p[j]) - y[j] / p[j]);
            if (gy) gy[j] += g * (std::log(T(1) - p[j]) - std::log(p[j]));
        }
    }
};

template <class T>
T log_sum_exp(const T* z, std::size_t d) {
    T m = z[0];
    for (std::size_t j = 1; j < d; ++j) m = std::max(m, z[j]);
    if (std::isinf(m)) return m;
    T acc = 0;
    for (std::size_t j = 0; j < d; ++j) acc += std::exp(z[j] - m);
    return m + std::log(acc);
}

// cross_entropy_with_softmax(z, y) = -sum_j y_j log softmax(z)_j = sum(y) lse(z) - y.z, as CNTK
// defines it; for labels that sum to 1 (one-hot, or a distribution) that is lse(z) - y.z.
class CrossEntropyWithSoftmax final : public RowLoss<CrossEntropyWithSoftmax> {
public:
    std::string name() const override { return "cross_entropy_with_softmax"; }
    template <class T>
    static T row(const T* z, const T* y, std::size_t d) {
        const T lse = log_sum_exp(z, d);
        T acc = 0;
        for (std::size_t j = 0; j < d; ++j)
            if (y[j] != T(0)) acc -= y[j] * (z[j] - lse);  // 0 * (-inf) would be NaN
        return acc;
    }
    // dz_j = sum(y) softmax_j - y_j;  dy_j = -(z_j - lse)
    template <class T>
    static void grad(const T* z, const T* y, std::size_t d, T, T g, T* gz, T* gy) {
        const T lse = log_sum_exp(z, d);
        T ysum = 0;
        for (std::size_t j = 0; j < d; ++j) ysum += y[j];
        for (std::size_t j = 0; j < d; ++j) {
            if (gz) gz[j] += g * (ysum * std::exp(z[j] - lse) - y[j]);
            if (gy) gy[j] -= g * (z[j] - lse);
        }
    }
};

// classification_error(z, y) = 1 where argmax z differs from argmax y (first maximum wins), else
// 0. A count, not differentiable.
class ClassificationError final : public RowLoss<ClassificationError> {
public:
    std::string name() const override { return "classification_error"; }
    template <class T>
    static T row(const T* z, const T* y, std::size_t d) {
        return argmax(z, d) == argmax(y, d) ? T(0) : T(1);
    }
    template <class T>
    static void grad(const T*, const T*, std::size_t, T, T, T*, T*) {}

private:
    template <class T>
    static std::size_t argmax(const T* x, std::size_t d) {
        std::size_t best = 0;
        for (std::size_t j = 1; j < d; ++j)
            if (x[j] > x[best]) best = j;
        return best;
    }
};

template <class Op>
Variable row_loss(const Variable& a, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const Op>();
    return Variable(apply_op(op, {a.node(), b.node()}, name));
}

}  // namespace

Variable cosine_distance(const Variable& a, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const CosineDistance>();
    return Variable(apply_op(op, {a.node(), b.node()}, name));
}

Variable squared_error(const Variable& a, const Variable& b, const std::string& name) {
    return row_loss<SquaredError>(a, b, name);
}
Variable binary_cross_entropy(const Variable& p, const Variable& y, const std::string& name) {
    return row_loss<BinaryCrossEntropy>(p, y, name);
}
Variable cross_entropy_with_softmax(const Variable& z, const Variable& y, const std::string& name) {
    return row_loss<CrossEntropyWithSoftmax>(z, y, name);
}
Variable classification_error(const Variable& z, const Variable& y, const std::string& name) {
    return row_loss<ClassificationError>(z, y, name);
}

}  // namespace loom
