// Times forward + backward of two recurrences through loom::Session, the way a trainer runs them:
//   attention  the seed's attention loop (cumulative log-sum-exp closed through a placeholder)
//   lstm       an LSTM written from primitives: one loop carrying h and c, closed by two
//              placeholders; the input projections times(x, W) sit OUTSIDE the loop, so they run
//              once over all steps as one big GEMM each.
// Prints the median milliseconds per iteration and the share of that time spent inside GEMM.
//
//   recurrence_bench [--threads N] [--iters N] [--warmup N] [--batch N] [--length N]
//                    [--input N] [--hidden N] [--dim N]
#include <cstdio>
#include <string>
#include <vector>

#include <loom.hpp>

#include "bench_common.hpp"

using namespace loom;

namespace {

struct Options {
    int threads = 1;
    int iters = 10;
    int warmup = 2;
    std::size_t batch = 32, length = 30, input = 500, hidden = 300, dim = 200;
};

// The forward + backward pass of a session: median wall and CPU milliseconds, and the GEMM share.
bench::Timing time_forward_backward(Session& session, const Bindings& in, const Options& o) {
    return bench::time_runs(
        o.warmup, o.iters,
        [&] {
            session.forward(in);
            session.backward();
        },
        /*measure_gemm=*/true);
}

// The seed's model on random "embeddings" of width dim; the loss is the cosine similarity.
bench::Timing bench_attention(const Options& o, Rng& rng) {
    Variable q = sequence::input_variable({o.dim}, "question");
    Variable a = sequence::input_variable({o.dim}, "answer");
    Parameter w_q = parameter({o.dim, 1}, glorot_normal(), "w_q");
    Parameter w_a = parameter({o.dim, 1}, glorot_normal(), "w_a");
    auto attention = [](const Variable& z) {
        Variable p = placeholder({1}, "p");
        Variable prev = element_select(sequence::is_first(z), constant(-1e30), past_value(p));
        Variable lcse = log_add_exp(z, prev);
        lcse.replace_placeholders({{p, lcse}});
        return exp(z - sequence::broadcast_as(sequence::last(lcse), z));
    };
    Variable attended_q = sequence::reduce_sum(attention(times(q, w_q)) * q);
    Variable attended_a = sequence::reduce_sum(attention(times(a, w_a)) * a);
    Session session({cosine_distance(attended_q, attended_a)}, {w_q, w_a});
    const std::vector<std::size_t> lengths(o.batch, o.length);
    Bindings in{{q, bench::random_sequences(lengths, o.dim, rng)}, {a, bench::random_sequences(lengths, o.dim, rng)}};
    return time_forward_backward(session, in, o);
}

// One gate: its input projection is computed outside the loop, the recurrent part inside.
struct Gate {
    Parameter w, u, b;
    Variable projected;  // times(x, w) + b over all steps at once
};

bench::Timing bench_lstm(const Options& o, Rng& rng) {
    Variable x = sequence::input_variable({o.input}, "x");
    Variable h_in = placeholder({o.hidden}, "h");
    Variable c_in = placeholder({o.hidden}, "c");
    Variable h_prev = past_value(h_in);
    Variable c_prev = past_value(c_in);
    std::vector<Parameter> params;
    auto gate = [&](const char* name) {
        Gate g{parameter({o.input, o.hidden}, glorot_uniform(), std::string("W_") + name),
               parameter({o.hidden, o.hidden}, glorot_uniform(), std::string("U_") + name),
               parameter({o.hidden}, zeros(), std::string("b_") + name),
               {}};
        g.projected = times(x, g.w) + g.b;
        params.insert(params.end(), {g.w, g.u, g.b});
        return g;
    };
    const Gate gi = gate("i"), gf = gate("f"), go = gate("o"), gg = gate("g");
    Variable i = sigmoid(gi.projected + times(h_prev, gi.u));
    Variable f = sigmoid(gf.projected + times(h_prev, gf.u));
    Variable out = sigmoid(go.projected + times(h_prev, go.u));
    Variable g = tanh(gg.projected + times(h_prev, gg.u));
    Variable c = f * c_prev + i * g;
    Variable h = out * tanh(c);
    h.replace_placeholders({{h_in, h}, {c_in, c}});
    // The loss is the sum of h over every sequence and step (Session seeds backward with ones).
    Session session({h}, params);
    const std::vector<std::size_t> lengths(o.batch, o.length);
    Bindings in{{x, bench::random_sequences(lengths, o.input, rng)}};
    return time_forward_backward(session, in, o);
}

int run(const Options& o) {
    set_blas_threads(o.threads);
    set_seed(1);
    Rng rng(1);
    std::printf(
        "loom recurrence_bench: forward+backward, float, batch %zu x length %zu, OpenBLAS threads %d, "
        "median of %d (after %d warm-up)\n",
        o.batch, o.length, o.threads, o.iters, o.warmup);
    const bench::Timing att = bench_attention(o, rng);
    auto print = [](const std::string& what, const bench::Timing& r) {
        std::printf("%-42s %9.3f ms/iter  (CPU %9.3f ms)  GEMM share %5.1f%%\n", what.c_str(), r.ms, r.cpu_ms,
                    100 * r.gemm_share);
    };
    print("attention (seed, dim " + std::to_string(o.dim) + "):", att);
    const bench::Timing lstm = bench_lstm(o, rng);
    print("lstm (primitives, input " + std::to_string(o.input) + ", hidden " + std::to_string(o.hidden) + "):", lstm);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Times forward + backward of the seed's attention loop and of an LSTM written from primitives"};
    bench::add_run_options(app, o.threads, "--iters", o.iters, "timed iterations (the median is printed)", o.warmup);
    bench::add_size(app, "--batch", o.batch, "sequences per batch", 1);
    bench::add_size(app, "--length", o.length, "steps per sequence", 1);
    bench::add_size(app, "--input", o.input, "LSTM input width");
    bench::add_size(app, "--hidden", o.hidden, "LSTM hidden size");
    bench::add_size(app, "--dim", o.dim, "attention: embedding width");
    CLI11_PARSE(app, argc, argv);
    return bench::report_errors([&] { return run(o); });
}
