#include "training/learners.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/parallel.hpp"

namespace loom {

LearningRate::LearningRate(double constant) : schedule_([constant](std::uint64_t) { return constant; }) {}

LearningRate::LearningRate(std::function<double(std::uint64_t)> schedule) : schedule_(std::move(schedule)) {
    if (!schedule_) throw UserError("LearningRate: the schedule function is empty");
}

LearningRate constant_rate(double lr) { return LearningRate(lr); }

LearningRate step_decay(double lr, std::uint64_t step_size, double gamma) {
    if (step_size == 0) throw UserError("step_decay: step_size must be at least 1");
    return LearningRate([=](std::uint64_t s) { return lr * std::pow(gamma, static_cast<double>(s / step_size)); });
}

LearningRate exponential_decay(double lr, double gamma) {
    return LearningRate([=](std::uint64_t s) { return lr * std::pow(gamma, static_cast<double>(s)); });
}

LearningRate warmup_linear_decay(double peak, std::uint64_t warmup_steps, std::uint64_t total_steps, double final_lr) {
    if (total_steps < warmup_steps)
        throw UserError("warmup_linear_decay: total_steps (" + std::to_string(total_steps) +
                        ") must be at least warmup_steps (" + std::to_string(warmup_steps) + ")");
    return LearningRate([=](std::uint64_t s) {
        if (s < warmup_steps) return peak * static_cast<double>(s + 1) / static_cast<double>(warmup_steps);
        if (s >= total_steps) return final_lr;
        const double frac = static_cast<double>(s - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
        return peak + (final_lr - peak) * frac;
    });
}

Learner::Learner(std::string name, std::vector<Parameter> parameters, LearningRate lr, LearnerOptions options,
                 std::size_t slots)
    : name_(std::move(name)), parameters_(std::move(parameters)), lr_(std::move(lr)), options_(options), slots_(slots) {
    if (parameters_.empty()) throw UserError(name_ + ": no parameters to learn");
    if (options_.gradient_clipping_norm < 0 || options_.l2_weight_decay < 0)
        throw UserError(name_ + ": gradient_clipping_norm and l2_weight_decay must not be negative");
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        if (!parameters_[i] || !parameters_[i].is_parameter())
            throw UserError(name_ + ": item " + std::to_string(i) + " of the parameter list is not a parameter");
        for (std::size_t j = 0; j < i; ++j)
            if (parameters_[j] == parameters_[i])
                throw UserError(name_ + ": " + parameters_[i].label() + " is listed twice; it would be updated twice");
        for (std::size_t k = 0; k < slots_; ++k) state_.emplace_back(parameters_[i].data().size(), 0.0f);
    }
}

namespace {
// Sum of squares: 16 float partial sums per block (an ordered float sum does not vectorize),
// accumulated in double across blocks.
double sum_squares(const float* g, std::size_t n) {
    constexpr std::size_t lanes = 16;
    double total = 0.0;
    for (std::size_t start = 0; start < n; start += 4096) {
        const std::size_t end = std::min(n, start + 4096);
        float part[lanes] = {};
        std::size_t j = start;
        for (; j + lanes <= end; j += lanes)
            for (std::size_t k = 0; k < lanes; ++k) part[k] += g[j + k] * g[j + k];
        for (; j < end; ++j) part[0] += g[j] * g[j];
        for (float p : part) total += p;
    }
    return total;
}

std::size_t row_width(const xt::xarray<float>& w) { return w.dimension() ? w.size() / w.shape()[0] : w.size(); }
}  // namespace

Learner::Gradient Learner::gradient_of(const Session& session, std::size_t i) const {
    const auto& p = parameters_[i];
    const std::size_t width = row_width(p.data());
    const Session::GradientView view = session.gradient_view(p);
    Gradient g{view.dense, view.by_rows};
    if (g.by_rows) {  // only its listed rows can be non-zero, stored one after another
        if (g.by_rows->width != width)
            throw InternalError(name_ + ": row gradient of " + p.label() + " has rows of " +
                                std::to_string(g.by_rows->width) + ", the parameter " + std::to_string(width));
        g.square_sum = sum_squares(g.by_rows->data.data(), g.by_rows->data.size());
        return g;
    }
    if (g.dense.size() != p.data().size())
        throw InternalError(name_ + ": gradient of " + p.label() + " has " + std::to_string(g.dense.size()) +
                            " elements, the parameter " + std::to_string(p.data().size()));
    g.square_sum = sum_squares(g.dense.data(), g.dense.size());
    return g;
}

bool Learner::update(const Session& session, double gradient_scale, bool only_if_finite) {
    const bool clipping = options_.gradient_clipping_norm > 0;
    if (!clipping && !only_if_finite) {  // each parameter's gradient is read and applied in one go
        begin_update(gradient_scale);
        return end_update(session);
    }
    // The global norm is needed before any update.
    std::vector<Gradient> grads;
    double sq = 0.0;
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        grads.push_back(gradient_of(session, i));
        sq += grads.back().square_sum;
    }
    const double norm = std::sqrt(sq) * std::abs(gradient_scale);
    if (only_if_finite && !std::isfinite(norm)) {
        last_norm_ = norm;
        return false;
    }
    double scale = gradient_scale;
    if (clipping && norm > options_.gradient_clipping_norm) scale *= options_.gradient_clipping_norm / norm;
    open_update(scale, std::abs(gradient_scale));  // the norm reported is the unclipped gradient's
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        pending_[i] = grads[i];
        done_[i] = deferred;
    }
    return end_update(session);
}

