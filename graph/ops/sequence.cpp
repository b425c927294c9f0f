// Sequence ops: they read the layout and move values between a sequence axis and the batch axis.
// Reductions over time treat padding as their identity (0 for sum, -inf for max and softmax).
#include <cmath>
#include <limits>

#include "core/errors.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

void require_sequence(const std::string& op, std::span<const TypeInfo> in, std::size_t i = 0) {
    if (in[i].axis.kind != Axis::Kind::Sequence && in[i].axis.kind != Axis::Kind::Any)
        shape_error(op, in,
                    "operand " + std::to_string(i) + " must be a sequence (it is on the " + in[i].axis.str() + ")");
}

// is_first / is_last: 1 on the first (last) step of each sequence, else 0; shape [1].
class IsEdge final : public OpBase<IsEdge> {
public:
    explicit IsEdge(bool last) : last_(last) {}
    std::string name() const override { return last_ ? "sequence::is_last" : "sequence::is_first"; }
    OpTraits traits() const override { return {.reads_time = true}; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_sequence(name(), in);
        return {Shape{1}, in[0].axis};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout& l = *c.layout;
        const std::size_t n_seq = l.num_sequences();
        auto edge = [&](std::size_t t, std::size_t n) { return last_ ? t + 1 == l.length(n) : t == 0; };
        if (c.time) {
            for (std::size_t n = 0; n < n_seq; ++n) c.out.data[n] = edge(c.time->t, n) ? T(1) : T(0);
            return;
        }
        for (std::size_t t = 0; t < l.max_length(); ++t)
            for (std::size_t n = 0; n < n_seq; ++n) c.out.data[t * n_seq + n] = edge(t, n) ? T(1) : T(0);
    }
    template <class T>
    void bwd(const OpCall<T>&) const {}  // flat: no gradient

private:
    bool last_;
};

// first / last: the first (last) step of each sequence, as a batch value.
class Edge final : public OpBase<Edge> {
public:
    explicit Edge(bool last) : last_(last) {}
    std::string name() const override { return last_ ? "sequence::last" : "sequence::first"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_sequence(name(), in);
        return {in[0].shape, Axis::batch()};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout& l = *c.in_layouts[0];
        const std::size_t n_seq = l.num_sequences(), row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n)
            std::copy_n(c.in[0].data + (step(l, n) * n_seq + n) * row, row, c.out.data + n * row);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        const SequenceLayout& l = *c.in_layouts[0];
        const std::size_t n_seq = l.num_sequences(), row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n) {
            T* dst = c.in_grad[0].data + (step(l, n) * n_seq + n) * row;
            const T* g = c.out_grad.data + n * row;
            for (std::size_t j = 0; j < row; ++j) dst[j] += g[j];
        }
    }

private:
    std::size_t step(const SequenceLayout& l, std::size_t n) const { return last_ ? l.length(n) - 1 : 0; }
    bool last_;
};

// broadcast_as(v, like): v (a batch or static value) repeated on every step of like's sequences.
class BroadcastAs final : public OpBase<BroadcastAs> {
public:
    std::string name() const override { return "sequence::broadcast_as"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_sequence(name(), in, 1);
        if (in[0].axis.is_sequence())
            shape_error(name(), in, "the value to broadcast must not be a sequence itself; reduce it first");
        return {in[0].shape, in[1].axis};
    }
    // Rows are (t, n) pairs in the full tensor or n alone in one step: either way row r is item r % N.
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const View<const T>& v = c.in[0];
        const std::size_t row = c.out.sample_size(), rows = c.out.rows(), n_seq = c.layout->num_sequences();
        for (std::size_t r = 0; r < rows; ++r)
            std::copy_n(v.data + (v.dyn ? (r % n_seq) * row : 0), row, c.out.data + r * row);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        const View<T>& gv = c.in_grad[0];
        if (!gv) return;
        const std::size_t row = c.out.sample_size(), rows = c.out.rows(), n_seq = c.layout->num_sequences();
        for (std::size_t r = 0; r < rows; ++r) {
            T* dst = gv.data + (gv.dyn ? (r % n_seq) * row : 0);
            const T* g = c.out_grad.data + r * row;
            for (std::size_t j = 0; j < row; ++j) dst[j] += g[j];
        }
    }
};

// Reductions over the steps of each sequence, to a batch value.
enum class TimeReduce { sum, mean, max };

