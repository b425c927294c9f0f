#include "text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include "data/text.hpp"

namespace qa {

using namespace loom;

QaData read_pairs(const std::string& path, bool labels_optional) {
    std::ifstream in = data_text::open_for_reading(path);
    QaData data;
    data.source = path;
    std::unordered_map<std::string, std::size_t> group_of;
    std::string line;
    for (std::size_t number = 1; data_text::read_line(in, line); ++number) {
        if (data_text::is_blank(line)) continue;
        std::vector<std::string> cols;
        std::istringstream split(line);
        for (std::string col; std::getline(split, col, '\t');) cols.push_back(col);
        const bool labelled = cols.size() == 3, first = data.pairs.empty() && group_of.empty();
        if (first && data_text::ascii_lower(cols[0]) == "question") continue;  // a header line
        if (cols.size() != 3 && !(labels_optional && cols.size() == 2))
            data_text::fail(path, number,
                            "expected question<TAB>sentence<TAB>label, found " + std::to_string(cols.size()) +
                                " tab-separated columns");
        if (labelled && cols[2] != "0" && cols[2] != "1")
            data_text::fail(path, number, "label '" + cols[2] + "' is not 0 or 1");
        QaPair p{tokenize_english(cols[0]), tokenize_english(cols[1]), labelled && cols[2] == "1", 0, number};
        if (p.question.empty() || p.answer.empty())
            data_text::fail(path, number, std::string(p.question.empty() ? "question" : "sentence") + " is empty");
        auto key = data_text::ascii_lower(cols[0]);
        p.group = group_of.emplace(key, group_of.size()).first->second;
        data.pairs.push_back(std::move(p));
    }
    if (data.pairs.empty()) throw DataError(path + ": no question/sentence pairs");
    data.num_groups = group_of.size();
    return data;
}

bool is_stopword(const std::string& token) {
    static const std::set<std::string> words = [] {
        std::istringstream list(
            "a about above after again against all also am an and any are as at be because been before being "
            "below between both but by can could did do does doing down during each few for from further had has "
            "have having he her here hers herself him himself his how i if in into is it its itself just me more "
            "most my myself no nor not now of off on once only or other our ours out over own same she should so "
            "some such than that the their theirs them then there these they this those through to too under "
            "until up very was we were what when where which while who whom whose why will with would you your "
            "yours 's n't 're 've 'll 'd 'm one many much may might must shall yet via");
        return std::set<std::string>(std::istream_iterator<std::string>(list), {});
    }();
    const bool has_alnum = std::any_of(token.begin(), token.end(), [](char c) {
        return static_cast<unsigned char>(c) >= 0x80 || std::isalnum(static_cast<unsigned char>(c));
    });
    return !has_alnum || words.count(data_text::ascii_lower(token));
}

Idf Idf::fit(const QaData& data) {
    Idf idf;
    const auto lists = data.token_lists();
    for (const auto& tokens : lists)
        for (const auto& w : std::set<std::string>(tokens.begin(), tokens.end())) ++idf.document_frequency[w];
    idf.documents = static_cast<double>(lists.size());
    return idf;
}

double Idf::operator()(const std::string& word) const {
    const auto it = document_frequency.find(word);
    return it == document_frequency.end() ? std::log(documents + 1) : std::log(documents / it->second);
}

double word_overlap(const std::vector<std::string>& question, const std::vector<std::string>& answer, const Idf* idf) {
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
                                    const Idf& idf) {
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

Interval paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t seed) {
    if (a.size() != b.size() || a.empty()) throw UserError("paired_bootstrap: two series of one non-zero length");
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> pick(0, a.size() - 1);
    std::vector<double> means(2000);
    for (auto& m : means) {
        for (std::size_t i = 0; i < a.size(); ++i) {
            const std::size_t k = pick(rng);
            m += a[k] - b[k];
        }
        m /= static_cast<double>(a.size());
    }
    std::sort(means.begin(), means.end());
    double mean = 0;
    for (std::size_t i = 0; i < a.size(); ++i) mean += (a[i] - b[i]) / static_cast<double>(a.size());
    return {mean, means[50], means[1949]};
}

}  // namespace qa