void Learner::begin_update(double gradient_scale) { open_update(gradient_scale, std::abs(gradient_scale)); }

void Learner::open_update(double gradient_scale, double norm_scale) {
    if (updating_) throw InternalError(name_ + ": begin_update while an update is open");
    const double lr = lr_(steps_);
    if (!std::isfinite(lr))
        throw UserError(name_ + ": learning rate at step " + std::to_string(steps_) + " is not finite");
    updating_ = true;
    scale_ = gradient_scale;
    norm_scale_ = norm_scale;
    lr_now_ = lr;
    square_sums_.assign(parameters_.size(), 0.0);
    done_.assign(parameters_.size(), waiting);
    pending_.assign(parameters_.size(), Gradient{});
    std::size_t widest = 0;
    for (const auto& p : parameters_) widest = std::max(widest, row_width(p.data()));
    zero_row_.assign(widest, 0.0f);
}

void Learner::update_parameter(const Session& session, std::size_t i) {
    if (!updating_ || i >= parameters_.size() || done_[i] != waiting)
        throw InternalError(name_ + ": update_parameter(" + std::to_string(i) + ") outside an update or twice");
    apply_parameter(i, gradient_of(session, i));
}

void Learner::defer_parameter(const Session& session, std::size_t i) {
    if (!updating_ || i >= parameters_.size() || done_[i] != waiting)
        throw InternalError(name_ + ": defer_parameter(" + std::to_string(i) + ") outside an update or twice");
    pending_[i] = gradient_of(session, i);
    done_[i] = deferred;
}

