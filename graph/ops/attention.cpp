// Multi-head scaled dot-product attention over sequences (the math in attention_rows.hpp): the
// queries are one sequence axis and the keys and values another (or the same); each item's and
// head's rows are read where they lie in the time-major tensors (row stride N * D), so no copy is
// made. The weights themselves (attention_weights, attention_head_weights) come from the same
// products. attention() over a memory (one query per item) is attention_memory.cpp's.
#include <cmath>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "core/parallel.hpp"
#include "graph/ops/attention_rows.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

using namespace attention_detail;

// What both sequence forms check: the first `count` inputs (queries, keys, values) on sequence
// axes with rank-1 samples and, when causal, the queries and keys on one axis.
void check_sequences(const std::string& op, std::span<const TypeInfo> in, std::size_t count, bool causal) {
    static const char* const what[] = {"the queries", "the keys", "the values"};
    for (std::size_t i = 0; i < count; ++i) {
        if (in[i].axis.kind != Axis::Kind::Sequence && in[i].axis.kind != Axis::Kind::Any)
            shape_error(op, in, std::string(what[i]) + " must be a sequence (it is on the " + in[i].axis.str() + ")");
        if (in[i].shape.rank() != 1)
            shape_error(op, in,
                        std::string(count == 3 ? "queries, keys and values" : "queries and keys") +
                            " must have rank-1 samples");
    }
    if (causal && in[0].axis != in[1].axis && in[0].axis.kind != Axis::Kind::Any && in[1].axis.kind != Axis::Kind::Any)
        shape_error(op, in, "causal attention needs the queries and keys on one sequence axis");
}

