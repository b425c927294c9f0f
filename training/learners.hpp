#pragma once
/// \file
/// Learners: the update rules that turn a Session's parameter gradients into new parameter values.
///
/// A learner owns the list of parameters it updates and the per-parameter state of its rule
/// (momentum, squared-gradient averages, ...). One step is `begin(options)`, `accept(i, gradient)`
/// for each parameter i as its gradient becomes final (read in place from the session, no copy),
/// then `finish()`; `update(session, options)` does the three on a session's gradients. The step
/// writes the parameter's live value (Parameter::data<T>()) in place. Every rule runs in its parameter's precision,
/// float or double (its state too): the same code, a template on the element type.
///
/// The factories (sgd, momentum_sgd, nesterov, adagrad, rmsprop, adam, adamw, adadelta, fsadagrad) return
/// std::unique_ptr<Learner>: a learner is polymorphic and owns state that must not be copied by
/// accident (two copies would each think they own the parameters' optimizer state).
///
/// Every step does, per element, with g the gradient of the session's loss SUM:
///   g <- g * gradient_scale * clip        (clip = min(1, max_norm / global_norm), optional)
///   g <- g + l2_weight_decay * w          (optional; "coupled" L2 as in CNTK and torch.optim)
///   w <- rule(w, g, state, lr(step))
/// Clipping uses the GLOBAL norm over all of the learner's parameters (as
/// torch.nn.utils.clip_grad_norm_), so the direction of the whole update is kept.
///
/// Learning rates are per update, of the gradient as scaled by gradient_scale: the Trainer passes
/// 1 / (number of items) (TrainerOptions::average_gradients, the default), so a rate applies to the
/// minibatch's MEAN gradient, as in PyTorch, and does not change with the minibatch size. (CNTK made users choose
/// per-sample rates, applied to the summed gradient, or per-minibatch ones; a CNTK per-sample rate r is loom's r *
/// minibatch size.) Momentum-like constants (beta, rho, momentum) are per update as well.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/serialization.hpp"
#include "graph/session.hpp"
#include "graph/variable.hpp"