bool Learner::end_update(const Session& session, bool only_if_finite) {
    if (!updating_) throw InternalError(name_ + ": end_update without begin_update");
    if (only_if_finite) {
        double sq = 0.0;
        bool any_applied = false;
        for (std::size_t i = 0; i < parameters_.size(); ++i) {
            if (done_[i] == waiting) defer_parameter(session, i);
            any_applied |= done_[i] == applied;
            sq += done_[i] == applied ? square_sums_[i] : pending_[i].square_sum;
        }
        const double norm = std::sqrt(sq) * norm_scale_;
        if (!std::isfinite(norm)) {
            if (any_applied)
                throw InternalError(name_ + ": a non-finite gradient norm after parameters were updated early");
            last_norm_ = norm;
            updating_ = false;
            return false;
        }
    }
    // The rest at once on inter-op threads, the largest first (the update is memory-bound; results
    // do not depend on the order). Parameters whose gradient never became ready (the loss does not
    // use them) still take their step: zero gradient, but decay and momentum go on.
    TaskGraph independent;
    std::vector<std::size_t> rest;
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        if (done_[i] == applied) continue;
        rest.push_back(i);
        independent.priority.push_back(static_cast<double>(parameters_[i].data().size()));
    }
    independent.after.assign(rest.size(), {});
    run_task_graph(independent, inter_op_threads(), [&](int t, int) {
        const std::size_t i = rest[static_cast<std::size_t>(t)];
        apply_parameter(i, done_[i] == deferred ? pending_[i] : gradient_of(session, i));
    });
    double sq = 0.0;
    for (double v : square_sums_) sq += v;
    last_norm_ = std::sqrt(sq) * norm_scale_;
    updating_ = false;
    ++steps_;
    return true;
}

void Learner::apply_parameter(std::size_t i, const Gradient& grad) {
    static const std::vector<std::size_t> first_row{0};
    square_sums_[i] = grad.square_sum;
    done_[i] = applied;
    auto& w = parameters_[i].data();
    Step s{};
    s.w = w.data();
    s.grad = grad.dense.data();
    s.size = w.size();
    s.row = w.dimension() > 0 && w.shape().back() > 0 ? w.shape().back() : 1;
    s.scale = static_cast<float>(scale_);
    s.l2 = static_cast<float>(options_.l2_weight_decay);
    s.lr = static_cast<float>(lr_now_);
    s.t = steps_ + 1;
    s.s0 = slots_ > 0 ? state_[i * slots_].data() : nullptr;
    s.s1 = slots_ > 1 ? state_[i * slots_ + 1].data() : nullptr;
    s.rows = nullptr;  // a dense gradient: any row may be non-zero
    s.rows_width = row_width(w);
    prepare(s);
    if (!grad.by_rows) {
        apply(s);
        return;
    }
    // A gradient kept by rows: the rule runs row by row on the same element-wise arithmetic as
    // the whole-matrix call, a row of zeros standing in for rows without gradient (skipped
    // when sparse rows are updated lazily).
    const RowGradient<float>& g = *grad.by_rows;
    const std::size_t width = s.rows_width;
    auto row_step = [&](std::size_t r, const float* row) {
        Step rs = s;
        const std::size_t at = r * width;
        rs.w = s.w + at;
        rs.grad = row;
        rs.size = width;
        rs.s0 = s.s0 ? s.s0 + at : nullptr;
        rs.s1 = s.s1 ? s.s1 + at : nullptr;
        rs.rows = &first_row;
        apply(rs);
    };
    if (skips_zero_rows()) {
        for (std::size_t k = 0; k < g.rows.size(); ++k) row_step(g.rows[k], g.data.data() + k * width);
    } else {
        for (std::size_t r = 0; r < w.size() / width; ++r) {
            const float* row = g.find(r);
            row_step(r, row ? row : zero_row_.data());
        }
    }
}

void Learner::save_state(ByteWriter& out) const {
    for (std::size_t k = 0; k < state_.size(); ++k) {
        const auto bad = std::find_if(state_[k].begin(), state_[k].end(), [](float v) { return !std::isfinite(v); });
        if (bad != state_[k].end())
            throw UserError(name_ + ": its state for " + parameters_[k / slots_].label() + " holds " +
                            std::to_string(*bad) + " at element " + std::to_string(bad - state_[k].begin()) +
                            "; a non-finite value is never saved");
    }
    out.str(name_);
    out.u64(steps_);
    out.u64(parameters_.size());
    out.u64(slots_);
    for (const auto& s : state_) out.floats(s);
}

