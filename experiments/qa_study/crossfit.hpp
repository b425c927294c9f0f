#pragma once
// Cross-fitting (--folds K): the training questions are split into K folds and one network is
// trained per fold on the other K - 1, so every training pair gets a cosine from a network that
// never saw its question ("out of fold"), distributed as the cosines of unseen evaluation questions
// are. The combined score's ranker is then fitted on all training questions instead of a small
// held-out part, and the evaluation cosine is the mean of the K networks' cosines.
#include <loom.hpp>

#include "ranking.hpp"
#include "training.hpp"
#include "triplet_model.hpp"

namespace qa {

struct CrossFitOptions {
    std::size_t folds = 3;
    bool select_epoch = false;  // the epoch whose out-of-fold cosines rank the training questions best
    std::size_t min_count = 1;  // vocabulary of each fold's training part
    std::uint64_t seed = 1;     // the split into folds
    std::string dump;           // file for every pair's features and cosines (analysis), if set
    QuestionNames names;        // for the overlap features
    TrainOptions train;
    ModelOptions model;
};

void run_cross_fitting(const loom::QaData& train, const loom::QaData& eval, const CrossFitOptions& o);

}  // namespace qa
