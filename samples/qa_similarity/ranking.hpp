#pragma once
// Scoring and ranking evaluation for the QA sample: cosine scores for every pair of a data set,
// MAP / MRR per question group, the word-overlap baseline, and the combined score (cosine plus
// word-overlap features, weighted by a logistic regression fitted on the training pairs, as Yu et
// al. 2014 did for answer selection).
#include <array>
#include <vector>

#include <loom.hpp>

#include "model.hpp"

namespace qa {

// Token ids of both sides of every pair.
struct EncodedPairs {
    std::vector<std::vector<std::size_t>> questions, answers;
};
EncodedPairs encode(const loom::QaData& data, const loom::Vocabulary& vocab);

// cos(q, a) for every pair, in batches.
std::vector<double> score_pairs(const Model& model, const EncodedPairs& pairs, std::size_t batch = 64);

// [cosine, overlap count, idf-weighted overlap] per pair.
using Features = std::array<double, 3>;
std::vector<Features> pair_features(const loom::QaData& data, const std::vector<double>& cosine,
                                    const loom::IdfTable& idf);

// Logistic regression on the features (standardized), fitted by full-batch gradient descent.
class Combiner {
public:
    void fit(const std::vector<Features>& x, const std::vector<int>& labels);
    double score(const Features& f) const;
    std::vector<double> scores(const std::vector<Features>& x) const;
    const std::array<double, 3>& weights() const { return w_; }

private:
    std::array<double, 3> mean_{}, scale_{1, 1, 1}, w_{};
    double bias_ = 0;
};

}  // namespace qa
