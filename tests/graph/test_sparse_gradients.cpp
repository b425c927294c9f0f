// Row-sparse gradients of embedding tables: the session knows which rows a backward wrote, zeroes
// only those before the next one, and lazy Adam visits only them.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>

#include <loom.hpp>

using namespace loom;

namespace {
struct Lookup {
    Variable ids = sequence::input_variable({1}, "ids");
    Parameter table;
    Variable loss;
    explicit Lookup(const xt::xarray<float>& init) : table(parameter(init, "table")) {
        loss = sequence::reduce_sum(square(embedding(ids, table)) * constant(xt::xarray<double>{1.0, 2.0}));
    }
};

xt::xarray<float> table_init() {
    xt::xarray<float> t = xt::zeros<float>({std::size_t{6}, std::size_t{2}});
    for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = 0.1f * static_cast<float>(i) - 0.4f;
    return t;
}
}  // namespace

TEST_CASE("an embedding table's gradient lists its rows and is re-zeroed row by row") {
    Lookup m(table_init());
    Session s({m.loss}, {m.table});
    s.forward({{m.ids, Value::index_sequences({{4, 1, 4}, {2}})}});
    s.backward();
    REQUIRE(s.gradient(m.table).by_rows);
    CHECK(s.gradient(m.table).by_rows->sorted == std::vector<std::size_t>{1, 2, 4});
    // Second minibatch with other ids: rows 1, 2 and 4 must be zero again, only 0 and 5 set.
    s.forward({{m.ids, Value::index_sequences({{0}, {5, 5}})}});
    s.backward();
    CHECK(s.gradient(m.table).by_rows->sorted == std::vector<std::size_t>{0, 5});
    auto g = s.gradient(m.table).to_dense();
    const auto w = m.table.value();
    for (std::size_t r = 0; r < 6; ++r)
        for (std::size_t j = 0; j < 2; ++j) {
            // d/dw of sum over uses of (j + 1) * w^2 = 2 (j + 1) w per use.
            const double uses = r == 0 ? 1 : r == 5 ? 2 : 0;
            CHECK(g[r * 2 + j] == doctest::Approx(uses * 2.0 * (j + 1) * w(r, j)));
        }
}

TEST_CASE("a gradient reference: its form known from backward on, its index by parameter, a dense copy") {
    Lookup m(table_init());
    Parameter scale = parameter(xt::xarray<float>{3.0f}, "scale");
    Parameter unused = parameter(xt::xarray<float>{1.0f, 2.0f}, "unused");
    Session s({m.loss * scale}, {m.table, scale, unused});
    CHECK(s.parameter_index(scale) == 1);
    CHECK(s.parameter_index(unused) == 2);
    CHECK_THROWS_WITH_AS(s.parameter_index(parameter(xt::xarray<float>{0.0f}, "other")),
                         doctest::Contains("is not one of the session's parameters"), UserError);
    CHECK_FALSE(s.kept_by_rows(0));  // before any backward the form is not known
    s.forward({{m.ids, Value::index_sequences({{3}})}});
    std::vector<std::size_t> reported;
    std::vector<char> table_by_rows;
    s.backward([&](std::size_t i) {  // reported while backward runs: the table's form is known then
        reported.push_back(i);
        table_by_rows.push_back(s.kept_by_rows(0));
    });
    std::sort(reported.begin(), reported.end());
    CHECK(reported == std::vector<std::size_t>{0, 1});  // the loss does not use `unused`
    CHECK(table_by_rows == std::vector<char>{1, 1});
    CHECK_FALSE(s.kept_by_rows(1));
    CHECK_FALSE(s.kept_by_rows(2));
    // Row 3 only: d(scale * sum_j (j + 1) w_3j^2)/dw_3j = 2 scale (j + 1) w_3j, by hand.
    const auto w = m.table.value();
    std::vector<float> expected(12, 0.0f);
    for (std::size_t j = 0; j < 2; ++j) expected[6 + j] = 2.0f * 3.0f * float(j + 1) * w(3, j);
    const std::vector<float> dense = s.gradient(m.table).to_dense();
    REQUIRE(dense.size() == expected.size());
    for (std::size_t e = 0; e < dense.size(); ++e) CHECK(dense[e] == doctest::Approx(expected[e]));
    const GradientRef<const float> zero = s.gradient(unused);
    CHECK_FALSE(zero.by_rows);
    CHECK(zero.to_dense() == std::vector<float>{0.0f, 0.0f});
}

