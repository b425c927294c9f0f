// Fused LSTM cell arithmetic. With the gate pre-activations z = [i, f, o, g] (blocks of n, as
// layers::LSTM lays them out):
//   lstm_cell_state(z, c)        = sigmoid(z_f) * c + sigmoid(z_i) * tanh(z_g)       (c')
//   lstm_cell_output(z, c_next)  = sigmoid(z_o) * tanh(c_next)                       (h')
// Composed from element-wise ops the same cell is ~13 ops per time step, each a pass over memory
// with its own backward; fused, it is two passes that recompute the gates from z in backward.
#include <algorithm>

#include "core/fast_math.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

TypeInfo cell_type(const std::string& op, std::span<const TypeInfo> in) {
    const Shape &z = in[0].shape, &c = in[1].shape;
    if (z.rank() != 1 || c.rank() != 1 || z[0] != 4 * c[0])
        shape_error(op, in, "expects gate pre-activations [4n] and a cell state [n]");
    return {c, unify_axes(op, in)};
}

// Rows of an operand: its own row r, or row 0 when it has no dynamic axis (broadcast).
// The cells compute only the real rows (OpCall::rows): a padding row's output is zeroed by the
// executor and its output gradient is zero; inside the QA model's loops that skips a third.
template <class T>
std::size_t row_of(const View<const T>& v, std::size_t r) {
    return v.dyn == 0 ? 0 : r;
}

class LstmCellState final : public OpBase<LstmCellState> {
public:
    std::string name() const override { return "lstm_cell_state"; }
    bool backward_reads_output() const override { return false; }  // reads z and c only
    TypeInfo infer(std::span<const TypeInfo> in) const override { return cell_type(name(), in); }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t n = c.out.sample_size();
        c.for_each_row([&](std::size_t r) {
            const T* z = c.in[0].data + row_of(c.in[0], r) * 4 * n;
            const T* cp = c.in[1].data + row_of(c.in[1], r) * n;
            T* out = c.out.data + r * n;
            for (std::size_t j = 0; j < n; ++j)
                out[j] = fast::sigmoid(z[n + j]) * cp[j] + fast::sigmoid(z[j]) * fast::tanh(z[3 * n + j]);
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        T *gz0 = c.in_grad[0].data, *gc0 = c.in_grad[1].data;
        const std::size_t n = c.out.sample_size();
        c.for_each_row([&](std::size_t r) {
            const T* __restrict z = c.in[0].data + row_of(c.in[0], r) * 4 * n;
            const T* __restrict cp = c.in[1].data + row_of(c.in[1], r) * n;
            const T* __restrict g = c.out_grad.data + r * n;
            // The gate activations once per chunk into small arrays, then one branch-free loop per
            // output stream: GCC vectorizes each (not one loop writing three), and no gate is
            // evaluated twice.
            T* gz = gz0 ? gz0 + row_of(c.in[0], r) * 4 * n : nullptr;
            T* gc = gc0 ? gc0 + row_of(c.in[1], r) * n : nullptr;
            constexpr std::size_t chunk = 64;
            for (std::size_t j0 = 0; j0 < n; j0 += chunk) {
                const std::size_t len = std::min(chunk, n - j0);
                T si[chunk], sf[chunk], tg[chunk];
                const T *zi = z + j0, *zf = z + n + j0, *zg = z + 3 * n + j0, *gj = g + j0, *cj = cp + j0;
                for (std::size_t j = 0; j < len; ++j) si[j] = fast::sigmoid(zi[j]);
                for (std::size_t j = 0; j < len; ++j) sf[j] = fast::sigmoid(zf[j]);
                for (std::size_t j = 0; j < len; ++j) tg[j] = fast::tanh(zg[j]);
                if (gz) {
                    T* __restrict gi = gz + j0;
                    T* __restrict gf = gz + n + j0;
                    T* __restrict gg = gz + 3 * n + j0;
                    for (std::size_t j = 0; j < len; ++j) gi[j] += gj[j] * tg[j] * si[j] * (T(1) - si[j]);
                    for (std::size_t j = 0; j < len; ++j) gf[j] += gj[j] * cj[j] * sf[j] * (T(1) - sf[j]);
                    for (std::size_t j = 0; j < len; ++j) gg[j] += gj[j] * si[j] * (T(1) - tg[j] * tg[j]);
                }
                if (gc) {
                    T* __restrict gcj = gc + j0;
                    for (std::size_t j = 0; j < len; ++j) gcj[j] += gj[j] * sf[j];
                }
            }
        });
    }
};

class LstmCellOutput final : public OpBase<LstmCellOutput> {
public:
    std::string name() const override { return "lstm_cell_output"; }
    bool backward_reads_output() const override { return false; }  // h = o * tanh(c) is recomputed
    TypeInfo infer(std::span<const TypeInfo> in) const override { return cell_type(name(), in); }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const std::size_t n = c.out.sample_size();
        c.for_each_row([&](std::size_t r) {
            const T* z = c.in[0].data + row_of(c.in[0], r) * 4 * n + 2 * n;
            const T* cn = c.in[1].data + row_of(c.in[1], r) * n;
            T* out = c.out.data + r * n;
            for (std::size_t j = 0; j < n; ++j) out[j] = fast::sigmoid(z[j]) * fast::tanh(cn[j]);
        });
    }
    template <class T>
    void bwd(const OpCall<T>& c) const {
        T *gz0 = c.in_grad[0].data, *gc0 = c.in_grad[1].data;
        const std::size_t n = c.out.sample_size();
        c.for_each_row([&](std::size_t r) {
            const T* __restrict z = c.in[0].data + row_of(c.in[0], r) * 4 * n + 2 * n;
            const T* __restrict cn = c.in[1].data + row_of(c.in[1], r) * n;
            const T* __restrict g = c.out_grad.data + r * n;
            T* gz = gz0 ? gz0 + row_of(c.in[0], r) * 4 * n + 2 * n : nullptr;
            T* gc = gc0 ? gc0 + row_of(c.in[1], r) * n : nullptr;
            constexpr std::size_t chunk = 64;  // as in the cell state's backward
            for (std::size_t j0 = 0; j0 < n; j0 += chunk) {
                const std::size_t len = std::min(chunk, n - j0);
                T so[chunk], tc[chunk];
                const T *zo = z + j0, *cj = cn + j0, *gj = g + j0;
                for (std::size_t j = 0; j < len; ++j) so[j] = fast::sigmoid(zo[j]);
                for (std::size_t j = 0; j < len; ++j) tc[j] = fast::tanh(cj[j]);
                if (gz) {
                    T* __restrict go = gz + j0;
                    for (std::size_t j = 0; j < len; ++j) go[j] += gj[j] * tc[j] * so[j] * (T(1) - so[j]);
                }
                if (gc) {
                    T* __restrict gcj = gc + j0;
                    for (std::size_t j = 0; j < len; ++j) gcj[j] += gj[j] * so[j] * (T(1) - tc[j] * tc[j]);
                }
            }
        });
    }
};

}  // namespace

Variable lstm_cell_state(const Variable& z, const Variable& c, const std::string& name) {
    static const auto op = std::make_shared<const LstmCellState>();
    return Variable(apply_op(op, {z.node(), c.node()}, name));
}

Variable lstm_cell_output(const Variable& z, const Variable& c_next, const std::string& name) {
    static const auto op = std::make_shared<const LstmCellOutput>();
    return Variable(apply_op(op, {z.node(), c_next.node()}, name));
}

}  // namespace loom
