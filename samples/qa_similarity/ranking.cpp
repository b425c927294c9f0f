#include "ranking.hpp"

#include <cctype>
#include <cmath>
#include <map>
#include <set>

namespace qa {

using namespace loom;

namespace {
std::string lower(std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
}
}  // namespace

std::vector<float> overlap_flags(const std::vector<std::string>& tokens, const std::vector<std::string>& other) {
    std::set<std::string> other_words;
    for (const auto& t : other) other_words.insert(lower(t));
    std::vector<float> flags;
    flags.reserve(tokens.size());
    for (const auto& t : tokens) {
        const std::string w = lower(t);
        flags.push_back(!is_stopword(w) && other_words.count(w) ? 1.0f : 0.0f);
    }
    return flags;
}

Value flag_sequences(const std::vector<std::vector<float>>& flags) {
    std::vector<xt::xarray<float>> seqs;
    seqs.reserve(flags.size());
    for (const auto& f : flags) {
        xt::xarray<float> s = xt::zeros<float>({f.size(), std::size_t{1}});
        for (std::size_t t = 0; t < f.size(); ++t) s(t, 0) = f[t];
        seqs.push_back(std::move(s));
    }
    return Value::sequences(seqs);
}

EncodedPairs encode(const QaData& data, const Vocabulary& vocab) {
    EncodedPairs out;
    for (const auto& p : data.pairs) {
        out.questions.push_back(vocab.ids(p.question));
        out.answers.push_back(vocab.ids(p.answer));
        out.question_flags.push_back(overlap_flags(p.question, p.answer));
        out.answer_flags.push_back(overlap_flags(p.answer, p.question));
    }
    return out;
}

std::vector<double> score_pairs(const Model& model, const EncodedPairs& pairs, std::size_t batch) {
    Session session({model.cosine});
    std::vector<double> scores;
    for (std::size_t start = 0; start < pairs.questions.size(); start += batch) {
        const std::size_t end = std::min(start + batch, pairs.questions.size());
        std::vector<std::vector<std::size_t>> q(pairs.questions.begin() + start, pairs.questions.begin() + end);
        std::vector<std::vector<std::size_t>> a(pairs.answers.begin() + start, pairs.answers.begin() + end);
        Bindings in{{model.question, Value::index_sequences(q)}, {model.answer, Value::index_sequences(a)}};
        if (model.options.overlap_inputs) {
            in.emplace(model.question_flags,
                       flag_sequences({pairs.question_flags.begin() + start, pairs.question_flags.begin() + end}));
            in.emplace(model.answer_flags,
                       flag_sequences({pairs.answer_flags.begin() + start, pairs.answer_flags.begin() + end}));
        }
        session.forward(in);
        const auto cos = session.value(model.cosine).batch();
        for (std::size_t i = 0; i < end - start; ++i) scores.push_back(cos(i, 0));
    }
    return scores;
}

namespace {
Features overlap_features(const QaPair& p, double cosine, const IdfTable& idf) {
    std::set<std::string> answer_words;
    for (const auto& t : p.answer) answer_words.insert(lower(t));
    std::set<std::string> seen;
    double question_count = 0, question_idf = 0;
    for (const auto& t : p.question) {
        const std::string w = lower(t);
        if (is_stopword(w) || !seen.insert(w).second) continue;
        question_count += 1;
        question_idf += idf.idf(w);
    }
    const double count = word_overlap_score(p.question, p.answer),
                 weighted = word_overlap_score(p.question, p.answer, &idf);
    std::set<std::pair<std::string, std::string>> answer_bigrams;
    for (std::size_t i = 1; i < p.answer.size(); ++i)
        answer_bigrams.insert({lower(p.answer[i - 1]), lower(p.answer[i])});
    double bigrams = 0;
    for (std::size_t i = 1; i < p.question.size(); ++i)
        bigrams += answer_bigrams.count({lower(p.question[i - 1]), lower(p.question[i])});
    return {cosine,
            count,
            weighted,
            question_count ? count / question_count : 0.0,
            question_idf > 0 ? weighted / question_idf : 0.0,
            bigrams};
}
}  // namespace

std::vector<Features> pair_features(const QaData& data, const std::vector<double>& cosine, const IdfTable& idf) {
    std::vector<Features> out;
    for (std::size_t i = 0; i < data.pairs.size(); ++i) out.push_back(overlap_features(data.pairs[i], cosine[i], idf));
    return out;
}

void Combiner::fit(const std::vector<Features>& x, const std::vector<int>& labels,
                   const std::vector<std::size_t>& groups) {
    const double n = static_cast<double>(x.size());
    for (std::size_t k = 0; k < num_features; ++k) {
        double m = 0, v = 0;
        for (const auto& f : x) m += f[k];
        m /= n;
        for (const auto& f : x) v += (f[k] - m) * (f[k] - m);
        mean_[k] = m;
        scale_[k] = v > 0 ? 1.0 / std::sqrt(v / n) : 1.0;
    }
    // Standardized differences (true minus wrong) of every candidate pair within a question.
    std::map<std::size_t, std::vector<std::size_t>> by_group;
    for (std::size_t i = 0; i < x.size(); ++i) by_group[groups[i]].push_back(i);
    std::vector<Features> diffs;
    for (const auto& [group, members] : by_group)
        for (std::size_t i : members)
            for (std::size_t j : members) {
                if (labels[i] != 1 || labels[j] != 0) continue;
                Features d{};
                for (std::size_t k = 0; k < num_features; ++k) d[k] = (x[i][k] - x[j][k]) * scale_[k];
                diffs.push_back(d);
            }
    w_ = {};
    bias_ = 0;  // a constant does not change a ranking
    if (diffs.empty()) return;
    for (int it = 0; it < 500; ++it) {
        Features gw{};
        for (const auto& d : diffs) {
            double z = 0;
            for (std::size_t k = 0; k < num_features; ++k) z += w_[k] * d[k];
            const double err = 1.0 / (1.0 + std::exp(-z)) - 1.0;  // d/dz of log(1 + e^-z)
            for (std::size_t k = 0; k < num_features; ++k) gw[k] += err * d[k];
        }
        for (std::size_t k = 0; k < num_features; ++k) w_[k] -= 1.0 * gw[k] / static_cast<double>(diffs.size());
    }
}

double Combiner::score(const Features& f) const {
    double z = bias_;
    for (std::size_t k = 0; k < num_features; ++k) z += w_[k] * (f[k] - mean_[k]) * scale_[k];
    return z;
}

std::vector<double> Combiner::scores(const std::vector<Features>& x) const {
    std::vector<double> s;
    for (const auto& f : x) s.push_back(score(f));
    return s;
}

}  // namespace qa
