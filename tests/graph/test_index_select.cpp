// Static inputs (static_input_variable) and index_select (graph/ops/embedding.cpp): values against
// loops written here, the binding errors naming the input and the call, and an index outside the
// items refused by name. index_select's gradients are rows of tests/graph/test_gradcheck_ops.cpp;
// attention over its picks is tested in tests/graph/test_attention_op.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "gradcheck.hpp"

#include "graph/executor.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;
using loom::testing::random_tensor;

namespace {

using Matrix = xt::xarray<double>;

// The item numbers of `rows` rows, as a batch Value [rows, 1].
Value item_numbers(const std::vector<double>& items) {
    Matrix a = xt::zeros<double>({items.size(), std::size_t{1}});
    for (std::size_t r = 0; r < items.size(); ++r) a(r, 0) = items[r];
    return Value::batch(a);
}

// The message of the UserError `f` throws ("nothing thrown" if none).
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const UserError& e) {
        return e.what();
    }
    return "nothing thrown";
}

// Whether `message` holds every one of `parts`.
bool holds(const std::string& message, std::initializer_list<const char*> parts) {
    for (const char* p : parts)
        if (message.find(p) == std::string::npos) return false;
    return true;
}

}  // namespace

TEST_CASE("a static input is bound to one tensor, read in place, and takes no part in the batch size") {
    Variable items = static_input_variable({any_size, 2}, "items");
    Variable x = input_variable({2}, "x");
    CHECK(items.axis() == Axis::none());
    Variable out = x * reshape(reduce_sum(items, 0), {2});  // 5 rows of x; 3 items
    const Matrix it = random_tensor({3, 2}, 1), xv = random_rows({2}, 5, 2);
    const Value got = evaluate({out}, {{items, Value::tensor(it)}, {x, Value::batch(xv)}}, DType::f64)[out];
    REQUIRE(got.num_items() == 5);
    for (std::size_t r = 0; r < 5; ++r)
        for (std::size_t c = 0; c < 2; ++c)
            CHECK(got.data<double>()(r, c) ==
                  doctest::Approx(xv(r, c) * (it(0, c) + it(1, c) + it(2, c))).epsilon(1e-14));

    SUBCASE("read in place in the execution's precision, converted once per bind in the other") {
        const Bindings in{{items, Value::tensor(xt::xarray<float>(it))}, {x, Value::batch(xt::xarray<float>(xv))}};
        Execution<float> same(compile({out}));
        same.bind(in);
        CHECK(same.elements_copied() == 0);
        Execution<double> other(compile({out}));
        other.bind(in);
        CHECK(other.elements_copied() == 3 * 2 + 5 * 2);
    }
    SUBCASE("a batch Value bound to it is refused, naming the input and the call") {
        const std::string m = error_of([&] { evaluate({out}, {{items, Value::batch(it)}, {x, Value::batch(xv)}}); });
        CHECK_MESSAGE(
            holds(m, {"evaluate: input 'items'", "is a static input but was bound to a batch value", "Value::tensor"}),
            m);
    }
    SUBCASE("a tensor of the wrong shape is refused, naming the input and the shapes") {
        const std::string m = error_of([&] {
            evaluate({out}, {{items, Value::tensor(random_tensor({3, 4}, 3))}, {x, Value::batch(xv)}});
        });
        CHECK_MESSAGE(holds(m, {"evaluate: input 'items'", "has sample shape [0, 2]"}), m);
    }
    SUBCASE("a static Value bound to a batch input is refused as before") {
        const std::string m = error_of([&] { evaluate({out}, {{items, Value::tensor(it)}, {x, Value::tensor(xv)}}); });
        CHECK_MESSAGE(holds(m, {"evaluate: input 'x'", "bound to a static value"}), m);
    }
}

