// Multi-head scaled dot-product attention over a memory (the math in core/attention_product.hpp):
// one query per item (a batch value, e.g. a generating decoder's step) reads keys and values that
// are batch values [Tk, D] (a key/value cache, or an encoder's unpacked outputs with their mask), or
// every item's static memory [N, Tk, D] through an index per row (attention over index_select's
// picks: no copy per row), or rows of tables through integer page lists (attention over paged_rows:
// a generator's key/value cache). The op decodes its inputs into where each row's keys and values
// lie (core/row_view.hpp) and no more.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/parallel.hpp"
#include "core/quantized_gemm.hpp"
#include "graph/compile.hpp"
#include "graph/ops/attention_rows.hpp"
#include "graph/ops/kinds.hpp"

namespace loom::attention_detail {

namespace {

// Where row r's keys and values lie (the inputs after the query, keys and values follow from it
// and from the options, MemoryAttention::Inputs):
// - given: batch values [Tk, D] and [Tk, Dv], the row's own (a key/value cache, or an encoder's
//   unpacked outputs), or static ones every row reads; Tk may be a run-time size (a cache growing
//   step by step);
// - items: every item's static memory [N, Tk, D] and [N, Tk, Dv], read through an index [1] per
//   row (attention over index_select's picks: no row's memory is copied, and rows sharing an item
//   add into its gradients in turn);
// - pages: static tables of rows [R, D] and [R', Dv], read through page lists (core/page_lists.hpp:
//   whole numbers, checked once when their owner made them) into each (attention over paged_rows:
//   a key/value cache kept as pages, each hypothesis reading its ancestors' rows). attention() builds
//   this form itself when given paged_rows; no compile pass is involved.
enum class RowSource { given, items, pages };

// One query per item (a batch value [D]) over keys and values where `source` says, with an
// optional mask [Tk] per item (0: a padded key; not over pages) and an optional step's own key [D]
// and value [Dv] (batch values), the last key and value after the others (whose Tk may then be 0):
// a generating step reads its cache where it lies instead of a copy one row longer. Each row's
// keys and values become two RowViews (core/row_view.hpp); what is computed on them,
// core/attention_product.hpp says, and how, fwd and bwd below.
class MemoryAttention final : public OpBase<MemoryAttention> {
public:
    MemoryAttention(std::size_t heads, RowSource source, bool masked, bool stepped)
        : heads_(heads), source_(source), masked_(masked), stepped_(stepped) {
        int next = 3;
        if (masked_) in_.mask = next++;
        if (stepped_) in_.step_key = next++, in_.step_value = next++;
        if (source_ == RowSource::items) in_.item = next++;
    }
    // Over pages: the tables are inputs 1 and 2, read through these lists.
    MemoryAttention(std::size_t heads, bool stepped, std::shared_ptr<const PageLists> key_pages,
                    std::shared_ptr<const PageLists> value_pages)
        : MemoryAttention(heads, RowSource::pages, false, stepped) {
        key_pages_ = std::move(key_pages), value_pages_ = std::move(value_pages);
    }
    std::string name() const override { return "attention"; }
    RowSource source() const { return source_; }
    std::size_t heads() const { return heads_; }
    bool masked() const { return masked_; }
    bool stepped() const { return stepped_; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return true; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        if (stepped_) {
            const TypeInfo &key = in[in_.step_key], &value = in[in_.step_value];
            const std::size_t dk = dim_of(in[1], 1), dv = dim_of(in[2], 1);
            if (key.axis.is_sequence() || value.axis.is_sequence() || key.shape != Shape{dk} ||
                value.shape != Shape{dv})
                shape_error(name(), in,
                            "the step's own key and value must be batch values of the keys' and the values' "
                            "row sizes");
        }
        // What one row reads: its query, keys [Tk, D], values [Tk, Dv] and mask [Tk].
        std::vector<TypeInfo> rows{in[0], in[1], in[2]};
        if (masked_) rows.push_back(in[in_.mask]);
        if (source_ == RowSource::items) {
            const TypeInfo& index = in[in_.item];
            if (index.axis.kind != Axis::Kind::Batch || index.shape.size() != 1)
                shape_error(name(), in, "over an indexed memory, the index must be a batch value [1]");
            for (std::size_t i = 1; i < rows.size(); ++i) {
                if (rows[i].axis.is_dynamic() || rows[i].shape.rank() < 1)
                    shape_error(name(), in,
                                "over an indexed memory, the keys, values and mask must be static [N, Tk, ...]");
                rows[i] = {Shape(std::vector<std::size_t>(rows[i].shape.begin() + 1, rows[i].shape.end())), index.axis};
            }
        } else if (source_ == RowSource::pages) {
            const TypeInfo &keys = in[1], &values = in[2];
            if (keys.axis.is_dynamic() || values.axis.is_dynamic() || keys.shape.rank() != 2 ||
                values.shape.rank() != 2)
                shape_error(name(), in, "over pages, the key and value rows must be static [R, D] and [R, Dv]");
            if (in[0].axis.kind != Axis::Kind::Batch)
                shape_error(name(), in, "over pages, the query must be a batch value (one per page list)");
            rows[1] = {Shape{0, keys.shape[1]}, in[0].axis};  // 0: Tk known at run time
            rows[2] = {Shape{0, values.shape[1]}, in[0].axis};
        }
        return infer_rows(rows);
    }

