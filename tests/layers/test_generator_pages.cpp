// The Generator's pages: appended states (StateUpdate::append, a key/value cache) are kept as pages,
// one page list per pass for the states that start with as many rows and grow by as many. Checked
// against the same step whose states are replaced whole (copied by rows each pass), which shares no
// page: the hypotheses must be the same bit for bit, with states that start with different numbers
// of rows (two page lists) and states that start alike (one list). Then the page lists themselves
// (layers/generator_pages.hpp): a line of descent keeps its rows together in runs of
// PageList::kRunRows, a parent's first child continuing the parent's run and its other children
// starting runs of their own.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <set>
#include <vector>

#include "core/quantized_gemm.hpp"
#include "layers/generator_pages.hpp"
#include "test_support.hpp"

using namespace loom;

namespace {

// A step over two states [any, 1], A and B: the logits read every row of both (their sums and their
// last rows), and the step adds one row to each, a function of the previous symbol. Appended: it
// returns the new rows; replaced: it returns each state with its new row spliced on. in_double: the
// weights a double parameter (the session then computes in double), else a constant (in float).
layers::Decoder two_growing_states(layers::StateUpdate update, bool in_double = false) {
    auto step = [update, in_double](const Variable& previous, const std::vector<Variable>& states,
                                    const std::vector<Variable>&) {
        const Variable& a = states[0];
        const Variable& b = states[1];
        xt::xarray<double> w{{0.7, -0.4, 0.2, 0.9, -0.3}, {-0.5, 0.8, 0.6, -0.2, 0.1}, {0.3, 0.2, -0.9, 0.4, 0.5}};
        const Variable features =
            splice({reshape(reduce_sum(a, 0), {1}), reshape(reduce_sum(b, 0), {1}), previous * 0.1});
        Variable weights = constant(w);
        if (in_double) {
            const Parameter p = parameter(w, "w");
            to_precision({p}, DType::f64);
            weights = p;
        }
        const Variable logits = times(features, weights);
        const Variable row_a = reshape(previous * 0.3 + 0.1, {1, 1}), row_b = reshape(previous * -0.2 + 0.05, {1, 1});
        if (update == layers::StateUpdate::append) return layers::DecoderOutput{logits, {row_a, row_b}};
        return layers::DecoderOutput{logits, {splice({a, row_a}, 0), splice({b, row_b}, 0)}};
    };
    return layers::Decoder(step, {Shape{any_size, 1}, Shape{any_size, 1}}, {update, update});
}

Value rows_of(std::size_t items, std::size_t rows, double first) {
    xt::xarray<double> a = xt::zeros<double>({items, rows, std::size_t{1}});
    for (std::size_t n = 0; n < items; ++n)
        for (std::size_t r = 0; r < rows; ++r) a(n, r, 0) = first + 0.25 * static_cast<double>(n + r);
    return Value::batch(a);
}

// Greedy decoding of that step computed here in plain double (the Generator runs a step without
// parameters in float): the symbols and the log-probability. bfloat16_rows: every row appended is
// kept rounded to bfloat16 (a cache kept so; the initial rows here are exact in it).
std::pair<std::vector<std::size_t>, double> greedy_by_hand(std::vector<double> a, std::vector<double> b,
                                                           std::size_t max_length, bool bfloat16_rows = false) {
    auto kept = [&](double x) { return bfloat16_rows ? double(round_to_bfloat16(static_cast<float>(x))) : x; };
    const double w[3][5] = {{0.7, -0.4, 0.2, 0.9, -0.3}, {-0.5, 0.8, 0.6, -0.2, 0.1}, {0.3, 0.2, -0.9, 0.4, 0.5}};
    std::vector<std::size_t> symbols;
    double log_probability = 0, previous = 1;  // the start symbol
    for (std::size_t t = 0; t < max_length; ++t) {
        double sa = 0, sb = 0;
        for (double x : a) sa += x;
        for (double x : b) sb += x;
        std::vector<double> logits(5);
        for (std::size_t k = 0; k < 5; ++k) logits[k] = sa * w[0][k] + sb * w[1][k] + 0.1 * previous * w[2][k];
        const std::size_t best = std::max_element(logits.begin(), logits.end()) - logits.begin();
        double sum = 0;
        for (double l : logits) sum += std::exp(l - logits[best]);
        log_probability += -std::log(sum);
        a.push_back(kept(previous * 0.3 + 0.1)), b.push_back(kept(previous * -0.2 + 0.05));
        if (best == 0) break;  // the end symbol
        symbols.push_back(best);
        previous = static_cast<double>(best);
    }
    return {symbols, log_probability};
}

std::vector<double> column(const Value& v, std::size_t n) {
    const auto a = v.data<double>();
    std::vector<double> out;
    for (std::size_t r = 0; r < a.shape()[1]; ++r) out.push_back(a(n, r, 0));
    return out;
}

}  // namespace

