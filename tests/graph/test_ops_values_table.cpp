// Forward values of the element-wise ops and times_transpose against formulas written here with
// std:: functions (in long double where the op has a numerically delicate form), on hand-chosen
// points with the edges each op has: 0 and -0 for abs / relu / negate, ties for max / min / less /
// equal, the bounds of clip, saturation for sigmoid / softplus, division by zero. One table, as the
// gradient-check table; each row runs on a batch in double and in float, and on a sequence
// (lengths 1, 3, 7) against a static operand. Also stop_gradient.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;

namespace {

// A binary row; unary ops ignore b. `points` are (a, b) pairs.
struct Row {
    std::string name;
    std::function<Variable(const Variable&, const Variable&)> op;
    std::function<long double(long double, long double)> expected;
    std::vector<std::pair<double, double>> points;
};

std::vector<std::pair<double, double>> unary(std::vector<double> xs) {
    std::vector<std::pair<double, double>> p;
    for (double x : xs) p.emplace_back(x, 0.0);
    return p;
}

const std::vector<Row>& table() {
    using V = const Variable&;
    using L = long double;
    static const std::vector<Row> rows{
        {"negate", [](V a, V) { return negate(a); }, [](L a, L) { return -a; }, unary({0.0, -0.0, 1.5, -3.25, 1e30})},
        {"abs", [](V a, V) { return abs(a); }, [](L a, L) { return a < 0 ? -a : a; },
         unary({0.0, -0.0, -2.5, 3.0, 1e-30, -1e30})},
        {"relu", [](V a, V) { return relu(a); }, [](L a, L) { return a > 0 ? a : 0.0L; },
         unary({0.0, -0.0, -1e-7, 1e-7, 2.0, -5.0})},
        // x Phi(x) with Phi through erfc (another form than the op's erf), in long double.
        {"gelu", [](V a, V) { return gelu(a); }, [](L a, L) { return a * 0.5L * std::erfc(-a / std::sqrt(2.0L)); },
         unary({0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 0.5, -10.0, 1e30, -1e30})},
        {"sigmoid", [](V a, V) { return sigmoid(a); }, [](L a, L) { return 1.0L / (1.0L + std::exp(-a)); },
         unary({0.0, 1.0, -1.0, 4.0, -4.0, 20.0, -20.0, 40.0, -40.0})},
        // log(1 + e^x) in long double: another form than the op's two branches.
        {"softplus", [](V a, V) { return softplus(a); }, [](L a, L) { return std::log1p(std::exp(a)); },
         unary({0.0, 1.0, -1.0, 10.0, -10.0, 30.0, -30.0, 80.0, -80.0})},
        {"reciprocal", [](V a, V) { return reciprocal(a); }, [](L a, L) { return 1.0L / a; },
         unary({1.0, -2.0, 0.5, 1e-3, -7.0, 0.0, -0.0})},
        {"floor", [](V a, V) { return floor(a); }, [](L a, L) { return std::floor(a); },
         unary({0.0, -0.0, 2.5, -2.5, 1e30, -1e-30, 3.0})},
        {"ceil", [](V a, V) { return ceil(a); }, [](L a, L) { return std::ceil(a); },
         unary({0.0, 2.5, -2.5, 1e30, 1e-30, -3.0})},
        // Halves up, against numpy's halves to even: 0.5 -> 1, 2.5 -> 3, -5.5 -> -5.
        {"round", [](V a, V) { return round(a); }, [](L a, L) { return std::floor(a + 0.5L); },
         unary({0.5, 1.5, 2.5, -5.5, -0.7, 4.2, 0.0})},
        {"element_max",
         [](V a, V b) { return element_max(a, b); },
         [](L a, L b) { return a > b ? a : b; },
         {{1, 3}, {3, 1}, {2, 2}, {-1, -3}, {-0.5, -0.5}, {1e30, -1e30}, {0.0, -0.0}}},
        {"element_min",
         [](V a, V b) { return element_min(a, b); },
         [](L a, L b) { return a < b ? a : b; },
         {{1, 3}, {3, 1}, {2, 2}, {-1, -3}, {-0.5, -0.5}, {1e30, -1e30}, {0.0, -0.0}}},
        {"element_divide",
         [](V a, V b) { return element_divide(a, b); },
         [](L a, L b) { return a / b; },
         {{1, 2}, {-3, 4}, {0, 5}, {7, -0.5}, {1, 3}, {1, 0}, {-1, 0}}},
        {"less",
         [](V a, V b) { return less(a, b); },
         [](L a, L b) { return a < b ? 1.0L : 0.0L; },
         {{1, 2}, {2, 1}, {2, 2}, {-0.0, 0.0}, {-3, -2}, {1e-30, 0}}},
        {"equal",
         [](V a, V b) { return equal(a, b); },
         [](L a, L b) { return a == b ? 1.0L : 0.0L; },
         {{1, 2}, {2, 1}, {2, 2}, {-0.0, 0.0}, {-3, -3}, {1e-30, 0}}},
        // clip(a, lo = b - 1, hi = b + 2): bounds that differ per element, with a on and beyond them.
        {"clip",
         [](V a, V b) { return clip(a, b - 1.0, b + 2.0); },
         [](L a, L b) { return std::clamp(a, b - 1, b + 2); },
         {{-3, 0}, {-1, 0}, {0, 0}, {2, 0}, {5, 0}, {0.5, 1}, {3.5, 1}, {-10, -5}}},
    };
    return rows;
}

// Checks one computed element against the formula: NaN or the same infinity where it is not finite,
// relative (with a floor near 0) otherwise.
void check_value(const std::string& what, double got, long double want, double tolerance) {
    CAPTURE(what);
    const double w = static_cast<double>(want);
    if (std::isnan(w)) {  // 0 / 0 where the sequence test pairs them
        CHECK(std::isnan(got));
        return;
    }
    if (!std::isfinite(w)) {
        CHECK(got == w);
        return;
    }
    CHECK(std::abs(got - w) <= tolerance * std::max(1.0, std::abs(w)));
}

// Rounds to float when the op runs in float, so the formula sees the op's input.
double as(DType p, double v) { return p == DType::f32 ? static_cast<double>(static_cast<float>(v)) : v; }

}  // namespace

