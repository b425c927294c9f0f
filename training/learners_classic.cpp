// The classic rules: sgd, momentum and Nesterov, AdaGrad, RMSProp and Adam, each written once for
// float and double parameters on the Learner machinery of learners.cpp (scaling, clipping, L2,
// state, rows).
#include <cmath>

#include "core/errors.hpp"
#include "training/learners.hpp"

namespace loom {

namespace {

// Each rule's arithmetic is written once, for T = float or double (the parameter's precision).
// Constants are kept in double and rounded to T once per call. Locals, not reads through s or
// this inside the loops: stores through T* could alias them, which stops GCC from vectorizing.
class Sgd final : public LearnerRule<Sgd> {
public:
    Sgd(std::vector<Parameter> p, LearningRate lr, LearnerOptions o)
        : LearnerRule("sgd", std::move(p), std::move(lr), o, 0) {}
    template <class T>
    void rule(const StepOf<T>& s) const {
        [[maybe_unused]] const T lr = s.lr, scale = s.scale, l2 = s.l2;
        T* w = s.w;
        const T* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) w[j] -= lr * (g[j] * scale + l2 * w[j]);
    }

private:
};

class Momentum final : public LearnerRule<Momentum> {
public:
    Momentum(std::vector<Parameter> p, LearningRate lr, double momentum, bool nesterov, LearnerOptions o)
        : LearnerRule(nesterov ? "nesterov" : "momentum_sgd", std::move(p), std::move(lr), o, 1),
          mu_(momentum),
          nesterov_(nesterov) {
        if (momentum < 0 || momentum >= 1) throw UserError(name() + ": momentum must be in [0, 1)");
    }
    template <class T>
    void rule(const StepOf<T>& s) const {
        [[maybe_unused]] const T lr = s.lr, scale = s.scale, l2 = s.l2;
        const auto mu = static_cast<T>(mu_);
        T* w = s.w;
        T* v = s.s0;
        const T* g = s.grad;
        if (nesterov_) {
            for (std::size_t j = 0; j < s.size; ++j) {
                const T gj = g[j] * scale + l2 * w[j];
                v[j] = mu * v[j] + gj;
                w[j] -= lr * (gj + mu * v[j]);
            }
        } else {
            for (std::size_t j = 0; j < s.size; ++j) {
                v[j] = mu * v[j] + (g[j] * scale + l2 * w[j]);
                w[j] -= lr * v[j];
            }
        }
    }

private:
    double mu_;
    bool nesterov_;
};

class AdaGrad final : public LearnerRule<AdaGrad> {
public:
    AdaGrad(std::vector<Parameter> p, LearningRate lr, double eps, LearnerOptions o)
        : LearnerRule("adagrad", std::move(p), std::move(lr), o, 1), eps_(eps) {}
    template <class T>
    void rule(const StepOf<T>& s) const {
        [[maybe_unused]] const T lr = s.lr, scale = s.scale, l2 = s.l2;
        [[maybe_unused]] const auto eps = static_cast<T>(eps_);
        T* w = s.w;
        T* acc = s.s0;
        const T* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) {
            const T gj = g[j] * scale + l2 * w[j];
            acc[j] += gj * gj;
            w[j] -= lr * gj / (std::sqrt(acc[j]) + eps);
        }
    }

private:
    double eps_;
};

class RmsProp final : public LearnerRule<RmsProp> {
public:
    RmsProp(std::vector<Parameter> p, LearningRate lr, double rho, double eps, LearnerOptions o)
        : LearnerRule("rmsprop", std::move(p), std::move(lr), o, 1), rho_(rho), eps_(eps) {
        if (rho < 0 || rho >= 1) throw UserError("rmsprop: rho must be in [0, 1)");
    }
    template <class T>
    void rule(const StepOf<T>& s) const {
        [[maybe_unused]] const T lr = s.lr, scale = s.scale, l2 = s.l2;
        [[maybe_unused]] const auto eps = static_cast<T>(eps_);
        const auto rho = static_cast<T>(rho_);
        T* w = s.w;
        T* avg = s.s0;
        const T* g = s.grad;
        const T one_minus_rho = T(1) - rho;
        for (std::size_t j = 0; j < s.size; ++j) {
            const T gj = g[j] * scale + l2 * w[j];
            avg[j] = rho * avg[j] + one_minus_rho * gj * gj;
            w[j] -= lr * gj / (std::sqrt(avg[j]) + eps);
        }
    }

private:
    double rho_, eps_;
};

