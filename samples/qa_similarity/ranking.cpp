#include "ranking.hpp"

#include <cmath>

namespace qa {

using namespace loom;

EncodedPairs encode(const QaData& data, const Vocabulary& vocab) {
    EncodedPairs out;
    for (const auto& p : data.pairs) {
        out.questions.push_back(vocab.ids(p.question));
        out.answers.push_back(vocab.ids(p.answer));
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
        session.forward({{model.question, Value::index_sequences(q)}, {model.answer, Value::index_sequences(a)}});
        const auto cos = session.value(model.cosine).batch();
        for (std::size_t i = 0; i < end - start; ++i) scores.push_back(cos(i, 0));
    }
    return scores;
}

std::vector<Features> pair_features(const QaData& data, const std::vector<double>& cosine, const IdfTable& idf) {
    std::vector<Features> out;
    for (std::size_t i = 0; i < data.pairs.size(); ++i) {
        const auto& p = data.pairs[i];
        out.push_back({cosine[i], word_overlap_score(p.question, p.answer), word_overlap_score(p.question, p.answer, &idf)});
    }
    return out;
}

void Combiner::fit(const std::vector<Features>& x, const std::vector<int>& labels) {
    const double n = static_cast<double>(x.size());
    for (std::size_t k = 0; k < 3; ++k) {
        double m = 0, v = 0;
        for (const auto& f : x) m += f[k];
        m /= n;
        for (const auto& f : x) v += (f[k] - m) * (f[k] - m);
        mean_[k] = m;
        scale_[k] = v > 0 ? 1.0 / std::sqrt(v / n) : 1.0;
    }
    w_ = {};
    bias_ = 0;
    // Full-batch gradient descent on the mean logistic loss; three standardized features converge fast.
    for (int it = 0; it < 500; ++it) {
        std::array<double, 3> gw{};
        double gb = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const double err = 1.0 / (1.0 + std::exp(-score(x[i]))) - labels[i];
            for (std::size_t k = 0; k < 3; ++k) gw[k] += err * (x[i][k] - mean_[k]) * scale_[k];
            gb += err;
        }
        for (std::size_t k = 0; k < 3; ++k) w_[k] -= 1.0 * gw[k] / n;
        bias_ -= 1.0 * gb / n;
    }
}

double Combiner::score(const Features& f) const {
    double z = bias_;
    for (std::size_t k = 0; k < 3; ++k) z += w_[k] * (f[k] - mean_[k]) * scale_[k];
    return z;
}

std::vector<double> Combiner::scores(const std::vector<Features>& x) const {
    std::vector<double> s;
    for (const auto& f : x) s.push_back(score(f));
    return s;
}

}  // namespace qa
