// Matrix products. times(x, W): x [a..., k] with W [k, m...] gives [a..., m...]; times_transpose(a, b)
// multiplies by b's transpose: a [..., k], b [m, k] gives [..., m]. With a static right operand
// every row of every time step goes through one GEMM; with a dynamic one, one GEMM per item, or,
// for one row per item, dot products and row updates.
#include <algorithm>
#include <vector>

#include "core/errors.hpp"
#include "core/gemm.hpp"
#include "core/packed_gemm.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"
#include "graph/ops/broadcast.hpp"
#include "graph/ops/kinds.hpp"

namespace loom {

namespace {

class Times final : public OpBase<Times> {
public:
    Times(bool transpose_right, bool addend) : transpose_(transpose_right), addend_(addend) {}
    std::string name() const override { return addend_ ? "affine" : transpose_ ? "times_transpose" : "times"; }
    bool transposed() const { return transpose_; }
    int addends() const { return addend_ ? 1 : 0; }
    // dX and dW need X and W; the addend's gradient is out_grad itself.
    bool backward_reads_output() const override { return false; }
    bool backward_reads_input(std::size_t i) const override { return i < 2; }
    OpTraits traits() const override { return {.passes_gradient = addend_ ? 1u << 2 : 0u}; }  // the addend

    TypeInfo infer(std::span<const TypeInfo> in) const override {
        const Shape &x = in[0].shape, &w = in[1].shape;
        if (x.rank() == 0 || w.rank() == 0) shape_error(name(), in, "both operands need at least one axis");
        if (transpose_ && w.rank() != 2) shape_error(name(), in, "the right operand must be a matrix [m, k]");
        const std::size_t k = transpose_ ? w[1] : w[0];
        if (x[x.rank() - 1] != k)
            shape_error(name(), in,
                        "the last axis of the left operand (" + std::to_string(x[x.rank() - 1]) + ") must match the " +
                            (transpose_ ? "last" : "first") + " axis of the right (" + std::to_string(k) + ")");
        std::vector<std::size_t> out(x.begin(), x.end() - 1);
        if (transpose_)
            out.push_back(w[0]);
        else
            out.insert(out.end(), w.begin() + 1, w.end());
        if (addend_) {  // the addend broadcasts to the product's shape, never beyond it
            const Shape product(out);
            const TypeInfo pair[] = {{product, in[0].axis}, in[2]};
            if (broadcast_shapes(name(), pair) != product)
                shape_error(name(), in, "the addend must broadcast to the product's shape " + product.str());
        }
        return {Shape(out), unify_axes(name(), in)};
    }

    template <class T>
    void fwd(const OpCall<T>& c) const {
        if (StepRows<T>* r = step_rows(c)) {
            const T* w = packed_weight(c, false, *r);
            if (!addend_) {
                gemm_rows<T>(r->x.size(), r->n, r->k, r->x.data(), w, r->y.data(), false);
            } else if (addend_by_rows(c, r->n)) {  // the kernel adds each row's addend where it lies
                gemm_rows_add<T>(r->x.size(), r->n, r->k, r->x.data(), w, r->d.data(), r->y.data());
            } else {
                start_output(c);
                gemm_rows<T>(r->x.size(), r->n, r->k, r->x.data(), w, r->y.data(), true);
            }
            return;
        }
        if (Packed<T> p; pack(c, p)) {
            const bool bias = addend_ && c.in[2].dyn == 0 && c.in[2].size() == p.n;
            if ((bias || !addend_) && gemm_own_kernels(p.rows, p.n, p.k)) return forward_in_place(c, p, bias);
            take_buffer(c, p);
            T *xp = p.buffer, *yp = p.buffer + p.rows * p.k;
            gather(p, c.in[0].data, xp, p.k);
            // A bias [n] goes into the packed rows before the GEMM adds to them, and the rows are
            // then copied out: the padding rows are left to the executor, which zeroes them after
            // every forward. Any other addend is broadcast over the whole output first.
            if (bias)
                for (std::size_t r = 0; r < p.rows; ++r) std::copy_n(c.in[2].data, p.n, yp + r * p.n);
            gemm(false, transpose_, p.rows, p.n, p.k, T(1), xp, p.k, c.in[1].data, transpose_ ? p.k : p.n,
                 bias ? T(1) : T(0), yp, p.n);
            if (bias || !addend_) {
                scatter(p, yp, c.out.data, p.n);
            } else {
                start_output(c);
                scatter_add(p, yp, c.out.data, p.n);
            }
            return;
        }
        if (addend_) start_output(c);
        if (item_vectors(c, false)) return;
        const T beta = addend_ ? T(1) : T(0);
        for_each_product(c, [&](std::size_t m, std::size_t n, std::size_t k, const T* x, const T* w, T* y) {
            gemm(false, transpose_, m, n, k, T(1), x, k, w, transpose_ ? k : n, beta, y, n);
        });
    }