    // Every row's keys and values are found first, here, where a bad index or mask, or page lists
    // that do not fit their tables, throw; then the rows are computed, split among idle inter-op
    // threads (each writes its own rows only, so the values do not depend on the threads).
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t width = c.out.sample_size();
        // This thread's list, reused from call to call; the parts read it through `rows` (a thread
        // that names a thread_local sees its own).
        thread_local std::vector<std::pair<HeadProduct<T>, Operands<T>>> listed;
        auto& rows = listed;
        rows.clear();
        std::size_t keys = 0;
        each_row(c, [&](const HeadProduct<T>& h, const Operands<T>& x) {
            rows.emplace_back(h, x);
            keys += h.lk;
        });
        if (rows.empty()) return;
        auto run = [&](std::size_t begin, std::size_t end) {
            thread_local std::vector<T> scores;
            for (std::size_t i = begin; i < end; ++i) {
                const auto& [h, x] = rows[i];
                scores.resize(heads_ * h.lk);
                // One query: every head at once, the keys and values read wherever they lie.
                T* out = c.out.data + x.row * width;
                if constexpr (std::is_same_v<T, float>)
                    if (x.packed_keys.size()) {  // a cache kept in bfloat16
                        attend_one_query(heads_, h.dk, h.dv, h.scale, x.q, x.packed_keys, x.packed_values,
                                         scores.data(), out);
                        continue;
                    }
                attend_one_query(heads_, h.dk, h.dv, h.scale, x.q, x.keys, x.values, scores.data(), out);
            }
        };
        // A row's multiply-adds, on average; split at 2^16 per part (a few dozen rows).
        const std::size_t per_row = keys / rows.size() * heads_ * (rows[0].first.dk + rows[0].first.dv);
        share_or_run(rows.size(), 1, per_row, std::size_t{1} << 16, run);
    }
    // Per row: a GEMM per head over keys and values where they lie at a stride; else (pages, the
    // step's own row) each row's keys and values copied into one block (backward is no generating
    // step's path), its gradients computed there and added back where each key and value lies (rows
    // sharing a page add into it in turn).
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (source_ == RowSource::pages && key_pages_->storage() != RowStorage::elements)
            throw UserError(
                "attention: over pages kept in bfloat16 (a generator's key/value cache) there is no backward; "
                "keep the rows as the table's own elements to differentiate");
        const std::size_t width = c.out_grad.sample_size();
        each_row(c, [&](const HeadProduct<T>& h, const Operands<T>& x) {
            const std::size_t dq = h.dk * heads_, dvw = h.dv * heads_, n = h.lk;
            const T* dout = c.out_grad.data + x.row * width;
            const Rows<const T> q{x.q, dq};
            if (x.keys.strided() && x.values.strided()) {
                const Rows<const T> k{x.keys.base, x.keys.stride}, v{x.values.base, x.values.stride};
                T* work = c.work->get(2 * n);
                for (std::size_t head = 0; head < heads_; ++head) {
                    const Rows<const T> qh{q.data + head * h.dk, dq}, kh{k.data + head * h.dk, k.stride},
                        vh{v.data + head * h.dv, v.stride};
                    h.backward(qh, kh, vh, {dout + head * h.dv, width}, gradient_rows(c, 0, qh),
                               gradient_rows(c, 1, kh), gradient_rows(c, 2, vh), work);
                }
                return;
            }
            T* keys = c.work->get(2 * n * (dq + dvw) + 2 * n);
            T *values = keys + n * dq, *dkeys = values + n * dvw, *dvalues = dkeys + n * dq, *work = dvalues + n * dvw;
            x.keys.gather(dq, keys);
            x.values.gather(dvw, values);
            std::fill(dkeys, dkeys + n * (dq + dvw), T(0));
            for (std::size_t head = 0; head < heads_; ++head)
                h.backward({q.data + head * h.dk, dq}, {keys + head * h.dk, dq}, {values + head * h.dv, dvw},
                           {dout + head * h.dv, width}, gradient_rows(c, 0, {q.data + head * h.dk, dq}),
                           {dkeys + head * h.dk, dq}, {dvalues + head * h.dv, dvw}, work);
            // dst += src over count elements where dst is input i's gradient at the place of `at` in input i.
            auto add = [&](int i, const T* at, const T* src, std::size_t count) {
                if (!c.in_grad[i]) return;
                T* dst = c.in_grad[i].data + (at - c.in[i].data);
                for (std::size_t e = 0; e < count; ++e) dst[e] += src[e];
            };
            for (std::size_t j = 0; j < n; ++j) {  // the keys and values the views read, the step's own last
                const bool own = j >= x.keys.count;
                add(own ? in_.step_key : 1, x.keys[j], dkeys + j * dq, dq);
                add(own ? in_.step_value : 2, x.values[j], dvalues + j * dvw, dvw);
            }
        });
    }

private:
    // Which input is which after the query, keys and values (-1: not an input of this form).
    struct Inputs {
        int mask = -1, step_key = -1, step_value = -1, item = -1;
    };
    // One row's query [heads * dk] and where its keys and values lie: as T, or (over pages kept in
    // bfloat16) as bfloat16 in `packed_keys` and `packed_values`, `keys` and `values` then empty.
    template <class T>
    struct Operands {
        std::size_t row;
        const T* q;
        RowView<const T> keys, values;
        RowView<const std::uint16_t> packed_keys = {}, packed_values = {};
    };
    // The shape rule of the query [D] over one row's keys [Tk, D], values [Tk, Dv] and mask [Tk].
    TypeInfo infer_rows(std::span<const TypeInfo> in) const {
        if (in[0].axis.is_sequence())
            shape_error(name(), in, "over a memory, the query must be a batch value (one per item)");
        for (std::size_t i = 1; i < in.size(); ++i)
            if (in[i].axis.is_sequence())
                shape_error(name(), in, "over a memory, the keys, values and mask must be batch values [Tk, ...]");
        if (in[0].shape.rank() != 1 || in[1].shape.rank() != 2 || in[2].shape.rank() != 2)
            shape_error(name(), in, "over a memory the query is [D], the keys [Tk, D] and the values [Tk, Dv]");
        const std::size_t tk = in[1].shape[0];
        auto known = [&](std::size_t a, std::size_t b) { return a == 0 || b == 0 || a == b; };
        if (!known(tk, in[2].shape[0]) || (masked_ && (in[3].shape.rank() != 1 || !known(tk, in[3].shape[0]))))
            shape_error(name(), in, "the keys, values and mask must have one number of steps Tk");
        check_heads(name(), in, dim_of(in[1], 1), in[0].shape[0], dim_of(in[2], 1), heads_);
        Axis axis = in[0].axis;
        if (!axis.is_dynamic()) axis = in[1].axis;
        return {Shape{in[2].shape[1]}, axis};
    }
    // Which item row r reads: the index's (checked), its own row of batch keys, or the one item of
    // static keys, which serves every row.
    template <class T>
    std::size_t item_of(const OpCall<T>& c, std::size_t r, std::size_t items) const {
        if (source_ != RowSource::items) return c.in[1].dyn ? r : 0;
        const double index = static_cast<double>(c.in[in_.item].data[r]);
        if (!is_index(index, items)) {
            std::ostringstream msg;
            msg << "attention: row " << r << " reads item " << index << " of a memory of " << items
                << " items (valid indices are [0, " << items << "))";
            throw UserError(msg.str());
        }
        return static_cast<std::size_t>(index);
    }
    // f(product, operands) for every row to compute (its product's dk and dv those of one head).
    template <class T, class F>
    void each_row(const OpCall<T>& c, F&& f) const {
        const View<const T>&q = c.in[0], &k = c.in[1], &v = c.in[2];
        if (source_ == RowSource::pages) return each_paged_row(c, f);
        const bool items_source = source_ == RowSource::items;
        const std::size_t items = items_source ? k.dims[0] : 1;  // items: [N, Tk, D], else [Tk, D] (per row)
        const std::size_t tk = k.dims[items_source ? 1 : k.dyn];
        const std::size_t kw = k.sample_size() / items, vw = v.sample_size() / items;  // one item's
        const std::size_t dq = q.sample_size(), dk = dq / heads_;
        const std::size_t dv = stepped_ ? c.in[in_.step_value].sample_size() / heads_ : (tk ? vw / tk / heads_ : 0);
        if (tk == 0 && !stepped_) return;
        const std::size_t kstride = tk ? kw / tk : 0, vstride = tk ? vw / tk : 0;
        const T scale = T(1) / std::sqrt(static_cast<T>(dk));
        c.for_each_row([&](std::size_t r) {
            const std::size_t item = item_of(c, r, items);
            // The item's visible keys: the first `visible` ones, those the mask marks real (as
            // sequence::unpack makes it: real steps first, then padding).
            std::size_t visible = tk;
            if (masked_) {
                const View<const T>& mask = c.in[in_.mask];
                const T* m = mask.data + (items_source || mask.dyn ? item * tk : 0);
                visible = 0;
                while (visible < tk && m[visible] != T(0)) ++visible;
                if (std::any_of(m + visible, m + tk, [](T x) { return x != T(0); }))
                    throw UserError("attention: the key mask of item " + std::to_string(item) +
                                    " has a padded key before a real one; a mask marks each item's first keys real");
            }
            if (visible == 0 && !stepped_) return;
            Operands<T> x{r,
                          q.data + (q.dyn ? r * dq : 0),
                          {k.data + item * kw, kstride, visible},
                          {v.data + item * vw, vstride, visible}};
            if (stepped_) {
                x.keys.last = c.in[in_.step_key].data + (c.in[in_.step_key].dyn ? r * dq : 0);
                x.values.last = c.in[in_.step_value].data + (c.in[in_.step_value].dyn ? r * dv * heads_ : 0);
            }
            f(HeadProduct<T>{1, visible + stepped_, dk, dv, false, scale}, x);
        });
    }

