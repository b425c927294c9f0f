// check_batch_invariance: passes on graphs that keep items apart (element-wise, times, loops,
// sequence ops, several inputs on different axes), and fails, naming the op, on graphs that do not:
// test-only ops that mix the items of a batch or read T_max, unpack's padding summed over time,
// dropout in training mode, and an op whose backward alone mixes items.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include <loom.hpp>

#include "gradcheck.hpp"
#include "graph/op.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;
using loom::testing::random_tensor;

namespace {

// Test-only ops that break batch invariance on purpose.

// Each row becomes the mean of all rows of the batch: alone, a row is its own mean.
class BatchMean final : public OpBase<BatchMean> {
public:
    std::string name() const override { return "batch_mean"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override { return in[0]; }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t rows = c.in[0].rows(), row = c.in[0].sample_size();
        for (std::size_t e = 0; e < row; ++e) {
            T sum = 0;
            for (std::size_t r = 0; r < rows; ++r) sum += c.in[0].data[r * row + e];
            for (std::size_t r = 0; r < rows; ++r) c.out.data[r * row + e] = sum / static_cast<T>(rows);
        }
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        const std::size_t rows = c.in[0].rows(), row = c.in[0].sample_size();
        for (std::size_t e = 0; e < row; ++e) {
            T sum = 0;
            for (std::size_t r = 0; r < rows; ++r) sum += c.out_grad.data[r * row + e];
            for (std::size_t r = 0; r < rows; ++r) c.in_grad[0].data[r * row + e] += sum / static_cast<T>(rows);
        }
    }
};

// The mean over the padded time axis: divides by T_max, not by the sequence's length.
class PaddedTimeMean final : public OpBase<PaddedTimeMean> {
public:
    std::string name() const override { return "padded_time_mean"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override { return {in[0].shape, Axis::batch()}; }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t steps = c.in[0].dims[0], rows = c.out.size();
        std::fill_n(c.out.data, rows, T(0));
        for (std::size_t t = 0; t < steps; ++t)
            for (std::size_t k = 0; k < rows; ++k) c.out.data[k] += c.in[0].data[t * rows + k] / static_cast<T>(steps);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        const std::size_t steps = c.in[0].dims[0], rows = c.out.size();
        for (std::size_t t = 0; t < steps; ++t)
            for (std::size_t k = 0; k < rows; ++k)
                c.in_grad[0].data[t * rows + k] += c.out_grad.data[k] / static_cast<T>(steps);
    }
};

// Forward is the identity; backward adds half of the batch's mean gradient to every row: the
// values are invariant, the gradients are not.
class LeakyGradient final : public OpBase<LeakyGradient> {
public:
    std::string name() const override { return "leaky_gradient"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override { return in[0]; }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        std::copy_n(c.in[0].data, c.out.size(), c.out.data);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        const std::size_t rows = c.in[0].rows(), row = c.in[0].sample_size();
        for (std::size_t e = 0; e < row; ++e) {
            T sum = 0;
            for (std::size_t r = 0; r < rows; ++r) sum += c.out_grad.data[r * row + e];
            for (std::size_t r = 0; r < rows; ++r)
                c.in_grad[0].data[r * row + e] += c.out_grad.data[r * row + e] + sum / static_cast<T>(2 * rows);
        }
    }
};

template <class OpT>
Variable apply_test_op(const Variable& x, const std::string& name) {
    return Variable(apply_op(std::make_shared<OpT>(), {x.node()}, name));
}

const std::vector<std::size_t> lengths{1, 3, 7, 5, 2};

struct Fixture {
    Variable x = sequence::input_variable({2}, "x");
    Variable v = input_variable({2}, "v");  // one row per sequence
    Parameter w = parameter(random_tensor({2, 2}, 1, -0.9, 0.9), "W");
    Bindings in{{x, Value::sequences(random_sequences({2}, lengths, 31))}, {v, Value::batch(random_rows({2}, 5, 32))}};
};

Variable rnn(const Fixture& f, const Variable& init) {
    Variable p = placeholder({2}, "h_prev");
    Variable h = tanh(times(f.x, f.w) + past_value(p, init));
    h.replace_placeholders({{p, h}});
    return h;
}

void require_invariant(const std::string& name, const std::vector<Variable>& outputs, const Bindings& in,
                       const InvarianceOptions& options = {}) {
    const InvarianceReport r = check_batch_invariance(outputs, in, options);
    INFO(name << ": " << r.str());
    CHECK(r.ok);
    CHECK(r.compared > 0);
    CHECK(r.first_differing_op.empty());
    CHECK(r.values.error <= 1.0);
    CHECK(r.gradients.error <= 1.0);
}

}  // namespace