    template <class T>
    void bwd(const OpCall<T>& c) const {
        if (addend_ && c.in_grad[2]) addend_gradient(c);
        const View<T>&gx = c.in_grad[0], &gw = c.in_grad[1];
        if (StepRows<T>* r = gx && !gw ? step_rows(c) : nullptr) {  // dX += dY W^T, this step's rows
            const T* wt = packed_weight(c, true, *r);
            gemm_rows<T>(r->gy.size(), r->k, r->n, r->gy.data(), wt, r->gx.data(), true);
            return;
        }
        if (Packed<T> p; pack(c, p)) {
            if (gemm_own_kernels(p.rows, p.n, p.k)) return backward_in_place(c, p);
            take_buffer(c, p);
            T *xp = p.buffer, *gp = p.buffer + p.rows * p.k;
            gather(p, c.out_grad.data, gp, p.n);
            if (gx) {  // dX = dY W^T on the real rows, reusing xp as scratch
                gemm(false, !transpose_, p.rows, p.k, p.n, T(1), gp, p.n, c.in[1].data, transpose_ ? p.k : p.n, T(0),
                     xp, p.k);
                scatter_add(p, xp, gx.data, p.k);
            }
            if (gw) {
                gather(p, c.in[0].data, xp, p.k);
                if (transpose_)
                    gemm(true, false, p.n, p.k, p.rows, T(1), gp, p.n, xp, p.k, T(1), gw.data, p.k);
                else
                    gemm(true, false, p.k, p.n, p.rows, T(1), xp, p.k, gp, p.n, T(1), gw.data, p.n);
            }
            return;
        }
        if (item_vectors(c, true)) return;
        // The products walked over out_grad's buffer: the output's value may have been freed.
        OpCall<T> over_grad = c;
        over_grad.out.data = const_cast<T*>(c.out_grad.data);
        for_each_product(over_grad, [&](std::size_t m, std::size_t n, std::size_t k, const T* x, const T* w, T* g) {
            if (gx) {  // dX[m,k] += dY[m,n] * W^T  (W is [k,n], or [n,k] when transposed)
                T* dx = gx.data + (x - c.in[0].data);
                gemm(false, !transpose_, m, k, n, T(1), g, n, w, transpose_ ? k : n, T(1), dx, k);
            }
            if (gw) {
                T* dw = gw.data + (w - c.in[1].data);
                if (transpose_)  // dW[n,k] += dY^T X
                    gemm(true, false, n, k, m, T(1), g, n, x, k, T(1), dw, k);
                else  // dW[k,n] += X^T dY
                    gemm(true, false, k, n, m, T(1), x, k, g, n, T(1), dw, n);
            }
        });
    }

private:
    // affine: the output starts as the addend (broadcast), and the products are added to it.
    template <class T>
    void start_output(const OpCall<T>& c) const {
        if (!addend_) {
            std::fill_n(c.out.data, c.out.size(), T(0));
            return;
        }
        const auto plan = detail::plan_broadcast<const T, 1>(c.out.dims, c.out.dyn, {c.in[2]});
        const T* b = c.in[2].data;
        detail::for_each_run(plan, [&](std::size_t o, const std::array<std::size_t, 1>& base, std::size_t n,
                                       const std::array<std::size_t, 1>& step) {
            T* y = c.out.data + o;
            if (step[0] == 1)
                std::copy_n(b + base[0], n, y);
            else
                for (std::size_t i = 0; i < n; ++i) y[i] = b[base[0] + i * step[0]];
        });
    }
    // d(addend) = the output gradient summed over the dims the addend was broadcast along.
    template <class T>
    void addend_gradient(const OpCall<T>& c) const {
        if (c.in_grad[2].data == c.out_grad.data) return;  // the executor aliased them: already there
        const auto plan = detail::plan_broadcast<const T, 1>(c.out.dims, c.out.dyn, {detail::as_const(c.in_grad[2])});
        const T* g = c.out_grad.data;
        T* gb = c.in_grad[2].data;
        detail::for_each_run(plan, [&](std::size_t o, const std::array<std::size_t, 1>& base, std::size_t n,
                                       const std::array<std::size_t, 1>& step) {
            if (step[0] == 0) {
                T acc = 0;
                for (std::size_t i = 0; i < n; ++i) acc += g[o + i];
                gb[base[0]] += acc;
            } else {
                for (std::size_t i = 0; i < n; ++i) gb[base[0] + i * step[0]] += g[o + i];
            }
        });
    }

