// Attention's math in core/: rows read where they lie (core/row_view.hpp), one query over every head
// at once, and one head's forward and backward a block of queries at a time
// (core/attention_product.hpp), each against a plain loop in double.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/attention_product.hpp"
#include "core/quantized_gemm.hpp"
#include "core/row_view.hpp"

namespace {

using loom::RowView;
using loom::attention_detail::HeadProduct;
using loom::attention_detail::Rows;
using loom::attention_detail::WeightDrops;

// One head's attention by its formula, row by row: O = P V with P = softmax(Q K^T * scale) over each
// row's visible keys, and its gradients dQ = dS K, dK = dS^T Q, dV = P^T dO with
// dS = P * (dP - rowsum(P * dP)) * scale, dP = dO V^T. Matrices row-major and dense.
struct Reference {
    std::vector<double> o, dq, dk, dv;
};

Reference head_by_formula(std::size_t lq, std::size_t lk, std::size_t d, bool causal, const std::vector<double>& q,
                          const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& dout) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    Reference r{std::vector<double>(lq * d), std::vector<double>(lq * d), std::vector<double>(lk * d),
                std::vector<double>(lk * d)};
    for (std::size_t i = 0; i < lq; ++i) {
        const std::size_t seen = causal ? std::min(lk, i + 1) : lk;
        std::vector<double> p(seen), dp(seen);
        double top = -1e300, sum = 0;
        for (std::size_t j = 0; j < seen; ++j) {
            for (std::size_t c = 0; c < d; ++c) p[j] += q[i * d + c] * k[j * d + c] * scale;
            top = std::max(top, p[j]);
        }
        for (double& x : p) sum += x = std::exp(x - top);
        for (double& x : p) x /= sum;
        double dot = 0;
        for (std::size_t j = 0; j < seen; ++j) {
            for (std::size_t c = 0; c < d; ++c) {
                r.o[i * d + c] += p[j] * v[j * d + c];
                dp[j] += dout[i * d + c] * v[j * d + c];
                r.dv[j * d + c] += p[j] * dout[i * d + c];
            }
            dot += p[j] * dp[j];
        }
        for (std::size_t j = 0; j < seen; ++j) {
            const double ds = p[j] * (dp[j] - dot) * scale;
            for (std::size_t c = 0; c < d; ++c) {
                r.dq[i * d + c] += ds * k[j * d + c];
                r.dk[j * d + c] += ds * q[i * d + c];
            }
        }
    }
    return r;
}

}  // namespace

TEST_CASE("RowView: rows at a stride, through pages, and a last row of its own") {
    // A table of 5 rows of 3 elements, stride 4 (one element between rows unused).
    const std::vector<double> table{0, 1, 2, -1, 10, 11, 12, -1, 20, 21, 22, -1, 30, 31, 32, -1, 40, 41, 42, -1};
    const std::vector<double> own{90, 91, 92};
    const RowView<const double> strided{table.data() + 4, 4, 3};
    CHECK(strided.size() == 3);
    CHECK(strided.strided());
    CHECK(strided[2][1] == 31);
    const std::size_t pages[] = {4, 0, 4};
    const RowView<const double> paged{table.data(), 4, 3, pages, own.data()};
    CHECK(paged.size() == 4);
    CHECK_FALSE(paged.strided());
    CHECK_FALSE((RowView<const double>{table.data(), 4, 2, nullptr, own.data()}.strided()));
    std::vector<double> block(12, -7);
    paged.gather(3, block.data());
    CHECK(block == std::vector<double>{40, 41, 42, 0, 1, 2, 40, 41, 42, 90, 91, 92});
    const RowView<const double> only_own{nullptr, 0, 0, nullptr, own.data()};
    CHECK(only_own.size() == 1);
    CHECK(only_own[0][2] == 92);
}