TEST_CASE("Generator's pages give what copying the states gives, with one page list and with two") {
    layers::Generator paged(two_growing_states(layers::StateUpdate::append), {});
    layers::Generator copied(two_growing_states(layers::StateUpdate::replace), {});
    constexpr std::size_t items = 4;
    for (const auto& rows : std::vector<std::pair<std::size_t, std::size_t>>{{2, 0}, {0, 3}, {1, 1}}) {
        const std::size_t rows_a = rows.first, rows_b = rows.second;
        const std::vector<Value> initial{rows_of(items, rows_a, 0.5), rows_of(items, rows_b, -0.75)};
        for (std::size_t beam : {1, 3}) {
            CAPTURE(rows_a);
            CAPTURE(rows_b);
            CAPTURE(beam);
            const layers::GenerateOptions o{.beam_width = beam, .max_length = 6, .start_symbol = 1, .end_symbol = 0};
            const auto a = paged.generate(o, {.initial_states = initial});
            const auto b = copied.generate(o, {.initial_states = initial});
            REQUIRE(a.items.size() == items);
            REQUIRE(b.items.size() == items);
            for (std::size_t n = 0; n < items; ++n) {
                if (beam == 1) {
                    const auto want = greedy_by_hand(column(initial[0], n), column(initial[1], n), 6);
                    CHECK(a.items[n][0].symbols == want.first);
                    CHECK(a.items[n][0].log_probability == doctest::Approx(want.second).epsilon(1e-5));
                    CHECK(b.items[n][0].symbols == want.first);
                    CHECK(b.items[n][0].log_probability == doctest::Approx(want.second).epsilon(1e-5));
                }
                REQUIRE(a.items[n].size() == b.items[n].size());
                for (std::size_t h = 0; h < a.items[n].size(); ++h) {
                    CHECK(a.items[n][h].symbols == b.items[n][h].symbols);
                    CHECK(a.items[n][h].log_probability == b.items[n][h].log_probability);
                }
            }
        }
    }
}

