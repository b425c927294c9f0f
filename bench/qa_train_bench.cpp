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
#include "qa_batches.hpp"

using namespace loom;

namespace {

struct Options {
    int threads = 1, steps = 30, warmup = 3;
    std::uint64_t seed = 1;
    std::size_t batch = 32, embed = 500, hidden = 300, dense = 200, vocab = 10000;
    std::string batches_from;
    std::string parallel = "steps";
    std::string update = "sharded";  // qa_dist_bench: DataParallelOptions::shard_update
    bool lazy_adam = false;
};

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
    std::vector<bench::Batch> batches;
    if (!o.batches_from.empty()) {
        batches = bench::read_batches(o.batches_from, o.vocab);
        if (batches.size() < needed)
            throw UserError("qa_train_bench: '" + o.batches_from + "' holds " + std::to_string(batches.size()) +
                            " batches, --warmup + --steps need " + std::to_string(needed));
    } else {
        batches = bench::make_batches(needed, o.batch, o.vocab, o.seed);
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
    distributed::DataParallelOptions dpo;
    dpo.shard_update = o.update != "replicated";
    dpo.shard_tables = o.update == "sharded-tables";
    auto parallel = distributed::data_parallel(*mpi, dpo);
    to.reduction = parallel;
    rank = mpi->rank();
    ranks = mpi->size();
#endif
    std::vector<Bindings> inputs;
    for (std::size_t i = 0; i < needed; ++i) {
        bench::Batch b = batches[i];
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

    const double rss_setup = bench::proc_status_mib("VmRSS"), hwm_setup = bench::proc_status_mib("VmHWM");
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
    // distributed: per step, forward, waiting for the others' forward, backward, finish, update, sending
    // the new parameter values (sharded update) (ms)
    std::vector<std::vector<double>> phase_ms(6);
    // CPU time of the process (all its threads): on a shared machine, what the steps cost when
    // the process is not descheduled.
    timespec cpu0{}, cpu1{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    for (std::size_t i = std::size_t(o.warmup); i < needed; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        losses.push_back(trainer.train_minibatch(inputs[i]).average_loss());
        const auto t1 = std::chrono::steady_clock::now();
#ifdef LOOM_DISTRIBUTED
        finish_ms.push_back(1e3 * parallel->finish_seconds());
        const auto& m = parallel->moments();
        // With a replicated update `stepped` is not set: the step's end stands for it.
        const auto stepped = m.stepped > m.finished ? m.stepped : t1;
        const std::chrono::steady_clock::time_point at[] = {t0,         m.combine_began, m.combined, m.finish_began,
                                                            m.finished, stepped,         t1};
        for (std::size_t k = 0; k < phase_ms.size(); ++k)
            phase_ms[k].push_back(1e3 * std::chrono::duration<double>(at[k + 1] - at[k]).count());
#endif
        step_ms.push_back(1e3 * std::chrono::duration<double>(t1 - t0).count());
        real += batches[i].real_tokens();
        padded += batches[i].padded_tokens();
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    const double cpu_ms = 1e3 * (double(cpu1.tv_sec - cpu0.tv_sec) + 1e-9 * double(cpu1.tv_nsec - cpu0.tv_nsec));
    const double in_gemm = gemm_seconds();
    gemm_timing(false);

    std::size_t dense_bytes = 0, row_bytes = 0, parameter_bytes = 0;
#ifdef LOOM_DISTRIBUTED
    dense_bytes = parallel->dense_bytes();
    row_bytes = parallel->row_bytes();
    parameter_bytes = parallel->parameter_bytes();
    // Every process's phase medians, in rank order: the step waits for the slowest.
    std::string phases = "[";
    for (int r = 0; r < ranks; ++r) {
        // A sum in which only rank r's words are not zero is rank r's words.
        double theirs[8] = {};
        for (std::size_t half = 0; half < 2; ++half) {
            distributed::Context::Words words{};
            for (std::size_t k = 0; k < 4 && 4 * half + k < phase_ms.size(); ++k)
                if (r == rank) words[k] = bench::median(phase_ms[4 * half + k]);
            const auto sum = mpi->synchronize(words);
            std::copy(sum.begin(), sum.end(), theirs + 4 * half);
        }
        char text[240];
        std::snprintf(text, sizeof text,
                      "%s{\"forward\": %.2f, \"wait\": %.2f, \"backward\": %.2f, \"finish\": %.2f, "
                      "\"update\": %.2f, \"send_parameters\": %.2f}",
                      r ? ", " : "", theirs[0], theirs[1], theirs[2], theirs[3], theirs[4], theirs[5]);
        phases += text;
    }
    phases += "]";
    if (!mpi->is_root()) return 0;
#else
    const std::string phases = "[]";
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
    std::string all_losses;  // every step's (warm-up first), all digits: two builds compare bit for bit
    for (double l : losses) {
        char text[32];
        std::snprintf(text, sizeof text, "%s%.17g", all_losses.empty() ? "" : ", ", l);
        all_losses += text;
    }
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
        "\"finish_ms_median\": %.3f, \"cpu_ms_per_step\": %.3f, \"update\": \"%s\", \"sent_parameter_bytes\": %zu, "
        "\"phase_ms_median_by_rank\": %s, \"losses\": [%s]}\n",
        o.threads, o.batch, o.steps, o.warmup, o.embed, o.hidden, o.dense, o.vocab, (unsigned long long)o.seed,
        o.lazy_adam ? "true" : "false", o.batches_from.empty() ? "loom-synthetic" : "peer-batches-file",
        o.parallel.c_str(), params, elapsed, o.steps / elapsed, double(o.steps) * double(o.batch) / elapsed,
        double(real) / elapsed, double(padded) / elapsed, tokens_per_step, bench::median(step_ms),
        *std::min_element(step_ms.begin(), step_ms.end()), *std::max_element(step_ms.begin(), step_ms.end()),
        losses.front(), final_loss, double(ru.ru_maxrss) / 1024.0, rss_setup, hwm_setup,
        double(trainer.session().bytes_held()) / 1048576.0, elapsed > 0 ? in_gemm / elapsed : 0.0,
        3 * tokens_per_step * flop_per_token * 1e-9, coretype ? coretype : "", ranks, dense_bytes, row_bytes,
        finish_ms.empty() ? 0.0 : bench::median(finish_ms), cpu_ms / o.steps, ranks > 1 ? o.update.c_str() : "",
        parameter_bytes, phases.c_str(), all_losses.c_str());
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
    app.add_option("--update", o.update,
                   "qa_dist_bench: sharded = each process steps its share of the dense parameters and sends "
                   "them (ZeRO stage 1), every process steps the embedding tables; sharded-tables = the tables "
                   "too; replicated = every process steps all of them")
        ->check(CLI::IsMember({"sharded", "sharded-tables", "replicated"}))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    return bench::report_errors([&] { return run(o); });
}
