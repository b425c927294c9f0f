// Gradients an op writes rather than adds into (OpTraits::assigns_gradient: the first op to reach a
// gradient buffer writes it, and the executor does not zero it first) must be written whole. Here
// a pass whose every value and gradient is NaN leaves the pool's buffers full of NaN; the next
// pass of the same session reuses them, and its gradients must be those of a fresh session, bit
// for bit. Products large enough for every way multiply_backward takes (core/multiply.hpp), a
// ragged batch, attention over separate and shared queries/keys, an operand used twice.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::random_sequences;
using loom::testing::random_tensor;

namespace {

struct Model {
    static constexpr std::size_t d = 32, ff = 64;
    Variable x = sequence::input_variable({d}, "x");
    std::vector<Parameter> params;
    Parameter param(const Shape& shape, std::uint64_t seed) {
        params.push_back(parameter(random_tensor(shape, seed, -0.3, 0.3), "p" + std::to_string(seed)));
        return params.back();
    }
    Variable loss;

    Model() {
        Parameter wq = param({d, d}, 1), wk = param({d, d}, 2), wv = param({d, d}, 3);
        Parameter w1 = param({d, ff}, 4), b1 = param({ff}, 5), w2 = param({ff, d}, 6);
        Parameter scale = param({d}, 7), bias = param({d}, 8), wo = param({d, d}, 9);
        // Separate q, k and v (each written by attention); then one node as both keys and values.
        Variable a = attention(times(x, wq), times(x, wk), times(x, wv), {.heads = 4});
        Variable kv = times(x, wo);
        Variable b = attention(times(x, wq), kv, kv, {.heads = 2, .causal = true});
        Variable h = layer_norm(x + a + b, scale, bias);
        Variable f = times(relu(affine(h, w1, b1)), w2);
        Variable y = h + f;
        loss = sequence::reduce_sum(reduce_sum(y * y + tanh(y) * h));  // y * y: one operand twice
    }
};

template <class T>
std::vector<std::vector<T>> gradients(Session& s, const Model& m) {
    std::vector<std::vector<T>> out;
    for (const Parameter& p : m.params) out.push_back(s.gradient<T>(p).to_dense());
    return out;
}

template <class T>
void check(DType dtype) {
    Model m;
    if (dtype == DType::f64) to_precision(m.params, DType::f64);
    const std::vector<std::size_t> lengths{20, 5, 12, 1};  // 38 of 80 rows real
    const auto xs = random_sequences({Model::d}, lengths, 11);
    std::vector<xt::xarray<double>> nans = xs;
    for (auto& a : nans) a.fill(std::numeric_limits<double>::quiet_NaN());

    Session fresh({m.loss}, m.params);
    fresh.forward({{m.x, Value::sequences(xs)}});
    fresh.backward();
    const auto want = gradients<T>(fresh, m);

    Session reused({m.loss}, m.params);
    reused.forward({{m.x, Value::sequences(nans)}});
    reused.backward();
    CHECK(std::isnan(reused.sum(m.loss)));
    reused.forward({{m.x, Value::sequences(xs)}});
    reused.backward();
    const auto got = gradients<T>(reused, m);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        bool finite = true;
        for (T g : got[i]) finite = finite && std::isfinite(g);
        CHECK(finite);
        CHECK(got[i] == want[i]);
    }
}

}  // namespace

TEST_CASE("gradients written rather than added are written whole: a pass after one of NaN equals a fresh one") {
    SUBCASE("float") { check<float>(DType::f32); }
    SUBCASE("double") { check<double>(DType::f64); }
}
