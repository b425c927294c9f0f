// Independent plan steps run at once (set_inter_op_threads): the task-graph runner itself, and
// whole models whose values and gradients must equal the serial run's bit for bit, since the
// schedule keeps every gradient sum in serial order.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include <cblas.h>
#include <loom.hpp>

#include "core/gemm.hpp"
#include "core/packed_gemm.hpp"

#include "gradcheck.hpp"

using namespace loom;

namespace {
// n inter-op threads and OpenBLAS one thread per call, also for n = 1: a serial reference run with
// OpenBLAS's default threads would sum its products as OpenBLAS partitions them (on Zen 3's Haswell
// kernels not as one thread does), and "1 thread" would then mean whatever ran before the test.
// Restores the serial default when a test ends, also on failure.
struct InterOp {
    explicit InterOp(int n) {
        set_inter_op_threads(n);
        set_blas_threads(1);
    }
    ~InterOp() {
        set_inter_op_threads(1);
        set_blas_threads(1);
    }
};

// Two towers over two sequence inputs of their own lengths, each a BiLSTM then a Dense shared by
// both towers (its weight gets gradient from two steps that may run at once), joined by a cosine.
// Tiny by default; `wide` makes products big enough to be split between threads (share_parts).
struct Towers {
    std::size_t in, hidden, batch;
    Variable q, a;
    layers::Layer shared_dense, q_enc, a_enc;
    Variable loss;
    std::vector<Parameter> params;
    explicit Towers(bool wide = false)
        : in(wide ? 64 : 3),
          hidden(wide ? 256 : 5),
          batch(wide ? 48 : 4),
          q(sequence::input_variable({in}, "q")),
          a(sequence::input_variable({in}, "a")),
          shared_dense(layers::Dense(wide ? 256 : 4)),
          q_enc(layers::BiRecurrence(layers::LSTM(hidden), layers::LSTM(hidden))),
          a_enc(layers::BiRecurrence(layers::LSTM(hidden), layers::LSTM(hidden))) {
        Variable qv = sequence::reduce_sum(shared_dense(q_enc(q)));
        Variable av = sequence::reduce_sum(shared_dense(a_enc(a)));
        loss = cosine_distance(qv, av);
        params = shared_dense.parameters();
        layers::append_unique(params, q_enc.parameters());
        layers::append_unique(params, a_enc.parameters());
    }
    Bindings inputs() const {
        std::vector<std::size_t> q_lengths{4, 1, 6, 2}, a_lengths{7, 3, 2, 9};
        for (std::size_t i = 4; i < batch; ++i) q_lengths.push_back(1 + i % 5), a_lengths.push_back(1 + i % 7);
        return {{q, Value::sequences(testing::random_sequences({in}, q_lengths, 11))},
                {a, Value::sequences(testing::random_sequences({in}, a_lengths, 12))}};
    }
};

// The weights of Towers(wide) after `steps` Adam steps (rate 0.01) on `threads` inter-op threads.
std::vector<std::vector<float>> trained_weights(int threads, std::uint64_t seed, bool wide, int steps,
                                                const LearnerOptions& options = {}) {
    set_seed(seed);
    Towers m(wide);
    InterOp parallel(threads);
    Trainer trainer(m.loss, Variable(), adam(m.params, 0.01, 0.9, 0.999, 1e-8, options));
    for (int step = 0; step < steps; ++step) trainer.train_minibatch(m.inputs());
    std::vector<std::vector<float>> weights;
    for (const auto& p : m.params) weights.emplace_back(p.data().begin(), p.data().end());
    return weights;
}

// Runs f() as a task of a 2-thread task graph once the other thread is idle, so that work f
// shares (share_parts, and the products of gemm and gemm_rows built on it) is split. \return
// whether the other thread was idle when f started.
template <class F>
bool with_an_idle_thread(F f) {
    TaskGraph g;
    g.after = {{}, {0}};
    std::atomic<bool> idle{false};
    run_task_graph(g, 2, [&](int task, int) {
        if (task != 0) return;
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (idle_threads() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
        idle = idle_threads() > 0;
        f();
    });
    return idle;
}

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(u(gen));
    return v;
}
}  // namespace

