// A loop that reads a value whose size is known only at run time: a decoder recurrence attending
// over an encoder sequence made per item by sequence::unpack (its T_max). The loop's members take
// their sizes from the batch, in forward, backward, under a memory budget and on 2 threads. Values
// are checked against a step-by-step computation written here, gradients by finite differences.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;
using loom::testing::require_gradients;

namespace {

const std::vector<std::size_t> encoder_lengths{2, 5, 3}, decoder_lengths{3, 1, 4};
constexpr std::size_t d = 3, e = 2;

// h_t = tanh(x_t Wx + h_{t-1} Wh + c_{t-1} Wc), c_t = softmax_s(h_t . enc_s) enc over the encoder's
// real steps; the scores are written in one of two ways.
enum class Scores { times_transpose, times_column, element_wise };

struct Decoder {
    Variable enc, x, h, c;
    Parameter wx, wh, wc;
};

Decoder build(Scores form) {
    Decoder m{sequence::input_variable({d}, "enc"),
              sequence::input_variable({e}, "x"),
              {},
              {},
              parameter({e, d}, glorot_uniform(), "Wx", DType::f64),
              parameter({d, d}, glorot_uniform(), "Wh", DType::f64),
              parameter({d, d}, glorot_uniform(), "Wc", DType::f64)};
    const auto u = sequence::unpack(m.enc);  // [T_max, d] and [T_max] per item
    Variable h_in = placeholder({d}), c_in = placeholder({d});
    Variable h = tanh(times(m.x, m.wx) + times(past_value(h_in), m.wh) + times(past_value(c_in), m.wc), "h");
    Variable c;
    if (form == Scores::times_transpose) {
        Variable scores = times_transpose(h, u.data, "scores");  // [T_max]
        Variable masked = element_select(u.mask, scores, Variable(-1e30));
        c = times(softmax(masked), u.data, "context");  // [d]
    } else if (form == Scores::element_wise) {
        Variable scores = reduce_sum(u.data * h, -1, "scores");  // [T_max, 1]
        Variable real = sequence::unpack(sequence::is_first(m.enc) * 0.0 + 1.0).data;
        Variable w = softmax(element_select(real, scores, Variable(-1e30)), 0);
        c = reshape(reduce_sum(w * u.data, 0), {d}, "context");
    } else {
        Variable scores = times(u.data, reshape(h, {d, 1}), "scores");                 // [T_max, 1]
        Variable real = sequence::unpack(sequence::is_first(m.enc) * 0.0 + 1.0).data;  // [T_max, 1], 0 on padding
        Variable w = softmax(element_select(real, scores, Variable(-1e30)), 0);
        c = reshape(reduce_sum(w * u.data, 0), {d}, "context");
    }
    h.replace_placeholders({{h_in, h}, {c_in, c}});
    m.h = h;
    m.c = c;
    return m;
}

struct Data {
    std::vector<xt::xarray<double>> enc, x;
    Bindings bind(const Decoder& m) const { return {{m.enc, Value::sequences(enc)}, {m.x, Value::sequences(x)}}; }
};

Data data() { return {random_sequences({d}, encoder_lengths, 11), random_sequences({e}, decoder_lengths, 12)}; }

xt::xarray<double> value_of(const Parameter& p) { return p.value<double>(); }

// The decoder computed step by step in plain loops, item by item: h and c at every step.
void reference(const Decoder& m, const Data& in, std::size_t n, std::vector<std::vector<double>>& hs,
               std::vector<std::vector<double>>& cs) {
    const auto wx = value_of(m.wx), wh = value_of(m.wh), wc = value_of(m.wc);
    const auto& enc = in.enc[n];
    const auto& x = in.x[n];
    std::vector<double> h(d, 0.0), c(d, 0.0);
    for (std::size_t t = 0; t < decoder_lengths[n]; ++t) {
        std::vector<double> next(d);
        for (std::size_t j = 0; j < d; ++j) {
            double z = 0;
            for (std::size_t k = 0; k < e; ++k) z += x(t, k) * wx(k, j);
            for (std::size_t k = 0; k < d; ++k) z += h[k] * wh(k, j) + c[k] * wc(k, j);
            next[j] = std::tanh(z);
        }
        h = next;
        std::vector<double> score(encoder_lengths[n]);
        double top = -1e300, sum = 0;
        for (std::size_t s = 0; s < score.size(); ++s) {
            score[s] = 0;
            for (std::size_t k = 0; k < d; ++k) score[s] += h[k] * enc(s, k);
            top = std::max(top, score[s]);
        }
        for (double& s : score) sum += (s = std::exp(s - top));
        std::fill(c.begin(), c.end(), 0.0);
        for (std::size_t s = 0; s < score.size(); ++s)
            for (std::size_t k = 0; k < d; ++k) c[k] += score[s] / sum * enc(s, k);
        hs.push_back(h);
        cs.push_back(c);
    }
}

void check_values(Scores form) {
    Decoder m = build(form);
    const Data in = data();
    auto out = evaluate({m.h, m.c}, in.bind(m));
    for (std::size_t n = 0; n < decoder_lengths.size(); ++n) {
        std::vector<std::vector<double>> hs, cs;
        reference(m, in, n, hs, cs);
        auto h = out[m.h].sequence<double>(n), c = out[m.c].sequence<double>(n);
        REQUIRE(c.shape()[0] == decoder_lengths[n]);
        REQUIRE(c.shape()[1] == d);
        for (std::size_t t = 0; t < decoder_lengths[n]; ++t)
            for (std::size_t k = 0; k < d; ++k) {
                CHECK(h(t, k) == doctest::Approx(hs[t][k]).epsilon(1e-12));
                CHECK(c(t, k) == doctest::Approx(cs[t][k]).epsilon(1e-12));
            }
    }
}

}  // namespace

