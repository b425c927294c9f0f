// Binding inputs and constants without needless copies (graph/executor.hpp, graph/buffers.hpp): a
// Value of the execution's precision is read in place unless its padding holds something other than
// zeros; one of the other precision is converted once; a constant is converted once per execution.
// Expected values are written from the inputs by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include <loom.hpp>

#include "test_support.hpp"

#include "graph/executor.hpp"

using namespace loom;

namespace {
using loom::testing::node_of;
template <class T>
const T* storage_of(const Value& v) {
    return v.data<T>().data();  // the const accessor: no copy made by asking
}
// Whether every padded position of a time-major [T, N, row] buffer holds +0.0 exactly.
template <class T>
bool padding_is_plus_zero(std::span<const T> data, const SequenceLayout& layout, std::size_t row) {
    for (std::size_t t = 0; t < layout.max_length(); ++t)
        for (std::size_t n = 0; n < layout.num_sequences(); ++n)
            if (!layout.valid(t, n))
                for (std::size_t k = 0; k < row; ++k) {
                    const T x = data[(t * layout.num_sequences() + n) * row + k];
                    if (x != T(0) || std::signbit(x)) return false;
                }
    return true;
}
}  // namespace

TEST_CASE("binding: a Value copied into Bindings shares its storage, and a change to the copy leaves the original") {
    Variable x = sequence::input_variable({2}, "x");
    const Value v = Value::sequences({xt::xarray<float>{{1, 2}, {3, 4}}, xt::xarray<float>{{5, 6}}});
    Bindings b{{x, v}};
    CHECK(storage_of<float>(std::as_const(b).at(x)) == storage_of<float>(v));

    Value copy = v;
    copy.data<float>()(0, 0, 0) = 100.f;  // the copy detaches before it is changed
    CHECK(v.data<float>()(0, 0, 0) == 1.f);
    CHECK(copy.data<float>()(0, 0, 0) == 100.f);
    CHECK(storage_of<float>(copy) != storage_of<float>(v));
}

TEST_CASE("binding: a float sequence Value bound to a float execution is read in place") {
    Variable x = sequence::input_variable({2}, "x");
    Variable y = x * constant(3.0);
    Execution<float> ex(compile({y}));
    const Value v = Value::sequences({xt::xarray<float>{{1, 2}, {3, 4}}, xt::xarray<float>{{5, 6}}});
    ex.bind({{x, v}});
    ex.forward();
    const int ix = node_of(ex.plan(), x), iy = node_of(ex.plan(), y);
    CHECK(std::as_const(ex).value_buffer(ix).data() == storage_of<float>(v));
    // [T=2, N=2, 2]: step 0 of both sequences, then step 1 of the first; the second's is padding.
    const std::vector<float> expected{3, 6, 15, 18, 9, 12, 0, 0};
    const std::span<const float> out = std::as_const(ex).value_buffer(iy);
    REQUIRE(out.size() == expected.size());
    for (std::size_t e = 0; e < expected.size(); ++e) CHECK(out[e] == expected[e]);
}

