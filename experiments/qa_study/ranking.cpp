#include "ranking.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

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
        const auto cos = session.value(model.cosine).rows();
        for (std::size_t i = 0; i < end - start; ++i) scores.push_back(cos(i, 0));
    }
    return scores;
}

std::string crude_stem(const std::string& w) {
    const bool letters = std::all_of(w.begin(), w.end(), [](char ch) { return ch >= 'a' && ch <= 'z'; });
    if (!letters || w.size() < 4 || w.ends_with("ss")) return w;
    static const std::pair<std::string_view, std::string_view> suffixes[] = {
        {"ies", "y"}, {"sses", "ss"}, {"xes", "x"}, {"ches", "ch"}, {"shes", "sh"},
        {"ing", ""},  {"ed", ""},     {"ly", ""},   {"s", ""}};
    std::string r = w;
    for (const auto& [suffix, replacement] : suffixes) {
        if (!w.ends_with(suffix) || w.size() - suffix.size() + replacement.size() < 3) continue;
        r = w.substr(0, w.size() - suffix.size()) + std::string(replacement);
        // "stopped" -> "stop", but "filled" -> "fill"
        const bool verb = suffix == "ing" || suffix == "ed";
        if (verb && r.size() >= 4 && r.back() == r[r.size() - 2] && r.back() != 'l' && r.back() != 's' &&
            r.back() != 'z')
            r.pop_back();
        break;
    }
    if (r.size() >= 4 && r.back() == 'e') r.pop_back();  // "game" and "games" alike
    return r;
}

namespace {
std::string question_key(const std::vector<std::string>& question) {
    std::string key;
    for (const auto& t : question) key += lower(t) + '\x1f';
    return key;
}
}  // namespace

void add_question_names(const QaData& cased, QuestionNames& names) {
    for (const auto& p : cased.pairs) {
        auto [it, added] = names.try_emplace(question_key(p.question));
        if (!added) continue;
        for (std::size_t i = 1; i < p.question.size(); ++i) {
            const std::string& t = p.question[i];
            if (!t.empty() && std::isupper(static_cast<unsigned char>(t[0])) && !is_stopword(t))
                it->second.push_back(lower(t));
        }
    }
}

OverlapIdf OverlapIdf::fit(const QaData& train, QuestionNames names) {
    auto documents = train.token_lists();
    OverlapIdf t;
    t.names = std::move(names);
    t.words = IdfTable::fit(documents);
    for (auto& d : documents)
        for (auto& w : d) w = crude_stem(lower(w));
    t.stems = IdfTable::fit(documents);
    return t;
}

namespace {
bool has_alphanumeric(const std::string& w) {
    return std::any_of(w.begin(), w.end(), [](char ch) {
        const auto u = static_cast<unsigned char>(ch);
        return u >= 0x80 || std::isalnum(u) != 0;
    });
}

// The lowercased non-stopword tokens, as the baseline counts them.
std::set<std::string> content_words(const std::vector<std::string>& tokens) {
    std::set<std::string> out;
    for (const auto& t : tokens) {
        std::string w = lower(t);
        if (has_alphanumeric(w) && !is_stopword(w)) out.insert(std::move(w));
    }
    return out;
}

// Shared words of two sets: their number, idf sum, and the question's idf sum.
struct Shared {
    double count = 0, weighted = 0, question_count = 0, question_weighted = 0;
};
Shared shared(const std::set<std::string>& question, const std::set<std::string>& answer, const IdfTable& idf) {
    Shared s;
    for (const auto& w : question) {
        const double v = idf.idf(w);
        s.question_count += 1;
        s.question_weighted += v;
        if (answer.count(w)) {
            s.count += 1;
            s.weighted += v;
        }
    }
    return s;
}

Features overlap_features(const QaPair& p, double cosine, const OverlapIdf& idf) {
    const auto question = content_words(p.question), answer = content_words(p.answer);
    const Shared words = shared(question, answer, idf.words);
    std::set<std::string> question_stems, answer_stems;
    for (const auto& w : question) question_stems.insert(crude_stem(w));
    for (const auto& w : answer) answer_stems.insert(crude_stem(w));
    const Shared stems = shared(question_stems, answer_stems, idf.stems);

    std::set<std::pair<std::string, std::string>> answer_bigrams;
    for (std::size_t i = 1; i < p.answer.size(); ++i)
        answer_bigrams.insert({lower(p.answer[i - 1]), lower(p.answer[i])});
    double bigrams = 0;
    for (std::size_t i = 1; i < p.question.size(); ++i)
        bigrams += answer_bigrams.count({lower(p.question[i - 1]), lower(p.question[i])});

    std::set<std::string> answer_tokens;
    for (const auto& t : p.answer) answer_tokens.insert(lower(t));
    double shared_names = 0;
    if (const auto it = idf.names.find(question_key(p.question)); it != idf.names.end()) {
        const std::set<std::string> names(it->second.begin(), it->second.end());
        for (const auto& w : names) shared_names += static_cast<double>(answer_tokens.count(w));
    }

    auto fraction = [](double part, double whole) { return whole > 0 ? part / whole : 0.0; };
    return {cosine,
            words.count,
            words.weighted,
            fraction(words.count, words.question_count),
            fraction(words.weighted, words.question_weighted),
            bigrams,
            stems.count,
            stems.weighted,
            fraction(stems.count, stems.question_count),
            fraction(stems.weighted, stems.question_weighted),
            shared_names};
}
}  // namespace

