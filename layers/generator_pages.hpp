#pragma once
// Internal to the Generator: its key/value caches kept as pages. Every row a step returns for an
// appended state [any_size, D] is stored once in a table (PageTable), and each hypothesis's state
// is the list of its ancestors' rows (PageList: for the states that grow alike, made into the
// integer PageLists of core/page_lists.hpp once a pass), which the step reads through paged_rows.
// Beam search's reordering makes new lists; no row of a cache is copied.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/page_lists.hpp"
#include "core/quantized_gemm.hpp"
#include "core/value.hpp"

namespace loom::layers::generation {

// Rows of the last pass, `width` elements each, from `data`.
template <class T>
struct PassRows {
    const T* data = nullptr;
    std::size_t width = 0;
};

// The pages of the paged states (Generator::State::Paged) that start with as many rows and grow by
// as many a step (a Transformer's keys and values of every layer: none, then one each), made and
// checked once a pass for all of them: their tables are filled in lockstep, so a row's number is the
// same in each. Each row's list is its parent's followed by the rows its parent produced, stored
// once per parent that any row keeps; `stored` says where each such parent's rows went this pass.
// Beam search's reordering is this: new lists of row numbers, no row of a cache copied.
// A hypothesis's rows are kept together: each line of descent stores into a run of kRunRows rows
// of its own (a prompt's rows, when more, fill one of their own), the first child of a parent continuing the parent's
// run (a sampled stream's keys lie one after another, where the memory's prefetchers follow them, not one row of every
// stream apart); a parent's other children start runs of their own.
class PageList {
public:
    // Rows a run holds: 64 rows of 256 floats are 64 KB a layer.
    static constexpr std::size_t kRunRows = 64;

    // This pass's lists for rows whose parents (rows of the last pass) are `parents`, each of which
    // produced `per_step` rows.
    const PageLists& next(const std::vector<std::size_t>& parents, std::size_t per_step) {
        const std::size_t rows = parents.size(), old_tk = lists_.length();
        const std::size_t tk = old_tk + per_step;
        const std::size_t known = parents.empty() ? 0 : *std::max_element(parents.begin(), parents.end()) + 1;
        std::vector<std::size_t> stored_at(known, kNone);
        std::vector<Run> runs(rows);
        stored.clear();
        std::vector<std::size_t> ids(rows * tk);
        for (std::size_t r = 0; r < rows; ++r) {
            const std::size_t p = parents[r];
            if (stored_at[p] == kNone) {
                Run run = p < runs_.size() ? runs_[p] : Run{};
                if (run.next + per_step > run.end) {  // a run of its own: none yet, or this one is full
                    run = {used, used + std::max(kRunRows, per_step)};
                    used = run.end;
                }
                stored_at[p] = run.next;
                stored.push_back({p, run.next});
                runs[r] = {run.next + per_step, run.end};  // the first child continues the run
            }
            std::size_t* to = ids.data() + r * tk;
            if (old_tk) std::copy_n(lists_.of(p).data(), old_tk, to);
            for (std::size_t j = 0; j < per_step; ++j) to[old_tk + j] = stored_at[p] + j;
        }
        runs_ = std::move(runs);
        lists_ = PageLists(std::move(ids), rows, used, storage);
        return lists_;
    }
    // The last pass's lists, set into every state of the group (a copy shares the numbers).
    const PageLists& lists() const { return lists_; }
    std::vector<std::pair<std::size_t, std::size_t>> stored;  // this pass: (parent, its first row's index)
    std::size_t used = 0;                                     // rows stored so far, in every table
    std::size_t pass = kNone;                                 // the pass `stored` and the lists are of
    RowStorage storage = RowStorage::elements;                // how the tables keep their rows

private:
    static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
    // Where a row's next step's rows go: [next, end) is what is left of its run (empty: none).
    struct Run {
        std::size_t next = 0, end = 0;
    };
    PageLists lists_;
    std::vector<Run> runs_;  // of the last pass's rows
};

// A paged state's table of every row stored, bound as a static input and written in place between
// passes (the session reads it only during one). Rows kept in bfloat16 (RowStorage::bfloat16, T
// float) are rounded as stored, two to a row of the table (core/page_lists.hpp).
template <class T>
class PageTable {
public:
    PageTable(std::size_t width, RowStorage storage) : width_(width), storage_(storage) {}
    // Stores the rows each parent of `list.stored` produced (`produced`, per row of the last pass).
    void store(PassRows<T> produced, const PageList& list) {
        reserve(std::max<std::size_t>(1, list.used));  // a table even before any row
        for (const auto& [parent, at] : list.stored) {
            const T* row = produced.data + parent * produced.width;
            if (storage_ == RowStorage::elements) {
                std::copy_n(row, produced.width, table_ + at * width_);
                continue;
            }
            char* to = reinterpret_cast<char*>(table_) + at * width_ * sizeof(std::uint16_t);
            if constexpr (std::is_same_v<T, float>) {
                bfloat16_bits(row, produced.width, to);  // bytes: the storage's objects are T's
                continue;
            }
            for (std::size_t e = 0; e < produced.width; ++e) {
                const std::uint16_t bits = bfloat16_bits(static_cast<float>(row[e]));
                std::memcpy(to + e * sizeof bits, &bits, sizeof bits);
            }
        }
    }
    // The table, bound at every pass: the same storage, so that what store() writes reaches the session.
    const Value& table() const { return value_; }

private:
    // Room for `rows` rows: a table twice as large when it is full, the stored rows copied over.
    void reserve(std::size_t rows) {
        if (rows <= capacity_) return;
        const std::size_t capacity = std::max({rows, 2 * capacity_, std::size_t{64}});
        // Rows of bfloat16 two to a row of T's (T is float for them).
        const std::size_t per = rows_per_table_row<T>(storage_);
        const std::size_t table_rows = (capacity + per - 1) / per;
        xt::xarray<T> grown = xt::zeros<T>({table_rows, width_});
        if (capacity_) std::memcpy(grown.data(), table_, (capacity_ + per - 1) / per * width_ * sizeof(T));
        value_ = Value::tensor(std::move(grown));
        table_ = value_.data<T>().data();  // taken before any copy of value_: it reaches the bound copies
        capacity_ = capacity;
    }

    std::size_t width_;
    RowStorage storage_;
    std::size_t capacity_ = 0;
    Value value_;
    T* table_ = nullptr;
};

}  // namespace loom::layers::generation
