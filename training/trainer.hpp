#pragma once
/// \file
/// Trainer: one loss, an optional evaluation metric and a learner, over a Session built once and
/// reused for every minibatch (forward, backward, update).
#include <memory>
#include <string>

#include "graph/session.hpp"
#include "training/checkpoint.hpp"
#include "training/learners.hpp"

namespace loom {

/// What one minibatch gave: sums over every item (and sequence step) and how many there were.
struct MinibatchResult {
    double loss_sum = 0.0;         ///< the loss summed over every item (and step)
    std::size_t loss_count = 0;    ///< the items (or steps) the loss was summed over
    double metric_sum = 0.0;       ///< the metric summed likewise (0 without a metric)
    std::size_t metric_count = 0;  ///< the items (or steps) of the metric
    /// 1 when the update was skipped because the loss or the gradient norm was not finite (the sums
    /// above are then those of the forward, NaN or infinite for a non-finite loss).
    std::size_t skipped_updates = 0;
    /// \return loss_sum / loss_count (0 for no items).
    double average_loss() const { return loss_count ? loss_sum / static_cast<double>(loss_count) : 0.0; }
    /// \return metric_sum / metric_count (0 for no items).
    double average_metric() const { return metric_count ? metric_sum / static_cast<double>(metric_count) : 0.0; }
};

/// What train_minibatch does when the loss or the global gradient norm is not finite: the update
/// is never applied (parameters, learner state and step count stay as they were, also with
/// inter-op threads); `skip` counts it and goes on, `stop` throws a UserError saying what it was;
/// `ignore` applies the update anyway (NaN then spreads), as loom did before it had the check.
enum class NonFiniteAction { skip, stop, ignore };

/// Data-parallel training's hook (distributed/ implements it over MPI; training/ knows no MPI): each
/// process trains on its share of every global minibatch and the hook makes them all see the sums
/// over every process. They are steps of train_minibatch's one route: combine (after forward, with
/// this process's sums; it returns everyone's), ready(i) as parameter i's gradient becomes final
/// (possibly on a worker thread, so communication overlaps the rest of backward), finish (the
/// step's communication ends: every gradient in the session is the sum over processes; also called
/// when a non-finite global loss skips backward), then the learner's update, with share() when the
/// reduction shares it out, and updated(). When forward throws, failed(what) instead of combine,
/// and the error is rethrown. Every process ends the step with the same parameters. ready and
/// finish change the session's gradients in place (Session::mutable_gradient).
class GradientReduction {
public:
    virtual ~GradientReduction() = default;
    /// \return the sums of every process, given this process's (after forward).
    virtual MinibatchResult combine(const MinibatchResult& local) = 0;
    /// Parameter `parameter`'s gradient in `session` is final (from any thread).
    virtual void ready(Session& session, std::size_t parameter) = 0;
    /// Ends the step's communication: every gradient in `session` is then the sum over processes.
    virtual void finish(Session& session) = 0;
    /// This process's forward threw `what`: tells the others instead of combine.
    virtual void failed(const std::string& what) = 0;
    /// The share of the learner's update this process takes (UpdateOptions::share), or nullptr (the
    /// default): every process steps every parameter alike. Asked before backward.
    virtual UpdateShare* share() { return nullptr; }
    /// After the learner's update (`applied`: it was not refused): a reduction that shared it out
    /// brings every process the new values of the parameters stepped elsewhere.
    virtual void updated(const Learner& /*learner*/, bool /*applied*/) {}
    /// Whether this process holds the learner's whole state, so that Trainer::save_checkpoint may
    /// write it (a reduction that steps a share of the parameters per process keeps the rest of
    /// the state elsewhere until it gathers it).
    virtual bool holds_whole_state() const { return true; }
};

/// How a Trainer steps.
struct TrainerOptions {
    /// true: the learner sees the gradient of the MEAN loss over the minibatch's items (the gradient
    /// of the sum divided by loss_count), so the learning rate does not depend on the minibatch size.
    /// false: the gradient of the sum, as CNTK's per-sample learning rates.
    bool average_gradients = true;
    NonFiniteAction on_non_finite = NonFiniteAction::skip;  ///< what a non-finite loss or gradient norm does
    /// Set: train_minibatch trains on this process's share and returns the sums over all processes
    /// (the gradient is averaged over the global minibatch's items); parameters change only after
    /// backward, whatever the threads.
    std::shared_ptr<GradientReduction> reduction;
    /// Other values every forward computes besides the loss and metric, read after train_minibatch
    /// or test_minibatch with session().value(v): a recurrent model's last states, carried into the
    /// next window of a long text (truncated backpropagation through time). Never differentiated.
    std::vector<Variable> outputs = {};
};

/// Minibatch training of a loss with one learner: forward, backward, the learner's step, the
/// non-finite guard, and checkpoints that resume bit for bit.
class Trainer {
public:
    /// The generators of the graph's random ops (dropout), in node creation order: what the
    /// checkpoint records, one state each.
    const std::vector<Rng*>& generators() const { return generators_; }
    /// `metric` may be a default-constructed Variable (no metric). The learner's parameters are the
    /// ones trained; the loss may have any dynamic axes (its sum over every item is minimized).
    /// Everything runs in the parameters' precision, float or double, also after to_precision.
    /// \param loss  summed over every item (and step) and minimized
    /// \param metric  reported beside the loss, never differentiated (may be empty)
    /// \param learner  the rule and the parameters it trains
    /// \param options  averaging, the non-finite guard and the data-parallel hook
    Trainer(Variable loss, Variable metric, std::unique_ptr<Learner> learner, TrainerOptions options = {});