TEST_CASE("element-wise op values equal their formulas on a batch in double and float") {
    for (const Row& row : table()) {
        for (DType precision : {DType::f64, DType::f32}) {
            const double tolerance = precision == DType::f64 ? 1e-14 : 2e-6;
            const std::size_t k = row.points.size();
            // Row 0 as listed, row 1 reversed: each point meets another element position.
            xt::xarray<double> a = xt::zeros<double>({std::size_t(2), k}), b = a;
            for (std::size_t j = 0; j < k; ++j) {
                a(0, j) = a(1, k - 1 - j) = row.points[j].first;
                b(0, j) = b(1, k - 1 - j) = row.points[j].second;
            }
            Variable va = input_variable({k}, "a"), vb = input_variable({k}, "b");
            Variable y = row.op(va, vb);
            auto out = evaluate({y}, {{va, Value::batch(a)}, {vb, Value::batch(b)}}, precision)[y].rows<double>();
            REQUIRE(out.shape() == a.shape());
            for (std::size_t n = 0; n < 2; ++n)
                for (std::size_t j = 0; j < k; ++j)
                    check_value(row.name + (precision == DType::f64 ? " f64 " : " f32 ") + std::to_string(a(n, j)) +
                                    ", " + std::to_string(b(n, j)),
                                out(n, j), row.expected(as(precision, a(n, j)), as(precision, b(n, j))), tolerance);
        }
    }
}