    // Inside a loop, a static right operand is packed once for all the loop's steps (core/
    // packed_gemm.hpp), and each step multiplies the rows of its running sequences where they lie:
    // no GEMM call repacking the weight, no gather or scatter per step.
    template <class T>
    struct StepRows {
        std::size_t k = 0, n = 0;
        // Per real row: forward, its input and output rows; backward, its output and input gradients'.
        std::vector<const T*> x, gy, d;  // d: forward, each row's addend (addend_by_rows)
        std::vector<T*> y, gx;
    };

    // An addend given per output row ([N, ...] as the output at a step) or one bias row [n] for all.
    template <class T>
    bool addend_by_rows(const OpCall<T>& c, std::size_t n) const {
        if (!addend_) return false;
        const View<const T>& b = c.in[2];
        return (b.dyn == c.out.dyn && b.sample_size() == c.out.sample_size()) || (b.dyn == 0 && b.size() == n);
    }

    // The rows of this step, or nullptr where the packed path does not apply. The lists are the
    // calling thread's, reused from step to step: nothing is allocated per step once warm.
    template <class T>
    StepRows<T>* step_rows(const OpCall<T>& c) const {
        const View<const T>&x = c.in[0], &w = c.in[1];
        if (!c.memory || x.dyn != 1 || w.dyn != 0 || !packed_gemm_vectorized()) return nullptr;
        thread_local StepRows<T> r;
        r.x.clear();
        r.y.clear();
        r.gy.clear();
        r.gx.clear();
        r.d.clear();
        r.k = x.dims[x.dims.rank - 1];
        r.n = w.sample_size() / r.k;
        const std::size_t per_seq = x.sample_size() / r.k;
        const bool backward = static_cast<bool>(c.out_grad);
        const bool rows_of_addend = !backward && addend_by_rows(c, r.n);
        const bool one_bias = rows_of_addend && c.in[2].dyn == 0;
        c.for_each_row([&](std::size_t s) {
            for (std::size_t i = s * per_seq; i < (s + 1) * per_seq; ++i) {
                if (backward) {
                    r.gy.push_back(c.out_grad.data + i * r.n);
                    r.gx.push_back(c.in_grad[0].data + i * r.k);
                } else {
                    r.x.push_back(x.data + i * r.k);
                    r.y.push_back(c.out.data + i * r.n);
                    if (rows_of_addend) r.d.push_back(c.in[2].data + (one_bias ? 0 : i * r.n));
                }
            }
        });
        return &r;
    }

