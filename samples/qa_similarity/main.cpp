// qa_similarity: the seed 000 question/answer model, trained and used end to end.
//
//   qa_similarity                                  built-in synthetic data, a short run
//   qa_similarity --train T.tsv --eval D.tsv       question<TAB>sentence<TAB>label files (raw or tokenised)
//   qa_similarity ... --save M.loom                one file: vocabulary, settings, parameters by name
//   qa_similarity --model M.loom --score P.tsv     final_score<TAB>network_score per pair, on stdout
//   qa_similarity ... --plot DIR --graph G.dot     training curve, attention heatmaps, the graph
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <span>
#include <sstream>

#include <xtensor/xadapt.hpp>

#include <loom.hpp>

#include "data/overlap.hpp"
#include "data/text.hpp"
#include "model.hpp"

using namespace loom;

namespace {

struct Options {
    std::string train_file, eval_file, save, model_file, score_file, plot_dir, graph_file;
    std::size_t epochs = 3, evaluations = 2, patience = 3, threads = 1, questions = 600;
    double lr = 1e-3;
    std::uint64_t seed = 1;
    // What did best on SelQA (README): one small tower for both sides, dropout, 3 overlap numbers per token.
    qa::ModelOptions model{
        .embed = 50, .hidden = 64, .dense = 64, .shared = true, .overlap_inputs = true, .dropout = 0.5, .features = 3};
};

// What a trained model needs besides its parameters; all of it goes into the model file.
struct Text {
    Vocabulary vocabulary;
    IdfTable idf;
    double lambda = 0;  // final score = cosine + lambda * idf-weighted word overlap
    double final_score(const QaPair& p, double cosine) const {
        return cosine + lambda * word_overlap(p.question, p.answer, &idf);
    }
};

// The network's inputs for the pairs `items`: each side's ids and overlap numbers, and the labels.
Bindings encode(const qa::Model& m, const Text& t, const QaData& data, std::span<const std::size_t> items) {
    std::vector<std::vector<std::size_t>> q, a;
    std::vector<xt::xarray<float>> qf, af;
    xt::xarray<float> labels = xt::zeros<float>({items.size(), std::size_t{1}});
    for (std::size_t k = 0; k < items.size(); ++k) {
        const QaPair& p = data.pairs[items[k]];
        q.push_back(t.vocabulary.ids(p.question)), a.push_back(t.vocabulary.ids(p.answer));
        qf.push_back(xt::adapt(overlap_features(p.question, p.answer, t.idf), {p.question.size(), std::size_t{3}}));
        af.push_back(xt::adapt(overlap_features(p.answer, p.question, t.idf), {p.answer.size(), std::size_t{3}}));
        labels(k, 0) = static_cast<float>(p.label);
    }
    return {{m.question, Value::index_sequences(q)},
            {m.question_flags, Value::sequences(qf)},
            {m.answer, Value::index_sequences(a)},
            {m.answer_flags, Value::sequences(af)},
            {m.label, Value::batch(labels)}};
}

// The network's cosine for every pair; heat rows of the attention weights of the first three true
// pairs (question and answer) go to *attention.
std::vector<double> network_scores(const qa::Model& m, const Text& t, const QaData& data,
                                   std::vector<svg::HeatRow>* attention = nullptr) {
    Session session({m.cosine, m.question_attention, m.answer_attention});
    std::vector<double> scores;
    std::vector<std::size_t> items(data.pairs.size());
    for (std::size_t i = 0; i < items.size(); ++i) items[i] = i;
    for (std::size_t start = 0; start < items.size(); start += 64) {
        const auto batch = std::span(items).subspan(start, std::min<std::size_t>(64, items.size() - start));
        Bindings in = encode(m, t, data, batch);
        in.erase(m.label);
        session.forward(in);
        const auto cos = session.value(m.cosine).batch();
        for (std::size_t k = 0; k < batch.size(); ++k) {
            scores.push_back(cos(k, 0));
            const QaPair& p = data.pairs[batch[k]];
            if (!attention || attention->size() >= 6 || !p.label) continue;
            const auto wq = session.value(m.question_attention).sequence(k);
            const auto wa = session.value(m.answer_attention).sequence(k);
            attention->push_back(
                {"question: the seed's attention weight per token", p.question, {wq.begin(), wq.end()}});
            attention->push_back({"its true answer", p.answer, {wa.begin(), wa.end()}});
        }
    }
    return scores;
}

RankingMetrics rank(const QaData& d, const std::vector<double>& s) {
    return ranking_metrics(d.groups(), s, d.labels());
}

void save_model(const std::string& path, const qa::Model& m, const Text& t) {
    std::ostringstream settings, words, df;
    settings.precision(17);
    settings << "embed " << m.options.embed << " hidden " << m.options.hidden << " dense " << m.options.dense
             << " lambda " << t.lambda << " documents " << t.idf.documents;
    words << "loom-vocabulary 1\n";  // the header of Vocabulary's own files, so Vocabulary::parse reads it
    for (std::size_t id = 0; id < t.vocabulary.size(); ++id) {
        const auto it = t.idf.document_frequency.find(t.vocabulary.word(id));
        words << t.vocabulary.word(id) << "\n", df << (it == t.idf.document_frequency.end() ? 0 : it->second) << "\n";
    }
    save_model_file(path, "qa_similarity", m.parameters(),
                    {{"settings", settings.str()}, {"vocabulary", words.str()}, {"df", df.str()}});
}

// Reads a model file and rebuilds its network: nothing else is built.
std::unique_ptr<qa::Model> load_model(const std::string& path, Text& t) {
    const ModelFile f = read_model_file(path, "qa_similarity");
    auto record = [&](const std::string& key) {
        if (!f.records.count(key)) throw DataError(path + ": the model file has no '" + key + "' record");
        return std::istringstream(f.records.at(key));
    };
    std::map<std::string, double> s;
    auto settings = record("settings"), words = record("vocabulary"), df = record("df");
    for (std::string key; settings >> key;) settings >> s[key];
    for (const char* key : {"embed", "hidden", "dense", "lambda", "documents"})
        if (!s.count(key)) throw DataError(path + ": its settings lack '" + key + "'");
    t.vocabulary = Vocabulary::parse(words, path + " (vocabulary)");
    t.idf.documents = s["documents"], t.lambda = s["lambda"];
    for (std::size_t id = 0; id < t.vocabulary.size(); ++id) {
        double count = 0;
        if (!(df >> count)) throw DataError(path + ": fewer document frequencies than words");
        if (count > 0) t.idf.document_frequency[t.vocabulary.word(id)] = count;
    }
    qa::ModelOptions mo = Options{}.model;
    mo.vocab = t.vocabulary.size(), mo.embed = std::size_t(s["embed"]), mo.hidden = std::size_t(s["hidden"]);
    mo.dense = std::size_t(s["dense"]);
    auto model = std::make_unique<qa::Model>(mo);
    assign_parameters(f, model->parameters());
    return model;
}

int score(const Options& o) {
    Text t;
    const auto model = load_model(o.model_file, t);
    const QaData data = read_qa_text(o.score_file, true);
    const auto cos = network_scores(*model, t, data);
    for (std::size_t i = 0; i < cos.size(); ++i)
        std::printf("%.6f\t%.6f\n", t.final_score(data.pairs[i], cos[i]), cos[i]);
    std::cerr << "scored " << cos.size() << " pairs of " << o.score_file << " with " << o.model_file << "\n";
    return 0;
}

// An output file's directory must exist and be writable before hours of training, not after.
void check_writable(const std::string& path, const std::string& option) {
    if (path.empty()) return;
    if (!std::ofstream(path + ".write-check")) throw UserError(option + " " + path + ": cannot write there");
    std::filesystem::remove(path + ".write-check");
}

std::string metrics_text(const char* what, const RankingMetrics& r) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s MAP %.4f MRR %.4f", what, r.map, r.mrr);
    return buf;
}

