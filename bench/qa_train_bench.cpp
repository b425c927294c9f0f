// Whole training steps of the QA similarity sample (samples/qa_similarity), shaped as the PyTorch
// peer's torch_qa.py: batch 32 pairs (16 true, 16 wrong), questions 5-20 tokens, answers 10-40,
// vocabulary 10,000, Embedding 500 -> BiLSTM 300+300 -> Dense 200 -> attention -> cosine, loss
// (cos - label)^2 averaged over the batch, Adam lr 1e-3. Every batch is made before timing; the
// first --warmup steps are not timed. Prints one JSON line with the same fields as the peer's --json.
//
//   qa_train_bench [--threads N] [--steps N] [--warmup N] [--seed N] [--batch N]
//                  [--embed N] [--hidden N] [--dense N] [--vocab N] [--batches-from FILE] [--lazy-adam]
//                  [--parallel steps|blas]
//
// --batches-from FILE trains on exactly the batches the peer would (same ids, same lengths, same
// labels): FILE is written by `bench/compare --dump-batches`, which runs the peer's own generator.
// Format: a line "loom-qa-batches 1", then per batch a line "batch <pairs>" followed by one line
// per pair: "<label> <question ids...> | <answer ids...>".
// Without it, batches come from the sample's generator (same distribution, different random
// stream: loom::make_synthetic_qa).
//
// qa_dist_bench is this file built with LOOM_DISTRIBUTED (when MPI is found): under
// `mpirun -np P qa_dist_bench ...` every step trains on the same global batch of --batch pairs, each
// process on its contiguous share, gradients summed over processes (loom::distributed); rank 0
// prints the JSON line, with the global pairs/s, "ranks" and the bytes each process sent per step.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <loom.hpp>

#include "bench_common.hpp"
#ifdef LOOM_DISTRIBUTED
#include "distributed/distributed.hpp"
#endif
#include "model.hpp"

using namespace loom;

namespace {

struct Options {
    int threads = 1, steps = 30, warmup = 3;
    std::uint64_t seed = 1;
    std::size_t batch = 32, embed = 500, hidden = 300, dense = 200, vocab = 10000;
    std::string batches_from;
    std::string parallel = "steps";
    bool lazy_adam = false;
};

struct Batch {
    std::vector<std::vector<std::size_t>> questions, answers;
    std::vector<float> labels;
    std::size_t real_tokens() const {
        std::size_t n = 0;
        for (const auto& q : questions) n += q.size();
        for (const auto& a : answers) n += a.size();
        return n;
    }
    // Tokens when each side is padded to its longest sequence (what a padded engine computes on).
    std::size_t padded_tokens() const {
        auto longest = [](const auto& v) {
            std::size_t m = 0;
            for (const auto& s : v) m = std::max(m, s.size());
            return m;
        };
        return questions.size() * (longest(questions) + longest(answers));
    }
};

std::vector<Batch> read_batches(const std::string& path, std::size_t vocab) {
    std::ifstream in(path);
    if (!in) throw UserError("qa_train_bench: cannot open --batches-from file '" + path + "'");
    std::string line;
    std::size_t line_no = 0;
    auto fail = [&](const std::string& why) { throw DataError(path + ":" + std::to_string(line_no) + ": " + why); };
    if (!std::getline(in, line) || line.rfind("loom-qa-batches 1", 0) != 0) {
        line_no = 1;
        fail("expected the header 'loom-qa-batches 1' (write the file with bench/compare --dump-batches)");
    }
    ++line_no;
    std::vector<Batch> batches;
    std::size_t expected = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty()) continue;
        std::istringstream ls(line);
        if (line.rfind("batch ", 0) == 0) {
            if (!batches.empty() && batches.back().labels.size() != expected) fail("previous batch is short");
            std::string word;
            ls >> word >> expected;
            if (!ls || expected == 0) fail("expected 'batch <pairs>'");
            batches.emplace_back();
            continue;
        }
        if (batches.empty()) fail("a pair before the first 'batch' line");
        Batch& b = batches.back();
        float label = 0;
        ls >> label;
        if (!ls) fail("expected '<label> <question ids> | <answer ids>'");
        std::vector<std::size_t> q, a;
        bool in_answer = false;
        std::string tok;
        while (ls >> tok) {
            if (tok == "|") {
                in_answer = true;
                continue;
            }
            char* end = nullptr;
            const unsigned long id = std::strtoul(tok.c_str(), &end, 10);
            if (*end != '\0' || id >= vocab)
                fail("token '" + tok + "' is not an id below --vocab " + std::to_string(vocab));
            (in_answer ? a : q).push_back(id);
        }
        if (q.empty() || a.empty()) fail("a pair needs a question and an answer separated by ' | '");
        b.questions.push_back(std::move(q));
        b.answers.push_back(std::move(a));
        b.labels.push_back(label);
    }
    if (!batches.empty() && batches.back().labels.size() != expected) fail("last batch is short");
    return batches;
}

