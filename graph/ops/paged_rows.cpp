// paged_rows(table, pages, like): a key/value cache kept as pages (core/page_lists.hpp), each row
// the table rows its page list names. attention() over keys and values of this form reads them in
// the tables where they lie (graph/ops/attention_memory.cpp); this op's own forward, which copies
// them, runs only for another reader.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "core/errors.hpp"
#include "core/quantized_gemm.hpp"
#include "graph/ops.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

// Inputs (table [R, sample...], like): row r of the output [Tk, sample...] on like's axis is the
// table's rows pages->of(r). The page lists are not a graph value: their owner (a Generator) sets
// them between passes, and every op holding them reads the step's lists.
class PagedRows final : public OpBase<PagedRows> {
public:
    explicit PagedRows(std::shared_ptr<const PageLists> pages) : pages_(std::move(pages)) {}
    std::string name() const override { return "paged_rows"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    const std::shared_ptr<const PageLists>& pages() const { return pages_; }

    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const TypeInfo &table = in[0], &like = in[1];
        if (table.axis.is_dynamic() || table.shape.rank() < 1)
            shape_error(name(), in,
                        "the table must be static [R, sample...] (a static_input_variable, parameter or constant)");
        if (like.axis.kind != Axis::Kind::Batch)
            shape_error(name(), in, "`like` must be a batch value (one row per page list)");
        std::vector<std::size_t> out{0};  // 0: a size known at run time
        out.insert(out.end(), table.shape.begin() + 1, table.shape.end());
        return {Shape(out), like.axis};
    }
    // The lists' length, known only now (0: a cache before its first row).
    template <class T>
    void prep(const OpCall<T>& c, Prepared& p) const {
        check(c);
        std::vector<std::size_t> out{pages_->length()};
        out.insert(out.end(), c.in[0].dims.begin() + 1, c.in[0].dims.end());
        p.has_shape = true;
        p.shape = Shape(out);
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const T* table = c.in[0].data;
        if (pages_->storage() == RowStorage::bfloat16) {  // rows of bfloat16 bits, widened (check: T is float)
            each_row(c, c.out.data, [&](std::size_t row, T* out, std::size_t width) {
                for (std::size_t e = 0; e < width; ++e) {
                    std::uint16_t bits;
                    std::memcpy(&bits, reinterpret_cast<const char*>(table) + (row * width + e) * sizeof bits,
                                sizeof bits);
                    out[e] = widen_bf16(bits);
                }
            });
            return;
        }
        each_row(c, c.out.data,
                 [&](std::size_t row, T* out, std::size_t width) { std::copy_n(table + row * width, width, out); });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (pages_->storage() != RowStorage::elements)
            throw UserError("paged_rows: rows kept in bfloat16 (a generator's key/value cache) have no backward");
        if (!c.in_grad[0]) return;
        T* grad = c.in_grad[0].data;  // the table's values are not kept for backward: rows by number
        each_row(c, c.out_grad.data, [&](std::size_t row, const T* out_grad, std::size_t width) {
            T* dst = grad + row * width;
            for (std::size_t j = 0; j < width; ++j) dst[j] += out_grad[j];
        });
    }

private:
    // The page lists were checked when made against the rows of the table they were made for; here
    // only that the table holds those rows and that there is a list per row.
    template <class T>
    void check(const OpCall<T>& c) const {
        const bool packed = pages_->storage() == RowStorage::bfloat16;
        if (packed && !std::is_same_v<T, float>)
            throw UserError("paged_rows: rows kept in bfloat16 are read into float values, not double");
        const std::size_t per = rows_per_table_row<T>(pages_->storage());
        if (pages_->rows() != c.in[1].rows() || pages_->table_rows() > c.in[0].dims[0] * per)
            throw UserError("paged_rows: " + std::to_string(pages_->rows()) + " page lists into " +
                            std::to_string(pages_->table_rows()) + " rows, for " + std::to_string(c.in[1].rows()) +
                            " rows over a table of " + std::to_string(c.in[0].dims[0] * per) + " rows");
    }
    // f(the table row's number, its place in `out` (the output or its gradient), a row's size) for
    // each page of each row to compute, one row after another (rows sharing a page add into it in
    // turn). Only the table's dims are read: backward has no table values.
    template <class T, class Out, class F>
    void each_row(const OpCall<T>& c, Out* out, F&& f) const {
        const std::size_t count = c.in[0].dims[0], width = count ? c.in[0].size() / count : 0;
        const std::size_t tk = pages_->length();
        for (std::size_t r = 0, rows = pages_->rows(); r < rows; ++r) {
            const std::span<const std::size_t> list = pages_->of(r);
            for (std::size_t j = 0; j < tk; ++j) f(list[j], out + (r * tk + j) * width, width);
        }
    }

    std::shared_ptr<const PageLists> pages_;
};

}  // namespace

std::shared_ptr<const PageLists> paged_rows_pages(const Node& node) {
    if (node.kind != NodeKind::Op || !node.op) return nullptr;
    const auto* op = dynamic_cast<const PagedRows*>(node.op.get());
    return op ? op->pages() : nullptr;
}

Variable paged_rows(const Variable& table, std::shared_ptr<const PageLists> pages, const Variable& like,
                    const std::string& name) {
    if (!pages) throw UserError("paged_rows: give the page lists (a null pointer was given)");
    return Variable(apply_op(std::make_shared<const PagedRows>(std::move(pages)), {table.node(), like.node()}, name));
}

}  // namespace loom
