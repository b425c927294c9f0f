// The chooser of how to multiply (core/multiply.hpp) against a naive triple loop in double, in
// double and in float, on shapes meant for each of its ways -- a loop's packed weight, the real rows
// of a padded batch in place and gathered, per-item vectors, GEMM once or per position -- with a
// transposed right operand, every form of addend, broadcast positions and empty batches, under
// every instruction set this CPU runs (portable, AVX2, AVX-512). Each case names the way it is
// meant for, and the test checks that the chooser takes it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "core/cpu.hpp"
#include "core/gemm.hpp"
#include "core/multiply.hpp"
#include "core/packed_gemm.hpp"

namespace {

using loom::AddendForm;
using loom::Dims;
using loom::MultiplyWay;

struct Case {
    const char* what;
    MultiplyWay way;  // the way meant, on a CPU with AVX-512 where gemm() runs loom's kernels
    Dims positions, x_positions, w_positions;
    std::size_t m, k, n;
    bool transposed;
    bool padded;                    // only the positions in `real` are computed
    std::vector<std::size_t> real;  // the real positions, increasing
    bool loop = false;              // a step of a loop (a LoopCache is given)
    bool dw = true;                 // backward computes dW too (a loop's step computes dX only)
};

// The position of an operand with dims `own`, aligned right with y's `positions`, for y's position o.
std::size_t operand_position(const Dims& own, const Dims& positions, std::size_t o) {
    std::vector<std::size_t> index(positions.rank);
    for (std::size_t d = positions.rank; d-- > 0;) {
        index[d] = o % positions[d];
        o /= positions[d];
    }
    std::size_t at = 0;
    for (std::size_t d = 0; d < own.rank; ++d) {
        const std::size_t i = index[positions.rank - own.rank + d];
        at = at * own[d] + (own[d] == 1 ? 0 : i);
    }
    return at;
}

// What the case should take with this addend, backward or not, on the active instruction set.
MultiplyWay expected(const Case& cs, AddendForm addend, bool backward) {
    MultiplyWay way = cs.way;
    if (way == MultiplyWay::packed_weight && !loom::packed_gemm_vectorized())
        way = MultiplyWay::real_rows_gathered;  // every loop case here has few real rows
    if (way == MultiplyWay::real_rows_in_place || way == MultiplyWay::real_rows_gathered) {
        const bool own = loom::gemm_rows_in_place(cs.real.size() * cs.m, cs.n, cs.k);
        const bool addend_in_kernel = backward || addend == AddendForm::none || addend == AddendForm::row;
        way = own && addend_in_kernel ? MultiplyWay::real_rows_in_place : MultiplyWay::real_rows_gathered;
    }
    return way;
}

template <class T>
struct Run {
    const Case& cs;
    std::size_t positions, x_blocks, w_blocks;
    std::vector<T> x, w, addend, y0, dy, dx0, dw0;
    std::vector<bool> real;

    Run(const Case& c, std::mt19937& rng)
        : cs(c), positions(c.positions.size()), x_blocks(c.x_positions.size()), w_blocks(c.w_positions.size()) {
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        auto fill = [&](std::vector<T>& v, std::size_t size) {
            v.resize(size);
            for (T& e : v) e = static_cast<T>(u(rng));
        };
        fill(x, x_blocks * c.m * c.k);
        fill(w, w_blocks * c.k * c.n);
        fill(addend, positions * c.m * c.n);  // the rows form's; the row form reads its first n
        fill(y0, positions * c.m * c.n);
        fill(dy, positions * c.m * c.n);
        fill(dx0, x.size());
        fill(dw0, w.size());
        real.assign(positions, !c.padded);
        for (std::size_t r : c.real) real[r] = true;
        // A padding row's output gradient is zero (the executor's contract).
        for (std::size_t o = 0; o < positions; ++o)
            if (!real[o]) std::fill_n(dy.begin() + o * c.m * c.n, c.m * c.n, T(0));
    }