TEST_CASE("run_task_graph runs every task once, after the tasks it waits for") {
    // A diamond and a chain: 0 -> {1, 2} -> 3, 4 -> 5.
    TaskGraph g;
    g.after = {{}, {0}, {0}, {1, 2}, {}, {4}};
    std::mutex m;
    std::vector<int> order;
    run_task_graph(g, 2, [&](int t, int worker) {
        CHECK(worker >= 0);
        CHECK(worker < 2);
        std::lock_guard lock(m);
        order.push_back(t);
    });
    REQUIRE(order.size() == 6);
    auto pos = [&](int t) { return std::find(order.begin(), order.end(), t) - order.begin(); };
    for (int t = 0; t < 6; ++t)
        for (int d : g.after[static_cast<std::size_t>(t)]) CHECK(pos(d) < pos(t));
}

TEST_CASE("run_task_graph rethrows a task's exception and starts nothing that waits for it") {
    TaskGraph g;
    g.after = {{}, {0}, {1}};
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH_AS(run_task_graph(g, 2,
                                        [&](int t, int) {
                                            ++ran;
                                            if (t == 1) throw UserError("task 1 failed");
                                        }),
                         "task 1 failed", UserError);
    CHECK(ran == 2);
    g.after = {{1}};
    CHECK_THROWS_AS(run_task_graph(g, 2, [](int, int) {}), InternalError);
}

TEST_CASE("set_inter_op_threads rejects fewer than one thread") {
    CHECK_THROWS_WITH_AS(set_inter_op_threads(0), doctest::Contains("at least 1"), UserError);
    CHECK(inter_op_threads() == 1);
}

TEST_CASE("two towers give the same values and gradients, bit for bit, on 1 and 2 threads") {
    set_seed(5);
    Towers m;
    const Bindings in = m.inputs();
    auto run = [&] {
        Session s({m.loss}, m.params);
        s.forward(in);
        s.backward();
        const Value loss = s.value(m.loss);
        std::vector<std::vector<float>> out{{loss.data<float>().begin(), loss.data<float>().end()}};
        for (const auto& p : m.params) {
            auto g = s.gradient(p).to_dense();
            out.emplace_back(g.begin(), g.end());
        }
        return out;
    };
    const auto serial = run();
    InterOp two(2);
    for (int repeat = 0; repeat < 5; ++repeat) CHECK(run() == serial);
}

TEST_CASE("gradients through parallel BiLSTM towers pass the finite-difference check on 2 threads") {
    set_seed(6);
    Towers m;
    InterOp two(2);
    testing::require_gradients("two towers, 2 threads", m.loss, m.inputs(), testing::as_variables(m.params));
}

TEST_CASE("a shape error inside a parallel step reaches the caller") {
    Variable x = sequence::input_variable({2}, "x");
    Variable y = sequence::input_variable({2}, "y");
    Variable bad = sequence::reduce_sum(x) + sequence::reduce_sum(y);
    InterOp two(2);
    Session s({bad});
    // Bound with different batch sizes: the error names the inputs, whichever thread hits it.
    CHECK_THROWS_AS(s.forward({{x, Value::sequences(testing::random_sequences({2}, {1, 2}, 1))},
                               {y, Value::sequences(testing::random_sequences({2}, {1, 2, 3}, 2))}}),
                    UserError);
}

TEST_CASE("a training session frees values no backward reads, with unchanged gradients") {
    set_seed(7);
    Towers m;
    const Bindings in = m.inputs();
    auto plan = compile({m.loss});
    std::vector<int> wrt;
    for (const auto& p : m.params) wrt.push_back(plan->find(p.node().get()));
    Execution<float> keep_all(plan), planned(plan);
    planned.plan_backward(wrt);
    for (auto* ex : {&keep_all, &planned}) {
        ex->bind(in);
        ex->forward();
        ex->backward(wrt);
    }
    // Affine outputs, splices and LSTM cell outputs were freed during forward: fewer bytes at the peak.
    CHECK(planned.bytes_held() < keep_all.bytes_held());
    for (int w : wrt) {
        const auto a = keep_all.gradient_buffer(w), b = planned.gradient_buffer(w);
        CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
    }
    CHECK_THROWS_AS(planned.backward({wrt.front()}), InternalError);
    // The loss value (an output) is kept; an intermediate value freed by forward says so.
    CHECK_NOTHROW(planned.value(plan->outputs.front()));
    int freed = -1;  // an LSTM cell output: read by splice and the delay in forward only
    for (std::size_t i = 0; i < plan->nodes.size(); ++i)
        if (plan->nodes[i].node->label().find("lstm_cell_output") != std::string::npos) freed = static_cast<int>(i);
    REQUIRE(freed >= 0);
    CHECK_THROWS_WITH_AS(planned.value(freed), doctest::Contains("request it as an output"), InternalError);
}