TEST_CASE("check_batch_invariance passes on element-wise ops, times, loops and sequence ops") {
    Fixture f;
    const InvarianceReport r = check_batch_invariance({rnn(f, f.v)}, f.in);
    INFO(r.str());
    CHECK(r.ok);
    CHECK(r.items == 5);
    CHECK(r.orders == 3);  // given, reversed, one shuffle
    // Each order compares every real value (2 per step) and the gradients of x (as many), v (2 per
    // row) and W (4, summed over the batch).
    const std::size_t steps = 1 + 3 + 7 + 5 + 2;
    CHECK(r.compared == 3 * (2 * steps + 2 * steps + 2 * 5 + 4));
    CHECK(r.values.difference < 1e-12);
    CHECK(r.gradients.difference < 1e-12);

    require_invariant("sequence reductions and broadcast",
                      {sequence::reduce_sum(sequence::softmax(f.x) * f.x),
                       sequence::broadcast_as(sequence::reduce_max(f.x) + f.v, f.x) * sequence::is_last(f.x)},
                      f.in);
    require_invariant(
        "first, last, slice and future_value",
        {sequence::first(f.x) * sequence::last(f.x), exp(sequence::slice(f.x, -2, 0)), future_value(f.x, 0.5, 2) * f.x},
        f.in);
    // unpack's T_max depends on the batch: each item's steps are compared, its padding is not.
    require_invariant("unpack (data of batch-dependent size)", {sequence::unpack(f.x, 0.5).data * 2.0}, f.in);
    Variable zero_padded = sequence::unpack(f.x).data;  // [T_max, 2]
    require_invariant("unpack padded with zeros, a product over time",
                      {times(transpose(zero_padded, {1, 0}), zero_padded)}, f.in);
}

TEST_CASE("check_batch_invariance: inputs on different axes, a batch input and an output without batch axis") {
    Variable q = sequence::input_variable({3}, "q"), a = sequence::input_variable({3}, "a");
    Variable label = input_variable({1}, "label");
    Parameter w = parameter(random_tensor({3, 3}, 5), "W");
    Variable score = cosine_distance(sequence::reduce_sum(times(q, w)), sequence::reduce_mean(tanh(a)));
    Bindings in{{q, Value::sequences(random_sequences({3}, {4, 1, 6, 2}, 40))},
                {a, Value::sequences(random_sequences({3}, {2, 5, 1, 3}, 41))},
                {label, Value::batch(random_rows({1}, 4, 42))}};
    require_invariant("two towers", {square(score - label), reduce_sum(square(w))}, in);
    InvarianceOptions only_w;
    only_w.wrt = {w};
    only_w.shuffles = 3;
    const InvarianceReport r = check_batch_invariance({score}, in, only_w);
    CHECK(r.ok);
    CHECK(r.orders == 5);
    CHECK(r.gradients.variable.find("W") != std::string::npos);
    CHECK(r.gradients.item == 4);  // a parameter's gradient is the batch's sum
}

TEST_CASE("check_batch_invariance fails on an op that mixes the rows of a batch and names it") {
    Variable v = input_variable({2}, "v");
    Variable y = tanh(apply_test_op<BatchMean>(v * 2.0, "mixed"));
    const xt::xarray<double> rows = {{0.1, -0.4}, {0.3, 0.2}, {-0.5, 0.6}};
    const InvarianceReport r = check_batch_invariance({y}, {{v, Value::batch(rows)}});
    INFO(r.str());
    CHECK_FALSE(r.ok);
    CHECK(r.pass == "forward");
    CHECK(r.first_differing_op == "batch_mean");
    CHECK(r.first_differing_node.find("mixed") != std::string::npos);
    CHECK(r.str().find("NOT BATCH INVARIANT") != std::string::npos);
    // Alone each row is its own mean: y_i = tanh(2 r_i); in the batch tanh(2 mean). The worst
    // difference, by hand:
    double worst = 0;
    for (std::size_t e = 0; e < 2; ++e) {
        const double mean = (rows(0, e) + rows(1, e) + rows(2, e)) / 3;
        for (std::size_t i = 0; i < 3; ++i)
            worst = std::max(worst, std::abs(std::tanh(2 * rows(i, e)) - std::tanh(2 * mean)));
    }
    CHECK(r.values.difference == doctest::Approx(worst).epsilon(1e-12));
    CHECK(r.values.error > 1);
    // The element that decides, wherever it is, holds those two numbers.
    REQUIRE(r.values.item < 3);
    REQUIRE(r.values.index < 2);
    const std::size_t i = r.values.item, e = r.values.index;
    CHECK(r.values.alone == doctest::Approx(std::tanh(2 * rows(i, e))).epsilon(1e-12));
    CHECK(r.values.batched ==
          doctest::Approx(std::tanh(2 * (rows(0, e) + rows(1, e) + rows(2, e)) / 3)).epsilon(1e-12));
}

TEST_CASE("check_batch_invariance fails on an op that reads the padded time axis and names it") {
    Fixture f;
    Variable y = square(apply_test_op<PaddedTimeMean>(tanh(f.x), "over_t_max") + f.v);
    const InvarianceReport r = check_batch_invariance({y}, f.in);
    INFO(r.str());
    CHECK_FALSE(r.ok);
    CHECK(r.first_differing_op == "padded_time_mean");
    CHECK(r.first_differing_node.find("over_t_max") != std::string::npos);
    // The longest sequence (7 steps) has T_max = 7 alone and in the batch: only the others differ.
    CHECK(r.values.item != 2);
}

