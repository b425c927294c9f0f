#pragma once
// Ranking metrics for answer selection, and the word-overlap baseline scorer.
//
// MAP and MRR are computed per question group: candidates are ranked by decreasing score; the
// average precision of a group is the mean over its positives of (positives up to that rank) /
// rank, and its reciprocal rank is 1 / rank of the first positive. Groups without any positive
// have neither, so they are skipped and counted. Equal scores are ordered by `TieBreak`: a
// baseline with integer scores has many ties, and the choice moves MAP by several points.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom {

enum class TieBreak {
    input_order,  // candidates keep their order in the data (a stable sort)
    pessimistic,  // negatives before positives: a lower bound
    optimistic,   // positives before negatives: an upper bound
};

struct RankingMetrics {
    double map = 0.0;
    double mrr = 0.0;
    std::size_t questions = 0;              // groups that were scored
    std::size_t skipped_no_positive = 0;    // groups without any positive label
    std::vector<double> average_precision;  // per scored group, groups in order of first appearance
};

// How sure a difference of means over the same questions is: a paired bootstrap resamples the
// questions (with replacement) `resamples` times. E.g. the MAP of one ranker minus another's, from
// both rankers' per-question average precisions.
struct PairedDifference {
    double mean = 0.0;             // mean of a - b
    double low = 0.0, high = 0.0;  // the central 95 % of the resampled means
    double at_most_zero = 0.0;     // fraction of resampled means <= 0 (a one-sided p-value for a > b)
};
PairedDifference paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b,
                                  std::size_t resamples = 2000, std::uint64_t seed = 1);

// groups[i], scores[i], labels[i] describe candidate i; labels are 0 or 1. Group ids need not be
// contiguous or sorted. Throws UserError for vectors of different sizes or labels not in {0, 1}.
RankingMetrics ranking_metrics(const std::vector<std::size_t>& groups, const std::vector<double>& scores,
                               const std::vector<int>& labels, TieBreak ties = TieBreak::input_order);

// A small built-in English stopword list; tokens without any letter or digit (punctuation) count as
// stopwords too. The comparison is ASCII case-insensitive.
bool is_stopword(const std::string& token);

// Inverse document frequencies, idf(w) = log(N / df(w)) over N documents (token lists); a word
// seen in no document gets log(N + 1), more than any seen word.
class IdfTable {
public:
    static IdfTable fit(const std::vector<std::vector<std::string>>& documents);
    double idf(const std::string& word) const;
    std::size_t num_documents() const { return num_documents_; }

private:
    std::unordered_map<std::string, double> idf_;
    std::size_t num_documents_ = 0;
};

// The number of distinct non-stopword tokens that occur in both the question and the answer
// (ASCII case-insensitive), each weighted by its idf when a table is given.
double word_overlap_score(const std::vector<std::string>& question, const std::vector<std::string>& answer,
                          const IdfTable* idf = nullptr);

}  // namespace loom
