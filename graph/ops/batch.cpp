// Ops across the batch axis, for listwise losses and in-batch negatives: reductions and softmax
// over the N items of a batch value, and broadcast_as to put a static value back on the batch.
// A reduction over the batch returns a value WITHOUT a dynamic axis (a static [sample...], as
// CNTK's batch reductions do); broadcast_as(v, like) repeats such a value on every item of like.
// These ops see the whole batch at once, so none of them can run inside a recurrence loop; a
// sequence operand is refused (reduce the sequence first, e.g. with sequence::reduce_sum).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/errors.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

void require_batch(const std::string& op, std::span<const TypeInfo> in, std::size_t i) {
    const Axis& a = in[i].axis;
    if (a.kind == Axis::Kind::Batch || a.kind == Axis::Kind::Any) return;
    shape_error(op, in,
                "operand " + std::to_string(i) + " must be a batch value [N, sample...] (it is on the " + a.str() +
                    (a.is_sequence() ? "; reduce the sequence first, e.g. with sequence::reduce_sum)" : ")"));
}

enum class BatchReduceKind { sum, mean, max };

// y[j] = f(x[0, j] .. x[N-1, j]): each sample element reduced over the N items.
class BatchReduce final : public OpBase<BatchReduce> {
public:
    explicit BatchReduce(BatchReduceKind kind) : kind_(kind) {}
    std::string name() const override {
        return kind_ == BatchReduceKind::sum    ? "batch::reduce_sum"
               : kind_ == BatchReduceKind::mean ? "batch::reduce_mean"
                                                : "batch::reduce_max";
    }
    OpTraits traits() const override { return {.step_capable = false}; }
    bool backward_reads_output() const override { return kind_ == BatchReduceKind::max; }
    bool backward_reads_input(std::size_t) const override { return kind_ == BatchReduceKind::max; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_batch(name(), in, 0);
        return {in[0].shape, Axis::none()};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const View<const T>& x = c.in[0];
        const std::size_t n = x.rows(), row = c.out.size();
        T* y = c.out.data;
        std::copy_n(x.data, row, y);
        for (std::size_t i = 1; i < n; ++i) {
            const T* xi = x.data + i * row;
            for (std::size_t j = 0; j < row; ++j)
                y[j] = kind_ == BatchReduceKind::max ? std::max(y[j], xi[j]) : y[j] + xi[j];
        }
        if (kind_ == BatchReduceKind::mean)
            for (std::size_t j = 0; j < row; ++j) y[j] /= static_cast<T>(n);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        const View<T>& gx = c.in_grad[0];
        if (!gx) return;
        const std::size_t n = gx.rows(), row = c.out.size();
        const T* g = c.out_grad.data;
        if (kind_ == BatchReduceKind::max) {  // to the first item that attains the max: a tie counts once
            for (std::size_t j = 0; j < row; ++j)
                for (std::size_t i = 0; i < n; ++i)
                    if (c.in[0].data[i * row + j] == c.out.data[j]) {
                        gx.data[i * row + j] += g[j];
                        break;
                    }
            return;
        }
        const T scale = kind_ == BatchReduceKind::mean ? T(1) / static_cast<T>(n) : T(1);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < row; ++j) gx.data[i * row + j] += g[j] * scale;
    }

private:
    BatchReduceKind kind_;
};

// softmax over the N items, separately for each sample element; the result stays on the batch.
class BatchSoftmax final : public OpBase<BatchSoftmax> {
public:
    std::string name() const override { return "batch::softmax"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_batch(name(), in, 0);
        return {in[0].shape, Axis::batch()};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t n = c.out.rows(), row = c.out.sample_size();
        const T* x = c.in[0].data;
        T* y = c.out.data;
        for (std::size_t j = 0; j < row; ++j) {
            T m = -std::numeric_limits<T>::infinity();
            for (std::size_t i = 0; i < n; ++i) m = std::max(m, x[i * row + j]);
            T sum = 0;
            for (std::size_t i = 0; i < n; ++i) sum += y[i * row + j] = std::exp(x[i * row + j] - m);
            for (std::size_t i = 0; i < n; ++i) y[i * row + j] /= sum;
        }
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {  // dx_i = y_i * (g_i - sum_k g_k y_k)
        const View<T>& gx = c.in_grad[0];
        if (!gx) return;
        const std::size_t n = c.out.rows(), row = c.out.sample_size();
        const T *y = c.out.data, *g = c.out_grad.data;
        for (std::size_t j = 0; j < row; ++j) {
            T dot = 0;
            for (std::size_t i = 0; i < n; ++i) dot += g[i * row + j] * y[i * row + j];
            for (std::size_t i = 0; i < n; ++i) gx.data[i * row + j] += y[i * row + j] * (g[i * row + j] - dot);
        }
    }
};

// broadcast_as(v, like): a static value v repeated on each of like's N items.
class BatchBroadcastAs final : public OpBase<BatchBroadcastAs> {
public:
    std::string name() const override { return "batch::broadcast_as"; }
    OpTraits traits() const override { return {.step_capable = false}; }
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        require_batch(name(), in, 1);
        if (in[0].axis.is_dynamic())
            shape_error(name(), in,
                        "the value to broadcast must be static (no dynamic axis), e.g. a batch:: reduction; it is "
                        "on the " +
                            in[0].axis.str());
        return {in[0].shape, Axis::batch()};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t n = c.out.rows(), row = c.out.sample_size();
        for (std::size_t i = 0; i < n; ++i) std::copy_n(c.in[0].data, row, c.out.data + i * row);
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        const View<T>& gv = c.in_grad[0];
        if (!gv) return;
        const std::size_t n = c.out.rows(), row = c.out.sample_size();
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < row; ++j) gv.data[j] += c.out_grad.data[i * row + j];
    }
};

template <class O, class... Args>
Variable make(const std::vector<NodePtr>& inputs, const std::string& name, Args... args) {
    return Variable(apply_op(std::make_shared<const O>(args...), inputs, name));
}

}  // namespace

namespace batch {
Variable reduce_sum(const Variable& a, const std::string& name) {
    return make<BatchReduce>({a.node()}, name, BatchReduceKind::sum);
}
Variable reduce_mean(const Variable& a, const std::string& name) {
    return make<BatchReduce>({a.node()}, name, BatchReduceKind::mean);
}
Variable reduce_max(const Variable& a, const std::string& name) {
    return make<BatchReduce>({a.node()}, name, BatchReduceKind::max);
}
Variable softmax(const Variable& a, const std::string& name) { return make<BatchSoftmax>({a.node()}, name); }
Variable broadcast_as(const Variable& v, const Variable& like, const std::string& name) {
    return make<BatchBroadcastAs>({v.node(), like.node()}, name);
}
}  // namespace batch

}  // namespace loom
