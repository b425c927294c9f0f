// Three micro-benchmarks behind the QA sample's figures (all float, forward + backward, median of
// --iters timed runs after --warmup untimed ones):
//   lstm       layers::Recurrence(layers::LSTM(hidden)) over batch x length x input, against the
//              same GEMM calls made directly with loom::gemm on buffers of the same shapes
//              (forward input projection, one recurrent GEMM per step, and backward dX and dW of
//              both); prints layer / GEMMs. The layer's input is x * s with s a [input] parameter of
//              ones, so the backward pass also computes dX, as it must below an embedding.
//   attention  the seed's log-sum-exp attention loop (qa::log_sum_exp_attention) against the same
//              function written with sequence::softmax, over sequences of random lengths
//              (--min-len..--max-len); prints loop / softmax, and checks both give the same values.
//   epoch      one training epoch of a small QA model on N pairs and on 2N pairs (the first N are
//              the same pairs); prints the time ratio and the real-token ratio (cost linear in
//              tokens <=> the two ratios agree).
//
//   micro_bench [--threads N] [--iters N] [--warmup N] [--only lstm|attention|epoch] [--smoke]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <loom.hpp>

#include "bench_common.hpp"
#include "model.hpp"

using namespace loom;

namespace {

struct Options {
    int threads = 1, iters = 20, warmup = 3;
    std::string only;
    // lstm
    std::size_t batch = 32, length = 30, input = 500, hidden = 300;
    // attention
    std::size_t att_batch = 32, min_len = 10, max_len = 40, dim = 200;
    // epoch
    std::size_t pairs = 2048, small = 64, epoch_repeats = 5;
};

// --smoke: tiny sizes; --iters, --warmup and --pairs given on the command line still win.
void use_smoke_sizes(Options& o, const CLI::App& app) {
    if (app.count("--iters") == 0) o.iters = 1;
    if (app.count("--warmup") == 0) o.warmup = 0;
    if (app.count("--pairs") == 0) o.pairs = 64;
    o.batch = 3, o.length = 4, o.input = 7, o.hidden = 5;
    o.att_batch = 3, o.min_len = 1, o.max_len = 5, o.dim = 6;
    o.small = 4, o.epoch_repeats = 1;
}

// Median milliseconds of f over o.iters runs after o.warmup.
bench::Timing time_ms(const Options& o, const std::function<void()>& f) {
    return bench::time_runs(o.warmup, o.iters, f);
}

void bench_lstm(const Options& o, Rng& rng) {
    const std::size_t B = o.batch, T = o.length, I = o.input, H = o.hidden, G = 4 * H, BT = B * T;
    Variable x = sequence::input_variable({I}, "x");
    Parameter s = parameter({I}, constant_initializer(1.0), "x_scale");
    layers::Layer lstm = layers::Recurrence(layers::LSTM(H));
    Variable y = lstm(x * s);
    auto params = lstm.parameters();
    params.push_back(s);
    Session session({y}, params);
    Bindings in{{x, bench::random_sequences(std::vector<std::size_t>(B, T), I, rng)}};
    const bench::Timing layer = time_ms(o, [&] {
        session.forward(in);
        session.backward();
    });

    // The GEMMs alone, as the peer README lists them (row-major, C = op(A) op(B)).
    std::normal_distribution<float> d(0.0f, 0.1f);
    auto buf = [&](std::size_t n) {
        std::vector<float> v(n);
        for (auto& e : v) e = d(rng);
        return v;
    };
    auto X = buf(BT * I), W = buf(I * G), U = buf(H * G), Z = buf(BT * G), Hs = buf(BT * H);
    auto dZ = buf(BT * G), dX = buf(BT * I), dW = buf(I * G), dU = buf(H * G), dH = buf(BT * H);
    const bench::Timing gemms = time_ms(o, [&] {
        gemm(false, false, BT, G, I, 1.0f, X.data(), I, W.data(), G, 0.0f, Z.data(), G);  // input projection
        for (std::size_t t = 0; t < T; ++t)  // h_{t-1} U, added to the step's gates
            gemm(false, false, B, G, H, 1.0f, Hs.data() + t * B * H, H, U.data(), G, 1.0f, Z.data() + t * B * G, G);
        for (std::size_t t = T; t-- > 0;) {  // backward through time: dh_{t-1} = dz_t U^T, dU += h_{t-1}^T dz_t
            gemm(false, true, B, H, G, 1.0f, dZ.data() + t * B * G, G, U.data(), G, 0.0f, dH.data() + t * B * H, H);
            gemm(true, false, H, G, B, 1.0f, Hs.data() + t * B * H, H, dZ.data() + t * B * G, G, 1.0f, dU.data(), G);
        }
        gemm(false, true, BT, I, G, 1.0f, dZ.data(), G, W.data(), G, 0.0f, dX.data(), I);  // dX = dZ W^T
        gemm(true, false, I, G, BT, 1.0f, X.data(), I, dZ.data(), G, 0.0f, dW.data(), G);  // dW = X^T dZ
    });
    // The same products as the layer makes them: the recurrent weight packed once per direction of
    // the pass and each step's product by the packed kernel (core/packed_gemm.hpp), dU as one GEMM
    // over all steps after the loop. Without AVX2 the layer runs these through gemm() as above.
    std::vector<float> packed(packed_size<float>(H, G) + packed_size<float>(G, H));
    std::vector<const float*> a_rows(B);
    std::vector<float*> c_rows(B);
    auto step_rows = [&](const float* a, std::size_t lda, float* c, std::size_t ldc) {
        for (std::size_t b = 0; b < B; ++b) {
            a_rows[b] = a + b * lda;
            c_rows[b] = c + b * ldc;
        }
    };
    const bench::Timing own = time_ms(o, [&] {
        gemm(false, false, BT, G, I, 1.0f, X.data(), I, W.data(), G, 0.0f, Z.data(), G);
        pack_right(false, H, G, U.data(), G, packed.data());
        for (std::size_t t = 0; t < T; ++t) {
            step_rows(Hs.data() + t * B * H, H, Z.data() + t * B * G, G);
            gemm_rows<float>(B, G, H, a_rows.data(), packed.data(), c_rows.data(), true);
        }
        float* packed_t = packed.data() + packed_size<float>(H, G);
        pack_right(true, G, H, U.data(), G, packed_t);
        for (std::size_t t = T; t-- > 0;) {
            step_rows(dZ.data() + t * B * G, G, dH.data() + t * B * H, H);
            gemm_rows<float>(B, H, G, a_rows.data(), packed_t, c_rows.data(), false);
        }
        gemm(true, false, H, G, BT, 1.0f, Hs.data(), H, dZ.data(), G, 0.0f, dU.data(), G);
        gemm(false, true, BT, I, G, 1.0f, dZ.data(), G, W.data(), G, 0.0f, dX.data(), I);
        gemm(true, false, I, G, BT, 1.0f, X.data(), I, dZ.data(), G, 0.0f, dW.data(), G);
    });
    const double gflop = 3.0 * 2.0 * double(BT) * double(G) * double(I + H) * 1e-9;
    std::printf("lstm: Recurrence(LSTM(%zu)) fwd+bwd, batch %zu x length %zu, input %zu\n", H, B, T, I);
    std::printf("  layer      %9.3f ms  (CPU %9.3f ms)  %6.1f GFLOP/s on %.2f GFLOP\n", layer.ms, layer.cpu_ms,
                gflop / layer.ms * 1e3, gflop);
    std::printf("  GEMMs only %9.3f ms  (CPU %9.3f ms)  %6.1f GFLOP/s\n", gemms.ms, gemms.cpu_ms,
                gflop / gemms.ms * 1e3);
    std::printf("  GEMMs as the layer makes them (packed recurrent weight, one dU GEMM) %9.3f ms  %6.1f GFLOP/s\n",
                own.ms, gflop / own.ms * 1e3);
    std::printf("  ratio layer / GEMMs = %.3f  (CPU time %.3f; target <= 1.15)\n", layer.ms / gemms.ms,
                layer.cpu_ms / gemms.cpu_ms);
    std::printf("  ratio layer / the layer's own GEMMs = %.3f  (CPU time %.3f)\n", layer.ms / own.ms,
                layer.cpu_ms / own.cpu_ms);
}

void bench_attention(const Options& o, Rng& rng) {
    std::uniform_int_distribution<std::size_t> len(o.min_len, o.max_len);
    std::vector<std::size_t> lengths;
    for (std::size_t i = 0; i < o.att_batch; ++i) lengths.push_back(len(rng));
    Variable x = sequence::input_variable({o.dim}, "x");
    Parameter s = parameter({o.dim}, constant_initializer(1.0), "x_scale");
    Parameter w = parameter({o.dim, 1}, glorot_normal(), "w");
    Variable xs = x * s;
    Variable seed_loop = qa::log_sum_exp_attention(xs, w);
    Variable native = sequence::reduce_sum(sequence::softmax(times(xs, w)) * xs);
    Session loop_session({seed_loop}, {s, w});
    Session softmax_session({native}, {s, w});
    Bindings in{{x, bench::random_sequences(lengths, o.dim, rng)}};
    const bench::Timing loop = time_ms(o, [&] {
        loop_session.forward(in);
        loop_session.backward();
    });
    const bench::Timing soft = time_ms(o, [&] {
        softmax_session.forward(in);
        softmax_session.backward();
    });
    const auto a = loop_session.value(seed_loop).tensor(), b = softmax_session.value(native).tensor();
    const double diff = xt::amax(xt::abs(a - b))();
    std::size_t tokens = 0;
    for (auto l : lengths) tokens += l;
    std::printf("attention: %zu sequences of lengths %zu-%zu (%zu steps), dim %zu, fwd+bwd\n", o.att_batch, o.min_len,
                o.max_len, tokens, o.dim);
    std::printf("  log-sum-exp loop   %9.3f ms  (CPU %9.3f ms)\n", loop.ms, loop.cpu_ms);
    std::printf("  sequence::softmax  %9.3f ms  (CPU %9.3f ms)  max |difference| of the outputs %.2g\n", soft.ms,
                soft.cpu_ms, diff);
    std::printf("  ratio loop / softmax = %.3f  (CPU time %.3f; target <= 1.5)\n", loop.ms / soft.ms,
                loop.cpu_ms / soft.cpu_ms);
}

void bench_epoch(const Options& o) {
    SyntheticQaOptions so;
    so.questions = o.pairs;  // 2 candidates each: 2 * pairs pairs, the first `pairs` are the N set
    so.candidates = 2;
    so.vocab = 2000;
    const QaData data = make_synthetic_qa(so);
    qa::ModelOptions mo;
    mo.vocab = so.vocab;
    mo.embed = mo.hidden = mo.dense = o.small;
    qa::Model model(mo);
    Trainer trainer(model.squared_loss, Variable(), adam(model.parameters(), 1e-3));
    // Batches of 32 pairs in data order (each batch half true, half wrong), built before timing.
    const std::size_t per = 32;
    std::vector<Bindings> batches;
    std::vector<std::size_t> batch_tokens;
    for (std::size_t start = 0; start + per <= data.pairs.size(); start += per) {
        std::vector<std::vector<std::size_t>> q, a;
        xt::xarray<float> labels = xt::zeros<float>({per, std::size_t{1}});
        std::size_t tok = 0;
        for (std::size_t k = 0; k < per; ++k) {
            const QaPair& p = data.pairs[start + k];
            q.push_back(bench::word_ids(p.question));
            a.push_back(bench::word_ids(p.answer));
            tok += q.back().size() + a.back().size();
            labels(k, 0) = float(p.label);
        }
        batches.push_back(Bindings{{model.question, Value::index_sequences(q)},
                                   {model.answer, Value::index_sequences(a)},
                                   {model.label, Value::batch(labels)}});
        batch_tokens.push_back(tok);
    }
    const std::size_t n1 = batches.size() / 2, n2 = 2 * n1;
    std::vector<double> c1, c2;
    auto epoch = [&](std::size_t n, std::vector<double>* cpu) {
        const double t0 = bench::wall_seconds(), c0 = bench::cpu_seconds();
        for (std::size_t i = 0; i < n; ++i) trainer.train_minibatch(batches[i]);
        if (cpu) cpu->push_back(bench::cpu_seconds() - c0);
        return bench::wall_seconds() - t0;
    };
    epoch(std::min<std::size_t>(n1, 4), nullptr);  // warm-up: buffers and plans
    std::vector<double> t1, t2;
    for (std::size_t r = 0; r < o.epoch_repeats; ++r) {  // interleaved, so machine noise hits both
        t1.push_back(epoch(n1, &c1));
        t2.push_back(epoch(n2, &c2));
    }
    std::size_t tok1 = 0, tok2 = 0;
    for (std::size_t i = 0; i < n2; ++i) (i < n1 ? tok1 : tok2) += batch_tokens[i];
    tok2 += tok1;
    const double m1 = bench::median(t1), m2 = bench::median(t2);
    std::printf("epoch: QA model embed/hidden/dense %zu, batch 32, median of %zu interleaved epochs\n", o.small,
                o.epoch_repeats);
    const double k1 = bench::median(c1), k2 = bench::median(c2);
    std::printf("  N  = %5zu pairs (%7zu tokens)  %8.3f s/epoch  (CPU %8.3f s)\n", n1 * per, tok1, m1, k1);
    std::printf("  2N = %5zu pairs (%7zu tokens)  %8.3f s/epoch  (CPU %8.3f s)\n", n2 * per, tok2, m2, k2);
    std::printf("  ratio time 2N / N = %.3f   (tokens ratio %.3f; time per token ratio %.3f; target <= 2.1)\n", m2 / m1,
                double(tok2) / double(tok1), (m2 / double(tok2)) / (m1 / double(tok1)));
}

int run(const Options& o) {
    set_blas_threads(o.threads);
    set_seed(1);
    Rng rng(1);
    std::printf("loom micro_bench: float, OpenBLAS threads %d, median of %d after %d warm-up\n", o.threads, o.iters,
                o.warmup);
    if (o.only.empty() || o.only == "lstm") bench_lstm(o, rng);
    if (o.only.empty() || o.only == "attention") bench_attention(o, rng);
    if (o.only.empty() || o.only == "epoch") bench_epoch(o);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    bool smoke = false;
    CLI::App app{"Micro-benchmarks behind the QA sample's figures: lstm, attention, epoch (see the source's header)"};
    bench::add_run_options(app, o.threads, "--iters", o.iters, "timed runs (the median is printed)", o.warmup);
    bench::add_size(app, "--pairs", o.pairs, "epoch: questions N (2 candidates each)", 64);
    app.add_option("--only", o.only, "run only this benchmark")->check(CLI::IsMember({"lstm", "attention", "epoch"}));
    app.add_flag("--smoke", smoke, "tiny sizes: checks the program runs (CTest)");
    CLI11_PARSE(app, argc, argv);
    if (smoke) use_smoke_sizes(o, app);
    return bench::report_errors([&] { return run(o); });
}
