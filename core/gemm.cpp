#include "core/gemm.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cblas.h>

#include "core/errors.hpp"
#include "core/packed_gemm.hpp"

namespace loom {

namespace {
std::atomic<bool> timing_on{false};
std::atomic<long long> timing_ns{0};

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// 0 until set_blas_threads is called: OpenBLAS then runs with its own default.
std::atomic<int> blas_threads{0};

// loom's own blocked GEMM (core/blocked_gemm.cpp) on AVX-512, where it beats OpenBLAS 0.3.21 by
// 2x or more (bench/README.md), unless OpenBLAS is to run several threads inside each GEMM or
// LOOM_GEMM=openblas asks for it. Shapes whose n is under one panel (a matrix times a vector) or
// that are tiny stay with OpenBLAS: packing would cost more than it saves.
bool own_kernels() {
    static const bool allowed = [] {
        const char* env = std::getenv("LOOM_GEMM");
        if (!env || !*env || std::strcmp(env, "loom") == 0) return true;
        if (std::strcmp(env, "openblas") == 0) return false;
        throw UserError(std::string("LOOM_GEMM=") + env + ": expected loom or openblas");
    }();
    return allowed && active_isa() == Isa::avx512 && blas_threads.load(std::memory_order_relaxed) <= 1;
}

bool own_shape(std::size_t m, std::size_t n, std::size_t k) { return n >= 16 && m * n * k >= (std::size_t{1} << 15); }

CBLAS_TRANSPOSE op(bool t) { return t ? CblasTrans : CblasNoTrans; }
blasint i(std::size_t v) { return static_cast<blasint>(v); }
}  // namespace

GemmTimer::GemmTimer() : on_(timing_on.load(std::memory_order_relaxed)) {
    if (on_) start_ns_ = now_ns();
}
GemmTimer::~GemmTimer() {
    if (on_) timing_ns += now_ns() - start_ns_;
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
          std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    GemmTimer timer;
    if (own_kernels() && own_shape(m, n, k))
        return gemm_blocked(Isa::avx512, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c,
                i(ldc));
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
          std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    GemmTimer timer;
    if (own_kernels() && own_shape(m, n, k))
        return gemm_blocked(Isa::avx512, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c,
                i(ldc));
}

bool gemm_own_kernels(std::size_t m, std::size_t n, std::size_t k) { return own_kernels() && own_shape(m, n, k); }

void gemm_timing(bool on) { timing_on = on; }
double gemm_seconds() { return static_cast<double>(timing_ns.load()) * 1e-9; }
void gemm_reset_timing() { timing_ns = 0; }

void set_blas_threads(int n) {
    blas_threads = n;
    openblas_set_num_threads(n);
}

std::string gemm_kernels() {
    if (own_kernels()) return "loom-avx512";
    return std::string("openblas-") + openblas_get_corename();
}

}  // namespace loom
