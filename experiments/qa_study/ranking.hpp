#pragma once
// Scoring and ranking evaluation for the QA sample: cosine scores for every pair of a data set,
// MAP / MRR per question group, the word-overlap baseline, and the combined score (cosine plus
// word-overlap features, weighted by a logistic regression fitted on the training pairs, as Yu et
// al. 2014 did for answer selection).
#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include <loom.hpp>

#include "model.hpp"
#include "study_metrics.hpp"

namespace qa {

// Per token of `tokens`: 1 if it is a non-stopword that also occurs in `other` (ASCII
// case-insensitive, as the word-overlap baseline counts), else 0.
std::vector<float> overlap_flags(const std::vector<std::string>& tokens, const std::vector<std::string>& other);
// A batch of flag sequences as a sequence value of [1] per step.
loom::Value flag_sequences(const std::vector<std::vector<float>>& flags);

// Token ids of both sides of every pair, and each side's overlap flags against the other.
struct EncodedPairs {
    std::vector<std::vector<std::size_t>> questions, answers;
    std::vector<std::vector<float>> question_flags, answer_flags;
};
EncodedPairs encode(const loom::QaData& data, const loom::Vocabulary& vocab);

// cos(q, a) for every pair, in batches.
std::vector<double> score_pairs(const Model& model, const EncodedPairs& pairs, std::size_t batch = 64);

// A crude English suffix stripper for overlap features ("cities" -> "city", "played" -> "play",
// "games" and "game" -> "gam"): forms of one word then count as shared. Words with a character
// other than an ASCII letter, and words under 4 letters, are kept as they are.
std::string crude_stem(const std::string& lower_word);

// The capitalised words of each question (its first token excepted), lowercased, by the question's
// lowercased text: the data is lowercased when read (the vocabulary is), so the names come from a
// second, cased read of the same files.
using QuestionNames = std::unordered_map<std::string, std::vector<std::string>>;
void add_question_names(const loom::QaData& cased, QuestionNames& names);

// Inverse document frequencies of the lowercased training words and of their stems, and the
// questions' names (empty for the synthetic data).
struct OverlapIdf {
    IdfTable words, stems;
    QuestionNames names;
    static OverlapIdf fit(const loom::QaData& train, QuestionNames names = {});
};

// Per pair: cosine; shared non-stopword tokens, plain and idf-weighted (Yu et al. 2014), each also
// as a fraction of the question's; shared token bigrams; the same four counts on stems; and
// shared capitalised question words (the question's first token excepted). A question's names are
// mostly its topic, which every candidate of the section mentions: the ranker learns a negative
// weight for them, so shared ordinary words count more.
inline constexpr std::size_t num_features = 11;
using Features = std::array<double, num_features>;
// Which features Yu et al. used (the cosine, the plain and idf-weighted counts and their fractions,
// bigrams): the first 6.
inline constexpr std::size_t num_yu_features = 6;
std::vector<Features> pair_features(const loom::QaData& data, const std::vector<double>& cosine, const OverlapIdf& idf);

// A linear score on the standardized features, fitted as a pairwise ranker (RankNet): logistic
// loss on the score difference of every (true, wrong) candidate pair of the same question, plus a
// small L2 term, minimized by Newton's method (the stem and word counts are nearly collinear:
// gradient descent stops far from the minimum along that direction). Ranking metrics only compare candidates of one
// question, so the fit does too.
class Combiner {
public:
    void fit(const std::vector<Features>& x, const std::vector<int>& labels, const std::vector<std::size_t>& groups);
    double score(const Features& f) const;
    std::vector<double> scores(const std::vector<Features>& x) const;
    const Features& weights() const { return w_; }

private:
    Features mean_{}, scale_{}, w_{};
    double bias_ = 0;
};

}  // namespace qa