TEST_CASE("Generator's pages kept in bfloat16: every row rounded as stored, a double session's kept whole") {
    // GenerateOptions::cache: the rows the step reads back are those it returned, rounded to
    // bfloat16, which the same decoding by hand with rounded rows gives; they move the
    // log-probability off the float cache's (so the rounding is seen). A double session keeps its
    // rows as they are: its hypotheses are those of the float cache.
    layers::Generator paged(two_growing_states(layers::StateUpdate::append), {});
    constexpr std::size_t items = 3;
    const std::vector<Value> initial{rows_of(items, 2, 0.5), rows_of(items, 1, -0.75)};
    layers::GenerateOptions o{.beam_width = 1, .max_length = 6, .start_symbol = 1, .end_symbol = 0};
    const auto whole = paged.generate(o, {.initial_states = initial});
    o.cache = CachePrecision::bfloat16;
    const auto half = paged.generate(o, {.initial_states = initial});
    const auto in_double = layers::Generator(two_growing_states(layers::StateUpdate::append, true), {})
                               .generate(o, {.initial_states = initial});
    for (std::size_t n = 0; n < items; ++n) {
        CAPTURE(n);
        const auto want = greedy_by_hand(column(initial[0], n), column(initial[1], n), 6, true);
        CHECK(half.items[n][0].symbols == want.first);
        CHECK(half.items[n][0].log_probability == doctest::Approx(want.second).epsilon(1e-6));
        CHECK(std::abs(half.items[n][0].log_probability - whole.items[n][0].log_probability) > 1e-5);
        CHECK(in_double.items[n][0].symbols == whole.items[n][0].symbols);
        CHECK(in_double.items[n][0].log_probability ==
              doctest::Approx(greedy_by_hand(column(initial[0], n), column(initial[1], n), 6).second).epsilon(1e-7));
    }
}

using loom::layers::generation::PageList;

namespace {

// List r of a pass's page lists, as a vector.
std::vector<std::size_t> list_of(const loom::PageLists& lists, std::size_t r) {
    const auto ids = lists.of(r);
    return {ids.begin(), ids.end()};
}

}  // namespace

TEST_CASE("page lists: a sampled stream's rows lie one after another, a run of 64 rows at a time") {
    // Three streams, each its own parent at every step (sampling), a prompt of 2 rows then 1 a step.
    PageList pages;
    const std::vector<std::size_t> same{0, 1, 2};
    pages.next(same, 2);
    const std::size_t steps = 100;
    for (std::size_t t = 1; t < steps; ++t) pages.next(same, 1);
    const loom::PageLists& lists = pages.lists();
    REQUIRE(lists.rows() == 3);
    REQUIRE(lists.length() == 2 + steps - 1);
    std::set<std::size_t> all;
    for (std::size_t r = 0; r < 3; ++r) {
        const auto ids = list_of(lists, r);
        all.insert(ids.begin(), ids.end());
        // Within a run, each row the one after the row before; a new run after every 64 rows.
        std::size_t breaks = 0;
        for (std::size_t j = 1; j < ids.size(); ++j) {
            if (ids[j] == ids[j - 1] + 1) continue;
            ++breaks;
            CHECK(j % PageList::kRunRows == 0);
        }
        CHECK(breaks == (ids.size() - 1) / PageList::kRunRows);
    }
    CHECK(all.size() == 3 * lists.length());  // no row shared by two streams
    CHECK(*all.rbegin() < lists.table_rows());
    CHECK(lists.table_rows() == pages.used);
}

TEST_CASE("page lists: beam search's children read their parent's rows, the first continues its run") {
    PageList pages;
    pages.next({0, 1}, 1);  // two hypotheses, a row each
    const auto first = pages.lists();
    // Both children of hypothesis 1 and none of 0: each list is parent 1's, then the row parent 1
    // produced, stored once.
    pages.next({1, 1}, 1);
    const auto lists = pages.lists();
    CHECK(list_of(lists, 0) == list_of(lists, 1));
    CHECK(list_of(lists, 0)[0] == list_of(first, 1)[0]);
    CHECK(list_of(lists, 0)[1] == list_of(first, 1)[0] + 1);  // parent 1's run, continued
    REQUIRE(pages.stored.size() == 1);
    // The next step: child 0 continues the run, child 1 starts one of its own.
    pages.next({0, 1}, 1);
    const auto a = list_of(pages.lists(), 0), b = list_of(pages.lists(), 1);
    CHECK(a[2] == a[1] + 1);
    CHECK(b[2] != a[2]);
    CHECK(b[2] >= list_of(first, 1)[0] + PageList::kRunRows);  // after the runs made before
    CHECK(std::vector<std::size_t>(a.begin(), a.begin() + 2) == std::vector<std::size_t>(b.begin(), b.begin() + 2));
}
