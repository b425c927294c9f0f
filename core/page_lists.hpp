#pragma once
/// \file
/// A generating decoder's key/value cache kept as pages: every row a step returned is stored once in
/// a table, and each hypothesis reads its ancestors' rows, in order, through a list of their row
/// numbers in that table. One PageLists holds one step's lists for every hypothesis (the rows of
/// the step): whole numbers (no float ids, so no 2^24 rows' limit), checked once against the
/// table's rows when made, then read where they lie by every layer's attention (graph/ops.hpp:
/// paged_rows). Beam search reorders hypotheses by making the next step's lists from their parents'
/// (no row of a cache is copied). Copies share the numbers: a step's lists are made once and handed
/// to each layer for nothing.
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace loom {

/// How the rows of the tables the lists index are stored, which every reader of them must know.
enum class RowStorage {
    elements,  ///< each row the table's row: [R, D] of the table's own elements (float or double)
    /// each row D bfloat16 elements (2 bytes each, widened to float as read: a key/value cache in
    /// half the bytes), one after another from the start of a float table's storage, so that a
    /// float table [R, D] holds 2R rows. Readers compute in float; a double table is refused.
    bfloat16,
};

/// The rows of `storage` that one row of a table of T holds: 1, or (bfloat16) sizeof(T) / 2.
template <class T>
constexpr std::size_t rows_per_table_row(RowStorage storage) {
    return storage == RowStorage::bfloat16 ? sizeof(T) / 2 : 1;
}

/// `rows()` lists of `length()` row numbers each, every number below `table_rows()`.
class PageLists {
public:
    /// No rows.
    PageLists() = default;
    /// `ids` holds the lists one after another, [rows, ids.size() / rows]; a UserError names the
    /// first number that is not below table_rows (or a size that does not divide into rows).
    /// `storage`: how the tables' rows are kept (the same for every table read through these lists).
    PageLists(std::vector<std::size_t> ids, std::size_t rows, std::size_t table_rows,
              RowStorage storage = RowStorage::elements);

    /// \return the number of lists (the step's hypotheses).
    std::size_t rows() const { return rows_; }
    /// \return the row numbers in each list (the rows a hypothesis reads).
    std::size_t length() const { return length_; }
    /// \return the rows of the table every number was checked to lie below.
    std::size_t table_rows() const { return table_rows_; }
    /// \return how the tables' rows are stored.
    RowStorage storage() const { return storage_; }
    /// \return list r's row numbers, r < rows().
    std::span<const std::size_t> of(std::size_t r) const { return {ids_->data() + r * length_, length_}; }

private:
    std::shared_ptr<const std::vector<std::size_t>> ids_ = std::make_shared<const std::vector<std::size_t>>();
    std::size_t rows_ = 0, length_ = 0, table_rows_ = 0;
    RowStorage storage_ = RowStorage::elements;
};

}  // namespace loom