TEST_CASE("attend_one_query equals a plain loop over rows through pages and a step's own row") {
    // Heads of 16 to 128 elements (the kernels sized when compiled: 1, 2, 3, 4 and 8 vectors of 16
    // lanes a head, heads summed in groups and then by ones, as many groups as there are), and heads
    // of 5 and 7 (the plain loops), in double and in float, and in float over rows kept in bfloat16
    // (a cache in half the bytes: the expected values then of the rows rounded so, by formula). The
    // pages hold runs of rows one after another and jumps between them (rows fetched ahead where
    // they do not follow the one before).
    struct Sizes {
        std::size_t heads, dk, dv;
    };
    for (const Sizes z : {Sizes{2, 16, 16}, Sizes{3, 5, 7}, Sizes{1, 32, 80}, Sizes{4, 64, 64}, Sizes{2, 32, 144},
                          Sizes{6, 64, 64}, Sizes{3, 128, 48}, Sizes{5, 16, 128}}) {
        CAPTURE(z.heads);
        CAPTURE(z.dk);
        const std::size_t kw = z.heads * z.dk, vw = z.heads * z.dv, rows = 24;
        std::mt19937 rng(7);
        std::normal_distribution<double> normal;
        auto draw = [&](std::size_t n) {
            std::vector<double> v(n);
            for (double& x : v) x = normal(rng);
            return v;
        };
        const std::vector<double> q = draw(kw), key_table = draw(rows * kw), value_table = draw(rows * vw);
        const std::vector<double> own_key = draw(kw), own_value = draw(vw);
        const std::size_t key_pages[] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 2, 2, 20, 21, 22, 23, 0, 1, 2, 14, 15};
        const std::size_t value_pages[] = {1, 4, 3, 0, 16, 17, 18, 19, 20, 21, 22, 23, 5, 6, 7, 8, 9, 10, 11, 12};
        const std::size_t paged = std::size(key_pages), lk = paged + 1;  // through the pages, then the step's own
        // Expected, in double by the formula: per head, softmax(q_h k_j,h / sqrt(dk)) over j, then the sum
        // of the weights times v_j,h.
        auto expected_of = [&](const std::vector<double>& kt, const std::vector<double>& vt,
                               const std::vector<double>& ok, const std::vector<double>& ov) {
            auto key = [&](std::size_t j) { return j < paged ? kt.data() + key_pages[j] * kw : ok.data(); };
            auto value = [&](std::size_t j) { return j < paged ? vt.data() + value_pages[j] * vw : ov.data(); };
            std::vector<double> expected(vw, 0.0);
            for (std::size_t h = 0; h < z.heads; ++h) {
                std::vector<double> s(lk);
                double top = -INFINITY, sum = 0;
                for (std::size_t j = 0; j < lk; ++j) {
                    s[j] = 0;
                    for (std::size_t d = 0; d < z.dk; ++d) s[j] += q[h * z.dk + d] * key(j)[h * z.dk + d];
                    s[j] /= std::sqrt(static_cast<double>(z.dk));
                    top = std::max(top, s[j]);
                }
                for (double& x : s) sum += x = std::exp(x - top);
                for (std::size_t j = 0; j < lk; ++j)
                    for (std::size_t d = 0; d < z.dv; ++d)
                        expected[h * z.dv + d] += s[j] / sum * value(j)[h * z.dv + d];
            }
            return expected;
        };
        const std::vector<double> expected = expected_of(key_table, value_table, own_key, own_value);
        auto run = [&]<class T>(T tolerance) {
            auto cast = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
            const std::vector<T> qt = cast(q), kt = cast(key_table), vt = cast(value_table), ok = cast(own_key),
                                 ov = cast(own_value);
            std::vector<T> p(z.heads * lk), out(vw, T(-1));
            loom::attention_detail::attend_one_query<T>(
                z.heads, z.dk, z.dv, T(1) / std::sqrt(static_cast<T>(z.dk)), qt.data(),
                RowView<const T>{kt.data(), kw, paged, key_pages, ok.data()},
                RowView<const T>{vt.data(), vw, paged, value_pages, ov.data()}, p.data(), out.data());
            for (std::size_t e = 0; e < vw; ++e)
                CHECK(std::abs(static_cast<double>(out[e]) - expected[e]) <=
                      static_cast<double>(tolerance) * (1 + std::abs(expected[e])));
        };
        run(1e-12);
        run(1e-5f);
        // Rows kept in bfloat16: the bits of each element rounded (to nearest, ties to even), the
        // step's own row too; the query and the arithmetic float.
        auto bits = [](const std::vector<double>& v) {
            std::vector<std::uint16_t> b(v.size());
            std::transform(v.begin(), v.end(), b.begin(), [](double x) { return loom::bfloat16_bits(float(x)); });
            return b;
        };
        auto rounded = [](const std::vector<double>& v) {
            std::vector<double> r(v.size());
            std::transform(v.begin(), v.end(), r.begin(), [](double x) { return loom::round_to_bfloat16(float(x)); });
            return r;
        };
        const std::vector<std::uint16_t> kb = bits(key_table), vb = bits(value_table), okb = bits(own_key),
                                         ovb = bits(own_value);
        const std::vector<float> qf(q.begin(), q.end());
        std::vector<float> p(z.heads * lk), out(vw, -1.0f);
        loom::attention_detail::attend_one_query<float, std::uint16_t>(
            z.heads, z.dk, z.dv, 1.0f / std::sqrt(static_cast<float>(z.dk)), qf.data(),
            RowView<const std::uint16_t>{kb.data(), kw, paged, key_pages, okb.data()},
            RowView<const std::uint16_t>{vb.data(), vw, paged, value_pages, ovb.data()}, p.data(), out.data());
        const std::vector<double> over_rounded =
            expected_of(rounded(key_table), rounded(value_table), rounded(own_key), rounded(own_value));
        double off_unrounded = 0;  // how far the rounded rows move the output: more than float's error
        for (std::size_t e = 0; e < vw; ++e) {
            CHECK(std::abs(static_cast<double>(out[e]) - over_rounded[e]) <= 1e-5 * (1 + std::abs(over_rounded[e])));
            off_unrounded = std::max(off_unrounded, std::abs(static_cast<double>(out[e]) - expected[e]));
        }
        CHECK(off_unrounded > 1e-4);
    }
}

