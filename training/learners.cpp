#include "training/learners.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/errors.hpp"
#include "core/finite.hpp"
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

LearningRate warmup_cosine_decay(double peak, std::uint64_t warmup_steps, std::uint64_t total_steps, double final_lr) {
    if (total_steps < warmup_steps)
        throw UserError("warmup_cosine_decay: total_steps (" + std::to_string(total_steps) +
                        ") must be at least warmup_steps (" + std::to_string(warmup_steps) + ")");
    return LearningRate([=](std::uint64_t s) {
        if (s < warmup_steps) return peak * static_cast<double>(s + 1) / static_cast<double>(warmup_steps);
        if (s >= total_steps) return final_lr;
        const double frac = static_cast<double>(s - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
        return final_lr + (peak - final_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
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
        const DType precision = parameters_[i].dtype();
        state_precision_.push_back(precision);
        const std::size_t size = parameters_[i].shape().size();
        for (std::size_t k = 0; k < slots_; ++k) {
            visit_dtype(precision, [&]<class T>(T) { state_.emplace_back(std::vector<T>(size, T(0))); });
        }
    }
}

namespace {
// Sum of squares: 16 partial sums per block (an ordered float sum does not vectorize),
// accumulated in double across blocks.
template <class T>
double sum_squares(const T* g, std::size_t n) {
    constexpr std::size_t lanes = 16;
    double total = 0.0;
    for (std::size_t start = 0; start < n; start += 4096) {
        const std::size_t end = std::min(n, start + 4096);
        T part[lanes] = {};
        std::size_t j = start;
        for (; j + lanes <= end; j += lanes)
            for (std::size_t k = 0; k < lanes; ++k) part[k] += g[j + k] * g[j + k];
        for (; j < end; ++j) part[0] += g[j] * g[j];
        for (T p : part) total += p;
    }
    return total;
}

std::size_t row_width(const Shape& shape) { return shape.rank() ? shape.size() / shape.dims()[0] : shape.size(); }
}  // namespace

GradientView gradient_view(const Session& session, std::size_t i) {
    if (session.dtype() == DType::f64) return session.gradient<double>(i);
    return session.gradient<float>(i);
}

template <class T>
double Learner::square_sum_of(std::size_t i, const GradientRef<const T>& grad) const {
    const auto& p = parameters_[i];
    const std::size_t width = row_width(p.shape());
    if (grad.by_rows) {  // only its listed rows can be non-zero, stored one after another
        if (grad.by_rows->width != width)
            throw InternalError(name_ + ": row gradient of " + p.label() + " has rows of " +
                                std::to_string(grad.by_rows->width) + ", the parameter " + std::to_string(width));
        return sum_squares(grad.by_rows->data.data(), grad.by_rows->data.size());
    }
    if (grad.dense.size() != p.shape().size())
        throw InternalError(name_ + ": gradient of " + p.label() + " has " + std::to_string(grad.dense.size()) +
                            " elements, the parameter " + std::to_string(p.shape().size()));
    return sum_squares(grad.dense.data(), grad.dense.size());
}

Learner::Gradient Learner::read(std::size_t i, const GradientView& gradient) const {
    const Parameter& p = parameters_[i];
    if (dtype_held(gradient) != p.dtype())
        throw UserError(name_ + ": the gradient of " + p.label() + " is in " + precision_name(dtype_held(gradient)) +
                        ", the parameter in " + precision_name(p.dtype()) +
                        " (converted by to_precision since the session's last pass?)");
    return {gradient, std::visit([&](const auto& g) { return square_sum_of(i, g); }, gradient)};
}

bool Learner::open_clipped_update(double square_sum, double gradient_scale, bool only_if_finite) {
    const double norm = std::sqrt(square_sum) * std::abs(gradient_scale);
    if (only_if_finite && !std::isfinite(norm)) {
        last_norm_ = norm;
        return false;
    }
    double scale = gradient_scale;
    const double limit = options_.gradient_clipping_norm;
    if (limit > 0 && norm > limit) scale *= limit / norm;
    open_update(scale, std::abs(gradient_scale));  // the norm reported is the unclipped gradient's
    return true;
}

bool Learner::update(Session& session, const UpdateOptions& options) {
    const std::size_t n = parameters_.size();
    std::vector<std::size_t> at(n);  // parameter i is the session's parameter at[i]
    for (std::size_t i = 0; i < n; ++i) at[i] = session.parameter_index(parameters_[i]);
    begin(options);
    try {
        // Every parameter steps, those the loss does not use too: zero gradient, but decay and
        // momentum go on.
        for (std::size_t i = 0; i < n; ++i)
            if (waiting(i)) accept(i, gradient_view(session, at[i]));
    } catch (...) {
        cancel();
        throw;
    }
    return finish();
}

void Learner::begin(const UpdateOptions& options) {
    if (updating_) throw InternalError(name_ + ": an update begins while another is running");
    const std::size_t n = parameters_.size();
    square_sums_.assign(n, 0.0);
    parts_.assign(n, Part::waiting);
    held_.assign(n, Gradient{});
    gradient_scale_ = options.gradient_scale;
    only_if_finite_ = options.only_if_finite;
    share_ = options.share;
    norm_first_ = options_.gradient_clipping_norm > 0 || options.only_if_finite || options.share;
    opened_ = false;
    if (share_) take_share(*share_);
    // Under inter-op threads, each gradient is stepped on the worker that finished it while backward
    // goes on (and its memory goes back for the rest of the pass), unless the norm must come first.
    if (options.during_backward && inter_op_threads() > 1 && !norm_first_) {
        open_update(gradient_scale_, std::abs(gradient_scale_));
        opened_ = true;
    }
    updating_ = true;
}

void Learner::take_share(UpdateShare& share) {
    const std::vector<char> stepped = share.stepped_here(*this);
    if (stepped.size() != parameters_.size())
        throw InternalError(name_ + ": its share of the update has " + std::to_string(stepped.size()) + " flags for " +
                            std::to_string(parameters_.size()) + " parameters");
    for (std::size_t i = 0; i < stepped.size(); ++i)
        if (!stepped[i]) parts_[i] = Part::applied;  // stepped elsewhere: passed by, its norm counts
}

bool Learner::accept(std::size_t i, const GradientView& gradient) {
    if (!updating_) throw InternalError(name_ + ": a gradient accepted outside an update (begin first)");
    if (i >= parameters_.size() || parts_[i] != Part::waiting)
        throw InternalError(name_ + ": gradient " + std::to_string(i) +
                            " accepted twice, out of range, or stepped by another process");
    Gradient g = read(i, gradient);
    if (opened_) {
        apply_parameter(i, g);
        return true;
    }
    held_[i] = std::move(g);
    parts_[i] = Part::held;
    return false;
}

bool Learner::finish() {
    if (!updating_) throw InternalError(name_ + ": finish without begin");
    struct Close {  // also when it throws: what is held is dropped, the step count stays
        bool& updating;
        ~Close() { updating = false; }
    } close{updating_};
    for (std::size_t i = 0; i < parameters_.size(); ++i)
        if (parts_[i] == Part::waiting)
            throw InternalError(name_ + ": finish before the gradient of " + parameters_[i].label() + " was accepted");
    if (norm_first_) {
        if (!open_on_norm()) return false;
    } else if (!opened_) {
        open_update(gradient_scale_, std::abs(gradient_scale_));
    }
    apply_held();
    double sq = 0.0;
    for (double v : square_sums_) sq += v;
    last_norm_ = std::sqrt(sq) * norm_scale_;
    ++steps_;
    return true;
}

bool Learner::open_on_norm() {
    const std::size_t n = parameters_.size();
    std::vector<double> square_sums(n, 0.0);  // 0 for a parameter stepped elsewhere, until shared
    for (std::size_t i = 0; i < n; ++i)
        if (parts_[i] == Part::held) square_sums[i] = held_[i].square_sum;
    if (share_) share_->share_norms(square_sums);
    // Summed in parameter order, whoever read each: the same norm, clipping and decision.
    double sq = 0.0;
    for (double v : square_sums) sq += v;
    if (!open_clipped_update(sq, gradient_scale_, only_if_finite_)) return false;
    for (std::size_t i = 0; i < n; ++i)
        if (parts_[i] == Part::applied) square_sums_[i] = square_sums[i];  // stepped elsewhere
    return true;
}

void Learner::apply_held() {
    // At once on inter-op threads, the largest first (the update is memory-bound; results do not
    // depend on the order).
    TaskGraph independent;
    std::vector<std::size_t> rest;
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        if (parts_[i] != Part::held) continue;
        rest.push_back(i);
        independent.priority.push_back(static_cast<double>(parameters_[i].shape().size()));
    }
    independent.after.assign(rest.size(), {});
    run_task_graph(independent, inter_op_threads(), [&](int t, int) {
        const std::size_t i = rest[static_cast<std::size_t>(t)];
        apply_parameter(i, held_[i]);
    });
}

std::span<std::byte> Learner::state_bytes(std::size_t i, std::size_t k) {
    if (i >= parameters_.size() || k >= slots_)
        throw InternalError(name_ + ": state_bytes(" + std::to_string(i) + ", " + std::to_string(k) + ") out of range");
    return std::visit([](auto& values) { return std::as_writable_bytes(std::span(values)); }, state_[i * slots_ + k]);
}

void Learner::convert_state(std::size_t i, DType to) {
    for (std::size_t k = i * slots_; k < (i + 1) * slots_; ++k)
        state_[k] = std::visit(
            [&](const auto& from) -> Slot {
                // float to double is exact, double to float rounds to nearest
                if (to == DType::f64) return std::vector<double>(from.begin(), from.end());
                return std::vector<float>(from.begin(), from.end());
            },
            state_[k]);
    state_precision_[i] = to;
}

void Learner::open_update(double gradient_scale, double norm_scale) {
    const double lr = lr_(steps_);
    if (!std::isfinite(lr))
        throw UserError(name_ + ": learning rate at step " + std::to_string(steps_) + " is not finite");
    // A parameter converted by to_precision since the last update: its state follows it.
    for (std::size_t i = 0; i < parameters_.size(); ++i)
        if (parameters_[i].dtype() != state_precision_[i]) convert_state(i, parameters_[i].dtype());
    scale_ = gradient_scale;
    norm_scale_ = norm_scale;
    lr_now_ = lr;
    factors_ = prepare(steps_ + 1);
}

void Learner::apply_parameter(std::size_t i, const Gradient& grad) {
    square_sums_[i] = grad.square_sum;
    parts_[i] = Part::applied;
    std::visit([&](const auto& ref) { apply_as(i, ref); }, grad.ref);
}

template <class T>
void Learner::apply_as(std::size_t i, const GradientRef<const T>& grad) {
    static const std::vector<std::size_t> first_row{0};
    auto& w = parameters_[i].data<T>();
    StepOf<T> s{};
    s.w = w.data();
    s.grad = grad.dense.data();
    s.size = w.size();
    s.row = w.dimension() > 0 && w.shape().back() > 0 ? w.shape().back() : 1;
    s.scale = static_cast<T>(scale_);
    s.decays = !options_.decay_matrices_only || parameters_[i].shape().rank() >= 2;
    s.l2 = s.decays ? static_cast<T>(options_.l2_weight_decay) : T(0);
    s.lr = static_cast<T>(lr_now_);
    s.t = steps_ + 1;
    auto slot = [&](std::size_t k) -> T* { return std::get<std::vector<T>>(state_[i * slots_ + k]).data(); };
    s.s0 = slots_ > 0 ? slot(0) : nullptr;
    s.s1 = slots_ > 1 ? slot(1) : nullptr;
    s.rows = nullptr;  // a dense gradient: any row may be non-zero
    s.rows_width = row_width(parameters_[i].shape());
    s.c1 = static_cast<T>(factors_.c1);
    s.c2 = static_cast<T>(factors_.c2);
    if (!grad.by_rows) {
        apply(s);
        return;
    }
    // A gradient kept by rows: the rule runs row by row on the same element-wise arithmetic as
    // the whole-matrix call, a row of zeros standing in for rows without gradient (skipped
    // when sparse rows are updated lazily).
    const RowGradient<T>& g = *grad.by_rows;
    const std::size_t width = s.rows_width;
    auto row_step = [&](std::size_t r, const T* row) {
        StepOf<T> rs = s;
        const std::size_t at = r * width;
        rs.w = s.w + at;
        rs.grad = row;
        rs.size = width;
        rs.s0 = s.s0 ? s.s0 + at : nullptr;
        rs.s1 = s.s1 ? s.s1 + at : nullptr;
        rs.rows = &first_row;
        apply(rs);
    };
    if (updates_rows_lazily()) {
        for (std::size_t k = 0; k < g.rows.size(); ++k) row_step(g.rows[k], g.data.data() + k * width);
    } else {
        const std::vector<T> zero_row(width, T(0));
        const T* zeros = zero_row.data();
        for (std::size_t r = 0; r < w.size() / width; ++r) {
            const T* row = g.find(r);
            row_step(r, row ? row : zeros);
        }
    }
}

// The state's format: a marker (an older file's state begins with the learner's name instead and
// holds floats only), then per slot its precision and values.
namespace {
constexpr const char* state_marker = "loom-learner-state 2";

// `values` as To: themselves when they are, else converted into `copy`.
template <class To, class From>
std::span<const To> in_type(const std::vector<From>& values, std::vector<To>& copy) {
    if constexpr (std::is_same_v<To, From>) {
        return values;
    } else {
        copy.assign(values.begin(), values.end());
        return copy;
    }
}

template <class T>
void check_finite(const std::vector<T>& values, const std::string& learner, const Parameter& p) {
    if (const std::string bad = first_non_finite<T>(values); !bad.empty())
        throw UserError(learner + ": its state for " + p.label() + " holds " + bad +
                        "; a non-finite value is never saved");
}
}  // namespace

void Learner::save_state(ByteWriter& out) const {
    for (std::size_t k = 0; k < state_.size(); ++k) {
        std::visit([&](const auto& values) { check_finite(values, name_, parameters_[k / slots_]); }, state_[k]);
    }
    out.str(state_marker);
    out.str(name_);
    out.u64(steps_);
    out.u64(parameters_.size());
    out.u64(slots_);
    // In the parameter's precision now (converted, when to_precision ran since the last update).
    for (std::size_t k = 0; k < state_.size(); ++k) {
        const bool f64 = parameters_[k / slots_].dtype() == DType::f64;
        out.u64(f64 ? 1 : 0);
        std::visit(
            [&](const auto& values) {
                std::vector<double> doubles;
                std::vector<float> floats;
                if (f64)
                    out.doubles(in_type(values, doubles));
                else
                    out.floats(in_type(values, floats));
            },
            state_[k]);
    }
}

void Learner::load_state(ByteReader& in) {
    std::string name = in.str();
    const bool tagged = name == state_marker;
    if (tagged) name = in.str();
    if (name != name_)
        throw DataError("learner state is for a '" + name + "' learner, this learner is '" + name_ + "'");
    const std::uint64_t steps = in.u64();
    const std::uint64_t count = in.u64(), slots = in.u64();
    if (count != parameters_.size() || slots != slots_)
        throw DataError("learner state holds " + std::to_string(count) + " parameters x " + std::to_string(slots) +
                        " slots, this '" + name_ + "' learner has " + std::to_string(parameters_.size()) + " x " +
                        std::to_string(slots_));
    std::vector<Slot> state(state_.size());
    for (std::size_t k = 0; k < state_.size(); ++k) {
        const Parameter& p = parameters_[k / slots_];
        const std::uint64_t precision = tagged ? in.u64() : 0;
        if (precision > 1) throw DataError("learner state for " + p.label() + " has an unknown precision tag");
        if ((precision == 1) != (p.dtype() == DType::f64))
            throw UserError("learner state for " + p.label() + " is in " + (precision ? "double" : "float") +
                            ", the parameter is " + precision_name(p.dtype()) +
                            "; convert the parameters with to_precision after loading, not before");
        if (precision == 1)
            state[k] = in.doubles();
        else
            state[k] = in.floats();
        const std::size_t size = std::visit([](const auto& values) { return values.size(); }, state[k]);
        if (size != p.shape().size())
            throw DataError("learner state for parameter " + p.label() + " has " + std::to_string(size) +
                            " elements, the parameter has " + std::to_string(p.shape().size()));
    }
    state_ = std::move(state);
    for (std::size_t i = 0; i < parameters_.size(); ++i) state_precision_[i] = parameters_[i].dtype();
    steps_ = steps;
}

}  // namespace loom
