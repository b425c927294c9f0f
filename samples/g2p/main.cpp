// g2p: spelling -> pronunciation with an attention decoder (CNTK's sequence-to-sequence tutorial 204).
//
//   g2p                                             built-in synthetic words, a short run
//   g2p --train cmudict-train.dict --eval cmudict-dev.dict --minutes 30 --save M.loom
//   g2p --model M.loom --predict word other ...      word<TAB>PH1 PH2 ... per word, on stdout
//   g2p --model M.loom --predict-file words.txt      the same for a list, one word a line ("-": stdin)
//   g2p --model M.loom --eval cmudict-dev.dict      WER and PER of a saved model
//   g2p ... --eval D --plot DIR                      attention alignments (letters x phonemes), SVG
//
// Every input's words are checked before any work (samples/g2p/words.hpp: the model's letters, upper
// case read as lower case, at most 64 letters), and every output can be created (check_outputs).
// Words to pronounce are decoded a batch at a time, so memory does not grow with their number.
//
// A BiLSTM reads the letters; an LSTM decoder attends over them inside its loop (Luong's general
// score, input feeding), trained with teacher forcing; beam search writes the phonemes. The model
// is samples/g2p/model.hpp; the reader, WER/PER and beam search are loom's.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <random>

#include <loom.hpp>

#include "common/command_line.hpp"  // finite numbers
#include "epoch_choice.hpp"
#include "model.hpp"
#include "words.hpp"

using namespace loom;

