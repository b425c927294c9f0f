#pragma once
// The sample's text side: reading question/sentence/label files through loom's English tokenizer,
// and the word-overlap signals (the baseline the network must beat, the flags it gets as inputs).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <loom.hpp>

namespace qa {

// question<TAB>sentence[<TAB>label] per line, raw or pre-tokenised text, an optional header line;
// rows of one question need not be contiguous. Labels are required unless `labels_optional`.
// Throws DataError "file:line: reason".
loom::QaData read_pairs(const std::string& path, bool labels_optional = false);

// Function words; tokens without a letter or digit count too.
bool is_stopword(const std::string& token);

// Document frequencies of the training text (each question once, every sentence).
struct Idf {
    std::map<std::string, double> document_frequency;
    double documents = 0;
    static Idf fit(const loom::QaData& data);
    double operator()(const std::string& word) const;  // log(N / df); unseen: log(N + 1)
};

// Distinct non-stopwords shared by question and answer, each counted 1 or, with idf, its idf.
double word_overlap(const std::vector<std::string>& question, const std::vector<std::string>& answer,
                    const Idf* idf = nullptr);
// Per token of `tokens`: 1 if it is a non-stopword that also occurs in `other`, else 0.
std::vector<float> overlap_flags(const std::vector<std::string>& tokens, const std::vector<std::string>& other);
// Per token, 3 numbers (row-major [tokens, 3]): its overlap flag; the flag times the word's idf over
// the largest idf (rare shared words count more); 1 if it and a neighbour occur side by side in `other`.
std::vector<float> overlap_features(const std::vector<std::string>& tokens, const std::vector<std::string>& other,
                                    const Idf& idf);

// The 95 % interval of mean(a - b) when the items (questions) are resampled with replacement.
struct Interval {
    double mean, low, high;
};
Interval paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t seed = 1);

}  // namespace qa
