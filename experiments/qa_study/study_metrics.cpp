// The answer-ranking study's word statistics, moved out of core/data_metrics (they are this
// study's choices, not a library's): stopwords, idf, the overlap count and a paired bootstrap.
#include "study_metrics.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <random>
#include <unordered_set>

#include <loom.hpp>

#include "data/text.hpp"

namespace qa {

using namespace loom;

namespace {

// Function words and very common verbs of English questions and sentences.
const std::unordered_set<std::string>& stopwords() {
    static const std::unordered_set<std::string> words = {
        "a",     "about",   "above",  "after",  "again",  "against", "all",     "also",    "am",      "an",
        "and",   "any",     "are",    "as",     "at",     "be",      "because", "been",    "before",  "being",
        "below", "between", "both",   "but",    "by",     "can",     "could",   "did",     "do",      "does",
        "doing", "down",    "during", "each",   "few",    "for",     "from",    "further", "had",     "has",
        "have",  "having",  "he",     "her",    "here",   "hers",    "herself", "him",     "himself", "his",
        "how",   "i",       "if",     "in",     "into",   "is",      "it",      "its",     "itself",  "just",
        "me",    "more",    "most",   "my",     "myself", "no",      "nor",     "not",     "now",     "of",
        "off",   "on",      "once",   "only",   "or",     "other",   "our",     "ours",    "out",     "over",
        "own",   "same",    "she",    "should", "so",     "some",    "such",    "than",    "that",    "the",
        "their", "theirs",  "them",   "then",   "there",  "these",   "they",    "this",    "those",   "through",
        "to",    "too",     "under",  "until",  "up",     "very",    "was",     "we",      "were",    "what",
        "when",  "where",   "which",  "while",  "who",    "whom",    "whose",   "why",     "will",    "with",
        "would", "you",     "your",   "yours",  "'s",     "n't",     "'re",     "'ve",     "'ll",     "'d",
        "'m",    "one",     "many",   "much",   "may",    "might",   "must",    "shall",   "yet",     "via",
    };
    return words;
}

bool has_alphanumeric(const std::string& token) {
    return std::any_of(token.begin(), token.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u >= 0x80 || std::isalnum(u) != 0;  // bytes of UTF-8 letters count as letters
    });
}

std::unordered_set<std::string> content_words(const std::vector<std::string>& tokens) {
    std::unordered_set<std::string> out;
    for (const auto& t : tokens) {
        std::string lower = data_text::ascii_lower(t);
        if (has_alphanumeric(lower) && stopwords().count(lower) == 0) out.insert(std::move(lower));
    }
    return out;
}

}  // namespace

PairedDifference paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, std::size_t resamples,
                                  std::uint64_t seed) {
    if (a.size() != b.size() || a.empty())
        throw UserError("paired_bootstrap: need two non-empty series of the same length, got " +
                        std::to_string(a.size()) + " and " + std::to_string(b.size()));
    if (resamples == 0) throw UserError("paired_bootstrap: resamples must be at least 1");
    const std::size_t n = a.size();
    std::vector<double> d(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = a[i] - b[i];
    PairedDifference r;
    r.mean = std::accumulate(d.begin(), d.end(), 0.0) / static_cast<double>(n);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> pick(0, n - 1);
    std::vector<double> means(resamples);
    std::size_t not_above = 0;
    for (auto& m : means) {
        double s = 0.0;
        for (std::size_t i = 0; i < n; ++i) s += d[pick(rng)];
        m = s / static_cast<double>(n);
        not_above += m <= 0.0;
    }
    std::sort(means.begin(), means.end());
    auto quantile = [&](double q) {
        return means[std::min(resamples - 1, static_cast<std::size_t>(q * static_cast<double>(resamples)))];
    };
    r.low = quantile(0.025);
    r.high = quantile(0.975);
    r.at_most_zero = static_cast<double>(not_above) / static_cast<double>(resamples);
    return r;
}

bool is_stopword(const std::string& token) {
    const std::string lower = data_text::ascii_lower(token);
    return !has_alphanumeric(lower) || stopwords().count(lower) != 0;
}

IdfTable IdfTable::fit(const std::vector<std::vector<std::string>>& documents) {
    std::unordered_map<std::string, std::size_t> document_frequency;
    for (const auto& doc : documents) {
        std::unordered_set<std::string> seen;
        for (const auto& t : doc) seen.insert(data_text::ascii_lower(t));
        for (const auto& w : seen) ++document_frequency[w];
    }
    IdfTable table;
    table.num_documents_ = documents.size();
    const auto n = static_cast<double>(documents.size());
    for (const auto& [word, df] : document_frequency) table.idf_[word] = std::log(n / static_cast<double>(df));
    return table;
}

double IdfTable::idf(const std::string& word) const {
    const auto it = idf_.find(data_text::ascii_lower(word));
    return it != idf_.end() ? it->second : std::log(static_cast<double>(num_documents_) + 1.0);
}

double word_overlap_score(const std::vector<std::string>& question, const std::vector<std::string>& answer,
                          const IdfTable* idf) {
    const std::unordered_set<std::string> q = content_words(question);
    const std::unordered_set<std::string> a = content_words(answer);
    double score = 0.0;
    for (const auto& w : q)
        if (a.count(w) != 0) score += idf ? idf->idf(w) : 1.0;
    return score;
}

}  // namespace qa
