#pragma once
// What the QA sample prints about a ranking: MAP / MRR lines, and the combined score (cosine plus
// word-overlap features through a pairwise ranker) next to the overlap-only rankers and baseline.
#include <string>
#include <vector>

#include <loom.hpp>

#include "ranking.hpp"

namespace qa {

loom::RankingMetrics report_ranking(const std::string& what, const loom::QaData& data,
                                    const std::vector<double>& scores);

// The rankers fitted on `fit` with `fit_cosine` (cosines the network gives questions it was not
// trained on: held-out or out-of-fold), reported on `eval` with `eval_cosine`. The 2-step variant
// fits the overlap-only ranker on `overlap_fit` (every training pair: its features cannot overfit
// the way a cosine does), then weighs its score and the cosine on `fit`.
void report_combined(const loom::QaData& fit, const std::vector<double>& fit_cosine, const loom::QaData& eval,
                     const std::vector<double>& eval_cosine, const OverlapIdf& idf, const loom::QaData& overlap_fit,
                     const std::string& fitted_on);

// The rankers of report_combined judged on the training questions alone (the choices between them
// are made here, never on the evaluation file): each is fitted on all folds but one and ranks the
// questions of that fold; prints the MAP over all training questions of those out-of-fold rankings.
void report_rankers_out_of_fold(const loom::QaData& train, const std::vector<double>& cosine, const OverlapIdf& idf,
                                const std::vector<std::size_t>& fold_of_group, std::size_t folds);

}  // namespace qa
