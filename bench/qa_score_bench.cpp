// Scoring throughput of the QA similarity model (samples/qa_similarity, the shapes of the PyTorch
// peer): cos(question, answer) for every pair of a set (10,000 by default), forward only: a Session
// whose only output is the cosine and that has no parameters to differentiate for, so no gradient
// buffers exist and no value is kept for a backward. The counterpart of bench/torch_score.py
// (the peer's model under torch.no_grad()); bench/compare --score runs both on the same pairs.
//
//   qa_score_bench [--threads N] [--pairs 10000] [--batch 100] [--repeats 1] [--seed 1]
//                  [--embed N] [--hidden N] [--dense N] [--vocab N] [--batches-from FILE]
//
// --batches-from FILE scores exactly the pairs of FILE (bench/compare --dump-batches --batch B
// --steps N); otherwise the sample's generator makes them. Every input Value is built before
// timing; the whole set is scored --repeats times after one untimed pass over the first batch.
// Prints one JSON line: pairs_per_s, tokens_per_s, ms per batch, the mean cosine, peak RSS.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include <loom.hpp>

#include "bench_common.hpp"
#include "model.hpp"
#include "qa_batches.hpp"

using namespace loom;

namespace {

struct Options {
    int threads = 1, repeats = 1;
    std::uint64_t seed = 1;
    std::size_t pairs = 10000, batch = 100, embed = 500, hidden = 300, dense = 200, vocab = 10000;
    std::string batches_from;
};

int run(const Options& o) {
    set_inter_op_threads(o.threads);
    set_blas_threads(1);
    set_seed(o.seed);
    std::vector<bench::Batch> batches;
    if (!o.batches_from.empty()) {
        batches = bench::read_batches(o.batches_from, o.vocab);
    } else {
        batches = bench::make_batches((o.pairs + o.batch - 1) / o.batch, o.batch, o.vocab, o.seed);
    }
    // Exactly --pairs pairs (the last batch may be short).
    std::size_t pairs = 0, used = 0;
    for (; used < batches.size() && pairs < o.pairs; ++used) {
        bench::Batch& b = batches[used];
        const std::size_t keep = std::min(b.labels.size(), o.pairs - pairs);
        b.questions.resize(keep);
        b.answers.resize(keep);
        b.labels.resize(keep);
        pairs += keep;
    }
    batches.resize(used);
    if (pairs < o.pairs)
        throw UserError("qa_score_bench: '" + o.batches_from + "' holds " + std::to_string(pairs) +
                        " pairs, --pairs asks for " + std::to_string(o.pairs));
    qa::ModelOptions mo;
    mo.vocab = o.vocab;
    mo.embed = o.embed;
    mo.hidden = o.hidden;
    mo.dense = o.dense;
    qa::Model model(mo);
    std::vector<Bindings> inputs;
    std::size_t tokens = 0;
    for (const bench::Batch& b : batches) {
        inputs.push_back(Bindings{{model.question, Value::index_sequences(b.questions)},
                                  {model.answer, Value::index_sequences(b.answers)}});
        tokens += b.real_tokens();
    }
    // No parameters: forward only, values freed as soon as no later step reads them.
    Session session({model.cosine});
    session.forward(inputs.front());
    std::vector<double> batch_ms;
    double cosine_sum = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < o.repeats; ++r)
        for (const Bindings& in : inputs) {
            const auto t0 = std::chrono::steady_clock::now();
            session.forward(in);
            cosine_sum += session.sum(model.cosine);
            batch_ms.push_back(1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double scored = double(pairs) * o.repeats;
    std::printf(
        "{\"bench\": \"loom_qa_score\", \"threads\": %d, \"pairs\": %zu, \"batch\": %zu, \"repeats\": %d, "
        "\"data\": \"%s\", \"elapsed_s\": %.4f, \"pairs_per_s\": %.1f, \"tokens_per_s\": %.1f, "
        "\"tokens_per_pair\": %.2f, \"batch_ms_median\": %.3f, \"mean_cosine\": %.6f, \"peak_rss_mib\": %.1f, "
        "\"session_buffers_mib\": %.1f, \"gemm_kernels\": \"%s\", \"isa\": \"%s\"}\n",
        o.threads, pairs, o.batch, o.repeats, o.batches_from.empty() ? "loom-synthetic" : "peer-batches-file", elapsed,
        scored / elapsed, double(tokens) * o.repeats / elapsed, double(tokens) / double(pairs), bench::median(batch_ms),
        cosine_sum / scored, double(ru.ru_maxrss) / 1024.0, double(session.bytes_held()) / 1048576.0,
        gemm_kernels().c_str(), isa_name(active_isa()));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Scoring throughput of the QA model, forward only; prints one JSON line (see the source's header)"};
    app.add_option("--threads", o.threads, "independent plan steps at once (one BLAS thread each)")
        ->check(bench::at_least(1))
        ->capture_default_str();
    bench::add_size(app, "--pairs", o.pairs, "pairs scored per repeat", 1);
    bench::add_size(app, "--batch", o.batch, "pairs per forward pass", 2);
    app.add_option("--repeats", o.repeats, "passes over all pairs")->check(bench::at_least(1))->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the generator and of the weights")->capture_default_str();
    bench::add_size(app, "--embed", o.embed, "embedding dimension");
    bench::add_size(app, "--hidden", o.hidden, "LSTM size per direction");
    bench::add_size(app, "--dense", o.dense, "Dense output (attention) dimension");
    bench::add_size(app, "--vocab", o.vocab, "vocabulary size", 2);
    app.add_option("--batches-from", o.batches_from, "score the pairs of this file (bench/compare --dump-batches)")
        ->check(CLI::ExistingFile);
    CLI11_PARSE(app, argc, argv);
    return bench::report_errors([&] { return run(o); });
}
