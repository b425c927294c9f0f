// qa_similarity: the seed 000 question/answer model, trained and used end to end.
//
//   qa_similarity                                  built-in synthetic data, a short run
//   qa_similarity --train T.tsv --eval D.tsv       question<TAB>sentence<TAB>label files (raw or tokenised)
//   qa_similarity ... --save M.loom                one file: vocabulary, settings, parameters by name
//   qa_similarity --model M.loom --score P.tsv     final_score<TAB>network_score per pair, on stdout
//   qa_similarity ... --plot DIR --graph G.dot     training curve, attention heatmaps, the graph
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <xtensor/xadapt.hpp>

#include <loom.hpp>

#include "data/text.hpp"

#include "model.hpp"
#include "synthetic.hpp"
#include "text.hpp"

using namespace loom;

namespace {

struct Options {
    std::string train_file, eval_file, save, model_file, score_file, plot_dir, graph_file;
    std::size_t epochs = 2, batch = 32, threads = 1, questions = 600;
    double lr = 1e-3, holdout = 0.1;
    std::uint64_t seed = 1;
    // The settings that did best on SelQA (README): one small tower for both sides, dropout, and three
    // overlap features per token; a larger model memorises its training questions sooner.
    qa::ModelOptions model{
        .embed = 50, .hidden = 64, .dense = 64, .shared = true, .overlap_inputs = true, .dropout = 0.5, .features = 3};
};

// Everything a trained model needs besides its parameters; all of it goes into the model file.
struct Text {
    std::vector<std::string> words{"<pad>", "<unk>"};
    std::unordered_map<std::string, std::size_t> ids;
    qa::Idf idf;
    double lambda = 0;         // final score = cosine + lambda * idf-weighted word overlap
    std::size_t features = 1;  // per token: 1 (overlap flag) or 3 (qa::overlap_features)

