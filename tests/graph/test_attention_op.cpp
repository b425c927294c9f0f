// loom::attention, the multi-head scaled dot-product attention op: values against a loop-by-loop
// computation written here (per item, head, query and key), gradients by finite differences in
// double on ragged batches (self, causal, cross, over a memory with a mask and over a growing
// cache), batch invariance, padding never read, the shape errors, and attention over every item's
// static memory picked by one index (read through the index, no pick computed).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <xtensor/xview.hpp>

#include "attention_reference.hpp"
#include "core/quantized_gemm.hpp"
#include "gradcheck.hpp"
#include "graph/compile.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;
using loom::testing::random_tensor;
using loom::testing::require_gradients;

namespace {

using Matrix = xt::xarray<double>;

// The inputs of the node `out` runs as once compiled (compile reads gathered rows in place), and
// whether the compiled plan still computes `gathered`.
struct Compiled {
    std::vector<const Node*> inputs;
    bool computes(const Variable& gathered) const { return plan->find(gathered.node().get()) >= 0; }
    std::shared_ptr<const Plan> plan;
};
Compiled compiled(const std::vector<Variable>& outputs) {
    Compiled c{{}, compile(outputs)};
    const int at = c.plan->find(outputs[0].node().get());
    REQUIRE(at >= 0);
    for (const NodePtr& in : c.plan->nodes[static_cast<std::size_t>(at)].node->inputs) c.inputs.push_back(in.get());
    return c;
}

// softmax(q_h . k_h / sqrt(dk)) v_h for one query row over `visible` key rows, every head.
std::vector<double> attend(const Matrix& q, std::size_t i, const Matrix& k, const Matrix& v, std::size_t visible,
                           std::size_t heads) {
    const std::size_t dv = v.shape()[1], dh = dv / heads;
    std::vector<double> out(dv, 0.0);
    for (std::size_t h = 0; h < heads; ++h) {
        const std::vector<double> p = loom::testing::head_softmax(q, k, i, h, heads, visible);
        for (std::size_t j = 0; j < visible; ++j)
            for (std::size_t c = 0; c < dh; ++c) out[h * dh + c] += p[j] * v(j, h * dh + c);
    }
    return out;
}

// The expected result of each query row of each item; keys and values per item.
std::vector<Matrix> expected(const std::vector<Matrix>& q, const std::vector<Matrix>& k, const std::vector<Matrix>& v,
                             std::size_t heads, bool causal) {
    std::vector<Matrix> out;
    for (std::size_t n = 0; n < q.size(); ++n) {
        Matrix o = xt::zeros<double>({q[n].shape()[0], v[n].shape()[1]});
        for (std::size_t i = 0; i < q[n].shape()[0]; ++i) {
            const auto row = attend(q[n], i, k[n], v[n], causal ? i + 1 : k[n].shape()[0], heads);
            for (std::size_t c = 0; c < row.size(); ++c) o(i, c) = row[c];
        }
        out.push_back(o);
    }
    return out;
}

void check_close(const Value& got, const std::vector<Matrix>& want, double tolerance) {
    REQUIRE(got.num_items() == want.size());
    for (std::size_t n = 0; n < want.size(); ++n) {
        const auto g = got.sequence<double>(n);
        REQUIRE(g.size() == want[n].size());
        for (std::size_t e = 0; e < want[n].size(); ++e) {
            INFO("item " << n << " element " << e);
            CHECK(static_cast<double>(g.data()[e]) == doctest::Approx(want[n].data()[e]).epsilon(tolerance));
        }
    }
}

const std::vector<std::size_t> query_lengths{2, 4, 1}, key_lengths{3, 1, 5}, self_lengths{1, 3, 7};

// The key mask [N, Tk] of items whose first real[n] keys are real; NaN goes into every padded key
// of k [N, Tk, D] and v [N, Tk, Dv] (one element each), which attention must never read.
Matrix mask_padding(Matrix& k, Matrix& v, const std::vector<std::size_t>& real) {
    Matrix m = xt::zeros<double>({real.size(), k.shape()[1]});
    for (std::size_t n = 0; n < real.size(); ++n)
        for (std::size_t j = 0; j < k.shape()[1]; ++j) {
            m(n, j) = j < real[n] ? 1.0 : 0.0;
            if (j >= real[n]) k(n, j, 0) = v(n, j, 1) = std::numeric_limits<double>::quiet_NaN();
        }
    return m;
}

// Item numbers as a column [rows, 1], one per row.
Matrix index_column(const std::vector<double>& items) {
    Matrix a = xt::zeros<double>({items.size(), std::size_t{1}});
    for (std::size_t r = 0; r < items.size(); ++r) a(r, 0) = items[r];
    return a;
}

}  // namespace

