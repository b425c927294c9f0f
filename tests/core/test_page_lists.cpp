// core/page_lists.hpp: a key/value cache's page lists are whole numbers, checked once when made.
#include <doctest/doctest.h>

#include "core/errors.hpp"
#include "core/page_lists.hpp"

using namespace loom;

TEST_CASE("PageLists: one list per row, each number checked against the table's rows when made") {
    const PageLists lists({5, 0, 2, 2, 2, 1}, 2, 6);
    CHECK(lists.rows() == 2);
    CHECK(lists.length() == 3);
    CHECK(lists.table_rows() == 6);
    CHECK(std::vector<std::size_t>(lists.of(1).begin(), lists.of(1).end()) == std::vector<std::size_t>{2, 2, 1});
    // A copy shares the numbers (a step's lists handed to every layer for nothing), and says how the
    // tables keep their rows: their own elements unless told bfloat16.
    const PageLists copy = lists;
    CHECK(copy.of(0).data() == lists.of(0).data());
    CHECK(copy.storage() == RowStorage::elements);
    CHECK(PageLists({1, 0}, 1, 2, RowStorage::bfloat16).storage() == RowStorage::bfloat16);
    // No rows yet (a cache before its first row): lists of length 0.
    CHECK(PageLists({}, 3, 0).length() == 0);
    CHECK(PageLists().rows() == 0);
    CHECK_THROWS_WITH_AS(PageLists({5, 0, 2, 2, 6, 1}, 2, 6),
                         doctest::Contains("list 1 reads row 6 of a table of 6 rows"), UserError);
    CHECK_THROWS_WITH_AS(PageLists({5, 0, 2}, 2, 6), doctest::Contains("3 row numbers do not make 2 lists"), UserError);
    // Whole numbers: rows past 2^24, which a float cannot number one by one, are kept as they are.
    const std::size_t far = (std::size_t{1} << 24) + 1;
    const PageLists big({far, far + 2, 0, far}, 2, far + 3);
    CHECK(big.of(0)[1] == far + 2);
    CHECK(big.of(1)[1] == far);
    CHECK(big.of(0)[1] != static_cast<std::size_t>(static_cast<float>(far + 2)));  // what a float id would read
}
