#include "core/gemm.hpp"

#include <atomic>
#include <chrono>

#include <cblas.h>

namespace loom {

namespace {
std::atomic<bool> timing_on{false};
std::atomic<long long> timing_ns{0};

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

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
    cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c,
                i(ldc));
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
          std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    GemmTimer timer;
    cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c,
                i(ldc));
}

void gemm_timing(bool on) { timing_on = on; }
double gemm_seconds() { return static_cast<double>(timing_ns.load()) * 1e-9; }
void gemm_reset_timing() { timing_ns = 0; }

void set_blas_threads(int n) { openblas_set_num_threads(n); }

}  // namespace loom
