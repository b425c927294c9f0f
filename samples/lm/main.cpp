// lm: a character-level language model of a text (nanoGPT's shakespeare_char, char-rnn), and text
// drawn from it.
//
//   lm                                                    about a minute on Tiny Shakespeare, then a sample
//   lm --train train.txt --minutes 30 --threads 2 --holdout 0.0376 --save M.loom
//   lm --model M.loom --generate 300 --prompt ROMEO: --temperature 0.8 --seed 1
//   lm --model M.loom --eval FILE                         nats (and bits) per character
//   lm --model M.loom --generate 300 --weights int8       a quarter of the bytes read per character
//   lm --train train.txt --architecture lstm ...          char-rnn's model instead of a GPT; what 30 minutes
//                                                         on 2 threads train best on unseen plays with
//                                                         --width 512 --dropout 0.25 (bench/RESULTS.md)
//
// The last --holdout part of the training text is never trained on: it is scored during and after
// training. It estimates new text where it holds documents the rest lacks (Tiny Shakespeare: hold
// out from its last play's first line, --holdout 0.0376); --holdout-spans K holds out the end of
// each of K equal parts instead, which estimates more text of the same documents (bench/RESULTS.md).
// Every input is checked before any work: a character outside the model's alphabet (in the prompt
// or an evaluated file) is an error naming its file:line:column, a text with nothing to predict, a
// file that is no regular file (a FIFO, /dev/zero), sizes whose training would not fit in memory.
// Under mpirun every process trains on windows of its own (lm::WindowStarts) and the gradients are
// summed (docs/distributed.md). Generated text is the only thing --model ... --generate writes on
// stdout (timing and scores go to stderr); a training run logs on stdout, the text after the log.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <numbers>
#include <optional>
#include <tuple>

#include <unistd.h>

#include <loom.hpp>

#include "common/command_line.hpp"  // finite numbers, mpirun
#include "model.hpp"
#include "windows.hpp"

using namespace loom;