    // op(W) [k, n] packed for forward, or its transpose [n, k] for dX, at the loop's first step
    // (W is stored [k, n], or [n, k] for times_transpose).
    template <class T>
    const T* packed_weight(const OpCall<T>& c, bool for_dx, const StepRows<T>& r) const {
        return pack_right_once(*c.memory, transpose_ != for_dx, for_dx ? r.n : r.k, for_dx ? r.k : r.n, c.in[1].data,
                               transpose_ ? r.k : r.n);
    }

    // A padded sequence times a static matrix multiplies only the real steps: their rows are
    // gathered into a packed block, multiplied with one GEMM and scattered back. On batches of
    // mixed lengths this skips the padding's share of the FLOPs (a third for the QA model's
    // lengths), as packed sequences do, while the layout stays padded.
    template <class T>
    struct Packed {
        std::vector<std::size_t>* blocks = nullptr;  // first row of each real (step, sequence) block
        std::size_t rows_per_block = 0, rows = 0, k = 0, n = 0;
        T* buffer = nullptr;  // room for [rows, k] followed by [rows, max(k, n)]
    };

    template <class T>
    bool pack(const OpCall<T>& c, Packed<T>& p) const {
        const View<const T>&x = c.in[0], &w = c.in[1];
        if (w.dyn != 0 || x.dyn == 0 || !c.padded) return false;
        // Not worth the copies when nearly every row is real.
        if (c.rows.size() * 8 > x.rows() * 7) return false;
        thread_local std::vector<std::size_t> blocks;
        p.k = x.dims[x.dims.rank - 1];
        p.n = w.sample_size() / p.k;
        p.rows_per_block = x.sample_size() / p.k;
        blocks.resize(c.rows.size());
        for (std::size_t b = 0; b < c.rows.size(); ++b) blocks[b] = c.rows[b] * p.rows_per_block;
        p.blocks = &blocks;
        p.rows = blocks.size() * p.rows_per_block;
        return true;
    }
    template <class T>
    static void take_buffer(const OpCall<T>& c, Packed<T>& p) {
        p.buffer = c.work->get(p.rows * (p.k + std::max(p.k, p.n)));
    }

    // The real rows of a padded operand of row width `width`, where they lie, in the packed order.
    template <class T, class P>
    static void real_rows(const Packed<T>& p, P* base, std::size_t width, std::vector<P*>& out) {
        out.clear();
        for (std::size_t b : *p.blocks)
            for (std::size_t r = 0; r < p.rows_per_block; ++r) out.push_back(base + (b + r) * width);
    }

    // The same products as through the packed block, when gemm() runs loom's own kernels: those
    // read and write the real rows where they lie (gemm_blocked_rows), so nothing is gathered or
    // scattered. The kernel adds the bias row where the packed path copied it into the rows first:
    // the same sums. In backward dX is added into the input's gradient as the blocks of the product
    // are (as the unpadded path does), not after the whole product.
    template <class T>
    void forward_in_place(const OpCall<T>& c, const Packed<T>& p, bool bias) const {
        thread_local std::vector<const T*> xs, biases;
        thread_local std::vector<T*> ys;
        real_rows(p, c.in[0].data, p.k, xs);
        real_rows(p, c.out.data, p.n, ys);
        if (bias) biases.assign(p.rows, c.in[2].data);  // the kernel adds the bias row to every row
        gemm_blocked_rows<T>(transpose_, p.rows, p.n, p.k, T(1), xs.data(), c.in[1].data, transpose_ ? p.k : p.n,
                             bias ? T(1) : T(0), ys.data(), bias ? biases.data() : nullptr);
    }
    template <class T>
    void backward_in_place(const OpCall<T>& c, const Packed<T>& p) const {
        const View<T>&gx = c.in_grad[0], &gw = c.in_grad[1];
        thread_local std::vector<const T*> gys, xs;
        thread_local std::vector<T*> gxs;
        real_rows(p, c.out_grad.data, p.n, gys);
        if (gx) {  // dX += dY W^T
            real_rows(p, gx.data, p.k, gxs);
            gemm_blocked_rows<T>(!transpose_, p.rows, p.k, p.n, T(1), gys.data(), c.in[1].data, transpose_ ? p.k : p.n,
                                 T(1), gxs.data());
        }
        if (gw) {  // dW += X^T dY, or dY^T X when W is stored transposed
            real_rows(p, c.in[0].data, p.k, xs);
            if (transpose_)
                gemm_blocked_rows_tn<T>(p.n, p.k, p.rows, T(1), gys.data(), xs.data(), T(1), gw.data, p.k);
            else
                gemm_blocked_rows_tn<T>(p.k, p.n, p.rows, T(1), xs.data(), gys.data(), T(1), gw.data, p.n);
        }
    }