TEST_CASE("training on 2 threads (steps and parameter updates at once) equals training on 1, bit for bit") {
    // Without clipping each parameter is updated as soon as its gradient is final; with clipping
    // after the whole backward.
    LearnerOptions options;
    SUBCASE("no clipping") {}
    SUBCASE("clipping") { options.gradient_clipping_norm = 0.05; }
    const auto serial = trained_weights(1, 8, false, 3, options);
    CHECK(trained_weights(2, 8, false, 3, options) == serial);
}

TEST_CASE("a session's gradients stay right pass after pass as the weights change") {
    // Pooled buffers, freed values and row gradients are reused across passes: each pass must
    // still give what a fresh evaluation gives.
    set_seed(9);
    Towers m;
    const Bindings in = m.inputs();
    Session s({m.loss}, m.params);
    for (int pass = 0; pass < 3; ++pass) {
        s.forward(in);
        s.backward();
        const ValueMap fresh = gradients(m.loss, in, testing::as_variables(m.params), DType::f32);
        for (const auto& p : m.params) {
            const auto g = s.gradient(p).to_dense();
            const Value& gv = fresh[p];
            const xt::xarray<float> expected = gv.data<float>();
            REQUIRE(g.size() == expected.size());
            for (std::size_t e = 0; e < g.size(); ++e) CHECK(g[e] == doctest::Approx(expected.data()[e]).epsilon(1e-5));
        }
        for (const auto& p : m.params)  // a different point for the next pass
            for (auto& w : p.data()) w = 0.9f * w + 0.01f;
    }
}

TEST_CASE("critical_path_priority: a task's cost plus its most expensive chain of waiting tasks") {
    // 0 -> 1 -> 3, 0 -> 2 -> 3, 4 alone; costs 1, 5, 2, 1, 3.
    TaskGraph g;
    g.after = {{}, {0}, {0}, {1, 2}, {}};
    const auto p = critical_path_priority(g, {1, 5, 2, 1, 3});
    CHECK(p == std::vector<double>{7, 6, 3, 1, 3});
    CHECK_THROWS_AS(critical_path_priority(g, {1.0}), InternalError);
}

TEST_CASE("share_parts runs every part once, on the idle thread too, and returns when all ran") {
    InterOp two(2);  // and OpenBLAS one thread per call, as a program running products on two threads has it
    std::vector<std::atomic<int>> runs(64);
    std::mutex m;
    std::set<std::thread::id> threads;
    auto part = [&](std::size_t i) {
        ++runs[i];
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard lock(m);
        threads.insert(std::this_thread::get_id());
    };
    CHECK(with_an_idle_thread([&] {
        share_parts(runs.size(), part);
        for (const auto& r : runs) CHECK(r.load() == 1);  // all done before share_parts returned
    }));
    CHECK(threads.size() == 2);
    // With one inter-op thread every part runs here, in order.
    set_inter_op_threads(1);
    std::vector<std::size_t> order;
    auto in_order = [&](std::size_t i) { order.push_back(i); };
    share_parts(5, in_order);
    CHECK(order == std::vector<std::size_t>{0, 1, 2, 3, 4});
}