namespace loom {

/// A learning rate as a function of the number of updates already applied (0 for the first step).
/// A plain number converts to a constant rate.
class LearningRate {
public:
    /// A constant rate.
    LearningRate(double constant);  // NOLINT: implicit, so sgd(params, 0.1) reads naturally
    /// The rate schedule(step) at each step.
    explicit LearningRate(std::function<double(std::uint64_t step)> schedule);
    /// \return the rate of update number `step` (from 0).
    double operator()(std::uint64_t step) const { return schedule_(step); }

private:
    std::function<double(std::uint64_t)> schedule_;
};

/// lr at every step.
LearningRate constant_rate(double lr);
/// lr * gamma^floor(step / step_size)
LearningRate step_decay(double lr, std::uint64_t step_size, double gamma);
/// lr * gamma^step
LearningRate exponential_decay(double lr, double gamma);
/// Linear warmup from peak/warmup_steps to peak over the first warmup_steps steps
/// (step s < warmup uses peak * (s + 1) / warmup), then linear decay from peak to final_lr at
/// total_steps, and final_lr after that.
LearningRate warmup_linear_decay(double peak, std::uint64_t warmup_steps, std::uint64_t total_steps,
                                 double final_lr = 0.0);

/// Linear warmup as warmup_linear_decay's, then a half cosine from peak down to final_lr at
/// total_steps (SGDR's annealing without restarts; nanoGPT's get_lr), and final_lr after that:
/// step s >= warmup_steps uses final_lr + (peak - final_lr) (1 + cos(pi f)) / 2, f = (s - warmup) / (total - warmup).
LearningRate warmup_cosine_decay(double peak, std::uint64_t warmup_steps, std::uint64_t total_steps,
                                 double final_lr = 0.0);

/// What every learner does besides its rule (the steps above).
struct LearnerOptions {
    double gradient_clipping_norm = 0.0;  ///< > 0: rescale so the global L2 norm is at most this
    double l2_weight_decay = 0.0;         ///< > 0: adds l2_weight_decay * w to every gradient
    /// Every learner, off by default. "Lazy" updates (as lazy Adam): a row of a parameter (the
    /// last axis, e.g. one embedding vector of a [vocab, dim] table) whose raw gradient is entirely
    /// zero is skipped: neither its state (moments, accumulators) nor its weights change. This
    /// differs from the exact rule (under which Adam's moments decay and its weights keep moving on
    /// old momentum) but saves the work for the many embedding rows a minibatch does not touch. L2
    /// decay is not applied to skipped rows.
    bool lazy_sparse_rows = false;
    /// Weight decay (l2_weight_decay, and adamw's decoupled decay) only on parameters of two axes or
    /// more (weight matrices, embedding tables), none on biases and layer norms' scales: the
    /// grouping of nanoGPT's configure_optimizers and of most Transformer recipes. false: on every
    /// parameter.
    bool decay_matrices_only = false;
};

class Learner;

/// A data-parallel update shared out over processes (distributed/: ZeRO stage 1): each process
/// steps its share of the parameters on gradients summed over every process, and the processes
/// that step the others send their new values. Asked once every gradient is final.
class UpdateShare {
public:
    virtual ~UpdateShare() = default;
    /// \return per parameter of `learner`, whether this process steps it.
    virtual std::vector<char> stepped_here(const Learner& learner) = 0;
    /// Each parameter's squared gradient norm, read here for the parameters stepped here and 0 for
    /// the others: fills in every one with the value its stepping process read, so that the global
    /// norm (clipping, only_if_finite) is the same everywhere.
    virtual void share_norms(std::vector<double>& square_sums) = 0;
};

/// How one update (Learner::begin, or Learner::update) reads the gradients.
struct UpdateOptions {
    /// Multiplies every gradient first (the Trainer passes 1 / items to average).
    double gradient_scale = 1.0;
    /// A step whose global gradient norm is not finite changes nothing (Learner::finish).
    bool only_if_finite = false;
    /// Set: this process steps only its share of the parameters (UpdateShare); the parameters it
    /// steps get exactly the values the whole update gives, and the step count and
    /// last_gradient_norm() move as with it.
    UpdateShare* share = nullptr;
    /// Learner::accept is called while backward runs, as each gradient becomes final (possibly on
    /// its inter-op worker threads). With inter-op threads and nothing that needs the global norm
    /// first (no clipping, no only_if_finite, no share), accept then steps the parameter at once:
    /// the memory-bound update overlaps the rest of backward.
    bool during_backward = false;
};

/// A parameter's final gradient as a Session keeps it (GradientRef), in the parameter's precision:
/// what Learner::accept takes.
using GradientView = std::variant<GradientRef<const float>, GradientRef<const double>>;
/// \return parameter i of `session`'s gradient, in the session's precision (Session::gradient).
GradientView gradient_view(const Session& session, std::size_t i);

/// An update rule with its parameters and its state (above). Made by the factories below; a new rule
/// derives from LearnerRule.
class Learner {
public:
    virtual ~Learner() = default;
    Learner(const Learner&) = delete;
    Learner& operator=(const Learner&) = delete;

