// A Session without parameters only scores: each value is freed once its last reader ran (a
// loop's inner values once the loop is done), so later steps reuse the memory; only the outputs are
// kept. The outputs must equal evaluate()'s.
#include <doctest/doctest.h>

#include <cmath>

#include <loom.hpp>

using namespace loom;

namespace {

Value random_sequences(const std::vector<std::size_t>& lengths, std::size_t dim, std::uint64_t seed) {
    Rng rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<xt::xarray<float>> seqs;
    for (std::size_t len : lengths) {
        xt::xarray<float> s = xt::zeros<float>({len, dim});
        for (auto& v : s) v = d(rng);
        seqs.push_back(s);
    }
    return Value::sequences(seqs);
}

}  // namespace

TEST_CASE("forward-only session: a chain of ops reuses freed values and scores as evaluate does") {
    // Twelve element-wise steps over [50 steps, 4 sequences, 100]: each value is read by the next
    // step only, so two or three buffers of 80,000 bytes suffice where keeping all took twelve.
    Variable x = sequence::input_variable({100}, "x");
    Variable a = x;
    for (int i = 0; i < 12; ++i) a = tanh(a * 0.9 + 0.1);
    Variable score = sequence::reduce_sum(a);
    Session s({score});
    const Value in = random_sequences({50, 50, 50, 50}, 100, 1);
    const std::size_t one = 50 * 4 * 100 * sizeof(float);
    for (int pass = 0; pass < 2; ++pass) {
        s.forward({{x, in}});
        INFO("pass " << pass << ": bytes held " << s.bytes_held());
        CHECK(s.bytes_held() <= 4 * one);
    }
    const Value expected = evaluate({score}, {{x, in}})[score];
    const Value got = s.value(score);
    REQUIRE(got.data<float>().size() == expected.data<float>().size());
    for (std::size_t i = 0; i < got.data<float>().size(); ++i)
        CHECK(got.data<float>()[i] == doctest::Approx(expected.data<float>()[i]).epsilon(1e-6));
    // Nothing to differentiate: backward does nothing and leaves the scores.
    s.backward();
    CHECK(s.value(score).data<float>()[0] == got.data<float>()[0]);
}

TEST_CASE("forward-only session: an LSTM's inner values are freed after its loop") {
    // The LSTM loop's members (gates [4 x 8], states) are read by no later step but the output;
    // the Dense layers after it reuse their memory. (The input is read in place from its Value by
    // both sessions, so its buffer makes no difference here.)
    set_seed(3);
    Variable x = sequence::input_variable({6}, "x");
    layers::Layer lstm = layers::Recurrence(layers::LSTM(8));
    layers::Layer dense = layers::Dense(32), dense2 = layers::Dense(8);
    Variable out = sequence::reduce_sum(dense2(dense(lstm(x))));
    Session scoring({out});
    // The same graph in a training session keeps every value its backward reads.
    Session training({out}, lstm.parameters());
    const Value in = random_sequences({40, 25, 33}, 6, 2);
    scoring.forward({{x, in}});
    training.forward({{x, in}});
    INFO("scoring " << scoring.bytes_held() << " bytes, training forward " << training.bytes_held());
    CHECK(scoring.bytes_held() < training.bytes_held());
    const Value a = scoring.value(out), b = training.value(out);
    CHECK(std::vector<float>(a.data<float>().begin(), a.data<float>().end()) ==
          std::vector<float>(b.data<float>().begin(), b.data<float>().end()));
}