TEST_CASE("binding: a batch Value of the execution's precision is read in place, in float and in double") {
    Variable x = input_variable({3}, "x");
    Variable y = reduce_sum(x);
    {
        Execution<float> ex(compile({y}));
        const Value v = Value::batch(xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
        ex.bind({{x, v}});
        ex.forward();
        CHECK(std::as_const(ex).value_buffer(node_of(ex.plan(), x)).data() == storage_of<float>(v));
        const std::span<const float> out = std::as_const(ex).value_buffer(node_of(ex.plan(), y));
        REQUIRE(out.size() == 2);
        CHECK(out[0] == 6.f);
        CHECK(out[1] == 15.f);
    }
    {
        Execution<double> ex(compile({y}));
        const Value v = Value::batch(xt::xarray<double>{{1, 2, 3}, {4, 5, 6}});
        ex.bind({{x, v}});
        ex.forward();
        CHECK(std::as_const(ex).value_buffer(node_of(ex.plan(), x)).data() == storage_of<double>(v));
    }
}

TEST_CASE("binding: a float Value bound to a double execution is converted into a buffer of its own") {
    Variable x = input_variable({2}, "x");
    Variable y = reduce_sum(x);
    Execution<double> ex(compile({y}));
    const Value v = Value::batch(xt::xarray<float>{{0.1f, 0.2f}});
    ex.bind({{x, v}});
    ex.forward();
    const std::span<const double> in = std::as_const(ex).value_buffer(node_of(ex.plan(), x));
    REQUIRE(in.size() == 2);
    CHECK(in[0] == static_cast<double>(0.1f));
    CHECK(in[1] == static_cast<double>(0.2f));
    CHECK(std::as_const(ex).value_buffer(node_of(ex.plan(), y))[0] ==
          static_cast<double>(0.1f) + static_cast<double>(0.2f));
}

TEST_CASE("binding: NaN or -0 in a Value's padding is not read in place: the execution's copy has zero padding") {
    Variable x = sequence::input_variable({1}, "x");
    Variable y = sequence::reduce_sum(x);
    // [T=3, N=2, 1], lengths 3 and 1: positions (1, 1) and (2, 1) are padding.
    for (float pad : {std::numeric_limits<float>::quiet_NaN(), -0.0f}) {
        auto data = xt::xarray<float>::from_shape({3, 2, 1});
        const float elements[] = {1, 10, 2, pad, 4, pad};
        std::copy(std::begin(elements), std::end(elements), data.begin());
        auto layout = std::make_shared<const SequenceLayout>(std::vector<std::size_t>{3, 1});
        const Value v = Value::time_major_sequences(std::move(data), layout);
        Execution<float> ex(compile({y}));
        ex.bind({{x, v}});
        ex.forward();
        const std::span<const float> in = std::as_const(ex).value_buffer(node_of(ex.plan(), x));
        CHECK(in.data() != storage_of<float>(v));
        CHECK(padding_is_plus_zero(in, *layout, 1));
        CHECK(std::isnan(v.data<float>()(1, 1, 0)) == std::isnan(pad));  // the user's Value is untouched
        const std::span<const float> out = std::as_const(ex).value_buffer(node_of(ex.plan(), y));
        REQUIRE(out.size() == 2);
        CHECK(out[0] == 7.f);
        CHECK(out[1] == 10.f);
    }
}

TEST_CASE("binding: a constant is read in place by a double execution, and its buffer survives a second bind") {
    Variable x = input_variable({2}, "x");
    Variable c = constant(xt::xarray<double>{0.5, 0.25}, "c");
    Variable y = reduce_sum(x * c);
    Execution<double> ex(compile({y}));
    const int ic = node_of(ex.plan(), c);
    ex.bind({{x, Value::batch(xt::xarray<double>{{2, 4}})}});
    ex.forward();
    CHECK(std::as_const(ex).value_buffer(ic).data() == ex.plan().nodes[ic].node->constant_value.data());
    ex.bind({{x, Value::batch(xt::xarray<double>{{8, 16}})}});
    ex.forward();
    CHECK(std::as_const(ex).value_buffer(node_of(ex.plan(), y))[0] == 8.0);
}

TEST_CASE("binding: elements copied per bind: none for Values read in place, a constant converted once per execution") {
    Variable x = sequence::input_variable({2}, "x");
    Variable c = constant(xt::xarray<double>{0.5, 0.25, 0.125}, "c");  // 3 elements
    Variable y = sequence::reduce_sum(x) * reduce_sum(c);
    const Value v = Value::sequences({xt::xarray<float>{{1, 2}, {3, 4}}, xt::xarray<float>{{5, 6}}});
    {
        Execution<float> ex(compile({y}));
        for (int pass = 0; pass < 3; ++pass) {
            ex.bind({{x, v}});
            ex.forward();
            CHECK(ex.elements_copied() == 3);  // the constant's first conversion only
        }
    }
    {
        Execution<double> ex(compile({y}));
        for (int pass = 1; pass <= 3; ++pass) {
            ex.bind({{x, v}});  // float into double: 8 elements converted (padding included) per bind
            ex.forward();
            CHECK(ex.elements_copied() == std::size_t(8 * pass));
        }
        CHECK(std::as_const(ex).value_buffer(node_of(ex.plan(), y))[0] == (1.0 + 3.0) * 0.875);
    }
    {
        // A gradient check perturbs its inputs: they are bound as copies.
        Execution<double> ex(compile({y}));
        ex.copy_leaves();
        ex.bind({{x, Value::sequences({xt::xarray<double>{{1, 2}}})}});
        CHECK(ex.elements_copied() == 2);
        CHECK(ex.mutable_value_buffer(node_of(ex.plan(), x)).size() == 2);
    }
}