    void add(const std::string& w) {
        if (ids.emplace(w, words.size()).second) words.push_back(w);
    }
    double final_score(const QaPair& p, double cosine) const {
        return cosine + lambda * qa::word_overlap(p.question, p.answer, &idf);
    }
};

// One side of a minibatch: token ids and overlap flags against the other side.
struct Side {
    std::vector<std::vector<std::size_t>> ids;
    std::vector<xt::xarray<float>> flags;
    void add(const Text& t, const std::vector<std::string>& tokens, const std::vector<std::string>& other) {
        ids.emplace_back();
        for (const auto& w : tokens) ids.back().push_back(t.ids.count(w) ? t.ids.at(w) : 1);
        const auto f = t.features == 1 ? qa::overlap_flags(tokens, other) : qa::overlap_features(tokens, other, t.idf);
        flags.push_back(xt::adapt(f, {tokens.size(), t.features}));
    }
    void bind(Bindings& in, const Variable& ids_in, const Variable& flags_in, bool with_flags) const {
        in.emplace(ids_in, Value::index_sequences(ids));
        if (with_flags) in.emplace(flags_in, Value::sequences(flags));
    }
};

// The network's cosine for every pair; heat rows of the attention weights of the first `keep` true
// pairs (question and answer) go to *attention.
std::vector<double> network_scores(const qa::Model& m, const Text& t, const QaData& data,
                                   std::vector<svg::HeatRow>* attention = nullptr, std::size_t keep = 0) {
    Session session({m.cosine, m.question_attention, m.answer_attention});
    std::vector<double> scores;
    for (std::size_t start = 0; start < data.pairs.size(); start += 64) {
        Side q, a;
        Bindings in;
        for (std::size_t i = start; i < std::min(start + 64, data.pairs.size()); ++i) {
            q.add(t, data.pairs[i].question, data.pairs[i].answer);
            a.add(t, data.pairs[i].answer, data.pairs[i].question);
        }
        q.bind(in, m.question, m.question_flags, m.options.overlap_inputs);
        a.bind(in, m.answer, m.answer_flags, m.options.overlap_inputs);
        session.forward(in);
        const auto cos = session.value(m.cosine).batch();
        for (std::size_t k = 0; k < q.ids.size(); ++k) {
            scores.push_back(cos(k, 0));
            if (!attention || attention->size() >= 2 * keep || !data.pairs[start + k].label) continue;
            const auto wq = session.value(m.question_attention).sequence(k);
            const auto wa = session.value(m.answer_attention).sequence(k);
            attention->push_back({"question: the seed's attention weight per token",
                                  data.pairs[start + k].question,
                                  {wq.begin(), wq.end()}});
            attention->push_back({"its true answer", data.pairs[start + k].answer, {wa.begin(), wa.end()}});
        }
    }
    return scores;
}

RankingMetrics rank(const QaData& d, const std::vector<double>& s) {
    return ranking_metrics(d.groups(), s, d.labels());
}

std::string settings_of(const qa::ModelOptions& m, const Text& t) {
    std::ostringstream s;
    s.precision(17);
    s << "embed " << m.embed << " hidden " << m.hidden << " dense " << m.dense << " shared " << m.shared
      << " overlap_inputs " << m.overlap_inputs << " features " << m.features << " lambda " << t.lambda << " documents "
      << t.idf.documents;
    return s.str();
}

void save_model(const std::string& path, const qa::Model& m, const Text& t) {
    std::string vocabulary, df;
    for (const auto& w : t.words) {
        vocabulary += w + "\n";
        df += std::to_string(t.idf.document_frequency.count(w) ? t.idf.document_frequency.at(w) : 0.0) + "\n";
    }
    save_model_file(path, "qa_similarity", m.parameters(),
                    {{"settings", settings_of(m.options, t)}, {"vocabulary", vocabulary}, {"df", df}});
}

// Reads a model file and rebuilds its network: nothing else is built.
std::unique_ptr<qa::Model> load_model(const std::string& path, Text& t) {
    const ModelFile f = read_model_file(path, "qa_similarity");
    std::map<std::string, double> s;
    std::istringstream settings(f.records.count("settings") ? f.records.at("settings") : "");
    for (std::string key; settings >> key;) settings >> s[key];
    for (const char* key : {"embed", "hidden", "dense", "shared", "overlap_inputs", "features", "lambda", "documents"})
        if (!s.count(key)) throw DataError(path + ": its settings lack '" + key + "'");
    if (s["features"] != 1 && s["features"] != 3) throw DataError(path + ": features must be 1 or 3");
    std::istringstream words(f.records.count("vocabulary") ? f.records.at("vocabulary") : "");
    std::istringstream df(f.records.count("df") ? f.records.at("df") : "");
    t = Text{{}, {}, {{}, s["documents"]}, s["lambda"], std::size_t(s["features"])};
    for (std::string w; std::getline(words, w);) {
        t.add(w);
        if (!(df >> t.idf.document_frequency[w])) throw DataError(path + ": the vocabulary and df lists differ");
    }
    const qa::ModelOptions mo{.vocab = t.words.size(),
                              .embed = std::size_t(s["embed"]),
                              .hidden = std::size_t(s["hidden"]),
                              .dense = std::size_t(s["dense"]),
                              .shared = s["shared"] != 0,
                              .overlap_inputs = s["overlap_inputs"] != 0,
                              .features = t.features};
    auto model = std::make_unique<qa::Model>(mo);
    assign_parameters(f, model->parameters());
    return model;
}

int score(const Options& o) {
    Text t;
    const auto model = load_model(o.model_file, t);
    const QaData data = qa::read_pairs(o.score_file, true);
    const auto cos = network_scores(*model, t, data);
    for (std::size_t i = 0; i < cos.size(); ++i)
        std::printf("%.6f\t%.6f\n", t.final_score(data.pairs[i], cos[i]), cos[i]);
    std::cerr << "scored " << cos.size() << " pairs of " << o.score_file << " with " << o.model_file << "\n";
    return 0;
}

// An output file's directory must exist and be writable before hours of training, not after.
void check_writable(const std::string& path, const std::string& option) {
    const std::string probe = path + ".write-check";
    if (!std::ofstream(probe)) throw UserError(option + " " + path + ": cannot write there");
    std::filesystem::remove(probe);
}

int train(Options o) {
    if (!o.save.empty()) check_writable(o.save, "--save");
    if (!o.graph_file.empty()) check_writable(o.graph_file, "--graph");
    if (!o.plot_dir.empty())
        std::filesystem::create_directories(o.plot_dir), check_writable(o.plot_dir + "/x", "--plot");
    QaData train, eval, held_out;
    if (o.train_file.empty()) {
        train = qa::make_synthetic({.questions = o.questions, .vocab = 2000, .copy = 0, .seed = o.seed});
        eval = qa::make_synthetic({.questions = o.questions / 4, .vocab = 2000, .copy = 0, .seed = o.seed + 1000});
    } else {
        train = qa::read_pairs(o.train_file);
        if (!o.eval_file.empty()) eval = qa::read_pairs(o.eval_file);
    }
    if (!eval.pairs.empty() && eval.num_positives() == 0)
        throw DataError(eval.source + ": no pair is labelled 1, so MAP and MRR are undefined");
    // Every 1/holdout-th question is kept out of training: the epoch and the final score's weight
    // are chosen on it, never on the evaluation file.
    const auto every = static_cast<std::size_t>(std::max(2.0, std::round(1.0 / std::max(o.holdout, 1e-9))));
    held_out.source = "held-out questions", held_out.num_groups = train.num_groups;
    std::vector<QaPair> kept;
    for (auto& p : train.pairs) (o.holdout > 0 && p.group % every == every - 1 ? held_out.pairs : kept).push_back(p);
    train.pairs = std::move(kept);

    std::vector<std::pair<std::size_t, std::size_t>> items;  // (true answer, wrong answer) of one question
    std::vector<std::vector<std::size_t>> wrong(train.num_groups);
    for (std::size_t i = 0; i < train.pairs.size(); ++i)
        if (!train.pairs[i].label) wrong[train.pairs[i].group].push_back(i);
    for (std::size_t i = 0; i < train.pairs.size(); ++i)
        for (std::size_t j : train.pairs[i].label ? wrong[train.pairs[i].group] : std::vector<std::size_t>{})
            items.emplace_back(i, j);
    if (items.empty()) throw DataError(train.source + ": no question has both a true (1) and a wrong (0) sentence");

    Text t;
    for (const auto& tokens : train.token_lists())
        for (const auto& w : tokens) t.add(w);
    t.idf = qa::Idf::fit(train);
    t.features = o.model.features;
    o.model.vocab = t.words.size();
    qa::Model m(o.model);
    std::size_t params = 0;
    for (const auto& p : m.parameters()) params += p.shape().size();
    std::cout << "data: " << items.size() << " training triplets from " << train.pairs.size() << " pairs of "
              << train.source << " (+" << held_out.pairs.size() << " held out); vocabulary " << t.words.size() << "\n"
              << "model: embedding " << o.model.embed
              << (!o.model.overlap_inputs ? ""
                  : o.model.features == 1 ? " + overlap flag"
                                          : " + 3 overlap features")
              << ", BiLSTM " << o.model.hidden << "+" << o.model.hidden << ", dense " << o.model.dense
              << (o.model.shared ? ", one tower for both sides" : "") << "; " << params << " parameters\n";
    if (!o.graph_file.empty()) data_text::write_text_atomically(o.graph_file, to_dot({m.cosine}));

    LearnerOptions lo;
    lo.gradient_clipping_norm = 5.0;
    lo.lazy_sparse_rows = true;  // embedding rows a minibatch does not use get no update
    Trainer trainer(m.hinge_loss, m.pair_correct, adam(m.parameters(), o.lr, 0.9, 0.999, 1e-8, lo));
    std::vector<ItemLengths> lengths;
    for (const auto& [good, bad] : items)
        lengths.push_back({train.pairs[good].question.size(), train.pairs[good].answer.size()});
    Batcher batcher(lengths, {.batch_size = o.batch, .seed = o.seed});
    const bool live = ::isatty(STDOUT_FILENO);
    std::vector<double> losses, held_maps, dev_maps;
    std::vector<xt::xarray<float>> best;
    double best_map = -1;
    std::size_t best_epoch = 0;
    for (std::size_t epoch = 0; epoch < o.epochs; ++epoch) {
        const auto start = std::chrono::steady_clock::now();
        auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
        MinibatchResult total;
        std::size_t done = 0;
        while (batcher.position().epoch == epoch) {
            Side q, a, qn, w;
            for (std::size_t k : batcher.next()) {
                const QaPair &good = train.pairs[items[k].first], &bad = train.pairs[items[k].second];
                q.add(t, good.question, good.answer), a.add(t, good.answer, good.question);
                qn.add(t, good.question, bad.answer), w.add(t, bad.answer, good.question);
            }
            Bindings in;
            const bool f = o.model.overlap_inputs;
            q.bind(in, m.question, m.question_flags, f), a.bind(in, m.answer, m.answer_flags, f);
            qn.bind(in, m.question, m.question_negative_flags, f), w.bind(in, m.negative, m.negative_flags, f);
            const TrainingScope training;  // dropout is on only here
            const auto r = trainer.train_minibatch(in);
            total.loss_sum += r.loss_sum, total.loss_count += r.loss_count, done += q.ids.size();
            if (live)
                std::printf("\r  epoch %zu: %zu of %zu, %.0f samples/s ", epoch + 1, done, items.size(),
                            done / seconds());
        }
        const double rate = static_cast<double>(done) / seconds();
        if (live) std::printf("\r%60s\r", "");
        const double held_map = held_out.pairs.empty() ? 0 : rank(held_out, network_scores(m, t, held_out)).map;
        const RankingMetrics dev = eval.pairs.empty() ? RankingMetrics{} : rank(eval, network_scores(m, t, eval));
        std::printf("epoch %zu: loss %.4f, %.0f samples/s; held-out MAP %.4f; dev MAP %.4f MRR %.4f\n", epoch + 1,
                    total.average_loss(), rate, held_map, dev.map, dev.mrr);
        losses.push_back(total.average_loss()), held_maps.push_back(held_map), dev_maps.push_back(dev.map);
        if (held_map > best_map) {
            best_map = held_map, best_epoch = epoch + 1, best.clear();
            for (const auto& p : m.parameters()) best.push_back(p.value());
        }
    }
    if (best_epoch != o.epochs && !held_out.pairs.empty()) {
        for (std::size_t i = 0; i < best.size(); ++i) m.parameters()[i].set_value(best[i]);
        std::printf("kept the parameters of epoch %zu (best held-out MAP)\n", best_epoch);
    }
    // The final score adds the idf-weighted word overlap with the weight best on the held-out questions.
    if (!held_out.pairs.empty()) {
        const auto cos = network_scores(m, t, held_out);
        double best_final = -1;
        for (double lambda : {0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0}) {
            std::vector<double> s;
            Text trial = t;
            trial.lambda = lambda;
            for (std::size_t i = 0; i < cos.size(); ++i) s.push_back(trial.final_score(held_out.pairs[i], cos[i]));
            if (const double map = rank(held_out, s).map; map > best_final) best_final = map, t.lambda = lambda;
        }
    }
    if (!o.save.empty()) save_model(o.save, m, t), std::cout << "saved " << o.save << "\n";
    if (eval.pairs.empty()) return 0;
    std::vector<svg::HeatRow> attention;
    const auto cos = network_scores(m, t, eval, &attention, 3);
    std::vector<double> overlap, final;
    for (std::size_t i = 0; i < cos.size(); ++i) {
        overlap.push_back(qa::word_overlap(eval.pairs[i].question, eval.pairs[i].answer));
        final.push_back(t.final_score(eval.pairs[i], cos[i]));
    }
    const RankingMetrics base = rank(eval, overlap), net = rank(eval, cos), fin = rank(eval, final);
    std::printf("%s, %zu questions:\n  %-36s MAP     MRR     MAP - overlap (95 %% interval)\n  %-36s %.4f  %.4f\n",
                eval.source.c_str(), net.questions, "", "word overlap (shared words)", base.map, base.mrr);
    const std::string final_name = "final: cosine + " + std::to_string(t.lambda).substr(0, 5) + " x idf overlap";
    for (const auto& [name, r] : {std::pair{std::string("network (cosine)"), net}, std::pair{final_name, fin}}) {
        const auto d = qa::paired_bootstrap(r.average_precision, base.average_precision);
        std::printf("  %-36s %.4f  %.4f  %+.4f (%+.4f .. %+.4f)\n", name.c_str(), r.map, r.mrr, d.mean, d.low, d.high);
    }
    if (!o.plot_dir.empty()) {
        data_text::write_text_atomically(
            o.plot_dir + "/training.svg",
            svg::line_charts(
                {{"training loss (hinge)", "epoch", {{"loss", losses}}},
                 {"MAP after each epoch", "epoch", {{"held-out questions", held_maps}, {"dev", dev_maps}}}}));
        for (std::size_t i = 0; i < attention.size(); i += 2)
            data_text::write_text_atomically(o.plot_dir + "/attention_" + std::to_string(i / 2 + 1) + ".svg",
                                             svg::heat_rows({attention[i], attention[i + 1]}));
        std::cout << "plots in " << o.plot_dir << "\n";
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Train the seed's question/answer similarity model, or score pairs with a saved one"};
    app.add_option("--train", o.train_file, "question<TAB>sentence<TAB>label file; default: synthetic data")
        ->check(CLI::ExistingFile);
    app.add_option("--eval", o.eval_file, "file of the same form: MAP and MRR per epoch")->check(CLI::ExistingFile);
    app.add_option("--save", o.save, "write the trained model to this file");
    app.add_option("--model", o.model_file, "a model file written by --save (with --score)")->check(CLI::ExistingFile);
    app.add_option("--score", o.score_file, "print final_score<TAB>network_score per pair of this file")
        ->check(CLI::ExistingFile);
    app.add_option("--plot", o.plot_dir, "write the training curve and attention heatmaps (SVG) here");
    app.add_option("--graph", o.graph_file, "write the model's graph as Graphviz DOT");
    app.add_option("--epochs", o.epochs, "training epochs")->capture_default_str();
    app.add_option("--batch", o.batch, "triplets per minibatch")->capture_default_str();
    app.add_option("--lr", o.lr, "Adam learning rate")->capture_default_str();
    app.add_option("--embed", o.model.embed, "embedding dimension")->capture_default_str();
    app.add_option("--hidden", o.model.hidden, "LSTM size per direction")->capture_default_str();
    app.add_option("--dense", o.model.dense, "Dense output (attention) dimension")->capture_default_str();
    app.add_option("--dropout", o.model.dropout, "dropout on the embedded tokens")->check(CLI::Range(0.0, 0.9));
    app.add_option("--features", o.model.features, "numbers per token: 1 (overlap flag) or 3 (+ idf, bigram)")
        ->check(CLI::IsMember({1, 3}))
        ->capture_default_str();
    app.add_option("--holdout", o.holdout, "fraction of training questions used to choose the epoch and weight")
        ->check(CLI::Range(0.0, 0.5));
    app.add_option("--questions", o.questions, "synthetic data: training questions")->capture_default_str();
    app.add_option("--seed", o.seed, "seed for the data order and the initial weights")->capture_default_str();
    app.add_option("--threads", o.threads, "independent steps of the model run at once")->check(CLI::Range(1, 64));
    CLI11_PARSE(app, argc, argv);
    try {
        if (o.score_file.empty() != o.model_file.empty())
            throw UserError("--score FILE and --model FILE go together (scoring builds nothing else)");
        std::cout << std::unitbuf;
        set_blas_threads(1);  // independent steps run side by side instead (bench/README.md)
        set_inter_op_threads(static_cast<int>(o.threads));
        set_seed(o.seed);
        return o.model_file.empty() ? train(o) : score(o);
    } catch (const std::bad_alloc&) {
        std::cerr << "error: out of memory (a line or a minibatch too large for the memory available?)\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
    }
    return 1;
}