    /// Forward, backward and one learner step, in training mode (dropout active, graph/mode.hpp).
    /// The loss is checked after forward, before backward; the gradient norm once every gradient is
    /// final: with the check on, parameters updated "early" (inter-op threads) have their gradient
    /// read as it becomes final but applied only after the check.
    MinibatchResult train_minibatch(const Bindings& inputs);
    /// Forward only, in inference mode: parameters are not changed.
    MinibatchResult test_minibatch(const Bindings& inputs);

    /// \return the loss given at construction.
    const Variable& loss() const { return loss_; }
    /// \return the metric given at construction (empty when none).
    const Variable& metric() const { return metric_; }
    /// @{
    /// The learner, which owns the parameters' update rule and state.
    Learner& learner() { return *learner_; }
    const Learner& learner() const { return *learner_; }
    /// @}
    /// \return the session that runs the loss (and metric) and holds the gradients.
    Session& session() { return *session_; }
    /// The data-parallel hook of TrainerOptions, or null.
    const std::shared_ptr<GradientReduction>& reduction() const { return options_.reduction; }
    /// Samples of the minibatches whose update was applied.
    std::uint64_t total_samples_seen() const { return samples_seen_; }
    /// Updates skipped (or stopped at) for a non-finite loss or gradient norm, since construction.
    std::uint64_t skipped_updates() const { return skipped_; }

    /// The learner's parameters, its state, the trainer's sample count and the state of every
    /// random generator its graph draws from in training (dropout), plus where the data reader was
    /// and anything the caller wants to keep (see training/checkpoint.hpp). A checkpoint without
    /// generator states (an older file, or one written by loom::save_checkpoint) loads and leaves
    /// the generators as they are; one with a different number of them is a UserError.
    void save_checkpoint(const std::string& path, const TrainingPosition& position = {},
                         const CheckpointExtras& extras = {}) const;
    /// `check_extras`, when given, sees the caller's extras before anything changes and throws to
    /// refuse the file (fit checks its own records so).
    Checkpoint load_checkpoint(const std::string& path,
                               const std::function<void(const CheckpointExtras&)>& check_extras = {});

private:
    MinibatchResult collect() const;
    /// Backward, each final gradient handed to the learner (through the reduction, if any), and the
    /// learner's step: \return whether it was applied.
    bool step(double gradient_scale, bool only_if_finite);
    MinibatchResult skip(MinibatchResult r, const std::string& what, double value);

    Variable loss_, metric_;
    std::unique_ptr<Learner> learner_;
    TrainerOptions options_;
    std::unique_ptr<Session> session_;
    std::uint64_t samples_seen_ = 0;
    std::uint64_t skipped_ = 0;
    std::vector<Rng*> generators_;  ///< of the random ops of the graph, in node creation order
};

}  // namespace loom
