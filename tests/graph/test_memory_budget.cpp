// Session::set_memory_budget: a loop whose values and gradients would exceed the budget runs in
// segments (square-root checkpointing) and recomputes them in backward. The gradients must be the
// plain run's bit for bit (the same operations in the same order), the loop must hold no more than
// the budget, and a budget too small for any segmentation must say the least one that works.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include <loom.hpp>

#include "test_support.hpp"

using namespace loom;

namespace {

// A model built afresh (same seed: same parameters, same dropout streams) for each run compared.
struct Model {
    Variable x, out;
    std::vector<Parameter> params;
};
using Builder = std::function<Model()>;

struct Run {
    std::vector<std::vector<float>> grads;
    std::vector<float> out;
    std::size_t loop_peak = 0;
};

// Random sequences of the given lengths and width; padding rows hold NaN (bind must ignore them).
Value nan_padded_sequences(const std::vector<std::size_t>& lengths, std::size_t dim, std::uint64_t seed) {
    Rng rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::size_t t_max = 0;
    for (std::size_t l : lengths) t_max = std::max(t_max, l);
    xt::xarray<float> data = xt::zeros<float>({t_max, lengths.size(), dim});
    for (std::size_t t = 0; t < t_max; ++t)
        for (std::size_t n = 0; n < lengths.size(); ++n)
            for (std::size_t k = 0; k < dim; ++k)
                data(t, n, k) = t < lengths[n] ? d(rng) : std::numeric_limits<float>::quiet_NaN();
    return Value::time_major_sequences(std::move(data), std::make_shared<const SequenceLayout>(lengths));
}

Run run(const Builder& build, const Value& input, std::size_t budget, int passes = 2) {
    Model m = build();
    Session s({m.out}, m.params);
    s.set_memory_budget(budget);
    Run r;
    for (int p = 0; p < passes; ++p) {  // the second pass reuses the first one's buffers
        s.forward({{m.x, input}});
        s.backward();
    }
    for (std::size_t i = 0; i < m.params.size(); ++i) {
        auto g = s.gradient(i).to_dense();
        r.grads.emplace_back(g.begin(), g.end());
    }
    const Value v = s.value(m.out);
    r.out.assign(v.data<float>().begin(), v.data<float>().end());
    r.loop_peak = s.loop_bytes_peak();
    return r;
}

// Plain and budgeted runs: the budget is `fraction` of what the plain loop held; the budgeted loop
// must stay under it and give the same outputs and gradients, exactly.
void check_equal_under_budget(const Builder& build, const Value& input, double fraction) {
    const Run plain = run(build, input, 0);
    const auto budget = static_cast<std::size_t>(fraction * double(plain.loop_peak));
    const Run budgeted = run(build, input, budget);
    INFO("plain loop bytes " << plain.loop_peak << ", budget " << budget << ", budgeted " << budgeted.loop_peak);
    CHECK(budgeted.loop_peak <= budget);
    CHECK(budgeted.loop_peak > 0);
    CHECK(budgeted.out == plain.out);
    REQUIRE(budgeted.grads.size() == plain.grads.size());
    for (std::size_t i = 0; i < plain.grads.size(); ++i) {
        INFO("parameter " << i);
        CHECK(budgeted.grads[i] == plain.grads[i]);
        bool finite = true, nonzero = false;
        for (float g : plain.grads[i]) {
            finite &= std::isfinite(g);
            nonzero |= g != 0.0f;
        }
        CHECK(finite);
        CHECK(nonzero);
    }
}

Builder lstm_model(std::size_t in, std::size_t hidden, bool backwards) {
    return [=] {
        set_seed(11);
        Model m;
        m.x = sequence::input_variable({in}, "x");
        layers::Layer lstm = layers::Recurrence(layers::LSTM(hidden), backwards);
        m.out = lstm(m.x);
        m.params = lstm.parameters();
        return m;
    };
}

// h' = tanh(dropout(h) U + x W): the dropout mask is drawn inside the loop, so recomputing it
// would draw a different one.
Builder dropout_model(std::size_t in, std::size_t hidden) {
    return [=] {
        set_seed(12);
        Model m;
        m.x = sequence::input_variable({in}, "x");
        Parameter w = parameter({in, hidden}, glorot_uniform(), "W");
        Parameter u = parameter({hidden, hidden}, glorot_uniform(), "U");
        Variable h = placeholder({hidden}, "h");
        Variable next = tanh(times(dropout(past_value(h), 0.4, 99), u) + times(m.x, w));
        next.replace_placeholders({{h, next}});
        m.out = next;
        m.params = {w, u};
        return m;
    };
}

// The seed's attention weights, written with the initial state -1e30 of past_value instead of
// element_select(is_first, ...): compile cannot fuse this form into a scan, so it stays a loop.
Builder attention_model(std::size_t dim, bool fused) {
    return [=] {
        set_seed(13);
        Model m;
        m.x = sequence::input_variable({dim}, "x");
        Parameter w = parameter({dim, 1}, glorot_normal(), "w");
        Variable z = times(m.x, w);
        Variable p = placeholder({1}, "p");
        Variable prev = fused ? element_select(sequence::is_first(z), constant(-1e30), past_value(p))
                              : past_value(p, constant(-1e30));
        Variable lcse = log_add_exp(z, prev);
        lcse.replace_placeholders({{p, lcse}});
        Variable weights = exp(z - sequence::broadcast_as(sequence::last(lcse), z));
        m.out = sequence::reduce_sum(weights * m.x);
        m.params = {w};
        return m;
    };
}

}  // namespace