TEST_CASE("attention over sequences equals softmax(Q K^T / sqrt(dk)) V per item and head") {
    const SequenceAxis keys_axis;
    Variable q = sequence::input_variable({4}, "q");
    Variable k = sequence::input_variable({4}, "k", keys_axis), v = sequence::input_variable({6}, "v", keys_axis);
    const auto qs = random_sequences({4}, query_lengths, 1, -2, 2), ks = random_sequences({4}, key_lengths, 2, -2, 2),
               vs = random_sequences({6}, key_lengths, 3);
    Variable cross = attention(q, k, v, {.heads = 2});
    CHECK(cross.shape() == Shape{6});
    CHECK(cross.axis() == q.axis());
    const Bindings in{{q, Value::sequences(qs)}, {k, Value::sequences(ks)}, {v, Value::sequences(vs)}};
    check_close(evaluate({cross}, in, DType::f64)[cross], expected(qs, ks, vs, 2, false), 1e-12);
    check_close(evaluate({cross}, in)[cross], expected(qs, ks, vs, 2, false), 1e-5);

    SUBCASE("causal self-attention: each step sees itself and the steps before") {
        Variable x = sequence::input_variable({6}, "x");
        const auto xs = random_sequences({6}, self_lengths, 4, -2, 2);
        for (std::size_t heads : {1, 3}) {
            Variable self = attention(x, x, x, {.heads = heads, .causal = true});
            check_close(evaluate({self}, {{x, Value::sequences(xs)}}, DType::f64)[self],
                        expected(xs, xs, xs, heads, true), 1e-12);
        }
    }
    SUBCASE("sequences longer than a block of queries (128 rows): causal and cross") {
        Variable x = sequence::input_variable({6}, "x");
        const auto xs = random_sequences({6}, {260, 128, 129}, 5, -2, 2);
        const auto longer = random_sequences({4}, {140, 3, 257}, 6, -2, 2),
                   keys = random_sequences({4}, {300, 2, 130}, 7), values = random_sequences({6}, {300, 2, 130}, 8);
        Variable self = attention(x, x, x, {.heads = 3, .causal = true});
        check_close(evaluate({self}, {{x, Value::sequences(xs)}}, DType::f64)[self], expected(xs, xs, xs, 3, true),
                    1e-12);
        const Bindings long_in{
            {q, Value::sequences(longer)}, {k, Value::sequences(keys)}, {v, Value::sequences(values)}};
        check_close(evaluate({cross}, long_in, DType::f64)[cross], expected(longer, keys, values, 2, false), 1e-12);
    }
}

TEST_CASE("attention over a memory: one query per item, the mask's padded keys never read") {
    Variable query = input_variable({4}, "query");
    Variable keys = input_variable({any_size, 4}, "keys"), values = input_variable({any_size, 2}, "values");
    Variable mask = input_variable({any_size}, "mask");
    Variable out = attention(query, keys, values, {.heads = 2, .key_mask = mask});
    Matrix qv = random_rows({4}, 3, 5, -2, 2), kv = random_rows({5, 4}, 3, 6, -2, 2), vv = random_rows({5, 2}, 3, 7);
    const std::vector<std::size_t> real{5, 2, 1};
    Matrix m = mask_padding(kv, vv, real);
    const auto got =
        evaluate(
            {out},
            {{query, Value::batch(qv)}, {keys, Value::batch(kv)}, {values, Value::batch(vv)}, {mask, Value::batch(m)}},
            DType::f64)[out]
            .data<double>();
    for (std::size_t n = 0; n < 3; ++n) {
        Matrix qn = xt::view(qv, xt::range(n, n + 1), xt::all());
        Matrix kn = xt::view(kv, n, xt::all(), xt::all()), vn = xt::view(vv, n, xt::all(), xt::all());
        const auto want = attend(qn, 0, kn, vn, real[n], 2);
        for (std::size_t c = 0; c < 2; ++c) CHECK(got(n, c) == doctest::Approx(want[c]).epsilon(1e-12));
    }
    SUBCASE("a mask with a real key after a padded one is refused") {
        m(0, 1) = 0.0;
        CHECK_THROWS_WITH_AS(evaluate({out}, {{query, Value::batch(qv)},
                                              {keys, Value::batch(kv)},
                                              {values, Value::batch(vv)},
                                              {mask, Value::batch(m)}}),
                             doctest::Contains("padded key before a real one"), UserError);
    }
}