std::vector<Features> pair_features(const QaData& data, const std::vector<double>& cosine, const OverlapIdf& idf) {
    std::vector<Features> out;
    out.reserve(data.pairs.size());
    for (std::size_t i = 0; i < data.pairs.size(); ++i) out.push_back(overlap_features(data.pairs[i], cosine[i], idf));
    return out;
}

namespace {
// Solves a x = b for a symmetric positive definite a (Gaussian elimination with partial pivoting;
// num_features unknowns).
Features solve(std::array<Features, num_features> a, Features b) {
    constexpr std::size_t n = num_features;
    for (std::size_t c = 0; c < n; ++c) {
        std::size_t p = c;
        for (std::size_t r = c + 1; r < n; ++r)
            if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
        std::swap(a[c], a[p]);
        std::swap(b[c], b[p]);
        for (std::size_t r = c + 1; r < n; ++r) {
            const double f = a[r][c] / a[c][c];
            for (std::size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
            b[r] -= f * b[c];
        }
    }
    Features x{};
    for (std::size_t c = n; c-- > 0;) {
        double s = b[c];
        for (std::size_t k = c + 1; k < n; ++k) s -= a[c][k] * x[k];
        x[c] = s / a[c][c];
    }
    return x;
}
}  // namespace

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
    // The L2 term keeps the Hessian invertible when a feature is constant (zeroed or unused) and
    // bounds the weights when the pairs are separable.
    constexpr double l2 = 1e-3;
    const double m = static_cast<double>(diffs.size());
    for (int it = 0; it < 15; ++it) {
        Features g{};
        std::array<Features, num_features> h{};
        for (std::size_t k = 0; k < num_features; ++k) {
            g[k] = l2 * w_[k];
            h[k][k] = l2;
        }
        for (const auto& d : diffs) {
            double z = 0;
            for (std::size_t k = 0; k < num_features; ++k) z += w_[k] * d[k];
            const double p = 1.0 / (1.0 + std::exp(-z));
            const double err = (p - 1.0) / m, curvature = p * (1.0 - p) / m;  // of log(1 + e^-z) / m
            for (std::size_t a = 0; a < num_features; ++a) {
                g[a] += err * d[a];
                for (std::size_t b = 0; b <= a; ++b) h[a][b] += curvature * d[a] * d[b];
            }
        }
        for (std::size_t a = 0; a < num_features; ++a)
            for (std::size_t b = a + 1; b < num_features; ++b) h[a][b] = h[b][a];
        const Features step = solve(h, g);
        double largest = 0;
        for (std::size_t k = 0; k < num_features; ++k) {
            w_[k] -= step[k];
            largest = std::max(largest, std::abs(step[k]));
        }
        if (largest < 1e-9) break;
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
