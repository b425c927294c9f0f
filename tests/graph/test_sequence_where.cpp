// sequence::where, sequence::scatter, to_sequence and Value::item_major_sequences: values written out by hand
// (or rebuilt step by step in the test), gradients, and the edges (all false, all true, length 1,
// repeat counts, lengths 0 or above T).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>

#include <xtensor/xview.hpp>

#include <loom.hpp>

#include "gradcheck.hpp"
#include "test_support.hpp"

using namespace loom;
using loom::testing::expect_user_error;

namespace {

// A sequence [T, 1] from its steps.
xt::xarray<double> column(const std::vector<double>& steps) {
    xt::xarray<double> a = xt::zeros<double>({steps.size(), std::size_t{1}});
    for (std::size_t t = 0; t < steps.size(); ++t) a(t, 0) = steps[t];
    return a;
}

Value conditions(const std::vector<std::vector<double>>& seqs) {
    std::vector<xt::xarray<double>> out;
    for (const auto& s : seqs) out.push_back(column(s));
    return Value::sequences(out);
}

void check_sequence(const Value& v, std::size_t n, const xt::xarray<double>& want) {
    const xt::xarray<double> got = v.sequence<double>(n);
    INFO("sequence " << n);
    REQUIRE(got.shape() == want.shape());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got.data()[i] == doctest::Approx(want.data()[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("sequence::where gives the positions of the non-zero steps on a new axis") {
    Variable cond = sequence::input_variable({1}, "cond");
    Variable w = sequence::where(cond);
    // CNTK's repeat factor: a count of 2 lists its position twice. Sequence 2 is all true, 3 has one step.
    Bindings in{{cond, conditions({{1, 0, 0, 1, 1}, {0, 2, 0, 1}, {1, 1, 1}, {1}})}};
    const Value out = evaluate({w}, in)[w];
    CHECK(out.layout().lengths() == std::vector<std::size_t>{3, 3, 3, 1});
    check_sequence(out, 0, column({0, 3, 4}));
    check_sequence(out, 1, column({1, 1, 3}));
    check_sequence(out, 2, column({0, 1, 2}));
    check_sequence(out, 3, column({0}));
    // Its axis is new: combining it with the condition's is refused when the graph is built.
    expect_user_error([&] { w + cond; }, {"plus"});
}

TEST_CASE("sequence::where refuses an all-zero sequence and counts that are not whole numbers") {
    Variable cond = sequence::input_variable({1}, "cond");
    Variable w = sequence::where(cond);
    expect_user_error(
        [&] {
            evaluate({w}, {{cond, conditions({{1, 0}, {0, 0, 0}})}});
        },
        {"sequence::where", "sequence 1", "length 3", "empty"});
    expect_user_error([&] { evaluate({w}, {{cond, conditions({{1}, {0}})}}); }, {"sequence::where", "sequence 1"});
    expect_user_error(
        [&] {
            evaluate({w}, {{cond, conditions({{1, 0.5}})}});
        },
        {"sequence::where", "sequence 0", "0.5", "step 1"});
    expect_user_error([&] { evaluate({w}, {{cond, conditions({{-1, 1}})}}); }, {"sequence::where", "-1", "step 0"});
    expect_user_error(
        [&] {
            evaluate({w}, {{cond, conditions({{1, std::nan("")}})}});
        },
        {"sequence::where", "nan", "step 1"});
    // A subnormal count is neither 0 nor 1: the message shows the number, not "0".
    expect_user_error(
        [&] {
            evaluate({w}, {{cond, conditions({{1, 1e-310}})}});
        },
        {"sequence::where", "is 1e-310 at step 1"});
    expect_user_error(
        [&] {
            evaluate({w}, {{cond, conditions({{1, 1.0000001}})}});
        },
        {"sequence::where", "is 1.0000001 at step 1"});
    expect_user_error([&] { sequence::where(sequence::input_variable({2}, "wide")); }, {"sequence::where", "[2]"});
    expect_user_error([&] { sequence::where(input_variable({1}, "flat")); }, {"sequence::where", "sequence"});
}

TEST_CASE("sequence::scatter places x's steps at the true steps of cond and zeros elsewhere") {
    SequenceAxis short_axis, long_axis;
    Variable cond = sequence::input_variable({1}, "cond", long_axis);
    Variable x = sequence::input_variable({2}, "x", short_axis);
    Variable y = sequence::scatter(x, cond);
    const xt::xarray<double> x0 = {{1, 2}, {3, 4}, {5, 6}}, x1 = {{7, 8}};
    Bindings in{{cond, conditions({{1, 0, 0, 1, 1}, {0, 1}})},
                {x, Value::sequences(std::vector<xt::xarray<double>>{x0, x1})}};
    const Value out = evaluate({y}, in)[y];
    CHECK(out.layout().lengths() == std::vector<std::size_t>{5, 2});
    check_sequence(out, 0, xt::xarray<double>{{1, 2}, {0, 0}, {0, 0}, {3, 4}, {5, 6}});
    check_sequence(out, 1, xt::xarray<double>{{0, 0}, {7, 8}});

    // d(sum of scatter * c)/dx at step k = c at the k-th true position.
    Variable c = sequence::input_variable({2}, "c", long_axis);
    const xt::xarray<double> c0 = {{1, -1}, {9, 9}, {9, 9}, {2, -2}, {3, -3}}, c1 = {{9, 9}, {4, -4}};
    in[c] = Value::sequences(std::vector<xt::xarray<double>>{c0, c1});
    const Value g = gradients(y * c, in, {x})[x];
    check_sequence(g, 0, xt::xarray<double>{{1, -1}, {2, -2}, {3, -3}});
    check_sequence(g, 1, xt::xarray<double>{{4, -4}});
    testing::require_gradients("scatter", y * c, in, {x});
}

TEST_CASE("sequence::scatter undoes sequence::gather, with all-true and length-1 sequences") {
    SequenceAxis axis;
    Variable x = sequence::input_variable({2}, "x", axis);
    Variable cond = sequence::input_variable({1}, "cond", axis);
    Variable round_trip = sequence::scatter(sequence::gather(x, cond), cond);
    auto seqs = testing::random_sequences({2}, {4, 3, 1}, 17);
    Bindings in{{x, Value::sequences(seqs)}, {cond, conditions({{0, 1, 1, 0}, {1, 1, 1}, {1}})}};
    const Value out = evaluate({round_trip}, in)[round_trip];
    xt::xarray<double> want0 = seqs[0];
    for (std::size_t j = 0; j < 2; ++j) want0(0, j) = want0(3, j) = 0;
    check_sequence(out, 0, want0);
    check_sequence(out, 1, seqs[1]);  // all true: the identity
    check_sequence(out, 2, seqs[2]);  // length 1
}

TEST_CASE("sequence::scatter refuses x with another number of steps than cond keeps") {
    SequenceAxis other;
    Variable cond = sequence::input_variable({1}, "cond");
    Variable x = sequence::input_variable({1}, "x", other);
    Variable y = sequence::scatter(x, cond);
    Bindings in{{cond, conditions({{1, 0, 1}, {1}})}, {x, conditions({{5}, {6}})}};
    expect_user_error([&] { evaluate({y}, in); }, {"sequence::scatter", "sequence 0", "1 steps", "non-zero on 2"});
    expect_user_error([&] { sequence::scatter(x, input_variable({1}, "flat")); }, {"sequence::scatter", "sequence"});
    expect_user_error([&] { sequence::scatter(x, sequence::input_variable({3}, "wide")); },
                      {"sequence::scatter", "[3]"});
}

TEST_CASE("to_sequence turns a padded batch value and lengths into sequences") {
    Variable padded = input_variable({4, 2}, "padded");  // per item: [T_max = 4, 2]
    Variable lengths = input_variable({1}, "lengths");
    Variable s = to_sequence(padded, lengths);
    CHECK(s.shape() == Shape{2});
    xt::xarray<double> data = xt::zeros<double>({3, 4, 2});
    for (std::size_t i = 0; i < data.size(); ++i) data.data()[i] = static_cast<double>(i);
    Bindings in{{padded, Value::batch(data)}, {lengths, Value::batch(column({2, 4, 1}))}};
    const Value out = evaluate({s}, in)[s];
    CHECK(out.layout().lengths() == std::vector<std::size_t>{2, 4, 1});
    check_sequence(out, 0, xt::xarray<double>{{0, 1}, {2, 3}});
    check_sequence(out, 1, xt::xarray<double>{{8, 9}, {10, 11}, {12, 13}, {14, 15}});
    check_sequence(out, 2, xt::xarray<double>{{16, 17}});

    // Gradient of the sum: 1 on the rows inside each length, 0 on the rows past it.
    xt::xarray<double> want = xt::zeros<double>({3, 4, 2});
    for (std::size_t t = 0; t < 2; ++t) xt::view(want, 0, t) = 1.0;
    for (std::size_t t = 0; t < 4; ++t) xt::view(want, 1, t) = 1.0;
    xt::view(want, 2, 0) = 1.0;
    const xt::xarray<double> g = gradients(s, in, {padded})[padded].rows<double>();
    REQUIRE(g.shape() == want.shape());
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g.data()[i] == want.data()[i]);
    testing::require_gradients("to_sequence", sequence::reduce_sum(tanh(s)) * 2.0, in, {padded});

    // The same sequences as Value::item_major_sequences makes directly.
    const Value direct = Value::item_major_sequences(data, {2, 4, 1});
    for (std::size_t n = 0; n < 3; ++n) check_sequence(direct, n, out.sequence<double>(n));
}

TEST_CASE("to_sequence of sequence::unpack gives back the sequences") {
    Variable x = sequence::input_variable({3}, "x");
    auto u = sequence::unpack(x, 7.0);
    Variable back = to_sequence(u.data, sequence::length(x));
    auto seqs = testing::random_sequences({3}, {1, 3, 7}, 23);
    Bindings in{{x, Value::sequences(seqs)}};
    const Value out = evaluate({back}, in)[back];
    for (std::size_t n = 0; n < 3; ++n) check_sequence(out, n, seqs[n]);
    // A per-item [T_max] value (the mask) becomes steps of shape [1]: all ones.
    Variable mask_seq = to_sequence(u.mask, sequence::length(x));
    CHECK(mask_seq.shape() == Shape{1});
    const Value m = evaluate({mask_seq}, in)[mask_seq];
    for (std::size_t n = 0; n < 3; ++n) check_sequence(m, n, xt::ones<double>({seqs[n].shape(0), std::size_t{1}}));
    testing::require_gradients("unpack then to_sequence", back * back, in, {x});
}

TEST_CASE("to_sequence and Value::item_major_sequences refuse lengths of 0 or above T") {
    Variable padded = input_variable({3, 1}, "padded");
    Variable lengths = input_variable({1}, "lengths");
    Variable s = to_sequence(padded, lengths);
    const xt::xarray<double> data = xt::ones<double>({2, 3, 1});
    auto with = [&](const std::vector<double>& l) {
        return Bindings{{padded, Value::batch(data)}, {lengths, Value::batch(column(l))}};
    };
    expect_user_error([&] { evaluate({s}, with({2, 0})); }, {"to_sequence", "item 1", "length 0", "1..3"});
    expect_user_error([&] { evaluate({s}, with({4, 1})); }, {"to_sequence", "item 0", "length 4", "3 steps"});
    expect_user_error([&] { evaluate({s}, with({1.5, 1})); }, {"to_sequence", "item 0", "1.5"});
    expect_user_error([&] { to_sequence(sequence::input_variable({3}), lengths); }, {"to_sequence", "batch"});
    expect_user_error([&] { to_sequence(padded, input_variable({2})); }, {"to_sequence", "lengths"});

    expect_user_error(
        [&] {
            Value::item_major_sequences(data, {2, 0});
        },
        {"Value::item_major_sequences", "item 1", "length 0"});
    expect_user_error(
        [&] {
            Value::item_major_sequences(data, {4, 1});
        },
        {"Value::item_major_sequences", "item 0", "length 4"});
    expect_user_error([&] { Value::item_major_sequences(data, {1}); },
                      {"Value::item_major_sequences", "1 lengths for 2 items"});
    expect_user_error(
        [&] {
            Value::item_major_sequences(xt::xarray<double>{1, 2}, {1});
        },
        {"Value::item_major_sequences", "[N, T"});
}
