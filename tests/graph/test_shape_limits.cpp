// Shapes the engine cannot hold are refused where the graph is built, with a UserError naming the
// node or op and the shapes: zero-size dimensions, element counts that would overflow, ids that
// float storage cannot hold exactly, and placeholders bound into cycles without an op.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include <loom.hpp>
#include "test_support.hpp"

using namespace loom;
using loom::testing::expect_user_error;

TEST_CASE("zero-size dimensions are refused for parameters, inputs, constants and op results") {
    expect_user_error([] { parameter({3, 0}, glorot_uniform(), "W"); }, {"parameter 'W'", "[3, 0]", "zero-size"});
    expect_user_error([] { input_variable({0}, "x"); }, {"input 'x'", "[0]", "zero-size"});
    expect_user_error([] { sequence::input_variable({2, 0}, "s"); }, {"input 's'", "[2, 0]"});
    expect_user_error([] { placeholder({0}, "p"); }, {"placeholder 'p'", "[0]"});
    Variable x = input_variable({4});
    expect_user_error([&] { slice(x, 0, 2, 2); }, {"slice", "[4]"});
    expect_user_error([&] { reshape(x, {4, 0}); }, {"reshape", "[4, 0]"});
    // Through the layers, as `qa_similarity --embed 0` / `--hidden 0` reached them.
    Variable ids = sequence::input_variable({1}, "ids");
    expect_user_error([&] { layers::Embedding(0, 10)(ids); }, {"zero-size"});
    expect_user_error([&] { layers::Dense(0)(x); }, {"zero-size"});
    expect_user_error([&] { layers::Recurrence(layers::LSTM(0))(sequence::input_variable({3})); }, {"zero-size"});
}

TEST_CASE("element counts that overflow are refused instead of wrapping around") {
    // 2^32 x 2^32 wraps to 0 elements in 64 bits; it was accepted with no storage.
    expect_user_error(
        [] {
            parameter({4294967296ull, 4294967296ull}, glorot_uniform(), "huge");
        },
        {"parameter 'huge'", "[4294967296, 4294967296]", "2^48"});
    Variable x = input_variable({4});
    // 2^62 * 4 wraps to 0; 2^33 * 2^31 = 2^64 wraps to 0 as well.
    expect_user_error([&] { reshape(x, {std::size_t{1} << 62, 4}); }, {"reshape", "2^48"});
    expect_user_error([&] { reshape(x, {std::size_t{1} << 33, std::size_t{1} << 31}); }, {"reshape"});
    // A product of in-range operands can still be too large: the op's result is checked too.
    Variable a = input_variable({std::size_t{1} << 24, 1});
    Variable b = input_variable({1, std::size_t{1} << 25});
    expect_user_error([&] { plus(a, b); }, {"plus", "2^48"});
}

TEST_CASE("token ids above 2^24 are refused, not rounded to a neighbouring row") {
    CHECK_NOTHROW(Value::index_sequences({{0, 16777216}}));
    expect_user_error(
        [] {
            Value::index_sequences({{1, 2}, {3, 16777217}});
        },
        {"Value::index_sequences", "16777217", "sequence 1", "step 1", "2^24"});
    // The largest exact id reads exactly its own row.
    Variable ids = sequence::input_variable({1}, "ids");
    Variable table = input_variable({1});  // any batch value: embedding's table is a static operand
    xt::xarray<float> rows = xt::zeros<float>({std::size_t{3}, std::size_t{2}});
    rows(2, 0) = 5.0f;
    Parameter t = parameter(rows, "table");
    auto out = evaluate({embedding(ids, t)}, {{ids, Value::index_sequences({{2, 0}})}});
    CHECK(out.begin()->second.sequence(0)(0, 0) == 5.0f);
}

TEST_CASE("a placeholder bound to itself or through other placeholders back to itself is named as such") {
    Variable p = placeholder({1}, "p");
    expect_user_error([&] { p.replace_placeholders({{p, p}}); }, {"'p'", "itself"});
    Variable a = placeholder({1}, "a"), b = placeholder({1}, "b"), c = placeholder({1}, "c");
    a.replace_placeholders({{a, b}});
    b.replace_placeholders({{b, c}});
    expect_user_error([&] { c.replace_placeholders({{c, a}}); }, {"'c'", "'a'", "cycle of placeholders"});
    // Bound to an op that uses it, through a delay: a proper loop, accepted.
    Variable q = placeholder({1}, "q");
    Variable s = sequence::input_variable({1}, "s");
    Variable h = s + past_value(q);
    CHECK_NOTHROW(h.replace_placeholders({{q, h}}));
}