class Adam final : public LearnerRule<Adam> {
public:
    Adam(std::vector<Parameter> p, LearningRate lr, double b1, double b2, double eps, LearnerOptions o)
        : LearnerRule("adam", std::move(p), std::move(lr), o, 2), b1_(b1), b2_(b2), eps_(eps) {
        if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1) throw UserError("adam: beta1 and beta2 must be in [0, 1)");
    }
    template <class T>
    void rule(const StepOf<T>& s) const {
        if (options().lazy_sparse_rows) {
            if (s.rows) {  // the session knows the rows the gradient touched: no scan
                for (std::size_t r : *s.rows) {
                    const std::size_t at = r * s.rows_width;
                    run(s.w + at, s.grad + at, s.s0 + at, s.s1 + at, s.rows_width, s);
                }
                return;
            }
            for (std::size_t r = 0; r < s.size; r += s.row) {
                const T* g = s.grad + r;
                bool touched = false;
                for (std::size_t j = 0; j < s.row; ++j) touched |= g[j] != T(0);
                if (touched) run(s.w + r, g, s.s0 + r, s.s1 + r, s.row, s);
            }
        } else {
            run(s.w, s.grad, s.s0, s.s1, s.size, s);
        }
    }

private:
    Factors prepare(std::uint64_t t) const override {  // bias corrections
        const auto n = static_cast<double>(t);
        return {1.0 / (1.0 - std::pow(b1_, n)), 1.0 / (1.0 - std::pow(b2_, n))};
    }
    template <class T>
    void run(T* __restrict w, const T* __restrict g, T* __restrict m, T* __restrict v, std::size_t n,
             const StepOf<T>& s) const {
        [[maybe_unused]] const T lr = s.lr, scale = s.scale, l2 = s.l2, c1 = s.c1, c2 = s.c2;
        [[maybe_unused]] const auto eps = static_cast<T>(eps_);
        const auto b1 = static_cast<T>(b1_), b2 = static_cast<T>(b2_);
        const T one_minus_b1 = T(1) - b1, one_minus_b2 = T(1) - b2;
        for (std::size_t j = 0; j < n; ++j) {
            const T gj = g[j] * scale + l2 * w[j];
            m[j] = b1 * m[j] + one_minus_b1 * gj;
            v[j] = b2 * v[j] + one_minus_b2 * gj * gj;
            w[j] -= lr * (m[j] * c1) / (std::sqrt(v[j] * c2) + eps);
        }
    }
    double b1_, b2_, eps_;
};

}  // namespace

std::unique_ptr<Learner> sgd(std::vector<Parameter> parameters, LearningRate lr, LearnerOptions options) {
    return std::make_unique<Sgd>(std::move(parameters), std::move(lr), options);
}
std::unique_ptr<Learner> momentum_sgd(std::vector<Parameter> parameters, LearningRate lr, double momentum,
                                      LearnerOptions options) {
    return std::make_unique<Momentum>(std::move(parameters), std::move(lr), momentum, false, options);
}
std::unique_ptr<Learner> nesterov(std::vector<Parameter> parameters, LearningRate lr, double momentum,
                                  LearnerOptions options) {
    return std::make_unique<Momentum>(std::move(parameters), std::move(lr), momentum, true, options);
}
std::unique_ptr<Learner> adagrad(std::vector<Parameter> parameters, LearningRate lr, double epsilon,
                                 LearnerOptions options) {
    return std::make_unique<AdaGrad>(std::move(parameters), std::move(lr), epsilon, options);
}
std::unique_ptr<Learner> rmsprop(std::vector<Parameter> parameters, LearningRate lr, double rho, double epsilon,
                                 LearnerOptions options) {
    return std::make_unique<RmsProp>(std::move(parameters), std::move(lr), rho, epsilon, options);
}
std::unique_ptr<Learner> adam(std::vector<Parameter> parameters, LearningRate lr, double beta1, double beta2,
                              double epsilon, LearnerOptions options) {
    return std::make_unique<Adam>(std::move(parameters), std::move(lr), beta1, beta2, epsilon, options);
}

}  // namespace loom