TEST_CASE("check_batch_invariance: unpack padded with ones and multiplied over time depends on T_max") {
    Fixture f;
    Variable data = sequence::unpack(f.x, 1.0).data;                       // [T_max, 2]
    Variable y = times(transpose(data, {1, 0}), data, "gram_over_t_max");  // [2, 2]: a sum over T_max steps
    const InvarianceReport r = check_batch_invariance({y}, f.in);
    INFO(r.str());
    CHECK_FALSE(r.ok);
    CHECK(r.first_differing_op == "times");
    CHECK(r.first_differing_node.find("gram_over_t_max") != std::string::npos);
    // A sequence of length L gains 7 - L padding steps of ones in the batch, each adding 1 * 1 to
    // every entry: the largest difference is the 1-step sequence's, 6.
    CHECK(r.values.difference == doctest::Approx(6.0));
    CHECK(r.values.item != 2);  // the 7-step sequence has the batch's T_max alone too
    CHECK(std::abs(r.values.batched - r.values.alone) ==
          doctest::Approx(static_cast<double>(7 - lengths[r.values.item])));
}

TEST_CASE("check_batch_invariance: dropout in training mode draws other masks in a batch") {
    Fixture f;
    Variable y = dropout(f.x, 0.5, 3, "drop") * 2.0;
    CHECK(check_batch_invariance({y}, f.in).ok);  // inference: the identity
    TrainingScope training;
    const InvarianceReport r = check_batch_invariance({y}, f.in);
    CHECK_FALSE(r.ok);
    CHECK(r.first_differing_op == "dropout_mask");  // the mask is the first node that differs
}

TEST_CASE("check_batch_invariance: a backward that mixes items is found in the backward pass") {
    Fixture f;
    Variable h = apply_test_op<LeakyGradient>(sequence::reduce_sum(times(f.x, f.w)), "leak");
    Variable y = square(h) * 0.5;
    const InvarianceReport r = check_batch_invariance({y}, f.in);
    INFO(r.str());
    CHECK_FALSE(r.ok);
    CHECK(r.values.error <= 1);  // the values are the same
    CHECK(r.gradients.error > 1);
    CHECK(r.pass == "backward");
    CHECK(r.first_differing_op == "leaky_gradient");
    CHECK(r.message.find("reduce_sum") != std::string::npos);  // its input's gradient differs first
    // Below loops (an RNN, and the seed's log-sum-exp recurrence that runs as a fused scan) the
    // backward walk still stops at the op: the loops' gradients agree until it mixes them.
    Variable z = times(rnn(f, 0.0), parameter(random_tensor({2, 1}, 9), "w_col"));
    Variable p = placeholder({1}, "lse_prev");
    Variable lse = log_add_exp(z, element_select(sequence::is_first(z), constant(-1e30), past_value(p)));
    lse.replace_placeholders({{p, lse}});
    Variable attended = sequence::reduce_sum(exp(z - sequence::broadcast_as(sequence::last(lse), z)) * f.x);
    const InvarianceReport looped =
        check_batch_invariance({square(apply_test_op<LeakyGradient>(attended, "leak_after_loops"))}, f.in);
    INFO(looped.str());
    CHECK_FALSE(looped.ok);
    CHECK(looped.pass == "backward");
    CHECK(looped.first_differing_node.find("leak_after_loops") != std::string::npos);
    InvarianceOptions values_only;
    values_only.gradients = false;
    CHECK(check_batch_invariance({y}, f.in, values_only).ok);
}

TEST_CASE("check_batch_invariance rejects bad calls with clear errors") {
    Fixture f;
    Variable y = f.x * 2.0;
    CHECK_THROWS_WITH_AS(check_batch_invariance({}, f.in), doctest::Contains("no outputs"), UserError);
    Bindings uneven = f.in;
    uneven[f.v] = Value::batch(random_rows({2}, 3, 1));
    CHECK_THROWS_WITH_AS(check_batch_invariance({y + sequence::broadcast_as(f.v, f.x)}, uneven),
                         doctest::Contains("items"), UserError);
    Parameter w = parameter(random_tensor({2}, 3), "w");
    CHECK_THROWS_WITH_AS(check_batch_invariance({square(w)}, {}), doctest::Contains("no input with a batch axis"),
                         UserError);
    InvarianceOptions bad;
    bad.wrt = {y};
    CHECK_THROWS_WITH_AS(check_batch_invariance({y}, f.in, bad), doctest::Contains("neither an input nor a parameter"),
                         UserError);
    bad.wrt = {w};
    CHECK_THROWS_WITH_AS(check_batch_invariance({y}, f.in, bad), doctest::Contains("do not depend on"), UserError);
}