// The sample's generator: questions with 1 true + 1 wrong answer each, so every batch is half true.
std::vector<Batch> make_batches(const Options& o, std::size_t count) {
    SyntheticQaOptions s;
    s.questions = count * o.batch / 2;
    s.candidates = 2;
    s.vocab = o.vocab;
    s.seed = o.seed;
    s.topic_seed = o.seed;
    const QaData data = make_synthetic_qa(s);
    std::vector<Batch> batches(count);
    for (std::size_t i = 0; i < count * (o.batch / 2) * 2; ++i) {
        Batch& b = batches[i / (o.batch / 2 * 2)];
        const QaPair& p = data.pairs[i];
        b.questions.push_back(bench::word_ids(p.question));
        b.answers.push_back(bench::word_ids(p.answer));
        b.labels.push_back(float(p.label));
    }
    return batches;
}

// VmRSS / VmHWM of this process in MiB (0 when /proc is not there): where the peak comes from.
double proc_status_mib(const char* key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    const std::string k = std::string(key) + ":";
    while (std::getline(in, line))
        if (line.rfind(k, 0) == 0) return std::strtod(line.c_str() + k.size(), nullptr) / 1024.0;
    return 0.0;
}

#ifdef LOOM_DISTRIBUTED
distributed::Context* mpi = nullptr;
#endif