TEST_CASE_TEMPLATE("gemm split between threads gives the bits of one thread", T, float, double) {
    InterOp two(2);  // and OpenBLAS one thread per call, as a program running products on two threads has it
    // By columns (n >= m) and by rows, every transposition, an n that is no multiple of 32.
    struct Case {
        std::size_t m, n, k;
    };
    for (const Case c : {Case{64, 1024, 256}, Case{48, 1000, 300}, Case{1000, 256, 64}, Case{700, 130, 520}})
        for (int trans = 0; trans < 4; ++trans) {
            const bool ta = trans & 1, tb = trans & 2;
            CAPTURE(c.m);
            CAPTURE(c.n);
            CAPTURE(trans);
            const auto a = random_values<T>(c.m * c.k, 1), b = random_values<T>(c.k * c.n, 2);
            const auto c0 = random_values<T>(c.m * c.n, 3);
            const std::size_t lda = ta ? c.m : c.k, ldb = tb ? c.k : c.n;
            std::vector<T> one = c0, split = c0;
            set_inter_op_threads(1);  // the reference in one call, never split
            gemm(ta, tb, c.m, c.n, c.k, T(0.75), a.data(), lda, b.data(), ldb, T(0.5), one.data(), c.n);
            set_inter_op_threads(2);
            CHECK(with_an_idle_thread([&] {
                gemm(ta, tb, c.m, c.n, c.k, T(0.75), a.data(), lda, b.data(), ldb, T(0.5), split.data(), c.n);
            }));
            CHECK(split == one);
        }
}

// OpenBLAS's own threads hand work over through synchronization ThreadSanitizer cannot see (the
// library is not instrumented): under TSan, a test that runs them reports races that are not there.
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

TEST_CASE("with OpenBLAS threads inside each product, gemm is left whole: the bits of one call" *
          doctest::skip(kThreadSanitizer)) {
    // OpenBLAS's threaded dgemm partitions a product by its own sizes, so a part of a split product
    // need not sum as the whole does (it did not at these shapes, by rows and by columns).
    InterOp two(2);
    set_blas_threads(2);
    for (const auto& mnk : {std::array<std::size_t, 3>{700, 130, 520}, std::array<std::size_t, 3>{48, 1000, 300}}) {
        const std::size_t m = mnk[0], n = mnk[1], k = mnk[2];
        CAPTURE(m);
        const auto a = random_values<double>(m * k, 7), b = random_values<double>(k * n, 8);
        std::vector<double> one(m * n), shared(m * n);
        gemm(false, false, m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, one.data(), n);
        CHECK(with_an_idle_thread(
            [&] { gemm(false, false, m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, shared.data(), n); }));
        CHECK(shared == one);
    }
}

namespace {
std::size_t threads_of_this_process() {
    return static_cast<std::size_t>(
        std::distance(std::filesystem::directory_iterator("/proc/self/task"), std::filesystem::directory_iterator{}));
}
}  // namespace

TEST_CASE("set_blas_threads(1) ends OpenBLAS's idle threads, and a product on several starts them again" *
          doctest::skip(kThreadSanitizer)) {
    // Left idle, they spin on sched_yield for a while after their last task, taking a core from the
    // inter-op threads.
    const std::size_t m = 300, n = 400, k = 500;
    const auto a = random_values<double>(m * k, 9), b = random_values<double>(k * n, 10);
    std::vector<double> first(m * n), again(m * n);
    set_blas_threads(1);
    const std::size_t before = threads_of_this_process();
    set_blas_threads(2);
    gemm(false, false, m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, first.data(), n);
    const std::size_t with_blas_threads = threads_of_this_process();
    set_blas_threads(1);
    CHECK(threads_of_this_process() == before);
    // OpenBLAS's pthreads build (Debian's default) started a thread beside this one for the product.
    if (openblas_get_parallel() == 1 && std::thread::hardware_concurrency() > 1) CHECK(with_blas_threads > before);
    set_blas_threads(2);
    gemm(false, false, m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, again.data(), n);
    CHECK(threads_of_this_process() == with_blas_threads);
    CHECK(again == first);
    set_blas_threads(1);
}

TEST_CASE_TEMPLATE("gemm_rows split between threads gives the bits of one thread", T, float, double) {
    InterOp two(2);  // and OpenBLAS one thread per call, as a program running products on two threads has it
    for (const std::size_t n : {1024, 1000}) {
        CAPTURE(n);
        const std::size_t m = 64, k = 256;
        const auto a = random_values<T>(m * k, 4), b = random_values<T>(k * n, 5), d = random_values<T>(m * n, 6);
        std::vector<T> packed(packed_size<T>(k, n));
        pack_right(false, k, n, b.data(), n, packed.data());
        std::vector<T> one(m * n), split(m * n);
        auto rows = [&](std::vector<T>& c) {
            std::vector<const T*> a_rows, d_rows;
            std::vector<T*> c_rows;
            for (std::size_t i = 0; i < m; ++i)  // in reverse: rows lie anywhere
                a_rows.push_back(a.data() + (m - 1 - i) * k), d_rows.push_back(d.data() + i * n),
                    c_rows.push_back(c.data() + i * n);
            gemm_rows_add(m, n, k, a_rows.data(), packed.data(), d_rows.data(), c_rows.data());
        };
        rows(one);
        CHECK(with_an_idle_thread([&] { rows(split); }));
        CHECK(split == one);
    }
}

