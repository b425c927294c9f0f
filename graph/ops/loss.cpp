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

// cosine_distance(a, b) = a.b / (|a| |b|): the cosine similarity, as CNTK names it.
class CosineDistance final : public OpBase<CosineDistance> {
public:
    std::string name() const override { return "cosine_distance"; }
    TypeInfo infer(std::span<const TypeInfo> in) const override { return pairwise_type(name(), in); }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t d = c.in[0].sample_size();
        for_each_row_pair(c, [&](std::size_t r, std::size_t ia, std::size_t ib) {
            const T *a = c.in[0].data + ia * d, *b = c.in[1].data + ib * d;
            T ab = 0, aa = 0, bb = 0;
            for (std::size_t j = 0; j < d; ++j) {
                ab += a[j] * b[j];
                aa += a[j] * a[j];
                bb += b[j] * b[j];
            }
            c.out.data[r] = ab / (norm(aa) * norm(bb));
        });
    }
    // dy/da = b / (|a||b|) - y a / |a|^2, and symmetrically for b.
    template <class T>
    void bwd(const OpCall<T>& c) const {
        T *ga = c.in_grad[0].data, *gb = c.in_grad[1].data;
        if (!ga && !gb) return;
        const std::size_t d = c.in[0].sample_size();
        for_each_row_pair(c, [&](std::size_t r, std::size_t ia, std::size_t ib) {
            const T *a = c.in[0].data + ia * d, *b = c.in[1].data + ib * d;
            T aa = 0, bb = 0;
            for (std::size_t j = 0; j < d; ++j) {
                aa += a[j] * a[j];
                bb += b[j] * b[j];
            }
            const T na = norm(aa), nb = norm(bb), y = c.out.data[r], g = c.out_grad.data[r];
            for (std::size_t j = 0; j < d; ++j) {
                if (ga) ga[ia * d + j] += g * (b[j] / (na * nb) - y * a[j] / (na * na));
                if (gb) gb[ib * d + j] += g * (a[j] / (na * nb) - y * b[j] / (nb * nb));
            }
        });
    }

private:
    // A zero vector has no direction; a tiny floor keeps the result finite (0) instead of NaN.
    template <class T>
    static T norm(T sq) {
        return std::sqrt(std::max(sq, T(1e-24)));
    }
};

}  // namespace

Variable cosine_distance(const Variable& a, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const CosineDistance>();
    return Variable(apply_op(op, {a.node(), b.node()}, name));
}

}  // namespace loom
