#include "report.hpp"

#include <iomanip>
#include <iostream>

#include "ranking.hpp"

namespace qa {

using namespace loom;

RankingMetrics report_ranking(const std::string& what, const QaData& data, const std::vector<double>& scores) {
    auto m = ranking_metrics(data.groups(), scores, data.labels());
    std::cout << std::fixed << std::setprecision(4) << "  " << std::left << std::setw(26) << what << " MAP " << m.map
              << "  MRR " << m.mrr << "  (" << m.questions << " questions)\n";
    return m;
}

namespace {
// The MAP difference to the baseline with a 95 % interval from a paired bootstrap over the
// questions: whether a small gain is more than which questions happen to be in the file.
void report_gain(const RankingMetrics& m, const RankingMetrics& baseline) {
    const PairedDifference d = paired_bootstrap(m.average_precision, baseline.average_precision);
    std::cout << std::showpos << std::setprecision(4) << "    vs the baseline: MAP " << d.mean << " (95 % interval "
              << d.low << " .. " << d.high << std::noshowpos << ", paired bootstrap over " << m.questions
              << " questions; " << std::setprecision(1) << 100.0 * d.at_most_zero << " % of resamples <= 0)\n";
}

// The same features with the cosine zeroed: the rankers that show what the network adds.
std::vector<Features> without_cosine(std::vector<Features> fs) {
    for (auto& f : fs) f[0] = 0;
    return fs;
}

// Only Yu et al.'s features (and the cosine): the extended ones zeroed, so the ranker ignores them.
std::vector<Features> yu_only(std::vector<Features> fs) {
    for (auto& f : fs)
        for (std::size_t k = num_yu_features; k < num_features; ++k) f[k] = 0;
    return fs;
}
}  // namespace

void report_combined(const QaData& fit, const std::vector<double>& fit_cosine, const QaData& eval,
                     const std::vector<double>& eval_cosine, const OverlapIdf& idf, const QaData& overlap_fit,
                     const std::string& fitted_on) {
    std::cout << "combined score (cosine + word overlap, pairwise logistic ranker fitted on " << fitted_on << "):\n";
    const auto fit_features = pair_features(fit, fit_cosine, idf);
    const auto eval_features = pair_features(eval, eval_cosine, idf);
    std::vector<double> count;  // the baseline: shared non-stopword tokens
    for (const auto& f : eval_features) count.push_back(f[1]);
    const RankingMetrics baseline = ranking_metrics(eval.groups(), count, eval.labels());
    Combiner combiner;
    combiner.fit(fit_features, fit.labels(), fit.groups());
    std::cout << "  weights (standardized: cosine; count, idf, count/q, idf/q, bigrams; on stems: count, idf, "
                 "count/q, idf/q; names):"
              << std::setprecision(3);
    for (double w : combiner.weights()) std::cout << ' ' << w;
    std::cout << "\n";
    report_gain(report_ranking("cosine + overlap", eval, combiner.scores(eval_features)), baseline);

    Combiner overlap_only;
    overlap_only.fit(without_cosine(fit_features), fit.labels(), fit.groups());
    report_gain(report_ranking("overlap features only", eval, overlap_only.scores(without_cosine(eval_features))),
                baseline);

    // Yu et al.'s features alone, with and without the cosine (the rankers before the stems and names).
    Combiner yu, yu_overlap;
    yu.fit(yu_only(fit_features), fit.labels(), fit.groups());
    report_gain(report_ranking("cosine + Yu's features", eval, yu.scores(yu_only(eval_features))), baseline);
    yu_overlap.fit(without_cosine(yu_only(fit_features)), fit.labels(), fit.groups());
    report_ranking("Yu's features only", eval, yu_overlap.scores(without_cosine(yu_only(eval_features))));

    // In two steps: 2 weights (the cosine and the overlap ranker's score) from the cosine's
    // questions instead of all 6.
    Combiner overlap_all;
    const auto overlap_fit_features =
        without_cosine(pair_features(overlap_fit, std::vector<double>(overlap_fit.pairs.size()), idf));
    overlap_all.fit(overlap_fit_features, overlap_fit.labels(), overlap_fit.groups());
    auto two_features = [&](const std::vector<Features>& fs) {
        std::vector<Features> out(fs.size());
        for (std::size_t i = 0; i < fs.size(); ++i) {
            out[i][0] = fs[i][0];
            Features overlap = fs[i];
            overlap[0] = 0;
            out[i][1] = overlap_all.score(overlap);
        }
        return out;
    };
    Combiner stacked;
    stacked.fit(two_features(fit_features), fit.labels(), fit.groups());
    std::cout << "  2-step weights (cosine, overlap ranker): " << std::setprecision(3) << stacked.weights()[0] << ' '
              << stacked.weights()[1] << "\n";
    report_gain(report_ranking("cosine + overlap, 2-step", eval, stacked.scores(two_features(eval_features))),
                baseline);
    report_ranking("overlap ranker, all train", eval, overlap_all.scores(without_cosine(eval_features)));

    // The overlap count ranks first and the cosine only orders candidates with equal counts
    // (the limit of a linear combination with a tiny cosine weight): the baseline's many ties
    // are broken by the model instead of by file order.
    std::vector<double> ties_by_cosine;
    for (const auto& f : eval_features) ties_by_cosine.push_back(f[1] + 1e-3 * f[0]);
    report_gain(report_ranking("overlap, ties by cosine", eval, ties_by_cosine), baseline);
    report_ranking("word-overlap baseline", eval, count);
}

void report_rankers_out_of_fold(const QaData& train, const std::vector<double>& cosine, const OverlapIdf& idf,
                                const std::vector<std::size_t>& fold_of_group, std::size_t folds) {
    const auto features = pair_features(train, cosine, idf);
    const auto labels = train.labels();
    const auto groups = train.groups();
    std::cout << "rankers fitted on all training folds but one, ranking that fold's questions (MAP over the "
              << train.num_groups << " training questions):\n";
    auto out_of_fold = [&](const std::string& what, const std::vector<Features>& x) {
        std::vector<double> scores(x.size());
        for (std::size_t k = 0; k < folds; ++k) {
            std::vector<Features> fx;
            std::vector<int> fl;
            std::vector<std::size_t> fg;
            for (std::size_t i = 0; i < x.size(); ++i)
                if (fold_of_group[groups[i]] != k) {
                    fx.push_back(x[i]);
                    fl.push_back(labels[i]);
                    fg.push_back(groups[i]);
                }
            Combiner c;
            c.fit(fx, fl, fg);
            for (std::size_t i = 0; i < x.size(); ++i)
                if (fold_of_group[groups[i]] == k) scores[i] = c.score(x[i]);
        }
        report_ranking(what, train, scores);
    };
    out_of_fold("cosine + overlap", features);
    out_of_fold("overlap features only", without_cosine(features));
    out_of_fold("cosine + Yu's features", yu_only(features));
    out_of_fold("Yu's features only", without_cosine(yu_only(features)));
    std::vector<double> count;
    for (const auto& f : features) count.push_back(f[1]);
    report_ranking("word-overlap baseline", train, count);
}

}  // namespace qa
