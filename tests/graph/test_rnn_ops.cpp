// The fused LSTM cell ops: values against the gate equations computed here, and gradient checks
// (alone, on lengths 1, 3 and 7, and inside a recurrence loop).
#include <cmath>

#include "gradcheck.hpp"

using namespace loom;
using namespace loom::testing;

namespace {
double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

TEST_CASE("lstm_cell_state and lstm_cell_output follow the LSTM equations") {
    const std::size_t n = 3;
    Variable z = sequence::input_variable({4 * n}, "z");
    Variable c = sequence::input_variable({n}, "c", SequenceAxis());
    auto zs = random_sequences({4 * n}, {2}, 1, -2.0, 2.0);
    auto cs = random_sequences({n}, {2}, 2, -2.0, 2.0);
    // z and c must share an axis: bind c on z's axis by building it from z's axis
    Variable c_on_z = sequence::broadcast_as(sequence::first(c), z);
    Variable c_next = lstm_cell_state(z, c_on_z), h_next = lstm_cell_output(z, c_next);
    auto out = evaluate({c_next, h_next}, {{z, Value::sequences(zs)}, {c, Value::sequences(cs)}});
    const auto cn = out[c_next].sequence<double>(0), hn = out[h_next].sequence<double>(0);
    for (std::size_t t = 0; t < 2; ++t)
        for (std::size_t j = 0; j < n; ++j) {
            const double i = sig(zs[0](t, j)), f = sig(zs[0](t, n + j)), o = sig(zs[0](t, 2 * n + j));
            const double g = std::tanh(zs[0](t, 3 * n + j));
            const double want_c = f * cs[0](0, j) + i * g;
            CHECK(cn(t, j) == doctest::Approx(want_c).epsilon(1e-12));
            CHECK(hn(t, j) == doctest::Approx(o * std::tanh(want_c)).epsilon(1e-12));
        }
}

TEST_CASE("gradient check of the fused LSTM cell ops, alone and inside a loop") {
    const std::size_t n = 3, in_dim = 2;
    SequenceAxis axis;
    Variable z = sequence::input_variable({4 * n}, "z", axis);
    Variable c = sequence::input_variable({n}, "c", axis);
    Bindings in{{z, Value::sequences(random_sequences({4 * n}, default_lengths, 3, -2.0, 2.0))},
                {c, Value::sequences(random_sequences({n}, default_lengths, 4, -2.0, 2.0))}};
    require_gradients("lstm_cell_state", lstm_cell_state(z, c), in, {z, c});
    require_gradients("lstm_cell_output", lstm_cell_output(z, c), in, {z, c});

    // A whole LSTM recurrence built on them.
    Variable x = sequence::input_variable({in_dim}, "x");
    Parameter w = parameter(random_tensor({in_dim, 4 * n}, 5), "W"), u = parameter(random_tensor({n, 4 * n}, 6), "U");
    Variable ph = placeholder({n}, "h"), pc = placeholder({n}, "c");
    Variable zz = times(x, w) + times(past_value(ph), u);
    Variable c_next = lstm_cell_state(zz, past_value(pc));
    Variable h_next = lstm_cell_output(zz, c_next);
    h_next.replace_placeholders({{ph, h_next}, {pc, c_next}});
    Bindings xin{{x, Value::sequences(random_sequences({in_dim}, default_lengths, 7))}};
    require_gradients("LSTM loop with the fused cell", h_next, xin, {w, u, x});
}

TEST_CASE("affine(x, W, b) equals times(x, W) + b, with b a bias, a batch value or a sequence") {
    SequenceAxis axis;
    Variable x = sequence::input_variable({3}, "x", axis);
    Variable full = sequence::input_variable({4}, "addend", axis);
    Variable rows = input_variable({4}, "rows");
    Parameter w = parameter(random_tensor({3, 4}, 8), "W"), b = parameter(random_tensor({4}, 9), "b");
    Bindings in{{x, Value::sequences(random_sequences({3}, default_lengths, 10))},
                {full, Value::sequences(random_sequences({4}, default_lengths, 11))},
                {rows, Value::batch(random_rows({4}, 3, 12))}};
    for (const Variable& addend : {Variable(b), full, rows}) {
        INFO(addend.label());
        auto got = evaluate({affine(x, w, addend)}, in, DType::f64);
        auto want = evaluate({times(x, w) + addend}, in, DType::f64);
        for (std::size_t n = 0; n < 3; ++n) {
            auto a = got.begin()->second.sequence<double>(n), e = want.begin()->second.sequence<double>(n);
            for (std::size_t k = 0; k < a.size(); ++k)
                CHECK(a.data()[k] == doctest::Approx(e.data()[k]).epsilon(1e-12));
        }
        std::vector<Variable> wrt{x, w};
        if (addend.is_parameter() || addend.is_input()) wrt.push_back(addend);
        require_gradients("affine", affine(x, w, addend), in, wrt);
    }
    CHECK_THROWS_AS(affine(x, w, parameter(random_tensor({5}, 1))), UserError);
}