namespace {

struct Options {
    std::string train_file, eval_file, save, model_file, architecture = "transformer", prompt = "\n";
    std::string matmul_precision = "medium", weights = "float", cache = "float";
    WeightPrecision weight_precision = WeightPrecision::float32;  // --weights, parsed
    CachePrecision cache_precision = CachePrecision::float32;     // --cache, parsed
    // nanoGPT's CPU configuration (lm::Settings{}) made 1.5 times wider with twice its context and
    // light dropout: what 30 minutes on two cores train best (bench/RESULTS.md tells the others tried).
    lm::Settings sizes{.layers = 4, .heads = 6, .width = 192, .block = 128, .dropout = 0.1};
    std::size_t batch = 12, iterations = 2000, warmup = 100, threads = 1, generate = 0, streams = 1, top_k = 0;
    std::size_t log_every = 100, untimed = 0, eval_every = 2000, holdout_spans = 1;
    double minutes = 0, holdout = 0.05, learning_rate = 1e-3, min_learning_rate = 1e-4, weight_decay = 0.1;
    double beta2 = 0.99, clip = 1.0, temperature = 1.0, top_p = 1.0;
    double mpi_timeout = 300;  // mpirun: seconds a process waits for another
    std::uint64_t seed = 1;
    bool prompt_given = false;  // --prompt on the command line (else a default, checked only when used)
    std::size_t rank = 0, ranks = 1;
    std::shared_ptr<GradientReduction> reduction;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The windows of `ids` starting at `starts`, each --block characters long or up to the text's last
// but one, bound with the characters that follow each as their targets.
Bindings windows(const lm::Model& m, const std::vector<std::uint32_t>& ids, const std::vector<std::size_t>& starts,
                 const std::vector<Value>& states) {
    std::vector<std::vector<std::size_t>> in, next;
    for (const std::size_t at : starts) {
        const std::size_t end = std::min(at + m.settings.block, ids.size() - 1);
        in.emplace_back(ids.begin() + at, ids.begin() + end);
        next.emplace_back(ids.begin() + at + 1, ids.begin() + end + 1);
    }
    return m.bind(in, next, states);
}

// A text split into what is trained on and what is held out: the text cut into `spans` equal
// parts, the last `holdout` of each held out (spans 1: the text's end), the rest joined.
struct Split {
    std::vector<std::uint32_t> train;
    std::vector<std::vector<std::uint32_t>> held;
};
Split split(const std::vector<std::uint32_t>& ids, double holdout, std::size_t spans) {
    Split s;
    for (std::size_t k = 0; k < spans; ++k) {
        const auto begin = static_cast<std::ptrdiff_t>(ids.size() * k / spans);
        const auto end = static_cast<std::ptrdiff_t>(ids.size() * (k + 1) / spans);
        const auto held = static_cast<std::ptrdiff_t>(std::floor(holdout * static_cast<double>(end - begin)));
        s.train.insert(s.train.end(), ids.begin() + begin, ids.begin() + end - held);
        if (held > 0) s.held.emplace_back(ids.begin() + end - held, ids.begin() + end);
    }
    return s;
}

// The mean loss over `texts`, each cut into consecutive windows of the model's block, every
// character predicted from the earlier ones of its own window (nanoGPT's estimate, over every
// window instead of random ones). The LSTM carries its state from one window to the next of a
// text: one long sequence. Products in float whatever --matmul-precision says (it is training's):
// the score is the model's; `weights` (--weights) reads its weights as generation does, through
// the same kernels (the LSTM's recurrent products, inside its loop, stay float here).
double evaluate(const lm::Model& m, const std::vector<std::vector<std::uint32_t>>& texts,
                WeightPrecision weights = WeightPrecision::float32) {
    const MatmulPrecisionScope exact(MatmulPrecision::highest);
    std::vector<Variable> outputs{m.loss};
    outputs.insert(outputs.end(), m.last_states.begin(), m.last_states.end());
    Session s(outputs);
    if (weights != WeightPrecision::float32) s.set_parameters_fixed(true, weights);
    double sum = 0, count = 0;
    for (const std::vector<std::uint32_t>& ids : texts) {
        std::vector<Value> states;
        for (std::size_t at = 0; at + 1 < ids.size();) {
            std::vector<std::size_t> starts;  // 32 windows a pass (the LSTM: one, its state carried)
            for (; starts.size() < (m.last_states.empty() ? 32 : 1) && at + 1 < ids.size(); at += m.settings.block)
                starts.push_back(at);
            s.forward(windows(m, ids, starts, states));
            sum += s.sum(m.loss), count += static_cast<double>(s.count(m.loss));
            states.clear();
            for (const Variable& v : m.last_states) states.push_back(s.value(v));
        }
    }
    return sum / std::max(count, 1.0);
}

// The largest magnitude among the model's weights, for the message of a score that is no number.
double largest_weight(const lm::Model& m) {
    double largest = 0;
    for (const Parameter& p : m.parameters())
        for (const float w : p.data<float>()) largest = std::max(largest, std::abs(double(w)));
    return largest;
}

// A score that is no number (weights near float's largest, 3e38, overflow its arithmetic) is an
// error naming the model (its file, or "the trained model"), never a line of output.
// `to` null: checks only.
void print_loss(const std::string& what, double nats, const lm::Model& m, const std::string& model,
                std::FILE* to = stdout) {
    if (!std::isfinite(nats)) {
        char largest[32];
        std::snprintf(largest, sizeof largest, "%g", largest_weight(m));
        throw DataError(model + " scores " + std::to_string(nats) + " nats per character on " + what +
                        ": its weights overflow float arithmetic (the largest is " + largest + ")");
    }
    if (to)
        std::fprintf(to, "eval %s: %.4f nats per character (%.4f bits)\n", what.c_str(), nats,
                     nats / std::numbers::ln2);
}

// Texts scored must hold something to predict: every character of a text (or a held-out span) but
// its first is predicted from the ones before it. `characters` in `texts` with nothing to predict
// (an empty text, one of one character, spans of one character each) would score a perfect 0.
void require_predictions(std::size_t characters, std::size_t texts, const std::string& what) {
    if (characters > texts) return;
    const std::string held = std::to_string(characters) + " character" + (characters == 1 ? "" : "s");
    if (texts <= 1)
        throw UserError(what + " holds " + held + ": nothing to predict (a score needs at least 2 characters)");
    throw UserError(what + " holds " + held + " in " + std::to_string(texts) +
                    " spans: nothing to predict (a span is scored from its second character on)");
}

// The prompt generation starts from, checked against the alphabet (a UserError naming --prompt
// and the character's column). Without --prompt the default (a newline, or the demonstration's)
// where the alphabet has its characters, else `fallback` (the text's first character, or the
// model's first), said on stderr: a default the user never gave is never an error.
std::string prompt_for(const Options& o, const Alphabet& alphabet, char32_t fallback) {
    const std::u32string prompt = decode_utf8(o.prompt, "--prompt");
    const auto known = [&](char32_t c) {
        for (std::size_t id = 0; id < alphabet.size(); ++id)
            if (alphabet.character(id) == utf8_of(c)) return true;
        return false;
    };
    if (o.prompt_given || std::all_of(prompt.begin(), prompt.end(), known)) {
        alphabet.ids(prompt, "--prompt");
        return o.prompt;
    }
    const std::string first = utf8_of(fallback);
    std::fprintf(stderr,
                 "lm: the default prompt's characters are not all in the model's alphabet; starting from "
                 "'%s' instead (--prompt to choose)\n",
                 first.c_str());
    return first;
}

// Draws o.generate characters after `prompt` (prompt_for), o.streams texts at once, through the
// key/value cache (the LSTM: its states); stream 0 is printed as it is drawn, on stdout, and
// nothing else is: the timing goes to stderr, and the line is ended on stdout only for a terminal.
// Once the Transformer's context (its block) is full, each text goes on from its last half block.
// The generator keeps only each text's last context (GenerateOptions::keep_symbols): --generate
// 2^30 holds no more than --generate 300. An error while generating (log-probabilities that are
// no number) names `model`.
void generate(const lm::Model& m, const Alphabet& alphabet, const Options& o, const std::string& prompt,
              const std::string& model) {
    const std::vector<std::uint32_t> prompt_ids = alphabet.ids(decode_utf8(prompt, "--prompt"), "--prompt");
    layers::GenerateOptions g{.beam_width = 1,
                              .max_length = o.generate,
                              .start_symbol = layers::no_symbol,  // the prompt's first character
                              .end_symbol = layers::no_symbol};
    g.sample = true, g.temperature = o.temperature, g.top_k = o.top_k, g.top_p = o.top_p, g.seed = o.seed;
    g.context = m.settings.architecture == lm::Architecture::transformer ? m.settings.block : 0;
    g.keep_symbols = false;
    g.weights = o.weight_precision;
    g.cache = o.cache_precision;
    bool drawing = false;  // the prompt is printed with the first character drawn: a failure prints nothing
    // The text appears as it is drawn: flushed at each line's end and at least 50 times a second,
    // not after every character (a write to a pipe at each one cost 5 % of a small model's rate).
    auto flushed = Clock::now();
    g.on_symbol = [&](std::size_t item, std::size_t symbol) {
        if (item != 0) return;
        if (!drawing) std::fputs(prompt.c_str(), stdout), drawing = true;
        const std::string& character = alphabet.character(symbol);
        std::fputs(character.c_str(), stdout);
        if (character == "\n" || seconds_since(flushed) >= 0.02) std::fflush(stdout), flushed = Clock::now();
    };
    const auto start = Clock::now();
    const std::vector<std::size_t> ids(prompt_ids.begin(), prompt_ids.end());
    try {
        layers::Generator(m.decoder(), {}).generate(g, {.prompts = std::vector(o.streams, ids)});
    } catch (const UserError& e) {
        throw DataError(model + ": generating from it failed: " + e.what());
    }
    const double secs = seconds_since(start);
    std::fflush(stdout);
    if (::isatty(::fileno(stdout))) std::fputc('\n', stdout);
    // The LSTM has no key/value cache to keep.
    const std::string cache = m.settings.architecture == lm::Architecture::transformer
                                  ? std::string(", ") + cache_precision_name(o.cache_precision) + " cache"
                                  : "";
    std::fprintf(stderr, "generated: %zu characters in %.3f s, %.1f characters/s (%zu streams, %s weights%s)\n",
                 o.generate * o.streams, secs, static_cast<double>(o.generate * o.streams) / secs, o.streams,
                 weight_precision_name(o.weight_precision), cache.c_str());
}

// Bytes as a person reads them: 3.3 TB.
std::string bytes_text(double bytes) {
    const char* units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
    std::size_t u = 0;
    for (; bytes >= 1000 && u + 1 < std::size(units); ++u) bytes /= 1000;
    char text[32];
    std::snprintf(text, sizeof text, "%.3g %s", bytes, units[u]);
    return text;
}

// Sizes whose training would not fit in this machine's memory, refused before anything is built (an
// allocation failing half a minute in says only "out of memory"): lm::training_memory, a lower bound.
void check_memory(const Options& o, std::size_t vocabulary) {
    const lm::TrainingMemory need = lm::training_memory(o.sizes, o.batch, vocabulary);
    const double have = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
    if (have <= 0 || need.total() <= have) return;
    char parameters[32];
    std::snprintf(parameters, sizeof parameters, "%.3g", need.parameters);
    const auto size = [](const char* name, std::size_t v) { return std::string(name) + " " + std::to_string(v); };
    throw UserError(size("--layers", o.sizes.layers) + ", " + size("--width", o.sizes.width) + ", " +
                    size("--block", o.sizes.block) + ", " + size("--batch", o.batch) + " (" + o.architecture +
                    "): training needs at least " + bytes_text(need.total()) + " (" + parameters +
                    " parameters at 16 bytes each for the weights, their gradients and AdamW's moments: " +
                    bytes_text(need.parameter_bytes) +
                    "; what an iteration keeps for backward and attention's "
                    "workspace: " +
                    bytes_text(need.activation_bytes) + "), more than this machine's " + bytes_text(have) +
                    " of memory");
}

// The products training runs, and at `medium` under the automatic choice (core/gemm.hpp) the
// measured speed-up of the bfloat16 kernels it chose by.
std::string products_chosen() {
    std::string out = bf16_products() ? "bfloat16 products" : "float products";
    if (matmul_precision() == MatmulPrecision::medium && bf16_products_setting() == Bf16Products::automatic &&
        cpu_supports_bf16()) {
        char speedup[96];
        std::snprintf(speedup, sizeof speedup, " (bfloat16 kernels at %.2fx float's rate here)", bf16_speedup());
        out += speedup;
    }
    return out;
}

int train(const Options& o) {
    check_outputs({{o.save, "--save"}}, {{o.train_file, "--train"}, {o.eval_file, "--eval"}});
    const std::u32string text = read_utf8_text(o.train_file);
    const Alphabet alphabet = Alphabet::of(text, "--train " + o.train_file);
    const std::vector<std::uint32_t> ids = alphabet.ids(text, o.train_file);
    std::optional<std::vector<std::uint32_t>> eval_ids;
    if (!o.eval_file.empty()) eval_ids = alphabet.ids(read_utf8_text(o.eval_file), o.eval_file);
    if (eval_ids) require_predictions(eval_ids->size(), 1, "--eval " + o.eval_file);
    check_memory(o, alphabet.size());
    const Split parts = split(ids, o.holdout, o.holdout_spans);
    const std::vector<std::uint32_t>& train_ids = parts.train;
    const std::vector<std::vector<std::uint32_t>>& held_ids = parts.held;
    std::size_t held_characters = 0;
    for (const auto& span : held_ids) held_characters += span.size();
    const std::size_t block = o.sizes.block;
    if (train_ids.size() < block + 1 + o.batch)
        throw UserError("--train " + o.train_file + ": " + std::to_string(train_ids.size()) +
                        " characters to train on; a window of --block " + std::to_string(block) + " needs more");
    if (!held_ids.empty())
        require_predictions(held_characters, held_ids.size(), "the held-out part of --train " + o.train_file);
    const std::string prompt = o.generate > 0 ? prompt_for(o, alphabet, text.front()) : "";
    lm::WindowStarts window_starts(o.sizes.architecture, train_ids.size(), block, o.batch, o.seed, o.rank, o.ranks);

    lm::Model m(o.sizes, alphabet.size());
    std::printf("data: %zu characters (%zu distinct) of %s; %zu held out in %zu spans\n", ids.size(), alphabet.size(),
                o.train_file.c_str(), held_characters, held_ids.size());
    const bool gpt = o.sizes.architecture == lm::Architecture::transformer;
    const std::string heads = gpt ? ", " + std::to_string(o.sizes.heads) + " heads" : "";
    std::printf("model: %s, %zu layers of %zu%s, context %zu, dropout %.2g; %zu parameters; %s\n",
                o.architecture.c_str(), o.sizes.layers, o.sizes.width, heads.c_str(), block, o.sizes.dropout,
                parameter_count(m.parameters()), products_chosen().c_str());
    // Linear warm-up, then a half cosine to the minimum over the budget: --iterations, or --minutes
    // of wall-clock time (the cosine then follows the time spent).
    const LearningRate rate = budget_cosine_decay(
        o.learning_rate, o.warmup,
        o.minutes > 0 ? TrainingBudget::seconds(o.minutes * 60) : TrainingBudget::steps(o.iterations),
        o.min_learning_rate);
    Trainer trainer(m.loss, Variable(),
                    adamw(m.parameters(), rate, 0.9, o.beta2, 1e-8, o.weight_decay,
                          {.gradient_clipping_norm = o.clip, .decay_matrices_only = true}),
                    {.reduction = o.reduction, .outputs = m.last_states});
    // A window of --block characters for each of --batch streams: at random places (the GPT), or
    // the next window of each stream's own part of the text (the LSTM, whose states carry over);
    // under mpirun, each process its own (lm::WindowStarts).
    std::size_t steps = 0, count = 0;
    std::vector<Value> states;
    const auto start = Clock::now();
    auto timed_from = start;  // after the --untimed-iterations
    const double budget = o.minutes * 60;
    double loss = 0, eval_seconds = 0;
    const EpochSource source{budget > 0 ? SIZE_MAX : o.iterations, [&](std::size_t, std::size_t) {
                                 bool restarted = false;
                                 const std::vector<std::size_t> starts = window_starts.next(restarted);
                                 if (restarted) states.clear();
                                 return windows(m, train_ids, starts, states);
                             }};
    FitOptions fo{.evaluate_every = o.eval_every, .max_seconds = budget, .evaluate_at_end = true};
    fo.on_step = [&](std::size_t step, const MinibatchResult& r) {
        steps = step;
        if (step == o.untimed) timed_from = Clock::now(), eval_seconds = 0;
        states.clear();
        for (const Variable& v : m.last_states) states.push_back(trainer.session().value(v));
        loss += r.loss_sum, count += r.loss_count;
        if (step % o.log_every != 0) return;
        std::printf("iteration %zu (%.1f min): loss %.4f, learning rate %.2e\n", step, seconds_since(start) / 60,
                    loss / double(count), rate(step - 1));
        loss = 0, count = 0;
    };
    // Every --eval-every iterations and at the end, the held-out part is scored and the parameters
    // that scored best are kept (nanoGPT's train.py saves its checkpoint only when the validation
    // loss improves); the time it takes counts against --minutes, not in the tokens/s.
    std::function<Evaluation()> score_held_out;
    if (o.eval_every > 0 && !held_ids.empty())
        score_held_out = [&]() -> Evaluation {
            const auto t = Clock::now();
            const double nats = evaluate(m, held_ids);
            std::printf("iteration %zu: held-out %.4f nats per character\n", steps, nats);
            eval_seconds += seconds_since(t);
            return -nats;
        };
    if (source.minibatches_per_epoch > 0) fit(trainer, source, fo, score_held_out);
    const double secs = seconds_since(timed_from) - eval_seconds;
    const std::size_t timed = steps > o.untimed ? steps - o.untimed : 0;
    const std::size_t tokens = timed * o.batch * block * o.ranks;  // every process's windows its own
    const std::string processes = o.ranks > 1 ? " (" + std::to_string(o.ranks) + " processes)" : "";
    std::printf("trained: %zu iterations, %zu tokens in %.3f s, %.1f tokens/s%s\n", timed, tokens, secs,
                timed > 0 ? static_cast<double>(tokens) / secs : 0.0, processes.c_str());
    if (o.rank > 0) return 0;  // the others hold the same parameters
    const std::string trained = "the trained model (try a lower --learning-rate)";
    if (!held_ids.empty()) print_loss("held-out", evaluate(m, held_ids), m, trained);
    if (eval_ids) print_loss(o.eval_file, evaluate(m, {*eval_ids}, o.weight_precision), m, trained);
    if (!o.save.empty()) lm::save_model(o.save, m, alphabet), std::printf("saved %s\n", o.save.c_str());
    if (o.generate > 0) generate(m, alphabet, o, prompt, trained);
    return 0;
}

int use_saved(const Options& o) {
    std::optional<std::u32string> eval_text;
    if (!o.eval_file.empty()) eval_text = read_utf8_text(o.eval_file);
    if (eval_text) require_predictions(eval_text->size(), 1, "--eval " + o.eval_file);
    const lm::Loaded loaded = lm::load_model(o.model_file);
    const lm::Model& m = *loaded.model;
    // Checked before any work: every character is the model's.
    const std::string prompt =
        o.generate > 0 ? prompt_for(o, loaded.alphabet, decode_utf8(loaded.alphabet.character(0), "")[0]) : "";
    std::optional<std::vector<std::uint32_t>> eval_ids;
    if (eval_text) eval_ids = loaded.alphabet.ids(*eval_text, o.eval_file);
    const std::string model = "--model " + o.model_file;
    if (eval_ids) {
        // Weights that overflow (3e38) found on the first window, before a long text is scored.
        const std::size_t first = std::min(eval_ids->size(), m.settings.block + 1);
        const std::vector<std::uint32_t> window(eval_ids->begin(), eval_ids->begin() + std::ptrdiff_t(first));
        print_loss(o.eval_file, evaluate(m, {window}, o.weight_precision), m, model, nullptr);
        // With --generate, stdout holds the generated text alone.
        print_loss(o.eval_file, evaluate(m, {*eval_ids}, o.weight_precision), m, model,
                   o.generate > 0 ? stderr : stdout);
    }
    if (o.generate > 0) generate(m, loaded.alphabet, o, prompt, model);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{
        "Train a character-level language model on a text, or draw text from a saved one. With --model, stdout "
        "holds only the drawn text (lm --model M --generate N > out.txt), scores and timing go to stderr; a training "
        "run logs on stdout and prints the drawn text after its log"};
    app.add_option("--train", o.train_file, "UTF-8 text to train on")->check(CLI::ExistingFile);
    using samples::add_number;
    const std::size_t many = std::size_t{1} << 40;
    add_number(app, "--holdout", o.holdout, "the part of --train kept out of training, scored", 0.0, 0.5);
    add_number<std::size_t>(app, "--holdout-spans", o.holdout_spans, "spans it is spread over (1: the end)", 1, 1000);
    app.add_option("--eval", o.eval_file, "a text to score in nats per character")->check(CLI::ExistingFile);
    app.add_option("--save", o.save, "write the trained model to this file");
    app.add_option("--model", o.model_file, "a model --save wrote (with --eval, --generate)")->check(CLI::ExistingFile);
    app.add_option("--architecture", o.architecture, "transformer (a GPT) or lstm (char-rnn)")
        ->capture_default_str()
        ->check(CLI::IsMember({"transformer", "lstm"}));
    add_number<std::size_t>(app, "--layers", o.sizes.layers, "Transformer blocks or LSTM layers (lstm: 2)", 1, 64);
    add_number<std::size_t>(app, "--heads", o.sizes.heads, "attention heads (transformer; divide --width)", 1, 256);
    add_number<std::size_t>(app, "--width", o.sizes.width, "the layers' width (lstm: 256)", 1, 16384);
    add_number<std::size_t>(app, "--block", o.sizes.block, "window length, GPT's context (lstm: 50)", 2, 1 << 20);
    add_number<std::size_t>(app, "--batch", o.batch, "windows per iteration (lstm: 50)", 1, 4096);
    add_number(app, "--dropout", o.sizes.dropout, "GPT: on attention weights, residuals and the input", 0.0, 0.9);
    add_number<std::size_t>(app, "--iterations", o.iterations, "training iterations (unless --minutes)", 0, many);
    add_number<std::size_t>(app, "--untimed-iterations", o.untimed, "first iterations left out of trained:", 0, many);
    add_number(app, "--minutes", o.minutes, "train for this long instead of --iterations", 0.0, 1e6);
    add_number(app, "--learning-rate", o.learning_rate, "AdamW's rate after the warm-up", 1e-9, 10.0);
    add_number(app, "--min-learning-rate", o.min_learning_rate, "where the cosine decay ends", 0.0, 10.0);
    add_number<std::size_t>(app, "--warmup", o.warmup, "iterations of linear warm-up", 0, many);
    add_number(app, "--weight-decay", o.weight_decay, "AdamW's decay of the weight matrices", 0.0, 10.0);
    add_number(app, "--beta2", o.beta2, "AdamW's beta2", 0.0, 0.9999999);
    add_number(app, "--clip", o.clip, "the gradient's global norm at most (0: no clipping)", 0.0, 1e6);
    add_number<std::size_t>(app, "--eval-every", o.eval_every, "score --holdout, keep the best (0: at end)", 0, many);
    add_number<std::size_t>(app, "--log-every", o.log_every, "print the training loss this often", 1, many);
    add_number<std::size_t>(app, "--generate", o.generate,
                            "characters to draw (after training or --model), printed on stdout after the prompt", 0,
                            1 << 30);
    app.add_option("--prompt", o.prompt,
                   "the text the drawn characters continue (default: a newline, or the text's first character "
                   "where it has none)")
        ->capture_default_str();
    add_number(app, "--temperature", o.temperature, "divides the logits before drawing; 0: the likeliest", 0.0, 100.0);
    add_number<std::size_t>(app, "--top-k", o.top_k, "draw among the k likeliest only (0: all; 1: greedy)", 0, many);
    add_number(app, "--top-p", o.top_p, "draw among the likeliest whose probability reaches p", 1e-9, 1.0);
    add_number<std::size_t>(app, "--streams", o.streams, "texts drawn at once (stream 0 is printed)", 1, 4096);
    add_number<std::uint64_t>(app, "--seed", o.seed, "seed for the weights, the windows and the draws", 0,
                              std::numeric_limits<std::uint64_t>::max());
    add_number<std::size_t>(app, "--threads", o.threads, "threads", 1, 64);
    app.add_option("--matmul-precision", o.matmul_precision,
                   "medium: bfloat16 products where this CPU runs them faster (AVX-512 BF16; LOOM_BF16_PRODUCTS=on|off "
                   "forces the choice)")
        ->capture_default_str()
        ->check(CLI::IsMember({"highest", "medium"}));
    app.add_option("--weights", o.weights,
                   "the precision --generate and --eval read the weights in: float, bfloat16 (half the bytes) or int8 "
                   "(a quarter; training and its held-out scores stay float)")
        ->capture_default_str()
        ->check(CLI::IsMember({"float", "bfloat16", "int8"}));
    app.add_option("--cache", o.cache,
                   "the precision --generate keeps the GPT's key/value cache in: float, or bfloat16 (half the bytes "
                   "read a step, which bound long contexts)")
        ->capture_default_str()
        ->check(CLI::IsMember({"float", "bfloat16"}));
    samples::add_mpi_timeout(app, o.mpi_timeout);
    samples::MpiJob mpi;  // under mpirun, every process trains on its own windows
    CLI11_PARSE(app, argc, argv);
    try {
        mpi.join(argc, argv, o.mpi_timeout, o.rank, o.ranks, o.reduction);
        if (o.rank > 0 && !std::freopen("/dev/null", "w", stdout)) return 1;  // rank 0 alone prints
        o.sizes.architecture = o.architecture == "lstm" ? lm::Architecture::lstm : lm::Architecture::transformer;
        o.prompt_given = app.count("--prompt") > 0;
        // char-rnn's sizes for the LSTM where none is given: 2 layers, windows of 50, 50 streams (at
        // twice its default width of 128), instead of the GPT's.
        for (auto [name, size, lstm] : {std::tuple{"--layers", &o.sizes.layers, 2},
                                        {"--width", &o.sizes.width, 256},
                                        {"--block", &o.sizes.block, 50},
                                        {"--batch", &o.batch, 50}})
            if (o.sizes.architecture == lm::Architecture::lstm && app.count(name) == 0) *size = lstm;
        if (o.sizes.architecture == lm::Architecture::lstm && app.count("--dropout") == 0) o.sizes.dropout = 0;
        if (!o.model_file.empty() && !(o.train_file + o.save).empty())
            throw UserError("--model FILE evaluates and generates only: --train and --save do not go with it");
        if (!o.model_file.empty() && o.eval_file.empty() && o.generate == 0)
            throw UserError("--model FILE goes with --eval FILE or --generate N");
        if (o.prompt.empty()) throw UserError("--prompt must hold at least one character");
        if (o.min_learning_rate > o.learning_rate)
            throw UserError("--min-learning-rate must not exceed --learning-rate");
        if (o.train_file.empty() && o.model_file.empty()) {  // the demonstration
            // Tiny Shakespeare where the real data is (README), else the sonnets that ship here; its
            // settings fill in only what the command line did not give.
            const auto unset = [&](const char* name) { return app.count(name) == 0; };
            o.train_file = "../shared/data/tinyshakespeare/train.txt";
            const bool shipped = !std::filesystem::exists(o.train_file);
            if (shipped) o.train_file = LM_SHIPPED_TEXT;
            if (unset("--prompt")) o.prompt = shipped ? "When " : "ROMEO:";
            if (unset("--minutes") && unset("--iterations")) o.minutes = 1;
            if (unset("--generate")) o.generate = 300;
            if (unset("--temperature")) o.temperature = 0.8;
            if (unset("--log-every")) o.log_every = 200;
            const lm::Settings nano;  // nanoGPT's, for a minute
            if (o.sizes.architecture == lm::Architecture::transformer)
                for (auto [name, size, value] : {std::tuple{"--layers", &o.sizes.layers, nano.layers},
                                                 {"--heads", &o.sizes.heads, nano.heads},
                                                 {"--width", &o.sizes.width, nano.width},
                                                 {"--block", &o.sizes.block, nano.block}})
                    if (unset(name)) *size = value;
            if (o.sizes.architecture == lm::Architecture::transformer && unset("--dropout")) o.sizes.dropout = 0;
            std::printf("training on %s, then a sample (lm --help for more)\n", o.train_file.c_str());
        }
        if (o.sizes.architecture == lm::Architecture::transformer && o.sizes.width % o.sizes.heads != 0)
            throw UserError("--width " + std::to_string(o.sizes.width) + " must be a multiple of --heads " +
                            std::to_string(o.sizes.heads));
        std::setvbuf(stdout, nullptr, _IOLBF, 0);
        set_blas_threads(1);
        set_inter_op_threads(static_cast<int>(o.threads));
        set_seed(o.seed);
        set_matmul_precision(parse_matmul_precision(o.matmul_precision));
        o.weight_precision = parse_weight_precision(o.weights);
        o.cache_precision = parse_cache_precision(o.cache);
        return o.model_file.empty() ? train(o) : use_saved(o);
    } catch (const std::bad_alloc&) {
        samples::print_error("out of memory");
    } catch (const std::exception& e) {
        samples::print_error(e.what());
    }
    return 1;
}
