// Values of the sequence ops on a batch of sequences of lengths 1, 3 and 7, each checked against a
// direct computation in the test (loops over the steps of one sequence at a time).
#include <doctest/doctest.h>

#include <cmath>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::random_sequences;

namespace {

const std::vector<std::size_t> lengths{1, 3, 7};

struct Batch {
    Variable x = sequence::input_variable({2}, "x");
    std::vector<xt::xarray<double>> seqs = random_sequences({2}, lengths, 42);
    Bindings in() const { return {{x, Value::sequences(seqs)}}; }
};

// A sequence (or expected value) [T, 1] from its steps.
xt::xarray<double> column(const std::vector<double>& steps) {
    xt::xarray<double> a = xt::zeros<double>({steps.size(), std::size_t{1}});
    for (std::size_t t = 0; t < steps.size(); ++t) a(t, 0) = steps[t];
    return a;
}

void check_close(const xt::xarray<double>& got, const xt::xarray<double>& want) {
    REQUIRE(got.shape() == want.shape());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got.data()[i] == doctest::Approx(want.data()[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("sequence::is_first and is_last mark the edges of each sequence") {
    Batch b;
    Variable f = sequence::is_first(b.x), l = sequence::is_last(b.x);
    auto out = evaluate({f, l}, b.in());
    for (std::size_t n = 0; n < lengths.size(); ++n) {
        auto fs = out[f].sequence<double>(n), ls = out[l].sequence<double>(n);
        REQUIRE(fs.shape() == std::vector<std::size_t>{lengths[n], 1});
        for (std::size_t t = 0; t < lengths[n]; ++t) {
            CHECK(fs(t, 0) == (t == 0 ? 1.0 : 0.0));
            CHECK(ls(t, 0) == (t + 1 == lengths[n] ? 1.0 : 0.0));
        }
    }
}

TEST_CASE("sequence::first and last pick one step per sequence, their gradient lands on it") {
    Batch b;
    Variable f = sequence::first(b.x), l = sequence::last(b.x);
    auto out = evaluate({f, l}, b.in());
    auto fb = out[f].rows<double>(), lb = out[l].rows<double>();
    REQUIRE(fb.shape() == std::vector<std::size_t>{3, 2});
    for (std::size_t n = 0; n < 3; ++n)
        for (std::size_t j = 0; j < 2; ++j) {
            CHECK(fb(n, j) == b.seqs[n](0, j));
            CHECK(lb(n, j) == b.seqs[n](lengths[n] - 1, j));
        }
    auto g = gradients(l, b.in(), {b.x});
    for (std::size_t n = 0; n < 3; ++n) {
        auto gs = g[b.x].sequence<double>(n);
        for (std::size_t t = 0; t < lengths[n]; ++t)
            for (std::size_t j = 0; j < 2; ++j) CHECK(gs(t, j) == (t + 1 == lengths[n] ? 1.0 : 0.0));
    }
}

TEST_CASE("sequence::slice keeps steps (begin, end) counted per sequence") {
    Batch b;
    b.seqs = random_sequences({2}, {2, 3, 7}, 5);
    struct Case {
        int begin, end;
    };
    // Lengths 2, 3, 7: none of these ranges empties a sequence; ends past a sequence are clipped.
    for (Case k : {Case{0, 1}, Case{1, 0}, Case{-1, 0}, Case{-2, 0}, Case{0, 2}, Case{1, 1000}, Case{0, -1},
                   Case{-5, 0}, Case{1, 2}, Case{-3, -1}}) {
        CAPTURE(k.begin);
        CAPTURE(k.end);
        Variable s = sequence::slice(b.x, k.begin, k.end);
        CHECK(s.axis().is_sequence());
        CHECK(s.axis().id != b.x.axis().id);  // a new sequence axis
        auto out = evaluate({s}, b.in());
        for (std::size_t n = 0; n < 3; ++n) {
            const long L = static_cast<long>(b.seqs[n].shape()[0]);
            auto norm = [&](long i) { return std::clamp(i < 0 ? L + i : i, 0L, L); };
            const long lo = norm(k.begin), hi = k.end == 0 ? L : norm(k.end);
            auto got = out[s].sequence<double>(n);
            REQUIRE(got.shape()[0] == static_cast<std::size_t>(hi - lo));
            for (long t = lo; t < hi; ++t)
                for (std::size_t j = 0; j < 2; ++j) CHECK(got(t - lo, j) == b.seqs[n](t, j));
        }
    }
    // Gradient: ones on the kept steps, zero elsewhere.
    auto g = gradients(sequence::slice(b.x, -2, -1), b.in(), {b.x});
    for (std::size_t n = 0; n < 3; ++n) {
        auto gs = g[b.x].sequence<double>(n);
        const std::size_t L = b.seqs[n].shape()[0];
        for (std::size_t t = 0; t < L; ++t) CHECK(gs(t, 0) == (t + 2 == L ? 1.0 : 0.0));
    }
}

TEST_CASE("sequence::slice that empties a sequence is a UserError naming the op and the sequence") {
    Batch b;  // lengths 1, 3, 7: dropping the first step empties sequence 0
    Variable s = sequence::slice(b.x, 1, 0);
    CHECK_THROWS_WITH_AS(evaluate({s}, b.in()), doctest::Contains("sequence::slice"), UserError);
    CHECK_THROWS_WITH_AS(evaluate({s}, b.in()), doctest::Contains("sequence 0"), UserError);
    CHECK_THROWS_AS(sequence::slice(b.x, 3, 2), UserError);  // empty for every sequence: caught when built
    // A range reaching before the start is clipped: the length-1 sequence keeps its one step.
    Variable tail = sequence::slice(b.x, -2, 0);
    auto out = evaluate({tail}, b.in());
    check_close(out[tail].sequence<double>(0), b.seqs[0]);
    CHECK(out[tail].sequence<double>(2).shape()[0] == 2);
}

TEST_CASE("sequence::broadcast_as repeats a per-sequence value on every step") {
    Batch b;
    Variable v = input_variable({2}, "v");
    xt::xarray<double> rows = {{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}};
    Variable y = sequence::broadcast_as(v, b.x);
    Bindings in = b.in();
    in[v] = Value::batch(rows);
    auto out = evaluate({y}, in);
    for (std::size_t n = 0; n < 3; ++n) {
        auto s = out[y].sequence<double>(n);
        REQUIRE(s.shape()[0] == lengths[n]);
        for (std::size_t t = 0; t < lengths[n]; ++t)
            for (std::size_t j = 0; j < 2; ++j) CHECK(s(t, j) == rows(n, j));
    }
    // d(sum)/dv = the number of steps of each sequence.
    auto g = gradients(y, in, {v});
    auto gv = g[v].rows<double>();
    for (std::size_t n = 0; n < 3; ++n) CHECK(gv(n, 0) == static_cast<double>(lengths[n]));
}

TEST_CASE("sequence reductions, softmax and length over each sequence's own steps") {
    Batch b;
    Variable sum = sequence::reduce_sum(b.x), mx = sequence::reduce_max(b.x), mean = sequence::reduce_mean(b.x);
    Variable sm = sequence::softmax(b.x), len = sequence::length(b.x);
    auto out = evaluate({sum, mx, mean, sm, len}, b.in());
    xt::xarray<double> want_sum = xt::zeros<double>({3, 2}), want_max = xt::zeros<double>({3, 2});
    for (std::size_t n = 0; n < 3; ++n) {
        auto soft = out[sm].sequence<double>(n);
        for (std::size_t j = 0; j < 2; ++j) {
            double s = 0, m = -1e300, z = 0;
            for (std::size_t t = 0; t < lengths[n]; ++t) {
                s += b.seqs[n](t, j);
                m = std::max(m, b.seqs[n](t, j));
            }
            for (std::size_t t = 0; t < lengths[n]; ++t) z += std::exp(b.seqs[n](t, j));
            want_sum(n, j) = s;
            want_max(n, j) = m;
            CHECK(out[mean].rows<double>()(n, j) == doctest::Approx(s / static_cast<double>(lengths[n])));
            for (std::size_t t = 0; t < lengths[n]; ++t)
                CHECK(soft(t, j) == doctest::Approx(std::exp(b.seqs[n](t, j)) / z).epsilon(1e-12));
        }
        CHECK(out[len].rows<double>()(n, 0) == static_cast<double>(lengths[n]));
    }
    check_close(out[sum].rows<double>(), want_sum);
    check_close(out[mx].rows<double>(), want_max);
    // A length-1 sequence: softmax is exactly 1.
    CHECK(out[sm].sequence<double>(0)(0, 0) == 1.0);
}

TEST_CASE("sequence::reduce_max gives its gradient to the arg max step only") {
    Variable x = sequence::input_variable({1}, "x");
    std::vector<xt::xarray<double>> seqs{column({2.0}), column({1.0, 5.0, 3.0}), column({-1.0, -4.0, -0.5, -2.0})};
    auto g = gradients(sequence::reduce_max(x), {{x, Value::sequences(seqs)}}, {x});
    check_close(g[x].sequence<double>(0), column({1.0}));
    check_close(g[x].sequence<double>(1), column({0.0, 1.0, 0.0}));
    check_close(g[x].sequence<double>(2), column({0.0, 0.0, 1.0, 0.0}));
}

TEST_CASE("sequence::gather keeps the steps where the condition is non-zero") {
    Batch b;
    // Keep the first and last step of each sequence (one step for a length-1 sequence).
    Variable keep = sequence::is_first(b.x) + sequence::is_last(b.x);
    Variable gsel = sequence::gather(b.x, keep);
    auto out = evaluate({gsel}, b.in());
    for (std::size_t n = 0; n < 3; ++n) {
        auto s = out[gsel].sequence<double>(n);
        const std::size_t L = lengths[n];
        std::vector<std::size_t> kept{0};
        if (L > 1) kept.push_back(L - 1);
        REQUIRE(s.shape()[0] == kept.size());
        for (std::size_t k = 0; k < kept.size(); ++k)
            for (std::size_t j = 0; j < 2; ++j) CHECK(s(k, j) == b.seqs[n](kept[k], j));
    }
    // Gradient: one on each kept step, zero elsewhere.
    auto g = gradients(gsel, b.in(), {b.x});
    for (std::size_t n = 0; n < 3; ++n) {
        auto gs = g[b.x].sequence<double>(n);
        for (std::size_t t = 0; t < lengths[n]; ++t) CHECK(gs(t, 1) == ((t == 0 || t + 1 == lengths[n]) ? 1.0 : 0.0));
    }
}

TEST_CASE("sequence::gather with a data-dependent condition, and an error when it keeps nothing") {
    Variable x = sequence::input_variable({1}, "x");
    std::vector<xt::xarray<double>> seqs{column({2.0}), column({-1.0, 5.0, 3.0}), column({-1.0, 4.0, -0.5, 2.0, 0.0})};
    Variable kept = sequence::gather(x, greater(x, constant(0.0)));
    auto out = evaluate({kept}, {{x, Value::sequences(seqs)}});
    check_close(out[kept].sequence<double>(0), column({2.0}));
    check_close(out[kept].sequence<double>(1), column({5.0, 3.0}));
    check_close(out[kept].sequence<double>(2), column({4.0, 2.0}));
    seqs[1] = column({-1.0, -2.0});
    CHECK_THROWS_WITH_AS(evaluate({kept}, {{x, Value::sequences(seqs)}}), doctest::Contains("sequence 1"), UserError);
    CHECK_THROWS_WITH_AS(evaluate({kept}, {{x, Value::sequences(seqs)}}), doctest::Contains("sequence::gather"),
                         UserError);
}

TEST_CASE("sequence::unpack gives (N, T_max, sample) padded with the padding value, and a mask") {
    Batch b;
    auto u = sequence::unpack(b.x, -7.0);
    auto out = evaluate({u.data, u.mask}, b.in());
    auto d = out[u.data].rows<double>(), m = out[u.mask].rows<double>();
    REQUIRE(d.shape() == std::vector<std::size_t>{3, 7, 2});
    REQUIRE(m.shape() == std::vector<std::size_t>{3, 7});
    for (std::size_t n = 0; n < 3; ++n)
        for (std::size_t t = 0; t < 7; ++t) {
            CHECK(m(n, t) == (t < lengths[n] ? 1.0 : 0.0));
            for (std::size_t j = 0; j < 2; ++j) CHECK(d(n, t, j) == (t < lengths[n] ? b.seqs[n](t, j) : -7.0));
        }
    // Downstream ops see the run-time shape; the gradient reaches the real steps only.
    Variable y = u.data * 3.0;
    auto g = gradients(y, b.in(), {b.x});
    for (std::size_t n = 0; n < 3; ++n) {
        auto gs = g[b.x].sequence<double>(n);
        for (std::size_t t = 0; t < lengths[n]; ++t) CHECK(gs(t, 0) == 3.0);
    }
    // A batch of shorter sequences gives a shorter T_max from the same graph.
    std::vector<xt::xarray<double>> short_seqs{b.seqs[0], b.seqs[1]};
    auto out2 = evaluate({u.data, y}, {{b.x, Value::sequences(short_seqs)}});
    CHECK(out2[u.data].rows<double>().shape() == std::vector<std::size_t>{2, 3, 2});
    CHECK(out2[y].rows<double>()(1, 2, 1) == doctest::Approx(3.0 * b.seqs[1](2, 1)));
}

TEST_CASE("static reductions and softmax run over unpack's run-time T_max axis") {
    Batch b;
    auto u = sequence::unpack(b.x, 0.0);
    Variable total = reduce_sum(u.data, 0);  // over T_max: padding adds 0
    Variable peak = reduce_max(u.mask, 0);   // every sequence has a first step
    Variable weights = softmax(u.data, 0);   // over T_max, padding included (the user's choice)
    auto out = evaluate({total, peak, weights}, b.in());
    const auto t = out[total].rows<double>(), p = out[peak].rows<double>(), w = out[weights].rows<double>();
    REQUIRE(t.shape() == std::vector<std::size_t>{3, 1, 2});
    REQUIRE(w.shape() == std::vector<std::size_t>{3, 7, 2});
    for (std::size_t n = 0; n < 3; ++n) {
        CHECK(p(n, 0) == 1.0);
        for (std::size_t j = 0; j < 2; ++j) {
            double sum = 0, z = 0;
            for (std::size_t k = 0; k < 7; ++k) z += std::exp(k < lengths[n] ? b.seqs[n](k, j) : 0.0);
            for (std::size_t k = 0; k < lengths[n]; ++k) sum += b.seqs[n](k, j);
            CHECK(t(n, 0, j) == doctest::Approx(sum).epsilon(1e-12));
            CHECK(w(n, 0, j) == doctest::Approx(std::exp(b.seqs[n](0, j)) / z).epsilon(1e-12));
        }
    }
    // d(sum over T_max)/dx is 1 on every real step.
    auto g = gradients(total, b.in(), {b.x});
    for (std::size_t n = 0; n < 3; ++n)
        for (std::size_t k = 0; k < lengths[n]; ++k) CHECK(g[b.x].sequence<double>(n)(k, 1) == 1.0);
}
