// embedding(ids, table): row ids[i] of table [V, D] for every id, on the ids' dynamic axes. The
// backward scatter-adds into the rows that were used only, so a step costs O(ids * D), not O(V * D).
#include <cmath>
#include <sstream>

#include "core/errors.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

class Embedding final : public OpBase<Embedding> {
public:
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
    // Padding steps hold id 0 (the executor zeroes them), which is always a valid row.
    template <class T>
    static std::size_t row_of(T id, std::size_t vocab) {
        const double v = static_cast<double>(id);
        if (!(v >= 0) || v >= static_cast<double>(vocab) || v != std::floor(v)) {
            std::ostringstream msg;
            msg << "embedding: id " << v << " is not a row of the table (valid ids are 0.." << vocab - 1
                << "); check the data or enlarge the vocabulary";
            throw UserError(msg.str());
        }
        return static_cast<std::size_t>(v);
    }
};

}  // namespace

// Only the table (input 1), whose gradient the backward adds into by rows.
Variable embedding(const Variable& ids, const Variable& table, const std::string& name) {
    static const auto op = std::make_shared<const Embedding>();
    return Variable(apply_op(op, {ids.node(), table.node()}, name));
}

}  // namespace loom