    // Packed rows <- the real blocks of `from` (row width `width`), and back, adding.
    template <class T>
    static void gather(const Packed<T>& p, const T* from, T* to, std::size_t width) {
        const std::size_t len = p.rows_per_block * width;
        for (std::size_t b = 0; b < p.blocks->size(); ++b)
            std::copy_n(from + (*p.blocks)[b] * width, len, to + b * len);
    }
    template <class T>
    static void scatter(const Packed<T>& p, const T* from, T* to, std::size_t width) {
        const std::size_t len = p.rows_per_block * width;
        for (std::size_t b = 0; b < p.blocks->size(); ++b)
            std::copy_n(from + b * len, len, to + (*p.blocks)[b] * width);
    }
    template <class T>
    static void scatter_add(const Packed<T>& p, const T* from, T* to, std::size_t width) {
        const std::size_t len = p.rows_per_block * width;
        for (std::size_t b = 0; b < p.blocks->size(); ++b) {
            T* dst = to + (*p.blocks)[b] * width;
            const T* src = from + b * len;
            for (std::size_t j = 0; j < len; ++j) dst[j] += src[j];
        }
    }

    // One row per item times the item's own matrix (attention's scores q K^T and context a V, per
    // sequence and step): each product is a vector times a small matrix, which a GEMM call spends
    // most of its time setting up. These are dot products and row updates instead, over the real
    // rows only (a padding row's output is zeroed after forward, and its output gradient is zero).
    // The matrix may be one per sequence for every step ([N] against x's [T, N]): a loop's whole
    // call for the gradient of a memory it read at every step.
    template <class T>
    bool item_vectors(const OpCall<T>& c, bool backward) const {
        const View<const T>&x = c.in[0], &w = c.in[1];
        const std::size_t k = x.dims[x.dims.rank - 1];
        if (w.dyn == 0 || w.dyn > x.dyn || x.sample_size() != k || c.out.dyn != x.dyn) return false;
        std::size_t matrices = 1;  // w's dynamic positions, the trailing ones of x's
        for (std::size_t i = 0; i < x.dyn; ++i) {
            if (c.out.dims[i] != x.dims[i]) return false;
            if (i + w.dyn >= x.dyn) {
                if (w.dims[i + w.dyn - x.dyn] != x.dims[i]) return false;
                matrices *= x.dims[i];
            }
        }
        const std::size_t n = w.sample_size() / k;
        const View<T>&gx = backward ? c.in_grad[0] : View<T>{}, &gw = backward ? c.in_grad[1] : View<T>{};
        c.for_each_row([&](std::size_t r) {
            const std::size_t matrix = (r % matrices) * k * n;
            const T* xr = x.data + r * k;
            const T* wr = w.data + matrix;
            if (!backward) {
                T* y = c.out.data + r * n;
                if (!addend_) std::fill_n(y, n, T(0));
                if (transpose_)  // y[j] += x . W[j, :]
                    for (std::size_t j = 0; j < n; ++j) y[j] += dot(xr, wr + j * k, k);
                else  // y += x[i] W[i, :]
                    for (std::size_t i = 0; i < k; ++i) add_scaled(y, xr[i], wr + i * n, n);
                return;
            }
            const T* g = c.out_grad.data + r * n;
            if (gx) {
                T* dx = gx.data + r * k;
                if (transpose_)  // dx += g[j] W[j, :]
                    for (std::size_t j = 0; j < n; ++j) add_scaled(dx, g[j], wr + j * k, k);
                else  // dx[i] += g . W[i, :]
                    for (std::size_t i = 0; i < k; ++i) dx[i] += dot(g, wr + i * n, n);
            }
            if (gw) {
                T* dw = gw.data + matrix;
                if (transpose_)  // dW[j, :] += g[j] x
                    for (std::size_t j = 0; j < n; ++j) add_scaled(dw + j * k, g[j], xr, k);
                else  // dW[i, :] += x[i] g
                    for (std::size_t i = 0; i < k; ++i) add_scaled(dw + i * n, xr[i], g, n);
            }
        });
        return true;
    }
    // Written lane by lane so that the compiler vectorizes them without reassociating on its own.
    template <class T>
    static T dot(const T* a, const T* b, std::size_t n) {
        constexpr std::size_t lanes = 16;
        T acc[lanes] = {};
        std::size_t i = 0;
        for (; i + lanes <= n; i += lanes)
            for (std::size_t l = 0; l < lanes; ++l) acc[l] += a[i + l] * b[i + l];
        T sum = 0;
        for (; i < n; ++i) sum += a[i] * b[i];
        for (std::size_t l = 0; l < lanes; ++l) sum += acc[l];
        return sum;
    }
    template <class T>
    static void add_scaled(T* y, T a, const T* x, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
    }

