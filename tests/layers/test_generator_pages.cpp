// The Generator's page lists (layers/generator_pages.hpp): each hypothesis's list is its parent's
// followed by the rows its parent produced, stored once per parent; a line of descent keeps its rows
// together in runs of PageList::kRunRows, a parent's first child continuing the parent's run and
// its other children starting runs of their own.
#include <doctest/doctest.h>

#include <cstddef>
#include <numeric>
#include <set>
#include <vector>

#include "layers/generator_pages.hpp"

using loom::layers::generation::PageList;

namespace {

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
