#pragma once
/// \file
/// Word overlap between a question and a candidate answer sentence: the baseline every answer
/// selection model is measured against (count the question's content words found in the sentence,
/// optionally each weighted by its inverse document frequency), and per-token overlap features a
/// network can take beside each embedded token (Severyn & Moschitti 2015; Yu et al. 2014). The word
/// statistics they stand on (stopwords, IDF, the stemmer) are text/words.hpp.
#include <cstddef>
#include <string>
#include <vector>

#include "text/words.hpp"

namespace loom {

/// Distinct non-stopwords shared by question and answer, each counted 1 or, with idf, its idf.
double word_overlap(const std::vector<std::string>& question, const std::vector<std::string>& answer,
                    const IdfTable* idf = nullptr);
/// Per token of `tokens`: 1 if it is a non-stopword that also occurs in `other`, else 0.
std::vector<float> overlap_flags(const std::vector<std::string>& tokens, const std::vector<std::string>& other);
/// Per token, 3 numbers (row-major [tokens, 3]): its overlap flag; the flag times the word's idf over
/// the largest idf (rare shared words count more); 1 if it and a neighbour occur side by side in `other`.
std::vector<float> overlap_features(const std::vector<std::string>& tokens, const std::vector<std::string>& other,
                                    const IdfTable& idf);

/// The numbers per token of match_features.
inline constexpr std::size_t match_feature_count = 6;
/// Per token, match_feature_count numbers (row-major [tokens, match_feature_count]): the three of
/// overlap_features, then: 1 if its stem (crude_stem) is a non-stopword's stem in `other` (words
/// of one root in other forms: "founded" / "founding"); that times the word's idf over the largest idf;
/// 1 if the token holds a digit (dates and counts are what "when" and "how many" ask for, and
/// rare numbers have untrained embeddings).
std::vector<float> match_features(const std::vector<std::string>& tokens, const std::vector<std::string>& other,
                                  const IdfTable& idf);

}  // namespace loom