TEST_CASE_TEMPLATE("gemm_blocked_rows and gemm_blocked_rows_tn split between threads give the bits of one thread", T,
                   float, double) {
    InterOp two(2);  // and OpenBLAS one thread per call, as a program running products on two threads has it
    struct Case {
        std::size_t m, n, k;
    };
    // By rows (m > n) and by columns, an n that is no multiple of 32, k past one block of 256.
    for (const Case c : {Case{700, 130, 520}, Case{64, 1000, 300}})
        for (const bool trans_b : {false, true}) {
            CAPTURE(c.m);
            CAPTURE(trans_b);
            const auto a = random_values<T>(c.m * c.k, 9), b = random_values<T>(c.k * c.n, 10);
            const auto d = random_values<T>(c.m * c.n, 11), g = random_values<T>(c.m * c.n, 12);
            // Rows where they lie: A's in reverse order, C's and the addend's apart.
            std::vector<const T*> a_rows, d_rows, g_rows;
            for (std::size_t i = 0; i < c.m; ++i) {
                a_rows.push_back(a.data() + (c.m - 1 - i) * c.k);
                d_rows.push_back(d.data() + i * c.n);
                g_rows.push_back(g.data() + i * c.n);
            }
            auto product = [&](std::vector<T>& out) {  // C = A op(B) + D
                std::vector<T*> c_rows;
                for (std::size_t i = 0; i < c.m; ++i) c_rows.push_back(out.data() + i * c.n);
                gemm_blocked_rows<T>(trans_b, c.m, c.n, c.k, T(0.75), a_rows.data(), b.data(), trans_b ? c.k : c.n,
                                     T(1), c_rows.data(), d_rows.data());
            };
            // W' [k, n] = 0.5 W' + A^T G over the m rows, as a weight's gradient is taken
            auto gradient = [&](std::vector<T>& out) {
                gemm_blocked_rows_tn<T>(c.k, c.n, c.m, T(1), a_rows.data(), g_rows.data(), T(0.5), out.data(), c.n);
            };
            std::vector<T> one(c.m * c.n), split(c.m * c.n);
            std::vector<T> w_one = random_values<T>(c.k * c.n, 13), w_split = w_one;
            set_inter_op_threads(1);  // the reference, never split
            product(one);
            gradient(w_one);
            set_inter_op_threads(2);
            CHECK(with_an_idle_thread([&] { product(split); }));
            CHECK(with_an_idle_thread([&] { gradient(w_split); }));
            CHECK(split == one);
            CHECK(w_split == w_one);
        }
}

TEST_CASE("a model whose products are split between threads trains the same on 1 and 2 threads, bit for bit") {
    const auto serial = trained_weights(1, 10, true, 2);
    CHECK(trained_weights(2, 10, true, 2) == serial);
}

TEST_CASE("one-query attention split among threads gives the values of one thread, bit for bit") {
    // 512 rows over a cache of 24 keys and the step's own: enough work for the rows to be split.
    const std::size_t rows = 512, cached = 24, d = 64;
    Variable q = input_variable({d}, "q"), key = input_variable({d}, "key"), value = input_variable({d}, "value");
    Variable keys = input_variable({any_size, d}, "keys"), values = input_variable({any_size, d}, "values");
    Variable out = attention(q, keys, values, {.heads = 4, .step_key = key, .step_value = value});
    auto batch = [](std::vector<std::size_t> shape, unsigned seed) {
        xt::xarray<float> a = xt::xarray<float>::from_shape(shape);
        const auto v = random_values<float>(a.size(), seed);
        std::copy(v.begin(), v.end(), a.begin());
        return Value::batch(std::move(a));
    };
    const Bindings in{{q, batch({rows, d}, 1)},
                      {key, batch({rows, d}, 2)},
                      {value, batch({rows, d}, 3)},
                      {keys, batch({rows, cached, d}, 4)},
                      {values, batch({rows, cached, d}, 5)}};
    set_inter_op_threads(1);
    const xt::xarray<float> one = evaluate({out}, in)[out].data<float>();
    InterOp two(2);
    xt::xarray<float> split;
    CHECK(with_an_idle_thread([&] { split = evaluate({out}, in)[out].data<float>(); }));
    CHECK(split == one);
}