TEST_CASE("memory budget: an LSTM's gradients equal the plain run's on sequences of different lengths") {
    const Value x = nan_padded_sequences({37, 12, 1, 25}, 3, 1);
    check_equal_under_budget(lstm_model(3, 5, false), x, 0.7);
}

TEST_CASE("memory budget: a future_value LSTM's gradients equal the plain run's") {
    const Value x = nan_padded_sequences({9, 40, 23}, 4, 2);
    check_equal_under_budget(lstm_model(4, 6, true), x, 0.7);
}

TEST_CASE("memory budget: two loops run in segments at once on two threads give the plain run's gradients") {
    // A BiRecurrence: the forward and backward LSTMs are independent steps, run concurrently; of
    // equal sizes, so that both exceed the budget.
    const Builder bi = [] {
        set_seed(14);
        Model m;
        m.x = sequence::input_variable({3}, "x");
        layers::Layer layer = layers::BiRecurrence(layers::LSTM(5), layers::LSTM(5));
        m.out = layer(m.x);
        m.params = layer.parameters();
        return m;
    };
    const Value x = nan_padded_sequences({28, 9, 31}, 3, 6);
    const Run plain = run(bi, x, 0);
    set_inter_op_threads(2);
    const Run budgeted = run(bi, x, plain.loop_peak * 7 / 10);
    set_inter_op_threads(1);
    CHECK(budgeted.loop_peak <= plain.loop_peak * 7 / 10);
    CHECK(budgeted.out == plain.out);
    CHECK(budgeted.grads == plain.grads);
}

TEST_CASE("memory budget: dropout inside a loop replays the same mask in the recomputation") {
    TrainingScope training;
    const Value x = nan_padded_sequences({30, 17}, 3, 3);
    check_equal_under_budget(dropout_model(3, 4), x, 0.8);
    // The mask really drops something: an inference run differs.
    const Run dropped = run(dropout_model(3, 4), x, 0);
    set_training(false);
    const Run kept = run(dropout_model(3, 4), x, 0);
    CHECK(dropped.out != kept.out);
}

TEST_CASE("memory budget: the seed attention recurrence gives the plain run's gradients") {
    const Value x = nan_padded_sequences({50, 8, 33}, 4, 4);
    // As a loop (past_value with an initial state): run in segments. Its output is read whole
    // after the loop (sequence::last) and its input value by its bulk gradient, so segments save
    // little here: 3/4 of the plain loop's memory stays.
    check_equal_under_budget(attention_model(4, false), x, 0.95);
    // The seed's exact form is fused into one scan node: no loop, the budget changes nothing.
    const Run plain = run(attention_model(4, true), x, 0), budgeted = run(attention_model(4, true), x, 64);
    CHECK(plain.loop_peak == 0);
    CHECK(budgeted.grads == plain.grads);
    // Both forms compute the same weights.
    const Run looped = run(attention_model(4, false), x, 0);
    REQUIRE(looped.out.size() == plain.out.size());
    for (std::size_t i = 0; i < plain.out.size(); ++i)
        CHECK(looped.out[i] == doctest::Approx(plain.out[i]).epsilon(1e-5));
}