TEST_CASE("element-wise op values on sequences of lengths 1 3 7 against a static operand") {
    for (const Row& row : table()) {
        const std::size_t k = row.points.size();
        // Step t of sequence i holds the points rotated by t + i; b is a constant, the same at every step.
        xt::xarray<double> b = xt::zeros<double>({k});
        for (std::size_t j = 0; j < k; ++j) b(j) = row.points[j].second;
        std::vector<xt::xarray<double>> seqs;
        for (std::size_t i = 0; i < testing::default_lengths.size(); ++i) {
            xt::xarray<double> s = xt::zeros<double>({testing::default_lengths[i], k});
            for (std::size_t t = 0; t < s.shape()[0]; ++t)
                for (std::size_t j = 0; j < k; ++j) s(t, j) = row.points[(j + t + i) % k].first;
            seqs.push_back(s);
        }
        Variable x = sequence::input_variable({k}, "x");
        Variable y = row.op(x, constant(b));
        const Value out = evaluate({y}, {{x, Value::sequences(seqs)}}, DType::f64)[y];
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            const auto got = out.sequence<double>(i);
            REQUIRE(got.shape() == seqs[i].shape());
            for (std::size_t t = 0; t < got.shape()[0]; ++t)
                for (std::size_t j = 0; j < k; ++j)
                    check_value(row.name + " sequence " + std::to_string(i) + " step " + std::to_string(t), got(t, j),
                                row.expected(seqs[i](t, j), b(j)), 1e-14);
        }
    }
}

TEST_CASE("times_transpose equals a loop over a times b transposed for a static and a per-item b") {
    // a: sequences of [2, 3]; b static [4, 3], then b per sequence (a batch value [4, 3]).
    const auto a_data = testing::random_sequences({2, 3}, testing::default_lengths, 21);
    const xt::xarray<double> b_static = testing::random_rows({3}, 4, 22);
    const xt::xarray<double> b_items = testing::random_rows({4, 3}, 3, 23);
    Variable a = sequence::input_variable({2, 3}, "a");
    Variable b = input_variable({4, 3}, "b");
    Variable by_static = times_transpose(a, constant(b_static));
    Variable by_item = times_transpose(a, sequence::broadcast_as(b, a));
    auto out = evaluate({by_static, by_item}, {{a, Value::sequences(a_data)}, {b, Value::batch(b_items)}}, DType::f64);
    for (std::size_t i = 0; i < a_data.size(); ++i) {
        const auto s = out[by_static].sequence<double>(i), d = out[by_item].sequence<double>(i);
        REQUIRE(s.shape() == std::vector<std::size_t>{a_data[i].shape()[0], 2, 4});
        REQUIRE(d.shape() == s.shape());
        for (std::size_t t = 0; t < s.shape()[0]; ++t)
            for (std::size_t r = 0; r < 2; ++r)
                for (std::size_t m = 0; m < 4; ++m) {
                    double want_s = 0, want_d = 0;
                    for (std::size_t j = 0; j < 3; ++j) {
                        want_s += a_data[i](t, r, j) * b_static(m, j);
                        want_d += a_data[i](t, r, j) * b_items(i, m, j);
                    }
                    CHECK(s(t, r, m) == doctest::Approx(want_s).epsilon(1e-13));
                    CHECK(d(t, r, m) == doctest::Approx(want_d).epsilon(1e-13));
                }
    }
}