TEST_CASE("attention over a cache and the step's own key and value: the cache's keys, then the step's") {
    Variable query = input_variable({4}, "query"), step_key = input_variable({4}, "step_key");
    Variable step_value = input_variable({2}, "step_value");
    Variable keys = input_variable({any_size, 4}, "keys"), values = input_variable({any_size, 2}, "values");
    Variable out = attention(query, keys, values, {.heads = 2, .step_key = step_key, .step_value = step_value});
    for (std::size_t cached : {0, 1, 3}) {
        CAPTURE(cached);
        Matrix qv = random_rows({4}, 3, 5, -2, 2), kv = random_rows({cached, 4}, 3, 6, -2, 2);
        Matrix vv = random_rows({cached, 2}, 3, 7), sk = random_rows({4}, 3, 8, -2, 2), sv = random_rows({2}, 3, 9);
        const auto got = evaluate({out},
                                  {{query, Value::batch(qv)},
                                   {keys, Value::batch(kv)},
                                   {values, Value::batch(vv)},
                                   {step_key, Value::batch(sk)},
                                   {step_value, Value::batch(sv)}},
                                  DType::f64)[out]
                             .data<double>();
        for (std::size_t n = 0; n < 3; ++n) {
            // The item's keys and values with the step's own as the last row, attended by hand.
            Matrix kn = xt::zeros<double>({cached + 1, std::size_t{4}}),
                   vn = xt::zeros<double>({cached + 1, std::size_t{2}});
            for (std::size_t j = 0; j <= cached; ++j) {
                for (std::size_t c = 0; c < 4; ++c) kn(j, c) = j < cached ? kv(n, j, c) : sk(n, c);
                for (std::size_t c = 0; c < 2; ++c) vn(j, c) = j < cached ? vv(n, j, c) : sv(n, c);
            }
            Matrix qn = xt::view(qv, xt::range(n, n + 1), xt::all());
            const auto want = attend(qn, 0, kn, vn, cached + 1, 2);
            for (std::size_t c = 0; c < 2; ++c) CHECK(got(n, c) == doctest::Approx(want[c]).epsilon(1e-12));
        }
    }
    CHECK_THROWS_WITH_AS(attention(query, keys, values, {.heads = 2, .step_key = step_key}),
                         doctest::Contains("step_key and step_value"), UserError);
    CHECK_THROWS_WITH_AS(attention(query, keys, values, {.heads = 2, .step_key = values, .step_value = step_value}),
                         doctest::Contains("row sizes"), UserError);
    Variable mask = input_variable({any_size}, "mask");
    CHECK_THROWS_WITH_AS(
        attention(query, keys, values, {.heads = 2, .key_mask = mask, .step_key = step_key, .step_value = step_value}),
        doctest::Contains("which has no key_mask"), UserError);
    Variable sq = sequence::input_variable({4}, "sq");
    CHECK_THROWS_WITH_AS(attention(sq, sq, sq, {.heads = 2, .step_key = step_key, .step_value = step_key}),
                         doctest::Contains("not sequences"), UserError);
}

TEST_CASE("attention over a memory with heads of 16 lanes and more: lane sums and register blocks, double and float") {
    // Head sizes that are multiples of 16 take the one-query path that sums 16 lanes in a tree and
    // adds the weighted values 64 elements at a time: 2 heads of 32 (one block of 64), 5 heads of 16
    // (a block of 64, then one of 16), and 3 heads of 48 keys over values of 3 x 8 (no block).
    struct Case {
        std::size_t heads, d, dv;
    };
    for (const Case& k : {Case{2, 64, 64}, Case{5, 80, 80}, Case{3, 144, 24}}) {
        CAPTURE(k.heads);
        Variable query = input_variable({k.d}, "query");
        Variable keys = input_variable({any_size, k.d}, "keys"), values = input_variable({any_size, k.dv}, "values");
        Variable mask = input_variable({any_size}, "mask");
        Variable out = attention(query, keys, values, {.heads = k.heads, .key_mask = mask});
        Matrix qv = random_rows({k.d}, 3, 5, -1, 1), kv = random_rows({7, k.d}, 3, 6, -1, 1);
        Matrix vv = random_rows({7, k.dv}, 3, 7);
        const std::vector<std::size_t> real{7, 3, 1};
        Matrix m = mask_padding(kv, vv, real);
        const Bindings in{
            {query, Value::batch(qv)}, {keys, Value::batch(kv)}, {values, Value::batch(vv)}, {mask, Value::batch(m)}};
        const auto got = evaluate({out}, in, DType::f64)[out].data<double>();
        const auto got_float = evaluate({out}, in, DType::f32)[out].data<float>();
        for (std::size_t n = 0; n < 3; ++n) {
            Matrix qn = xt::view(qv, xt::range(n, n + 1), xt::all());
            Matrix kn = xt::view(kv, n, xt::all(), xt::all()), vn = xt::view(vv, n, xt::all(), xt::all());
            const auto want = attend(qn, 0, kn, vn, real[n], k.heads);
            for (std::size_t c = 0; c < k.dv; ++c) {
                CHECK(got(n, c) == doctest::Approx(want[c]).epsilon(1e-12));
                CHECK(std::abs(got_float(n, c) - want[c]) < 1e-5);
            }
        }
    }
}