TEST_CASE("a reduction changes gradients in place through the session's mutable accessors") {
    // What distributed/ does to sum over processes: a dense gradient doubled in place, a table's
    // rows replaced; the read accessors and a learner then see the changed gradients.
    Lookup m(table_init());
    Parameter scale = parameter(xt::xarray<float>{3.0f}, "scale");
    Variable loss = m.loss * scale;
    Session s({loss}, {m.table, scale});
    s.forward({{m.ids, Value::index_sequences({{4, 1, 4}, {2}})}});
    s.backward();
    // d(scale * L)/d scale = L = sum over uses of (j + 1) w^2.
    const auto w = m.table.value();
    double l = 0;
    for (std::size_t r : {4, 1, 4, 2})
        for (std::size_t j = 0; j < 2; ++j) l += double(j + 1) * double(w(r, j)) * double(w(r, j));
    REQUIRE(s.gradient(scale).dense[0] == doctest::Approx(l).epsilon(1e-6));
    for (float& v : s.mutable_gradient(1).dense) v *= 2;
    CHECK(s.gradient(scale).dense[0] == doctest::Approx(2 * l).epsilon(1e-6));
    CHECK_FALSE(s.mutable_gradient(1).by_rows);
    CHECK(s.mutable_gradient(0).dense.empty());  // kept by rows: never to change as a dense table

    RowGradient<float>* g = s.mutable_gradient(0).by_rows;
    REQUIRE(g);
    // Replace the rows {4, 1, 2} by {0, 2}, as the union over processes would.
    g->replace({0, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
    CHECK(s.gradient(m.table).by_rows->sorted == std::vector<std::size_t>{0, 2});
    CHECK(g->find(1) == nullptr);  // a row it held before is zero again
    CHECK(g->find(4) == nullptr);
    const std::vector<float> expected{1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0};
    CHECK(s.gradient(m.table).to_dense() == expected);

    s.release_gradient(1);
    CHECK_THROWS_WITH_AS(s.mutable_gradient(1), doctest::Contains("no gradient for parameter 'scale'"), UserError);
    CHECK_THROWS_AS(s.mutable_gradient(2), UserError);  // out of range
}

namespace {
// The same table trained through `embedding` (its gradient kept by rows) and through one-hot rows
// times the table (a dense gradient), with the given learner: the weights must agree.
void same_updates_as_dense(const std::function<std::unique_ptr<Learner>(std::vector<Parameter>)>& make) {
    Lookup by_rows(table_init()), dense(table_init());
    Session s1({by_rows.loss}, {by_rows.table});
    Variable onehot = sequence::input_variable({6}, "onehot");
    Variable loss2 = sequence::reduce_sum(square(times(onehot, dense.table)) * constant(xt::xarray<double>{1.0, 2.0}));
    Session s2({loss2}, {dense.table});
    auto l1 = make({by_rows.table}), l2 = make({dense.table});
    const std::vector<std::vector<std::vector<std::size_t>>> batches{{{4, 1, 4}, {2}}, {{0}, {5, 5}}, {{1, 3}}};
    for (const auto& ids : batches) {
        std::vector<xt::xarray<float>> rows;
        for (const auto& seq : ids) {
            xt::xarray<float> oh = xt::zeros<float>({seq.size(), std::size_t{6}});
            for (std::size_t t = 0; t < seq.size(); ++t) oh(t, seq[t]) = 1.0f;
            rows.push_back(oh);
        }
        s1.forward({{by_rows.ids, Value::index_sequences(ids)}});
        s1.backward();
        REQUIRE(s1.gradient(by_rows.table).by_rows);  // the dense table gradient is never made
        CHECK(s1.gradient(by_rows.table).by_rows);
        s2.forward({{onehot, Value::sequences(rows)}});
        s2.backward();
        CHECK_FALSE(s2.gradient(dense.table).by_rows);
        CHECK_FALSE(s2.gradient(dense.table).by_rows);  // lazy Adam scans this one for non-zero rows
        // The dense view of the by-rows gradient equals the dense gradient.
        const auto g1 = s1.gradient(by_rows.table).to_dense(), g2 = s2.gradient(dense.table).to_dense();
        REQUIRE(g1.size() == g2.size());
        for (std::size_t e = 0; e < g1.size(); ++e) CHECK(g1[e] == doctest::Approx(g2[e]).epsilon(1e-6));
        l1->update(s1);
        l2->update(s2);
        const auto w1 = by_rows.table.value(), w2 = dense.table.value();
        for (std::size_t e = 0; e < w1.size(); ++e) CHECK(w1.data()[e] == doctest::Approx(w2.data()[e]).epsilon(1e-6));
    }
}
}  // namespace

TEST_CASE("lazy Adam with listed rows equals lazy Adam that scans for non-zero rows") {
    LearnerOptions lazy;
    lazy.lazy_sparse_rows = true;
    same_updates_as_dense([&](std::vector<Parameter> p) { return adam(std::move(p), 0.05, 0.9, 0.999, 1e-8, lazy); });
}

TEST_CASE("a gradient kept by rows trains like the dense one: exact Adam, momentum, L2 and clipping") {
    LearnerOptions o;
    o.l2_weight_decay = 0.01;  // rows without gradient still decay
    o.gradient_clipping_norm = 0.5;
    same_updates_as_dense([&](std::vector<Parameter> p) { return adam(std::move(p), 0.05, 0.9, 0.999, 1e-8, o); });
    same_updates_as_dense([&](std::vector<Parameter> p) { return momentum_sgd(std::move(p), 0.1, 0.9, o); });
    same_updates_as_dense([&](std::vector<Parameter> p) { return adagrad(std::move(p), 0.1, 1e-8, o); });
}

TEST_CASE("a table also used outside embedding keeps a dense gradient with the right values") {
    Lookup m(table_init());
    Variable x = input_variable({6}, "x");
    // loss2 = loss + sum(x . table[:, 0]) : the table also reaches the loss through times.
    Variable loss2 = reduce_sum(m.loss) + reduce_sum(times(x, m.table));
    Session s({loss2}, {m.table});
    xt::xarray<float> xv = xt::zeros<float>({std::size_t{1}, std::size_t{6}});
    xv(0, 3) = 1.0f;
    s.forward({{m.ids, Value::index_sequences({{4}})}, {x, Value::batch(xv)}});
    s.backward();
    CHECK_FALSE(s.gradient(m.table).by_rows);
    const auto g = s.gradient(m.table).to_dense();
    const auto w = m.table.value();
    // Row 4: 2 (j + 1) w from the lookup; row 3: 1 per column from times; all else 0.
    for (std::size_t r = 0; r < 6; ++r)
        for (std::size_t j = 0; j < 2; ++j) {
            const double expected = (r == 4 ? 2.0 * (j + 1) * w(r, j) : 0.0) + (r == 3 ? 1.0 : 0.0);
            CHECK(g[r * 2 + j] == doctest::Approx(expected));
        }
}
