#include "training/trainer.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/parallel.hpp"
#include "core/serialization.hpp"
#include "graph/generators.hpp"
#include "graph/mode.hpp"

namespace loom {

namespace {
// The trainer keeps its own records among the extras, under names users will not pick.
constexpr const char* samples_seen_key = "loom.trainer.samples_seen";
constexpr const char* generators_key = "loom.trainer.generators";

std::string number(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return std::to_string(v);
}
}  // namespace

Trainer::Trainer(Variable loss, Variable metric, std::unique_ptr<Learner> learner, TrainerOptions options)
    : loss_(std::move(loss)), metric_(std::move(metric)), learner_(std::move(learner)), options_(options) {
    if (!loss_) throw UserError("Trainer: the loss is an empty Variable");
    if (!learner_) throw UserError("Trainer: no learner given");
    std::vector<Variable> outputs{loss_};
    if (metric_ && !(metric_ == loss_)) outputs.push_back(metric_);
    for (const Variable& v : options_.outputs) {
        if (!v) throw UserError("Trainer: TrainerOptions::outputs holds an empty Variable");
        if (std::find(outputs.begin(), outputs.end(), v) == outputs.end()) outputs.push_back(v);
    }
    generators_ = random_generators(outputs);
    session_ = std::make_unique<Session>(std::move(outputs), learner_->parameters());
}

MinibatchResult Trainer::collect() const {
    MinibatchResult r;
    r.loss_sum = session_->sum(loss_);
    r.loss_count = session_->count(loss_);
    if (metric_) {
        r.metric_sum = session_->sum(metric_);
        r.metric_count = session_->count(metric_);
    }
    return r;
}

MinibatchResult Trainer::train_minibatch(const Bindings& inputs) {
    GradientReduction* const reduction = options_.reduction.get();
    const TrainingScope training;
    MinibatchResult r;
    try {
        session_->forward(inputs, "Trainer::train_minibatch");
        r = collect();
    } catch (const std::exception& e) {
        if (reduction) reduction->failed(e.what());  // the other processes stop at combine with this message
        throw;
    }
    if (reduction) r = reduction->combine(r);
    if (r.loss_count == 0)
        throw UserError(reduction ? "Trainer::train_minibatch: the global minibatch has no items"
                                  : "Trainer::train_minibatch: the minibatch has no items (empty loss)");
    const bool guard = options_.on_non_finite != NonFiniteAction::ignore;
    if (guard && !std::isfinite(r.loss_sum)) {        // no backward needed; with a reduction the global loss
        if (reduction) reduction->finish(*session_);  // so every process skips alike
        return skip(r, "loss", r.loss_sum);
    }
    const bool applied = step(options_.average_gradients ? 1.0 / static_cast<double>(r.loss_count) : 1.0, guard);
    session_->release_gradients();
    if (!applied) return skip(r, "gradient norm", learner_->last_gradient_norm());
    samples_seen_ += r.loss_count;
    return r;
}

bool Trainer::step(double gradient_scale, bool only_if_finite) {
    GradientReduction* const reduction = options_.reduction.get();
    Learner& learner = *learner_;
    Session& session = *session_;
    UpdateOptions update;
    update.gradient_scale = gradient_scale;
    update.only_if_finite = only_if_finite;
    if (reduction) {
        // A gradient is final for the learner only once summed over every process; the share of
        // the update is known before backward, which parameters this process steps after it.
        update.share = reduction->share();
        session.backward([&](std::size_t i) { reduction->ready(session, i); });
        reduction->finish(session);
    } else {
        update.during_backward = true;
    }
    learner.begin(update);
    try {
        // The session's parameters are the learner's, in its order: one index, i.
        if (!reduction)
            session.backward([&](std::size_t i) {
                if (learner.accept(i, gradient_view(session, i))) session.release_gradient(i);
            });
        // Those backward did not report (the loss does not use them: zero gradient, but decay and
        // momentum go on), or every one after a reduction.
        for (std::size_t i = 0; i < learner.parameters().size(); ++i)
            if (learner.waiting(i)) learner.accept(i, gradient_view(session, i));
    } catch (...) {  // nothing held is applied, the step count stays
        learner.cancel();
        throw;
    }
    const bool applied = learner.finish();
    if (reduction) reduction->updated(learner, applied);
    return applied;
}

MinibatchResult Trainer::skip(MinibatchResult r, const std::string& what, double value) {
    ++skipped_;
    r.skipped_updates = 1;
    if (options_.on_non_finite == NonFiniteAction::stop)
        throw UserError("Trainer::train_minibatch: the " + what + " is " + number(value) + " (" +
                        std::to_string(r.loss_count) + " items, after " + std::to_string(learner_->step_count()) +
                        " updates); the update was not applied. Look for a NaN or an infinity in this "
                        "minibatch's inputs, or lower the learning rate");
    return r;
}

MinibatchResult Trainer::test_minibatch(const Bindings& inputs) {
    const TrainingScope inference(false);
    session_->forward(inputs, "Trainer::test_minibatch");
    return collect();
}

void Trainer::save_checkpoint(const std::string& path, const TrainingPosition& position,
                              const CheckpointExtras& extras) const {
    if (options_.reduction && !options_.reduction->holds_whole_state())
        throw UserError(
            "Trainer::save_checkpoint: this process holds only its share of the learner's state (a "
            "sharded data-parallel update); save with loom::distributed::save_checkpoint, which "
            "gathers it first");
    CheckpointExtras all = extras;
    ByteWriter counter;
    counter.u64(samples_seen_);
    all[samples_seen_key] = counter.bytes();
    ByteWriter states;
    states.u64(generators_.size());
    for (const Rng* g : generators_) states.str(rng_state(*g));
    all[generators_key] = states.bytes();
    loom::save_checkpoint(path, learner_->parameters(), learner_.get(), position, all);
}

Checkpoint Trainer::load_checkpoint(const std::string& path,
                                    const std::function<void(const CheckpointExtras&)>& check_extras) {
    const std::string where = "checkpoint '" + path + "'";
    // The trainer's records are checked with the rest of the file, before anything changes.
    std::vector<Rng> restored;
    std::uint64_t samples_seen = samples_seen_;
    auto check = [&](const CheckpointExtras& extras) {
        if (auto it = extras.find(samples_seen_key); it != extras.end()) {
            ByteReader in(it->second, where);
            samples_seen = in.u64();
        }
        const auto it = extras.find(generators_key);
        if (it == extras.end()) return;
        ByteReader in(it->second, where);
        const std::uint64_t count = in.u64();
        if (count != generators_.size())
            throw UserError(where + " holds the state of " + std::to_string(count) +
                            " random generators (dropout), this trainer's graph draws from " +
                            std::to_string(generators_.size()) + "; build the same model as when it was saved");
        for (std::uint64_t k = 0; k < count; ++k)
            restored.push_back(rng_from_state(in.str(), where + " (random generator " + std::to_string(k) + ")"));
        if (!in.done()) throw DataError(where + " has unexpected bytes after its random generators");
    };
    auto check_all = [&](const CheckpointExtras& extras) {
        check(extras);
        if (!check_extras) return;
        CheckpointExtras theirs = extras;
        theirs.erase(generators_key);
        theirs.erase(samples_seen_key);
        check_extras(theirs);
    };
    Checkpoint c = loom::load_checkpoint(path, learner_->parameters(), learner_.get(), check_all);
    for (std::size_t k = 0; k < restored.size(); ++k) *generators_[k] = restored[k];
    samples_seen_ = samples_seen;
    c.extras.erase(generators_key);
    c.extras.erase(samples_seen_key);
    return c;
}

}  // namespace loom
