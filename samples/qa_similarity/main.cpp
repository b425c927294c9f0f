// qa_similarity: trains the seed 000 question/answer model end to end and ranks answers with it.
//
//   qa_similarity                                  built-in synthetic data, a short run
//   qa_similarity --train T.tsv --eval D.tsv       SelQA-style TSV files (question, sentence, label)
//   qa_similarity ... --save model.ckpt            checkpoint after every epoch (+ model.ckpt.vocab)
//   qa_similarity ... --resume model.ckpt          continue a saved run where it stopped
//   qa_similarity --resume model.ckpt --score F    print a score per pair of F
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>

#include <loom.hpp>

#include "model.hpp"
#include "ranking.hpp"
#include "synthetic.hpp"

using namespace loom;

namespace {

struct Options {
    std::string train_file, eval_file, save, resume, score_file;
    std::size_t epochs = 3, batch = 32, min_count = 1, max_pairs = 0, threads = 1;
    std::size_t synthetic_questions = 600;
    std::size_t synthetic_vocab = 2000, synthetic_copy = 0;
    double lr = 1e-3, clip = 5.0, holdout = 0.1;
    std::string loss = "hinge";
    bool freeze_embedding = false;
    bool select_epoch = false;
    std::uint64_t seed = 1;
    qa::ModelOptions model;
};

// One training item: a question with a true answer and (for the hinge loss) a wrong one.
struct Item {
    std::size_t question_pair, wrong_pair;
};

std::vector<Item> make_items(const QaData& data, const std::string& loss) {
    std::vector<Item> items;
    if (loss == "mse") {
        for (std::size_t i = 0; i < data.pairs.size(); ++i) items.push_back({i, i});
        return items;
    }
    std::vector<std::vector<std::size_t>> negatives(data.num_groups);
    for (std::size_t i = 0; i < data.pairs.size(); ++i)
        if (!data.pairs[i].label) negatives[data.pairs[i].group].push_back(i);
    for (std::size_t i = 0; i < data.pairs.size(); ++i) {
        const auto& neg = negatives[data.pairs[i].group];
        if (!data.pairs[i].label || neg.empty()) continue;
        // Every wrong answer of the question is paired with each of its true ones, so an epoch sees
        // every candidate.
        for (std::size_t j : neg) items.push_back({i, j});
    }
    return items;
}

RankingMetrics report_ranking(const std::string& what, const QaData& data, const std::vector<double>& scores) {
    auto m = ranking_metrics(data.groups(), scores, data.labels());
    std::cout << std::fixed << std::setprecision(4) << "  " << std::left << std::setw(26) << what << " MAP " << m.map
              << "  MRR " << m.mrr << "  (" << m.questions << " questions)\n";
    return m;
}

int run(const Options& o) {
    std::cout << std::unitbuf;  // progress lines appear as they happen, also in a log file
    set_blas_threads(static_cast<int>(o.threads));
    set_seed(o.seed);

    // ---- data
    QaData train, eval;
    if (o.train_file.empty()) {
        qa::SyntheticOptions s;
        s.questions = o.synthetic_questions;
        s.vocab = o.synthetic_vocab;
        s.copy = o.synthetic_copy;
        s.seed = o.seed;
        train = qa::make_synthetic(s);
        s.questions = std::max<std::size_t>(50, o.synthetic_questions / 4);
        s.seed = o.seed + 1000;
        eval = qa::make_synthetic(s);
    } else {
        train = read_qa_tsv(o.train_file);
        if (!o.eval_file.empty()) eval = read_qa_tsv(o.eval_file);
    }
    if (o.max_pairs && train.pairs.size() > o.max_pairs) train.pairs.resize(o.max_pairs);
    // Questions held out of training: the combined score's weights are fitted on them, where the
    // network's cosine is as good as on unseen data (on its own training pairs it is overfitted).
    QaData held_out;
    held_out.source = "held-out training questions";
    held_out.num_groups = train.num_groups;
    if (o.holdout > 0 && !eval.pairs.empty()) {
        const auto every = static_cast<std::size_t>(std::max(2.0, std::round(1.0 / o.holdout)));
        std::vector<QaPair> kept;
        for (auto& p : train.pairs) (p.group % every == every - 1 ? held_out.pairs : kept).push_back(std::move(p));
        train.pairs = std::move(kept);
    }

    Vocabulary vocab;
    if (!o.resume.empty()) {
        vocab = Vocabulary::load(o.resume + ".vocab");
    } else {
        VocabularyOptions vo;
        vo.min_count = o.min_count;
        vocab = Vocabulary::build(train.token_lists(), vo);
    }
    qa::ModelOptions mo = o.model;
    bool freeze_embedding = o.freeze_embedding;
    if (!o.resume.empty()) {  // the model is rebuilt as it was saved, whatever the size flags say
        std::istringstream saved(read_checked_file(o.resume + ".model"));
        int shared = 0, frozen = 0, overlap = 0;
        if (!(saved >> mo.embed >> mo.hidden >> mo.dense >> shared >> mo.margin >> frozen))
            throw DataError(o.resume + ".model: expected 'embed hidden dense shared margin frozen [overlap_inputs]'");
        if (!(saved >> overlap)) overlap = 0;  // files written before --overlap-inputs existed end here
        mo.shared = shared != 0;
        mo.overlap_inputs = overlap != 0;
        freeze_embedding = frozen != 0;
    }
    mo.vocab = vocab.size();
    std::cout << "data: " << train.pairs.size() << " training pairs from " << train.source << " ("
              << held_out.pairs.size() << " more held out); vocabulary " << vocab.size() << " words\n";

    // ---- model and trainer
    qa::Model model(mo);
    const bool hinge = o.loss == "hinge";
    LearnerOptions lo;
    lo.gradient_clipping_norm = o.clip;
    // Embedding rows a minibatch does not use get no update ("lazy Adam"), as sparse embedding
    // optimizers do: exact Adam would sweep all 2 x vocab x embed weights every step.
    lo.lazy_sparse_rows = true;
    std::vector<Parameter> trained;
    for (const auto& p : model.parameters())
        if (!(freeze_embedding && p.name().find(".embedding") != std::string::npos)) trained.push_back(p);
    Trainer trainer(hinge ? model.hinge_loss : model.squared_loss, hinge ? model.pair_correct : model.pointwise_correct,
                    adam(trained, o.lr, 0.9, 0.999, 1e-8, lo));
    std::size_t params = 0;
    for (const auto& p : model.parameters()) params += p.shape().size();
    std::cout << "model: embedding " << mo.embed << (mo.overlap_inputs ? " + overlap flag" : "") << ", BiLSTM "
              << mo.hidden << "+" << mo.hidden << ", dense " << mo.dense << "; " << params << " parameters; loss "
              << o.loss << "\n";

    TrainingPosition position;
    if (!o.resume.empty()) {
        // Scoring needs the parameters only; training on needs the learner's state too.
        position =
            load_checkpoint(o.resume, model.parameters(), o.score_file.empty() ? &trainer.learner() : nullptr).position;
        std::cout << "resumed from " << o.resume << " at epoch " << position.epoch + 1 << ", minibatch "
                  << position.minibatch << "\n";
    }

    const auto train_pairs = qa::encode(train, vocab);
    const auto eval_pairs = qa::encode(eval, vocab);
    const auto held_out_pairs = qa::encode(held_out, vocab);

    if (!o.score_file.empty()) {
        QaData to_score = read_qa_tsv(o.score_file);
        const auto scores = qa::score_pairs(model, qa::encode(to_score, vocab));
        for (std::size_t i = 0; i < scores.size(); ++i) std::printf("%.6f\n", scores[i]);
        return 0;
    }

    const auto items = make_items(train, o.loss);
    std::vector<ItemLengths> lengths;
    for (const auto& it : items)
        lengths.push_back(
            {train_pairs.questions[it.question_pair].size(), train_pairs.answers[it.question_pair].size()});
    BatchingOptions bo;
    bo.batch_size = o.batch;
    bo.seed = o.seed;
    Batcher batcher(lengths, bo);
    batcher.set_position({position.epoch, position.minibatch});

    ProgressOptions po;
    po.tag = "train";
    po.num_epochs = o.epochs;
    po.first_epoch = position.epoch + 1;
    po.epoch_size = items.size();
    ProgressPrinter progress(po);

    IdfTable idf = IdfTable::fit(train.token_lists());
    if (!eval.pairs.empty()) {
        std::vector<double> overlap;
        for (const auto& p : eval.pairs) overlap.push_back(word_overlap_score(p.question, p.answer));
        std::cout << "evaluation on " << eval.pairs.size() << " pairs (" << eval.num_groups << " questions) from "
                  << eval.source << "\n";
        report_ranking("word-overlap baseline", eval, overlap);
        if (position.epoch == 0 && position.minibatch == 0)
            report_ranking("cosine model, untrained", eval, qa::score_pairs(model, eval_pairs));
    }

    // --select-epoch: the parameters of the epoch with the best held-out MAP (never the dev file's).
    double best_map = -1;
    std::size_t best_epoch = 0;
    std::vector<xt::xarray<float>> best_values;
    for (std::size_t epoch = position.epoch; epoch < o.epochs; ++epoch) {
        while (batcher.position().epoch == epoch) {
            const auto batch = batcher.next();
            std::vector<std::vector<std::size_t>> q, a, w;
            std::vector<std::vector<float>> q_flags, a_flags, q_negative_flags, w_flags;
            xt::xarray<float> labels = xt::zeros<float>({batch.size(), std::size_t{1}});
            for (std::size_t k = 0; k < batch.size(); ++k) {
                const Item& it = items[batch[k]];
                q.push_back(train_pairs.questions[it.question_pair]);
                a.push_back(train_pairs.answers[it.question_pair]);
                w.push_back(train_pairs.answers[it.wrong_pair]);
                labels(k, 0) = static_cast<float>(train.pairs[it.question_pair].label);
                if (mo.overlap_inputs) {
                    const QaPair &p = train.pairs[it.question_pair], &wrong = train.pairs[it.wrong_pair];
                    q_flags.push_back(train_pairs.question_flags[it.question_pair]);
                    a_flags.push_back(train_pairs.answer_flags[it.question_pair]);
                    q_negative_flags.push_back(qa::overlap_flags(p.question, wrong.answer));
                    w_flags.push_back(qa::overlap_flags(wrong.answer, p.question));
                }
            }
            Bindings in{{model.question, Value::index_sequences(q)}, {model.answer, Value::index_sequences(a)}};
            if (mo.overlap_inputs) {
                in.emplace(model.question_flags, qa::flag_sequences(q_flags));
                in.emplace(model.answer_flags, qa::flag_sequences(a_flags));
            }
            if (hinge) {
                in.emplace(model.negative, Value::index_sequences(w));
                if (mo.overlap_inputs) {
                    in.emplace(model.question_negative_flags, qa::flag_sequences(q_negative_flags));
                    in.emplace(model.negative_flags, qa::flag_sequences(w_flags));
                }
            } else {
                in.emplace(model.label, Value::batch(labels));
            }
            const TrainingScope training;  // dropout is active only here
            progress.update(trainer.train_minibatch(in));
        }
        progress.end_epoch();
        if (!eval.pairs.empty()) report_ranking("cosine model", eval, qa::score_pairs(model, eval_pairs));
        if (!held_out.pairs.empty()) {
            const auto m = report_ranking("cosine model, held-out", held_out, qa::score_pairs(model, held_out_pairs));
            if (o.select_epoch && m.map > best_map) {
                best_map = m.map;
                best_epoch = epoch + 1;
                best_values.clear();
                for (const auto& p : model.parameters()) best_values.push_back(p.value());
            }
        }
        if (!o.save.empty()) {
            vocab.save(o.save + ".vocab");
            // All of the model's parameters (frozen ones too), the learner's state, the data position,
            // and the sizes the model must be rebuilt with.
            std::ostringstream sizes;
            sizes << mo.embed << ' ' << mo.hidden << ' ' << mo.dense << ' ' << int(mo.shared) << ' ' << mo.margin << ' '
                  << int(freeze_embedding) << ' ' << int(mo.overlap_inputs);
            write_checked_file(o.save + ".model", sizes.str());
            save_checkpoint(o.save, model.parameters(), &trainer.learner(),
                            {batcher.position().epoch, batcher.position().batch, 0, {}});
            std::cout << "  saved " << o.save << "\n";
        }
    }

    if (!best_values.empty() && best_epoch != o.epochs) {
        const auto ps = model.parameters();
        for (std::size_t i = 0; i < ps.size(); ++i) ps[i].set_value(best_values[i]);
        std::cout << "kept the parameters of epoch " << best_epoch << " (best held-out MAP " << std::setprecision(4)
                  << best_map << ")\n";
        if (!eval.pairs.empty()) report_ranking("cosine model", eval, qa::score_pairs(model, eval_pairs));
    }

    if (!eval.pairs.empty()) {
        const bool fit_on_held_out = !held_out.pairs.empty();
        const QaData& fit_data = fit_on_held_out ? held_out : train;
        std::cout << "combined score (cosine + word overlap, pairwise logistic ranker fitted on the "
                  << (fit_on_held_out ? std::to_string(fit_data.pairs.size()) + " held-out training pairs"
                                      : "training pairs")
                  << "):\n";
        auto features = [&](const QaData& data, const std::vector<double>& cosine) {
            return qa::pair_features(data, cosine, idf);
        };
        qa::Combiner combiner;
        const auto fit_cosine = qa::score_pairs(model, qa::encode(fit_data, vocab));
        combiner.fit(features(fit_data, fit_cosine), fit_data.labels(), fit_data.groups());
        const auto eval_features = features(eval, qa::score_pairs(model, eval_pairs));
        std::cout << "  weights (standardized: cosine, count, idf, count/q, idf/q, bigrams):" << std::setprecision(3);
        for (double w : combiner.weights()) std::cout << ' ' << w;
        std::cout << "\n";
        report_ranking("cosine + overlap", eval, combiner.scores(eval_features));
        // The same regression without the cosine: what the network adds to the overlap features.
        auto without_cosine = [](std::vector<qa::Features> fs) {
            for (auto& f : fs) f[0] = 0;
            return fs;
        };
        qa::Combiner overlap_only_model;
        overlap_only_model.fit(without_cosine(features(fit_data, std::vector<double>(fit_data.pairs.size()))),
                               fit_data.labels(), fit_data.groups());
        report_ranking("overlap features only", eval, overlap_only_model.scores(without_cosine(eval_features)));
        if (fit_on_held_out) {
            // In two steps: the overlap ranker fitted on every training pair (its features cannot
            // overfit the way the cosine does), then only its score and the cosine weighed on the
            // held-out questions: 2 weights from ~160 questions instead of all of them.
            QaData all = train;
            all.pairs.insert(all.pairs.end(), held_out.pairs.begin(), held_out.pairs.end());
            qa::Combiner overlap_all;
            overlap_all.fit(without_cosine(features(all, std::vector<double>(all.pairs.size()))), all.labels(),
                            all.groups());
            auto two_features = [&](const QaData& data, const std::vector<double>& cosine) {
                const auto fs = without_cosine(features(data, std::vector<double>(data.pairs.size())));
                std::vector<qa::Features> out(fs.size());
                for (std::size_t i = 0; i < fs.size(); ++i) {
                    out[i][0] = cosine[i];
                    out[i][1] = overlap_all.score(fs[i]);
                }
                return out;
            };
            qa::Combiner stacked;
            stacked.fit(two_features(fit_data, fit_cosine), fit_data.labels(), fit_data.groups());
            const auto eval_two = two_features(eval, qa::score_pairs(model, eval_pairs));
            std::cout << "  2-step weights (cosine, overlap ranker): " << std::setprecision(3) << stacked.weights()[0]
                      << ' ' << stacked.weights()[1] << "\n";
            report_ranking("cosine + overlap, 2-step", eval, stacked.scores(eval_two));
            report_ranking("overlap ranker, all train", eval, overlap_all.scores(without_cosine(eval_features)));
        }
        // The overlap count ranks first and the cosine only orders candidates with equal counts
        // (the limit of a linear combination with a tiny cosine weight): the baseline's many ties
        // are broken by the model instead of by file order.
        std::vector<double> ties_by_cosine;
        for (const auto& f : eval_features) ties_by_cosine.push_back(f[1] + 1e-3 * f[0]);
        report_ranking("overlap, ties by cosine", eval, ties_by_cosine);
        std::vector<double> overlap_only;
        for (const auto& f : eval_features) overlap_only.push_back(f[1]);  // the plain count
        report_ranking("word-overlap baseline", eval, overlap_only);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Train the seed's question/answer similarity model (BiLSTM towers, log-sum-exp attention, cosine)"};
    app.add_option("--train", o.train_file, "training TSV (question<TAB>sentence<TAB>label); default: synthetic data")
        ->check(CLI::ExistingFile);
    app.add_option("--eval", o.eval_file, "evaluation TSV: MAP and MRR are reported per epoch")
        ->check(CLI::ExistingFile);
    app.add_option("--epochs", o.epochs, "training epochs")->capture_default_str();
    app.add_option("--batch", o.batch, "items per minibatch")->capture_default_str();
    app.add_option("--lr", o.lr, "Adam learning rate")->capture_default_str();
    app.add_option("--clip", o.clip, "gradient clipping by global norm (0 = off)")->capture_default_str();
    app.add_option("--loss", o.loss, "hinge: ranking loss on (question, true, wrong) triplets; mse: (cos - label)^2")
        ->check(CLI::IsMember({"hinge", "mse"}))
        ->capture_default_str();
    app.add_option("--embed", o.model.embed, "embedding dimension")->capture_default_str();
    app.add_option("--hidden", o.model.hidden, "LSTM size per direction")->capture_default_str();
    app.add_option("--dense", o.model.dense, "Dense output (attention) dimension")->capture_default_str();
    app.add_flag("--freeze-embedding", o.freeze_embedding,
                 "keep the (random) embeddings fixed: with --shared a word keeps one vector on both sides");
    app.add_flag("--shared", o.model.shared,
                 "one tower for questions and answers (a siamese model: a word has one embedding on both sides)");
    app.add_flag("--overlap-inputs", o.model.overlap_inputs,
                 "give each token a flag 'this word also occurs on the other side' next to its embedding "
                 "(Severyn & Moschitti 2015)");
    app.add_option("--dropout", o.model.dropout, "dropout rate on the embedded tokens while training")
        ->check(CLI::Range(0.0, 0.9))
        ->capture_default_str();
    app.add_option("--margin", o.model.margin, "hinge loss margin")->capture_default_str();
    app.add_option("--holdout", o.holdout,
                   "fraction of training questions kept out of training to fit the combined score (with --eval)")
        ->check(CLI::Range(0.0, 0.5))
        ->capture_default_str();
    app.add_flag("--select-epoch", o.select_epoch,
                 "end with the parameters of the epoch whose cosine ranks the held-out training questions best");
    app.add_option("--min-count", o.min_count, "words seen fewer times map to <unk>")->capture_default_str();
    app.add_option("--max-pairs", o.max_pairs, "use only the first N training pairs (0 = all)");
    app.add_option("--questions", o.synthetic_questions, "synthetic data: training questions")->capture_default_str();
    app.add_option("--synthetic-vocab", o.synthetic_vocab, "synthetic data: vocabulary size")->capture_default_str();
    app.add_option("--synthetic-copy", o.synthetic_copy, "synthetic data: question tokens copied into a true answer")
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed for data order and initial weights")->capture_default_str();
    app.add_option("--threads", o.threads, "OpenBLAS threads")->capture_default_str();
    app.add_option("--save", o.save, "checkpoint file written after every epoch");
    app.add_option("--resume", o.resume, "checkpoint to continue from (or to score with)")->check(CLI::ExistingFile);
    app.add_option("--score", o.score_file, "print the model's score for every pair of this TSV and exit")
        ->check(CLI::ExistingFile);
    CLI11_PARSE(app, argc, argv);
    if (!o.score_file.empty() && o.resume.empty()) {
        std::cerr << "--score needs a trained model: pass --resume CHECKPOINT\n";
        return 2;
    }
    try {
        return run(o);
    } catch (const loom::Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