class ReduceTime final : public OpBase<ReduceTime> {
public:
    explicit ReduceTime(TimeReduce kind) : kind_(kind) {}
    std::string name() const override {
        return kind_ == TimeReduce::sum    ? "sequence::reduce_sum"
               : kind_ == TimeReduce::mean ? "sequence::reduce_mean"
                                           : "sequence::reduce_max";
    }
    // Only max looks at values: which step attained it.
    bool backward_reads_output() const override { return kind_ == TimeReduce::max; }
    bool backward_reads_input(std::size_t) const override { return kind_ == TimeReduce::max; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_sequence(name(), in);
        return {in[0].shape, Axis::batch()};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout& l = *c.in_layouts[0];
        const std::size_t n_seq = l.num_sequences(), row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n) {
            T* out = c.out.data + n * row;
            const T init = kind_ == TimeReduce::max ? -std::numeric_limits<T>::infinity() : T(0);
            std::fill_n(out, row, init);
            for (std::size_t t = 0; t < l.length(n); ++t) {
                const T* x = c.in[0].data + (t * n_seq + n) * row;
                for (std::size_t j = 0; j < row; ++j)
                    out[j] = kind_ == TimeReduce::max ? std::max(out[j], x[j]) : out[j] + x[j];
            }
            if (kind_ == TimeReduce::mean)
                for (std::size_t j = 0; j < row; ++j) out[j] /= static_cast<T>(l.length(n));
        }
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (!c.in_grad[0]) return;
        const SequenceLayout& l = *c.in_layouts[0];
        const std::size_t n_seq = l.num_sequences(), row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n) {
            const T* g = c.out_grad.data + n * row;
            const T* y = kind_ == TimeReduce::max ? c.out.data + n * row : nullptr;
            const T scale = kind_ == TimeReduce::mean ? T(1) / static_cast<T>(l.length(n)) : T(1);
            for (std::size_t j = 0; j < row; ++j) {
                bool taken = false;  // max: the first step that attains it gets the gradient
                for (std::size_t t = 0; t < l.length(n); ++t) {
                    const std::size_t at = (t * n_seq + n) * row + j;
                    if (kind_ != TimeReduce::max) {
                        c.in_grad[0].data[at] += g[j] * scale;
                    } else if (!taken && c.in[0].data[at] == y[j]) {
                        c.in_grad[0].data[at] += g[j];
                        taken = true;
                    }
                }
            }
        }
    }

private:
    TimeReduce kind_;
};

// softmax over the steps of each sequence, element by element of the sample.
class SequenceSoftmax final : public OpBase<SequenceSoftmax> {
public:
    std::string name() const override { return "sequence::softmax"; }
    bool backward_reads_output() const override { return true; }
    bool backward_reads_input(std::size_t) const override { return false; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_sequence(name(), in);
        return in[0];
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout& l = *c.layout;
        const std::size_t n_seq = l.num_sequences(), row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t j = 0; j < row; ++j) {
                auto at = [&](std::size_t t) { return (t * n_seq + n) * row + j; };
                T m = -std::numeric_limits<T>::infinity();
                for (std::size_t t = 0; t < l.length(n); ++t) m = std::max(m, c.in[0].data[at(t)]);
                T sum = 0;
                for (std::size_t t = 0; t < l.length(n); ++t)
                    sum += c.out.data[at(t)] = std::exp(c.in[0].data[at(t)] - m);
                for (std::size_t t = 0; t < l.length(n); ++t) c.out.data[at(t)] /= sum;
            }
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {  // dx = y * (g - sum_t g y)
        if (!c.in_grad[0]) return;
        const SequenceLayout& l = *c.layout;
        const std::size_t n_seq = l.num_sequences(), row = c.out.sample_size();
        for (std::size_t n = 0; n < n_seq; ++n)
            for (std::size_t j = 0; j < row; ++j) {
                auto at = [&](std::size_t t) { return (t * n_seq + n) * row + j; };
                T dot = 0;
                for (std::size_t t = 0; t < l.length(n); ++t) dot += c.out_grad.data[at(t)] * c.out.data[at(t)];
                for (std::size_t t = 0; t < l.length(n); ++t)
                    c.in_grad[0].data[at(t)] += c.out.data[at(t)] * (c.out_grad.data[at(t)] - dot);
            }
    }
};

// length: the number of steps of each sequence, as a batch value [1].
class Length final : public OpBase<Length> {
public:
    std::string name() const override { return "sequence::length"; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    OpTraits traits() const override { return {.step_capable = false}; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_sequence(name(), in);
        return {Shape{1}, Axis::batch()};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout& l = *c.in_layouts[0];
        for (std::size_t n = 0; n < l.num_sequences(); ++n) c.out.data[n] = static_cast<T>(l.length(n));
    }
    template <class T>
    void bwd(const OpCall<T>&) const {}
};

template <class O, class... Args>
Variable make(const std::vector<NodePtr>& inputs, const std::string& name, Args... args) {
    return Variable(apply_op(std::make_shared<const O>(args...), inputs, name));
}

}  // namespace

namespace sequence {
Variable is_first(const Variable& a, const std::string& name) { return make<IsEdge>({a.node()}, name, false); }
Variable is_last(const Variable& a, const std::string& name) { return make<IsEdge>({a.node()}, name, true); }
Variable first(const Variable& a, const std::string& name) { return make<Edge>({a.node()}, name, false); }
Variable last(const Variable& a, const std::string& name) { return make<Edge>({a.node()}, name, true); }
Variable broadcast_as(const Variable& v, const Variable& like, const std::string& name) {
    return make<BroadcastAs>({v.node(), like.node()}, name);
}
Variable reduce_sum(const Variable& a, const std::string& name) {
    return make<ReduceTime>({a.node()}, name, TimeReduce::sum);
}
Variable reduce_mean(const Variable& a, const std::string& name) {
    return make<ReduceTime>({a.node()}, name, TimeReduce::mean);
}
Variable reduce_max(const Variable& a, const std::string& name) {
    return make<ReduceTime>({a.node()}, name, TimeReduce::max);
}
Variable softmax(const Variable& a, const std::string& name) { return make<SequenceSoftmax>({a.node()}, name); }
Variable length(const Variable& a, const std::string& name) { return make<Length>({a.node()}, name); }
}  // namespace sequence

}  // namespace loom