    // each_row's paged form: row r's keys and values are the table rows its page lists name. The
    // lists were checked against their tables' rows when made (once a step for every layer); here
    // only that they fit these tables and rows, once a call. Rows kept in bfloat16 (float only):
    // the step's own key and value are rounded as the table will keep them, so that a step reads
    // its own row as the steps after it will.
    template <class T, class F>
    void each_paged_row(const OpCall<T>& c, F&& f) const {
        const View<const T>&q = c.in[0], &k = c.in[1], &v = c.in[2];
        const PageLists &key_pages = *key_pages_, &value_pages = *value_pages_;
        const std::size_t tk = key_pages.length(), dq = q.sample_size(), dk = dq / heads_;
        const std::size_t kw = k.dims[1], vw = v.dims[1], dv = vw / heads_, rows = q.rows();
        const bool packed = key_pages.storage() == RowStorage::bfloat16;
        if (value_pages.storage() != key_pages.storage())
            throw UserError("attention: over pages, the keys' and the values' rows must be stored alike");
        if (packed && !std::is_same_v<T, float>)
            throw UserError("attention: over pages kept in bfloat16 the computation is float's, not double's");
        const std::size_t per = rows_per_table_row<T>(key_pages.storage());
        if (value_pages.length() != tk || key_pages.rows() != rows || value_pages.rows() != rows ||
            key_pages.table_rows() > k.dims[0] * per || value_pages.table_rows() > v.dims[0] * per)
            throw UserError("attention: over pages, " + std::to_string(rows) + " queries read " +
                            std::to_string(key_pages.rows()) + " key lists of " + std::to_string(tk) + " rows of " +
                            std::to_string(key_pages.table_rows()) + " (the table holds " +
                            std::to_string(k.dims[0] * per) + ") and " + std::to_string(value_pages.rows()) +
                            " value lists of " + std::to_string(value_pages.length()) + " rows of " +
                            std::to_string(value_pages.table_rows()) + " (the table holds " +
                            std::to_string(v.dims[0] * per) + ")");
        if (tk == 0 && !stepped_) return;
        const T scale = T(1) / std::sqrt(static_cast<T>(dk));
        // Over bfloat16 rows: each row's own key and value rounded, read until this call's rows are computed.
        thread_local std::vector<std::uint16_t> own;
        if (packed && stepped_) own.resize(rows * (kw + vw));
        c.for_each_row([&](std::size_t r) {
            Operands<T> x{r, q.data + r * dq, {}, {}};
            const T* step_key = stepped_ ? c.in[in_.step_key].data + (c.in[in_.step_key].dyn ? r * kw : 0) : nullptr;
            const T* step_value =
                stepped_ ? c.in[in_.step_value].data + (c.in[in_.step_value].dyn ? r * vw : 0) : nullptr;
            if (packed) {
                const auto* key_rows = reinterpret_cast<const std::uint16_t*>(k.data);
                const auto* value_rows = reinterpret_cast<const std::uint16_t*>(v.data);
                x.packed_keys = {key_rows, kw, tk, key_pages.of(r).data()};
                x.packed_values = {value_rows, vw, tk, value_pages.of(r).data()};
                if (stepped_) {
                    std::uint16_t* to = own.data() + r * (kw + vw);
                    if constexpr (std::is_same_v<T, float>) {
                        bfloat16_bits(step_key, kw, to);
                        bfloat16_bits(step_value, vw, to + kw);
                    } else {
                        for (std::size_t e = 0; e < kw; ++e) to[e] = bfloat16_bits(static_cast<float>(step_key[e]));
                        for (std::size_t e = 0; e < vw; ++e)
                            to[kw + e] = bfloat16_bits(static_cast<float>(step_value[e]));
                    }
                    x.packed_keys.last = to, x.packed_values.last = to + kw;
                }
            } else {
                x.keys = {k.data, kw, tk, key_pages.of(r).data(), step_key};
                x.values = {v.data, vw, tk, value_pages.of(r).data(), step_value};
            }
            f(HeadProduct<T>{1, tk + stepped_, dk, dv, false, scale}, x);
        });
    }

