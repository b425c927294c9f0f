// The seed program (000): attention as a cumulative log-sum-exp recurrence, written almost word
// for word as in CNTK's Python, checked against a directly computed softmax and by finite differences.
#include <doctest/doctest.h>

#include <cmath>

#include <loom.hpp>

using namespace loom;

namespace {

xt::xarray<double> random_sequence(std::size_t len, std::size_t dim, std::uint64_t seed) {
    Rng rng(seed);
    std::normal_distribution<double> d(0.0, 1.0);
    xt::xarray<double> a = xt::zeros<double>({len, dim});
    for (auto& v : a) v = d(rng);
    return a;
}

struct SeedModel {
    Variable q = sequence::input_variable({4}, "question");
    Variable a = sequence::input_variable({4}, "answer");
    Parameter w_q = parameter({4, 1}, glorot_normal(), "w_q");
    Parameter w_a = parameter({4, 1}, glorot_normal(), "w_a");
    Variable zq, attn_q, za, attn_a, cosine;

    static Variable attention_weights(const Variable& z) {
        Variable p = placeholder({1}, "p");
        Variable prev_z_or_tiny = element_select(sequence::is_first(z), constant(-1e30), past_value(p));
        Variable log_cumsum_exp = log_add_exp(z, prev_z_or_tiny);
        Variable actual_log_cumsum_exp = log_cumsum_exp.replace_placeholders({{p, log_cumsum_exp}});
        Variable log_sum_exp = sequence::last(actual_log_cumsum_exp);
        return exp(z - sequence::broadcast_as(log_sum_exp, z));
    }

    SeedModel() {
        zq = times(q, w_q);
        za = times(a, w_a);
        attn_q = attention_weights(zq);
        attn_a = attention_weights(za);
        Variable attended_q = sequence::reduce_sum(attn_q * q);
        Variable attended_a = sequence::reduce_sum(attn_a * a);
        cosine = cosine_distance(attended_q, attended_a);
    }
};

}  // namespace

TEST_CASE("seed attention weights equal a softmax over each sequence") {
    SeedModel m;
    std::vector<xt::xarray<double>> qs{random_sequence(3, 4, 1), random_sequence(7, 4, 2), random_sequence(1, 4, 3)};
    std::vector<xt::xarray<double>> as{random_sequence(5, 4, 4), random_sequence(2, 4, 5), random_sequence(6, 4, 6)};
    Bindings in{{m.q, Value::sequences(qs)}, {m.a, Value::sequences(as)}};
    auto out = evaluate({m.attn_q, m.zq, m.cosine}, in);
    const xt::xarray<double> w = xt::cast<double>(m.w_q.value());
    for (std::size_t n = 0; n < qs.size(); ++n) {
        auto attn = out[m.attn_q].sequence<double>(n);
        REQUIRE(attn.shape()[0] == qs[n].shape()[0]);
        // Direct softmax of z_t = q_t . w over the steps of this sequence only.
        std::vector<double> z(qs[n].shape()[0]);
        double mx = -1e300, sum = 0;
        for (std::size_t t = 0; t < z.size(); ++t) {
            z[t] = 0;
            for (std::size_t j = 0; j < 4; ++j) z[t] += qs[n](t, j) * w(j, 0);
            mx = std::max(mx, z[t]);
        }
        for (double v : z) sum += std::exp(v - mx);
        for (std::size_t t = 0; t < z.size(); ++t)
            CHECK(attn(t, 0) == doctest::Approx(std::exp(z[t] - mx) / sum).epsilon(1e-6));
    }
}

TEST_CASE("seed cosine similarity matches a direct computation and its gradients pass the check") {
    SeedModel m;
    std::vector<xt::xarray<double>> qs{random_sequence(3, 4, 11), random_sequence(7, 4, 12), random_sequence(1, 4, 13)};
    std::vector<xt::xarray<double>> as{random_sequence(5, 4, 14), random_sequence(2, 4, 15), random_sequence(6, 4, 16)};
    Bindings in{{m.q, Value::sequences(qs)}, {m.a, Value::sequences(as)}};
    auto out = evaluate({m.cosine}, in);
    auto cos = out[m.cosine].rows<double>();
    const xt::xarray<double> wq = xt::cast<double>(m.w_q.value()), wa = xt::cast<double>(m.w_a.value());
    auto attend = [](const xt::xarray<double>& s, const xt::xarray<double>& w) {
        std::vector<double> z(s.shape()[0]);
        double mx = -1e300, sum = 0;
        for (std::size_t t = 0; t < z.size(); ++t) {
            z[t] = 0;
            for (std::size_t j = 0; j < 4; ++j) z[t] += s(t, j) * w(j, 0);
            mx = std::max(mx, z[t]);
        }
        for (double v : z) sum += std::exp(v - mx);
        std::vector<double> r(4, 0.0);
        for (std::size_t t = 0; t < z.size(); ++t)
            for (std::size_t j = 0; j < 4; ++j) r[j] += std::exp(z[t] - mx) / sum * s(t, j);
        return r;
    };
    for (std::size_t n = 0; n < 3; ++n) {
        auto u = attend(qs[n], wq), v = attend(as[n], wa);
        double uv = 0, uu = 0, vv = 0;
        for (std::size_t j = 0; j < 4; ++j) {
            uv += u[j] * v[j];
            uu += u[j] * u[j];
            vv += v[j] * v[j];
        }
        CHECK(cos(n, 0) == doctest::Approx(uv / std::sqrt(uu * vv)).epsilon(1e-9));
    }
    auto report = check_gradients(m.cosine, in, {m.w_q, m.w_a, m.q, m.a});
    INFO(report.str());
    CHECK(report.ok);
    CHECK(report.checked > 50);
}