    /// One step for every parameter (see the file's comment) on the gradients of `session`'s last
    /// backward: begin, accept of each gradient, finish (below). The session's parameters may be
    /// any that include the learner's, in any order. To step parameters while backward runs, call
    /// begin, accept and finish yourself (below), as the Trainer does.
    bool update(Session& session, const UpdateOptions& options = {});
    /// @{
    /// One step given its gradients one by one: begin(options), then accept(i, gradient) once for
    /// each parameter i (its index in parameters()) as its gradient becomes final, from any thread,
    /// then finish(). With `options.share`, begin asks the share which parameters this process steps
    /// (so it must come once every gradient is final) and only those are accepted. A second begin
    /// before finish or cancel is an InternalError.
    void begin(const UpdateOptions& options = {});
    /// Parameter i's final gradient, in its precision (else a UserError). Stepped at once when
    /// the update allows it (UpdateOptions::during_backward), else read with its squared norm and
    /// held for finish: the caller keeps it alive until then. \return true when stepped at once: the
    /// caller may give its memory back (Session::release_gradient).
    bool accept(std::size_t i, const GradientView& gradient);
    /// \return whether parameter i's gradient is still expected by the running update (not accepted
    /// yet, and stepped by this process).
    bool waiting(std::size_t i) const { return updating_ && parts_[i] == Part::waiting; }
    /// Ends the step once every expected gradient was accepted: the global norm (clipping, and with
    /// `only_if_finite` the check), then every held gradient stepped. With `only_if_finite`, a step
    /// whose global gradient norm is not finite (a NaN or an infinity in any gradient, or squares
    /// beyond float's range) changes nothing, neither the parameters nor the rule's state nor the
    /// step count, and returns false; last_gradient_norm() says what it was. Otherwise returns true.
    bool finish();
    /// Drops the running update (backward threw): nothing held is applied and the step count stays
    /// (parameters stepped at once stay so).
    void cancel() { updating_ = false; }
    /// @}
    /// Whether the rule leaves rows with an all-zero gradient alone (lazy Adam): its step then
    /// changes only the rows a gradient kept by rows lists.
    bool updates_rows_lazily() const { return options_.lazy_sparse_rows; }
    /// @{
    /// The rule's state of parameter i, slot k (k < state_slots()), as the raw bytes of the
    /// precision it is kept in: what moves when the processes that step a share of the parameters
    /// bring the whole state to the one that saves it (distributed/).
    std::size_t state_slots() const { return slots_; }
    std::span<std::byte> state_bytes(std::size_t i, std::size_t k);
    /// @}

    /// \return the rule's name ("adam", "sgd", ...), as checkpoints record it.
    const std::string& name() const { return name_; }
    /// \return the parameters updated, in the order their indices (i) refer to.
    const std::vector<Parameter>& parameters() const { return parameters_; }
    /// \return the number of updates applied so far.
    std::uint64_t step_count() const { return steps_; }
    /// The rate the next update will use.
    double learning_rate() const { return lr_(steps_); }
    /// Replaces the schedule; it is read at the current step count.
    void set_learning_rate(LearningRate lr) { lr_ = std::move(lr); }
    /// \return the options given at construction.
    const LearnerOptions& options() const { return options_; }
    /// Global L2 norm of the (scaled) gradients seen by the last update, before clipping.
    double last_gradient_norm() const { return last_norm_; }

    /// The step count and the rule's state (not the parameters, not the schedule). A non-finite
    /// value in the state is a UserError naming the parameter: it is never saved.
    void save_state(ByteWriter& out) const;
    /// Throws DataError (naming `in`'s context) when the state is for another learner or other
    /// parameter sizes; on error the learner is unchanged.
    void load_state(ByteReader& in);

protected:
    /// `slots`: how many state buffers of the parameter's size the rule keeps per parameter.
    Learner(std::string name, std::vector<Parameter> parameters, LearningRate lr, LearnerOptions options,
            std::size_t slots);

