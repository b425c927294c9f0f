#include "core/multiply.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/gemm.hpp"
#include "core/packed_gemm.hpp"
#include "core/quantized_gemm.hpp"

namespace loom {

const char* multiply_way_name(MultiplyWay way) {
    switch (way) {
        case MultiplyWay::packed_weight:
            return "packed_weight";
        case MultiplyWay::real_rows_in_place:
            return "real_rows_in_place";
        case MultiplyWay::real_rows_gathered:
            return "real_rows_gathered";
        case MultiplyWay::item_vectors:
            return "item_vectors";
        case MultiplyWay::gemm:
            return "gemm";
    }
    return "unknown";
}

namespace {

// How many positions hold elements: all of them, or none when their blocks are empty.
std::size_t count(const Dims& positions, std::size_t block) { return block == 0 ? 0 : positions.size(); }

// Calls f(r) for each position of y to compute: the real ones of a padded batch, else every one.
template <class T, class F>
void for_each_position(const Product<T>& p, F&& f) {
    if (p.padded) {
        for (std::size_t r : p.real) f(r);
    } else {
        for (std::size_t r = 0, n = count(p.positions, p.m * p.n); r < n; ++r) f(r);
    }
}

// The ways that add into a gradient in several parts, where it is to be assigned
// (Product::assign_dx, assign_dw): zeroed first, then added into.
template <class T>
void zero_assigned(const Product<T>& p, T* dx, T* dw) {
    if (dx && p.assign_dx) std::fill_n(dx, p.x_positions.size() * p.m * p.k, T(0));
    if (dw && p.assign_dw) std::fill_n(dw, p.w_positions.size() * p.k * p.n, T(0));
}

// ---- The choice ----

// A step of a loop with a static W: the packed kernels, when they are vectorized on this CPU.
template <class T>
bool loop_step(const Product<T>& p) {
    // A weight kept narrower than float is read by these kernels alone (their portable loop too).
    return p.loop && p.x_positions.rank >= 1 && p.w_positions.rank == 0 &&
           (packed_gemm_vectorized() || p.loop->weights != WeightPrecision::float32);
}

// A padded batch times a static W with few enough real rows: not when nearly every row is real,
// where visiting the real ones alone costs more in copies than the padding's FLOPs.
template <class T>
bool few_real_rows(const Product<T>& p) {
    if (p.w_positions.rank != 0 || p.x_positions.rank == 0 || !p.padded) return false;
    return p.real.size() * 8 <= count(p.x_positions, p.m * p.k) * 7;
}

// One row per item times the item's own matrix: W's positions are the trailing ones of x's (as
// many as W has: W may be one matrix per sequence for every step, [N] against x's [T, N]), and y's
// positions are x's. `matrices` (when given) is set to how many matrices W holds.
template <class T>
bool item_form(const Product<T>& p, std::size_t* matrices = nullptr) {
    const Dims &x = p.x_positions, &w = p.w_positions;
    if (w.rank == 0 || w.rank > x.rank || p.m * p.k != p.k || p.positions.rank != x.rank) return false;
    std::size_t held = 1;
    for (std::size_t i = 0; i < x.rank; ++i) {
        if (p.positions[i] != x[i]) return false;
        if (i + w.rank >= x.rank) {
            if (w[i + w.rank - x.rank] != x[i]) return false;
            held *= x[i];
        }
    }
    if (matrices) *matrices = held;
    return true;
}

}  // namespace

template <class T>
MultiplyWay multiply_way(const Product<T>& p, AddendForm addend) {
    if (loop_step(p)) return MultiplyWay::packed_weight;
    if (few_real_rows(p)) {
        // loom's kernels add a bias row themselves; another addend goes through the gathered block.
        const bool in_place = addend == AddendForm::none || addend == AddendForm::row;
        return in_place && gemm_rows_in_place(p.real.size() * p.m, p.n, p.k) ? MultiplyWay::real_rows_in_place
                                                                             : MultiplyWay::real_rows_gathered;
    }
    return item_form(p) ? MultiplyWay::item_vectors : MultiplyWay::gemm;
}

template <class T>
MultiplyWay multiply_backward_way(const Product<T>& p, bool dx, bool dw) {
    // In a loop dW is taken after the loop, in bulk: a step computes dX only.
    if (dx && !dw && loop_step(p)) return MultiplyWay::packed_weight;
    if (few_real_rows(p))
        return gemm_rows_in_place(p.real.size() * p.m, p.n, p.k) ? MultiplyWay::real_rows_in_place
                                                                 : MultiplyWay::real_rows_gathered;
    return item_form(p) ? MultiplyWay::item_vectors : MultiplyWay::gemm;
}

namespace {

// ---- packed_weight: a loop's step ----

// The rows of a step where they lie: forward, x's, y's and the addend's; backward, dY's and dX's.
// The calling thread's lists, reused from step to step: nothing is allocated per step once warm.
template <class T>
struct StepRows {
    std::vector<const T*> x, gy, d;
    std::vector<T*> y, gx;
};

template <class T>
StepRows<T>& step_rows(const Product<T>& p, const Addend<T>* addend, const T* dy, T* dx) {
    thread_local StepRows<T> r;
    r.x.clear();
    r.y.clear();
    r.gy.clear();
    r.gx.clear();
    r.d.clear();
    const bool by_rows = addend && (addend->form == AddendForm::row || addend->form == AddendForm::rows);
    const bool one_row = by_rows && addend->form == AddendForm::row;
    for_each_position(p, [&](std::size_t s) {
        for (std::size_t i = s * p.m; i < (s + 1) * p.m; ++i) {
            if (dy) {
                r.gy.push_back(dy + i * p.n);
                r.gx.push_back(dx + i * p.k);
            } else {
                r.x.push_back(p.x + i * p.k);
                r.y.push_back(p.y + i * p.n);
                if (by_rows) r.d.push_back(addend->data + (one_row ? 0 : i * p.n));
            }
        }
    });
    return r;
}

// op(W) [k, n] packed for forward, or its transpose [n, k] for dX, at the loop's first step (W is
// stored [k, n], or [n, k] when transposed).
template <class T>
const T* packed_weight(const Product<T>& p, bool for_dx) {
    return pack_right_once(*p.loop, p.transposed != for_dx, for_dx ? p.n : p.k, for_dx ? p.k : p.n, p.w,
                           p.transposed ? p.k : p.n);
}

// A fixed float weight read in bfloat16 or int8 (LoopCache::weights): op(W) [k, n] kept so at the
// first call, then the same for every later one.
inline const QuantizedWeight& quantized_weight(const Product<float>& p) {
    if (!p.loop->quantized) {
        auto q = std::make_shared<QuantizedWeight>();
        quantize_right(p.loop->weights, p.transposed, p.k, p.n, p.w, p.transposed ? p.k : p.n, *q);
        if (p.loop->widen_int8 && q->precision == WeightPrecision::int8) widen_int8(*q);
        p.loop->quantized = std::move(q);
    }
    return *p.loop->quantized;
}

// step_forward's products through a weight kept narrower than float.
inline void quantized_step_forward(const Product<float>& p, const Addend<float>& a, StepRows<float>& r) {
    const QuantizedWeight& w = quantized_weight(p);
    const std::size_t m = r.x.size();
    if (a.form == AddendForm::none) {
        gemm_rows_quantized(m, p.n, p.k, r.x.data(), w, r.y.data(), 1.0f, 0.0f);
    } else if (a.form != AddendForm::broadcast) {
        gemm_rows_quantized(m, p.n, p.k, r.x.data(), w, r.y.data(), 1.0f, 1.0f, r.d.data());
    } else {
        a.write();
        gemm_rows_quantized(m, p.n, p.k, r.x.data(), w, r.y.data(), 1.0f, 1.0f);
    }
}

template <class T>
void step_forward(const Product<T>& p, const Addend<T>& a) {
    StepRows<T>& r = step_rows<T>(p, &a, nullptr, nullptr);
    if constexpr (std::is_same_v<T, float>)
        if (p.loop->weights != WeightPrecision::float32) return quantized_step_forward(p, a, r);
    const T* w = packed_weight(p, false);
    if (a.form == AddendForm::none) {
        gemm_rows<T>(r.x.size(), p.n, p.k, r.x.data(), w, r.y.data(), false);
    } else if (a.form != AddendForm::broadcast) {  // the kernel adds each row's addend where it lies
        gemm_rows_add<T>(r.x.size(), p.n, p.k, r.x.data(), w, r.d.data(), r.y.data());
    } else {
        a.write();
        gemm_rows<T>(r.x.size(), p.n, p.k, r.x.data(), w, r.y.data(), true);
    }
}

template <class T>
void step_backward(const Product<T>& p, const T* dy, T* dx) {  // dX += dY W^T, this step's rows
    StepRows<T>& r = step_rows<T>(p, nullptr, dy, dx);
    const T* wt = packed_weight(p, true);
    gemm_rows<T>(r.gy.size(), p.k, p.n, r.gy.data(), wt, r.gx.data(), true);
}

// ---- real_rows_*: the real rows of a padded batch times a static W ----

// The first row of each real position's block of m rows.
template <class T>
const std::vector<std::size_t>& real_blocks(const Product<T>& p) {
    thread_local std::vector<std::size_t> blocks;
    blocks.resize(p.real.size());
    for (std::size_t b = 0; b < p.real.size(); ++b) blocks[b] = p.real[b] * p.m;
    return blocks;
}

// The real rows of an operand of row width `width`, where they lie, in the blocks' order.
template <class P>
void real_rows(const std::vector<std::size_t>& blocks, std::size_t m, P* base, std::size_t width,
               std::vector<P*>& out) {
    out.clear();
    for (std::size_t b : blocks)
        for (std::size_t r = 0; r < m; ++r) out.push_back(base + (b + r) * width);
}

// The gathered block <- the real rows of `from` (row width `width`), and back, or back adding.
template <class T>
void gather(const std::vector<std::size_t>& blocks, std::size_t m, const T* from, T* to, std::size_t width) {
    const std::size_t len = m * width;
    for (std::size_t b = 0; b < blocks.size(); ++b) std::copy_n(from + blocks[b] * width, len, to + b * len);
}
template <class T>
void scatter(const std::vector<std::size_t>& blocks, std::size_t m, const T* from, T* to, std::size_t width) {
    const std::size_t len = m * width;
    for (std::size_t b = 0; b < blocks.size(); ++b) std::copy_n(from + b * len, len, to + blocks[b] * width);
}
template <class T>
void scatter_add(const std::vector<std::size_t>& blocks, std::size_t m, const T* from, T* to, std::size_t width) {
    const std::size_t len = m * width;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        T* dst = to + blocks[b] * width;
        const T* src = from + b * len;
        for (std::size_t j = 0; j < len; ++j) dst[j] += src[j];
    }
}

// Room for the gathered rows [rows, k] followed by [rows, max(k, n)].
template <class T>
T* gather_buffer(const Product<T>& p, std::size_t rows) {
    return p.scratch->get(rows * (p.k + std::max(p.k, p.n)));
}

// loom's own kernels read and write the real rows where they lie (gemm_blocked_rows): nothing is
// gathered or scattered. The kernel adds the bias row where the gathered way copies it into the
// rows first: the same sums. In backward dX is added into its rows as the blocks of the product
// are, not after the whole product.
template <class T>
void in_place_forward(const Product<T>& p, const T* bias) {
    thread_local std::vector<const T*> xs, biases;
    thread_local std::vector<T*> ys;
    const std::vector<std::size_t>& blocks = real_blocks(p);
    const std::size_t rows = blocks.size() * p.m;
    real_rows(blocks, p.m, p.x, p.k, xs);
    real_rows(blocks, p.m, p.y, p.n, ys);
    if (bias) biases.assign(rows, bias);  // the kernel adds the bias row to every row
    gemm_blocked_rows<T>(p.transposed, rows, p.n, p.k, T(1), xs.data(), p.w, p.transposed ? p.k : p.n,
                         bias ? T(1) : T(0), ys.data(), bias ? biases.data() : nullptr);
}

template <class T>
void in_place_backward(const Product<T>& p, const T* dy, T* dx, T* dw) {
    thread_local std::vector<const T*> gys, xs;
    thread_local std::vector<T*> gxs;
    const std::vector<std::size_t>& blocks = real_blocks(p);
    const std::size_t rows = blocks.size() * p.m;
    real_rows(blocks, p.m, dy, p.n, gys);
    if (dx) {  // dX += dY W^T (or =, assign_dx)
        real_rows(blocks, p.m, dx, p.k, gxs);
        gemm_blocked_rows<T>(!p.transposed, rows, p.k, p.n, T(1), gys.data(), p.w, p.transposed ? p.k : p.n,
                             p.beta_dx(), gxs.data());
    }
    if (dw) {  // dW += X^T dY, or dY^T X when W is stored transposed (or =, assign_dw)
        real_rows(blocks, p.m, p.x, p.k, xs);
        if (p.transposed)
            gemm_blocked_rows_tn<T>(p.n, p.k, rows, T(1), gys.data(), xs.data(), p.beta_dw(), dw, p.k);
        else
            gemm_blocked_rows_tn<T>(p.k, p.n, rows, T(1), xs.data(), gys.data(), p.beta_dw(), dw, p.n);
    }
}

// The real rows gathered into a block, one gemm(), the result scattered back. A bias row goes into
// the block's rows before the GEMM adds to them, and the rows are then copied out (the padding rows
// are the caller's); any other addend is written over the whole of y first (Addend::write).
template <class T>
void gathered_forward(const Product<T>& p, const Addend<T>& a) {
    const std::vector<std::size_t>& blocks = real_blocks(p);
    const std::size_t rows = blocks.size() * p.m;
    T* xp = gather_buffer(p, rows);
    T* yp = xp + rows * p.k;
    gather(blocks, p.m, p.x, xp, p.k);
    const bool bias = a.form == AddendForm::row;
    if (bias)
        for (std::size_t r = 0; r < rows; ++r) std::copy_n(a.data, p.n, yp + r * p.n);
    gemm(false, p.transposed, rows, p.n, p.k, T(1), xp, p.k, p.w, p.transposed ? p.k : p.n, bias ? T(1) : T(0), yp,
         p.n);
    if (bias || a.form == AddendForm::none) {
        scatter(blocks, p.m, yp, p.y, p.n);
    } else {
        a.write();
        scatter_add(blocks, p.m, yp, p.y, p.n);
    }
}

template <class T>
void gathered_backward(const Product<T>& p, const T* dy, T* dx, T* dw) {
    const std::vector<std::size_t>& blocks = real_blocks(p);
    const std::size_t rows = blocks.size() * p.m;
    T* xp = gather_buffer(p, rows);
    T* gp = xp + rows * p.k;
    gather(blocks, p.m, dy, gp, p.n);
    if (dx) {  // dX = dY W^T on the real rows, in xp as scratch
        gemm(false, !p.transposed, rows, p.k, p.n, T(1), gp, p.n, p.w, p.transposed ? p.k : p.n, T(0), xp, p.k);
        if (p.assign_dx)
            scatter(blocks, p.m, xp, dx, p.k);
        else
            scatter_add(blocks, p.m, xp, dx, p.k);
    }
    if (dw) {
        if (p.assign_dw && rows == 0) std::fill_n(dw, p.k * p.n, T(0));
        gather(blocks, p.m, p.x, xp, p.k);
        if (p.transposed)
            gemm(true, false, p.n, p.k, rows, T(1), gp, p.n, xp, p.k, p.beta_dw(), dw, p.k);
        else
            gemm(true, false, p.k, p.n, rows, T(1), xp, p.k, gp, p.n, p.beta_dw(), dw, p.n);
    }
}

// ---- item_vectors: one row per item times the item's own matrix ----

// Written lane by lane so that the compiler vectorizes them without reassociating on its own.
template <class T>
T dot(const T* a, const T* b, std::size_t n) {
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
void add_scaled(T* y, T a, const T* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// Each product is a vector times a small matrix, which a GEMM call spends most of its time setting
// up: dot products and row updates instead, over the positions to compute only.
template <class T>
void item_vectors_forward(const Product<T>& p, bool accumulate) {
    const std::size_t k = p.k, n = p.n;
    std::size_t matrices = 0;
    item_form(p, &matrices);
    for_each_position(p, [&](std::size_t r) {
        const T* x = p.x + r * k;
        const T* w = p.w + (r % matrices) * k * n;
        T* y = p.y + r * n;
        if (!accumulate) std::fill_n(y, n, T(0));
        if (p.transposed)  // y[j] += x . W[j, :]
            for (std::size_t j = 0; j < n; ++j) y[j] += dot(x, w + j * k, k);
        else  // y += x[i] W[i, :]
            for (std::size_t i = 0; i < k; ++i) add_scaled(y, x[i], w + i * n, n);
    });
}

template <class T>
void item_vectors_backward(const Product<T>& p, const T* dy, T* dx, T* dw) {
    const std::size_t k = p.k, n = p.n;
    std::size_t matrices = 0;
    item_form(p, &matrices);
    for_each_position(p, [&](std::size_t r) {
        const std::size_t matrix = (r % matrices) * k * n;
        const T* x = p.x + r * k;
        const T* w = p.w + matrix;
        const T* g = dy + r * n;
        if (dx) {
            T* gx = dx + r * k;
            if (p.transposed)  // dx += g[j] W[j, :]
                for (std::size_t j = 0; j < n; ++j) add_scaled(gx, g[j], w + j * k, k);
            else  // dx[i] += g . W[i, :]
                for (std::size_t i = 0; i < k; ++i) gx[i] += dot(g, w + i * n, n);
        }
        if (dw) {
            T* gw = dw + matrix;
            if (p.transposed)  // dW[j, :] += g[j] x
                for (std::size_t j = 0; j < n; ++j) add_scaled(gw + j * k, g[j], x, k);
            else  // dW[i, :] += x[i] g
                for (std::size_t i = 0; i < k; ++i) add_scaled(gw + i * n, x[i], g, n);
        }
    });
}

// ---- gemm: one product over every row, or one per position ----

// An operand's stride, in blocks, along each of y's positions: its own dims aligned with y's from
// the right, 0 where it has no such dim or a dim of 1 (broadcast).
std::array<std::size_t, max_rank> broadcast_strides(const Dims& operand, const Dims& positions) {
    std::array<std::size_t, max_rank> own{}, strides{};
    std::size_t s = 1;
    for (std::size_t i = operand.rank; i-- > 0;) {
        own[i] = s;
        s *= operand[i];
    }
    const long shift = static_cast<long>(positions.rank) - static_cast<long>(operand.rank);
    for (std::size_t j = 0; j < positions.rank; ++j) {
        const long i = static_cast<long>(j) - shift;
        strides[j] = (i < 0 || operand[static_cast<std::size_t>(i)] == 1) ? 0 : own[static_cast<std::size_t>(i)];
    }
    return strides;
}

// Calls f(m, x, w, y) for each product of m rows: once over every row of x when W is static, else
// once per position of y, in order. `y` is y's buffer or, backward, dY's (laid out alike).
template <class T, class Y, class F>
void for_each_product(const Product<T>& p, Y* y, F&& f) {
    if (p.w_positions.rank == 0) {
        f(p.x_positions.size() * p.m, p.x, p.w, y);
        return;
    }
    const Dims& pos = p.positions;
    const auto xs = broadcast_strides(p.x_positions, pos), ws = broadcast_strides(p.w_positions, pos);
    const std::size_t x_block = p.m * p.k, w_block = p.k * p.n, y_block = p.m * p.n;
    std::array<std::size_t, max_rank> counter{};
    std::size_t xi = 0, wi = 0;
    for (std::size_t o = 0, total = pos.size(); o < total; ++o) {
        f(p.m, p.x + xi * x_block, p.w + wi * w_block, y + o * y_block);
        for (std::size_t d = pos.rank; d-- > 0;) {  // the next position: xi and wi follow
            if (++counter[d] < pos[d]) {
                xi += xs[d];
                wi += ws[d];
                break;
            }
            xi -= xs[d] * (pos[d] - 1);
            wi -= ws[d] * (pos[d] - 1);
            counter[d] = 0;
        }
    }
}

template <class T>
void gemm_forward(const Product<T>& p, bool accumulate) {
    const std::size_t k = p.k, n = p.n;
    for_each_product(p, p.y, [&](std::size_t m, const T* x, const T* w, T* y) {
        gemm(false, p.transposed, m, n, k, T(1), x, k, w, p.transposed ? k : n, accumulate ? T(1) : T(0), y, n);
    });
}

template <class T>
void gemm_backward(const Product<T>& p, const T* dy, T* dx, T* dw) {
    const std::size_t k = p.k, n = p.n;
    // One product (a static W) writes the whole of dX and dW; products per position may reach a
    // block of either more than once (a broadcast operand), so an assigned gradient is zeroed first.
    const bool one = p.w_positions.rank == 0;
    if (!one) zero_assigned(p, dx, dw);
    const T beta_x = one ? p.beta_dx() : T(1), beta_w = one ? p.beta_dw() : T(1);
    for_each_product(p, dy, [&](std::size_t m, const T* x, const T* w, const T* g) {
        if (dx)  // dX[m, k] += dY[m, n] W^T  (W is [k, n], or [n, k] when transposed)
            gemm(false, !p.transposed, m, k, n, T(1), g, n, w, p.transposed ? k : n, beta_x, dx + (x - p.x), k);
        if (dw) {
            T* gw = dw + (w - p.w);
            if (p.transposed)  // dW[n, k] += dY^T X
                gemm(true, false, n, k, m, T(1), g, n, x, k, beta_w, gw, k);
            else  // dW[k, n] += X^T dY
                gemm(true, false, k, n, m, T(1), x, k, g, n, beta_w, gw, n);
        }
    });
}

}  // namespace

template <class T>
void multiply(const Product<T>& p, const Addend<T>& addend) {
    const bool added = addend.form != AddendForm::none;
    switch (multiply_way(p, addend.form)) {
        case MultiplyWay::packed_weight:
            return step_forward(p, addend);
        case MultiplyWay::real_rows_in_place:
            return in_place_forward(p, addend.form == AddendForm::row ? addend.data : nullptr);
        case MultiplyWay::real_rows_gathered:
            return gathered_forward(p, addend);
        case MultiplyWay::item_vectors:
            if (added) addend.write();
            return item_vectors_forward(p, added);
        case MultiplyWay::gemm:
            if (added) addend.write();
            return gemm_forward(p, added);
    }
}

template <class T>
void multiply_backward(const Product<T>& p, const T* dy, T* dx, T* dw) {
    if (!dx && !dw) return;
    switch (multiply_backward_way(p, dx != nullptr, dw != nullptr)) {
        case MultiplyWay::packed_weight:
            zero_assigned(p, dx, dw);
            return step_backward(p, dy, dx);
        case MultiplyWay::real_rows_in_place:
            return in_place_backward(p, dy, dx, dw);
        case MultiplyWay::real_rows_gathered:
            return gathered_backward(p, dy, dx, dw);
        case MultiplyWay::item_vectors:
            zero_assigned(p, dx, dw);
            return item_vectors_backward(p, dy, dx, dw);
        case MultiplyWay::gemm:
            return gemm_backward(p, dy, dx, dw);
    }
}

template MultiplyWay multiply_way(const Product<float>&, AddendForm);
template MultiplyWay multiply_way(const Product<double>&, AddendForm);
template MultiplyWay multiply_backward_way(const Product<float>&, bool, bool);
template MultiplyWay multiply_backward_way(const Product<double>&, bool, bool);
template void multiply(const Product<float>&, const Addend<float>&);
template void multiply(const Product<double>&, const Addend<double>&);
template void multiply_backward(const Product<float>&, const float*, float*, float*);
template void multiply_backward(const Product<double>&, const double*, double*, double*);

}  // namespace loom
