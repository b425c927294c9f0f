// One LSTM layer (layers::Recurrence(layers::LSTM(hidden))) over ONE long sequence, forward and
// backward through a training Session, with and without a memory budget for the loop
// (Session::set_memory_budget: square-root checkpointing). Prints one JSON line: milliseconds per
// time step (median over the timed runs, forward + backward, and forward alone), the peak RSS of
// the process (VmHWM) and the session's buffers. Run one process per length: the peak RSS is the
// process's, so cells must not share one.
//
//   long_sequence_bench [--length T] [--input 100] [--hidden 300] [--budget-mib B] [--iters 3] [--warmup 1]
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <loom.hpp>

#include "bench_common.hpp"

using namespace loom;

namespace {

struct Options {
    int threads = 1;
    int iters = 3;
    int warmup = 1;
    std::size_t length = 1000, input = 100, hidden = 300;
    double budget_mib = 0;  // 0: no budget, every loop value is kept for backward
};

// VmHWM (peak resident set) of this process in MiB, from /proc; getrusage's ru_maxrss otherwise.
double peak_rss_mib() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_maxrss) / 1024.0;
}

int run(const Options& o) {
    set_blas_threads(o.threads);
    set_seed(1);
    Rng rng(1);
    Variable x = sequence::input_variable({o.input}, "x");
    layers::Layer lstm = layers::Recurrence(layers::LSTM(o.hidden));
    Variable h = lstm(x);
    // The loss is the sum of h over every step (Session seeds backward with ones).
    Session session({h}, lstm.parameters());
    if (o.budget_mib > 0) session.set_memory_budget(static_cast<std::size_t>(o.budget_mib * 1024 * 1024));
    const Bindings in{{x, bench::random_sequences({o.length}, o.input, rng)}};
    double forward_ms = 0;
    std::vector<double> fwd;
    const bench::Timing t = bench::time_runs(o.warmup, o.iters, [&] {
        const double t0 = bench::wall_seconds();
        session.forward(in);
        fwd.push_back(1e3 * (bench::wall_seconds() - t0));
        session.backward();
    });
    forward_ms = bench::median(fwd);
    // A checksum of one gradient: budgeted and plain runs must print the same digits.
    double checksum = 0;
    for (float g : session.gradient(std::size_t{0}).to_dense()) checksum += g;
    const double steps = double(o.length);
    std::printf(
        "{\"bench\": \"loom_long_sequence\", \"length\": %zu, \"input\": %zu, \"hidden\": %zu, \"budget_mib\": %.3f, "
        "\"iters\": %d, \"ms_per_step\": %.5f, \"forward_ms_per_step\": %.5f, \"cpu_ms_per_step\": %.5f, "
        "\"peak_rss_mib\": %.1f, \"session_buffers_mib\": %.1f, \"loop_peak_mib\": %.1f, \"grad_checksum\": %.9g}\n",
        o.length, o.input, o.hidden, o.budget_mib, o.iters, t.ms / steps, forward_ms / steps, t.cpu_ms / steps,
        peak_rss_mib(), double(session.bytes_held()) / (1024.0 * 1024.0),
        double(session.loop_bytes_peak()) / (1024.0 * 1024.0), checksum);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Times forward + backward of one LSTM layer over one long sequence, with or without a memory budget"};
    bench::add_run_options(app, o.threads, "--iters", o.iters, "timed iterations (the median is printed)", o.warmup);
    bench::add_size(app, "--length", o.length, "time steps of the one sequence", 1);
    bench::add_size(app, "--input", o.input, "input width", 1);
    bench::add_size(app, "--hidden", o.hidden, "LSTM hidden size", 1);
    app.add_option("--budget-mib", o.budget_mib, "memory budget of the loop in MiB (0: none)")
        ->check(CLI::Range(0.0, 1e9))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    return bench::report_errors([&] { return run(o); });
}
