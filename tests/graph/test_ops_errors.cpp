// Every shape rule of the non-sequence ops rejects bad operands with a loom::UserError whose message
// names the op and the shapes involved (and, for one_hot, the offending id at run time).
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include <loom.hpp>

using namespace loom;

namespace {

// Runs `build`, which must throw a UserError mentioning every one of `needles`.
void expect_error(const std::function<void()>& build, const std::vector<std::string>& needles) {
    CHECK_THROWS_AS(build(), UserError);
    try {
        build();
    } catch (const UserError& e) {
        const std::string message = e.what();
        for (const auto& needle : needles) {
            INFO("message: " << message);
            INFO("expected to contain: " << needle);
            CHECK(message.find(needle) != std::string::npos);
        }
    } catch (...) {
    }
}

}  // namespace

TEST_CASE("reductions and softmax reject an axis outside the sample") {
    Variable x = input_variable({3, 4});
    expect_error([&] { reduce_sum(x, 2); }, {"reduce_sum", "axis 2", "[3, 4]"});
    expect_error([&] { reduce_mean(x, -3); }, {"reduce_mean", "axis -3", "[3, 4]"});
    expect_error([&] { reduce_max(x, 5); }, {"reduce_max", "[3, 4]"});
    expect_error([&] { reduce_min(x, 7); }, {"reduce_min", "[3, 4]"});
    expect_error([&] { reduce_log_sum_exp(x, 2); }, {"reduce_log_sum_exp", "[3, 4]"});
    expect_error([&] { softmax(x, 2); }, {"softmax", "axis 2", "[3, 4]"});
    expect_error([&] { log_softmax(x, -3); }, {"log_softmax", "[3, 4]"});
    // A zero-size sample cannot even be declared (tests/graph/test_shape_limits.cpp).
    expect_error([&] { input_variable({0}); }, {"input", "[0]", "zero-size"});
}

TEST_CASE("splice requires equal ranks, matching other axes and one sequence axis") {
    Variable a = input_variable({2, 3}), b = input_variable({3}), c = input_variable({2, 4});
    expect_error([&] { splice({a, b}, 0); }, {"splice", "rank", "[2, 3]", "[3]"});
    expect_error([&] { splice({a, c}, 0); }, {"splice", "axis 0", "[2, 3]", "[2, 4]"});
    expect_error([&] { splice({a, c}, 2); }, {"splice", "axis 2", "[2, 3]"});
    Variable s = sequence::input_variable({2}), t = sequence::input_variable({2});
    expect_error([&] { splice({s, t}); }, {"splice", "sequence", "[2]"});
    expect_error([&] { splice({}); }, {"splice"});
}

TEST_CASE("slice rejects a bad axis and ranges that select nothing") {
    Variable x = input_variable({3, 4});
    expect_error([&] { slice(x, 2, 0, 1); }, {"slice", "axis 2", "[3, 4]"});
    expect_error([&] { slice(x, 1, 3, 2); }, {"slice", "[3, 2)", "[3, 4]"});
    expect_error([&] { slice(x, 1, 0, 5); }, {"slice", "size 4", "[3, 4]"});
    expect_error([&] { slice(x, 0, -4, 0); }, {"slice", "size 3", "[3, 4]"});
}

TEST_CASE("reshape requires the same number of elements") {
    Variable x = input_variable({3, 4});
    expect_error([&] { reshape(x, {5, 2}); }, {"reshape", "[5, 2]", "[3, 4]", "12", "10"});
}

TEST_CASE("transpose requires a permutation of the sample axes") {
    Variable x = input_variable({2, 3, 4});
    expect_error([&] { transpose(x, {1, 0}); }, {"transpose", "(1, 0)", "[2, 3, 4]"});
    expect_error([&] { transpose(x, {0, 0, 1}); }, {"transpose", "(0, 0, 1)", "[2, 3, 4]"});
    expect_error([&] { transpose(x, {0, 1, 3}); }, {"transpose", "[2, 3, 4]"});
}

TEST_CASE("one_hot requires ids of shape (1) and ids within range at run time") {
    Variable wide = sequence::input_variable({2});
    expect_error([&] { one_hot(wide, 4); }, {"one_hot", "[2]"});
    Variable ids = sequence::input_variable({1});
    expect_error([&] { one_hot(ids, 0); }, {"one_hot", "[1]"});
    Variable h = one_hot(ids, 4);
    expect_error([&] { evaluate({h}, {{ids, Value::index_sequences({{1, 7}, {2}})}}); }, {"one_hot", "7", "4"});
    xt::xarray<float> half = xt::zeros<float>({1, 1});
    half(0, 0) = 0.5f;  // one step holding id 0.5
    std::vector<xt::xarray<float>> bad{half};
    expect_error([&] { evaluate({h}, {{ids, Value::sequences(bad)}}); }, {"one_hot", "0.5"});
}

TEST_CASE("top_k requires 1 <= k <= the last axis") {
    Variable x = input_variable({2, 5});
    expect_error([&] { top_k(x, 6); }, {"top_k", "k = 6", "[2, 5]"});
    expect_error([&] { top_k(x, 0); }, {"top_k", "k = 0", "[2, 5]"});
    Variable scalar = constant(3.0);
    expect_error([&] { top_k(scalar, 1); }, {"top_k", "[]"});
}

TEST_CASE("losses require operands of the same shape on one sequence axis") {
    Variable a = input_variable({3}), b = input_variable({4});
    expect_error([&] { squared_error(a, b); }, {"squared_error", "[3]", "[4]"});
    expect_error([&] { binary_cross_entropy(a, b); }, {"binary_cross_entropy", "[3]", "[4]"});
    expect_error([&] { cross_entropy_with_softmax(a, b); }, {"cross_entropy_with_softmax", "[3]", "[4]"});
    expect_error([&] { classification_error(a, b); }, {"classification_error", "[3]", "[4]"});
    expect_error([&] { cosine_distance(a, b); }, {"cosine_distance", "[3]", "[4]"});
    Variable s = sequence::input_variable({3}), t = sequence::input_variable({3});
    expect_error([&] { squared_error(s, t); }, {"squared_error", "sequence"});
    expect_error([&] { cross_entropy_with_softmax(s, t); }, {"cross_entropy_with_softmax", "sequence"});
}

TEST_CASE("times and times_transpose reject mismatched inner dimensions") {
    Variable x = input_variable({3});
    Parameter w = parameter({4, 2}, glorot_uniform());
    expect_error([&] { times(x, w); }, {"times", "[3]", "[4, 2]"});
    Parameter v = parameter({2, 4}, glorot_uniform());
    expect_error([&] { times_transpose(x, v); }, {"times_transpose", "[3]", "[2, 4]"});
}