TEST_CASE("memory budget: too small for any segmentation names the least budget that works") {
    const Value x = nan_padded_sequences({60, 45}, 3, 5);
    std::string message;
    testing::expect_user_error([&] { run(lstm_model(3, 5, false), x, 1000, 1); },
                               {"memory budget", "needs at least", "the budget is 1000 bytes"});
    try {
        run(lstm_model(3, 5, false), x, 1000, 1);
    } catch (const UserError& e) {
        message = e.what();
    }
    const std::size_t at = message.find("needs at least ");
    REQUIRE(at != std::string::npos);
    const std::size_t least = std::stoul(message.substr(at + 15));
    CHECK(least > 1000);
    // The least budget named works and is honoured; one byte less does not.
    const Run r = run(lstm_model(3, 5, false), x, least, 1);
    CHECK(r.loop_peak <= least);
    CHECK_THROWS_AS(run(lstm_model(3, 5, false), x, least - 1, 1), UserError);
    // A budget the plain loop fits changes nothing.
    const Run plain = run(lstm_model(3, 5, false), x, 0, 1);
    CHECK(run(lstm_model(3, 5, false), x, plain.loop_peak * 4, 1).grads == plain.grads);
}

TEST_CASE("memory budget: gradients in double agree with finite differences") {
    // An RNN (tanh) over sequences of lengths 40 and 13, checked by check_gradients (double) with
    // a budget below what the plain loop holds, so the checked pass runs in segments.
    set_seed(21);
    Variable x = sequence::input_variable({2}, "x");
    layers::Layer rnn = layers::Recurrence(layers::RNNStep(3, layers::activations::tanh));
    Variable h = rnn(x);
    const std::vector<Parameter> params = rnn.parameters();
    std::vector<xt::xarray<double>> seqs;
    Rng rng(22);
    std::normal_distribution<double> d(0.0, 1.0);
    for (std::size_t len : {40, 13}) {
        xt::xarray<double> s = xt::zeros<double>({len, std::size_t{2}});
        for (auto& v : s) v = d(rng);
        seqs.push_back(s);
    }
    const Bindings in{{x, Value::sequences(seqs)}};
    const std::vector<Variable> wrt(params.begin(), params.end());
    GradientCheckOptions o;
    o.relative_tolerance = o.absolute_tolerance = 1e-6;
    const GradientReport plain = check_gradients(h, in, wrt, o);
    o.memory_budget = plain.loop_bytes_peak * 9 / 10;
    const GradientReport budgeted = check_gradients(h, in, wrt, o);
    INFO(budgeted.str());
    CHECK(plain.ok);
    CHECK(budgeted.ok);
    CHECK(budgeted.loop_bytes_peak > 0);
    CHECK(budgeted.loop_bytes_peak <= o.memory_budget);
    CHECK(budgeted.checked == 2 * 3 + 3 + 3 * 3);  // W [2, 3], b [3], U [3, 3]
}

TEST_CASE("memory budget: a double session keeps its budget across to_precision and equals the plain run") {
    const Value input = nan_padded_sequences({40, 17, 1}, 3, 31);
    auto grads_in_double = [&](std::size_t budget, std::size_t* peak) {
        Model m = lstm_model(3, 5, false)();
        Session s({m.out}, m.params);
        s.set_memory_budget(budget);  // set while the session is float: it must survive the switch
        to_precision(m.params, DType::f64);
        s.forward({{m.x, input}});
        s.backward();
        std::vector<std::vector<double>> grads;
        for (std::size_t i = 0; i < m.params.size(); ++i) {
            auto g = s.gradient<double>(i).to_dense();
            grads.emplace_back(g.begin(), g.end());
        }
        *peak = s.loop_bytes_peak();
        return grads;
    };
    std::size_t plain_peak = 0, budget_peak = 0;
    const auto plain = grads_in_double(0, &plain_peak);
    const std::size_t budget = plain_peak * 7 / 10;
    const auto budgeted = grads_in_double(budget, &budget_peak);
    INFO("plain loop bytes " << plain_peak << ", budget " << budget << ", budgeted " << budget_peak);
    CHECK(budget_peak > 0);
    CHECK(budget_peak <= budget);
    CHECK(budgeted == plain);
}
