#pragma once
// The training loop of the QA sample, shared by the plain run and cross-fitting: minibatches of
// (question, true answer, wrong answer) triplets (or labelled pairs for --loss mse) through a
// Trainer, with a callback after every epoch for evaluation, epoch selection and checkpoints.
#include <functional>
#include <memory>
#include <string>

#include <loom.hpp>

#include "ranking.hpp"
#include "triplet_model.hpp"

namespace qa {

struct TrainOptions {
    std::size_t epochs = 3, batch = 32;
    double lr = 1e-3, clip = 5.0;
    std::string loss = "hinge";  // or "mse"
    bool freeze_embedding = false;
    // >= 0: the hinge loss sees only wrong answers sharing at least (the true answer's overlap count
    // - hard_negatives) words with the question, the pairs the word-overlap score ranks wrong or
    // nearly so: the network then learns what the overlap features cannot tell.
    int hard_negatives = -1;
    std::uint64_t seed = 1;  // data order
    std::string tag = "train";
};

// Adam on the model's parameters (without the embeddings if frozen), minimizing the chosen loss.
std::unique_ptr<loom::Trainer> make_trainer(const TripletModel& model, const TrainOptions& o);

// Trains from `start` to the end of epoch o.epochs, printing the loss per epoch; after every epoch
// calls after_epoch(0-based epoch, the data position to resume from).
void train_epochs(const TripletModel& model, loom::Trainer& trainer, const loom::QaData& data,
                  const EncodedPairs& pairs, const TrainOptions& o, const loom::TrainingPosition& start,
                  const std::function<void(std::size_t, const loom::DataPosition&)>& after_epoch);

// The current parameter values, and putting them back (--select-epoch).
std::vector<xt::xarray<float>> parameter_values(const TripletModel& model);
void set_parameter_values(const TripletModel& model, const std::vector<xt::xarray<float>>& values);

}  // namespace qa
