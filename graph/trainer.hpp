#pragma once
// Trainer: one loss, an optional evaluation metric and a learner, over a Session built once and
// reused for every minibatch (forward, backward, update).
#include <memory>
#include <string>

#include "graph/checkpoint.hpp"
#include "graph/learners.hpp"
#include "graph/session.hpp"

namespace loom {

// What one minibatch gave: sums over every item (and sequence step) and how many there were.
struct MinibatchResult {
    double loss_sum = 0.0;
    std::size_t loss_count = 0;
    double metric_sum = 0.0;
    std::size_t metric_count = 0;
    double average_loss() const { return loss_count ? loss_sum / static_cast<double>(loss_count) : 0.0; }
    double average_metric() const { return metric_count ? metric_sum / static_cast<double>(metric_count) : 0.0; }
};

struct TrainerOptions {
    // true: the learner sees the gradient of the MEAN loss over the minibatch's items (the gradient
    // of the sum divided by loss_count), so the learning rate does not depend on the minibatch size.
    // false: the gradient of the sum, as CNTK's per-sample learning rates.
    bool average_gradients = true;
};

class Trainer {
public:
    // `metric` may be a default-constructed Variable (no metric). The learner's parameters are the
    // ones trained; the loss may have any dynamic axes (its sum over every item is minimized).
    Trainer(Variable loss, Variable metric, std::unique_ptr<Learner> learner, TrainerOptions options = {});

    // Forward, backward and one learner step.
    MinibatchResult train_minibatch(const Bindings& inputs);
    // Forward only: parameters are not changed.
    MinibatchResult test_minibatch(const Bindings& inputs);

    const Variable& loss() const { return loss_; }
    const Variable& metric() const { return metric_; }
    Learner& learner() { return *learner_; }
    const Learner& learner() const { return *learner_; }
    Session& session() { return *session_; }
    std::uint64_t total_samples_seen() const { return samples_seen_; }

    // The learner's parameters, its state and the trainer's sample count, plus where the data
    // reader was and anything the caller wants to keep (see graph/checkpoint.hpp).
    void save_checkpoint(const std::string& path, const TrainingPosition& position = {},
                         const CheckpointExtras& extras = {}) const;
    Checkpoint load_checkpoint(const std::string& path);

private:
    MinibatchResult collect() const;

    Variable loss_, metric_;
    std::unique_ptr<Learner> learner_;
    TrainerOptions options_;
    std::unique_ptr<Session> session_;
    std::uint64_t samples_seen_ = 0;
};

}  // namespace loom
