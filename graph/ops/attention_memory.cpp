// Multi-head scaled dot-product attention over a memory (the math in attention_rows.hpp): one
// query per item (a batch value, e.g. a generating decoder's step) reads keys and values that are
// batch values [Tk, D] (a key/value cache, or an encoder's unpacked outputs with their mask), or
// every item's static memory [N, Tk, D] through an index per row (attention over index_select's
// picks: no copy per row), or rows of tables through indices (gather_rows' pages).
#include <algorithm>
#include <cmath>
#include <experimental/simd>
#include <sstream>
#include <utility>
#include <vector>

#include "core/parallel.hpp"
#include "graph/compile.hpp"
#include "graph/ops/attention_rows.hpp"
#include "graph/ops/kinds.hpp"

namespace loom::attention_detail {

namespace {

namespace stdx = std::experimental;

// One query per item (a batch value [D]) over keys and values that are batch values [Tk, D], with an
// optional mask [Tk] (0: a padded key). Tk may be a run-time size (a cache growing step by step).
// Stepped: two more inputs, the step's own key [D] and value [Dv] (batch values), are the last key
// and value after the cache's Tk (which may then be 0): a generating step reads its cache where it
// lies instead of a copy one row longer.
// Indexed: the keys, values and mask are static, every item's [N, Tk, ...] (an encoder's memory), and
// a last input, the index [1] per row, says which item row r reads (attention over index_select's
// picks): no row's memory is copied, and rows sharing an item add into its gradients in turn.
// Paged: the keys and values are static tables of rows [R, D] and [R', Dv] and the last two inputs,
// indices [Tk] per row into each, say which rows are row r's keys and values (attention over
// gather_rows' rows: a key/value cache kept as pages, each hypothesis reading its ancestors'
// rows); no mask.
class MemoryAttention final : public OpBase<MemoryAttention> {
public:
    MemoryAttention(std::size_t heads, bool masked, bool indexed, bool stepped, bool paged = false)
        : heads_(heads), masked_(masked), indexed_(indexed), stepped_(stepped), paged_(paged) {}
    std::string name() const override { return "attention"; }
    // Its form over keys and values as given (not through an index or pages): heads, mask, step.
    bool reads_rows_as_given() const { return !indexed_ && !paged_; }
    std::size_t heads() const { return heads_; }
    bool masked() const { return masked_; }
    bool stepped() const { return stepped_; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return true; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        if (paged_) return infer_paged(in);
        if (stepped_) {
            const TypeInfo &key = in[3], &value = in[4];
            if (key.axis.is_sequence() || value.axis.is_sequence() || key.shape.rank() != 1 ||
                value.shape.rank() != 1 || key.shape[0] != dim_of(in[1], 1) || value.shape[0] != dim_of(in[2], 1))
                shape_error(name(), in,
                            "the step's own key and value must be batch values of the keys' and the values' "
                            "row sizes");
            return infer_rows(in.first(3));
        }
        if (!indexed_) return infer_rows(in);
        const TypeInfo& index = in.back();
        if (index.axis.kind != Axis::Kind::Batch || index.shape.size() != 1)
            shape_error(name(), in, "over an indexed memory, the index must be a batch value [1]");
        // What one row reads: each item's keys, values and mask, on the index's axis.
        std::vector<TypeInfo> rows(in.begin(), in.end() - 1);
        for (std::size_t i = 1; i < rows.size(); ++i) {
            if (in[i].axis.is_dynamic() || in[i].shape.rank() < 1)
                shape_error(name(), in,
                            "over an indexed memory, the keys, values and mask must be static [N, Tk, ...]");
            rows[i] = {Shape(std::vector<std::size_t>(in[i].shape.begin() + 1, in[i].shape.end())), index.axis};
        }
        return infer_rows(rows);
    }

    // Every head of a row at once (one query is too little work to take a head at a time): the
    // scores of each key for all heads, a softmax per head, then each value row added into the
    // heads' outputs. Every row's operands are found first, here, where a bad index or mask throws;
    // then the rows are computed, split among idle inter-op threads (each writes its own rows only,
    // so the values do not depend on the threads).
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
                one_query(h, x, scores.data(), c.out.data + x.row * width);
            }
        };
        // A row's multiply-adds, on average; split at 2^16 per part (a few dozen rows).
        const std::size_t per_row = keys / rows.size() * heads_ * (rows[0].first.dk + rows[0].first.dv);
        share_or_run(rows.size(), 1, per_row, std::size_t{1} << 16, run);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (stepped_ || paged_) return bwd_stepped(c);
        each_head(c, [&](const HeadProduct<T>& h, const Operands<T>& x) {
            const std::size_t width = c.out_grad.sample_size();
            h.backward(x.q, x.k, x.v, {c.out_grad.data + x.row * width + x.head * h.dv, width},
                       gradient_rows(c, 0, x.q), gradient_rows(c, 1, x.k), gradient_rows(c, 2, x.v),
                       c.work->get(2 * h.lk));
        });
    }

