#pragma once
// The study's word statistics (formerly in core/data_metrics): see study_metrics.cpp.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace qa {

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

}  // namespace qa
