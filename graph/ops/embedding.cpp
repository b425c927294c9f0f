// embedding(ids, table): row ids[i] of table [V, D] for every id, on the ids' dynamic axes. The
// backward scatter-adds into the rows that were used only, so a step costs O(ids * D), not O(V * D).
// index_select(items, index), its sibling of any rank: item index[r] of static items [N, ...] for
// each row r (a generator's hypotheses reading their source's memory), backward a scatter-add.
// gather_rows(table, indices): k rows of a static table per row, by indices that are graph values.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/errors.hpp"
#include "core/gemm.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

// Padding steps hold id 0 (the executor zeroes them), which is always a valid row.
template <class T>
std::size_t row_of(T id, std::size_t vocab) {
    const double v = static_cast<double>(id);
    if (!is_index(v, vocab)) {
        std::ostringstream msg;
        msg << "embedding: id " << v << " is not a row of the table (valid ids are 0.." << vocab - 1
            << "); check the data or enlarge the vocabulary";
        throw UserError(msg.str());
    }
    return static_cast<std::size_t>(v);
}

class Embedding final : public OpBase<Embedding> {
public:
    // `positions_of` (position_embedding): the table holds learned positions of that model, and an
    // id past it is a sequence longer than the table, said so before any row is read.
    explicit Embedding(std::string positions_of = {}) : positions_of_(std::move(positions_of)) {}
    std::string name() const override { return "embedding"; }
    OpTraits traits() const override { return {.gradient_rows = 1u << 1}; }  // the table's rows
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t input) const override { return input == 0; }  // the ids

    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const TypeInfo &ids = in[0], &table = in[1];
        if (ids.shape.size() != 1)
            shape_error(name(), in,
                        "ids must hold one id per item (sample shape [1]), e.g. sequence::input_variable({1})");
        if (table.shape.rank() != 2) shape_error(name(), in, "the table must be a matrix [vocabulary, dim]");
        if (table.axis.is_dynamic())
            shape_error(name(), in, "the table must be a parameter or constant without dynamic axes");
        return {Shape{table.shape[1]}, ids.axis};
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t rows = c.in[0].size(), vocab = c.in[1].dims[0], dim = c.in[1].dims[1];
        const T* ids = c.in[0].data;
        const T* table = c.in[1].data;
        check_positions(ids, rows, vocab);
        for (std::size_t r = 0; r < rows; ++r)
            std::copy_n(table + row_of(ids[r], vocab) * dim, dim, c.out.data + r * dim);
    }

    template <class T>
    void bwd(const OpCall<T>& c) const {
        T* gt = c.in_grad[1].data;
        RowGradient<T>* by_rows = c.in_grad_by_rows.empty() ? nullptr : c.in_grad_by_rows[1];
        if (!gt && !by_rows) return;  // ids are indices: they get no gradient
        const std::size_t vocab = c.in[1].dims[0], dim = c.in[1].dims[1];
        const T* ids = c.in[0].data;
        // Only the real rows: padding steps (id 0, zero gradient) would list row 0 as used.
        c.for_each_row([&](std::size_t r) {
            const std::size_t id = row_of(ids[r], vocab);
            T* dst = by_rows ? by_rows->row(id) : gt + id * dim;
            const T* g = c.out_grad.data + r * dim;
            for (std::size_t j = 0; j < dim; ++j) dst[j] += g[j];
        });
    }

private:
    // Positions count from 0 in every sequence, so the largest is the longest sequence's length - 1
    // (padding rows hold 0).
    template <class T>
    void check_positions(const T* ids, std::size_t rows, std::size_t table_rows) const {
        if (positions_of_.empty()) return;
        double last = 0;
        for (std::size_t r = 0; r < rows; ++r) last = std::max(last, static_cast<double>(ids[r]));
        if (last < static_cast<double>(table_rows)) return;  // NaN too: row_of names it
        std::ostringstream msg;
        msg << positions_of_ << ": a sequence of " << last + 1
            << " steps is longer than its learned positions (max_positions " << table_rows << ")";
        throw UserError(msg.str());
    }

    std::string positions_of_;
};