TEST_CASE("attention over pages: the cache read in place equals the cache gathered, every head, a step's own row") {
    // A key/value cache kept as pages (a Generator's appended states): three hypotheses reading rows
    // of one table through integer page lists, two of them sharing rows, one reading a row twice
    // (lists that cross from page to page); keys and values through one list, then through two. The
    // same attention over the rows gathered by hand into batch values, and the formula in double,
    // give each row's output; nothing is gathered for the attention.
    Variable key_rows = static_input_variable({any_size, 4}, "key_rows");
    Variable value_rows = static_input_variable({any_size, 2}, "value_rows");
    Variable query = input_variable({4}, "query");
    Variable step_key = input_variable({4}, "step_key"), step_value = input_variable({2}, "step_value");
    Variable gathered_keys = input_variable({any_size, 4}, "gathered_keys");
    Variable gathered_values = input_variable({any_size, 2}, "gathered_values");
    const Matrix kt = random_tensor({6, 4}, 31, -2, 2), vt = random_tensor({6, 2}, 32);
    const Matrix qv = random_rows({4}, 3, 33, -2, 2), sk = random_rows({4}, 3, 34, -2, 2), sv = random_rows({2}, 3, 35);
    for (const bool stepped : {false, true}) {
        for (const std::vector<std::vector<std::size_t>>& rows :
             {std::vector<std::vector<std::size_t>>{{5, 0, 2}, {2, 2, 1}, {0, 3, 4}},
              std::vector<std::vector<std::size_t>>{{}, {}, {}}}) {
            const std::size_t tk = rows[0].size();
            if (tk == 0 && !stepped) continue;
            CAPTURE(stepped);
            CAPTURE(tk);
            std::vector<std::size_t> ids;
            for (const auto& r : rows) ids.insert(ids.end(), r.begin(), r.end());
            const auto pages = std::make_shared<const PageLists>(ids, 3, 6);
            AttentionOptions o{.heads = 2};
            if (stepped) o.step_key = step_key, o.step_value = step_value;
            const Variable paged_keys = paged_rows(key_rows, pages, query);
            Variable out = attention(query, paged_keys, paged_rows(value_rows, pages, query), o);
            Variable over_gathered = attention(query, gathered_keys, gathered_values, o);
            // Read in place: the op's inputs are the tables themselves, and no row is gathered; where
            // another node reads the paged keys, they are copied for it.
            const Compiled alone = compiled({out});
            CHECK(alone.inputs[1] == key_rows.node().get());
            CHECK(alone.inputs[2] == value_rows.node().get());
            CHECK_FALSE(alone.computes(paged_keys));
            const Variable other = reduce_sum(paged_keys);
            CHECK(compiled({out, other}).computes(paged_keys));
            // Each row's keys and values copied out of the tables by hand (gathered), the step's own last.
            const std::size_t count = tk + stepped;
            Matrix kg = xt::zeros<double>({std::size_t{3}, tk, std::size_t{4}});
            Matrix vg = xt::zeros<double>({std::size_t{3}, tk, std::size_t{2}});
            for (std::size_t n = 0; n < 3; ++n)
                for (std::size_t j = 0; j < tk; ++j) {
                    for (std::size_t c = 0; c < 4; ++c) kg(n, j, c) = kt(rows[n][j], c);
                    for (std::size_t c = 0; c < 2; ++c) vg(n, j, c) = vt(rows[n][j], c);
                }
            Bindings in{{key_rows, Value::tensor(kt)},
                        {value_rows, Value::tensor(vt)},
                        {query, Value::batch(qv)},
                        {gathered_keys, Value::batch(kg)},
                        {gathered_values, Value::batch(vg)}};
            if (stepped) in.insert({{step_key, Value::batch(sk)}, {step_value, Value::batch(sv)}});
            auto values = evaluate({out, over_gathered, other}, in, DType::f64);
            const Matrix got = values[out].data<double>(), from_gathered = values[over_gathered].data<double>();
            CHECK(xt::sum(values[other].data<double>())() == doctest::Approx(xt::sum(kg)()).epsilon(1e-12));
            for (std::size_t n = 0; n < 3; ++n) {
                Matrix kn = xt::zeros<double>({count, std::size_t{4}}), vn = xt::zeros<double>({count, std::size_t{2}});
                for (std::size_t j = 0; j < count; ++j) {
                    const bool own = j == tk;
                    for (std::size_t c = 0; c < 4; ++c) kn(j, c) = own ? sk(n, c) : kg(n, j, c);
                    for (std::size_t c = 0; c < 2; ++c) vn(j, c) = own ? sv(n, c) : vg(n, j, c);
                }
                Matrix qn = xt::view(qv, xt::range(n, n + 1), xt::all());
                const auto want = attend(qn, 0, kn, vn, count, 2);
                for (std::size_t c = 0; c < 2; ++c) {
                    CHECK(got(n, c) == doctest::Approx(want[c]).epsilon(1e-12));
                    CHECK(got(n, c) == doctest::Approx(from_gathered(n, c)).epsilon(1e-14));
                }
            }
            if (tk == 0) continue;
            // Keys and values through lists of their own (a generator's two states); lists made for
            // a table of 6 rows read over one of 5 are refused before any row is computed.
            std::vector<std::size_t> swapped = ids;
            std::swap(swapped[0], swapped[1]);
            const auto value_pages = std::make_shared<const PageLists>(swapped, 3, 6);
            Variable own = attention(query, paged_keys, paged_rows(value_rows, value_pages, query), o);
            CHECK(compiled({own}).inputs[2] == value_rows.node().get());
            CHECK(evaluate({own}, in, DType::f64)[own].data<double>() != got);
            in[value_rows] = Value::tensor(Matrix(xt::view(vt, xt::range(0, 5), xt::all())));
            CHECK_THROWS_WITH_AS(evaluate({own}, in), doctest::Contains("(the table holds 5)"), UserError);
        }
    }
}