TEST_CASE("loop over unpack's T_max: dot attention of a decoder step, values against a hand loop") {
    check_values(Scores::times_transpose);
}

TEST_CASE("loop over unpack's T_max: scores as times(encoder block, reshape(h)), values against a hand loop") {
    check_values(Scores::times_column);
}

TEST_CASE("loop over unpack's T_max: scores as an element-wise product and reduce_sum, values against a hand loop") {
    check_values(Scores::element_wise);
}

TEST_CASE("loop over unpack's T_max: gradients in double on ragged batches, every score form") {
    for (Scores form : {Scores::times_transpose, Scores::times_column, Scores::element_wise}) {
        Decoder m = build(form);
        const Data in = data();
        require_gradients("decoder attention", m.c, in.bind(m), {m.wx, m.wh, m.wc, m.enc, m.x});
    }
}

TEST_CASE("loop over unpack's T_max: batch invariance with NaN padding") {
    for (Scores form : {Scores::times_transpose, Scores::times_column, Scores::element_wise}) {
        Decoder m = build(form);
        const auto report = check_batch_invariance({m.c}, data().bind(m));
        INFO(report.str());
        CHECK(report.ok);
    }
}

TEST_CASE("loop over unpack's T_max: a memory budget and 2 threads give the plain run's values and gradients") {
    Decoder m = build(Scores::times_transpose);
    const Data in = data();
    std::size_t peak = 0;
    auto run = [&](std::size_t budget, int threads) {
        set_inter_op_threads(threads);
        Session s({m.c}, {m.wx, m.wh, m.wc});
        s.set_memory_budget(budget);
        s.forward(in.bind(m));
        s.backward();
        peak = s.loop_bytes_peak();
        std::vector<double> all;
        for (std::size_t i = 0; i < 3; ++i) {
            auto g = s.gradient<double>(i).to_dense();
            all.insert(all.end(), g.begin(), g.end());
        }
        const Value v = s.value(m.c);
        for (std::size_t n = 0; n < decoder_lengths.size(); ++n) {
            auto c = v.sequence<double>(n);
            all.insert(all.end(), c.begin(), c.end());
        }
        set_inter_op_threads(1);
        return all;
    };
    const auto plain = run(0, 1);
    const std::size_t plain_peak = peak;
    const auto segmented = run(7200, 1);  // the least that works in segments of 1 step is 7128
    CHECK(peak < plain_peak);             // it did run in segments
    CHECK(peak <= 7200);
    const auto threaded = run(0, 2);
    REQUIRE(plain.size() == segmented.size());
    REQUIRE(plain.size() == threaded.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
        CHECK(segmented[i] == plain[i]);
        CHECK(threaded[i] == plain[i]);
    }
}
