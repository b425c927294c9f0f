// qa_similarity: the seed 000 question/answer model, trained and used end to end.
//
//   qa_similarity                                  built-in synthetic data, a short run
//   qa_similarity --train T.tsv --eval D.tsv       question<TAB>sentence<TAB>label files (raw or tokenised)
//   qa_similarity ... --save M.loom                one file: vocabulary, settings, parameters by name
//   qa_similarity --model M.loom --score P.tsv     final_score<TAB>network_score per pair, on stdout
//   qa_similarity ... --plot DIR --graph G.dot     training curve, attention heatmaps, the graph
//   mpirun -np N qa_similarity ...                 data-parallel: N questions a step, one per process
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <xtensor/xadapt.hpp>

#include <loom.hpp>

#include "common/command_line.hpp"  // finite numbers, mpirun
#include "model.hpp"

using namespace loom;

namespace {

struct Options {
    std::string train_file, eval_file, save, model_file, score_file, plot_dir, graph_file;
    std::size_t epochs = 3, threads = 1, questions = 600;
    std::uint64_t seed = 1;
    double mpi_timeout = 300;                      // mpirun: seconds a process waits for another
    std::size_t rank = 0, ranks = 1;               // this process and how many train together
    std::shared_ptr<GradientReduction> reduction;  // sums the processes' gradients (mpirun)
    // What did best on SelQA (README): small towers, dropout, the 6 match_features numbers per token.
    qa::ModelOptions model{
        .embed = 50, .hidden = 64, .dense = 64, .overlap_inputs = true, .dropout = 0.5, .features = 6};
};

// The built-in data (qa/synthetic_qa.hpp): each wrong answer repeats two of the question's words, the
// true one none but it shares the question's topic. Counting shared words is misled; the network has
// to learn from the training questions which words go together (20 a topic).
SyntheticQaOptions synthetic_options(std::size_t questions, std::uint64_t seed) {
    return {.questions = questions, .vocab = 2000, .topic_words = 20, .copy = 0, .distractor_copy = 2, .seed = seed};
}

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
Bindings encode(const qa::Model& m, const Text& t, const QaData& data, const std::vector<std::size_t>& items) {
    std::vector<std::vector<std::size_t>> q, a;
    std::vector<xt::xarray<float>> qf, af;
    xt::xarray<float> labels = xt::zeros<float>({items.size(), std::size_t{1}});
    for (std::size_t k = 0; k < items.size(); ++k) {
        const QaPair& p = data.pairs[items[k]];
        q.push_back(t.vocabulary.ids(p.question)), a.push_back(t.vocabulary.ids(p.answer));
        qf.push_back(xt::adapt(match_features(p.question, p.answer, t.idf), {p.question.size(), match_feature_count}));
        af.push_back(xt::adapt(match_features(p.answer, p.question, t.idf), {p.answer.size(), match_feature_count}));
        labels(k, 0) = static_cast<float>(p.label);
    }
    return {{m.question, Value::index_sequences(q)},
            {m.question_flags, Value::sequences(qf)},
            {m.answer, Value::index_sequences(a)},
            {m.answer_flags, Value::sequences(af)},
            {m.label, Value::batch(labels)}};
}

// The network's cosine for every pair; the attention weights of the first three true pairs
// (question and answer) go to *attention as heatmap rows.
std::vector<double> network_scores(const qa::Model& m, const Text& t, const QaData& data,
                                   std::vector<svg::HeatRow>* attention = nullptr) {
    Session session({m.cosine, m.question_attention, m.answer_attention});
    std::vector<double> scores;
    for (std::size_t start = 0; start < data.pairs.size(); start += 64) {
        std::vector<std::size_t> batch;
        for (std::size_t i = start; i < std::min(start + 64, data.pairs.size()); ++i) batch.push_back(i);
        Bindings in = encode(m, t, data, batch);
        in.erase(m.label);
        session.forward(in);
        for (std::size_t k = 0; k < batch.size(); ++k) {
            scores.push_back(session.value(m.cosine).rows()(k, 0));
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

void save_model(const std::string& path, const qa::Model& m, const Text& t) {
    const qa::ModelOptions& mo = m.options;
    const std::string settings = settings_record({{"embed", double(mo.embed)},
                                                  {"hidden", double(mo.hidden)},
                                                  {"dense", double(mo.dense)},
                                                  {"lambda", t.lambda}});
    save_model_file(path, "qa_similarity", m.parameters(),
                    {{"settings", settings}, {"vocabulary", t.vocabulary.to_text()}, {"idf", t.idf.to_text()}});
}

// Reads a model file and rebuilds its network: nothing else is built.
std::unique_ptr<qa::Model> load_model(const std::string& path, Text& t) {
    const ModelFile f = read_model_file(path, "qa_similarity");
    // Training picks lambda among 0 and a few weights up to 3 (significant_weight).
    t = {Vocabulary::parse(f.record("vocabulary"), path + " (vocabulary)"),
         IdfTable::parse(f.record("idf"), path + " (idf)"), f.setting("lambda", 0, 1000)};
    qa::ModelOptions mo = Options{}.model;
    mo.vocab = t.vocabulary.size(), mo.embed = f.whole_setting("embed", 1, 4096);
    mo.hidden = f.whole_setting("hidden", 1, 4096), mo.dense = f.whole_setting("dense", 1, 4096);
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

int train(Options o) {
    if (o.rank > 0) o.save = o.graph_file = o.plot_dir = "";  // rank 0 alone writes files
    // Every file this run writes is checked before minutes of training, not after (data/output_files.hpp).
    std::vector<FileOption> outputs{{o.save, "--save"}, {o.graph_file, "--graph"}};
    if (!o.plot_dir.empty())
        for (const char* name : {"training.svg", "attention_1.svg", "attention_2.svg", "attention_3.svg"})
            outputs.push_back({o.plot_dir + "/" + name, "--plot", true});
    check_outputs(outputs, {{o.train_file, "--train"}, {o.eval_file, "--eval"}});
    if (!o.plot_dir.empty()) std::filesystem::create_directories(o.plot_dir);
    QaData train, eval;
    if (o.train_file.empty()) {
        train = make_synthetic_qa(synthetic_options(o.questions, o.seed));
        eval = make_synthetic_qa(synthetic_options(o.questions / 4, o.seed + 1000));
    } else {
        train = read_qa_text(o.train_file);
        if (!o.eval_file.empty()) eval = read_qa_text(o.eval_file);
    }
    if (!eval.pairs.empty() && eval.num_positives() == 0)
        throw DataError(eval.source + ": no pair is labelled 1, so MAP and MRR are undefined");
    // Every 10th question chooses when to stop and the final score's weight, never the evaluation file.
    const QaData held = train.hold_out(10);
    // One training step is one question: the listwise loss compares all its candidates at once.
    const auto questions = train.by_question(true);
    if (questions.empty()) throw DataError(train.source + ": no question has both a true (1) and a wrong (0) sentence");
    Text t{Vocabulary::build(train.token_lists()), IdfTable::fit(train.token_lists())};
    o.model.vocab = t.vocabulary.size();
    qa::Model m(o.model);
    std::printf(
        "data: %zu training questions of %s, %zu pairs held out%s\nmodel: per side embedding %zu (vocabulary "
        "%zu) + 6 match numbers, BiLSTM %zu+%zu, dense %zu; %zu parameters\n",
        questions.size(), train.source.c_str(), held.pairs.size(),
        o.train_file.empty() ? "; wrong answers copy question words" : "", o.model.embed, t.vocabulary.size(),
        o.model.hidden, o.model.hidden, o.model.dense, parameter_count(m.parameters()));
    if (!o.graph_file.empty()) write_text_atomically(o.graph_file, to_dot({m.cosine}));

    LearnerOptions lo{.gradient_clipping_norm = 5.0, .lazy_sparse_rows = true};  // rows a step does not use stay
    Trainer trainer(m.listwise_loss, Variable(), adam(m.parameters(), 1e-3, 0.9, 0.999, 1e-8, lo),
                    {.reduction = o.reduction});
    // A step is `ranks` questions, one per process (an epoch's last few, when fewer, wait for the next).
    Batcher order(std::vector<ItemLengths>(questions.size()), {.batch_size = 1, .sort_window = 0, .seed = o.seed});
    const EpochSource source{questions.size() / o.ranks,
                             [&](std::size_t epoch, std::size_t i) {
                                 order.set_position({epoch, i * o.ranks + o.rank});
                                 return encode(m, t, train, questions[order.next()[0]]);
                             },
                             questions.size()};
    std::vector<double> held_maps, dev_maps;
    // The network kept: the mean parameters of all evaluations (the best one's held-out MAP is noise).
    ParameterAverage average(m.parameters());
    auto evaluate = [&]() -> Evaluation {
        average.add();
        held_maps.push_back(held.rank(network_scores(m, t, held)).map);
        const RankingMetrics dev = eval.pairs.empty() ? RankingMetrics{} : eval.rank(network_scores(m, t, eval));
        dev_maps.push_back(dev.map);
        char text[96];
        std::snprintf(text, sizeof text, "held-out MAP %.4f; dev MAP %.4f MRR %.4f", held_maps.back(), dev.map,
                      dev.mrr);
        return {held_maps.back(), text};
    };
    ProgressOptions bar;
    if (o.ranks > 1) bar.live = false;  // mpirun gives processes a terminal even when output goes to a file
    const FitResult r = fit(trainer, source,
                            {.max_epochs = o.epochs,
                             .evaluate_every = (source.minibatches_per_epoch + 1) / 2,
                             .patience = 3,
                             .restore_best = false,
                             .progress_stream = &std::cout,
                             .progress = bar},
                            held.pairs.empty() ? std::function<Evaluation()>{} : evaluate);
    if (average.count() > 0) average.assign();
    // The final score adds idf-weighted word overlap only where that beats the network alone on the
    // held-out questions beyond their noise (a paired-bootstrap interval above zero).
    std::vector<double> idf_overlap;
    for (const QaPair& p : held.pairs) idf_overlap.push_back(word_overlap(p.question, p.answer, &t.idf));
    if (!held.pairs.empty())
        t.lambda = significant_weight(held.groups(), held.labels(), network_scores(m, t, held), idf_overlap,
                                      {0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0});
    if (o.rank > 0) return 0;  // the others hold the same parameters: rank 0 alone evaluates
    if (!o.save.empty()) save_model(o.save, m, t), std::cout << "saved " << o.save << "\n";
    if (eval.pairs.empty()) return 0;
    std::vector<svg::HeatRow> attention;
    const auto cos = network_scores(m, t, eval, &attention);
    std::vector<double> overlap, final;
    for (std::size_t i = 0; i < cos.size(); ++i) {
        overlap.push_back(word_overlap(eval.pairs[i].question, eval.pairs[i].answer));
        final.push_back(t.final_score(eval.pairs[i], cos[i]));
    }
    const RankingMetrics base = eval.rank(overlap), net = eval.rank(cos), fin = eval.rank(final);
    std::printf("%zu questions of %s; MAP, MRR, MAP - overlap (95 %% interval):\n  %-36s %.4f  %.4f\n", net.questions,
                eval.source.c_str(), "word overlap (shared words)", base.map, base.mrr);
    const auto row = [&](const std::string& name, const RankingMetrics& x) {
        const auto d = paired_bootstrap(x.average_precision, base.average_precision);
        std::printf("  %-36s %.4f  %.4f  %+.4f (%+.4f .. %+.4f)\n", name.c_str(), x.map, x.mrr, d.mean, d.low, d.high);
    };
    row("network (cosine)", net);
    // With a weight of 0 the final score is the network's: its row would repeat the one above.
    if (t.lambda > 0) row("final: cosine + " + std::to_string(t.lambda).substr(0, 5) + " x idf overlap", fin);
    if (o.train_file.empty())
        std::printf("real data (SelQA, README): qa_similarity --train selqa-ass-test.tsv --eval selqa-ass-dev.tsv\n");
    if (o.plot_dir.empty()) return 0;
    std::vector<svg::Chart> charts{{"training loss (listwise)", "epoch", {{"loss", r.epoch_losses}}}};
    if (!held_maps.empty())  // nothing was held out (fewer than 10 questions): no evaluations to draw
        charts.push_back(
            {"MAP at each evaluation", "evaluation", {{"held-out questions", held_maps}, {"dev", dev_maps}}});
    write_text_atomically(o.plot_dir + "/training.svg", svg::line_charts(charts));
    for (std::size_t i = 0; i + 1 < attention.size(); i += 2)
        write_text_atomically(o.plot_dir + "/attention_" + std::to_string(i / 2 + 1) + ".svg",
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
    app.add_option("--score", o.score_file, "print final_score<TAB>network_score per pair")->check(CLI::ExistingFile);
    app.add_option("--plot", o.plot_dir, "write the training curve and attention heatmaps (SVG) here");
    app.add_option("--graph", o.graph_file, "write the model's graph as Graphviz DOT");
    // Every count and size has a range: CLI11 would read -1 into a size_t as 2^64 - 1.
    const auto count = [&](const char* name, std::size_t& to, const char* what, int most) {
        app.add_option(name, to, what)->capture_default_str()->check(CLI::Range(1, most));
    };
    count("--epochs", o.epochs, "training epochs at most", 100000);
    count("--embed", o.model.embed, "embedding dimension", 4096);
    count("--hidden", o.model.hidden, "LSTM size per direction", 4096);
    count("--dense", o.model.dense, "Dense output (attention) dimension", 4096);
    count("--questions", o.questions, "synthetic data: training questions", 10000000);
    app.add_option("--seed", o.seed, "seed for the data order and the initial weights")->capture_default_str();
    app.add_option("--threads", o.threads, "independent steps of the model run at once")->check(CLI::Range(1, 64));
    samples::add_mpi_timeout(app, o.mpi_timeout);
    samples::MpiJob mpi;  // under mpirun, every process trains on its share of each step
    CLI11_PARSE(app, argc, argv);
    try {
        mpi.join(argc, argv, o.mpi_timeout, o.rank, o.ranks, o.reduction);
        if (o.rank > 0 && !std::freopen("/dev/null", "w", stdout)) return 1;  // rank 0 alone prints
        if (o.score_file.empty() != o.model_file.empty())
            throw UserError("--score FILE and --model FILE go together (scoring builds nothing else)");
        if (!o.model_file.empty() && !(o.train_file + o.eval_file + o.save + o.plot_dir + o.graph_file).empty())
            throw UserError("--model FILE scores only: --train, --eval, --save, --plot and --graph do not go with it");
        // The plots draw the --eval pairs' attention; the synthetic data (no --train) brings its own.
        if (!o.plot_dir.empty() && !o.train_file.empty() && o.eval_file.empty())
            throw UserError("--plot " + o.plot_dir +
                            ": the plots are drawn for the pairs of --eval, and there is none; give --eval FILE too");
        std::cout << std::unitbuf;
        set_blas_threads(1);  // independent steps run side by side instead (bench/README.md)
        set_inter_op_threads(static_cast<int>(o.threads));
        set_seed(o.seed);
        return o.model_file.empty() ? train(o) : score(o);
    } catch (const std::bad_alloc&) {
        samples::print_error("out of memory (a line or a minibatch too large for the memory available?)");
    } catch (const std::exception& e) {
        samples::print_error(e.what());
    }
    return 1;
}