    double at_w(std::size_t block, std::size_t p, std::size_t j) const {  // op(W)[p, j]
        const T* b = w.data() + block * cs.k * cs.n;
        return cs.transposed ? b[j * cs.k + p] : b[p * cs.n + j];
    }
    // The addend's value at row i, column j of position o, in each form ([m, n] broadcast over the
    // positions for the broadcast form).
    double at_addend(AddendForm form, std::size_t o, std::size_t i, std::size_t j) const {
        switch (form) {
            case AddendForm::none:
                return 0;
            case AddendForm::row:
                return addend[j];
            case AddendForm::rows:
                return addend[(o * cs.m + i) * cs.n + j];
            case AddendForm::broadcast:
                return addend[i * cs.n + j];
        }
        return 0;
    }

    loom::Product<T> product(T* y, loom::LoopCache<T>& loop, loom::Workspace<T>& scratch) const {
        loom::Product<T> p;
        p.x = x.data();
        p.w = w.data();
        p.y = y;
        p.m = cs.m;
        p.k = cs.k;
        p.n = cs.n;
        p.transposed = cs.transposed;
        p.positions = cs.positions;
        p.x_positions = cs.x_positions;
        p.w_positions = cs.w_positions;
        p.padded = cs.padded;
        p.real = cs.real;
        p.loop = cs.loop ? &loop : nullptr;
        p.scratch = &scratch;
        return p;
    }

    // y = x op(W) + addend through the chooser; checks its way and the real rows against the loop.
    std::vector<T> forward(AddendForm form, double tolerance) const {
        std::vector<T> y = y0;
        loom::LoopCache<T> loop;
        loom::Workspace<T> scratch;
        const loom::Product<T> p = product(y.data(), loop, scratch);
        CHECK(std::string(loom::multiply_way_name(loom::multiply_way(p, form))) ==
              loom::multiply_way_name(expected(cs, form, false)));
        loom::Addend<T> a{form, addend.data(), [&] {
                              for (std::size_t o = 0; o < positions; ++o)
                                  for (std::size_t i = 0; i < cs.m; ++i)
                                      for (std::size_t j = 0; j < cs.n; ++j)
                                          y[(o * cs.m + i) * cs.n + j] = static_cast<T>(at_addend(form, o, i, j));
                          }};
        loom::multiply(p, a);
        double worst = 0;
        for (std::size_t o = 0; o < positions; ++o) {
            if (!real[o]) continue;  // padding: the caller zeroes it
            const std::size_t xo = operand_position(cs.x_positions, cs.positions, o);
            const std::size_t wo = operand_position(cs.w_positions, cs.positions, o);
            for (std::size_t i = 0; i < cs.m; ++i)
                for (std::size_t j = 0; j < cs.n; ++j) {
                    double want = at_addend(form, o, i, j);
                    for (std::size_t p2 = 0; p2 < cs.k; ++p2)
                        want += static_cast<double>(x[(xo * cs.m + i) * cs.k + p2]) * at_w(wo, p2, j);
                    worst = std::max(worst, std::abs(y[(o * cs.m + i) * cs.n + j] - want));
                }
        }
        CHECK(worst <= tolerance * static_cast<double>(cs.k + 1));
        return y;
    }

