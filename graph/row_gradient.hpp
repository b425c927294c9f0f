#pragma once
/// \file
/// RowGradient: the row-sparse form of a gradient, which ops write (graph/op.hpp includes this
/// header) and Session, the learners and the reduction over processes read, without the op interface.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom {

/// The one row-sparse gradient form: an embedding table's gradient when every op that adds into it
/// writes whole rows (`OpTraits::writes_gradient_rows`). Only the rows a minibatch used take memory,
/// instead of the whole [vocabulary, dim] table. rows[k]'s gradient is data[k * width,
/// (k + 1) * width); rows not listed are zero.
template <class T>
struct RowGradient {
    std::vector<std::int32_t> index;  ///< per row of the table: its position in `rows`, or -1
    std::vector<std::size_t> rows;    ///< in the order they were first written
    std::vector<T> data;              ///< rows.size() * width values: rows[k]'s gradient at k * width
    std::size_t width = 0;            ///< the values per row (the table's row size)
    std::vector<std::size_t> sorted;  ///< `rows` in increasing order, once the gradient is final

    /// \return row r's gradient to add into (zeroed when r is new); valid until the next call.
    T* row(std::size_t r) {
        std::int32_t& k = index[r];
        if (k < 0) {
            k = static_cast<std::int32_t>(rows.size());
            rows.push_back(r);
            data.resize(rows.size() * width, T(0));
        }
        return data.data() + static_cast<std::size_t>(k) * width;
    }
    /// \return row r's gradient, or nullptr when r was not written (its gradient is zero).
    const T* find(std::size_t r) const {
        return index[r] < 0 ? nullptr : data.data() + static_cast<std::size_t>(index[r]) * width;
    }
    /// Empties the gradient for a table of `table_rows` rows of `row_width` values.
    void reset(std::size_t table_rows, std::size_t row_width) {
        if (index.size() != table_rows || width != row_width) {
            index.assign(table_rows, -1);
        } else {
            for (std::size_t r : rows) index[r] = -1;
        }
        width = row_width;
        rows.clear();
        data.clear();
        sorted.clear();
    }
    /// Marks the gradient final: fills `sorted`.
    void finish() {
        sorted = rows;
        std::sort(sorted.begin(), sorted.end());
    }
    /// The gradient becomes `new_rows` (distinct, each below the table's row count) with their
    /// values `new_data` (new_rows.size() * width), finished: what a reduction over processes does
    /// with the union of every process's rows.
    void replace(std::vector<std::size_t> new_rows, std::vector<T> new_data) {
        for (std::size_t r : rows) index[r] = -1;
        rows = std::move(new_rows);
        data = std::move(new_data);
        for (std::size_t k = 0; k < rows.size(); ++k) index[rows[k]] = static_cast<std::int32_t>(k);
        finish();
    }
};

}  // namespace loom