int run(const Options& o) {
    // --threads N with N > 1: "steps" runs up to N independent plan steps at once, each with one
    // BLAS thread (the BiLSTM directions and the two towers are independent); "blas" runs steps one
    // after another with N OpenBLAS threads inside each GEMM.
    if (o.parallel == "steps") {
        set_inter_op_threads(o.threads);
        if (o.threads == 1) set_blas_threads(1);
    } else {
        set_blas_threads(o.threads);
    }
    set_seed(o.seed);
    const std::size_t needed = std::size_t(o.warmup + o.steps);
    std::vector<Batch> batches;
    if (!o.batches_from.empty()) {
        batches = read_batches(o.batches_from, o.vocab);
        if (batches.size() < needed)
            throw UserError("qa_train_bench: '" + o.batches_from + "' holds " + std::to_string(batches.size()) +
                            " batches, --warmup + --steps need " + std::to_string(needed));
    } else {
        batches = make_batches(o, needed);
    }
    // Inputs are built before timing too, as the peer builds its tensors before timing.
    qa::ModelOptions mo;
    mo.vocab = o.vocab;
    mo.embed = o.embed;
    mo.hidden = o.hidden;
    mo.dense = o.dense;
    qa::Model model(mo);
    TrainerOptions to;
    int rank = 0, ranks = 1;
#ifdef LOOM_DISTRIBUTED
    auto parallel = distributed::data_parallel(*mpi);
    to.reduction = parallel;
    rank = mpi->rank();
    ranks = mpi->size();
#endif
    std::vector<Bindings> inputs;
    for (std::size_t i = 0; i < needed; ++i) {
        Batch b = batches[i];
        if (ranks > 1) {  // this process's share: pairs [n r / P, n (r + 1) / P)
            const std::size_t n = b.labels.size(), lo = n * std::size_t(rank) / std::size_t(ranks),
                              hi = n * std::size_t(rank + 1) / std::size_t(ranks);
            if (lo == hi) throw UserError("qa_dist_bench: --batch is smaller than the number of processes");
            auto cut = [&](auto& v) {
                v = std::vector(v.begin() + std::ptrdiff_t(lo), v.begin() + std::ptrdiff_t(hi));
            };
            cut(b.questions);
            cut(b.answers);
            cut(b.labels);
        }
        xt::xarray<float> labels = xt::zeros<float>({b.labels.size(), std::size_t{1}});
        for (std::size_t k = 0; k < b.labels.size(); ++k) labels(k, 0) = b.labels[k];
        inputs.push_back(Bindings{{model.question, Value::index_sequences(b.questions)},
                                  {model.answer, Value::index_sequences(b.answers)},
                                  {model.label, Value::batch(labels)}});
    }
    // Exact (dense) Adam as the peer's default; --lazy-adam skips parameter rows whose gradient is
    // all zero (the embedding rows a batch does not use), the counterpart of the peer's
    // --sparse-embed (SparseAdam on the embeddings).
    LearnerOptions lo;
    lo.lazy_sparse_rows = o.lazy_adam;
    Trainer trainer(model.squared_loss, Variable(), adam(model.parameters(), 1e-3, 0.9, 0.999, 1e-8, lo), to);
    std::size_t params = 0;
    for (const auto& p : model.parameters()) params += p.shape().size();

    const double rss_setup = proc_status_mib("VmRSS"), hwm_setup = proc_status_mib("VmHWM");
    std::vector<double> losses, step_ms;
    for (int i = 0; i < o.warmup; ++i) losses.push_back(trainer.train_minibatch(inputs[std::size_t(i)]).average_loss());
    std::size_t real = 0, padded = 0;
    gemm_timing(true);
    gemm_reset_timing();
#ifdef LOOM_DISTRIBUTED
    mpi->synchronize({});  // every process starts timing together
#endif
    const auto start = std::chrono::steady_clock::now();
    std::vector<double> finish_ms;  // distributed: time in the reduction's finish, per step
    // CPU time of the process (all its threads): on a shared machine, what the steps cost when
    // the process is not descheduled.
    timespec cpu0{}, cpu1{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    for (std::size_t i = std::size_t(o.warmup); i < needed; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        losses.push_back(trainer.train_minibatch(inputs[i]).average_loss());
#ifdef LOOM_DISTRIBUTED
        finish_ms.push_back(1e3 * parallel->finish_seconds());
#endif
        step_ms.push_back(1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        real += batches[i].real_tokens();
        padded += batches[i].padded_tokens();
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    const double cpu_ms = 1e3 * (double(cpu1.tv_sec - cpu0.tv_sec) + 1e-9 * double(cpu1.tv_nsec - cpu0.tv_nsec));
    const double in_gemm = gemm_seconds();
    gemm_timing(false);

    std::size_t dense_bytes = 0, row_bytes = 0;
#ifdef LOOM_DISTRIBUTED
    dense_bytes = parallel->dense_bytes();
    row_bytes = parallel->row_bytes();
    if (!mpi->is_root()) return 0;
#endif
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    // GEMM FLOPs per real token and tower, forward (peer README): input and recurrent projections
    // of both directions, Dense, attention score + weighted sum; a step is 3x forward.
    const double E = double(o.embed), H = double(o.hidden), D = double(o.dense);
    const double flop_per_token = 2 * (2 * E * 4 * H) + 2 * (2 * H * 4 * H) + 2 * 2 * H * D + 4 * D;
    const double tokens_per_step = double(real) / o.steps;
    const std::size_t last = std::min<std::size_t>(10, losses.size());
    const double final_loss = std::accumulate(losses.end() - std::ptrdiff_t(last), losses.end(), 0.0) / double(last);
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    std::printf(
        "{\"bench\": \"loom_qa\", \"threads\": %d, \"batch\": %zu, \"steps\": %d, \"warmup\": %d, \"embed\": %zu, "
        "\"hidden\": %zu, \"dense\": %zu, \"vocab\": %zu, \"seed\": %llu, \"lazy_adam\": %s, \"data\": \"%s\", "
        "\"parallel\": \"%s\", \"params\": %zu, "
        "\"elapsed_s\": %.4f, \"steps_per_s\": %.4f, \"pairs_per_s\": %.2f, \"tokens_per_s\": %.1f, "
        "\"padded_tokens_per_s\": %.1f, \"tokens_per_step\": %.1f, \"step_ms_median\": %.3f, \"step_ms_min\": %.3f, "
        "\"step_ms_max\": %.3f, \"first_loss\": %.5f, \"final_loss\": %.5f, \"peak_rss_mib\": %.1f, "
        "\"rss_before_training_mib\": %.1f, \"peak_rss_before_training_mib\": %.1f, "
        "\"session_buffers_mib\": %.1f, \"gemm_share\": %.4f, \"gemm_gflop_per_step\": %.3f, "
        "\"openblas_coretype_env\": \"%s\", \"ranks\": %d, \"sent_dense_bytes\": %zu, \"sent_row_bytes\": %zu, "
        "\"finish_ms_median\": %.3f, \"cpu_ms_per_step\": %.3f}\n",
        o.threads, o.batch, o.steps, o.warmup, o.embed, o.hidden, o.dense, o.vocab, (unsigned long long)o.seed,
        o.lazy_adam ? "true" : "false", o.batches_from.empty() ? "loom-synthetic" : "peer-batches-file",
        o.parallel.c_str(), params, elapsed, o.steps / elapsed, double(o.steps) * double(o.batch) / elapsed,
        double(real) / elapsed, double(padded) / elapsed, tokens_per_step, bench::median(step_ms),
        *std::min_element(step_ms.begin(), step_ms.end()), *std::max_element(step_ms.begin(), step_ms.end()),
        losses.front(), final_loss, double(ru.ru_maxrss) / 1024.0, rss_setup, hwm_setup,
        double(trainer.session().bytes_held()) / 1048576.0, elapsed > 0 ? in_gemm / elapsed : 0.0,
        3 * tokens_per_step * flop_per_token * 1e-9, coretype ? coretype : "", ranks, dense_bytes, row_bytes,
        finish_ms.empty() ? 0.0 : bench::median(finish_ms), cpu_ms / o.steps);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef LOOM_DISTRIBUTED
    distributed::Context context(argc, argv);
    mpi = &context;
#endif
    Options o;
    CLI::App app{"Whole training steps of the QA similarity sample; prints one JSON line (see the source's header)"};
    bench::add_run_options(app, o.threads, "--steps", o.steps, "timed training steps", o.warmup);
    app.add_option("--seed", o.seed, "seed of the generator and of the initial weights")
        ->check(bench::at_least(0))
        ->capture_default_str();
    bench::add_size(app, "--batch", o.batch, "pairs per step (half true, half wrong)", 2);
    bench::add_size(app, "--embed", o.embed, "embedding dimension");
    bench::add_size(app, "--hidden", o.hidden, "LSTM size per direction");
    bench::add_size(app, "--dense", o.dense, "Dense output (attention) dimension");
    bench::add_size(app, "--vocab", o.vocab, "vocabulary size", 2);
    app.add_option("--batches-from", o.batches_from, "train on the batches of this file (bench/compare --dump-batches)")
        ->check(CLI::ExistingFile);
    app.add_flag("--lazy-adam", o.lazy_adam, "Adam skips embedding rows a batch does not use");
    app.add_option("--parallel", o.parallel,
                   "how --threads > 1 are used: steps = independent plan steps at once, one BLAS thread each; "
                   "blas = one step at a time, N threads inside each GEMM")
        ->check(CLI::IsMember({"steps", "blas"}))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    return bench::report_errors([&] { return run(o); });
}
