// The contract's natural calls to make Values compile and pick the element type the user wrote:
// float arrays (or float literals) give float storage, double arrays give double; braced lists work;
// a default-made Value is empty; padded data in either layout; the names 0.2.0 had.
#include <doctest/doctest.h>

#include <vector>

#include <xtensor/xtensor.hpp>

#include <loom.hpp>

using namespace loom;

TEST_CASE("Value::sequences takes braced float or double arrays as DESIGN.md writes it") {
    xt::xarray<float> seq0 = {{1, 2, 3}, {4, 5, 6}}, seq1 = {{7, 8, 9}};
    const Value two = Value::sequences({seq0, seq1});
    CHECK(two.dtype() == DType::f32);
    CHECK(two.layout().length(0) == 2);
    CHECK(two.layout().length(1) == 1);
    CHECK(two.sequence(1)(0, 2) == 9.0f);
    CHECK(Value::sequences({seq0}).dtype() == DType::f32);

    xt::xarray<double> d0 = {{0.5, 9.0}, {1.5, 9.0}, {2.5, 9.0}};
    const Value dv = Value::sequences({d0, d0});
    CHECK(dv.dtype() == DType::f64);
    CHECK(dv.sequence<double>(1)(2, 0) == 2.5);

    const std::vector<xt::xarray<float>> fs{seq0, seq1};
    CHECK(Value::sequences(fs).dtype() == DType::f32);
    const std::vector<xt::xarray<double>> ds{d0};
    CHECK(Value::sequences(ds).dtype() == DType::f64);

    // Fixed-rank xtensor arrays convert too, keeping their element type.
    xt::xtensor<double, 2> t0 = {{1.0, 2.0}}, t1 = {{3.0, 4.0}, {5.0, 6.0}};
    const Value tv = Value::sequences({t0, t1});
    CHECK(tv.dtype() == DType::f64);
    CHECK(tv.layout().length(1) == 2);
}

TEST_CASE("Value::batch and Value::tensor take arrays and braced lists") {
    xt::xarray<float> rows = {{1, 2}, {3, 4}, {5, 6}};
    CHECK(Value::batch(rows).num_items() == 3);
    CHECK(Value::batch(rows).dtype() == DType::f32);
    xt::xarray<double> drows = {{1, 2}};
    CHECK(Value::batch(drows).dtype() == DType::f64);

    const Value braced = Value::batch({{1.0, 2.0}, {3.0, 4.0}});
    CHECK(braced.dtype() == DType::f32);  // float is loom's default element type
    CHECK(braced.num_items() == 2);
    CHECK(braced.rows()(1, 0) == 3.0f);
    CHECK(Value::batch({1, 2, 3}).num_items() == 3);

    const Value t = Value::tensor({{1, 2}, {3, 4}});
    CHECK(t.kind() == Value::Kind::Static);
    CHECK(t.sample_shape() == Shape{2, 2});
    CHECK(Value::tensor({0.5, 1.5, 2.5}).sample_shape() == Shape{3});
    CHECK(Value::tensor(xt::xarray<float>{1.0f}).dtype() == DType::f32);
    CHECK(Value::tensor(xt::xarray<double>{1.0}).dtype() == DType::f64);
    xt::xtensor<double, 1> fixed = {1.0, 2.0};
    CHECK(Value::tensor(fixed).dtype() == DType::f64);
    CHECK(Value::batch(xt::xtensor<float, 2>{{1.0f}}).dtype() == DType::f32);
}

TEST_CASE("Value::empty: a default-made or moved-from Value is empty, a scalar or a batch is not") {
    CHECK(Value().empty());
    Value batch = Value::batch(xt::xarray<double>{{1.0, 2.0}});
    CHECK_FALSE(batch.empty());
    const Value taken = std::move(batch);
    CHECK_FALSE(taken.empty());
    CHECK(batch.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty, as documented
    CHECK_FALSE(Value::tensor(xt::xarray<float>(2.0f)).empty());
}

TEST_CASE("Value::time_major_sequences and item_major_sequences: the same sequences from either layout") {
    // Two items of lengths 3 and 1, sample [2]; item n's step t holds (10n + t, -(10n + t)).
    const std::vector<std::size_t> lengths{3, 1};
    xt::xarray<double> time_major = xt::zeros<double>({3, 2, 2}), item_major = xt::zeros<double>({2, 3, 2});
    for (std::size_t n = 0; n < 2; ++n)
        for (std::size_t t = 0; t < lengths[n]; ++t)
            for (std::size_t k = 0; k < 2; ++k) {
                const double v = (k ? -1.0 : 1.0) * static_cast<double>(10 * n + t);
                time_major(t, n, k) = v;
                item_major(n, t, k) = v;
            }
    const Value a = Value::time_major_sequences(time_major, std::make_shared<const SequenceLayout>(lengths));
    const Value b = Value::item_major_sequences(item_major, lengths);
    for (std::size_t n = 0; n < 2; ++n) {
        CHECK(a.sequence<double>(n) == b.sequence<double>(n));
        CHECK(a.sequence<double>(n)(lengths[n] - 1, 1) == -static_cast<double>(10 * n + lengths[n] - 1));
    }
    // Each refuses the other's layout by its own name: [N, T] data is no [T_max, N] for this layout.
    CHECK_THROWS_WITH_AS(Value::time_major_sequences(item_major, std::make_shared<const SequenceLayout>(lengths)),
                         doctest::Contains("Value::time_major_sequences: data of shape [2, 3, 2] does not fit"),
                         UserError);
}

// The names 0.2.0 had still compile (deprecated) and give what their new names give.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
TEST_CASE(
    "deprecated Value names: padded, from_padded and the reader batch() as time_major_sequences, "
    "item_major_sequences and rows()") {
    const std::vector<std::size_t> lengths{2, 1};
    xt::xarray<float> time_major = xt::zeros<float>({2, 2, 1});  // [T_max, N, 1]: item 0 is 1, 3; item 1 is 2
    time_major(0, 0, 0) = 1.0f;
    time_major(0, 1, 0) = 2.0f;
    time_major(1, 0, 0) = 3.0f;
    const auto layout = std::make_shared<const SequenceLayout>(lengths);
    const Value old_time = Value::padded(time_major, layout),
                new_time = Value::time_major_sequences(time_major, layout);
    xt::xarray<float> item_major = xt::zeros<float>({2, 2, 1});  // [N, T, 1]: the same items
    item_major(0, 0, 0) = 1.0f;
    item_major(0, 1, 0) = 3.0f;
    item_major(1, 0, 0) = 2.0f;
    const Value old_item = Value::from_padded(item_major, lengths);
    const Value new_item = Value::item_major_sequences(item_major, lengths);
    for (std::size_t n = 0; n < 2; ++n) {
        CHECK(old_time.sequence(n) == new_time.sequence(n));
        CHECK(old_item.sequence(n) == new_item.sequence(n));
        CHECK(old_item.sequence(n) == new_time.sequence(n));
    }
    const Value rows = Value::batch({{1.0, 2.0}, {3.0, 4.0}});
    CHECK(rows.batch() == rows.rows());
    CHECK(rows.batch<double>() == rows.rows<double>());
    CHECK_THROWS_WITH_AS((void)new_time.batch(), doctest::Contains("Value::rows"), UserError);
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