    // Calls f(m, n, k, x, w, y) for each product: once when the right operand is static, else once
    // per dynamic position (with the dynamic dims broadcast between the operands).
    template <class T, class F>
    void for_each_product(const OpCall<T>& c, F&& f) const {
        const View<const T>&x = c.in[0], &w = c.in[1];
        const std::size_t k = x.dims[x.dims.rank - 1];
        const std::size_t n = w.sample_size() / k;
        if (w.dyn == 0) {
            f(x.size() / k, n, k, x.data, w.data, const_cast<T*>(c.out.data));
            return;
        }
        // One product per dynamic position of the output; rows per position come from x's sample.
        const std::size_t m = x.sample_size() / k;
        Dims pos;
        for (std::size_t i = 0; i < c.out.dyn; ++i) pos.push_back(c.out.dims[i]);
        View<const T> xr{x.data, {}, x.dyn}, wr{w.data, {}, w.dyn};
        for (std::size_t i = 0; i < x.dyn; ++i) xr.dims.push_back(x.dims[i]);
        for (std::size_t i = 0; i < w.dyn; ++i) wr.dims.push_back(w.dims[i]);
        const auto plan = detail::plan_broadcast<const T, 2>(pos, pos.rank, {xr, wr});
        T* y = const_cast<T*>(c.out.data);
        const std::size_t ys = c.out.sample_size(), xs = x.sample_size(), ws = w.sample_size();
        detail::for_each_broadcast(plan, [&](std::size_t p, const std::array<std::size_t, 2>& idx) {
            f(m, n, k, x.data + idx[0] * xs, w.data + idx[1] * ws, y + p * ys);
        });
    }

    bool transpose_, addend_;
};

}  // namespace

int plain_product_addends(const Op& op) {
    const auto* t = dynamic_cast<const Times*>(&op);
    return t && !t->transposed() ? t->addends() : -1;
}

Variable times(const Variable& x, const Variable& w, const std::string& name) {
    static const auto op = std::make_shared<const Times>(false, false);
    return Variable(apply_op(op, {x.node(), w.node()}, name));
}

Variable times_transpose(const Variable& a, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const Times>(true, false);
    return Variable(apply_op(op, {a.node(), b.node()}, name));
}

Variable affine(const Variable& x, const Variable& w, const Variable& b, const std::string& name) {
    static const auto op = std::make_shared<const Times>(false, true);
    return Variable(apply_op(op, {x.node(), w.node(), b.node()}, name));
}

}  // namespace loom
