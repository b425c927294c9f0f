// The seed program (CNTK's "How do I express things in Python": attention over a dynamic axis).
// Attention weights come from a recurrence: a cumulative log-sum-exp closed through a placeholder,
// whose last step normalizes exp(z). Printed next to a softmax computed directly, so the reader sees
// the recurrence is exact, for a batch of two question/answer pairs of different lengths.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

#include <loom.hpp>

using namespace loom;

namespace {

constexpr std::size_t dim = 6;  // stands in for the seed's 200-dim LSTM outputs

// Word for word the seed's recurrence: log_cumsum_exp_t = log_add_exp(z_t, log_cumsum_exp_{t-1}).
Variable attention_weights(const Variable& z) {
    Variable p = placeholder({1}, "p");
    Variable prev_z_or_tiny = element_select(sequence::is_first(z), constant(-1e30), past_value(p));
    Variable log_cumsum_exp = log_add_exp(z, prev_z_or_tiny);
    Variable actual_log_cumsum_exp = log_cumsum_exp.replace_placeholders({{p, log_cumsum_exp}});
    Variable log_sum_exp = sequence::last(actual_log_cumsum_exp);
    return exp(z - sequence::broadcast_as(log_sum_exp, z));
}

xt::xarray<float> random_sequence(std::size_t len, Rng& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    xt::xarray<float> s = xt::zeros<float>({len, dim});
    for (auto& v : s) v = d(rng);
    return s;
}

// softmax over the steps of one sequence of z_t = s_t . w, in double, without the graph.
std::vector<double> direct_softmax(const xt::xarray<float>& s, const xt::xarray<float>& w) {
    const std::size_t len = s.shape()[0];
    std::vector<double> z(len, 0.0);
    for (std::size_t t = 0; t < len; ++t)
        for (std::size_t j = 0; j < dim; ++j) z[t] += double(s(t, j)) * double(w(j, 0));
    const double mx = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double& v : z) sum += (v = std::exp(v - mx));
    for (double& v : z) v /= sum;
    return z;
}

std::vector<double> attend(const xt::xarray<float>& s, const std::vector<double>& weights) {
    std::vector<double> r(dim, 0.0);
    for (std::size_t t = 0; t < weights.size(); ++t)
        for (std::size_t j = 0; j < dim; ++j) r[j] += weights[t] * double(s(t, j));
    return r;
}

double direct_cosine(const std::vector<double>& u, const std::vector<double>& v) {
    double uv = 0, uu = 0, vv = 0;
    for (std::size_t j = 0; j < u.size(); ++j) {
        uv += u[j] * v[j];
        uu += u[j] * u[j];
        vv += v[j] * v[j];
    }
    return uv / std::sqrt(uu * vv);
}

// Prints the recurrence's weights next to the direct softmax; returns the largest difference.
double print_weights(const char* what, std::size_t n, const xt::xarray<float>& from_graph,
                     const std::vector<double>& direct) {
    std::printf("  %s %zu (length %zu)\n    step  recurrence    softmax       |diff|\n", what, n, direct.size());
    double worst = 0;
    for (std::size_t t = 0; t < direct.size(); ++t) {
        const double diff = std::abs(double(from_graph(t, 0)) - direct[t]);
        worst = std::max(worst, diff);
        std::printf("    %4zu  %.7f     %.7f     %.1e\n", t, double(from_graph(t, 0)), direct[t], diff);
    }
    return worst;
}

int run() {
    set_seed(2024);
    Variable question = sequence::input_variable({dim}, "question");
    Variable answer = sequence::input_variable({dim}, "answer");
    Parameter w_q = parameter({dim, 1}, glorot_normal(), "w_q");
    Parameter w_a = parameter({dim, 1}, glorot_normal(), "w_a");
    Variable zq = times(question, w_q);
    Variable za = times(answer, w_a);
    Variable attn_q = attention_weights(zq);
    Variable attn_a = attention_weights(za);
    Variable attended_q = sequence::reduce_sum(attn_q * question);
    Variable attended_a = sequence::reduce_sum(attn_a * answer);
    Variable cosine = cosine_distance(attended_q, attended_a);  // CNTK's name for cosine similarity

    // Two pairs; the lengths differ within and across the pairs (padding must not leak).
    Rng rng(7);
    std::vector<xt::xarray<float>> qs{random_sequence(5, rng), random_sequence(2, rng)};
    std::vector<xt::xarray<float>> as{random_sequence(3, rng), random_sequence(7, rng)};
    auto out = evaluate({attn_q, attn_a, cosine}, {{question, Value::sequences(qs)}, {answer, Value::sequences(as)}});
    const xt::xarray<float> cos = out[cosine].rows();
    const xt::xarray<float> wq = w_q.value(), wa = w_a.value();

    double worst = 0;
    for (std::size_t n = 0; n < qs.size(); ++n) {
        std::printf("pair %zu\n", n);
        const auto sq = direct_softmax(qs[n], wq), sa = direct_softmax(as[n], wa);
        worst = std::max(worst, print_weights("question", n, out[attn_q].sequence(n), sq));
        worst = std::max(worst, print_weights("answer", n, out[attn_a].sequence(n), sa));
        const double direct = direct_cosine(attend(qs[n], sq), attend(as[n], sa));
        std::printf("  cosine similarity: graph %.7f, direct %.7f\n\n", double(cos(n, 0)), direct);
        worst = std::max(worst, std::abs(double(cos(n, 0)) - direct));
    }
    std::printf("largest difference between the graph and the direct computation: %.1e\n", worst);
    // float arithmetic: agreement to ~1e-6 is expected; anything near 1e-3 would be a bug.
    if (worst > 1e-4) {
        std::fprintf(stderr, "attention_recurrence: the recurrence disagrees with the direct softmax\n");
        return 1;
    }
    return 0;
}

}  // namespace

int main() {
    try {
        return run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "attention_recurrence: %s\n", e.what());
        return 1;
    }
}
