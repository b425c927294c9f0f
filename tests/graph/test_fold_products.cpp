// compile's fold of an embedding read only by products (graph/fold_products.hpp): the product runs
// on the distinct ids' rows of the table. Values and gradients are checked against sums written
// out here, against finite differences in double on ragged batches, inside a loop, and per item.
#include <doctest/doctest.h>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;
using namespace loom::testing;

namespace {

// The op names of a plan: what the fold made of a graph.
std::vector<std::string> plan_ops(const std::vector<Variable>& outputs) {
    std::vector<std::string> names;
    const auto plan = compile(outputs);
    for (const auto& pn : plan->nodes)
        if (pn.node->op) names.push_back(pn.node->op->name());
    return names;
}
bool has(const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

constexpr std::size_t vocab = 7, dim = 3, width = 4;

// ids with repeats over three ragged sequences, and a random weight per output element.
struct Batch {
    std::vector<std::vector<std::size_t>> ids{{3, 1, 3, 6}, {0}, {5, 3, 3, 5, 1, 2}};
    std::vector<xt::xarray<double>> weights = random_sequences({width}, {4, 1, 6}, 11);
};

}  // namespace

TEST_CASE("an embedding read only by a product runs as one node with the sums written out") {
    const SequenceAxis axis;
    Variable ids = sequence::input_variable({1}, "ids", axis);
    Variable r = sequence::input_variable({width}, "r", axis);
    Parameter table = parameter(random_tensor({vocab, dim}, 1), "table");
    Parameter w = parameter(random_tensor({dim, width}, 2), "w");
    Parameter b = parameter(random_tensor({width}, 3), "b");
    Variable y = affine(embedding(ids, table), w, b);
    Variable loss = sequence::reduce_sum(reduce_sum(y * r));
    const Batch batch;
    Bindings in{{ids, Value::index_sequences(batch.ids)}, {r, Value::sequences(batch.weights)}};

    const auto ops = plan_ops({loss});
    CHECK(has(ops, "embedding_affine"));
    CHECK_FALSE(has(ops, "embedding"));
    CHECK_FALSE(has(ops, "affine"));
    // The product's node is still found in the plan (as its folded node), after every later pass.
    const auto plan = compile({loss});
    REQUIRE(plan->find(y.node().get()) >= 0);
    CHECK(plan->nodes[static_cast<std::size_t>(plan->find(y.node().get()))].node->op->name() == "embedding_affine");

    const auto e = table.value(), wv = w.value(), bv = b.value();
    auto values = evaluate({y}, in, DType::f64);
    auto grads = gradients(loss, in, {table, w, b}, DType::f64);
    xt::xarray<double> de = xt::zeros<double>({vocab, dim}), dw = xt::zeros<double>({dim, width}),
                       db = xt::zeros<double>({width});
    for (std::size_t s = 0; s < batch.ids.size(); ++s) {
        const auto ys = values[y].sequence<double>(s);
        for (std::size_t t = 0; t < batch.ids[s].size(); ++t) {
            const std::size_t id = batch.ids[s][t];
            for (std::size_t j = 0; j < width; ++j) {
                double sum = bv(j);
                for (std::size_t k = 0; k < dim; ++k) sum += double(e(id, k)) * double(wv(k, j));
                CHECK(ys(t, j) == doctest::Approx(sum).epsilon(1e-6));
                const double g = batch.weights[s](t, j);  // d loss / d y(t, j)
                db(j) += g;
                for (std::size_t k = 0; k < dim; ++k) {
                    dw(k, j) += double(e(id, k)) * g;
                    de(id, k) += double(wv(k, j)) * g;
                }
            }
        }
    }
    auto near = [](const xt::xarray<double>& got, const xt::xarray<double>& want) {
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i)
            CHECK(got.data()[i] == doctest::Approx(want.data()[i]).epsilon(1e-6));
    };
    near(grads[table].tensor<double>(), de);
    near(grads[w].tensor<double>(), dw);
    near(grads[b].tensor<double>(), db);
    // Row 4 was used by no id: its gradient is exactly zero.
    for (std::size_t k = 0; k < dim; ++k) CHECK(grads[table].tensor<double>()(4, k) == 0.0);
    require_gradients("embedding_affine", loss, in, {table, w, b});

    // Kept by rows in a session, with only the rows the ids used listed.
    Session session({loss}, {table, w, b});
    session.forward(in);
    session.backward();
    REQUIRE(session.gradient(table).by_rows);
    CHECK(session.gradient(table).by_rows->sorted == std::vector<std::size_t>{0, 1, 2, 3, 5, 6});
}

