#include "crossfit.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>

#include "data/output_files.hpp"
#include "ranking.hpp"
#include "report.hpp"

namespace qa {

using namespace loom;

namespace {

// Each question group's fold: a seeded shuffle dealt round-robin, so folds differ in size by at
// most one question.
std::vector<std::size_t> assign_folds(const QaData& data, std::size_t folds, std::uint64_t seed) {
    std::vector<std::size_t> order(data.num_groups);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::size_t> fold(data.num_groups);
    for (std::size_t i = 0; i < order.size(); ++i) fold[order[i]] = i % folds;
    return fold;
}

QaData subset(const QaData& data, const std::vector<std::size_t>& indices, const std::string& source) {
    QaData out;
    out.source = source;
    out.num_groups = data.num_groups;  // group ids are kept: they index per-question tables
    for (std::size_t i : indices) out.pairs.push_back(data.pairs[i]);
    return out;
}

// One line per pair: file (train / eval), group, label, the overlap features, then its cosines per
// epoch (train: out of fold; eval: one per fold network).
void dump_scores(const std::string& path, const QaData& train, const std::vector<std::vector<double>>& out_of_fold,
                 const QaData& eval, const std::vector<std::vector<std::vector<double>>>& eval_cosine,
                 const OverlapIdf& idf) {
    std::ostringstream out;  // written whole, through a temporary renamed into place
    out.precision(9);
    auto write = [&](const char* which, const QaData& data, auto&& cosines) {
        const auto features = pair_features(data, std::vector<double>(data.pairs.size()), idf);
        for (std::size_t i = 0; i < data.pairs.size(); ++i) {
            out << which << '\t' << data.pairs[i].group << '\t' << data.pairs[i].label;
            for (std::size_t k = 1; k < num_features; ++k) out << '\t' << features[i][k];
            cosines(i);
            out << '\n';
        }
    };
    write("train", train, [&](std::size_t i) {
        for (const auto& epoch : out_of_fold) out << '\t' << epoch[i];
    });
    write("eval", eval, [&](std::size_t i) {
        for (const auto& epoch : eval_cosine)
            for (const auto& fold : epoch) out << '\t' << fold[i];
    });
    write_text_atomically(path, out.str());
    std::cout << "wrote every pair's features and cosines to " << path << "\n";
}

}  // namespace

void run_cross_fitting(const QaData& train, const QaData& eval, const CrossFitOptions& o) {
    if (o.folds < 2) throw UserError("--folds " + std::to_string(o.folds) + ": cross-fitting needs at least 2 folds");
    if (eval.pairs.empty()) throw UserError("--folds needs --eval: cross-fitting only serves the combined score");
    const auto fold_of_group = assign_folds(train, o.folds, o.seed);
    const OverlapIdf idf = OverlapIdf::fit(train, o.names);
    std::cout << "cross-fitting: " << train.num_groups << " training questions in " << o.folds << " folds\n";
    std::vector<double> overlap;
    for (const auto& p : eval.pairs) overlap.push_back(word_overlap_score(p.question, p.answer));
    std::cout << "evaluation on " << eval.pairs.size() << " pairs (" << eval.num_groups << " questions) from "
              << eval.source << "\n";
    report_ranking("word-overlap baseline", eval, overlap);

    // Per epoch: every training pair's out-of-fold cosine, and each fold's evaluation cosines.
    std::vector<std::vector<double>> out_of_fold(o.train.epochs, std::vector<double>(train.pairs.size()));
    std::vector<std::vector<std::vector<double>>> eval_cosine(o.train.epochs);
    for (std::size_t k = 0; k < o.folds; ++k) {
        std::vector<std::size_t> in_fold, rest;
        for (std::size_t i = 0; i < train.pairs.size(); ++i)
            (fold_of_group[train.pairs[i].group] == k ? in_fold : rest).push_back(i);
        const std::string name = "fold " + std::to_string(k + 1) + " of " + std::to_string(o.folds);
        const QaData part = subset(train, rest, "training questions outside " + name);
        const QaData held = subset(train, in_fold, name);
        // Each network's vocabulary is its own training part: words only in its fold are <unk>
        // to it, as words only in the evaluation file are.
        VocabularyOptions vo;
        vo.min_count = o.min_count;
        const Vocabulary vocab = Vocabulary::build(part.token_lists(), vo);
        ModelOptions mo = o.model;
        mo.vocab = vocab.size();
        const TripletModel model(mo);
        auto trainer = make_trainer(model, o.train);
        TrainOptions to = o.train;
        to.tag = name;
        to.seed = o.train.seed + k;
        std::cout << name << ": training on " << part.pairs.size() << " pairs, scoring " << held.pairs.size()
                  << " (vocabulary " << vocab.size() << " words)\n";
        const auto part_pairs = encode(part, vocab), held_pairs = encode(held, vocab), eval_pairs = encode(eval, vocab);
        train_epochs(model, *trainer, part, part_pairs, to, {}, [&](std::size_t epoch, const DataPosition&) {
            const auto held_cosine = score_pairs(model, held_pairs);
            for (std::size_t j = 0; j < in_fold.size(); ++j) out_of_fold[epoch][in_fold[j]] = held_cosine[j];
            report_ranking("cosine, out of fold", held, held_cosine);
            eval_cosine[epoch].push_back(score_pairs(model, eval_pairs));
            report_ranking("cosine model", eval, eval_cosine[epoch].back());
        });
    }

    // The epoch is chosen on the training questions' out-of-fold cosines, never on the evaluation file.
    std::size_t chosen = o.train.epochs - 1;
    double best = -1;
    std::cout << "out-of-fold cosine on all training questions, and the mean of the " << o.folds
              << " networks' cosines on the evaluation file:\n";
    std::vector<std::vector<double>> mean_cosine(o.train.epochs, std::vector<double>(eval.pairs.size()));
    for (std::size_t e = 0; e < o.train.epochs; ++e) {
        const auto m = report_ranking("epoch " + std::to_string(e + 1) + ", out of fold", train, out_of_fold[e]);
        for (const auto& fold_cosine : eval_cosine[e])
            for (std::size_t i = 0; i < fold_cosine.size(); ++i)
                mean_cosine[e][i] += fold_cosine[i] / static_cast<double>(o.folds);
        report_ranking("epoch " + std::to_string(e + 1) + ", mean cosine", eval, mean_cosine[e]);
        if (o.select_epoch && m.map > best) {
            best = m.map;
            chosen = e;
        }
    }
    if (!o.dump.empty()) dump_scores(o.dump, train, out_of_fold, eval, eval_cosine, idf);
    std::cout << "kept epoch " << chosen + 1 << (o.select_epoch ? " (best out-of-fold MAP)" : "") << "\n";
    report_rankers_out_of_fold(train, out_of_fold[chosen], idf, fold_of_group, o.folds);
    report_combined(train, out_of_fold[chosen], eval, mean_cosine[chosen], idf, train,
                    "all " + std::to_string(train.pairs.size()) + " training pairs, out-of-fold cosines");
}

}  // namespace qa
