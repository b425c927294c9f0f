// past_value / future_value: the only ops that reach across time. out[t] = x[t - k] (past) or
// x[t + k] (future) on the same sequence, and initial_state where that step falls outside it.
// Outside a loop they shift the whole tensor; inside one they compute step t from x's full buffer.
#include "core/errors.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

namespace {

class Delay final : public OpBase<Delay> {
public:
    Delay(int direction, std::size_t steps) : dir_(direction), k_(steps) {}
    std::string name() const override { return dir_ > 0 ? "past_value" : "future_value"; }
    // Backward only moves gradients across time.
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t) const override { return false; }
    OpTraits traits() const override { return {.delay_direction = dir_, .delay_steps = k_, .reads_time = true}; }

    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const TypeInfo &x = in[0], &init = in[1];
        if (x.axis.kind != Axis::Kind::Sequence && x.axis.kind != Axis::Kind::Any)
            shape_error(name(), in, "the operand must be a sequence (it is on the " + x.axis.str() + ")");
        if (init.axis.is_sequence())
            shape_error(name(), in,
                        "initial_state must be a scalar, a tensor or a per-sequence (batch) value, "
                        "not a sequence");
        if (init.shape.size() != 1 && init.shape != x.shape)
            shape_error(name(), in, "initial_state must be a scalar or have the operand's shape " + x.shape.str());
        return x;
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        const SequenceLayout& layout = *c.layout;
        const View<const T>& x = c.time ? c.time->in[0] : c.in[0];
        const View<const T>& init = c.in[1];
        const std::size_t n_seq = layout.num_sequences(), row = c.out.sample_size();
        const std::size_t init_row = init.sample_size();
        auto step = [&](std::size_t t, T* out_t) {
            for (std::size_t n = 0; n < n_seq; ++n) {
                T* dst = out_t + n * row;
                if (!layout.valid(t, n)) continue;  // padding: zeroed by the executor
                const long s = source(t, n, layout);
                if (s >= 0) {
                    std::copy_n(x.data + (static_cast<std::size_t>(s) * n_seq + n) * row, row, dst);
                } else {
                    const T* src = init.data + (init.dyn ? n * init_row : 0);
                    for (std::size_t j = 0; j < row; ++j) dst[j] = src[init_row == 1 ? 0 : j];
                }
            }
        };
        if (c.time) {
            step(c.time->t, c.out.data);
        } else {
            for (std::size_t t = 0; t < layout.max_length(); ++t) step(t, c.out.data + t * n_seq * row);
        }
    }

    template <class T>
    void bwd(const OpCall<T>& c) const {
        const SequenceLayout& layout = *c.layout;
        const View<T>& gx = c.time ? c.time->in_grad[0] : c.in_grad[0];
        const View<T>& ginit = c.in_grad[1];
        const std::size_t n_seq = layout.num_sequences(), row = c.out.sample_size();
        const std::size_t init_row = c.in[1].sample_size();
        auto step = [&](std::size_t t, const T* g_t) {
            for (std::size_t n = 0; n < n_seq; ++n) {
                if (!layout.valid(t, n)) continue;
                const T* g = g_t + n * row;
                const long s = source(t, n, layout);
                if (s >= 0) {
                    if (gx) {
                        T* dst = gx.data + (static_cast<std::size_t>(s) * n_seq + n) * row;
                        for (std::size_t j = 0; j < row; ++j) dst[j] += g[j];
                    }
                } else if (ginit) {
                    T* dst = ginit.data + (ginit.dyn ? n * init_row : 0);
                    for (std::size_t j = 0; j < row; ++j) dst[init_row == 1 ? 0 : j] += g[j];
                }
            }
        };
        if (c.time) {
            step(c.time->t, c.out_grad.data);
        } else {
            for (std::size_t t = 0; t < layout.max_length(); ++t) step(t, c.out_grad.data + t * n_seq * row);
        }
    }

private:
    // The source step of out[t] on sequence n, or -1 when it falls outside the sequence.
    long source(std::size_t t, std::size_t n, const SequenceLayout& layout) const {
        const long s = static_cast<long>(t) - dir_ * static_cast<long>(k_);
        return (s < 0 || s >= static_cast<long>(layout.length(n))) ? -1 : s;
    }

    int dir_;
    std::size_t k_;
};

Variable delay(int dir, const Variable& a, const Variable& initial_state, std::size_t time_step,
               const std::string& name) {
    if (time_step == 0)
        throw UserError(std::string(dir > 0 ? "past_value" : "future_value") +
                        ": time_step must be at least 1 (a delay of 0 would close a loop with no delay)");
    return Variable(apply_op(std::make_shared<const Delay>(dir, time_step), {a.node(), initial_state.node()}, name));
}

}  // namespace

Variable past_value(const Variable& a, const Variable& initial_state, std::size_t time_step, const std::string& name) {
    return delay(+1, a, initial_state, time_step, name);
}

Variable future_value(const Variable& a, const Variable& initial_state, std::size_t time_step,
                      const std::string& name) {
    return delay(-1, a, initial_state, time_step, name);
}

}  // namespace loom