    std::size_t heads_;
    RowSource source_;
    bool masked_, stepped_;
    Inputs in_;
    std::shared_ptr<const PageLists> key_pages_, value_pages_;  // over pages
};

}  // namespace

Variable memory_attention(const Variable& queries, const Variable& keys, const Variable& values,
                          const AttentionOptions& options, const std::string& name) {
    if (options.dropout > 0.0)
        throw UserError(
            "attention: dropout on the weights is for attention over sequences (training); a query over a "
            "memory (a generating step) takes none");
    if (options.causal)
        throw UserError(
            "attention: causal masking needs queries and keys that are sequences on one axis; a query "
            "over a memory sees all of it (a key/value cache holds only the past)");
    const bool masked = static_cast<bool>(options.key_mask);
    if (static_cast<bool>(options.step_key) != static_cast<bool>(options.step_value))
        throw UserError("attention: give the step's own key and value together (step_key and step_value)");
    if (masked && options.step_key)
        throw UserError("attention: the step's own key and value follow a key/value cache, which has no key_mask");
    const bool stepped = static_cast<bool>(options.step_key);
    // A key/value cache kept as pages: read in the tables through the page lists.
    auto key_pages = paged_rows_pages(*keys.node()), value_pages = paged_rows_pages(*values.node());
    if (key_pages && value_pages && !masked) {
        std::vector<NodePtr> in{queries.node(), keys.node()->inputs[0], values.node()->inputs[0]};
        if (stepped) in.insert(in.end(), {options.step_key.node(), options.step_value.node()});
        return Variable(apply_op(std::make_shared<const MemoryAttention>(options.heads, stepped, std::move(key_pages),
                                                                         std::move(value_pages)),
                                 in, name));
    }
    // Keys and values as given; where they are rows picked by one index, compile reads them in place
    // (rows_in_place below, through graph/fold_products.cpp).
    std::vector<NodePtr> in{queries.node(), keys.node(), values.node()};
    if (masked) in.push_back(options.key_mask.node());
    if (options.step_key) in.insert(in.end(), {options.step_key.node(), options.step_value.node()});
    return Variable(
        apply_op(std::make_shared<const MemoryAttention>(options.heads, RowSource::given, masked, stepped), in, name));
}

}  // namespace loom::attention_detail