namespace {

// Copies its input and notes the thread that ran it, after working for `busy` (a step as long as
// a real op's).
class NoteThread final : public OpBase<NoteThread> {
public:
    NoteThread(std::set<std::thread::id>* threads, std::mutex* mutex, std::chrono::microseconds busy)
        : threads_(threads), mutex_(mutex), busy_(busy) {}
    std::string name() const override { return "note_thread"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override { return in[0]; }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const auto until = std::chrono::steady_clock::now() + busy_;
        while (std::chrono::steady_clock::now() < until) {
        }
        std::copy_n(c.in[0].data, c.in[0].size(), c.out.data);
        const std::lock_guard lock(*mutex_);
        threads_->insert(std::this_thread::get_id());
    }
    template <class T>
    void bwd(const OpCall<T>&) const {}

private:
    std::set<std::thread::id>* threads_;
    std::mutex* mutex_;
    std::chrono::microseconds busy_;
};

// For each of 10 evaluations after the first, how many threads ran it: two independent chains of 6
// steps, each `busy` long.
std::vector<std::size_t> threads_of_passes(std::chrono::microseconds busy) {
    std::set<std::thread::id> threads;
    std::mutex mutex;
    Variable x = input_variable({4}, "x"), y = input_variable({4}, "y");
    Variable chains[2] = {x, y};
    for (Variable& v : chains)
        for (int i = 0; i < 6; ++i)
            v = Variable(apply_op(std::make_shared<NoteThread>(&threads, &mutex, busy), {v.node()}, "note"));
    Session s({chains[0] + chains[1]});
    const Bindings in{{x, Value::batch(xt::xarray<float>::from_shape({2, 4}))},
                      {y, Value::batch(xt::xarray<float>::from_shape({2, 4}))}};
    s.forward(in);
    std::vector<std::size_t> counts;
    for (int pass = 0; pass < 10; ++pass) {
        threads.clear();
        s.forward(in);
        counts.push_back(threads.count(std::this_thread::get_id()) ? threads.size() : 0);  // 0: not here
    }
    return counts;
}

}  // namespace

TEST_CASE("a pass whose steps took microseconds runs them on the calling thread, longer steps on both threads") {
    // Handing a step to another thread costs more than a step of a few microseconds gains (a
    // generating step of a small model): after a pass measured them so, the steps run here alone.
    // A pass measured slow (the machine busy with other work) may be followed by one on both
    // threads: most passes, not all, are asserted.
    InterOp two(2);
    const auto short_steps = threads_of_passes(std::chrono::microseconds(3));
    CHECK(std::count(short_steps.begin(), short_steps.end(), 1u) >= 7);  // the calling thread alone
    const auto long_steps = threads_of_passes(std::chrono::microseconds(1000));
    CHECK(std::count(long_steps.begin(), long_steps.end(), 2u) >= 1);
}

namespace {

// y's values and the parameters' gradients after one forward and backward of `loss`.
std::vector<std::vector<float>> values_and_gradients(const Variable& loss, const Variable& y,
                                                     const std::vector<Parameter>& parameters, const Bindings& in) {
    Session s({loss, y}, parameters);
    s.forward(in);
    s.backward();
    const auto values = s.value(y).data<float>();
    std::vector<std::vector<float>> out{{values.begin(), values.end()}};
    for (const Parameter& p : parameters) {
        auto g = s.gradient(p).to_dense();
        out.emplace_back(g.begin(), g.end());
    }
    return out;
}

// run() on 1 inter-op thread, then on 2 with the idle one taking part: the same bits.
template <class Run>
void check_the_bits_of_one_thread(Run run) {
    set_inter_op_threads(1);
    const auto one = run();
    InterOp two(2);
    decltype(run()) split;
    CHECK(with_an_idle_thread([&] { split = run(); }));
    CHECK(split == one);
}

}  // namespace

