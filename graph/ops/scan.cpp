// The fused select/delay scan: r[t] = f(z[t], cond[t] ? c : d[t]) with d[t] = r[t - direction],
// or the initial state where that step is outside the sequence. compile rewrites the three-op loop
// r = f(z, element_select(cond, c, delay(r, init))) into one node of this op, which runs the
// recurrence as a sequential scan over time, vectorized over the batch's rows: the same arithmetic
// as the step-by-step loop, without three op calls per step. A delay op's family, so it reads the
// layout and runs over time itself.
#include "core/errors.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

class SelectDelayScan final : public OpBase<SelectDelayScan> {
public:
    SelectDelayScan(BinaryKernels f, int direction) : f_(std::move(f)), dir_(direction) {}
    std::string name() const override { return (dir_ > 0 ? "past_scan(" : "future_scan(") + f_.name + ")"; }
    OpTraits traits() const override { return {.step_capable = false}; }

    // Operands: z like r; cond [.., 1] or like r; c and init a scalar, [row] or (init) per sequence.
    TypeInfo infer(std::span<const TypeInfo> in) const override {
        if (in.size() != 4 || !scan_fits(in[0], in[1], in[2], in[3]))
            shape_error(name(), in, "expects z, cond (sequences), c (static) and init (static or per sequence)");
        return in[0];
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const Shape sh = shape(c);
        const BinaryKernel<T>& f = kernel<T>();
        const SequenceLayout& l = *c.layout;
        const std::size_t steps = l.max_length(), row = sh.row, n_seq = sh.n_seq;
        T* r = c.out.data;
        for (std::size_t k = 0; k < steps; ++k) {
            const std::size_t t = dir_ > 0 ? k : steps - 1 - k;
            for (std::size_t n = 0; n < n_seq; ++n) {
                if (!l.valid(t, n)) continue;  // padding: zeroed by the executor
                const std::size_t at = (t * n_seq + n) * row;
                const T* prev = previous(r, l, t, n, row);
                const T* z = c.in[0].data + at;
                for (std::size_t j = 0; j < row; ++j) r[at + j] = f.f(z[j], select(c, sh, prev, t, n, j));
            }
        }
    }

    template <class T>
    void bwd(const OpCall<T>& c) const {
        const Shape sh = shape(c);
        const BinaryKernel<T>& f = kernel<T>();
        const SequenceLayout& l = *c.layout;
        const std::size_t steps = l.max_length(), row = sh.row, n_seq = sh.n_seq;
        const T* r = c.out.data;
        T *z_grad = c.in_grad[0].data, *c_grad = c.in_grad[2].data, *init_grad = c.in_grad[3].data;
        // pending[n, j]: gradient reaching r at the step being processed through the next step's delay.
        T* pending = c.work->get(n_seq * row);
        std::fill_n(pending, n_seq * row, T(0));
        for (std::size_t k = steps; k-- > 0;) {
            const std::size_t t = dir_ > 0 ? k : steps - 1 - k;
            for (std::size_t n = 0; n < n_seq; ++n) {
                T* carry = pending + n * row;
                if (!l.valid(t, n)) {
                    std::fill_n(carry, row, T(0));
                    continue;
                }
                const std::size_t at = (t * n_seq + n) * row;
                const T* prev = previous(r, l, t, n, row);
                const T* cond = c.in[1].data + (t * n_seq + n) * sh.cond_w;
                for (std::size_t j = 0; j < row; ++j) {
                    const T g = c.out_grad.data[at + j] + carry[j];
                    const T z = c.in[0].data[at + j], s = select(c, sh, prev, t, n, j);
                    if (z_grad) z_grad[at + j] += g * f.da(z, s, r[at + j]);
                    const T gs = g * f.db(z, s, r[at + j]);
                    T gd = T(0);
                    if (cond[sh.cond_w == 1 ? 0 : j] != T(0)) {
                        if (c_grad) c_grad[sh.c_w == 1 ? 0 : j] += gs;
                    } else {
                        gd = gs;
                    }
                    if (!prev && init_grad) init_grad[n * sh.init_stride + (sh.init_w == 1 ? 0 : j)] += gd;
                    carry[j] = prev ? gd : T(0);
                }
            }
        }
    }

private:
    struct Shape {
        std::size_t n_seq, row, cond_w, c_w, init_w, init_stride;
    };
    template <class T>
    static Shape shape(const OpCall<T>& c) {
        const SequenceLayout& l = *c.layout;
        Shape sh{};
        sh.n_seq = l.num_sequences();
        const std::size_t positions = l.max_length() * sh.n_seq;
        sh.row = positions ? c.in[0].size() / positions : 0;
        sh.cond_w = positions ? c.in[1].size() / positions : 0;
        sh.c_w = c.in[2].size();
        sh.init_w = c.in[3].sample_size();
        sh.init_stride = c.in[3].dyn ? sh.init_w : 0;
        return sh;
    }
    template <class T>
    const BinaryKernel<T>& kernel() const {
        if constexpr (std::is_same_v<T, float>)
            return f_.f32;
        else
            return f_.f64;
    }
    // r at the step the delay reads for (t, n), or nullptr where that falls outside the sequence.
    template <class T>
    const T* previous(const T* r, const SequenceLayout& l, std::size_t t, std::size_t n, std::size_t row) const {
        const long src = static_cast<long>(t) - dir_;
        if (src < 0 || src >= static_cast<long>(l.length(n))) return nullptr;
        return r + (static_cast<std::size_t>(src) * l.num_sequences() + n) * row;
    }
    // s[t] = cond[t] ? c : d[t], d[t] = the previous r or the initial state.
    template <class T>
    static T select(const OpCall<T>& c, const Shape& sh, const T* prev, std::size_t t, std::size_t n, std::size_t j) {
        const T* cond = c.in[1].data + (t * sh.n_seq + n) * sh.cond_w;
        if (cond[sh.cond_w == 1 ? 0 : j] != T(0)) return c.in[2].data[sh.c_w == 1 ? 0 : j];
        return prev ? prev[j] : c.in[3].data[n * sh.init_stride + (sh.init_w == 1 ? 0 : j)];
    }

    BinaryKernels f_;
    int dir_;
};

}  // namespace

bool scan_fits(const TypeInfo& z, const TypeInfo& cond, const TypeInfo& c, const TypeInfo& init) {
    if (!z.axis.is_sequence() || !cond.axis.is_sequence() || c.axis.is_dynamic() || init.axis.is_sequence())
        return false;
    const std::size_t row = z.shape.size();
    auto fits = [&](std::size_t w) { return w == 1 || w == row; };
    return fits(cond.shape.size()) && fits(c.shape.size()) && fits(init.shape.size());
}

std::shared_ptr<const Op> select_delay_scan(const BinaryKernels& f, int direction) {
    return std::make_shared<const SelectDelayScan>(f, direction);
}

}  // namespace loom