private:
    template <class T>
    struct Operands {
        std::size_t row, head;
        Rows<const T> q, k, v;
        std::size_t cached = 0;  // keys read from k and v; stepped, the step's own follow them
        const T *step_key = nullptr, *step_value = nullptr;
        // Paged: the rows of k and of v that are the row's keys and values.
        const std::size_t *key_page = nullptr, *value_page = nullptr;
        // Key and value j of the row: the cache's, then the step's own.
        const T* key(std::size_t j) const {
            return j < cached ? k.data + (key_page ? key_page[j] : j) * k.stride : step_key;
        }
        const T* value(std::size_t j) const {
            return j < cached ? v.data + (value_page ? value_page[j] : j) * v.stride : step_value;
        }
    };
    // One row's output o from its operands, p scratch of heads * lk: the scores of each key for
    // all heads, a softmax per head, then the weighted values. Where a head's size is a multiple of
    // 16, a score is 16 lanes of products reduced in a tree (a running sum would be a serial chain),
    // and the weighted values are summed in registers, 64 elements at a time over all the keys.
    template <class T>
    void one_query(const HeadProduct<T>& h, const Operands<T>& x, T* p, T* o) const {
        using Lanes = stdx::fixed_size_simd<T, 16>;
        constexpr std::size_t lanes = Lanes::size();
        for (std::size_t j = 0; j < h.lk; ++j) {
            const T* key = x.key(j);
            for (std::size_t head = 0; head < heads_; ++head) {
                const T *qh = x.q.data + head * h.dk, *kh = key + head * h.dk;
                T dot;
                if (h.dk % lanes == 0) {
                    Lanes sum = load<Lanes>(qh) * load<Lanes>(kh);
                    for (std::size_t c = lanes; c < h.dk; c += lanes) sum += load<Lanes>(qh + c) * load<Lanes>(kh + c);
                    dot = stdx::reduce(sum);
                } else {
                    dot = fast::dot(qh, kh, h.dk);
                }
                p[head * h.lk + j] = h.scale * dot;
            }
        }
        softmax_rows(p, heads_, h.lk, [&](std::size_t) { return h.lk; });  // a row of scores per head
        const std::size_t width = heads_ * h.dv;
        std::size_t e = 0;
        // Elements [at, at + B * lanes), each block of lanes within one head.
        auto blocks = [&]<std::size_t B>(std::size_t at) {
            Lanes sum[B] = {};
            const T* w[B];
            for (std::size_t b = 0; b < B; ++b) w[b] = p + (at + b * lanes) / h.dv * h.lk;
            for (std::size_t j = 0; j < h.lk; ++j) {
                const T* v = x.value(j) + at;
                for (std::size_t b = 0; b < B; ++b) sum[b] += w[b][j] * load<Lanes>(v + b * lanes);
            }
            for (std::size_t b = 0; b < B; ++b) sum[b].copy_to(o + at + b * lanes, stdx::element_aligned);
        };
        if (h.dv % lanes == 0) {
            for (; e + 4 * lanes <= width; e += 4 * lanes) blocks.template operator()<4>(e);
            for (; e < width; e += lanes) blocks.template operator()<1>(e);
        }
        for (; e < width; ++e) {
            const T* w = p + e / h.dv * h.lk;
            T sum = 0;
            for (std::size_t j = 0; j < h.lk; ++j) sum += w[j] * x.value(j)[e];
            o[e] = sum;
        }
    }
    template <class Lanes, class T>
    static Lanes load(const T* at) {
        return Lanes(at, stdx::element_aligned);
    }
    // Stepped or paged backward: each row's keys and values copied with the step's own into one
    // block (backward is no generating step's path), its gradients computed there and added back
    // where each key and value lies (rows sharing a page add into it in turn).
    template <class T>
    void bwd_stepped(const OpCall<T>& c) const {
        const std::size_t width = c.out_grad.sample_size();
        each_row(c, [&](const HeadProduct<T>& h, const Operands<T>& x) {
            const std::size_t dq = h.dk * heads_, dvw = h.dv * heads_, n = h.lk;
            T* keys = c.work->get(2 * n * (dq + dvw) + 2 * n);
            T *values = keys + n * dq, *dkeys = values + n * dvw, *dvalues = dkeys + n * dq, *work = dvalues + n * dvw;
            for (std::size_t j = 0; j < n; ++j) {
                std::copy_n(x.key(j), dq, keys + j * dq);
                std::copy_n(x.value(j), dvw, values + j * dvw);
            }
            std::fill(dkeys, dkeys + n * (dq + dvw), T(0));
            for (std::size_t head = 0; head < heads_; ++head)
                h.backward({x.q.data + head * h.dk, dq}, {keys + head * h.dk, dq}, {values + head * h.dv, dvw},
                           {c.out_grad.data + x.row * width + head * h.dv, width},
                           gradient_rows(c, 0, {x.q.data + head * h.dk, dq}), {dkeys + head * h.dk, dq},
                           {dvalues + head * h.dv, dvw}, work);
            // dst += src over count elements where dst is input i's gradient at the place of `at` in input i.
            auto add = [&](std::size_t i, const T* at, const T* src, std::size_t count) {
                if (!c.in_grad[i]) return;
                T* dst = c.in_grad[i].data + (at - c.in[i].data);
                for (std::size_t e = 0; e < count; ++e) dst[e] += src[e];
            };
            for (std::size_t j = 0; j < n; ++j) {  // inputs 1 and 2 the cache (or pages), 3 and 4 the step's own
                const bool own = j >= x.cached;
                add(own ? 3 : 1, x.key(j), dkeys + j * dq, dq);
                add(own ? 4 : 2, x.value(j), dvalues + j * dvw, dvw);
            }
        });
    }
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
    // Paged: (query, key rows [R, D], value rows [R', Dv], [step key, step value,] the keys' indices
    // [Tk], the values' indices [Tk]).
    TypeInfo infer_paged(std::span<const TypeInfo> in) const {
        const TypeInfo &keys = in[1], &values = in[2], &indices = in[in.size() - 2], &value_indices = in.back();
        if (keys.axis.is_dynamic() || values.axis.is_dynamic() || keys.shape.rank() != 2 || values.shape.rank() != 2)
            shape_error(name(), in, "over pages, the key and value rows must be static [R, D] and [R, Dv]");
        for (const TypeInfo* t : {&indices, &value_indices})
            if (t->axis.kind != Axis::Kind::Batch || t->shape.rank() != 1)
                shape_error(name(), in, "over pages, the indices must be batch values [Tk]");
        if (indices.shape[0] != value_indices.shape[0] || indices.axis != value_indices.axis)
            shape_error(name(), in, "over pages, the keys and values must have one number of steps Tk");
        std::vector<TypeInfo> rows{in[0],
                                   {Shape{indices.shape[0], keys.shape[1]}, indices.axis},
                                   {Shape{indices.shape[0], values.shape[1]}, indices.axis}};
        if (stepped_) {
            const TypeInfo &key = in[3], &value = in[4];
            if (key.axis.is_sequence() || value.axis.is_sequence() || key.shape != Shape{keys.shape[1]} ||
                value.shape != Shape{values.shape[1]})
                shape_error(name(), in,
                            "the step's own key and value must be batch values of the keys' and the values' "
                            "row sizes");
        }
        return infer_rows(rows);
    }
    // Which item row r reads: the index's (checked), its own row of batch keys, or the one item of
    // static keys, which serves every row.
    template <class T>
    std::size_t item_of(const OpCall<T>& c, std::size_t r, std::size_t items) const {
        if (!indexed_) return c.in[1].dyn ? r : 0;
        const double index = static_cast<double>(c.in.back().data[r]);
        if (!is_index(index, items)) {
            std::ostringstream msg;
            msg << "attention: row " << r << " reads item " << index << " of a memory of " << items
                << " items (valid indices are [0, " << items << "))";
            throw UserError(msg.str());
        }
        return static_cast<std::size_t>(index);
    }
    // f(product, operands) for every row to compute and head.
    template <class T, class F>
    void each_head(const OpCall<T>& c, F&& f) const {
        each_row(c, [&](const HeadProduct<T>& h, const Operands<T>& x) {
            for (std::size_t head = 0; head < heads_; ++head)
                f(h, Operands<T>{x.row,
                                 head,
                                 {x.q.data + head * h.dk, x.q.stride},
                                 {x.k.data + head * h.dk, x.k.stride},
                                 {x.v.data + head * h.dv, x.v.stride}});
        });
    }
    // f(product, operands) for every row to compute, its operands those of head 0 (head h's start h
    // times the head's size further on).
    template <class T, class F>
    void each_row(const OpCall<T>& c, F&& f) const {
        const View<const T>&q = c.in[0], &k = c.in[1], &v = c.in[2];
        if (paged_) return each_paged_row(c, f);
        const std::size_t items = indexed_ ? k.dims[0] : 1;  // indexed: [N, Tk, D], else [Tk, D] (per row)
        const std::size_t tk = k.dims[indexed_ ? 1 : k.dyn];
        const std::size_t kw = k.sample_size() / items, vw = v.sample_size() / items;  // one item's
        const std::size_t dq = q.sample_size(), dk = dq / heads_;
        const std::size_t dv = stepped_ ? c.in[4].sample_size() / heads_ : (tk ? vw / tk / heads_ : 0);
        if (tk == 0 && !stepped_) return;
        const std::size_t kstride = tk ? kw / tk : 0, vstride = tk ? vw / tk : 0;
        const T scale = T(1) / std::sqrt(static_cast<T>(dk));
        c.for_each_row([&](std::size_t r) {
            const std::size_t item = item_of(c, r, items);
            // The item's visible keys: the first `visible` ones, those the mask marks real (as
            // sequence::unpack makes it: real steps first, then padding).
            std::size_t visible = tk;
            if (masked_) {
                const T* m = c.in[3].data + (indexed_ || c.in[3].dyn ? item * tk : 0);
                visible = 0;
                while (visible < tk && m[visible] != T(0)) ++visible;
                if (std::any_of(m + visible, m + tk, [](T x) { return x != T(0); }))
                    throw UserError("attention: the key mask of item " + std::to_string(item) +
                                    " has a padded key before a real one; a mask marks each item's first keys real");
            }
            if (visible == 0 && !stepped_) return;
            const HeadProduct<T> h{1, visible + stepped_, dk, dv, false, scale};
            Operands<T> x{r,
                          0,
                          {q.data + (q.dyn ? r * dq : 0), dq},
                          {k.data + item * kw, kstride},
                          {v.data + item * vw, vstride},
                          visible};
            if (stepped_) {
                x.step_key = c.in[3].data + (c.in[3].dyn ? r * dq : 0);
                x.step_value = c.in[4].data + (c.in[4].dyn ? r * dv * heads_ : 0);
            }
            f(h, x);
        });
    }

    // each_row's paged form: row r's keys and values are the rows of the tables its indices name,
    // every index checked here (a whole number below the table's rows), before any row is computed.
    template <class T, class F>
    void each_paged_row(const OpCall<T>& c, F&& f) const {
        const View<const T>&q = c.in[0], &k = c.in[1], &v = c.in[2];
        const View<const T>&key_indices = c.in[c.in.size() - 2], &value_indices = c.in.back();
        const std::size_t tk = key_indices.sample_size(), dq = q.sample_size(), dk = dq / heads_;
        const std::size_t kw = k.dims[1], vw = v.dims[1], dv = vw / heads_;
        if (value_indices.sample_size() != tk)
            throw UserError("attention: over pages, " + std::to_string(tk) + " key indices and " +
                            std::to_string(value_indices.sample_size()) + " value indices per row");
        if (tk == 0 && !stepped_) return;
        thread_local std::vector<std::size_t> pages;
        auto& page = pages;
        page.resize(2 * key_indices.size());
        const T scale = T(1) / std::sqrt(static_cast<T>(dk));
        // Row r's indices into a table of `count` rows, checked, into `to`.
        auto read = [&](const View<const T>& indices, std::size_t count, const char* what, std::size_t r,
                        std::size_t* to) {
            for (std::size_t j = 0; j < tk; ++j) {
                const double index = static_cast<double>(indices.data[r * tk + j]);
                if (!is_index(index, count)) {
                    std::ostringstream msg;
                    msg << "attention: row " << r << " reads " << what << " row " << index << " of " << count
                        << " (valid indices are [0, " << count << "))";
                    throw UserError(msg.str());
                }
                to[j] = static_cast<std::size_t>(index);
            }
        };
        c.for_each_row([&](std::size_t r) {
            std::size_t* at = page.data() + 2 * r * tk;
            read(key_indices, k.dims[0], "key", r, at);
            read(value_indices, v.dims[0], "value", r, at + tk);
            Operands<T> x{r, 0, {q.data + (q.dyn ? r * dq : 0), dq}, {k.data, kw}, {v.data, vw}, tk};
            x.key_page = at;
            x.value_page = at + tk;
            if (stepped_) {
                x.step_key = c.in[3].data + (c.in[3].dyn ? r * kw : 0);
                x.step_value = c.in[4].data + (c.in[4].dyn ? r * vw : 0);
            }
            f(HeadProduct<T>{1, tk + stepped_, dk, dv, false, scale}, x);
        });
    }

    std::size_t heads_;
    bool masked_, indexed_, stepped_, paged_;
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
    // Keys and values as given; where they are rows gathered or picked, compile reads them in place
    // (rows_in_place below, through graph/fold_products.cpp).
    std::vector<NodePtr> in{queries.node(), keys.node(), values.node()};
    if (masked) in.push_back(options.key_mask.node());
    if (options.step_key) in.insert(in.end(), {options.step_key.node(), options.step_value.node()});
    return Variable(apply_op(
        std::make_shared<const MemoryAttention>(options.heads, masked, false, static_cast<bool>(options.step_key)), in,
        name));
}

}  // namespace loom::attention_detail