namespace {

struct Options {
    std::string train_file, eval_file, save, model_file, plot_dir, predict_file, architecture = "lstm";
    std::string schedule;  // plateau or budget; empty: the architecture's (below)
    std::vector<std::string> predict;
    std::size_t epochs = 8, batch = 64, beam = 5, threads = 1, max_length = 30, words = 3000, warmup = 0;
    double minutes = 0, learning_rate = 2e-3;  // minutes 0: no time limit
    double average = 0.25;                     // budget schedule: the last part of the budget averaged
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
// Words per decoder call: 128, fewer for a wide beam so that a call holds at most 640 hypotheses
// (words x beam width). What decoding holds is then bounded by this, g2p::max_letters and the
// --max-length bound, never by the number of words.
std::size_t decode_batch(std::size_t beam) { return std::clamp<std::size_t>(640 / beam, 1, 128); }
// The learning rate is halved once the held-out PER has been worse than the best for this many epochs
// in a row: one worse epoch is often noise, and halving on it would stall a run that was still
// learning (g2p::EpochChoice, which also keeps the last epoch when the held-out words cannot choose).
constexpr std::size_t rate_patience = 2;

struct Scored {
    G2PScore score;
    std::vector<Pronunciation> predictions;
    std::size_t unfinished = 0;
};

// Beam search over every word of `dict` (each word's first pronunciation is not used), in batches.
Scored predict_all(g2p::Model& m, const PronunciationDictionary& dict, std::size_t beam, std::size_t max_length) {
    Scored s;
    const std::size_t batch = decode_batch(beam);
    for (std::size_t start = 0; start < dict.size(); start += batch) {
        std::vector<std::vector<std::size_t>> words;
        for (std::size_t i = start; i < std::min(start + batch, dict.size()); ++i)
            words.push_back(g2p::letter_ids(dict.words()[i]));
        const auto p = m.predict(words, beam, max_length);
        s.unfinished += p.unfinished;
        for (const auto& ids : p.phonemes) s.predictions.push_back(g2p::phonemes_of(ids));
    }
    s.score = score_pronunciations(s.predictions, dict.pronunciations());
    return s;
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

// Prints "word<TAB>PH1 PH2 ..." for each word given, decoding decode_batch(beam) words at a time.
class Pronouncer {
public:
    Pronouncer(g2p::Model& m, const Options& o) : model_(m), options_(o) {}
    // `shown` as the user wrote it, `word` as the model reads it (model_word).
    void add(const std::string& shown, const std::string& word) {
        shown_.push_back(shown), ids_.push_back(g2p::letter_ids(word));
        if (ids_.size() == decode_batch(options_.beam)) flush();
    }
    void flush() {
        if (ids_.empty()) return;
        const auto p = model_.predict(ids_, options_.beam, options_.max_length);
        for (std::size_t i = 0; i < ids_.size(); ++i) {
            std::string line = shown_[i] + "\t";
            for (const std::string& ph : g2p::phonemes_of(p.phonemes[i])) line += (line.back() == '\t' ? "" : " ") + ph;
            std::printf("%s\n", line.c_str());
        }
        unfinished += p.unfinished;
        shown_.clear(), ids_.clear();
    }
    std::size_t unfinished = 0;

private:
    g2p::Model& model_;
    const Options& options_;
    std::vector<std::string> shown_;
    std::vector<std::vector<std::size_t>> ids_;
};

// Words of a list given by --predict-file, each checked with its file and line; `each` is called with
// the word as written and as the model reads it.
template <class Each>
void read_word_list(WordListReader& list, Each&& each) {
    std::vector<ListedWord> batch;
    while (list.next_batch(batch, 128))
        for (const ListedWord& w : batch)
            each(w.word, g2p::model_word(w.word, list.source() + ":" + std::to_string(w.line)));
}

int predict(const Options& o) {
    // Every word is checked before the model is read: the arguments, then a list file (a pass of its
    // own, so an error on its last line comes before any output). Standard input and pipes are read
    // once, so their words are checked as they come.
    std::vector<std::string> words;
    for (std::size_t i = 0; i < o.predict.size(); ++i) {
        const std::string& w = o.predict[i];
        std::error_code ec;  // a directory named like a word is no list: the word is pronounced
        if (std::filesystem::exists(w, ec) && !std::filesystem::is_directory(w, ec))
            throw UserError("--predict " + w +
                            ": names a file; to pronounce the words of a file, one a line, use "
                            "--predict-file " +
                            w);
        words.push_back(g2p::model_word(w, "--predict word " + std::to_string(i + 1)));
    }
    const bool list_in_file =
        !o.predict_file.empty() && o.predict_file != "-" && std::filesystem::is_regular_file(o.predict_file);
    if (list_in_file) {
        WordListReader list(o.predict_file);
        read_word_list(list, [](const std::string&, const std::string&) {});
    }
    // Standard input is checked before any file is opened: closed, the first file opened would take
    // its place (descriptor 0) and be read as the list.
    std::unique_ptr<WordListReader> list;
    if (!o.predict_file.empty()) list = std::make_unique<WordListReader>(o.predict_file);
    PronunciationDictionary eval("no --eval");
    if (!o.eval_file.empty()) eval = g2p::model_dictionary(read_pronunciations(o.eval_file));

    auto m = g2p::load_model(o.model_file);
    Pronouncer out(*m, o);
    for (std::size_t i = 0; i < words.size(); ++i) out.add(o.predict[i], words[i]);
    if (list) read_word_list(*list, [&](const std::string& shown, const std::string& w) { out.add(shown, w); });
    out.flush();
    if (out.unfinished > 0)
        std::cerr << out.unfinished << " word(s) reached " << o.max_length << " phonemes without ending\n";
    if (!o.eval_file.empty()) {  // a saved model scored on a dictionary
        const Scored s = predict_all(*m, eval, o.beam, o.max_length);
        std::printf("%s, %zu words, beam %zu: WER %.2f %%, PER %.2f %%\n", eval.source().c_str(), eval.size(), o.beam,
                    100 * s.score.wer(), 100 * s.score.per());
    }
    return 0;
}

// A dictionary's words as the model reads them, with a note when upper case was folded.
PronunciationDictionary checked_words(const PronunciationDictionary& d) {
    std::size_t folded = 0;
    PronunciationDictionary out = g2p::model_dictionary(d, &folded);
    if (folded > 0)
        std::fprintf(stderr, "note: %s: %zu word(s) with upper case read as lower case (the model's letters are)\n",
                     d.source().c_str(), folded);
    return out;
}

// Whether word i of n is held out to choose the learning rate's decay and the parameters kept: every
// 50th word, and below 50 words the last one, so that any list of two words or more has a held-out set.
bool held_out(std::size_t i, std::size_t n) { return n >= 50 ? i % 50 == 49 : n >= 2 && i == n - 1; }

int train(const Options& o) {
    // Every file this run writes is checked before minutes of training, not after (data/output_files.hpp).
    // Its alignment_N.svg names are the program's: an existing one is the user's and is never replaced.
    std::vector<FileOption> outputs{{o.save, "--save"}};
    for (std::size_t n = 1; !o.plot_dir.empty() && n <= alignment_plots; ++n)
        outputs.push_back({o.plot_dir + "/alignment_" + std::to_string(n) + ".svg", "--plot", true, true});
    check_outputs(outputs, {{o.train_file, "--train"}, {o.eval_file, "--eval"}});
    // Every word of every input is checked (and case folded) before the model is built.
    PronunciationDictionary train =
        o.train_file.empty() ? synthetic_words(o.words, o.seed) : checked_words(read_pronunciations(o.train_file));
    PronunciationDictionary eval =
        o.train_file.empty() ? synthetic_words(o.words / 5, o.seed + 1000) : PronunciationDictionary("no --eval");
    if (!o.eval_file.empty()) eval = checked_words(read_pronunciations(o.eval_file));
    if (!o.plot_dir.empty()) std::filesystem::create_directories(o.plot_dir);
    // Held-out training words choose the learning rate's decay and the parameters kept, never --eval.
    PronunciationDictionary held(train.size() >= 50 ? "every 50th training word" : "the last training word");
    std::vector<std::vector<std::size_t>> words, prons;
    std::vector<ItemLengths> lengths;
    for (std::size_t i = 0; i < train.size(); ++i) {
        const auto& refs = train.pronunciations()[i];
        if (held_out(i, train.size())) {
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
    const g2p::Sizes& z = o.sizes;
    if (z.architecture == g2p::Architecture::lstm)
        std::printf(
            "model: letters %zu -> BiLSTM %zu+%zu -> attention LSTM decoder %zu -> %zu phonemes; %zu parameters\n",
            z.embed, z.encoder, z.encoder, z.decoder, g2p::phoneme_count(), parameter_count(m.parameters()));
    else
        std::printf(
            "model: Transformer, %zu + %zu layers of %zu, %zu heads, feed-forward %zu, dropout %.2g, label "
            "smoothing %.2g, warm-up %zu steps -> %zu phonemes; %zu parameters\n",
            z.layers, z.layers, z.model, z.heads, z.feedforward, z.dropout, z.label_smoothing, o.warmup,
            g2p::phoneme_count(), parameter_count(m.parameters()));
    std::printf("learning rate %g after %zu warm-up steps, schedule %s\n", o.learning_rate, o.warmup,
                o.schedule.c_str());
    // Rises linearly over the first o.warmup steps. Then, by --schedule: plateau, halved when the
    // held-out PER stops falling; budget, falling linearly to 0 at the end of the budget (--minutes,
    // or --epochs when it ends first): for a run of fixed length that decay beat constant and
    // step-wise rates (Li, Yumer and Ramanan, "Budgeted training", ICLR 2020).
    const bool budget = o.schedule == "budget";
    Trainer trainer(m.loss, Variable(),
                    adam(m.parameters(), o.learning_rate, 0.9, z.architecture == g2p::Architecture::lstm ? 0.999 : 0.98,
                         1e-8, {.gradient_clipping_norm = 5.0}));
    Batcher batches(lengths, {.batch_size = o.batch, .sort_window = 20, .seed = o.seed});
    // The budget is spent by time or by steps, whichever runs out first; none for the plateau.
    const std::uint64_t steps_in_budget = o.epochs * batches.batches_per_epoch();
    const TrainingBudget training_budget = !budget ? TrainingBudget{}
                                           : o.minutes > 0
                                               ? TrainingBudget::steps_or_seconds(steps_in_budget, o.minutes * 60)
                                               : TrainingBudget::steps(steps_in_budget);
    double peak = o.learning_rate;  // halved by the plateau
    // The first epoch always ends, at a rate of at least a tenth when the time ran out within it.
    auto budget_of = [&](std::size_t epoch) { return training_budget.at_most(epoch == 0 ? 0.9 : 1.0); };
    const auto start = std::chrono::steady_clock::now();
    auto minutes = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 60; };
    g2p::EpochChoice choice(held.size(), !budget, rate_patience);
    if (held.size() == 0)
        std::printf("nothing held out (one training word): the last epoch is kept, the rate never halved\n");
    else if (!choice.decides())
        std::printf(
            "note: %zu held-out word%s, too few to tell epochs apart (%zu or more do): the last epoch is "
            "kept and the rate follows its schedule, never halved\n",
            held.size(), held.size() == 1 ? "" : "s", g2p::EpochChoice::min_words);
    // The first epoch is always trained to its end, whatever --minutes says: a model is never saved or
    // scored untrained. Later epochs stop when the time is up.
    std::vector<xt::xarray<float>> best;
    std::size_t epoch = 0;
    const double limit = o.minutes > 0 ? o.minutes : std::numeric_limits<double>::infinity();
    // With the budget schedule, the parameters are also averaged over the last o.average of the
    // budget, every average_every steps, while the rate falls to 0 (Polyak averaging, as the
    // checkpoint averaging of Vaswani et al. 2017); held-out words choose between that mean and the
    // best epoch.
    constexpr std::size_t average_every = 10;
    ParameterAverage average(m.parameters());
    for (; epoch < o.epochs && (epoch == 0 || minutes() < limit); ++epoch) {
        double loss = 0, count = 0;
        trainer.learner().set_learning_rate(budget_linear_decay(peak, o.warmup, budget_of(epoch)));
        for (std::size_t b = 0; b < batches.batches_per_epoch() && (epoch == 0 || minutes() < limit); ++b) {
            std::vector<std::vector<std::size_t>> w, p;
            for (std::size_t i : batches.next()) w.push_back(words[i]), p.push_back(prons[i]);
            const std::uint64_t step = trainer.learner().step_count();
            const TrainingScope training;  // dropout drops while training only
            const MinibatchResult r = trainer.train_minibatch(m.bind(w, p));
            loss += r.loss_sum, count += double(r.loss_count);
            if (budget && o.average > 0 && budget_of(epoch).spent(step) >= 1.0 - o.average &&
                (step + 1) % average_every == 0)
                average.add();
        }
        if (epoch == 0 && minutes() >= limit)
            std::printf("note: --minutes %g ran out within the first epoch, which was trained to its end\n", o.minutes);
        if (held.size() == 0) {
            std::printf("epoch %zu (%.1f min): loss %.3f per word\n", epoch + 1, minutes(),
                        loss / std::max(count, 1.0));
            continue;
        }
        const G2PScore h = predict_all(m, held, 1, o.max_length).score;  // greedy: quick
        const g2p::EpochChoice::Verdict v = choice.after_epoch(h.per());
        if (v.keep && choice.decides()) {  // too few words: the last epoch is kept, nothing need be copied
            best.clear();
            for (const Parameter& p : m.parameters()) best.push_back(p.value());
        }
        if (v.halve) peak /= 2;
        std::printf("epoch %zu (%.1f min): loss %.3f per word; held-out greedy WER %.1f %% PER %.2f %%%s\n", epoch + 1,
                    minutes(), loss / std::max(count, 1.0), 100 * h.wer(), 100 * h.per(), v.note.c_str());
    }
    if (average.count() > 0 && held.size() > 0) {
        average.assign();
        const G2PScore h = predict_all(m, held, 1, o.max_length).score;
        const bool better = choice.prefers(h.per());
        std::printf(
            "mean of %zu point%s of the last %.0f %% of the budget: held-out greedy WER %.1f %% PER %.2f %%%s\n",
            average.count(), average.count() == 1 ? "" : "s", 100 * o.average, 100 * h.wer(), 100 * h.per(),
            !choice.decides() ? ", kept (the schedule's end)"
            : better          ? ", kept"
                              : ", the best epoch kept");
        if (better) best.clear();
    }
    for (std::size_t i = 0; i < best.size(); ++i) m.parameters()[i].set_value(best[i]);
    if (!o.save.empty()) g2p::save_model(o.save, m), std::printf("saved %s\n", o.save.c_str());
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

// Bounds on what one run may cost (README, "The g2p sample"). A word has at most g2p::max_letters
// letters and no letter spells more than two phonemes, so 128 phonemes leave room; beam search costs
// beam x max-length decoder steps per word, and the literature's widths are 5 to 10.
constexpr std::size_t max_beam = 32, max_phonemes = 128, max_batch = 1024, max_synthetic_words = 200000;

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Train a spelling -> pronunciation model with attention, or pronounce words with a saved one"};
    app.add_option("--train", o.train_file,
                   "pronunciation dictionary (CMUdict format; upper case is read as lower case); default: "
                   "synthetic words")
        ->check(CLI::ExistingFile);
    app.add_option("--eval", o.eval_file, "dictionary to report WER and PER on")->check(CLI::ExistingFile);
    app.add_option("--save", o.save, "write the trained model to this file");
    app.add_option("--model", o.model_file, "a model file written by --save (with --predict, --predict-file, --eval)")
        ->check(CLI::ExistingFile);
    app.add_option("--predict", o.predict, "words to pronounce, with --model (with --eval: WER and PER)");
    app.add_option("--predict-file", o.predict_file,
                   "a file of words to pronounce, one a line, with --model; '-': standard input");
    app.add_option("--plot", o.plot_dir,
                   "write attention alignments of a few --eval words (SVG) here; never replaces an existing "
                   "alignment_N.svg");
    app.add_option("--minutes", o.minutes, "training time at most (the first epoch always ends); 0: no limit")
        ->capture_default_str()
        ->check(samples::finite_number)
        ->check(CLI::Range(0.0, 1e6));
    app.add_option("--epochs", o.epochs, "epochs at most")->capture_default_str()->check(CLI::Range(1, 100000));
    app.add_option("--batch", o.batch, "pronunciations per step")
        ->capture_default_str()
        ->check(CLI::Range(std::size_t{1}, max_batch));
    app.add_option("--beam", o.beam, "beam width")->capture_default_str()->check(CLI::Range(std::size_t{1}, max_beam));
    app.add_option("--max-length", o.max_length, "phonemes per word at most")
        ->capture_default_str()
        ->check(CLI::Range(std::size_t{1}, max_phonemes));
    app.add_option("--learning-rate", o.learning_rate, "Adam's rate after the warm-up")
        ->capture_default_str()
        ->check(samples::finite_number)
        ->check(CLI::Range(1e-9, 10.0));
    app.add_option("--architecture", o.architecture, "lstm (BiLSTM encoder, attention LSTM decoder) or transformer")
        ->capture_default_str()
        ->check(CLI::IsMember({"lstm", "transformer"}));
    app.add_option("--layers", o.sizes.layers, "Transformer: encoder layers, and as many decoder layers")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    app.add_option("--model-dim", o.sizes.model, "Transformer: the layers' width, even (sinusoidal positions)")
        ->capture_default_str()
        ->check(CLI::Range(2, 4096));
    app.add_option("--heads", o.sizes.heads, "Transformer: attention heads (divide --model-dim)")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    app.add_option("--feedforward", o.sizes.feedforward, "Transformer: the feed-forward block's width")
        ->capture_default_str()
        ->check(CLI::Range(1, 65536));
    app.add_option("--dropout", o.sizes.dropout, "Transformer: dropout rate")
        ->capture_default_str()
        ->check(samples::finite_number)
        ->check(CLI::Range(0.0, 0.9));
    app.add_option("--label-smoothing", o.sizes.label_smoothing, "Transformer: target mass spread over all phonemes")
        ->capture_default_str()
        ->check(samples::finite_number)
        ->check(CLI::Range(0.0, 0.5));
    app.add_option(
           "--schedule", o.schedule,
           "the rate after the warm-up: plateau (halved after 2 epochs in a row worse than the best held-out PER, "
           "when 20 words or more are held out) or "
           "budget (falling linearly to 0 at the end of --minutes or --epochs); lstm: plateau, transformer: "
           "budget")
        ->check(CLI::IsMember({"plateau", "budget"}));
    app.add_option("--average", o.average,
                   "budget schedule: average the parameters over this last part of the budget; held-out words "
                   "choose between the mean and the best epoch (0: no average)")
        ->capture_default_str()
        ->check(samples::finite_number)
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--warmup", o.warmup, "steps over which the learning rate rises to its value (transformer: 1000)")
        ->check(CLI::Range(0, 10000000));
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
        ->check(CLI::Range(std::size_t{10}, max_synthetic_words));
    app.add_option("--seed", o.seed, "seed for the data order and the initial weights")->capture_default_str();
    app.add_option("--threads", o.threads, "independent steps of the model run at once")->check(CLI::Range(1, 64));
    CLI11_PARSE(app, argc, argv);
    loom::keep_freed_memory();  // beam search takes arrays one row longer at every step
    try {
        o.sizes.architecture = g2p::architecture_named(o.architecture);
        if (o.sizes.architecture == g2p::Architecture::transformer && app.count("--warmup") == 0)
            o.warmup = 1000;  // the Transformer's own default
        if (o.sizes.architecture == g2p::Architecture::transformer && o.model_file.empty()) {
            // The layers would refuse these too, but naming their own fields, not the options given.
            if (o.sizes.model % 2 != 0)
                throw UserError("--model-dim " + std::to_string(o.sizes.model) +
                                ": the Transformer's sinusoidal positions take pairs of dimensions; give an even "
                                "width");
            if (o.sizes.model % o.sizes.heads != 0)
                throw UserError("--heads " + std::to_string(o.sizes.heads) + " does not divide --model-dim " +
                                std::to_string(o.sizes.model) + "; each head takes an equal part of the width");
        }
        if (o.schedule.empty())
            o.schedule = o.sizes.architecture == g2p::Architecture::transformer ? "budget" : "plateau";
        const bool predicts = !o.predict.empty() || !o.predict_file.empty();
        if (o.model_file.empty() ? predicts : !predicts && o.eval_file.empty())
            throw UserError(
                "--model FILE goes with --predict WORDS, --predict-file FILE or --eval FILE (prediction "
                "builds nothing else)");
        if (!o.model_file.empty() && (!o.train_file.empty() || !o.save.empty() || !o.plot_dir.empty()))
            throw UserError("--model FILE predicts only: --train, --save and --plot do not go with it");
        if (std::find(o.predict.begin(), o.predict.end(), "-") != o.predict.end())
            throw UserError("--predict -: to read the words to pronounce from standard input, use --predict-file -");
        // The alignments are drawn for --eval words; the synthetic words (no --train) bring their own.
        if (!o.plot_dir.empty() && !o.train_file.empty() && o.eval_file.empty())
            throw UserError("--plot " + o.plot_dir +
                            ": the alignments are drawn for words of --eval, and there is none; give --eval FILE "
                            "too");
        std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time, also into a file: progress shows
        set_blas_threads(1);
        set_inter_op_threads(static_cast<int>(o.threads));
        set_seed(o.seed);
        return o.model_file.empty() ? train(o) : predict(o);
    } catch (const std::bad_alloc&) {
        samples::print_error("out of memory");
    } catch (const std::exception& e) {
        samples::print_error(e.what());
    }
    return 1;
}
