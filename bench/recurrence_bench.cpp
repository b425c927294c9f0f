// Times forward + backward of two recurrences through loom::Session, the way a trainer runs them:
//   attention  the seed's attention loop (cumulative log-sum-exp closed through a placeholder)
//   lstm       an LSTM written from primitives: one loop carrying h and c, closed by two
//              placeholders; the input projections times(x, W) sit OUTSIDE the loop, so they run
//              once over all steps as one big GEMM each.
// Prints the median milliseconds per iteration and the share of that time spent inside GEMM.
//
//   recurrence_bench [--threads N] [--iters N] [--warmup N] [--batch N] [--length N]
//                    [--input N] [--hidden N] [--dim N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <loom.hpp>

using namespace loom;

namespace {

struct Options {
    int threads = 1;
    int iters = 10;
    int warmup = 2;
    std::size_t batch = 32, length = 30, input = 500, hidden = 300, dim = 200;
};

Options parse(int argc, char** argv) {
    Options o;
    auto number = [&](int& i) -> long {
        if (i + 1 >= argc) throw UserError(std::string("recurrence_bench: ") + argv[i] + " needs a number after it");
        char* end = nullptr;
        const long v = std::strtol(argv[++i], &end, 10);
        if (*end != '\0' || v < 0)
            throw UserError(std::string("recurrence_bench: '") + argv[i] + "' after " + argv[i - 1] +
                            " is not a non-negative integer");
        return v;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads")
            o.threads = int(number(i));
        else if (a == "--iters")
            o.iters = int(number(i));
        else if (a == "--warmup")
            o.warmup = int(number(i));
        else if (a == "--batch")
            o.batch = std::size_t(number(i));
        else if (a == "--length")
            o.length = std::size_t(number(i));
        else if (a == "--input")
            o.input = std::size_t(number(i));
        else if (a == "--hidden")
            o.hidden = std::size_t(number(i));
        else if (a == "--dim")
            o.dim = std::size_t(number(i));
        else
            throw UserError("recurrence_bench: unknown option '" + a +
                            "' (known: --threads --iters --warmup --batch --length --input --hidden --dim)");
    }
    if (o.iters < 1 || o.threads < 1 || o.batch < 1 || o.length < 1)
        throw UserError("recurrence_bench: --iters, --threads, --batch and --length must be at least 1");
    return o;
}

Value random_sequences(std::size_t n, std::size_t len, std::size_t dim, Rng& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<xt::xarray<float>> seqs;
    for (std::size_t i = 0; i < n; ++i) {
        xt::xarray<float> s = xt::zeros<float>({len, dim});
        for (auto& v : s) v = d(rng);
        seqs.push_back(std::move(s));
    }
    return Value::sequences(seqs);
}

struct Result {
    double median_ms = 0;      // wall clock
    double median_cpu_ms = 0;  // CPU time of the whole process (all threads): robust on a busy machine
    double gemm_share = 0;     // GEMM seconds / wall seconds over the timed iterations
};

double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size();
    return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

Result time_forward_backward(Session& session, const Bindings& in, const Options& o) {
    for (int i = 0; i < o.warmup; ++i) {
        session.forward(in);
        session.backward();
    }
    std::vector<double> ms, cpu_ms;
    double total = 0, in_gemm = 0;
    gemm_timing(true);
    for (int i = 0; i < o.iters; ++i) {
        gemm_reset_timing();
        const double cpu_start = cpu_seconds();
        const auto start = std::chrono::steady_clock::now();
        session.forward(in);
        session.backward();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ms.push_back(s * 1e3);
        cpu_ms.push_back((cpu_seconds() - cpu_start) * 1e3);
        total += s;
        in_gemm += gemm_seconds();
    }
    gemm_timing(false);
    return {median(ms), median(cpu_ms), total > 0 ? in_gemm / total : 0.0};
}

// The seed's model on random "embeddings" of width dim; the loss is the cosine similarity.
Result bench_attention(const Options& o, Rng& rng) {
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
    Bindings in{{q, random_sequences(o.batch, o.length, o.dim, rng)},
                {a, random_sequences(o.batch, o.length, o.dim, rng)}};
    return time_forward_backward(session, in, o);
}

// One gate: its input projection is computed outside the loop, the recurrent part inside.
struct Gate {
    Parameter w, u, b;
    Variable projected;  // times(x, w) + b over all steps at once
};

Result bench_lstm(const Options& o, Rng& rng) {
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
    Bindings in{{x, random_sequences(o.batch, o.length, o.input, rng)}};
    return time_forward_backward(session, in, o);
}

int run(int argc, char** argv) {
    const Options o = parse(argc, argv);
    set_blas_threads(o.threads);
    set_seed(1);
    Rng rng(1);
    std::printf(
        "loom recurrence_bench: forward+backward, float, batch %zu x length %zu, OpenBLAS threads %d, "
        "median of %d (after %d warm-up)\n",
        o.batch, o.length, o.threads, o.iters, o.warmup);
    const Result att = bench_attention(o, rng);
    auto print = [](const std::string& what, const Result& r) {
        std::printf("%-42s %9.3f ms/iter  (CPU %9.3f ms)  GEMM share %5.1f%%\n", what.c_str(), r.median_ms,
                    r.median_cpu_ms, 100 * r.gemm_share);
    };
    print("attention (seed, dim " + std::to_string(o.dim) + "):", att);
    const Result lstm = bench_lstm(o, rng);
    print("lstm (primitives, input " + std::to_string(o.input) + ", hidden " + std::to_string(o.hidden) + "):", lstm);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