    // dX += dY op(W)^T and dW += x^T dY (dY^T x when transposed) through the chooser, against the loop.
    std::vector<T> backward(double tolerance) const {
        std::vector<T> dx = dx0, dw = dw0;
        loom::LoopCache<T> loop;
        loom::Workspace<T> scratch;
        const loom::Product<T> p = product(nullptr, loop, scratch);
        CHECK(std::string(loom::multiply_way_name(loom::multiply_backward_way(p, true, cs.dw))) ==
              loom::multiply_way_name(expected(cs, AddendForm::none, true)));
        loom::multiply_backward(p, dy.data(), dx.data(), cs.dw ? dw.data() : nullptr);
        std::vector<double> want_dx(dx0.begin(), dx0.end()), want_dw(dw0.begin(), dw0.end());
        for (std::size_t o = 0; o < positions; ++o) {
            if (!real[o]) continue;  // its dY is zero
            const std::size_t xo = operand_position(cs.x_positions, cs.positions, o);
            const std::size_t wo = operand_position(cs.w_positions, cs.positions, o);
            for (std::size_t i = 0; i < cs.m; ++i)
                for (std::size_t j = 0; j < cs.n; ++j) {
                    const double g = dy[(o * cs.m + i) * cs.n + j];
                    for (std::size_t p2 = 0; p2 < cs.k; ++p2) {
                        want_dx[(xo * cs.m + i) * cs.k + p2] += g * at_w(wo, p2, j);
                        const std::size_t wi = cs.transposed ? j * cs.k + p2 : p2 * cs.n + j;
                        want_dw[wo * cs.k * cs.n + wi] += g * static_cast<double>(x[(xo * cs.m + i) * cs.k + p2]);
                    }
                }
        }
        double worst_dx = 0, worst_dw = 0;
        for (std::size_t e = 0; e < dx.size(); ++e) worst_dx = std::max(worst_dx, std::abs(dx[e] - want_dx[e]));
        for (std::size_t e = 0; e < dw.size(); ++e)
            worst_dw = std::max(worst_dw, std::abs(dw[e] - (cs.dw ? want_dw[e] : static_cast<double>(dw0[e]))));
        CHECK(worst_dx <= tolerance * static_cast<double>(cs.n + 1));
        CHECK(worst_dw <= tolerance * static_cast<double>(positions * cs.m + 1));
        dx.insert(dx.end(), dw.begin(), dw.end());
        return dx;
    }
};

// T = 6 steps of N = 4 sequences of lengths 6, 4, 3 and 1: 14 real positions of 24.
const std::vector<std::size_t> ragged = {0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 13, 16, 20};

std::vector<Case> cases() {
    using W = MultiplyWay;
    const std::vector<std::size_t> all, running = {1, 4}, fifteen = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
                                        items = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 13};
    return {
        // A loop's step: [N] rows of the sequences still running times a static W.
        {"loop step", W::packed_weight, {6}, {6}, {}, 1, 40, 48, false, true, {0, 2, 3, 5}, true, false},
        {"loop step, W^T, 3 rows each", W::packed_weight, {5}, {5}, {}, 3, 19, 33, true, true, running, true, false},
        // A padded batch [T, N] times a static W, big enough for loom's kernels where gemm() uses them.
        {"padded batch", W::real_rows_in_place, {6, 4}, {6, 4}, {}, 1, 64, 96, false, true, ragged},
        {"padded batch, W^T, 2 rows each", W::real_rows_in_place, {6, 4}, {6, 4}, {}, 2, 48, 80, true, true, ragged},
        // Too small for loom's kernels: gathered into a block for one gemm().
        {"padded batch, small W", W::real_rows_gathered, {6, 4}, {6, 4}, {}, 1, 5, 7, false, true, ragged},
        // Nearly every position real (15 of 16): one gemm() over every row, the padding's included.
        {"nearly full batch", W::gemm, {4, 4}, {4, 4}, {}, 1, 21, 17, false, true, fifteen},
        {"static operands, no batch", W::gemm, {}, {}, {}, 5, 9, 11, false, false, all},
        // One row per item times its own matrix: attention's q K^T and a V.
        {"one row per item, a matrix each", W::item_vectors, {5, 3}, {5, 3}, {5, 3}, 1, 20, 7, true, false, all},
        {"one row per item, a matrix per sequence", W::item_vectors, {5, 3}, {5, 3}, {3}, 1, 20, 7, false, true, items},
        // Several rows per item: one gemm() per position, W broadcast along T (its gradient summed).
        {"4 rows per item, W broadcast along T", W::gemm, {5, 3}, {5, 3}, {3}, 4, 6, 9, false, false, all},
        {"2 rows per item, x broadcast, W^T", W::gemm, {3}, {}, {3}, 2, 8, 5, true, false, all},
        // Empty batches (N = 0): nothing computed, nothing touched.
        {"empty padded batch", W::real_rows_gathered, {4, 0}, {4, 0}, {}, 1, 8, 16, false, true, all},
        {"empty batch of items", W::item_vectors, {5, 0}, {5, 0}, {0}, 1, 8, 6, false, false, all},
        {"empty batch, static W", W::gemm, {0}, {0}, {}, 2, 8, 6, true, false, all},
    };
}

