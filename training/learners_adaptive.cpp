// AdamW, AdaDelta and CNTK's FSAdaGrad: the adaptive rules beside learners.cpp's classics, on the
// same Learner machinery (scaling, clipping, coupled L2, state, rows).
#include <cmath>

#include "core/errors.hpp"
#include "training/learners.hpp"

namespace loom {

namespace {

class AdamW final : public Learner {
public:
    AdamW(std::vector<Parameter> p, LearningRate lr, double b1, double b2, double eps, double decay, LearnerOptions o)
        : Learner("adamw", std::move(p), std::move(lr), o, 2),
          b1_(b1),
          b2_(b2),
          eps_(static_cast<float>(eps)),
          decay_(static_cast<float>(decay)) {
        if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1) throw UserError("adamw: beta1 and beta2 must be in [0, 1)");
        if (decay < 0) throw UserError("adamw: weight_decay must be at least 0");
    }

private:
    bool skips_zero_rows() const override { return options().lazy_sparse_rows; }
    void prepare(Step& s) const override {  // bias corrections
        const double t = static_cast<double>(s.t);
        s.c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1_, t)));
        s.c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2_, t)));
    }
    void apply(const Step& s) override {
        [[maybe_unused]] const float lr = s.lr, scale = s.scale, l2 = s.l2, eps = eps_, c1 = s.c1, c2 = s.c2;
        const auto b1 = static_cast<float>(b1_), b2 = static_cast<float>(b2_);
        const float shrink = 1.0f - lr * decay_;
        float *w = s.w, *m = s.s0, *v = s.s1;
        const float* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) {
            const float gj = g[j] * scale + l2 * w[j];
            w[j] *= shrink;  // decoupled: the decay never enters the moments
            m[j] = b1 * m[j] + (1.0f - b1) * gj;
            v[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
            w[j] -= lr * (m[j] * c1) / (std::sqrt(v[j] * c2) + eps);
        }
    }
    double b1_, b2_;
    float eps_, decay_;
};

class AdaDelta final : public Learner {
public:
    AdaDelta(std::vector<Parameter> p, LearningRate lr, double rho, double eps, LearnerOptions o)
        : Learner("adadelta", std::move(p), std::move(lr), o, 2),
          rho_(static_cast<float>(rho)),
          eps_(static_cast<float>(eps)) {
        if (rho < 0 || rho >= 1) throw UserError("adadelta: rho must be in [0, 1)");
    }

private:
    bool skips_zero_rows() const override { return options().lazy_sparse_rows; }
    void apply(const Step& s) override {
        [[maybe_unused]] const float lr = s.lr, scale = s.scale, l2 = s.l2, eps = eps_, rho = rho_;
        float *w = s.w, *g2 = s.s0, *d2 = s.s1;
        const float* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) {
            const float gj = g[j] * scale + l2 * w[j];
            g2[j] = rho * g2[j] + (1.0f - rho) * gj * gj;
            const float delta = std::sqrt(d2[j] + eps) / std::sqrt(g2[j] + eps) * gj;
            d2[j] = rho * d2[j] + (1.0f - rho) * delta * delta;
            w[j] -= lr * delta;
        }
    }
    float rho_, eps_;
};

class FsAdaGrad final : public Learner {
public:
    FsAdaGrad(std::vector<Parameter> p, LearningRate lr, double momentum, double variance_momentum, bool unit_gain,
              LearnerOptions o)
        : Learner("fsadagrad", std::move(p), std::move(lr), o, 2),
          mu_(static_cast<float>(momentum)),
          rho_(variance_momentum),
          gain_(unit_gain ? 1.0f - static_cast<float>(momentum) : 1.0f) {
        if (momentum < 0 || momentum >= 1 || variance_momentum < 0 || variance_momentum >= 1)
            throw UserError("fsadagrad: momentum and variance_momentum must be in [0, 1)");
    }

private:
    bool skips_zero_rows() const override { return options().lazy_sparse_rows; }
    // CNTK scales the normalized gradient by sqrt of the smoothed count of what went into the
    // squared average: c = rho c + (1 - rho) n. One update counts n = 1 here (see learners.hpp),
    // so after t updates c = 1 - rho^t.
    void prepare(Step& s) const override { s.c1 = static_cast<float>(std::sqrt(1.0 - std::pow(rho_, s.t))); }
    void apply(const Step& s) override {
        [[maybe_unused]] const float lr = s.lr, scale = s.scale, l2 = s.l2, mul = s.c1, mu = mu_, gain = gain_;
        const auto rho = static_cast<float>(rho_);
        float *w = s.w, *v = s.s0, *m = s.s1;
        const float* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) {
            float gj = g[j] * scale + l2 * w[j];
            v[j] = rho * v[j] + (1.0f - rho) * gj * gj;
            if (v[j] != 0.0f) gj *= std::min(mul / std::sqrt(v[j]), 10.0f);  // at most 10x, as CNTK
            m[j] = mu * m[j] + gain * gj;
            w[j] -= lr * m[j];
        }
    }
    float mu_;
    double rho_;
    float gain_;
};

}  // namespace

std::unique_ptr<Learner> adamw(std::vector<Parameter> parameters, LearningRate lr, double beta1, double beta2,
                               double epsilon, double weight_decay, LearnerOptions options) {
    return std::make_unique<AdamW>(std::move(parameters), std::move(lr), beta1, beta2, epsilon, weight_decay, options);
}
std::unique_ptr<Learner> adadelta(std::vector<Parameter> parameters, LearningRate lr, double rho, double epsilon,
                                  LearnerOptions options) {
    return std::make_unique<AdaDelta>(std::move(parameters), std::move(lr), rho, epsilon, options);
}
std::unique_ptr<Learner> fsadagrad(std::vector<Parameter> parameters, LearningRate lr, double momentum,
                                   double variance_momentum, bool unit_gain, LearnerOptions options) {
    return std::make_unique<FsAdaGrad>(std::move(parameters), std::move(lr), momentum, variance_momentum, unit_gain,
                                       options);
}

}  // namespace loom