void Learner::load_state(ByteReader& in) {
    const std::string name = in.str();
    if (name != name_)
        throw DataError("learner state is for a '" + name + "' learner, this learner is '" + name_ + "'");
    const std::uint64_t steps = in.u64();
    const std::uint64_t count = in.u64(), slots = in.u64();
    if (count != parameters_.size() || slots != slots_)
        throw DataError("learner state holds " + std::to_string(count) + " parameters x " + std::to_string(slots) +
                        " slots, this '" + name_ + "' learner has " + std::to_string(parameters_.size()) + " x " +
                        std::to_string(slots_));
    std::vector<std::vector<float>> state;
    for (std::size_t k = 0; k < state_.size(); ++k) {
        state.push_back(in.floats());
        if (state.back().size() != state_[k].size())
            throw DataError("learner state for parameter " + parameters_[k / slots_].label() + " has " +
                            std::to_string(state.back().size()) + " elements, the parameter has " +
                            std::to_string(state_[k].size()));
    }
    state_ = std::move(state);
    steps_ = steps;
}

namespace {

class Sgd final : public Learner {
public:
    Sgd(std::vector<Parameter> p, LearningRate lr, LearnerOptions o)
        : Learner("sgd", std::move(p), std::move(lr), o, 0) {}

private:
    bool skips_zero_rows() const override { return options().lazy_sparse_rows; }
    void apply(const Step& s) override {
        // Locals, not reads through s or this inside the loops: float stores could alias them,
        // which stops GCC from vectorizing.
        [[maybe_unused]] const float lr = s.lr, scale = s.scale, l2 = s.l2;
        float* w = s.w;
        const float* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) w[j] -= lr * (g[j] * scale + l2 * w[j]);
    }
};

class Momentum final : public Learner {
public:
    Momentum(std::vector<Parameter> p, LearningRate lr, double momentum, bool nesterov, LearnerOptions o)
        : Learner(nesterov ? "nesterov" : "momentum_sgd", std::move(p), std::move(lr), o, 1),
          mu_(static_cast<float>(momentum)),
          nesterov_(nesterov) {
        if (momentum < 0 || momentum >= 1) throw UserError(name() + ": momentum must be in [0, 1)");
    }

private:
    bool skips_zero_rows() const override { return options().lazy_sparse_rows; }
    void apply(const Step& s) override {
        // Locals, not reads through s or this inside the loops: float stores could alias them,
        // which stops GCC from vectorizing.
        [[maybe_unused]] const float lr = s.lr, scale = s.scale, l2 = s.l2;
        float* w = s.w;
        float* v = s.s0;
        const float* g = s.grad;
        if (nesterov_) {
            for (std::size_t j = 0; j < s.size; ++j) {
                const float gj = g[j] * scale + l2 * w[j];
                v[j] = mu_ * v[j] + gj;
                w[j] -= lr * (gj + mu_ * v[j]);
            }
        } else {
            for (std::size_t j = 0; j < s.size; ++j) {
                v[j] = mu_ * v[j] + (g[j] * scale + l2 * w[j]);
                w[j] -= lr * v[j];
            }
        }
    }
    float mu_;
    bool nesterov_;
};

class AdaGrad final : public Learner {
public:
    AdaGrad(std::vector<Parameter> p, LearningRate lr, double eps, LearnerOptions o)
        : Learner("adagrad", std::move(p), std::move(lr), o, 1), eps_(static_cast<float>(eps)) {}

private:
    bool skips_zero_rows() const override { return options().lazy_sparse_rows; }
    void apply(const Step& s) override {
        // Locals, not reads through s or this inside the loops: float stores could alias them,
        // which stops GCC from vectorizing.
        [[maybe_unused]] const float lr = s.lr, scale = s.scale, l2 = s.l2;
        [[maybe_unused]] const float eps = eps_;
        float* w = s.w;
        float* acc = s.s0;
        const float* g = s.grad;
        for (std::size_t j = 0; j < s.size; ++j) {
            const float gj = g[j] * scale + l2 * w[j];
            acc[j] += gj * gj;
            w[j] -= lr * gj / (std::sqrt(acc[j]) + eps);
        }
    }
    float eps_;
};

