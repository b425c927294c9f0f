// AdamW, AdaDelta and CNTK's FSAdaGrad: the adaptive rules beside learners_classic.cpp's, on the
// same Learner machinery (scaling, clipping, coupled L2, state, rows).
#include <cmath>

#include "core/errors.hpp"
#include "training/learners.hpp"

namespace loom {

namespace {

class AdamW final : public LearnerRule<AdamW> {
public:
    AdamW(std::vector<Parameter> p, LearningRate lr, double b1, double b2, double eps, double decay, LearnerOptions o)
        : LearnerRule("adamw", std::move(p), std::move(lr), o, 2), b1_(b1), b2_(b2), eps_(eps), decay_(decay) {
        if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1) throw UserError("adamw: beta1 and beta2 must be in [0, 1)");
        if (decay < 0) throw UserError("adamw: weight_decay must be at least 0");
    }
    template <class T>
    void rule(const StepOf<T>& s) const {
        [[maybe_unused]] const T lr = s.lr, scale = s.scale, l2 = s.l2, c1 = s.c1, c2 = s.c2;
        [[maybe_unused]] const auto eps = static_cast<T>(eps_);
        const auto b1 = static_cast<T>(b1_), b2 = static_cast<T>(b2_);
        const T shrink = s.decays ? T(1) - lr * static_cast<T>(decay_) : T(1);
        T *w = s.w, *m = s.s0, *v = s.s1;
        const T* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) {
            const T gj = g[j] * scale + l2 * w[j];
            w[j] *= shrink;  // decoupled: the decay never enters the moments
            m[j] = b1 * m[j] + (T(1) - b1) * gj;
            v[j] = b2 * v[j] + (T(1) - b2) * gj * gj;
            w[j] -= lr * (m[j] * c1) / (std::sqrt(v[j] * c2) + eps);
        }
    }

private:
    Factors prepare(std::uint64_t t) const override {  // bias corrections
        const auto n = static_cast<double>(t);
        return {1.0 / (1.0 - std::pow(b1_, n)), 1.0 / (1.0 - std::pow(b2_, n))};
    }
    double b1_, b2_, eps_, decay_;
};

class AdaDelta final : public LearnerRule<AdaDelta> {
public:
    AdaDelta(std::vector<Parameter> p, LearningRate lr, double rho, double eps, LearnerOptions o)
        : LearnerRule("adadelta", std::move(p), std::move(lr), o, 2), rho_(rho), eps_(eps) {
        if (rho < 0 || rho >= 1) throw UserError("adadelta: rho must be in [0, 1)");
    }
    template <class T>
    void rule(const StepOf<T>& s) const {
        [[maybe_unused]] const T lr = s.lr, scale = s.scale, l2 = s.l2;
        [[maybe_unused]] const auto eps = static_cast<T>(eps_), rho = static_cast<T>(rho_);
        T *w = s.w, *g2 = s.s0, *d2 = s.s1;
        const T* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) {
            const T gj = g[j] * scale + l2 * w[j];
            g2[j] = rho * g2[j] + (T(1) - rho) * gj * gj;
            const T delta = std::sqrt(d2[j] + eps) / std::sqrt(g2[j] + eps) * gj;
            d2[j] = rho * d2[j] + (T(1) - rho) * delta * delta;
            w[j] -= lr * delta;
        }
    }

private:
    double rho_, eps_;
};

class FsAdaGrad final : public LearnerRule<FsAdaGrad> {
public:
    FsAdaGrad(std::vector<Parameter> p, LearningRate lr, double momentum, double variance_momentum, bool unit_gain,
              LearnerOptions o)
        : LearnerRule("fsadagrad", std::move(p), std::move(lr), o, 2),
          mu_(momentum),
          rho_(variance_momentum),
          unit_gain_(unit_gain) {
        if (momentum < 0 || momentum >= 1 || variance_momentum < 0 || variance_momentum >= 1)
            throw UserError("fsadagrad: momentum and variance_momentum must be in [0, 1)");
    }
    template <class T>
    void rule(const StepOf<T>& s) const {
        [[maybe_unused]] const T lr = s.lr, scale = s.scale, l2 = s.l2, mul = s.c1;
        const auto mu = static_cast<T>(mu_), rho = static_cast<T>(rho_);
        const T gain = unit_gain_ ? T(1) - mu : T(1);
        T *w = s.w, *v = s.s0, *m = s.s1;
        const T* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) {
            T gj = g[j] * scale + l2 * w[j];
            v[j] = rho * v[j] + (T(1) - rho) * gj * gj;
            if (v[j] != T(0)) gj *= std::min(mul / std::sqrt(v[j]), T(10));  // at most 10x, as CNTK
            m[j] = mu * m[j] + gain * gj;
            w[j] -= lr * m[j];
        }
    }

private:
    // CNTK scales the normalized gradient by sqrt of the smoothed count of what went into the
    // squared average: c = rho c + (1 - rho) n. One update counts n = 1 here (see learners.hpp),
    // so after t updates c = 1 - rho^t.
    Factors prepare(std::uint64_t t) const override { return {std::sqrt(1.0 - std::pow(rho_, t)), 1.0}; }
    double mu_, rho_;
    bool unit_gain_;
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