TEST_CASE("index_select: row r is item index[r], over a batch and over ragged sequences") {
    Variable items = static_input_variable({any_size, 2, 3}, "items");
    const Matrix it = random_tensor({4, 2, 3}, 4);
    SUBCASE("a batch index; rows share items") {
        Variable index = input_variable({1}, "index");
        Variable out = index_select(items, index);
        CHECK(out.shape() == Shape{2, 3});
        CHECK(out.axis() == Axis::batch());
        const std::vector<double> picks{3, 0, 3, 1, 0};
        const auto got =
            evaluate({out}, {{items, Value::tensor(it)}, {index, item_numbers(picks)}}, DType::f64)[out].data<double>();
        for (std::size_t r = 0; r < picks.size(); ++r)
            for (std::size_t i = 0; i < 2; ++i)
                for (std::size_t j = 0; j < 3; ++j) CHECK(got(r, i, j) == it(static_cast<std::size_t>(picks[r]), i, j));
    }
    SUBCASE("a sequence index of lengths 1, 3 and 7") {
        Variable index = sequence::input_variable({1}, "index");
        auto ids = random_sequences({1}, {1, 3, 7}, 5, 0, 4 - 1e-9);
        for (auto& s : ids) s = xt::floor(s);
        Variable out = index_select(items, index);
        const Value got =
            evaluate({out}, {{items, Value::tensor(it)}, {index, Value::sequences(ids)}}, DType::f64)[out];
        for (std::size_t n = 0; n < 3; ++n) {
            const Matrix s = got.sequence<double>(n);
            REQUIRE(s.shape()[0] == ids[n].shape()[0]);
            for (std::size_t t = 0; t < s.shape()[0]; ++t)
                for (std::size_t i = 0; i < 2; ++i)
                    for (std::size_t j = 0; j < 3; ++j)
                        CHECK(s(t, i, j) == it(static_cast<std::size_t>(ids[n](t, 0)), i, j));
        }
    }
    SUBCASE("an index outside the items is a UserError naming the op, the index and N") {
        Variable index = input_variable({1}, "index");
        Variable out = index_select(items, index);
        CHECK_THROWS_WITH_AS(evaluate({out}, {{items, Value::tensor(it)}, {index, item_numbers({1, 4})}}),
                             doctest::Contains("index_select: index 4 is not one of the 4 items"), UserError);
        CHECK_THROWS_WITH_AS(evaluate({out}, {{items, Value::tensor(it)}, {index, item_numbers({-1})}}),
                             doctest::Contains("index_select: index -1"), UserError);
    }
    SUBCASE("shape errors: dynamic items, an index of more than one number") {
        std::string m = error_of([&] { index_select(input_variable({3}), input_variable({1})); });
        CHECK_MESSAGE(holds(m, {"index_select", "must be static"}), m);
        m = error_of([&] { index_select(items, input_variable({2})); });
        CHECK_MESSAGE(holds(m, {"index_select", "sample shape [1]"}), m);
    }
}

TEST_CASE("gather_rows: each row's table rows at its indices, of a size fixed or known at run time") {
    Variable table = static_input_variable({any_size, 2}, "table");
    Variable pages = input_variable({any_size}, "pages"), three = input_variable({3}, "three");
    const Matrix t = random_tensor({4, 2}, 41);
    const Matrix ids{{3, 0, 3}, {1, 2, 2}};
    for (const Variable& indices : {pages, three}) {
        Variable out = gather_rows(table, indices);
        CHECK(out.shape() == Shape{indices == three ? std::size_t{3} : std::size_t{0}, 2});
        const Matrix got =
            evaluate({out}, {{table, Value::tensor(t)}, {indices, Value::batch(ids)}}, DType::f64)[out].data<double>();
        REQUIRE(got.shape() == std::vector<std::size_t>{2, 3, 2});
        for (std::size_t r = 0; r < 2; ++r)
            for (std::size_t j = 0; j < 3; ++j)
                for (std::size_t c = 0; c < 2; ++c) CHECK(got(r, j, c) == t(static_cast<std::size_t>(ids(r, j)), c));
    }
    SUBCASE("an index outside the table, or not a whole number, is refused by name") {
        Variable out = gather_rows(table, pages);
        for (double bad : {4.0, -1.0, 1.5}) {
            Matrix b = ids;
            b(1, 1) = bad;
            const std::string m = error_of([&] {
                evaluate({out}, {{table, Value::tensor(t)}, {pages, Value::batch(b)}});
            });
            CHECK_MESSAGE(holds(m, {"gather_rows: index", "is not a row of the table of 4 rows"}), m);
        }
    }
    SUBCASE("a table with dynamic axes, or indices that are no vector, are shape errors") {
        CHECK_THROWS_WITH_AS(gather_rows(input_variable({4, 2}), pages), doctest::Contains("must be static"),
                             UserError);
        CHECK_THROWS_WITH_AS(gather_rows(table, input_variable({2, 2})), doctest::Contains("a vector [k] per row"),
                             UserError);
    }
}