TEST_CASE("times of an embedding folds too, but not an embedding read elsewhere or asked for") {
    Variable ids = sequence::input_variable({1}, "ids");
    Parameter table = parameter(random_tensor({vocab, dim}, 4), "table");
    Parameter w = parameter(random_tensor({dim, width}, 5), "w");
    Variable x = embedding(ids, table);
    Variable y = times(x, w);
    CHECK(has(plan_ops({y}), "embedding_times"));
    CHECK_FALSE(has(plan_ops({y}), "embedding"));
    CHECK_FALSE(has(plan_ops({y, x}), "embedding_times"));  // asked for
    // Two products of one embedding (a bidirectional encoder's projections) both fold.
    const auto two = plan_ops({y + times(x, w) * constant(2.0)});
    CHECK(std::count(two.begin(), two.end(), "embedding_times") == 2);
    CHECK_FALSE(has(two, "embedding"));
    CHECK_FALSE(has(plan_ops({y + reduce_sum(x)}), "embedding_times"));  // read twice
    // A bias that broadcasts (not of the product's shape) is left to affine.
    CHECK_FALSE(has(plan_ops({affine(x, w, constant(0.5))}), "embedding_affine"));

    const Batch batch;
    Bindings in{{ids, Value::index_sequences(batch.ids)}};
    auto folded = evaluate({y}, in, DType::f64), whole = evaluate({y, x}, in, DType::f64);
    for (std::size_t s = 0; s < batch.ids.size(); ++s) {
        const auto a = folded[y].sequence<double>(s), b = whole[y].sequence<double>(s);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(a.data()[i] == doctest::Approx(b.data()[i]).epsilon(1e-12));
    }
    require_gradients("embedding_times", sequence::reduce_sum(reduce_sum(y * y)), in, {table, w});
}

TEST_CASE("an embedding product inside a loop: ids from the loop's own past, gradients by differences") {
    // h_t = tanh(embedding(argmax h_{t-1}, table) W + b + x_t): the ids depend on the loop, so the
    // fold runs on each step's rows.
    Variable x = sequence::input_variable({width}, "x");
    Parameter table = parameter(random_tensor({vocab, dim}, 6), "table");
    Parameter w = parameter(random_tensor({dim, width}, 7), "w");
    Parameter b = parameter(random_tensor({width}, 8), "b");
    Variable p = placeholder({width}, "p");
    Variable previous = top_k(past_value(p), 1).indices;
    Variable h = tanh(affine(embedding(previous, table), w, b) + x);
    h.replace_placeholders({{p, h}});
    CHECK(has(plan_ops({h}), "embedding_affine"));
    // Inputs far enough apart that a finite difference never changes an argmax.
    std::vector<xt::xarray<double>> xs = random_sequences({width}, {1, 3, 7}, 9);
    for (auto& s : xs)
        for (std::size_t t = 0; t < s.shape(0); ++t) s(t, t % width) += 3.0;
    Bindings in{{x, Value::sequences(xs)}};
    require_gradients("in a loop", sequence::reduce_sum(reduce_sum(h)), in, {table, w, b, x});
    GradientCheckOptions segments;
    segments.memory_budget = 6000;  // bytes: the loop runs in segments of a step or two, recomputed
    require_gradients("in a loop, in segments", sequence::reduce_sum(reduce_sum(h)), in, {table, w, b, x}, segments);

    // Step by step by hand: h_0 = tanh(E[0] W + b + x_0) (past_value's initial state is 0: argmax 0).
    const auto e = table.value(), wv = w.value(), bv = b.value();
    auto values = evaluate({h}, in, DType::f64);
    for (std::size_t s = 0; s < xs.size(); ++s) {
        const auto hs = values[h].sequence<double>(s);
        std::size_t id = 0;
        for (std::size_t t = 0; t < xs[s].shape(0); ++t) {
            std::vector<double> ht(width);
            for (std::size_t j = 0; j < width; ++j) {
                double z = bv(j) + xs[s](t, j);
                for (std::size_t k = 0; k < dim; ++k) z += double(e(id, k)) * double(wv(k, j));
                ht[j] = std::tanh(z);
                CHECK(hs(t, j) == doctest::Approx(ht[j]).epsilon(1e-6));
            }
            id = static_cast<std::size_t>(std::max_element(ht.begin(), ht.end()) - ht.begin());
        }
    }
    InvarianceReport inv = check_batch_invariance({h}, in);
    INFO(inv.str());
    CHECK(inv.ok);
}
