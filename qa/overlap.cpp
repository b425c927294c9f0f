#include "qa/overlap.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace loom {

double word_overlap(const std::vector<std::string>& question, const std::vector<std::string>& answer,
                    const IdfTable* idf) {
    const std::set<std::string> a(answer.begin(), answer.end());
    double score = 0;
    for (const auto& w : std::set<std::string>(question.begin(), question.end()))
        if (!is_stopword(w) && a.count(w)) score += idf ? (*idf)(w) : 1.0;
    return score;
}

std::vector<float> overlap_flags(const std::vector<std::string>& tokens, const std::vector<std::string>& other) {
    const std::set<std::string> o(other.begin(), other.end());
    std::vector<float> flags;
    for (const auto& w : tokens) flags.push_back(!is_stopword(w) && o.count(w) ? 1.0f : 0.0f);
    return flags;
}

std::vector<float> overlap_features(const std::vector<std::string>& tokens, const std::vector<std::string>& other,
                                    const IdfTable& idf) {
    const auto flags = overlap_flags(tokens, other);
    std::set<std::pair<std::string, std::string>> bigrams;
    for (std::size_t i = 0; i + 1 < other.size(); ++i) bigrams.emplace(other[i], other[i + 1]);
    auto shared = [&](std::size_t i) { return i + 1 < tokens.size() && bigrams.count({tokens[i], tokens[i + 1]}); };
    std::vector<float> out;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        out.push_back(flags[i]);
        out.push_back(static_cast<float>(flags[i] * idf(tokens[i]) / std::log(idf.documents + 1)));
        out.push_back(shared(i) || (i > 0 && shared(i - 1)) ? 1.0f : 0.0f);
    }
    return out;
}

std::vector<float> match_features(const std::vector<std::string>& tokens, const std::vector<std::string>& other,
                                  const IdfTable& idf) {
    const std::vector<float> base = overlap_features(tokens, other, idf);
    std::set<std::string> stems;
    for (const auto& w : other)
        if (!is_stopword(w)) stems.insert(crude_stem(w));
    const double largest = std::log(idf.documents + 1);
    std::vector<float> out;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const std::string& w = tokens[i];
        const float stem = !is_stopword(w) && stems.count(crude_stem(w)) ? 1.0f : 0.0f;
        const bool digit = std::any_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
        out.insert(out.end(), base.begin() + 3 * i, base.begin() + 3 * i + 3);
        out.push_back(stem);
        out.push_back(static_cast<float>(stem * idf(w) / largest));
        out.push_back(digit ? 1.0f : 0.0f);
    }
    return out;
}

}  // namespace loom