// embedding_product(ids, table, W[, b]) = embedding(ids, table) times W (plus a bias b of the
// output's shape): what compile's fold makes of an embedding read only by a product
// (graph/fold_products.hpp). A batch of R ids holds at most V distinct ones (V the vocabulary), so
// the product runs on the distinct ids' rows only, forward and backward: min(R, V) rows instead of
// R. Each output row is the same sum as the unfolded product's, and the table's gradient is still
// added by rows, only into the rows the ids used.
class EmbeddingProduct final : public OpBase<EmbeddingProduct> {
public:
    explicit EmbeddingProduct(bool bias) : bias_(bias) {}
    std::string name() const override { return bias_ ? "embedding_affine" : "embedding_times"; }
    OpTraits traits() const override { return {.gradient_rows = 1u << 1}; }  // the table's rows
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t input) const override { return input < 3; }  // ids, table, W

    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const TypeInfo &ids = in[0], &table = in[1], &w = in[2];
        if (ids.shape.size() != 1) shape_error(name(), in, "ids must hold one id per item (sample shape [1])");
        if (table.shape.rank() != 2 || table.axis.is_dynamic())
            shape_error(name(), in, "the table must be a static matrix [vocabulary, dim]");
        if (w.shape.rank() < 1 || w.shape[0] != table.shape[1] || w.axis.is_dynamic())
            shape_error(name(), in, "W must be static with the table's row size as its first axis");
        const Shape out(std::vector<std::size_t>(w.shape.begin() + 1, w.shape.end()));
        if (bias_ && (in[3].shape != out || in[3].axis.is_dynamic()))
            shape_error(name(), in, "the bias must be static, of the output's shape " + out.str());
        return {out, ids.axis};
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const Distinct& d = distinct(c);
        const std::size_t u = d.ids.size(), dim = c.in[1].dims[1], n = c.out.sample_size();
        T* x = c.work->get(u * (dim + n));
        T* y = x + u * dim;
        gather_rows(d, c.in[1].data, dim, x);
        if (bias_)
            for (std::size_t k = 0; k < u; ++k) std::copy_n(c.in[3].data, n, y + k * n);
        gemm(false, false, u, n, dim, T(1), x, dim, c.in[2].data, n, bias_ ? T(1) : T(0), y, n);
        std::size_t i = 0;
        c.for_each_row([&](std::size_t r) { std::copy_n(y + d.slot[i++] * n, n, c.out.data + r * n); });
    }

    template <class T>
    void bwd(const OpCall<T>& c) const {
        const Distinct& d = distinct(c);
        const std::size_t u = d.ids.size(), dim = c.in[1].dims[1], n = c.out.sample_size();
        T* s = c.work->get(u * (n + 2 * dim));  // [u, n] the output gradient summed per id, then 2 [u, dim]
        T* x = s + u * n;
        std::fill_n(s, u * n, T(0));
        std::size_t i = 0;
        c.for_each_row([&](std::size_t r) {
            T* to = s + d.slot[i++] * n;
            const T* g = c.out_grad.data + r * n;
            for (std::size_t j = 0; j < n; ++j) to[j] += g[j];
        });
        if (T* gw = c.in_grad[2].data) {  // dW += X^T S
            gather_rows(d, c.in[1].data, dim, x);
            gemm(true, false, dim, n, u, T(1), x, dim, s, n, T(1), gw, n);
        }
        if (bias_)
            if (T* gb = c.in_grad[3].data)
                for (std::size_t k = 0; k < u; ++k)
                    for (std::size_t j = 0; j < n; ++j) gb[j] += s[k * n + j];
        RowGradient<T>* by_rows = c.in_grad_by_rows.empty() ? nullptr : c.in_grad_by_rows[1];
        T* gt = c.in_grad[1].data;
        if (!gt && !by_rows) return;
        T* dx = x + u * dim;  // dX = S W^T, one row per distinct id, added into its table row
        gemm(false, true, u, dim, n, T(1), s, n, c.in[2].data, n, T(0), dx, dim);
        for (std::size_t k = 0; k < u; ++k) {
            T* to = by_rows ? by_rows->row(d.ids[k]) : gt + d.ids[k] * dim;
            for (std::size_t j = 0; j < dim; ++j) to[j] += dx[k * dim + j];
        }
    }

private:
    // The distinct ids of the real rows, in the order first seen, and per real row (in
    // for_each_row's order) its id's position among them. The calling thread's, reused.
    struct Distinct {
        std::vector<std::size_t> ids, slot;
        std::vector<std::int32_t> position;  // per table row: its place in ids, or -1
    };
    template <class T>
    static const Distinct& distinct(const OpCall<T>& c) {
        thread_local Distinct d;
        const std::size_t vocab = c.in[1].dims[0];
        for (std::size_t id : d.ids) d.position[id] = -1;  // what the last call left
        d.ids.clear();
        d.slot.clear();
        if (d.position.size() < vocab) d.position.resize(vocab, -1);
        c.for_each_row([&](std::size_t r) {
            const std::size_t id = row_of(c.in[0].data[r], vocab);
            std::int32_t& at = d.position[id];
            if (at < 0) {
                at = static_cast<std::int32_t>(d.ids.size());
                d.ids.push_back(id);
            }
            d.slot.push_back(static_cast<std::size_t>(at));
        });
        return d;
    }
    template <class T>
    static void gather_rows(const Distinct& d, const T* table, std::size_t dim, T* to) {
        for (std::size_t k = 0; k < d.ids.size(); ++k) std::copy_n(table + d.ids[k] * dim, dim, to + k * dim);
    }

    bool bias_;
};

}  // namespace