TEST_CASE("attention over pages kept in bfloat16 equals attention over the rows rounded, the step's own row too") {
    // A generator's cache in half the bytes (RowStorage::bfloat16): 6 rows of bfloat16 two to a row
    // of a float table [3, D]. The same attention over float tables holding the rounded rows, with the
    // step's own key and value rounded by hand, gives the same bits (heads of 16: one path for both);
    // the rows unrounded give other values. Another reader of the paged keys gets the rounded rows.
    // Double computations and backward over such rows are refused by name.
    constexpr std::size_t kw = 32, vw = 32;
    Variable key_rows = static_input_variable({any_size, kw}, "key_rows");
    Variable value_rows = static_input_variable({any_size, vw}, "value_rows");
    Variable query = input_variable({kw}, "query");
    Variable step_key = input_variable({kw}, "step_key"), step_value = input_variable({vw}, "step_value");
    const Matrix kt = random_tensor({6, kw}, 41, -2, 2), vt = random_tensor({6, vw}, 42);
    const Matrix qv = random_rows({kw}, 3, 43, -2, 2), sk = random_rows({kw}, 3, 44, -2, 2),
                 sv = random_rows({vw}, 3, 45);
    auto rounded = [](Matrix m) {
        for (double& x : m) x = round_to_bfloat16(static_cast<float>(x));
        return m;
    };
    // A float table [rows / 2, width] whose storage holds the rows' bfloat16 bits one row after another.
    auto packed = [](const Matrix& rows) {
        const std::size_t width = rows.shape()[1];
        std::vector<std::uint16_t> bits;
        for (double x : rows) bits.push_back(bfloat16_bits(static_cast<float>(x)));
        xt::xarray<float> table = xt::zeros<float>({rows.shape()[0] / 2, width});
        std::memcpy(table.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
        return Value::tensor(std::move(table));
    };
    const std::vector<std::size_t> ids{5, 0, 2, 2, 2, 1, 0, 3, 4};
    const auto half = std::make_shared<const PageLists>(ids, 3, 6, RowStorage::bfloat16);
    const auto whole = std::make_shared<const PageLists>(ids, 3, 6);
    const AttentionOptions o{.heads = 2, .step_key = step_key, .step_value = step_value};
    const Variable half_keys = paged_rows(key_rows, half, query);
    const Variable out = attention(query, half_keys, paged_rows(value_rows, half, query), o);
    const Variable over_rounded =
        attention(query, paged_rows(key_rows, whole, query), paged_rows(value_rows, whole, query), o);
    const Variable copied = reduce_sum(half_keys);
    Bindings in{{key_rows, packed(kt)},
                {value_rows, packed(vt)},
                {query, Value::batch(qv)},
                {step_key, Value::batch(sk)},
                {step_value, Value::batch(sv)}};
    const xt::xarray<float> got = evaluate({out}, in, DType::f32)[out].data<float>();
    const double sum_copied = xt::sum(evaluate({copied}, in, DType::f32)[copied].data<float>())();
    // The reference: the rounded rows as float elements, the step's own rounded by hand.
    Bindings reference{{key_rows, Value::tensor(rounded(kt))},
                       {value_rows, Value::tensor(rounded(vt))},
                       {query, Value::batch(qv)},
                       {step_key, Value::batch(rounded(sk))},
                       {step_value, Value::batch(rounded(sv))}};
    const xt::xarray<float> want = evaluate({over_rounded}, reference, DType::f32)[over_rounded].data<float>();
    CHECK(got == want);
    reference[key_rows] = Value::tensor(kt), reference[value_rows] = Value::tensor(vt);
    reference[step_key] = Value::batch(sk), reference[step_value] = Value::batch(sv);
    const xt::xarray<float> unrounded = evaluate({over_rounded}, reference, DType::f32)[over_rounded].data<float>();
    CHECK(xt::amax(xt::abs(got - unrounded))() > 1e-4);
    double sum_rounded = 0;
    const Matrix kr = rounded(kt);
    for (std::size_t id : ids)
        for (std::size_t c = 0; c < kw; ++c) sum_rounded += kr(id, c);
    CHECK(sum_copied == doctest::Approx(sum_rounded).epsilon(1e-5));
    // More rows than the packed tables hold (7 > 2 x 3 = 6): refused before any row is computed.
    const auto beyond =
        std::make_shared<const PageLists>(std::vector<std::size_t>{6, 0, 1}, 3, 7, RowStorage::bfloat16);
    const Variable too_far =
        attention(query, paged_rows(key_rows, beyond, query), paged_rows(value_rows, beyond, query), {.heads = 2});
    CHECK_THROWS_WITH_AS(evaluate({too_far}, in, DType::f32), doctest::Contains("(the table holds 6)"), UserError);
    CHECK_THROWS_WITH_AS(evaluate({out}, in, DType::f64), doctest::Contains("float's, not double's"), UserError);
    CHECK_THROWS_WITH_AS(gradients(reduce_sum(out), in, {query}, DType::f32), doctest::Contains("no backward"),
                         UserError);
}

TEST_CASE("attention gradients in double on ragged batches: self, causal, cross, over a memory and a cache") {
    Variable x = sequence::input_variable({4}, "x"), y = sequence::input_variable({4}, "y");
    Parameter wq = parameter(loom::testing::random_tensor({4, 4}, 21, -0.8, 0.8), "Wq");
    Parameter wk = parameter(loom::testing::random_tensor({4, 4}, 22, -0.8, 0.8), "Wk");
    Parameter wv = parameter(loom::testing::random_tensor({4, 6}, 23, -0.8, 0.8), "Wv");
    const std::vector<Parameter> params{wq, wk, wv};
    to_precision(params, DType::f64);
    std::vector<Variable> wrt{x, wq, wk, wv};
    const Bindings in{{x, Value::sequences(random_sequences({4}, self_lengths, 24, -1.5, 1.5))},
                      {y, Value::sequences(random_sequences({4}, key_lengths, 25, -1.5, 1.5))}};
    SUBCASE("bidirectional self-attention, 2 heads") {
        require_gradients("self", tanh(attention(times(x, wq), times(x, wk), times(x, wv), {.heads = 2})), in, wrt);
    }
    SUBCASE("causal self-attention, 1 and 2 heads") {
        for (std::size_t heads : {1, 2})
            require_gradients("causal", attention(times(x, wq), times(x, wk), times(x, wv), {heads, true}) * 1.3, in,
                              wrt);
    }
    SUBCASE("cross-attention: queries on one axis, keys and values on another") {
        Bindings cross = in;
        cross[x] = Value::sequences(random_sequences({4}, query_lengths, 26, -1.5, 1.5));
        wrt.push_back(y);
        require_gradients("cross", square(attention(times(x, wq), times(y, wk), times(y, wv), {.heads = 2})), cross,
                          wrt);
    }
    SUBCASE("causal self-attention over sequences longer than a block of queries (128 rows)") {
        Bindings longer = in;
        longer[x] = Value::sequences(random_sequences({4}, {131, 2, 66}, 27, -1.5, 1.5));
        require_gradients("causal, long", attention(times(x, wq), times(x, wk), times(x, wv), {2, true}) * 1.3, longer,
                          wrt);
    }
    SUBCASE("over an unpacked memory with its mask, the query a batch value") {
        sequence::Unpacked keys = sequence::unpack(times(x, wk)), values = sequence::unpack(times(x, wv));
        Variable query = times(sequence::last(x), wq);
        require_gradients("memory", attention(query, keys.data, values.data, {.heads = 2, .key_mask = keys.mask}), in,
                          wrt);
    }
    SUBCASE("over a growing cache: a batch [t, D] with this step's row spliced on") {
        Variable cache = input_variable({any_size, 4}, "cache");
        Variable q = input_variable({4}, "q");
        Variable grown = splice({cache, reshape(times(q, wk), Shape{1, 4})}, 0);
        Variable out = attention(times(q, wq), grown, times(grown, slice(wv, 1, 0, 4)), {.heads = 2});
        const Bindings step{{cache, Value::batch(random_rows({3, 4}, 2, 27))},
                            {q, Value::batch(random_rows({4}, 2, 28))}};
        require_gradients("cache", out, step, {cache, q, wq, wk, wv});
    }
    SUBCASE("over a cache with the step's own key and value as the last row, the cache empty or not") {
        Variable cache = input_variable({any_size, 4}, "cache");
        Variable q = input_variable({4}, "q");
        Variable out = attention(times(q, wq), cache, times(cache, slice(wv, 1, 0, 4)),
                                 {.heads = 2, .step_key = times(q, wk), .step_value = times(q, slice(wv, 1, 0, 4))});
        for (std::size_t cached : {0, 3}) {
            const Bindings step{{cache, Value::batch(random_rows({cached, 4}, 2, 27))},
                                {q, Value::batch(random_rows({4}, 2, 28))}};
            require_gradients("stepped cache", square(out), step, {cache, q, wq, wk, wv});
        }
    }
}

TEST_CASE("attention_weights: per query the mean over heads of softmax(q k / sqrt(dk)), 0 past the item's keys") {
    const SequenceAxis keys_axis;
    Variable q = sequence::input_variable({4}, "q"), k = sequence::input_variable({4}, "k", keys_axis);
    const auto qs = random_sequences({4}, query_lengths, 41, -2, 2), ks = random_sequences({4}, key_lengths, 42, -2, 2);
    Variable w = attention_weights(q, k, {.heads = 2});
    const Value got = evaluate({w}, {{q, Value::sequences(qs)}, {k, Value::sequences(ks)}}, DType::f64)[w];
    for (std::size_t n = 0; n < qs.size(); ++n) {
        const auto g = got.sequence<double>(n);  // [Lq, 5]: the keys' longest is 5
        REQUIRE(g.shape()[1] == 5);
        for (std::size_t i = 0; i < qs[n].shape()[0]; ++i)
            for (std::size_t j = 0; j < 5; ++j) {
                double want = 0;  // one-hot values pick weight j out of attend(): the mean of the heads' weights
                if (j < key_lengths[n]) {
                    Matrix onehot = xt::zeros<double>({key_lengths[n], std::size_t{2}});
                    onehot(j, 0) = onehot(j, 1) = 1.0;
                    const auto row = attend(qs[n], i, ks[n], onehot, key_lengths[n], 2);
                    want = (row[0] + row[1]) / 2;
                }
                CHECK(g(i, j) == doctest::Approx(want).epsilon(1e-12));
            }
    }
    Parameter wq = parameter(loom::testing::random_tensor({4, 4}, 43, -0.8, 0.8), "Wq");
    to_precision({wq}, DType::f64);
    require_gradients("attention_weights", square(attention_weights(times(q, wq), k, {.heads = 2})) * 3.0,
                      {{q, Value::sequences(qs)}, {k, Value::sequences(ks)}}, {q, k, wq});
}

TEST_CASE("attention is batch invariant: each item alone gets the values and gradients it gets in the batch") {
    Variable x = sequence::input_variable({4}, "x"), y = sequence::input_variable({4}, "y");
    Variable out = attention(x, y, y, {.heads = 2}) + attention(x, x, x, {.heads = 4, .causal = true});
    const Bindings in{{x, Value::sequences(random_sequences({4}, {2, 5, 1, 3}, 31))},
                      {y, Value::sequences(random_sequences({4}, {4, 1, 2, 6}, 32))}};
    const auto report = check_batch_invariance({out}, in);
    INFO(report.str());
    CHECK(report.ok);
}

TEST_CASE("attention's shape errors name the op and the sizes") {
    Variable x = sequence::input_variable({6}, "x"), y = sequence::input_variable({6}, "y");
    Variable z = sequence::input_variable({4}, "z");
    CHECK_THROWS_WITH_AS(attention(x, x, x, {.heads = 4}), doctest::Contains("multiples of the 4 heads"), UserError);
    CHECK_THROWS_WITH_AS(attention(x, z, z), doctest::Contains("queries (6) and keys (4)"), UserError);
    CHECK_THROWS_WITH_AS(attention(x, y, y, {.causal = true}), doctest::Contains("causal attention needs"), UserError);
    CHECK_THROWS_WITH_AS(attention(x, y, x), doctest::Contains("keys and values must be on one sequence axis"),
                         UserError);
    Variable q = input_variable({6}, "q");
    CHECK_THROWS_WITH_AS(attention(q, x, x), doctest::Contains("must be a sequence"), UserError);
    CHECK_THROWS_WITH_AS(attention(x, x, x, {.key_mask = q}), doctest::Contains("key_mask"), UserError);
    Variable keys = input_variable({any_size, 6}, "keys");
    CHECK_THROWS_WITH_AS(attention(q, keys, keys, {.causal = true}), doctest::Contains("causal"), UserError);
}

TEST_CASE("attention over memory picked by one index reads every item's memory through the index") {
    Variable keys = static_input_variable({any_size, any_size, 4}, "keys");
    Variable values = static_input_variable({any_size, any_size, 2}, "values");
    Variable mask = static_input_variable({any_size, any_size}, "mask");
    Variable query = input_variable({4}, "query"), index = input_variable({1}, "index");
    Variable out = attention(query, index_select(keys, index), index_select(values, index),
                             {.heads = 2, .key_mask = index_select(mask, index)});
    // No pick is computed: once compiled, the op reads the static memory and the index.
    const Compiled in_place = compiled({out});
    REQUIRE(in_place.inputs.size() == 5);
    CHECK(in_place.inputs[1] == keys.node().get());
    CHECK(in_place.inputs[2] == values.node().get());
    CHECK(in_place.inputs[3] == mask.node().get());
    CHECK(in_place.inputs[4] == index.node().get());

    // 3 items of 5 keys (5, 2 and 1 real; NaN in the padded ones, never read), 6 rows.
    Matrix kv = random_tensor({3, 5, 4}, 6, -2, 2), vv = random_tensor({3, 5, 2}, 7);
    const std::vector<std::size_t> real{5, 2, 1};
    Matrix m = mask_padding(kv, vv, real);
    const std::vector<double> picks{2, 0, 0, 1, 2, 0};
    const Matrix qv = random_rows({4}, picks.size(), 8, -2, 2);
    const Bindings in{{query, Value::batch(qv)},
                      {keys, Value::tensor(kv)},
                      {values, Value::tensor(vv)},
                      {mask, Value::tensor(m)},
                      {index, Value::batch(index_column(picks))}};
    for (DType dtype : {DType::f64, DType::f32}) {
        const auto got = evaluate({out}, in, dtype)[out].rows<double>();
        for (std::size_t r = 0; r < picks.size(); ++r) {
            const auto n = static_cast<std::size_t>(picks[r]);
            Matrix kn = xt::view(kv, n, xt::all(), xt::all()), vn = xt::view(vv, n, xt::all(), xt::all());
            const auto want = attend(qv, r, kn, vn, real[n], 2);
            for (std::size_t c = 0; c < 2; ++c)
                CHECK(got(r, c) == doctest::Approx(want[c]).epsilon(dtype == DType::f64 ? 1e-12 : 1e-5));
        }
    }
    SUBCASE("picks by two different indices are computed, then attended per row") {
        Variable other = input_variable({1}, "other");
        Variable mixed = attention(query, index_select(keys, index), index_select(values, other), {.heads = 2});
        const Compiled apart = compiled({mixed});
        CHECK(apart.inputs.size() == 3);
        CHECK(apart.inputs[1] != keys.node().get());
    }
    SUBCASE("an index outside the memory is refused by name") {
        Bindings bad = in;
        bad[index] = Value::batch(index_column({0, 1, 2, 3, 0, 0}));
        CHECK_THROWS_WITH_AS(evaluate({out}, bad),
                             doctest::Contains("attention: row 3 reads item 3 of a memory of 3 items"), UserError);
    }
}
