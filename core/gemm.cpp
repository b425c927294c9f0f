#include "core/gemm.hpp"

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cblas.h>
#include <dlfcn.h>

#include "core/errors.hpp"
#include "core/packed_gemm.hpp"
#include "core/parallel.hpp"

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

// loom's own blocked GEMM (core/blocked_gemm.cpp) on AVX-512 when OpenBLAS has no AVX-512 kernels
// for this CPU (0.3.21 gives Intel's family 6 model 207 Xeons its Prescott kernels, on which loom's
// ran the QA shapes 5x faster), unless OpenBLAS is to run several threads inside each GEMM. Where
// OpenBLAS picks AVX-512 kernels (Cooperlake on AMD Zen 5) they beat loom's by ~20 % at these
// shapes, and OpenBLAS runs the products. LOOM_GEMM=loom or LOOM_GEMM=openblas overrides the
// choice. Shapes whose n is under one panel (a matrix times a vector) or that are tiny stay with
// OpenBLAS: packing would cost more than it saves.
enum class GemmChoice { automatic, loom, openblas };

GemmChoice gemm_choice() {
    static const GemmChoice choice = [] {
        const char* env = std::getenv("LOOM_GEMM");
        if (!env || !*env || std::strcmp(env, "auto") == 0) return GemmChoice::automatic;
        if (std::strcmp(env, "loom") == 0) return GemmChoice::loom;
        if (std::strcmp(env, "openblas") == 0) return GemmChoice::openblas;
        throw UserError(std::string("LOOM_GEMM=") + env + ": expected auto, loom or openblas");
    }();
    return choice;
}

bool blas_has_avx512() {
    static const bool has = openblas_core_has_avx512(openblas_get_corename());
    return has;
}

bool own_kernels() {
    if (active_isa() != Isa::avx512 || blas_threads.load(std::memory_order_relaxed) > 1) return false;
    switch (gemm_choice()) {
        case GemmChoice::loom:
            return true;
        case GemmChoice::openblas:
            return false;
        case GemmChoice::automatic:
            break;
    }
    return !blas_has_avx512();
}

std::atomic<int> precision{static_cast<int>(MatmulPrecision::highest)};

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

