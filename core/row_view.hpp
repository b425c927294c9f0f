#pragma once
// Where the rows of a matrix lie when an op reads them as one matrix without copying them: one
// after another at a stride (an item's keys in a batch, or in every item's static memory through
// the item's index), or rows of a table named by a list of row numbers (a generating decoder's
// key/value cache kept as pages, each hypothesis reading its ancestors' rows), and in either case
// an optional last row that lies elsewhere (a generating step's own key or value, not yet stored
// with the others). Internal to the library (core/attention_product.hpp reads it).
#include <algorithm>
#include <cstddef>

namespace loom {

/// The `size()` rows of a matrix, each `width` elements long, wherever they lie: row j of the first
/// `count` is `base + j * stride`, or `base + pages[j] * stride` when `pages` is set; then `last`,
/// when set, is one more row.
template <class T>
struct RowView {
    T* base = nullptr;
    std::size_t stride = 0;
    std::size_t count = 0;
    const std::size_t* pages = nullptr;
    T* last = nullptr;

    std::size_t size() const { return count + (last != nullptr); }
    /// Row j, j < size().
    T* operator[](std::size_t j) const { return j < count ? base + (pages ? pages[j] : j) * stride : last; }
    /// Whether every row lies at the stride from the one before (a GEMM reads them where they are).
    bool strided() const { return !pages && !last; }
    /// Copies the first `width` elements of every row into `to`, one after another.
    template <class U>
    void gather(std::size_t width, U* to) const {
        for (std::size_t j = 0; j < size(); ++j) std::copy_n((*this)[j], width, to + j * width);
    }
};

}  // namespace loom
