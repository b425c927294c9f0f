// g2p: spelling -> pronunciation with an attention decoder (CNTK's sequence-to-sequence tutorial 204).
//
//   g2p                                             built-in synthetic words, a short run
//   g2p --train cmudict-train.dict --eval cmudict-dev.dict --minutes 30 --save M.loom
//   g2p --model M.loom --predict word other ...      word<TAB>PH1 PH2 ... per word, on stdout
//   g2p --model M.loom --eval cmudict-dev.dict      WER and PER of a saved model
//   g2p ... --plot DIR                               attention alignments (letters x phonemes), SVG
//
// A BiLSTM reads the letters; an LSTM decoder attends over them inside its loop (Luong's general
// score, input feeding), trained with teacher forcing; beam search writes the phonemes. The model
// is samples/g2p/model.hpp; the reader, WER/PER and beam search are loom's.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>

#include <loom.hpp>

#include "model.hpp"

using namespace loom;

namespace {

struct Options {
    std::string train_file, eval_file, save, model_file, plot_dir;
    std::vector<std::string> predict;
    std::size_t epochs = 8, batch = 64, beam = 5, threads = 1, max_length = 30, words = 3000;
    double minutes = 0, learning_rate = 2e-3;  // minutes 0: no time limit
    std::uint64_t seed = 1;
    g2p::Sizes sizes;
};

// Synthetic words and their pronunciations by a few English-like rules (digraphs, a soft c and g
// before e and i, a silent final e), so that the default run shows a model learning context.
PronunciationDictionary synthetic_words(std::size_t count, std::uint64_t seed) {
    const std::vector<std::pair<std::string, Pronunciation>> onsets{
        {"b", {"B"}}, {"c", {"K"}}, {"d", {"D"}},   {"f", {"F"}},   {"g", {"G"}},   {"h", {"HH"}},     {"k", {"K"}},
        {"l", {"L"}}, {"m", {"M"}}, {"n", {"N"}},   {"p", {"P"}},   {"r", {"R"}},   {"s", {"S"}},      {"t", {"T"}},
        {"v", {"V"}}, {"w", {"W"}}, {"th", {"TH"}}, {"sh", {"SH"}}, {"ch", {"CH"}}, {"qu", {"K", "W"}}};
    const std::vector<std::pair<std::string, Pronunciation>> vowels{{"a", {"AE"}},  {"e", {"EH"}}, {"i", {"IH"}},
                                                                    {"o", {"AA"}},  {"u", {"AH"}}, {"ee", {"IY"}},
                                                                    {"oo", {"UW"}}, {"ai", {"EY"}}};
    const std::vector<std::pair<std::string, Pronunciation>> codas{
        {"", {}}, {"", {}}, {"n", {"N"}}, {"t", {"T"}}, {"ng", {"NG"}}, {"x", {"K", "S"}}, {"ck", {"K"}}, {"l", {"L"}}};
    std::mt19937_64 rng(seed);
    auto pick = [&](const auto& list) { return list[rng() % list.size()]; };
    PronunciationDictionary dict("synthetic words");
    while (dict.size() < count) {
        std::string word;
        Pronunciation p;
        for (std::size_t s = 0, n = 1 + rng() % 3; s < n; ++s) {
            auto onset = pick(onsets), vowel = pick(vowels), coda = pick(codas);
            if ((onset.first == "c" || onset.first == "g") && (vowel.first[0] == 'e' || vowel.first[0] == 'i'))
                onset.second = {onset.first == "c" ? "S" : "JH"};
            word += onset.first + vowel.first + coda.first;
            for (const Pronunciation* part : {&onset.second, &vowel.second, &coda.second})
                p.insert(p.end(), part->begin(), part->end());
        }
        if (rng() % 4 == 0 && !p.empty() && word.back() != 'e' &&
            std::string("aeiou").find(word.back()) == std::string::npos)
            word += "e";  // silent
        dict.add(word, p);
    }
    return dict;
}

constexpr std::size_t alignment_plots = 4;  // words drawn by --plot: alignment_1.svg ...

struct Scored {
    G2PScore score;
    std::vector<Pronunciation> predictions;
    std::size_t unfinished = 0;
};

// Beam search over every word of `dict` (each word's first pronunciation is not used), in batches.
Scored predict_all(g2p::Model& m, const PronunciationDictionary& dict, std::size_t beam, std::size_t max_length) {
    Scored s;
    for (std::size_t start = 0; start < dict.size(); start += 128) {
        std::vector<std::vector<std::size_t>> words;
        for (std::size_t i = start; i < std::min(start + 128, dict.size()); ++i)
            words.push_back(g2p::letter_ids(dict.words()[i]));
        const auto p = m.predict(words, beam, max_length);
        s.unfinished += p.unfinished;
        for (const auto& ids : p.phonemes) s.predictions.push_back(g2p::phonemes_of(ids));
    }
    s.score = score_pronunciations(s.predictions, dict.pronunciations());
    return s;
}

void save_model(const std::string& path, const g2p::Model& m) {
    save_model_file(path, "g2p", m.parameters(),
                    {{"settings", settings_record({{"embed", double(m.sizes.embed)},
                                                   {"encoder", double(m.sizes.encoder)},
                                                   {"decoder", double(m.sizes.decoder)}})}});
}

std::unique_ptr<g2p::Model> load_model(const std::string& path) {
    const ModelFile f = read_model_file(path, "g2p");
    auto size = [&](const char* name) { return f.whole_setting(name, 1, 4096); };
    auto m = std::make_unique<g2p::Model>(g2p::Sizes{size("embed"), size("encoder"), size("decoder")});
    assign_parameters(f, m->parameters());
    return m;
}

// One picture per word: a row per emitted phoneme (and </s>), a column per letter, shaded by the
// attention weight that decoder step gave the letter.
void plot_alignments(g2p::Model& m, const PronunciationDictionary& dict, const std::string& dir) {
    std::vector<std::vector<std::size_t>> words;
    for (std::size_t i = 0; i < std::min(alignment_plots, dict.size()); ++i)
        words.push_back(g2p::letter_ids(dict.words()[i]));
    const auto emitted = m.predict(words, 5, 30).phonemes;
    Session s({m.alignment});
    s.forward(m.bind(words, emitted));
    const Value a = s.value(m.alignment);
    for (std::size_t n = 0; n < words.size(); ++n) {
        const std::string& word = dict.words()[n];
        const auto w = a.sequence(n);  // [steps, T_max]
        Pronunciation rows = g2p::phonemes_of(emitted[n]);
        rows.push_back("</s>");
        std::vector<std::string> letters;
        std::vector<std::vector<double>> weights(rows.size());
        for (char ch : word) letters.push_back(std::string(1, ch));
        for (std::size_t t = 0; t < rows.size(); ++t)
            for (std::size_t j = 0; j < word.size(); ++j) weights[t].push_back(w(t, j));
        write_text_atomically(
            dir + "/alignment_" + std::to_string(n + 1) + ".svg",
            svg::heat_map("\"" + word + "\": attention over the letters at each phoneme", rows, letters, weights));
    }
}

int predict(const Options& o) {
    auto m = load_model(o.model_file);
    std::vector<std::vector<std::size_t>> words;
    for (const std::string& w : o.predict) words.push_back(g2p::letter_ids(w));
    const auto p = words.empty() ? g2p::Model::Prediction{} : m->predict(words, o.beam, o.max_length);
    for (std::size_t i = 0; i < words.size(); ++i) {
        std::string line = o.predict[i] + "\t";
        for (const std::string& ph : g2p::phonemes_of(p.phonemes[i])) line += (line.back() == '\t' ? "" : " ") + ph;
        std::printf("%s\n", line.c_str());
    }
    if (p.unfinished > 0)
        std::cerr << p.unfinished << " word(s) reached " << o.max_length << " phonemes without ending\n";
    if (!o.eval_file.empty()) {  // a saved model scored on a dictionary
        const PronunciationDictionary eval = read_pronunciations(o.eval_file);
        const Scored s = predict_all(*m, eval, o.beam, o.max_length);
        std::printf("%s, %zu words, beam %zu: WER %.2f %%, PER %.2f %%\n", eval.source().c_str(), eval.size(), o.beam,
                    100 * s.score.wer(), 100 * s.score.per());
    }
    return 0;
}

int train(const Options& o) {
    // Every file this run writes is checked before minutes of training, not after (data/output_files.hpp).
    std::vector<FileOption> outputs{{o.save, "--save"}};
    for (std::size_t n = 1; !o.plot_dir.empty() && n <= alignment_plots; ++n)
        outputs.push_back({o.plot_dir + "/alignment_" + std::to_string(n) + ".svg", "--plot", true});
    check_outputs(outputs, {{o.train_file, "--train"}, {o.eval_file, "--eval"}});
    if (!o.plot_dir.empty()) std::filesystem::create_directories(o.plot_dir);
    PronunciationDictionary train =
        o.train_file.empty() ? synthetic_words(o.words, o.seed) : read_pronunciations(o.train_file);
    PronunciationDictionary eval =
        o.train_file.empty() ? synthetic_words(o.words / 5, o.seed + 1000) : PronunciationDictionary("no --eval");
    if (!o.eval_file.empty()) eval = read_pronunciations(o.eval_file);
    // Every 50th training word chooses the learning rate's decay and the parameters kept, never --eval.
    PronunciationDictionary held("every 50th training word");
    std::vector<std::vector<std::size_t>> words, prons;
    std::vector<ItemLengths> lengths;
    for (std::size_t i = 0; i < train.size(); ++i) {
        const auto& refs = train.pronunciations()[i];
        if (i % 50 == 49) {
            for (const auto& r : refs) held.add(train.words()[i], r);
            continue;
        }
        for (const auto& r : refs) {
            words.push_back(g2p::letter_ids(train.words()[i]));
            prons.push_back(g2p::phoneme_ids(r));
            lengths.push_back({words.back().size(), prons.back().size()});
        }
    }
    g2p::Model m(o.sizes);
    std::printf("data: %zu pronunciations of %zu words (%s), %zu words held out; eval: %zu words\n", words.size(),
                train.size() - held.size(), train.source().c_str(), held.size(), eval.size());
    std::printf("model: letters %zu -> BiLSTM %zu+%zu -> attention LSTM decoder %zu -> %zu phonemes; %zu parameters\n",
                o.sizes.embed, o.sizes.encoder, o.sizes.encoder, o.sizes.decoder, g2p::phoneme_count(),
                parameter_count(m.parameters()));
    auto rate = std::make_shared<double>(o.learning_rate);  // halved when the held-out PER stops falling
    Trainer trainer(m.loss, Variable(),
                    adam(m.parameters(), LearningRate([rate](std::uint64_t) { return *rate; }), 0.9, 0.999, 1e-8,
                         {.gradient_clipping_norm = 5.0}));
    Batcher batches(lengths, {.batch_size = o.batch, .sort_window = 20, .seed = o.seed});
    const auto start = std::chrono::steady_clock::now();
    auto minutes = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 60; };
    double best_per = 2;
    std::vector<xt::xarray<float>> best;
    std::size_t epoch = 0;
    const double limit = o.minutes > 0 ? o.minutes : 1e300;
    for (; epoch < o.epochs && minutes() < limit; ++epoch) {
        double loss = 0, count = 0;
        for (std::size_t b = 0; b < batches.batches_per_epoch() && minutes() < limit; ++b) {
            std::vector<std::vector<std::size_t>> w, p;
            for (std::size_t i : batches.next()) w.push_back(words[i]), p.push_back(prons[i]);
            const MinibatchResult r = trainer.train_minibatch(m.bind(w, p));
            loss += r.loss_sum, count += double(r.loss_count);
        }
        const G2PScore h = predict_all(m, held, 1, o.max_length).score;  // greedy: quick
        const bool better = h.per() < best_per;
        if (better) {
            best_per = h.per();
            best.clear();
            for (const Parameter& p : m.parameters()) best.push_back(p.value());
        } else {
            *rate /= 2;
        }
        std::printf("epoch %zu (%.1f min): loss %.3f per word; held-out greedy WER %.1f %% PER %.2f %%%s\n", epoch + 1,
                    minutes(), loss / std::max(count, 1.0), 100 * h.wer(), 100 * h.per(),
                    better ? "" : ", rate halved");
    }
    for (std::size_t i = 0; i < best.size(); ++i) m.parameters()[i].set_value(best[i]);
    if (!o.save.empty()) save_model(o.save, m), std::printf("saved %s\n", o.save.c_str());
    if (eval.size() > 0) {
        const auto t0 = std::chrono::steady_clock::now();
        const Scored s = predict_all(m, eval, o.beam, o.max_length);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("%s, %zu words, beam %zu: WER %.2f %%, PER %.2f %% (%.1f s; %zu reached %zu phonemes)\n",
                    eval.source().c_str(), eval.size(), o.beam, 100 * s.score.wer(), 100 * s.score.per(), secs,
                    s.unfinished, o.max_length);
        for (std::size_t i = 0; i < std::min<std::size_t>(3, eval.size()); ++i) {
            std::string said, right;
            for (const auto& ph : s.predictions[i]) said += " " + ph;
            for (const auto& ph : eval.pronunciations()[i].front()) right += " " + ph;
            std::printf("  %-14s ->%s  (reference:%s)\n", eval.words()[i].c_str(), said.c_str(), right.c_str());
        }
    }
    if (!o.plot_dir.empty() && eval.size() > 0)
        plot_alignments(m, eval, o.plot_dir), std::printf("alignments in %s\n", o.plot_dir.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Train a spelling -> pronunciation model with attention, or pronounce words with a saved one"};
    app.add_option("--train", o.train_file, "pronunciation dictionary (CMUdict format); default: synthetic words")
        ->check(CLI::ExistingFile);
    app.add_option("--eval", o.eval_file, "dictionary to report WER and PER on")->check(CLI::ExistingFile);
    app.add_option("--save", o.save, "write the trained model to this file");
    app.add_option("--model", o.model_file, "a model file written by --save (with --predict)")
        ->check(CLI::ExistingFile);
    app.add_option("--predict", o.predict, "words to pronounce, with --model (with --eval: WER and PER)");
    app.add_option("--plot", o.plot_dir, "write attention alignments of a few --eval words (SVG) here");
    app.add_option("--minutes", o.minutes, "training time at most; 0: no limit")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1e6));
    app.add_option("--epochs", o.epochs, "epochs at most")->capture_default_str()->check(CLI::Range(1, 100000));
    app.add_option("--batch", o.batch, "pronunciations per step")->capture_default_str()->check(CLI::Range(1, 100000));
    app.add_option("--beam", o.beam, "beam width")->capture_default_str()->check(CLI::Range(1, 1000));
    app.add_option("--max-length", o.max_length, "phonemes per word at most")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    app.add_option("--learning-rate", o.learning_rate, "Adam's rate")
        ->capture_default_str()
        ->check(CLI::Range(1e-9, 10.0));
    app.add_option("--embed", o.sizes.embed, "letter and phoneme embedding size")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    app.add_option("--encoder", o.sizes.encoder, "encoder LSTM size per direction")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    app.add_option("--decoder", o.sizes.decoder, "decoder LSTM size")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    app.add_option("--words", o.words, "synthetic data: training words")
        ->capture_default_str()
        ->check(CLI::Range(10, 10000000));
    app.add_option("--seed", o.seed, "seed for the data order and the initial weights")->capture_default_str();
    app.add_option("--threads", o.threads, "independent steps of the model run at once")->check(CLI::Range(1, 64));
    CLI11_PARSE(app, argc, argv);
    try {
        if (o.model_file.empty() ? !o.predict.empty() : o.predict.empty() && o.eval_file.empty())
            throw UserError("--model FILE goes with --predict WORDS or --eval FILE (prediction builds nothing else)");
        if (!o.model_file.empty() && (!o.train_file.empty() || !o.save.empty() || !o.plot_dir.empty()))
            throw UserError("--model FILE predicts only: --train, --save and --plot do not go with it");
        std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time, also into a file: progress shows
        set_blas_threads(1);
        set_inter_op_threads(static_cast<int>(o.threads));
        set_seed(o.seed);
        return o.model_file.empty() ? train(o) : predict(o);
    } catch (const std::bad_alloc&) {
        std::cerr << "error: out of memory\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
    }
    return 1;
}