namespace {
void one_thread(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
    if (gemm_own_kernels(m, n, k))
        return gemm_blocked(Isa::avx512, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c,
                i(ldc));
}

void one_thread(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
                std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
    if (own_kernels() && own_shape(m, n, k))
        return gemm_blocked(Isa::avx512, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c,
                i(ldc));
}

// A product is split by columns only where that is known to keep the bits: loom's kernels, and
// OpenBLAS's AVX-512 cores. OpenBLAS's Haswell/Zen sgemm run on one thread sums a row-major
// product's columns differently with the number of columns in the call (split at 32 or at 512
// columns of [64 x 256] x [256 x 1024], about 4 % of the elements differ in the last bit), while
// parts of its rows at multiples of 12 give the bits of the whole (every transposition, m from 100
// to 997, n and k from 64 to 1024). There a product is split by rows only.
bool columns_split_exactly() { return own_kernels() || bf16_products() || blas_has_avx512(); }

template <class T>
void split_or_one(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
                  std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
    // Only where OpenBLAS runs one thread per call (as set_inter_op_threads(n > 1) sets it): its
    // threaded products partition the work by its own sizes, and a part then need not sum as the
    // whole would (seen with dgemm at 2 OpenBLAS threads).
    const bool one_blas_thread = blas_threads.load(std::memory_order_relaxed) == 1;
    const auto columns = [&](std::size_t j0, std::size_t j1) {
        one_thread(trans_a, trans_b, m, j1 - j0, k, alpha, a, lda, trans_b ? b + j0 * ldb : b + j0, ldb, beta, c + j0,
                   ldc);
    };
    const auto rows = [&](std::size_t i0, std::size_t i1) {
        one_thread(trans_a, trans_b, i1 - i0, n, k, alpha, trans_a ? a + i0 : a + i0 * lda, lda, b, ldb, beta,
                   c + i0 * ldc, ldc);
    };
    const bool by_columns = n >= m && columns_split_exactly();
    const bool split = one_blas_thread && (by_columns ? share_range(n, 32, m * k, kSplitGemmWork, columns)
                                                      : share_range(m, 12, n * k, kSplitGemmWork, rows));
    if (!split) one_thread(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}  // namespace

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
          std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    GemmTimer timer;
    split_or_one(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
          std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    GemmTimer timer;
    split_or_one(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool gemm_own_kernels(std::size_t m, std::size_t n, std::size_t k) {
    return (own_kernels() || bf16_products()) && own_shape(m, n, k);
}

void set_matmul_precision(MatmulPrecision p) { precision = static_cast<int>(p); }

MatmulPrecision matmul_precision() { return static_cast<MatmulPrecision>(precision.load(std::memory_order_relaxed)); }

MatmulPrecisionScope::MatmulPrecisionScope(MatmulPrecision p) : before_(matmul_precision()) { set_matmul_precision(p); }

MatmulPrecisionScope::~MatmulPrecisionScope() { set_matmul_precision(before_); }

namespace {
// The choice set by set_bf16_products; -1 until then, when LOOM_BF16_PRODUCTS gives it.
std::atomic<int> bf16_choice_set{-1};

Bf16Products bf16_choice_of_environment() {
    static const Bf16Products choice = [] {
        const char* env = std::getenv("LOOM_BF16_PRODUCTS");
        if (!env || !*env) return Bf16Products::automatic;
        try {
            return parse_bf16_products(env);
        } catch (const UserError&) {
            throw UserError(std::string("LOOM_BF16_PRODUCTS=") + env + ": expected auto, on or off");
        }
    }();
    return choice;
}

// Measured once, by the first thread to ask (the others wait for it); the kernels are called
// directly, never through bf16_products(), so the measurement cannot wait for itself.
struct Bf16Measurement {
    double speedup = 0;
    bool pays = false;
};

const Bf16Measurement& bf16_measurement() {
    static const Bf16Measurement measured = [] {
        Bf16Measurement out;
        if (!cpu_supports_bf16()) return out;
        const GemmRates rates = gemm_blocked_rates();
        out.speedup = rates.bf16_gflops / rates.float_gflops;
        out.pays = bf16_products_pay(rates.float_gflops, rates.bf16_gflops);
        return out;
    }();
    return measured;
}
}  // namespace

bool bf16_products() {
    // Not where OpenBLAS is asked for (LOOM_GEMM=openblas) or runs several threads per product:
    // the bfloat16 kernels are loom's own, one thread per call as loom's float ones.
    return matmul_precision() == MatmulPrecision::medium && gemm_choice() != GemmChoice::openblas &&
           blas_threads.load(std::memory_order_relaxed) <= 1 && bf16_kernels_chosen();
}

bool bf16_kernels_chosen() {
    if (active_isa() != Isa::avx512 || !cpu_supports_bf16()) return false;
    switch (bf16_products_setting()) {
        case Bf16Products::always:
            return true;
        case Bf16Products::never:
            return false;
        case Bf16Products::automatic:
            break;
    }
    return bf16_measurement().pays;
}

void set_bf16_products(Bf16Products choice) { bf16_choice_set = static_cast<int>(choice); }

Bf16Products bf16_products_setting() {
    const int set = bf16_choice_set.load(std::memory_order_relaxed);
    return set < 0 ? bf16_choice_of_environment() : static_cast<Bf16Products>(set);
}

Bf16ProductsScope::Bf16ProductsScope(Bf16Products choice) : before_(bf16_products_setting()) {
    set_bf16_products(choice);
}

Bf16ProductsScope::~Bf16ProductsScope() { set_bf16_products(before_); }

const char* bf16_products_name(Bf16Products choice) {
    switch (choice) {
        case Bf16Products::always:
            return "on";
        case Bf16Products::never:
            return "off";
        case Bf16Products::automatic:
            break;
    }
    return "auto";
}

Bf16Products parse_bf16_products(std::string_view name) {
    for (Bf16Products choice : {Bf16Products::automatic, Bf16Products::always, Bf16Products::never})
        if (name == bf16_products_name(choice)) return choice;
    throw UserError("unknown choice of bfloat16 products '" + std::string(name) + "': expected auto, on or off");
}

bool bf16_products_pay(double float_rate, double bf16_rate) {
    return float_rate > 0 && bf16_rate >= kBf16MinSpeedup * float_rate;
}

double bf16_speedup() { return bf16_measurement().speedup; }

const char* matmul_precision_name(MatmulPrecision p) { return p == MatmulPrecision::medium ? "medium" : "highest"; }

MatmulPrecision parse_matmul_precision(std::string_view name) {
    for (MatmulPrecision p : {MatmulPrecision::highest, MatmulPrecision::medium})
        if (name == matmul_precision_name(p)) return p;
    throw UserError("unknown matmul precision '" + std::string(name) + "': expected highest or medium");
}

bool gemm_rows_in_place(std::size_t m, std::size_t n, std::size_t k) {
    if (active_isa() != Isa::avx512 || blas_threads.load(std::memory_order_relaxed) > 1) return false;
    return gemm_choice() != GemmChoice::openblas && own_shape(m, n, k);
}

bool openblas_core_has_avx512(std::string_view core) {
    // OpenBLAS 0.3.21's DYNAMIC_ARCH cores with AVX-512 GEMM kernels (it gives AMD Zen 5 Cooperlake).
    for (std::string_view name : {"skylakex", "cooperlake", "sapphirerapids"}) {
        if (core.size() != name.size()) continue;
        bool same = true;
        for (std::size_t j = 0; j < name.size(); ++j)
            same = same && std::tolower(static_cast<unsigned char>(core[j])) == name[j];
        if (same) return true;
    }
    return false;
}

void gemm_timing(bool on) { timing_on = on; }
double gemm_seconds() { return static_cast<double>(timing_ns.load()) * 1e-9; }
void gemm_reset_timing() { timing_ns = 0; }

void set_blas_threads(int n) {
    blas_threads = n;
    openblas_set_num_threads(n);
    // OpenBLAS starts its threads when it is loaded (one per core but the caller's), and each spins,
    // calling sched_yield, for about a tenth of a second after its last task: told one thread, they
    // stay and spin. On two cores that spinning took a core from loom's second thread: a small GPT's
    // 8 streams drew 18,000 characters/s on 2 threads against 32,000 on 1 (Zen 4; 34,000 on 2 with
    // OPENBLAS_NUM_THREADS=1). Its pthread builds export blas_thread_shutdown_ (what OpenBLAS runs
    // at fork), which joins them; OpenBLAS starts them again at its next call with several threads.
    if (n == 1)
        if (auto shutdown = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"))) shutdown();
}

std::string gemm_kernels() {
    if (bf16_products()) return "loom-avx512-bf16";
    if (own_kernels()) return "loom-avx512";
    return std::string("openblas-") + openblas_get_corename();
}

}  // namespace loom