TEST_CASE("one head's attention a block of queries at a time equals its formula: causal and cross, any block") {
    // The operands lie at a stride (every other row of a wider tensor, as an item's rows of a
    // time-major batch); the gradients are written (assigned) or added to what they hold.
    struct Case {
        std::size_t lq, lk;
        bool causal;
    };
    const std::size_t d = 5, stride = 2 * d + 3;
    std::mt19937 rng(11);
    std::normal_distribution<double> normal;
    for (const Case z : {Case{13, 13, true}, Case{7, 11, false}, Case{1, 9, false}, Case{70, 70, true}}) {
        auto draw = [&](std::size_t rows) {
            std::vector<double> dense(rows * d);
            for (double& x : dense) x = normal(rng);
            return dense;
        };
        const std::vector<double> q = draw(z.lq), k = draw(z.lk), v = draw(z.lk), dout = draw(z.lq);
        const Reference want = head_by_formula(z.lq, z.lk, d, z.causal, q, k, v, dout);
        auto strided = [&](const std::vector<double>& dense, double fill) {
            std::vector<double> out(dense.size() / d * stride, fill);
            for (std::size_t j = 0; j < dense.size() / d; ++j) std::copy_n(&dense[j * d], d, &out[j * stride]);
            return out;
        };
        for (const std::size_t block : {std::size_t{1}, std::size_t{3}, std::size_t{5}, std::size_t{64}}) {
            for (const bool assign : {true, false}) {
                CAPTURE(z.lq);
                CAPTURE(z.lk);
                CAPTURE(block);
                CAPTURE(assign);
                const HeadProduct<double> h{z.lq, z.lk, d, d, z.causal, 1.0 / std::sqrt(double(d)), block};
                const std::vector<double> qs = strided(q, 0), ks = strided(k, 0), vs = strided(v, 0),
                                          douts = strided(dout, 0);
                // What the gradients hold before: 0.5 to be added to, or a NaN that must be overwritten.
                const double before = assign ? std::nan("") : 0.5, added = assign ? 0.0 : 0.5;
                std::vector<double> o = strided(std::vector<double>(z.lq * d), 7),
                                    dq = strided(std::vector<double>(z.lq * d, before), before),
                                    dk = strided(std::vector<double>(z.lk * d, before), before),
                                    dv = strided(std::vector<double>(z.lk * d, before), before);
                std::vector<double> work(h.backward_work());
                h.forward({qs.data(), stride}, {ks.data(), stride}, {vs.data(), stride}, {o.data(), stride},
                          work.data());
                h.backward({qs.data(), stride}, {ks.data(), stride}, {vs.data(), stride}, {douts.data(), stride},
                           {dq.data(), stride, assign}, {dk.data(), stride, assign}, {dv.data(), stride, assign},
                           work.data());
                auto near = [&](const std::vector<double>& got, const std::vector<double>& dense, double plus) {
                    double worst = 0;
                    for (std::size_t j = 0; j < dense.size(); ++j)
                        worst = std::max(worst, std::abs(got[j / d * stride + j % d] - (dense[j] + plus)));
                    return worst;
                };
                CHECK(near(o, want.o, 0) < 1e-12);
                CHECK(near(dq, want.dq, added) < 1e-12);
                CHECK(near(dk, want.dk, added) < 1e-12);
                CHECK(near(dv, want.dv, added) < 1e-12);
                CHECK(o[d] == 7);  // between the rows: untouched
                const bool gap_kept = assign ? std::isnan(dk[d]) : dk[d] == before;
                CHECK(gap_kept);
            }
        }
    }
}

