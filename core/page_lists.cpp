#include "core/page_lists.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/errors.hpp"

namespace loom {

PageLists::PageLists(std::vector<std::size_t> ids, std::size_t rows, std::size_t table_rows, RowStorage storage)
    : rows_(rows), length_(rows ? ids.size() / rows : 0), table_rows_(table_rows), storage_(storage) {
    if (rows ? ids.size() % rows != 0 : !ids.empty())
        throw UserError("PageLists: " + std::to_string(ids.size()) + " row numbers do not make " +
                        std::to_string(rows) + " lists of one length");
    const auto bad = std::find_if(ids.begin(), ids.end(), [&](std::size_t id) { return id >= table_rows; });
    if (bad != ids.end()) {
        const std::size_t at = static_cast<std::size_t>(bad - ids.begin());
        throw UserError("PageLists: list " + std::to_string(at / length_) + " reads row " + std::to_string(*bad) +
                        " of a table of " + std::to_string(table_rows) + " rows (valid rows are [0, " +
                        std::to_string(table_rows) + "))");
    }
    ids_ = std::make_shared<const std::vector<std::size_t>>(std::move(ids));
}

}  // namespace loom
