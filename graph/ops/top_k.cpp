// top_k along the last axis: the k largest elements of each row and their indices. Dynamic axes
// pass through, so it works on a whole tensor or one time step alike.
#include <algorithm>
#include <numeric>

#include "core/errors.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

// Two nodes, one for the values and one for their indices.
class TopKOp final : public OpBase<TopKOp> {
public:
    TopKOp(std::size_t k, bool indices) : k_(k), indices_(indices) {}
    std::string name() const override { return indices_ ? "top_k.indices" : "top_k"; }
    bool backward_reads_output() const override { return false; }  // the order is recomputed from x
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const Shape& s = in[0].shape;
        if (s.rank() == 0) shape_error(name(), in, "needs a sample with at least one axis");
        if (k_ == 0 || k_ > s[s.rank() - 1])
            shape_error(name(), in,
                        "k = " + std::to_string(k_) + " must be in 1.." + std::to_string(s[s.rank() - 1]) +
                            " (the size of the last axis)");
        std::vector<std::size_t> out(s.begin(), s.end());
        out.back() = k_;
        return {Shape(out), in[0].axis};
    }
    template <class T>
    void fwd(const OpCall<T>& c) const {
        select(c.in[0], [&](std::size_t r, std::size_t j, std::size_t i) {
            c.out.data[r * k_ + j] = indices_ ? static_cast<T>(i) : c.in[0].data[r * row(c.in[0]) + i];
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (indices_ || !c.in_grad[0]) return;
        select(c.in[0], [&](std::size_t r, std::size_t j, std::size_t i) {
            c.in_grad[0].data[r * row(c.in[0]) + i] += c.out_grad.data[r * k_ + j];
        });
    }

private:
    template <class T>
    static std::size_t row(const View<const T>& v) {
        return v.dims[v.dims.rank - 1];
    }
    // f(row, rank j among the chosen, position i in the row) for the k largest of each row,
    // largest first; ties go to the lower position, and NaN counts as largest so nothing is UB.
    template <class T, class F>
    void select(const View<const T>& in, F&& f) const {
        thread_local std::vector<std::size_t> order;
        const std::size_t n = row(in), rows = in.size() / n;
        order.resize(n);
        for (std::size_t r = 0; r < rows; ++r) {
            const T* x = in.data + r * n;
            std::iota(order.begin(), order.end(), std::size_t{0});
            std::partial_sort(order.begin(), order.begin() + static_cast<long>(k_), order.end(),
                              [x](std::size_t a, std::size_t b) {
                                  const bool na = std::isnan(x[a]), nb = std::isnan(x[b]);
                                  if (na || nb) return na != nb ? na : a < b;
                                  return x[a] > x[b] || (x[a] == x[b] && a < b);
                              });
            for (std::size_t j = 0; j < k_; ++j) f(r, j, order[j]);
        }
    }

    std::size_t k_;
    bool indices_;
};

}  // namespace

TopK top_k(const Variable& a, std::size_t k, const std::string& name) {
    TopK out;
    out.values = Variable(apply_op(std::make_shared<const TopKOp>(k, false), {a.node()}, name));
    out.indices = Variable(
        apply_op(std::make_shared<const TopKOp>(k, true), {a.node()}, name.empty() ? name : name + ".indices"));
    return out;
}

}  // namespace loom