TEST_CASE("attention's weight dropout drops the same weights whatever the block of queries") {
    const std::size_t lq = 70, d = 4;
    std::mt19937 rng(3);
    std::normal_distribution<double> normal;
    std::vector<double> q(lq * d), v(lq * d), dout(lq * d);
    for (auto* m : {&q, &v, &dout})
        for (double& x : *m) x = normal(rng);
    const WeightDrops drops = WeightDrops{loom::dropout_threshold(0.3), 99, 1 / 0.7}.of_head(5);
    auto run = [&](std::size_t block) {
        const HeadProduct<double> h{lq, lq, d, d, true, 0.5, block};
        std::vector<double> o(lq * d), dq(lq * d), dk(lq * d), dv(lq * d), work(h.backward_work());
        h.forward({q.data(), d}, {q.data(), d}, {v.data(), d}, {o.data(), d}, work.data(), drops);
        h.backward({q.data(), d}, {q.data(), d}, {v.data(), d}, {dout.data(), d}, {dq.data(), d, true},
                   {dk.data(), d, true}, {dv.data(), d, true}, work.data(), drops);
        o.insert(o.end(), dq.begin(), dq.end());
        o.insert(o.end(), dk.begin(), dk.end());
        o.insert(o.end(), dv.begin(), dv.end());
        return o;
    };
    const std::vector<double> whole = run(lq), in_blocks = run(8), plain = [&] {
        const HeadProduct<double> h{lq, lq, d, d, true, 0.5, 8};
        std::vector<double> o(lq * d), work(h.forward_work());
        h.forward({q.data(), d}, {q.data(), d}, {v.data(), d}, {o.data(), d}, work.data());
        return o;
    }();
    double worst = 0;
    for (std::size_t j = 0; j < whole.size(); ++j) worst = std::max(worst, std::abs(whole[j] - in_blocks[j]));
    CHECK(worst < 1e-12);
    CHECK(!std::equal(plain.begin(), plain.end(), whole.begin()));  // something was dropped
}