TEST_CASE("attention over sequences shared among threads by item and head: the bits of one thread") {
    // Causal self-attention with dropout on the weights (training mode) over ragged sequences, one
    // past a block of query rows: the pairs of an item and a head run on either thread, each
    // writing its own rows and columns of the output and of the three gradients.
    const std::size_t d = 32;
    set_seed(5);
    Variable x = sequence::input_variable({d}, "x");
    Parameter wq = parameter(Shape{d, d}, glorot_uniform(), "wq"), wk = parameter(Shape{d, d}, glorot_uniform(), "wk");
    Parameter wv = parameter(Shape{d, d}, glorot_uniform(), "wv");
    const Bindings in{{x, Value::sequences(testing::random_sequences({d}, {150, 3, 1, 40, 77}, 8))}};
    check_the_bits_of_one_thread([&] {  // a graph of its own each time: it draws the seed's first mask
        Variable y = attention(times(x, wq), times(x, wk), times(x, wv),
                               {.heads = 4, .causal = true, .dropout = 0.2, .seed = 3});
        const TrainingScope training;
        return values_and_gradients(reduce_sum(sequence::reduce_sum(y * x)), y, {wq, wk, wv}, in);
    });
}

TEST_CASE("row-wise ops split among threads give the values and gradients of one thread, bit for bit") {
    // Ragged sequences of 256 wide rows, enough elements for relu, +, layer_norm and relu's backward
    // to be split; the padding rows lie between the real ones.
    const std::size_t d = 256;
    set_seed(3);
    Variable x = sequence::input_variable({d}, "x");
    Parameter w = parameter(Shape{d}, glorot_uniform(), "w");
    Parameter scale = parameter(Shape{d}, glorot_uniform(), "scale"), bias = parameter(Shape{d}, zeros(), "bias");
    Variable h = relu(x * w);
    Variable y = layer_norm(h + x, scale, bias);
    Variable loss = reduce_sum(sequence::reduce_sum(y * x));
    std::vector<std::size_t> lengths;
    for (std::size_t i = 0; i < 40; ++i) lengths.push_back(1 + (i * 7) % 29);
    const Bindings in{{x, Value::sequences(testing::random_sequences({d}, lengths, 21))}};
    check_the_bits_of_one_thread([&] { return values_and_gradients(loss, y, {w, scale, bias}, in); });
}

namespace {

layers::TransformerOptions generation_lm() {
    return {.model_dim = 32,
            .heads = 4,
            .feedforward_dim = 64,
            .dropout = 0.0,
            .decoder_layers = 2,
            .positions = layers::PositionalEncoding::learned,
            .max_positions = 12,
            .tie_embeddings = true,
            .scale_embedding = false,
            .name = "gpt"};
}

}  // namespace

TEST_CASE("generation in groups of items on 2 threads draws what 1 thread draws, callbacks one at a time") {
    layers::TransformerLM lm(13, generation_lm());
    std::mt19937_64 rng(2);
    std::normal_distribution<float> noise(0.0f, 0.4f);
    for (const Parameter& p : lm.parameters())
        for (float& x : p.data<float>()) x = noise(rng);
    std::vector<std::vector<std::size_t>> prompts;
    for (std::size_t n = 0; n < 11; ++n) prompts.push_back({n % 13, (3 * n + 1) % 13});
    // Sampling past the context (rounds), at int8 too, and greedy decoding.
    for (WeightPrecision weights : {WeightPrecision::float32, WeightPrecision::int8})
        for (bool sample : {true, false}) {
            layers::GenerateOptions o{.max_length = 30,
                                      .start_symbol = layers::no_symbol,
                                      .end_symbol = layers::no_symbol,
                                      .sample = sample,
                                      .seed = 5};
            o.context = 12;
            o.weights = weights;
            std::vector<std::vector<std::size_t>> seen(prompts.size());
            std::atomic<int> inside{0};
            bool overlapped = false;
            o.on_symbol = [&](std::size_t item, std::size_t symbol) {
                overlapped |= inside.fetch_add(1) != 0;
                seen.at(item).push_back(symbol);
                inside.fetch_sub(1);
            };
            layers::Generated one, two;
            {
                InterOp serial(1);
                one = layers::Generator(lm.decoder(), {}).generate(o, {.prompts = prompts});
            }
            const std::vector<std::vector<std::size_t>> seen_one = seen;
            for (auto& s : seen) s.clear();
            {
                InterOp parallel(2);
                two = layers::Generator(lm.decoder(), {}).generate(o, {.prompts = prompts});
            }
            REQUIRE(two.items.size() == prompts.size());
            for (std::size_t n = 0; n < prompts.size(); ++n) {
                CHECK(two.items[n][0].symbols == one.items[n][0].symbols);
                // The packed kernels compute a row alike in any batch; OpenBLAS (the portable
                // build's products at float) may sum a smaller batch otherwise.
                if (packed_gemm_vectorized())
                    CHECK(two.items[n][0].log_probability == one.items[n][0].log_probability);
                else
                    CHECK(two.items[n][0].log_probability == doctest::Approx(one.items[n][0].log_probability));
            }
            CHECK(seen == seen_one);  // each item's symbols to its own number, in order
            CHECK(!overlapped);
        }
}

