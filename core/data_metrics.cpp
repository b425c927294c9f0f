#include "core/data_metrics.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <random>
#include <unordered_set>

#include "core/data_text.hpp"
#include "core/errors.hpp"

namespace loom {

namespace {

struct GroupResult {
    double average_precision = 0.0;
    double reciprocal_rank = 0.0;
};

GroupResult rank_group(std::vector<std::size_t>& members, const std::vector<double>& scores,
                       const std::vector<int>& labels, TieBreak ties, std::size_t positives) {
    std::stable_sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
        if (scores[a] != scores[b]) return scores[a] > scores[b];
        if (ties == TieBreak::pessimistic) return labels[a] < labels[b];
        if (ties == TieBreak::optimistic) return labels[a] > labels[b];
        return false;
    });
    GroupResult r;
    std::size_t hits = 0;
    for (std::size_t rank = 1; rank <= members.size(); ++rank) {
        if (labels[members[rank - 1]] != 1) continue;
        ++hits;
        if (hits == 1) r.reciprocal_rank = 1.0 / static_cast<double>(rank);
        r.average_precision += static_cast<double>(hits) / static_cast<double>(rank);
    }
    r.average_precision /= static_cast<double>(positives);
    return r;
}

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

RankingMetrics ranking_metrics(const std::vector<std::size_t>& groups, const std::vector<double>& scores,
                               const std::vector<int>& labels, TieBreak ties) {
    if (groups.size() != scores.size() || groups.size() != labels.size())
        throw UserError("ranking_metrics: groups (" + std::to_string(groups.size()) + "), scores (" +
                        std::to_string(scores.size()) + ") and labels (" + std::to_string(labels.size()) +
                        ") must have one entry per candidate");
    // Members of each group in input order; groups in order of first appearance.
    std::unordered_map<std::size_t, std::size_t> slot_of_group;
    std::vector<std::vector<std::size_t>> members;
    for (std::size_t i = 0; i < groups.size(); ++i) {
        if (labels[i] != 0 && labels[i] != 1)
            throw UserError("ranking_metrics: label of candidate " + std::to_string(i) + " is " +
                            std::to_string(labels[i]) + "; labels must be 0 or 1");
        const auto [it, inserted] = slot_of_group.try_emplace(groups[i], members.size());
        if (inserted) members.emplace_back();
        members[it->second].push_back(i);
    }
    RankingMetrics m;
    for (auto& group : members) {
        const auto positives = static_cast<std::size_t>(
            std::count_if(group.begin(), group.end(), [&](std::size_t i) { return labels[i] == 1; }));
        if (positives == 0) {
            ++m.skipped_no_positive;
            continue;
        }
        const GroupResult r = rank_group(group, scores, labels, ties, positives);
        m.map += r.average_precision;
        m.mrr += r.reciprocal_rank;
        m.average_precision.push_back(r.average_precision);
        ++m.questions;
    }
    if (m.questions > 0) {
        m.map /= static_cast<double>(m.questions);
        m.mrr /= static_cast<double>(m.questions);
    }
    return m;
}

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

}  // namespace loom
