// What the bench programs (qa_train_bench, micro_bench, recurrence_bench) share: clocks, the median,
// timing a callable over warm-up and timed runs, random input sequences, the "w<id>" word ids of the
// QA sample's synthetic data, and the command-line glue (CLI11 options every bench has, and the
// error report of main). Header-only: each bench is a single translation unit.
#pragma once

#include <time.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <loom.hpp>

namespace loom::bench {

// Wall clock in seconds (steady: immune to clock adjustments); only differences mean anything.
inline double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the whole process (all threads) in seconds: less sensitive than wall time to other
// processes on a busy machine.
inline double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Median of v (mean of the two middle values for an even count); v must not be empty.
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size();
    return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

struct Timing {
    double ms = 0;          // median wall-clock milliseconds per run
    double cpu_ms = 0;      // median process CPU milliseconds per run
    double gemm_share = 0;  // GEMM seconds / wall seconds over the timed runs (0 unless measured)
};

// Runs f `warmup` times untimed, then `iters` times timed. With measure_gemm, loom's GEMM timer is
// on during the timed runs (it costs a clock read per GEMM, so benches that do not report the share
// leave it off).
inline Timing time_runs(int warmup, int iters, const std::function<void()>& f, bool measure_gemm = false) {
    for (int i = 0; i < warmup; ++i) f();
    std::vector<double> ms, cpu_ms;
    double total = 0, in_gemm = 0;
    if (measure_gemm) gemm_timing(true);
    for (int i = 0; i < iters; ++i) {
        if (measure_gemm) gemm_reset_timing();
        const double c0 = cpu_seconds(), t0 = wall_seconds();
        f();
        const double s = wall_seconds() - t0;
        cpu_ms.push_back(1e3 * (cpu_seconds() - c0));
        ms.push_back(1e3 * s);
        total += s;
        if (measure_gemm) in_gemm += gemm_seconds();
    }
    if (measure_gemm) gemm_timing(false);
    return {median(ms), median(cpu_ms), total > 0 ? in_gemm / total : 0.0};
}

// A batch of sequences of the given lengths, width dim, entries drawn from N(0, 1) in order.
inline Value random_sequences(const std::vector<std::size_t>& lengths, std::size_t dim, Rng& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<xt::xarray<float>> seqs;
    for (std::size_t len : lengths) {
        xt::xarray<float> s = xt::zeros<float>({len, dim});
        for (auto& v : s) v = d(rng);
        seqs.push_back(std::move(s));
    }
    return Value::sequences(seqs);
}

// The QA sample's synthetic words are "w<id>": their ids, for Value::index_sequences.
inline std::vector<std::size_t> word_ids(const std::vector<std::string>& words) {
    std::vector<std::size_t> out;
    out.reserve(words.size());
    for (const auto& w : words) out.push_back(std::stoul(w.substr(1)));
    return out;
}

// CLI11 validator for an integer of at least `least`. Used instead of CLI::PositiveNumber and
// CLI::NonNegativeNumber: in CLI11 2.1 those are ranges of doubles whose message prints DBL_MAX in
// full, and they let "2.5" through to a less clear conversion error.
inline CLI::Validator at_least(long long least) {
    const std::string name = least == 0 ? "NONNEGATIVE" : least == 1 ? "POSITIVE" : ">=" + std::to_string(least);
    return CLI::Validator(
        [least](std::string& s) -> std::string {
            long long v = 0;
            if (!CLI::detail::lexical_cast(s, v) || v < least)
                return "'" + s + "' is not an integer of at least " + std::to_string(least);
            return {};
        },
        name);
}

// The options every bench has: OpenBLAS threads, the number of timed runs (named `runs_name`,
// e.g. --iters or --steps) and of untimed warm-up runs before them.
inline void add_run_options(CLI::App& app, int& threads, const std::string& runs_name, int& runs,
                            const std::string& runs_help, int& warmup) {
    app.add_option("--threads", threads, "OpenBLAS threads")->check(at_least(1))->capture_default_str();
    app.add_option(runs_name, runs, runs_help)->check(at_least(1))->capture_default_str();
    app.add_option("--warmup", warmup, "untimed runs first")->check(at_least(0))->capture_default_str();
}

// A size option: an integer of at least `least` (unsigned options would otherwise take "-1" as a
// huge number), its default shown in --help.
inline CLI::Option* add_size(CLI::App& app, const std::string& name, std::size_t& value, const std::string& help,
                             long long least = 0) {
    return app.add_option(name, value, help)->check(at_least(least))->capture_default_str();
}

// main's body after parsing: runs the bench, reporting an error as one line on stderr and exit code 1.
inline int report_errors(const std::function<int()>& run) {
    try {
        return run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}

}  // namespace loom::bench