class RmsProp final : public Learner {
public:
    RmsProp(std::vector<Parameter> p, LearningRate lr, double rho, double eps, LearnerOptions o)
        : Learner("rmsprop", std::move(p), std::move(lr), o, 1),
          rho_(static_cast<float>(rho)),
          eps_(static_cast<float>(eps)) {
        if (rho < 0 || rho >= 1) throw UserError("rmsprop: rho must be in [0, 1)");
    }

private:
    bool skips_zero_rows() const override { return options().lazy_sparse_rows; }
    void apply(const Step& s) override {
        // Locals, not reads through s or this inside the loops: float stores could alias them,
        // which stops GCC from vectorizing.
        [[maybe_unused]] const float lr = s.lr, scale = s.scale, l2 = s.l2;
        [[maybe_unused]] const float eps = eps_;
        float* w = s.w;
        float* avg = s.s0;
        const float* g = s.grad;
        const float one_minus_rho = 1.0f - rho_;
        for (std::size_t j = 0; j < s.size; ++j) {
            const float gj = g[j] * scale + l2 * w[j];
            avg[j] = rho_ * avg[j] + one_minus_rho * gj * gj;
            w[j] -= lr * gj / (std::sqrt(avg[j]) + eps);
        }
    }
    float rho_, eps_;
};

class Adam final : public Learner {
public:
    Adam(std::vector<Parameter> p, LearningRate lr, double b1, double b2, double eps, LearnerOptions o)
        : Learner("adam", std::move(p), std::move(lr), o, 2), b1_(b1), b2_(b2), eps_(static_cast<float>(eps)) {
        if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1) throw UserError("adam: beta1 and beta2 must be in [0, 1)");
    }

private:
    bool skips_zero_rows() const override { return options().lazy_sparse_rows; }
    void prepare(Step& s) const override {  // bias corrections
        const double t = static_cast<double>(s.t);
        s.c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1_, t)));
        s.c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2_, t)));
    }
    void apply(const Step& s) override {
        const float c1 = s.c1, c2 = s.c2;
        if (options().lazy_sparse_rows) {
            if (s.rows) {  // the session knows the rows the gradient touched: no scan
                for (std::size_t r : *s.rows) {
                    const std::size_t at = r * s.rows_width;
                    run(s.w + at, s.grad + at, s.s0 + at, s.s1 + at, s.rows_width, s, c1, c2);
                }
                return;
            }
            for (std::size_t r = 0; r < s.size; r += s.row) {
                const float* g = s.grad + r;
                bool touched = false;
                for (std::size_t j = 0; j < s.row; ++j) touched |= g[j] != 0.0f;
                if (touched) run(s.w + r, g, s.s0 + r, s.s1 + r, s.row, s, c1, c2);
            }
        } else {
            run(s.w, s.grad, s.s0, s.s1, s.size, s, c1, c2);
        }
    }

    void run(float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v, std::size_t n,
             const Step& s, float c1, float c2) const {
        // Locals, not reads through s or this inside the loops: float stores could alias them,
        // which stops GCC from vectorizing.
        [[maybe_unused]] const float lr = s.lr, scale = s.scale, l2 = s.l2;
        [[maybe_unused]] const float eps = eps_;
        const auto b1 = static_cast<float>(b1_), b2 = static_cast<float>(b2_);
        const float one_minus_b1 = 1.0f - b1, one_minus_b2 = 1.0f - b2;
        for (std::size_t j = 0; j < n; ++j) {
            const float gj = g[j] * scale + l2 * w[j];
            m[j] = b1 * m[j] + one_minus_b1 * gj;
            v[j] = b2 * v[j] + one_minus_b2 * gj * gj;
            w[j] -= lr * (m[j] * c1) / (std::sqrt(v[j] * c2) + eps);
        }
    }
    double b1_, b2_;
    float eps_;
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