// Queries on one sequence axis over keys and values on another (or the same). With dropout on the
// weights, a fourth input is dropout_seed's value: the evaluation's seed, or 0 in inference mode.
class SequenceAttention final : public OpBase<SequenceAttention> {
public:
    SequenceAttention(std::size_t heads, bool causal, double dropout = 0)
        : heads_(heads), causal_(causal), dropout_(dropout) {}
    std::string name() const override { return "attention"; }
    bool backward_reads_output() const override { return false; }
    // Each item's and head's block of dq, dk and dv is one product's: written where assigned.
    OpTraits traits() const override { return {.step_capable = false, .assigns_gradient = 7u}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        check_sequences(name(), in, 3, causal_);
        if (in[1].axis != in[2].axis && in[1].axis.kind != Axis::Kind::Any && in[2].axis.kind != Axis::Kind::Any)
            shape_error(name(), in, "the keys and values must be on one sequence axis");
        check_heads(name(), in, in[1].shape[0], in[0].shape[0], in[2].shape[0], heads_);
        if (in.size() == 4 && in[3].shape != Shape{dropout_seed_size})
            shape_error(name(), in, "the dropout seed must be dropout_seed's [5]");
        return {Shape{in[2].shape[0]}, in[0].axis};
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const WeightDrops drops = weight_drops(c);
        each_head(c, [&](const HeadProduct<T>& h, std::size_t n, std::size_t head, const Offsets& o) {
            T* p = scratch<T>(h.forward_work());
            h.forward(rows(c.in[0], n, head * h.dk, o.nq), rows(c.in[1], n, head * h.dk, o.nk),
                      rows(c.in[2], n, head * h.dv, o.nk), rows(c.out, n, head * h.dv, o.nq), p,
                      drops ? drops.of_head(n * heads_ + head) : WeightDrops{});
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (c.assign_grad) zero_unreached(c);
        const WeightDrops drops = weight_drops(c);
        each_head(c, [&](const HeadProduct<T>& h, std::size_t n, std::size_t head, const Offsets& o) {
            T* work = scratch<T>(h.backward_work());
            auto grad = [&](std::size_t i, std::size_t col, std::size_t n_seq) {
                if (!c.in_grad[i]) return Rows<T>{nullptr, 0};
                Rows<T> r = rows(c.in_grad[i], n, col, n_seq);
                r.assign = c.assigns(i);
                return r;
            };
            h.backward(rows(c.in[0], n, head * h.dk, o.nq), rows(c.in[1], n, head * h.dk, o.nk),
                       rows(c.in[2], n, head * h.dv, o.nk), rows(c.out_grad, n, head * h.dv, o.nq),
                       grad(0, head * h.dk, o.nq), grad(1, head * h.dk, o.nk), grad(2, head * h.dv, o.nk), work,
                       drops ? drops.of_head(n * heads_ + head) : WeightDrops{});
        });
    }

private:
    // The drops this evaluation makes: none without dropout or in inference mode (the seed's last
    // part 0), else those of the seed's four 16-bit parts (the first row's: every row holds it).
    template <class T>
    WeightDrops weight_drops(const OpCall<T>& c) const {
        if (c.in.size() < 4 || !c.in[3].data || c.in[3].size() < dropout_seed_size || c.in[3].data[4] == T(0))
            return {};
        std::uint64_t seed = 0;
        for (std::size_t i = 0; i < 4; ++i) seed |= static_cast<std::uint64_t>(c.in[3].data[i]) << (16 * i);
        return {dropout_threshold(dropout_), seed, 1.0 / (1.0 - dropout_)};
    }
    struct Offsets {
        std::size_t nq, nk;  // sequences in the queries' and in the keys' layouts (the row strides' N)
    };
    // An item with no keys or no queries has no product (each_head skips it): the real rows of
    // the gradients to be written that it holds are zeroed here.
    template <class T>
    static void zero_unreached(const OpCall<T>& c) {
        const SequenceLayout &lq = *c.in_layouts[0], &lk = *c.in_layouts[1];
        for (std::size_t n = 0; n < std::min(lq.num_sequences(), lk.num_sequences()); ++n) {
            if (lq.length(n) != 0 && lk.length(n) != 0) continue;
            for (std::size_t i = 0; i < 3; ++i) {
                if (!c.assigns(i) || !c.in_grad[i]) continue;
                const SequenceLayout& l = i == 0 ? lq : lk;
                const std::size_t width = c.in_grad[i].sample_size();
                for (std::size_t t = 0; t < l.length(n); ++t)
                    std::fill_n(c.in_grad[i].data + (t * l.num_sequences() + n) * width, width, T(0));
            }
        }
    }
    // Item n's rows of a time-major [T, N, D] tensor from column col on.
    template <class V>
    static auto rows(const V& v, std::size_t n, std::size_t col, std::size_t n_seq) {
        const std::size_t width = v.sample_size();
        return Rows<std::remove_pointer_t<decltype(v.data)>>{v.data + n * width + col, n_seq * width};
    }
    // Scratch of n elements for the calling thread: the pairs of an item and a head run on whichever
    // threads share them.
    template <class T>
    static T* scratch(std::size_t n) {
        thread_local Workspace<T> work;
        return work.get(n);
    }
    // Calls f(h, n, head, offsets) for every item n with queries and keys and every head: each pair
    // writes its own item's rows and head's columns, so the pairs are shared among idle inter-op
    // threads (share_or_run) and the values do not depend on the threads. The items are checked
    // first, where a throw is still allowed.
    template <class T, class F>
    void each_head(const OpCall<T>& c, F&& f) const {
        const SequenceLayout& lq = *c.in_layouts[0];
        const SequenceLayout& lk = *c.in_layouts[1];
        if (lq.num_sequences() != lk.num_sequences())
            throw UserError("attention: the queries hold " + std::to_string(lq.num_sequences()) +
                            " sequences and the keys " + std::to_string(lk.num_sequences()));
        const std::size_t dk = c.in[1].sample_size() / heads_, dv = c.in[2].sample_size() / heads_;
        const Offsets o{lq.num_sequences(), lk.num_sequences()};
        std::vector<std::size_t> items;
        std::size_t work = 0;
        for (std::size_t n = 0; n < lq.num_sequences(); ++n) {
            if (causal_ && lq.length(n) != lk.length(n))
                throw UserError("attention: causal attention over sequence " + std::to_string(n) + " of " +
                                std::to_string(lq.length(n)) + " queries and " + std::to_string(lk.length(n)) +
                                " keys; causal needs one length");
            if (lq.length(n) == 0 || lk.length(n) == 0) continue;
            items.push_back(n);
            work += lq.length(n) * lk.length(n) * (dk + dv);
        }
        if (items.empty()) return;
        const T scale = T(1) / std::sqrt(static_cast<T>(dk));
        auto run = [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) {
                const std::size_t n = items[i / heads_];
                f(HeadProduct<T>{lq.length(n), lk.length(n), dk, dv, causal_, scale}, n, i % heads_, o);
            }
        };
        const std::size_t pairs = items.size() * heads_;
        share_or_run(pairs, 1, work / items.size(), kShareElementWork, run);
    }

    std::size_t heads_;
    bool causal_;
    double dropout_;
};

// The weights SequenceAttention applies: per query step each head's row [Tk_max] (the keys' longest
// sequence, a run-time size), 0 past the item's keys, or (averaged) their mean [Tk_max]. For
// pictures of what a model attends to and PyTorch's need_weights; differentiable like the rest.
class AttentionWeights final : public OpBase<AttentionWeights> {
public:
    AttentionWeights(std::size_t heads, bool causal, bool average)
        : heads_(heads), causal_(causal), average_(average) {}
    std::string name() const override { return average_ ? "attention_weights" : "attention_head_weights"; }
    bool backward_reads_output() const override { return false; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        check_sequences(name(), in, 2, causal_);
        check_heads(name(), in, in[1].shape[0], in[0].shape[0], in[1].shape[0], heads_);
        // Tk_max is known when a batch is bound.
        return {average_ ? Shape{0} : Shape{heads_, 0}, in[0].axis};
    }
    template <class T>
    void prep(const OpCall<T>& c, Prepared& p) const {
        p.has_shape = true;
        const std::size_t longest = c.in_layouts[1]->max_length();
        p.shape = average_ ? Shape{longest} : Shape{heads_, longest};
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        // Rows no product reaches (an item without keys or queries, padding) hold 0.
        std::fill_n(c.out.data, c.out.size(), T(0));
        each_head(c, [&](const HeadProduct<T>& h, std::size_t n, std::size_t head, Rows<const T> q, Rows<const T> k) {
            T* p = c.work->get(h.lq * h.lk);
            h.weights(q, k, p);
            const T share = average_ ? T(1) / static_cast<T>(heads_) : T(1);
            for (std::size_t i = 0; i < h.lq; ++i) {
                T* out = c.out.data + row_of(c, n, head, i);
                for (std::size_t j = 0; j < h.lk; ++j) out[j] += p[i * h.lk + j] * share;
            }
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        each_head(c, [&](const HeadProduct<T>& h, std::size_t n, std::size_t head, Rows<const T> q, Rows<const T> k) {
            T* p = c.work->get(2 * h.lq * h.lk);
            T* ds = p + h.lq * h.lk;
            h.weights(q, k, p);
            const T share = average_ ? T(1) / static_cast<T>(heads_) : T(1);
            for (std::size_t i = 0; i < h.lq; ++i) {
                const T* g = c.out_grad.data + row_of(c, n, head, i);
                for (std::size_t j = 0; j < h.lk; ++j) ds[i * h.lk + j] = g[j] * share;
            }
            h.weights_backward(q, k, p, ds, gradient_rows(c, 0, q), gradient_rows(c, 1, k));
        });
    }

private:
    // Where query step i of item n keeps head `head`'s row (every head's the same row when averaged)
    // in a time-major tensor of samples [Tk_max] or [H, Tk_max].
    template <class V>
    std::size_t row_of(const V& c, std::size_t n, std::size_t head, std::size_t i) const {
        const std::size_t n_seq = c.in_layouts[0]->num_sequences(), width = c.in_layouts[1]->max_length();
        return ((i * n_seq + n) * (average_ ? 1 : heads_) + (average_ ? 0 : head)) * width;
    }
    template <class T, class F>
    void each_head(const OpCall<T>& c, F&& f) const {
        const SequenceLayout &lq = *c.in_layouts[0], &lk = *c.in_layouts[1];
        if (lq.num_sequences() != lk.num_sequences())
            throw UserError(name() + ": the queries hold " + std::to_string(lq.num_sequences()) +
                            " sequences and the keys " + std::to_string(lk.num_sequences()));
        const std::size_t d = c.in[0].sample_size(), dk = d / heads_, nq = lq.num_sequences();
        for (std::size_t n = 0; n < nq; ++n) {
            const HeadProduct<T> h{lq.length(n), lk.length(n), dk, 0, causal_, T(1) / std::sqrt(static_cast<T>(dk))};
            if (causal_ && h.lq != h.lk)
                throw UserError(name() + ": causal attention over sequences of different lengths");
            if (h.lq == 0 || h.lk == 0) continue;
            for (std::size_t head = 0; head < heads_; ++head)
                f(h, n, head, Rows<const T>{c.in[0].data + n * d + head * dk, nq * d},
                  Rows<const T>{c.in[1].data + n * d + head * dk, nq * d});
        }
    }

    std::size_t heads_;
    bool causal_, average_;
};

void check_dropout(const AttentionOptions& options) {
    if (!(options.dropout >= 0.0 && options.dropout < 1.0))
        throw UserError("attention: dropout " + std::to_string(options.dropout) + " on the weights must be in [0, 1)");
}

}  // namespace

Variable attention_weights(const Variable& queries, const Variable& keys, const AttentionOptions& options,
                           const std::string& name) {
    if (options.key_mask) throw UserError("attention_weights: sequence keys are masked by their lengths; no key_mask");
    return Variable(apply_op(std::make_shared<const AttentionWeights>(options.heads, options.causal, true),
                             {queries.node(), keys.node()}, name));
}

Variable attention_head_weights(const Variable& queries, const Variable& keys, const AttentionOptions& options,
                                const std::string& name) {
    if (options.key_mask)
        throw UserError("attention_head_weights: sequence keys are masked by their lengths; no key_mask");
    return Variable(apply_op(std::make_shared<const AttentionWeights>(options.heads, options.causal, false),
                             {queries.node(), keys.node()}, name));
}

Variable attention_dropping(const Variable& queries, const Variable& keys, const Variable& values,
                            const AttentionOptions& options, const Variable& seed, const std::string& name) {
    check_dropout(options);
    std::vector<NodePtr> in{queries.node(), keys.node(), values.node()};
    if (options.dropout > 0.0) in.push_back(seed.node());
    return Variable(
        apply_op(std::make_shared<const SequenceAttention>(options.heads, options.causal, options.dropout), in, name));
}

Variable attention(const Variable& queries, const Variable& keys, const Variable& values,
                   const AttentionOptions& options, const std::string& name) {
    check_dropout(options);
    if (queries.axis().is_sequence() || keys.axis().is_sequence()) {
        if (options.key_mask)
            throw UserError(
                "attention: a key_mask is for keys that are batch values [Tk, D]; sequence keys are "
                "masked by their lengths");
        if (options.step_key || options.step_value)
            throw UserError(
                "attention: a step's own key and value follow a key/value cache of batch values [Tk, D], "
                "not sequences");
        return attention_dropping(queries, keys, values, options,
                                  options.dropout > 0.0 ? dropout_seed(queries, options.seed) : Variable{}, name);
    }
    return attention_detail::memory_attention(queries, keys, values, options, name);
}

}  // namespace loom