namespace loom {

AttentionInPlace attention_rows_in_place(const Plan& plan, int at) {
    const PlanNode& pn = plan.nodes[static_cast<std::size_t>(at)];
    const auto* op = pn.node->kind == NodeKind::Op
                         ? dynamic_cast<const attention_detail::MemoryAttention*>(pn.node->op.get())
                         : nullptr;
    if (!op || op->source() != attention_detail::RowSource::given || op->stepped()) return {};
    // Input i's node when it is index_select's, else -1.
    const auto source = [&](std::size_t i) {
        const PlanNode& n = plan.nodes[static_cast<std::size_t>(pn.inputs[i])];
        return n.node->kind == NodeKind::Op && n.node->op && is_index_select(*n.node->op) ? pn.inputs[i] : -1;
    };
    const auto inputs_of = [&](int n) -> const std::vector<int>& {
        return plan.nodes[static_cast<std::size_t>(n)].inputs;
    };
    const int q = pn.inputs[0];
    AttentionInPlace r;
    // Keys, values and mask picked from every item's memory by one index: read through the index.
    const int k = source(1), v = source(2);
    const int m = op->masked() ? source(3) : -1;
    if (k < 0 || v < 0 || inputs_of(k)[1] != inputs_of(v)[1] ||
        (op->masked() && (m < 0 || inputs_of(m)[1] != inputs_of(k)[1])))
        return {};
    r.inputs = {q, inputs_of(k)[0], inputs_of(v)[0]};
    if (op->masked()) r.inputs.push_back(inputs_of(m)[0]);
    r.inputs.push_back(inputs_of(k)[1]);
    r.op = std::make_shared<const attention_detail::MemoryAttention>(op->heads(), attention_detail::RowSource::items,
                                                                     op->masked(), false);
    r.folded = {k, v};
    if (m >= 0) r.folded.push_back(m);
    return r;
}

}  // namespace loom
