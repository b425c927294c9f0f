#include "graph/trainer.hpp"

#include "core/errors.hpp"
#include "core/parallel.hpp"
#include "core/serialization.hpp"

namespace loom {

namespace {
// The trainer keeps its own counter among the extras, under a name users will not pick.
constexpr const char* samples_seen_key = "loom.trainer.samples_seen";
}  // namespace

Trainer::Trainer(Variable loss, Variable metric, std::unique_ptr<Learner> learner, TrainerOptions options)
    : loss_(std::move(loss)), metric_(std::move(metric)), learner_(std::move(learner)), options_(options) {
    if (!loss_) throw UserError("Trainer: the loss is an empty Variable");
    if (!learner_) throw UserError("Trainer: no learner given");
    std::vector<Variable> outputs{loss_};
    if (metric_ && !(metric_ == loss_)) outputs.push_back(metric_);
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
    session_->forward(inputs);
    const MinibatchResult r = collect();
    if (r.loss_count == 0) throw UserError("Trainer::train_minibatch: the minibatch has no items (empty loss)");
    const double scale = options_.average_gradients ? 1.0 / static_cast<double>(r.loss_count) : 1.0;
    if (inter_op_threads() > 1 && learner_->can_update_early()) {
        // Each parameter is updated as soon as its gradient is final, on the worker that finished
        // it, while backward goes on: the memory-bound update overlaps the GEMMs still running.
        learner_->begin_update(scale);
        session_->backward([&](std::size_t i) {
            learner_->update_parameter(*session_, i);
            session_->release_gradient(i);
        });
        learner_->end_update(*session_);
    } else {
        session_->backward();
        learner_->update(*session_, scale);
        session_->release_gradients();
    }
    samples_seen_ += r.loss_count;
    return r;
}

MinibatchResult Trainer::test_minibatch(const Bindings& inputs) {
    session_->forward(inputs);
    return collect();
}

void Trainer::save_checkpoint(const std::string& path, const TrainingPosition& position,
                              const CheckpointExtras& extras) const {
    CheckpointExtras all = extras;
    ByteWriter counter;
    counter.u64(samples_seen_);
    all[samples_seen_key] = counter.bytes();
    loom::save_checkpoint(path, learner_->parameters(), learner_.get(), position, all);
}

Checkpoint Trainer::load_checkpoint(const std::string& path) {
    Checkpoint c = loom::load_checkpoint(path, learner_->parameters(), learner_.get());
    if (auto it = c.extras.find(samples_seen_key); it != c.extras.end()) {
        ByteReader in(it->second, "checkpoint '" + path + "'");
        samples_seen_ = in.u64();
        c.extras.erase(it);
    }
    return c;
}

}  // namespace loom