TEST_CASE("a row per item times its item's or sequence's own matrix equals loops: times, times_transpose, affine") {
    // a: sequences of vectors [3]; each step of each sequence has its own matrix b [3, 4] (and its
    // transpose's stand-in bt [4, 3]) and addend d [4].
    const auto a_data = testing::random_sequences({3}, testing::default_lengths, 24);
    const auto b_data = testing::random_sequences({3, 4}, testing::default_lengths, 25);
    const auto bt_data = testing::random_sequences({4, 3}, testing::default_lengths, 26);
    const auto d_data = testing::random_sequences({4}, testing::default_lengths, 27);
    const SequenceAxis axis;
    Variable a = sequence::input_variable({3}, "a", axis);
    Variable b = sequence::input_variable({3, 4}, "b", axis);
    Variable bt = sequence::input_variable({4, 3}, "bt", axis);
    Variable d = sequence::input_variable({4}, "d", axis);
    // And one matrix per sequence for all its steps: m [4, 3] as a batch value.
    const xt::xarray<double> m_data = testing::random_rows({4, 3}, a_data.size(), 28);
    Variable per_sequence = input_variable({4, 3}, "m");
    Variable plain = times(a, b), transposed = times_transpose(a, bt), shifted = affine(a, b, d);
    Variable by_sequence = times_transpose(a, per_sequence);
    auto out = evaluate({plain, transposed, shifted, by_sequence},
                        {{a, Value::sequences(a_data)},
                         {b, Value::sequences(b_data)},
                         {bt, Value::sequences(bt_data)},
                         {d, Value::sequences(d_data)},
                         {per_sequence, Value::batch(m_data)}},
                        DType::f64);
    for (std::size_t i = 0; i < a_data.size(); ++i) {
        const auto p = out[plain].sequence<double>(i), q = out[transposed].sequence<double>(i),
                   s = out[shifted].sequence<double>(i), v = out[by_sequence].sequence<double>(i);
        REQUIRE(v.shape() == p.shape());
        REQUIRE(p.shape() == std::vector<std::size_t>{a_data[i].shape()[0], 4});
        REQUIRE(q.shape() == p.shape());
        REQUIRE(s.shape() == p.shape());
        for (std::size_t t = 0; t < p.shape()[0]; ++t)
            for (std::size_t m = 0; m < 4; ++m) {
                double want_p = 0, want_q = 0, want_v = 0;
                for (std::size_t j = 0; j < 3; ++j) {
                    want_p += a_data[i](t, j) * b_data[i](t, j, m);
                    want_q += a_data[i](t, j) * bt_data[i](t, m, j);
                    want_v += a_data[i](t, j) * m_data(i, m, j);
                }
                CHECK(v(t, m) == doctest::Approx(want_v).epsilon(1e-13));
                CHECK(p(t, m) == doctest::Approx(want_p).epsilon(1e-13));
                CHECK(q(t, m) == doctest::Approx(want_q).epsilon(1e-13));
                CHECK(s(t, m) == doctest::Approx(want_p + d_data[i](t, m)).epsilon(1e-13));
            }
    }
}

TEST_CASE("stop_gradient is the identity forward and passes no gradient") {
    Variable x = sequence::input_variable({2}, "x");
    Parameter w = parameter(xt::xarray<float>{1.5f, -2.0f}, "w");
    const auto data = testing::random_sequences({2}, testing::default_lengths, 31);
    const Bindings in{{x, Value::sequences(data)}};
    Variable stopped = stop_gradient(x * w);
    const Value out = evaluate({stopped}, in, DType::f64)[stopped];
    for (std::size_t i = 0; i < data.size(); ++i) {
        const auto got = out.sequence<double>(i);
        for (std::size_t t = 0; t < got.shape()[0]; ++t)
            for (std::size_t j = 0; j < 2; ++j) CHECK(got(t, j) == doctest::Approx(data[i](t, j) * (j ? -2.0 : 1.5)));
    }
    // d/dx sum(stop_gradient(x w) * x) = x w (the stopped factor counts as a constant), not 2 x w;
    // d/dw of it is 0: w appears only under stop_gradient.
    auto g = gradients(stopped * x, in, {x, w});
    for (std::size_t i = 0; i < data.size(); ++i) {
        const auto gx = g[x].sequence<double>(i);
        for (std::size_t t = 0; t < gx.shape()[0]; ++t)
            for (std::size_t j = 0; j < 2; ++j) CHECK(gx(t, j) == doctest::Approx(data[i](t, j) * (j ? -2.0 : 1.5)));
    }
    CHECK(g[w].tensor<double>() == xt::xarray<double>{0.0, 0.0});
}