// Rows of a static table [N, sample...] picked per row by whole numbers on a dynamic axis, in two
// forms. index_select(items, index): index [1], row r of the output items[index[r]] ([sample...]).
// gather_rows(table, indices): indices [k] (k may be a run-time size, any_size), row r the table's
// rows at its indices, [k, sample...]. Backward adds each row's gradients into the rows it
// picked, one row after another, so rows picking the same one accumulate without a race.
class PickRows final : public OpBase<PickRows> {
public:
    explicit PickRows(bool many) : many_(many) {}
    std::string name() const override { return many_ ? "gather_rows" : "index_select"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t input) const override { return input == 1; }  // the index
    bool many() const { return many_; }

    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const TypeInfo &table = in[0], &index = in[1];
        if (table.axis.is_dynamic() || table.shape.rank() < 1)
            shape_error(name(), in,
                        many_
                            ? "the table must be static [R, sample...] (a static_input_variable, parameter or constant)"
                            : "the items must be static [N, sample...] (a static_input_variable, parameter or "
                              "constant)");
        std::vector<std::size_t> out(table.shape.begin() + 1, table.shape.end());
        if (many_) {
            if (!index.axis.is_dynamic() || index.shape.rank() != 1)
                shape_error(name(), in, "the indices must be a vector [k] per row on a dynamic axis");
            out.insert(out.begin(), index.shape[0]);
        } else if (!index.axis.is_dynamic() || index.shape.size() != 1) {
            shape_error(name(), in, "the index must hold one item number per row (sample shape [1]) on a dynamic axis");
        }
        return {Shape(out), index.axis};
    }
    // gather_rows: the number of indices, which may be known only now (and may be 0).
    template <class T>
    void prep(const OpCall<T>& c, Prepared& p) const {
        if (!many_) return;
        const View<const T>& table = c.in[0];
        std::vector<std::size_t> out{c.in[1].sample_size()};
        out.insert(out.end(), table.dims.begin() + 1, table.dims.end());
        p.has_shape = true;
        p.shape = Shape(out);
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        each_pick(c, c.out.data, [&](const T* index, T* out, std::size_t width) {
            std::copy_n(c.in[0].data + row(*index, c.in[0].dims[0]) * width, width, out);
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;  // the index is a number: it gets no gradient
        each_pick(c, c.out_grad.data, [&](const T* index, const T* out_grad, std::size_t width) {
            T* dst = c.in_grad[0].data + row(*index, c.in[0].dims[0]) * width;
            for (std::size_t j = 0; j < width; ++j) dst[j] += out_grad[j];
        });
    }

private:
    // f(index, the place for it in `out` (the output or its gradient), a table row's size) for every
    // index of every real row.
    template <class T, class Out, class F>
    static void each_pick(const OpCall<T>& c, Out* out, F&& f) {
        const std::size_t count = c.in[0].dims[0], width = c.in[0].sample_size() / (count ? count : 1);
        const std::size_t k = c.in[1].sample_size();
        c.for_each_row([&](std::size_t r) {
            for (std::size_t i = 0; i < k; ++i) f(c.in[1].data + r * k + i, out + (r * k + i) * width, width);
        });
    }
    // The table row `index` names, or a UserError naming the op, the index and the table's rows.
    template <class T>
    std::size_t row(T index, std::size_t count) const {
        const double v = static_cast<double>(index);
        if (!is_index(v, count)) {
            std::ostringstream msg;
            if (many_)
                msg << "gather_rows: index " << v << " is not a row of the table of " << count
                    << " rows (valid indices are [0, " << count << "))";
            else
                msg << "index_select: index " << v << " is not one of the " << count << " items (valid indices are [0, "
                    << count << "))";
            throw UserError(msg.str());
        }
        return static_cast<std::size_t>(v);
    }

    bool many_;
};

bool is_embedding(const Op& op) { return dynamic_cast<const Embedding*>(&op) != nullptr; }

std::shared_ptr<const Op> embedding_product(bool bias) {
    static const auto with_bias = std::make_shared<const EmbeddingProduct>(true),
                      without = std::make_shared<const EmbeddingProduct>(false);
    return bias ? with_bias : without;
}

// Only the table (input 1), whose gradient the backward adds into by rows.
Variable embedding(const Variable& ids, const Variable& table, const std::string& name) {
    static const auto op = std::make_shared<const Embedding>();
    return Variable(apply_op(op, {ids.node(), table.node()}, name));
}

Variable position_embedding(const Variable& positions, const Variable& table, const std::string& positions_of,
                            const std::string& name) {
    if (positions_of.empty()) throw UserError("position_embedding: name the model whose positions the table holds");
    return Variable(apply_op(std::make_shared<const Embedding>(positions_of), {positions.node(), table.node()}, name));
}

bool is_index_select(const Op& op) {
    const auto* pick = dynamic_cast<const PickRows*>(&op);
    return pick && !pick->many();
}

Variable index_select(const Variable& items, const Variable& index, const std::string& name) {
    static const auto op = std::make_shared<const PickRows>(false);
    return Variable(apply_op(op, {items.node(), index.node()}, name));
}

Variable gather_rows(const Variable& table, const Variable& indices, const std::string& name) {
    static const auto op = std::make_shared<const PickRows>(true);
    return Variable(apply_op(op, {table.node(), indices.node()}, name));
}

}  // namespace loom