    /// What a rule sees for one parameter, in the parameter's precision T. Effective gradient of
    /// element j:  g_j = grad[j] * scale + l2 * w[j]
    template <class T>
    struct StepOf {
        T* w;              ///< the parameter's values, updated in place
        const T* grad;     ///< its raw gradient (before scale and l2)
        std::size_t size;  ///< the number of elements
        std::size_t row;   ///< elements per row (last axis), for lazy updates
        T scale, l2, lr;
        std::uint64_t t;  ///< 1-based number of this update
        T* s0;            ///< state slots (nullptr when the rule keeps fewer)
        T* s1;            ///< the second state slot (nullptr when the rule keeps fewer)
        /// When known: the rows (first axis, `rows_width` elements each) outside which the
        /// gradient is zero. Lazy Adam visits only these.
        const std::vector<std::size_t>* rows;
        std::size_t rows_width;  ///< elements per row of `rows`
        /// Factors the rule derives from t alone (Adam's bias corrections; prepare()).
        T c1 = 1, c2 = 1;
        /// Whether the rule's own weight decay applies to this parameter (see
        /// LearnerOptions::decay_matrices_only; l2 is already 0 where it does not).
        bool decays = true;
    };
    /// A float parameter's StepOf.
    using Step = StepOf<float>;
    /// Factors a rule derives from the update's number t alone, computed once per update in double
    /// (not in every apply(): a table kept by rows is applied row by row), then rounded to T.
    struct Factors {
        double c1 = 1.0, c2 = 1.0;
    };
    /// \return the factors of update number t (1-based); none by default.
    virtual Factors prepare(std::uint64_t /*t*/) const { return {}; }
    /// @{
    /// Applies the rule to one parameter (or one row of a table kept by rows).
    virtual void apply(const StepOf<float>& step) = 0;
    virtual void apply(const StepOf<double>& step) = 0;
    /// @}

private:
    std::string name_;
    std::vector<Parameter> parameters_;
    LearningRate lr_;
    LearnerOptions options_;
    std::size_t slots_;
    /// parameters x slots, flattened: [p * slots_ + k], each in its parameter's precision: a
    /// parameter converted by to_precision has its state converted at the next update (when it
    /// opens) or save.
    using Slot = ByDType<VectorOf>;
    std::vector<Slot> state_;
    std::vector<DType> state_precision_;  ///< per parameter (also without slots)
    /// One parameter's gradient as the session holds it, with its squared norm.
    struct Gradient {
        GradientView ref;
        double square_sum = 0.0;
    };
    /// Parameter i's gradient checked against the parameter and its norm taken.
    Gradient read(std::size_t i, const GradientView& gradient) const;
    template <class T>
    double square_sum_of(std::size_t i, const GradientRef<const T>& grad) const;
    void apply_parameter(std::size_t i, const Gradient& grad);
    template <class T>
    void apply_as(std::size_t i, const GradientRef<const T>& grad);
    void convert_state(std::size_t i, DType to);
    /// Fixes the update's scales (the gradients' and the reported norm's: they differ after
    /// clipping), rate and factors; a UserError when the learning rate is not finite.
    void open_update(double gradient_scale, double norm_scale);
    /// From the squared global norm: false (nothing opened) when `only_if_finite` and the norm is not
    /// finite; else opens the update with the scale clipping asks for.
    bool open_clipped_update(double square_sum, double gradient_scale, bool only_if_finite);
    /// Asks the share which parameters this process steps; the others are passed by.
    void take_share(UpdateShare& share);
    /// The global norm, from the held gradients (and the share's): false when the check refuses
    /// the step, else the update opened with the scale clipping asks for.
    bool open_on_norm();
    /// The held gradients stepped on inter-op threads, the largest first.
    void apply_held();
    /// The running update: its options and scale and rate, and per parameter its squared norm, how
    /// far it is and the gradient held for finish.
    enum class Part : char { waiting, held, applied };
    bool updating_ = false;
    double gradient_scale_ = 1.0;   ///< UpdateOptions::gradient_scale
    bool only_if_finite_ = false;   ///< UpdateOptions::only_if_finite
    UpdateShare* share_ = nullptr;  ///< UpdateOptions::share
    bool norm_first_ = false;       ///< the global norm is known before any step (clipping, check, share)
    bool opened_ = false;           ///< open_update ran: accept steps at once
    double scale_ = 1.0, norm_scale_ = 1.0, lr_now_ = 0.0;
    Factors factors_;
    std::vector<double> square_sums_;
    std::vector<Part> parts_;
    std::vector<Gradient> held_;
    std::uint64_t steps_ = 0;
    double last_norm_ = 0.0;
};

/// \var Learner::StepOf::scale
/// Multiplies the raw gradient (the Trainer's 1 / items, times the clipping factor).
/// \var Learner::StepOf::l2
/// LearnerOptions::l2_weight_decay.
/// \var Learner::StepOf::lr
/// This update's learning rate.
/// \var Learner::StepOf::c1
/// The first factor of prepare().
/// \var Learner::StepOf::c2
/// The second factor of prepare().
/// \var Learner::Factors::c1
/// The first factor (StepOf::c1).
/// \var Learner::Factors::c2
/// The second factor (StepOf::c2).

/// A rule written once for both precisions: Rule::rule<T>(const StepOf<T>&) does the arithmetic.
template <class Rule>
class LearnerRule : public Learner {
protected:
    using Learner::Learner;
    /// @{
    /// Calls Rule::rule in the parameter's precision.
    void apply(const StepOf<float>& s) final { static_cast<Rule&>(*this).rule(s); }
    void apply(const StepOf<double>& s) final { static_cast<Rule&>(*this).rule(s); }
    /// @}
};

/// w -= lr * g
std::unique_ptr<Learner> sgd(std::vector<Parameter> parameters, LearningRate lr, LearnerOptions options = {});
/// v = momentum * v + g;  w -= lr * v   (classical momentum, as torch.optim.SGD)
std::unique_ptr<Learner> momentum_sgd(std::vector<Parameter> parameters, LearningRate lr, double momentum = 0.9,
                                      LearnerOptions options = {});
/// v = momentum * v + g;  w -= lr * (g + momentum * v)   (Nesterov, as torch.optim.SGD(nesterov=True))
std::unique_ptr<Learner> nesterov(std::vector<Parameter> parameters, LearningRate lr, double momentum = 0.9,
                                  LearnerOptions options = {});
/// G += g^2;  w -= lr * g / (sqrt(G) + epsilon)
std::unique_ptr<Learner> adagrad(std::vector<Parameter> parameters, LearningRate lr, double epsilon = 1e-8,
                                 LearnerOptions options = {});
/// S = rho * S + (1 - rho) * g^2;  w -= lr * g / (sqrt(S) + epsilon)
std::unique_ptr<Learner> rmsprop(std::vector<Parameter> parameters, LearningRate lr, double rho = 0.9,
                                 double epsilon = 1e-8, LearnerOptions options = {});
/// m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + epsilon)
std::unique_ptr<Learner> adam(std::vector<Parameter> parameters, LearningRate lr, double beta1 = 0.9,
                              double beta2 = 0.999, double epsilon = 1e-8, LearnerOptions options = {});
/// Adam with decoupled weight decay (Loshchilov and Hutter; torch.optim.AdamW):
///   w *= 1 - lr * weight_decay;  then Adam's step with the moments of g (the decay never enters them)
std::unique_ptr<Learner> adamw(std::vector<Parameter> parameters, LearningRate lr, double beta1 = 0.9,
                               double beta2 = 0.999, double epsilon = 1e-8, double weight_decay = 0.01,
                               LearnerOptions options = {});
/// AdaDelta (Zeiler; CNTK's adadelta, torch.optim.Adadelta):
///   G = rho G + (1-rho) g^2;  d = sqrt(D + eps) / sqrt(G + eps) * g;  D = rho D + (1-rho) d^2;  w -= lr * d
std::unique_ptr<Learner> adadelta(std::vector<Parameter> parameters, LearningRate lr = 1.0, double rho = 0.95,
                                  double epsilon = 1e-8, LearnerOptions options = {});
/// CNTK's FSAdaGrad ("Frank Seide's AdaGrad", close to Adam):
///   V = vm V + (1-vm) g^2;  g *= min(sqrt(1 - vm^t) / sqrt(V), 10) where V != 0;
///   m = momentum m + (unit_gain ? 1 - momentum : 1) g;  w -= lr * m
/// CNTK counts samples in the sqrt(1 - vm^t) term (its gradients are sums, its rates per sample);
/// here one update counts as one, since loom's rates are per update of the gradient the caller
/// scaled (see below), so variance_momentum is per update too.
std::unique_ptr<Learner> fsadagrad(std::vector<Parameter> parameters, LearningRate lr, double momentum = 0.9,
                                   double variance_momentum = 0.999, bool unit_gain = true,
                                   LearnerOptions options = {});

}  // namespace loom