template <class T>
void check_all(double tolerance) {
    const loom::Isa before = loom::active_isa();
    std::vector<std::vector<T>> loop_results;  // per instruction set: the loop cases' results
    for (loom::Isa isa : loom::supported_isas()) {
        loom::set_active_isa(isa);
        std::mt19937 rng(5);
        std::vector<T> loop_result;
        for (const Case& cs : cases()) {
            const Run<T> run(cs, rng);
            for (AddendForm form : {AddendForm::none, AddendForm::row, AddendForm::rows, AddendForm::broadcast}) {
                INFO(loom::isa_name(isa) << ": " << cs.what << ", addend " << static_cast<int>(form));
                const std::vector<T> y = run.forward(form, tolerance);
                if (cs.loop) loop_result.insert(loop_result.end(), y.begin(), y.end());
            }
            INFO(loom::isa_name(isa) << ": " << cs.what << ", backward");
            const std::vector<T> grads = run.backward(tolerance);
            if (cs.loop) loop_result.insert(loop_result.end(), grads.begin(), grads.end());
        }
        if (isa != loom::Isa::portable) loop_results.push_back(loop_result);
    }
    loom::set_active_isa(before);
    // AVX2 and AVX-512 make the packed kernels' FMAs in the same order: a loop's steps give the same
    // bits on either.
    for (const std::vector<T>& r : loop_results) CHECK(r == loop_results.front());
}

}  // namespace

TEST_CASE("multiply takes the way each shape is meant for and matches a triple loop, in double") {
    check_all<double>(1e-14);
}

TEST_CASE("multiply takes the way each shape is meant for and matches a triple loop, in float") {
    check_all<float>(2e-6);
}

TEST_CASE("multiply runs a padded batch in place exactly when AVX-512 is active (and LOOM_GEMM is not openblas)") {
    // With AVX-512 active (whether gemm() runs loom's kernels or OpenBLAS's AVX-512 ones), a padded
    // batch large enough goes in place through loom's kernels; with AVX2 or portable kernels it is
    // gathered for gemm().
    const loom::Isa before = loom::active_isa();
    const std::vector<Case> all = cases();
    const Case& cs = all[2];
    REQUIRE(cs.way == MultiplyWay::real_rows_in_place);
    for (loom::Isa isa : loom::supported_isas()) {
        loom::set_active_isa(isa);
        std::mt19937 rng(1);
        const Run<float> run(cs, rng);
        loom::LoopCache<float> loop;
        loom::Workspace<float> scratch;
        std::vector<float> y(run.y0);
        const MultiplyWay way = loom::multiply_way(run.product(y.data(), loop, scratch), AddendForm::row);
        INFO(loom::isa_name(isa) << ", gemm() runs " << loom::gemm_kernels());
        const char* gemm_env = std::getenv("LOOM_GEMM");  // openblas turns the way off
        const bool in_place = isa == loom::Isa::avx512 && !(gemm_env && std::string(gemm_env) == "openblas");
        CHECK(way == (in_place ? MultiplyWay::real_rows_in_place : MultiplyWay::real_rows_gathered));
    }
    loom::set_active_isa(before);
}