namespace loom {

AttentionInPlace attention_rows_in_place(const Plan& plan, int at) {
    const PlanNode& pn = plan.nodes[static_cast<std::size_t>(at)];
    const auto* op = pn.node->kind == NodeKind::Op
                         ? dynamic_cast<const attention_detail::MemoryAttention*>(pn.node->op.get())
                         : nullptr;
    if (!op || !op->reads_rows_as_given()) return {};
    // Input i's node when its op is one `is` answers for, else -1.
    const auto source = [&](std::size_t i, bool (*is)(const Op&)) {
        const PlanNode& n = plan.nodes[static_cast<std::size_t>(pn.inputs[i])];
        return n.node->kind == NodeKind::Op && n.node->op && is(*n.node->op) ? pn.inputs[i] : -1;
    };
    const auto inputs_of = [&](int n) -> const std::vector<int>& {
        return plan.nodes[static_cast<std::size_t>(n)].inputs;
    };
    const int q = pn.inputs[0];
    AttentionInPlace r;
    // Keys and values gathered from tables of rows (matrices): read through the indices.
    const int gk = source(1, is_gather_rows), gv = source(2, is_gather_rows);
    const auto matrix = [&](int n) {
        return plan.nodes[static_cast<std::size_t>(inputs_of(n)[0])].type.shape.rank() == 2;
    };
    if (!op->masked() && gk >= 0 && gv >= 0 && matrix(gk) && matrix(gv)) {
        r.inputs = {q, inputs_of(gk)[0], inputs_of(gv)[0]};
        if (op->stepped()) r.inputs.insert(r.inputs.end(), {pn.inputs[3], pn.inputs[4]});
        r.inputs.insert(r.inputs.end(), {inputs_of(gk)[1], inputs_of(gv)[1]});
        r.op =
            std::make_shared<const attention_detail::MemoryAttention>(op->heads(), false, false, op->stepped(), true);
        r.folded = {gk, gv};
        return r;
    }
    // Keys, values and mask picked from every item's memory by one index: read through the index.
    if (op->stepped()) return {};
    const int k = source(1, is_index_select), v = source(2, is_index_select);
    const int m = op->masked() ? source(3, is_index_select) : -1;
    if (k < 0 || v < 0 || inputs_of(k)[1] != inputs_of(v)[1] ||
        (op->masked() && (m < 0 || inputs_of(m)[1] != inputs_of(k)[1])))
        return {};
    r.inputs = {q, inputs_of(k)[0], inputs_of(v)[0]};
    if (op->masked()) r.inputs.push_back(inputs_of(m)[0]);
    r.inputs.push_back(inputs_of(k)[1]);
    r.op = std::make_shared<const attention_detail::MemoryAttention>(op->heads(), op->masked(), true, false);
    r.folded = {k, v};
    if (m >= 0) r.folded.push_back(m);
    return r;
}

}  // namespace loom
