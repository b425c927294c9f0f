// qa_study: the answer-ranking study on SelQA (experiments/README.md), formerly the QA sample.
//
//   qa_study                                  built-in synthetic data, a short run
//   qa_study --train T.tsv --eval D.tsv       SelQA-style TSV files (question, sentence, label)
//   qa_study ... --save model.ckpt            checkpoint after every epoch (+ model.ckpt.vocab)
//   qa_study ... --resume model.ckpt          continue a saved run where it stopped
//   qa_study --resume model.ckpt --score F    print a score per pair of F
//   qa_study --train T --eval D --folds 3     cross-fitting for the combined score (crossfit.hpp)
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>

#include <loom.hpp>

#include "crossfit.hpp"
#include "data/output_files.hpp"
#include "ranking.hpp"
#include "report.hpp"
#include "training.hpp"
#include "triplet_model.hpp"

using namespace loom;
using qa::word_overlap_score;

namespace {

struct Options {
    std::string train_file, eval_file, save, resume, score_file, dump;
    std::size_t min_count = 1, max_pairs = 0, threads = 1, folds = 0;
    std::size_t synthetic_questions = 600;
    std::size_t synthetic_vocab = 2000, synthetic_copy = 0;
    double holdout = 0.1;
    bool select_epoch = false;
    std::uint64_t seed = 1;
    qa::ModelOptions model;
    qa::TrainOptions training;
    qa::QuestionNames names;  // from cased reads of the data files
};

// Trains and evaluates one network; the combined score is fitted on the held-out questions.
int run_single(const Options& o, QaData train, const QaData& eval) {
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
    qa::TrainOptions to = o.training;
    if (!o.resume.empty()) {  // the model is rebuilt as it was saved, whatever the size flags say
        std::istringstream saved(read_checked_file(o.resume + ".model"));
        int shared = 0, frozen = 0, overlap = 0;
        if (!(saved >> mo.embed >> mo.hidden >> mo.dense >> shared >> mo.margin >> frozen))
            throw DataError(o.resume + ".model: expected 'embed hidden dense shared margin frozen [overlap_inputs]'");
        if (!(saved >> overlap)) overlap = 0;  // files written before --overlap-inputs existed end here
        mo.shared = shared != 0;
        mo.overlap_inputs = overlap != 0;
        to.freeze_embedding = frozen != 0;
    }
    mo.vocab = vocab.size();
    std::cout << "data: " << train.pairs.size() << " training pairs from " << train.source << " ("
              << held_out.pairs.size() << " more held out); vocabulary " << vocab.size() << " words\n";

    // ---- model and trainer
    qa::TripletModel model(mo);
    auto trainer = qa::make_trainer(model, to);
    const std::size_t params = parameter_count(model.parameters());
    std::cout << "model: embedding " << mo.embed << (mo.overlap_inputs ? " + overlap flag" : "") << ", BiLSTM "
              << mo.hidden << "+" << mo.hidden << ", dense " << mo.dense << "; " << params << " parameters; loss "
              << to.loss << "\n";

    TrainingPosition position;
    if (!o.resume.empty()) {
        // Scoring needs the parameters only; training on needs the learner's state too.
        position = load_checkpoint(o.resume, model.parameters(), o.score_file.empty() ? &trainer->learner() : nullptr)
                       .position;
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

    const qa::OverlapIdf idf = qa::OverlapIdf::fit(train, o.names);
    if (!eval.pairs.empty()) {
        std::vector<double> overlap;
        for (const auto& p : eval.pairs) overlap.push_back(word_overlap_score(p.question, p.answer));
        std::cout << "evaluation on " << eval.pairs.size() << " pairs (" << eval.num_groups << " questions) from "
                  << eval.source << "\n";
        qa::report_ranking("word-overlap baseline", eval, overlap);
        if (position.epoch == 0 && position.minibatch == 0)
            qa::report_ranking("cosine model, untrained", eval, qa::score_pairs(model, eval_pairs));
    }

    // --select-epoch: the parameters of the epoch with the best held-out MAP (never the dev file's).
    double best_map = -1;
    std::size_t best_epoch = 0;
    std::vector<xt::xarray<float>> best_values;
    qa::train_epochs(model, *trainer, train, train_pairs, to, position, [&](std::size_t epoch, const DataPosition& at) {
        if (!eval.pairs.empty()) qa::report_ranking("cosine model", eval, qa::score_pairs(model, eval_pairs));
        if (!held_out.pairs.empty()) {
            const auto m =
                qa::report_ranking("cosine model, held-out", held_out, qa::score_pairs(model, held_out_pairs));
            if (o.select_epoch && m.map > best_map) {
                best_map = m.map;
                best_epoch = epoch + 1;
                best_values = qa::parameter_values(model);
            }
        }
        if (!o.save.empty()) {
            vocab.save(o.save + ".vocab");
            // All of the model's parameters (frozen ones too), the learner's state, the data position,
            // and the sizes the model must be rebuilt with.
            std::ostringstream sizes;
            sizes << mo.embed << ' ' << mo.hidden << ' ' << mo.dense << ' ' << int(mo.shared) << ' ' << mo.margin << ' '
                  << int(to.freeze_embedding) << ' ' << int(mo.overlap_inputs);
            write_checked_file(o.save + ".model", sizes.str());
            save_checkpoint(o.save, model.parameters(), &trainer->learner(), {at.epoch, at.batch, 0, {}});
            std::cout << "  saved " << o.save << "\n";
        }
    });

    if (!best_values.empty() && best_epoch != to.epochs) {
        qa::set_parameter_values(model, best_values);
        std::cout << "kept the parameters of epoch " << best_epoch << " (best held-out MAP " << std::setprecision(4)
                  << best_map << ")\n";
        if (!eval.pairs.empty()) qa::report_ranking("cosine model", eval, qa::score_pairs(model, eval_pairs));
    }

    if (!eval.pairs.empty()) {
        const bool fit_on_held_out = !held_out.pairs.empty();
        const QaData& fit_data = fit_on_held_out ? held_out : train;
        QaData all = train;
        all.pairs.insert(all.pairs.end(), held_out.pairs.begin(), held_out.pairs.end());
        qa::report_combined(fit_data, qa::score_pairs(model, qa::encode(fit_data, vocab)), eval,
                            qa::score_pairs(model, eval_pairs), idf, all,
                            fit_on_held_out
                                ? "the " + std::to_string(fit_data.pairs.size()) + " held-out training pairs"
                                : "the training pairs");
    }
    return 0;
}

// Every file the run writes is checked before any work (data/output_files.hpp: check_outputs): --save
// writes the checkpoint and its .vocab and .model files. The checkpoint --resume continues from may
// be --save itself, so that a resumed run goes on saving where it was saved.
void check_outputs(const Options& o) {
    std::vector<FileOption> outputs{{o.dump, "--dump-scores"}},
        inputs{{o.train_file, "--train"}, {o.eval_file, "--eval"}, {o.score_file, "--score"}};
    for (const char* suffix : {"", ".vocab", ".model"}) {
        if (!o.save.empty()) outputs.push_back({o.save + suffix, "--save"});
        if (!o.resume.empty() && o.resume != o.save) inputs.push_back({o.resume + suffix, "--resume"});
    }
    check_outputs(outputs, inputs);
}

int run(Options o) {
    check_outputs(o);
    std::cout << std::unitbuf;  // progress lines appear as they happen, also in a log file
    // Independent steps (the towers, the LSTM directions) run side by side, one BLAS thread each:
    // on this model that scales better than threads inside each GEMM (bench/README.md).
    set_blas_threads(1);
    set_inter_op_threads(static_cast<int>(o.threads));
    set_seed(o.seed);

    QaData train, eval;
    if (o.train_file.empty()) {
        SyntheticQaOptions s;
        s.questions = o.synthetic_questions;
        s.vocab = o.synthetic_vocab;
        s.copy = o.synthetic_copy;
        s.seed = o.seed;
        train = make_synthetic_qa(s);
        s.questions = std::max<std::size_t>(50, o.synthetic_questions / 4);
        s.seed = o.seed + 1000;
        eval = make_synthetic_qa(s);
    } else {
        train = read_qa_tsv(o.train_file);
        if (!o.eval_file.empty()) eval = read_qa_tsv(o.eval_file);
        QaReadOptions cased;
        cased.lowercase = false;
        qa::add_question_names(read_qa_tsv(o.train_file, cased), o.names);
        if (!o.eval_file.empty()) qa::add_question_names(read_qa_tsv(o.eval_file, cased), o.names);
    }
    if (o.max_pairs && train.pairs.size() > o.max_pairs) train.pairs.resize(o.max_pairs);
    if (o.folds == 0) return run_single(o, std::move(train), eval);

    qa::CrossFitOptions co;
    co.folds = o.folds;
    co.select_epoch = o.select_epoch;
    co.min_count = o.min_count;
    co.seed = o.seed;
    co.train = o.training;
    co.model = o.model;
    co.dump = o.dump;
    co.names = o.names;
    qa::run_cross_fitting(train, eval, co);
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
    app.add_option("--epochs", o.training.epochs, "training epochs")->capture_default_str();
    app.add_option("--batch", o.training.batch, "items per minibatch")->capture_default_str();
    app.add_option("--lr", o.training.lr, "Adam learning rate")->capture_default_str();
    app.add_option("--clip", o.training.clip, "gradient clipping by global norm (0 = off)")->capture_default_str();
    app.add_option("--loss", o.training.loss,
                   "hinge: ranking loss on (question, true, wrong) triplets; mse: (cos - label)^2")
        ->check(CLI::IsMember({"hinge", "mse"}))
        ->capture_default_str();
    app.add_option("--embed", o.model.embed, "embedding dimension")->capture_default_str();
    app.add_option("--hidden", o.model.hidden, "LSTM size per direction")->capture_default_str();
    app.add_option("--dense", o.model.dense, "Dense output (attention) dimension")->capture_default_str();
    app.add_flag("--freeze-embedding", o.training.freeze_embedding,
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
                 "end with the parameters of the epoch whose cosine ranks the held-out training questions best "
                 "(with --folds: the out-of-fold cosines of all training questions)");
    app.add_option("--folds", o.folds,
                   "cross-fitting: train K networks, each on all but one fold of the training questions, and fit "
                   "the combined score on every training pair's out-of-fold cosine (needs --eval; 0 = off)")
        ->check(CLI::Range(0, 20));
    app.add_option("--hard-negatives", o.training.hard_negatives,
                   "N >= 0: train only on wrong answers whose word-overlap count is at least the true answer's - N "
                   "(those the overlap baseline gets wrong or nearly), so the cosine learns what overlap misses")
        ->check(CLI::Range(-1, 100));
    app.add_option("--dump-scores", o.dump,
                   "with --folds: write every pair's overlap features and cosines (out-of-fold for training pairs, "
                   "one per network for evaluation pairs) to this TSV");
    app.add_option("--min-count", o.min_count, "words seen fewer times map to <unk>")->capture_default_str();
    app.add_option("--max-pairs", o.max_pairs, "use only the first N training pairs (0 = all)");
    app.add_option("--questions", o.synthetic_questions, "synthetic data: training questions")->capture_default_str();
    app.add_option("--synthetic-vocab", o.synthetic_vocab, "synthetic data: vocabulary size")->capture_default_str();
    app.add_option("--synthetic-copy", o.synthetic_copy, "synthetic data: question tokens copied into a true answer")
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed for data order and initial weights")->capture_default_str();
    app.add_option("--threads", o.threads, "threads: independent steps of the model run at once")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    app.add_option("--save", o.save, "checkpoint file written after every epoch");
    app.add_option("--resume", o.resume, "checkpoint to continue from (or to score with)")->check(CLI::ExistingFile);
    app.add_option("--score", o.score_file, "print the model's score for every pair of this TSV and exit")
        ->check(CLI::ExistingFile);
    CLI11_PARSE(app, argc, argv);
    if (!o.score_file.empty() && o.resume.empty()) {
        std::cerr << "--score needs a trained model: pass --resume CHECKPOINT\n";
        return 2;
    }
    if (o.folds == 1 ||
        (o.folds && (!o.save.empty() || !o.resume.empty() || (!o.train_file.empty() && o.eval_file.empty())))) {
        std::cerr << "--folds K needs K >= 2 and --eval, and trains K networks that are not saved: drop --save, "
                     "--resume and --score\n";
        return 2;
    }
    o.training.seed = o.seed;
    try {
        return run(o);
    } catch (const loom::Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