TEST_CASE("generation in groups: weights from memory and few streams a thread make one group, its products shared") {
    // 4.7 M parameters: 18.9 MB in float (more than kWeightBytesFromMemory, 16 MiB), 9.4 MB in
    // bfloat16, 4.7 MB in int8 (more than kWidenedWeightBytes, 4 MiB).
    // Each group calls on_step before each of its passes: groups call it once a pass each.
    layers::TransformerLM lm(13, {.model_dim = 256,
                                  .heads = 4,
                                  .feedforward_dim = 1024,
                                  .dropout = 0.0,
                                  .decoder_layers = 6,
                                  .positions = layers::PositionalEncoding::learned,
                                  .max_positions = 12,
                                  .tie_embeddings = true,
                                  .scale_embedding = false,
                                  .name = "gpt"});
    InterOp parallel(2);
    // The on_step calls of drawing 3 symbols for `items` streams at `weights`.
    auto steps = [&](std::size_t items, WeightPrecision weights) {
        layers::GenerateOptions o{.max_length = 3, .start_symbol = 1, .end_symbol = layers::no_symbol};
        o.weights = weights, o.items = items;
        std::atomic<int> calls{0};
        o.on_step = [&](std::size_t) { ++calls; };
        layers::Generator(lm.decoder(), {}).generate(o);
        return calls.load();
    };
    const int one_group = steps(8, WeightPrecision::float32);  // 4 streams a thread over 18.9 MB
    CHECK(one_group == 3);
    {
        const Bf16ProductsScope widening(Bf16Products::never);
        CHECK(steps(8, WeightPrecision::int8) == 2 * one_group);  // 4.7 MB, in the last-level cache: groups
    }
    if (cpu_supports_bf16()) {
        // int8 through vdpbf16ps widens every weight at each read: from 4 MiB, one group
        const Bf16ProductsScope pairs(Bf16Products::always);
        CHECK(steps(8, WeightPrecision::int8) == one_group);
        CHECK(steps(8, WeightPrecision::bfloat16) == 2 * one_group);  // 9.4 MB, read as kept: groups
    }
    CHECK(steps(16, WeightPrecision::float32) == 2 * one_group);  // 8 streams a thread reuse each weight
}

TEST_CASE("generation in groups: a callback's exception in one group stops every group and reaches the caller") {
    layers::TransformerLM lm(13, generation_lm());
    const std::vector<std::vector<std::size_t>> prompts(9, std::vector<std::size_t>{1, 2});
    layers::GenerateOptions o{.max_length = 200,
                              .start_symbol = layers::no_symbol,
                              .end_symbol = layers::no_symbol,
                              .sample = true,
                              .seed = 1};
    o.context = 12;
    std::atomic<std::size_t> passes{0};
    o.on_step = [&](std::size_t) { ++passes; };
    // Item 0's group starts first (the lowest task first), alone or beside the other: either way
    // the other stops at its next pass, long before its 200 symbols.
    o.on_symbol = [&](std::size_t item, std::size_t) {
        if (item == 0) throw std::runtime_error("stop at the first item");
    };
    InterOp parallel(2);
    layers::Generator generator(lm.decoder(), {});
    CHECK_THROWS_WITH_AS(generator.generate(o, {.prompts = prompts}), "stop at the first item", std::runtime_error);
    CHECK(passes < 50);
    // The generator still works.
    o.on_symbol = nullptr;
    o.max_length = 3;
    CHECK(generator.generate(o, {.prompts = prompts}).items.size() == 9);
}
