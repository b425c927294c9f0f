// Layer normalization over the last axis, in one op (Ba et al. 2016):
//   y = (x - mean) * r * scale + bias,  r = 1 / sqrt(var + epsilon),  mean and var over the row.
// Backward keeps nothing: it recomputes each row's mean and r from x, then with g = dy * scale and
// x^ = (x - mean) r:
//   dx = r (g - mean(g) - x^ mean(g x^)),  dscale += dy x^,  dbias += dy.
#include <cmath>

#include "core/errors.hpp"
#include "core/fast_math.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

class LayerNorm final : public OpBase<LayerNorm> {
public:
    explicit LayerNorm(double epsilon) : epsilon_(epsilon) {}
    std::string name() const override { return "layer_norm"; }
    bool backward_reads_output() const override { return false; }
    OpTraits traits() const override { return {.assigns_gradient = 1u}; }  // dx, row by row
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const Shape& x = in[0].shape;
        if (x.rank() == 0) shape_error(name(), in, "x needs at least one axis to normalize over");
        const std::size_t d = x[x.rank() - 1];
        for (std::size_t i : {1, 2}) {
            if (in[i].axis.is_dynamic()) shape_error(name(), in, "scale and bias must be static (parameters)");
            if (!(in[i].shape == Shape{d}))
                shape_error(name(), in, "scale and bias must be [" + std::to_string(d) + "], x's last axis");
        }
        return in[0];
    }

    // A sample [..., d] holds sample_size / d rows of d, each normalized alone: position r's are
    // rows r * per .. (r + 1) * per - 1.
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t d = c.in[1].size(), per = c.out.sample_size() / d;
        const T *scale = c.in[1].data, *bias = c.in[2].data;
        c.for_each_row_shared(4 * d * per, [&](std::size_t position) {
            for (std::size_t r = position * per; r < (position + 1) * per; ++r) {
                const T* x = c.in[0].data + r * d;
                T* y = c.out.data + r * d;
                const auto [mean, rstd] = moments(x, d);
                for (std::size_t j = 0; j < d; ++j) y[j] = (x[j] - mean) * rstd * scale[j] + bias[j];
            }
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        const std::size_t d = c.in[1].size(), per = c.out.sample_size() / d;
        T *dx = c.in_grad[0].data, *dscale = c.in_grad[1].data, *dbias = c.in_grad[2].data;
        T* g = c.work->get(d);
        c.for_each_row([&](std::size_t position) {
            for (std::size_t r = position * per; r < (position + 1) * per; ++r)
                row_backward(c, r, g, dx, dscale, dbias);
        });
    }

private:
    // Row r's part of backward (g: scratch of d).
    template <class T>
    void row_backward(const OpCall<T>& c, std::size_t r, T* g, T* dx, T* dscale, T* dbias) const {
        const std::size_t d = c.in[1].size();
        const T* scale = c.in[1].data;
        const T* x = c.in[0].data + r * d;
        const T* dy = c.out_grad.data + r * d;
        const std::pair<T, T> moments_of_x = moments(x, d);  // not a structured binding: the lambdas below read it
        const T mean = moments_of_x.first, rstd = moments_of_x.second;
        for (std::size_t j = 0; j < d; ++j) g[j] = dy[j] * scale[j];
        if (dscale)
            for (std::size_t j = 0; j < d; ++j) dscale[j] += dy[j] * (x[j] - mean) * rstd;
        if (dbias)
            for (std::size_t j = 0; j < d; ++j) dbias[j] += dy[j];
        if (!dx) return;
        const T g_mean = fast::lane_sum<T>(d, [&](std::size_t j) { return g[j]; }) / static_cast<T>(d);
        const T gx_mean =
            fast::lane_sum<T>(d, [&](std::size_t j) { return g[j] * (x[j] - mean) * rstd; }) / static_cast<T>(d);
        T* dxr = dx + r * d;
        c.store_gradient(0, [&](auto store) {
            for (std::size_t j = 0; j < d; ++j) store(dxr[j], rstd * (g[j] - g_mean - (x[j] - mean) * rstd * gx_mean));
        });
    }
    template <class T>
    std::pair<T, T> moments(const T* x, std::size_t d) const {
        const T mean = fast::lane_sum<T>(d, [&](std::size_t j) { return x[j]; }) / static_cast<T>(d);
        const T var =
            fast::lane_sum<T>(d, [&](std::size_t j) { return (x[j] - mean) * (x[j] - mean); }) / static_cast<T>(d);
        return {mean, T(1) / std::sqrt(var + static_cast<T>(epsilon_))};
    }
    double epsilon_;
};

}  // namespace

Variable layer_norm(const Variable& x, const Variable& scale, const Variable& bias, double epsilon,
                    const std::string& name) {
    if (!(epsilon > 0.0) || !std::isfinite(epsilon))
        throw UserError("layer_norm: epsilon " + std::to_string(epsilon) + " on " + x.label() + " must be positive");
    return Variable(apply_op(std::make_shared<const LayerNorm>(epsilon), {x.node(), scale.node(), bias.node()}, name));
}

}  // namespace loom