int train(Options o) {
    if (!o.plot_dir.empty()) std::filesystem::create_directories(o.plot_dir);
    check_writable(o.save, "--save"), check_writable(o.graph_file, "--graph");
    check_writable(o.plot_dir.empty() ? "" : o.plot_dir + "/x", "--plot");
    QaData train, eval, held;
    if (o.train_file.empty()) {
        train = qa::make_synthetic({.questions = o.questions, .vocab = 2000, .copy = 0, .seed = o.seed});
        eval = qa::make_synthetic({.questions = o.questions / 4, .vocab = 2000, .copy = 0, .seed = o.seed + 1000});
    } else {
        train = read_qa_text(o.train_file);
        if (!o.eval_file.empty()) eval = read_qa_text(o.eval_file);
    }
    if (!eval.pairs.empty() && eval.num_positives() == 0)
        throw DataError(eval.source + ": no pair is labelled 1, so MAP and MRR are undefined");
    // Every 10th question is kept out of training: it chooses when to stop and the final score's
    // weight, never the evaluation file.
    held.source = "held-out questions", held.num_groups = train.num_groups;
    std::vector<QaPair> kept;
    for (auto& p : train.pairs) (p.group % 10 == 9 ? held.pairs : kept).push_back(p);
    train.pairs = std::move(kept);
    // One training step is one question: the listwise loss compares all its candidates at once.
    std::vector<std::vector<std::size_t>> questions(train.num_groups);
    for (std::size_t i = 0; i < train.pairs.size(); ++i) questions[train.pairs[i].group].push_back(i);
    std::erase_if(questions, [&](const auto& q) {
        std::size_t positives = 0;
        for (std::size_t i : q) positives += train.pairs[i].label;
        return positives == 0 || positives == q.size();
    });
    if (questions.empty()) throw DataError(train.source + ": no question has both a true (1) and a wrong (0) sentence");

    Text t{Vocabulary::build(train.token_lists()), IdfTable::fit(train.token_lists())};
    o.model.vocab = t.vocabulary.size();
    qa::Model m(o.model);
    std::size_t params = 0;
    for (const auto& p : m.parameters()) params += p.shape().size();
    std::cout << "data: " << questions.size() << " training questions (" << train.pairs.size() << " pairs) of "
              << train.source << ", " << held.pairs.size() << " pairs held out; vocabulary " << t.vocabulary.size()
              << "\nmodel: embedding " << o.model.embed << " + 3 overlap numbers, BiLSTM " << o.model.hidden << "+"
              << o.model.hidden << ", dense " << o.model.dense << ", one tower for both sides; " << params
              << " parameters\n";
    if (!o.graph_file.empty()) data_text::write_text_atomically(o.graph_file, to_dot({m.cosine}));

    LearnerOptions lo;
    lo.gradient_clipping_norm = 5.0;
    lo.lazy_sparse_rows = true;  // embedding rows a minibatch does not use get no update
    Trainer trainer(m.listwise_loss, Variable(), adam(m.parameters(), o.lr, 0.9, 0.999, 1e-8, lo));
    Batcher order(std::vector<ItemLengths>(questions.size()), {.batch_size = 1, .sort_window = 0, .seed = o.seed});
    const EpochSource source{questions.size(),
                             [&](std::size_t epoch, std::size_t i) {
                                 order.set_position({epoch, i});
                                 return encode(m, t, train, questions[order.next()[0]]);
                             },
                             questions.size()};
    std::vector<double> held_maps, dev_maps;
    auto evaluate = [&]() -> Evaluation {
        held_maps.push_back(rank(held, network_scores(m, t, held)).map);
        std::string text = "held-out MAP " + std::to_string(held_maps.back()).substr(0, 6);
        if (eval.pairs.empty()) return {held_maps.back(), text};
        const RankingMetrics dev = rank(eval, network_scores(m, t, eval));
        dev_maps.push_back(dev.map);
        return {held_maps.back(), text + "; " + metrics_text("dev", dev)};
    };
    FitOptions fo{.max_epochs = o.epochs,
                  .evaluate_every = std::max<std::size_t>(1, questions.size() / o.evaluations),
                  .patience = o.patience,
                  .progress_stream = &std::cout};
    const FitResult r = fit(trainer, source, fo, held.pairs.empty() ? std::function<Evaluation()>{} : evaluate);
    if (r.best >= 0) std::printf("kept the parameters of step %zu (best held-out MAP)\n", r.evaluations[r.best].step);
    // The final score adds the idf-weighted word overlap with the weight best on the held-out questions.
    if (!held.pairs.empty()) {
        const auto cos = network_scores(m, t, held);
        double best_final = -1;
        for (double lambda : {0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0}) {
            std::vector<double> s;
            for (std::size_t i = 0; i < cos.size(); ++i)
                s.push_back(cos[i] + lambda * word_overlap(held.pairs[i].question, held.pairs[i].answer, &t.idf));
            if (const double map = rank(held, s).map; map > best_final) best_final = map, t.lambda = lambda;
        }
    }
    if (!o.save.empty()) save_model(o.save, m, t), std::cout << "saved " << o.save << "\n";
    if (eval.pairs.empty()) return 0;
    std::vector<svg::HeatRow> attention;
    const auto cos = network_scores(m, t, eval, &attention);
    std::vector<double> overlap, final;
    for (std::size_t i = 0; i < cos.size(); ++i) {
        overlap.push_back(word_overlap(eval.pairs[i].question, eval.pairs[i].answer));
        final.push_back(t.final_score(eval.pairs[i], cos[i]));
    }
    const RankingMetrics base = rank(eval, overlap), net = rank(eval, cos), fin = rank(eval, final);
    std::printf("%s, %zu questions:\n  %-36s MAP     MRR     MAP - overlap (95 %% interval)\n  %-36s %.4f  %.4f\n",
                eval.source.c_str(), net.questions, "", "word overlap (shared words)", base.map, base.mrr);
    const std::string final_name = "final: cosine + " + std::to_string(t.lambda).substr(0, 5) + " x idf overlap";
    for (const auto& [name, x] : {std::pair{std::string("network (cosine)"), net}, std::pair{final_name, fin}}) {
        const auto d = paired_bootstrap(x.average_precision, base.average_precision);
        std::printf("  %-36s %.4f  %.4f  %+.4f (%+.4f .. %+.4f)\n", name.c_str(), x.map, x.mrr, d.mean, d.low, d.high);
    }
    if (o.plot_dir.empty()) return 0;
    std::vector<svg::Chart> charts{{"training loss (listwise)", "epoch", {{"loss", r.epoch_losses}}}};
    if (!held_maps.empty())
        charts.push_back(
            {"MAP at each evaluation", "evaluation", {{"held-out questions", held_maps}, {"dev", dev_maps}}});
    data_text::write_text_atomically(o.plot_dir + "/training.svg", svg::line_charts(charts));
    for (std::size_t i = 0; i + 1 < attention.size(); i += 2)
        data_text::write_text_atomically(o.plot_dir + "/attention_" + std::to_string(i / 2 + 1) + ".svg",
                                         svg::heat_rows({attention[i], attention[i + 1]}));
    std::cout << "plots in " << o.plot_dir << "\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Train the seed's question/answer similarity model, or score pairs with a saved one"};
    app.add_option("--train", o.train_file, "question<TAB>sentence<TAB>label file; default: synthetic data")
        ->check(CLI::ExistingFile);
    app.add_option("--eval", o.eval_file, "file of the same form: MAP and MRR")->check(CLI::ExistingFile);
    app.add_option("--save", o.save, "write the trained model to this file");
    app.add_option("--model", o.model_file, "a model file written by --save (with --score)")->check(CLI::ExistingFile);
    app.add_option("--score", o.score_file, "print final_score<TAB>network_score per pair of this file")
        ->check(CLI::ExistingFile);
    app.add_option("--plot", o.plot_dir, "write the training curve and attention heatmaps (SVG) here");
    app.add_option("--graph", o.graph_file, "write the model's graph as Graphviz DOT");
    app.add_option("--epochs", o.epochs, "training epochs at most")->capture_default_str();
    app.add_option("--evaluations", o.evaluations, "evaluations on held-out questions per epoch")
        ->capture_default_str();
    app.add_option("--patience", o.patience, "stop after this many evaluations without a better one")
        ->capture_default_str();
    app.add_option("--lr", o.lr, "Adam learning rate")->capture_default_str();
    app.add_option("--embed", o.model.embed, "embedding dimension")->capture_default_str();
    app.add_option("--hidden", o.model.hidden, "LSTM size per direction")->capture_default_str();
    app.add_option("--dense", o.model.dense, "Dense output (attention) dimension")->capture_default_str();
    app.add_option("--dropout", o.model.dropout, "dropout on the embedded tokens")->check(CLI::Range(0.0, 0.9));
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
