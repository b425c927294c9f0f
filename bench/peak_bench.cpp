// The machine's limits for a model's step, measured in the same run as the engines (bench/compare):
// the FMA rate of one core with 512-bit and 256-bit vectors (12 independent FMA chains, enough
// to cover the latency on two ports), and the GEMM rate at a model's big shapes through OpenBLAS's
// sgemm (with whatever OPENBLAS_CORETYPE says), through loom::gemm (whichever kernels it chooses)
// and through loom's own blocked kernels of the active ISA (core/blocked_gemm.cpp), and through
// loom::gemm with bfloat16 operands (MatmulPrecision::medium, Bf16Products::always) where the CPU
// has them, with the speed-up of the bfloat16 kernels that medium's automatic choice measured
// (bf16_speedup) and the kernels medium runs with the choice in force (LOOM_BF16_PRODUCTS). The shapes:
// the QA model's four (LSTM input projection forward, its dX and dW, Dense forward), or a GPT's
// five (the attention's input projection forward, its dX and dW, the feed-forward's two products)
// at nanoGPT's CPU configuration (768 tokens a step, 128 wide) or the wide one (2,048 tokens,
// 384 wide). Prints one JSON line.
//
//   peak_bench [--seconds 0.3] [--reps 5] [--shapes qa|gpt|gpt-wide]
#include <cblas.h>
#include <immintrin.h>

#include <cstdio>
#include <string>
#include <vector>

#include <loom.hpp>

#include "bench_common.hpp"
#include "core/packed_gemm.hpp"

using namespace loom;

namespace {

volatile float seed = 1.0f;  // read at run time, so the chains cannot be folded

#define LOOM_FMA_CHAINS(V, set1, fma)                                                                                 \
    V a0 = set1(s), a1 = set1(s + 1), a2 = set1(s + 2), a3 = set1(s + 3), a4 = set1(s + 4), a5 = set1(s + 5),         \
      a6 = set1(s + 6), a7 = set1(s + 7), a8 = set1(s + 8), a9 = set1(s + 9), a10 = set1(s + 10), a11 = set1(s + 11); \
    const V m = set1(0.999999f), c = set1(1e-7f);                                                                     \
    for (long i = 0; i < n; ++i) {                                                                                    \
        a0 = fma(a0, m, c);                                                                                           \
        a1 = fma(a1, m, c);                                                                                           \
        a2 = fma(a2, m, c);                                                                                           \
        a3 = fma(a3, m, c);                                                                                           \
        a4 = fma(a4, m, c);                                                                                           \
        a5 = fma(a5, m, c);                                                                                           \
        a6 = fma(a6, m, c);                                                                                           \
        a7 = fma(a7, m, c);                                                                                           \
        a8 = fma(a8, m, c);                                                                                           \
        a9 = fma(a9, m, c);                                                                                           \
        a10 = fma(a10, m, c);                                                                                         \
        a11 = fma(a11, m, c);                                                                                         \
    }

__attribute__((target("avx512f"), noinline)) float chains512(long n) {
    const float s = seed;
    LOOM_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps)
    const __m512 t = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                   _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    // Stored and summed by hand: GCC 12's _mm512_reduce_add_ps warns inside its own header.
    alignas(64) float out[16];
    _mm512_store_ps(out, _mm512_add_ps(t, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11))));
    float sum = 0;
    for (float v : out) sum += v;
    return sum;
}

__attribute__((target("avx2,fma"), noinline)) float chains256(long n) {
    const float s = seed;
    LOOM_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps)
    const __m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                   _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    alignas(32) float out[8];
    _mm256_store_ps(out, _mm256_add_ps(t, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11))));
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
#undef LOOM_FMA_CHAINS

// Best of `reps` timings of f (each repeated until `seconds` have passed) as GFLOP/s for `flop` per call.
template <class F>
double rate(double flop, double seconds, int reps, F&& f) {
    f();
    double best = 0;
    for (int r = 0; r < reps; ++r) {
        long calls = 0;
        const double t0 = bench::wall_seconds();
        double t = t0;
        while (t - t0 < seconds) {
            f();
            ++calls;
            t = bench::wall_seconds();
        }
        best = std::max(best, flop * double(calls) / (t - t0) * 1e-9);
    }
    return best;
}

struct GemmShape {
    std::size_t m, n, k;
    bool ta, tb;
};

std::vector<GemmShape> shapes_of(const std::string& which) {
    if (which == "gpt")  // 4 x 128, block 64, batch 12
        return {{768, 384, 128, false, false},
                {768, 128, 384, false, true},
                {128, 384, 768, true, false},
                {768, 512, 128, false, false},
                {768, 128, 512, false, false}};
    if (which == "gpt-wide")  // 6 x 384, block 256, batch 8
        return {{2048, 1152, 384, false, false},
                {2048, 384, 1152, false, true},
                {384, 1152, 2048, true, false},
                {2048, 1536, 384, false, false},
                {2048, 384, 1536, false, false}};
    return {{960, 1200, 500, false, false},
            {960, 500, 1200, false, true},
            {500, 1200, 960, true, false},
            {960, 200, 600, false, false}};
}

// FLOPs over the time for all the shapes, each timed on its own: the rate a step made of them gets.
template <class G>
double gemm_rate(const std::vector<GemmShape>& shapes, double seconds, int reps, G&& g) {
    double flop = 0, time = 0;
    for (const GemmShape& s : shapes) {
        std::vector<float> a(s.m * s.k, 0.5f), b(s.k * s.n, 0.25f), c(s.m * s.n, 0.0f);
        const double f = 2.0 * double(s.m * s.n * s.k);
        const double gflops = rate(f, seconds, reps, [&] {
            g(s.ta, s.tb, s.m, s.n, s.k, a.data(), s.ta ? s.m : s.k, b.data(), s.tb ? s.k : s.n, c.data());
        });
        flop += f;
        time += f / (gflops * 1e9);
    }
    return flop / time * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
    double seconds = 0.3;
    int reps = 5;
    std::string which = "qa";
    CLI::App app{"FMA and GEMM rates of one core for a model step's bounds; prints one JSON line"};
    app.add_option("--seconds", seconds, "time per measurement")->capture_default_str();
    app.add_option("--reps", reps, "measurements per figure (the best is kept)")->check(bench::at_least(1));
    app.add_option("--shapes", which, "the products timed: the QA model's or a GPT's")
        ->capture_default_str()
        ->check(CLI::IsMember({"qa", "gpt", "gpt-wide"}));
    CLI11_PARSE(app, argc, argv);
    return bench::report_errors([&] {
        set_blas_threads(1);
        const long n = 2000000;
        const double fma512 =
            cpu_supports(Isa::avx512) ? rate(n * 12.0 * 16 * 2, seconds, reps, [&] { seed = chains512(n); }) : 0.0;
        const double fma256 =
            cpu_supports(Isa::avx2) ? rate(n * 12.0 * 8 * 2, seconds, reps, [&] { seed = chains256(n); }) : 0.0;
        const std::vector<GemmShape> shapes = shapes_of(which);
        const double openblas =
            gemm_rate(shapes, seconds, reps,
                      [](bool ta, bool tb, std::size_t m, std::size_t nn, std::size_t k, const float* a,
                         std::size_t lda, const float* b, std::size_t ldb, float* c) {
                          cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                                      int(m), int(nn), int(k), 1.0f, a, int(lda), b, int(ldb), 0.0f, c, int(nn));
                      });
        const double loom_gemm = gemm_rate(shapes, seconds, reps,
                                           [](bool ta, bool tb, std::size_t m, std::size_t nn, std::size_t k,
                                              const float* a, std::size_t lda, const float* b, std::size_t ldb,
                                              float* c) { gemm(ta, tb, m, nn, k, 1.0f, a, lda, b, ldb, 0.0f, c, nn); });
        const Isa isa = active_isa();
        const double loom_blocked =
            isa == Isa::portable
                ? 0.0
                : gemm_rate(shapes, seconds, reps,
                            [isa](bool ta, bool tb, std::size_t m, std::size_t nn, std::size_t k, const float* a,
                                  std::size_t lda, const float* b, std::size_t ldb, float* c) {
                                gemm_blocked(isa, ta, tb, m, nn, k, 1.0f, a, lda, b, ldb, 0.0f, c, nn);
                            });
        // loom::gemm again at MatmulPrecision::medium with the bfloat16 kernels forced: its operands
        // rounded (0 where the CPU has no AVX-512 BF16). And what medium runs as chosen.
        double loom_bf16 = 0.0;
        std::string medium_kernels;
        {
            const MatmulPrecisionScope medium(MatmulPrecision::medium);
            medium_kernels = gemm_kernels();  // automatic: measures bf16_speedup() here
            if (cpu_supports_bf16() && isa == Isa::avx512) {
                const Bf16ProductsScope always(Bf16Products::always);
                loom_bf16 = gemm_rate(shapes, seconds, reps,
                                      [](bool ta, bool tb, std::size_t m, std::size_t nn, std::size_t k, const float* a,
                                         std::size_t lda, const float* b, std::size_t ldb,
                                         float* c) { gemm(ta, tb, m, nn, k, 1.0f, a, lda, b, ldb, 0.0f, c, nn); });
            }
        }
        std::printf(
            "{\"bench\": \"peak\", \"shapes\": \"%s\", \"fma512_gflops\": %.2f, \"fma256_gflops\": %.2f, "
            "\"fma_gflops\": %.2f, \"openblas_sgemm_gflops\": %.2f, \"openblas_core\": \"%s\", "
            "\"loom_gemm_gflops\": %.2f, \"loom_gemm_kernels\": \"%s\", \"loom_blocked_gflops\": %.2f, "
            "\"loom_gemm_bf16_gflops\": %.2f, \"bf16_speedup\": %.3f, \"bf16_products\": \"%s\", "
            "\"medium_gemm_kernels\": \"%s\", \"isa\": \"%s\"}\n",
            which.c_str(), fma512, fma256, std::max(fma512, fma256), openblas, openblas_get_corename(), loom_gemm,
            gemm_kernels().c_str(), loom_blocked, loom_bf16, bf16_speedup(),
            bf16_products_name(bf16_products_setting()), medium_kernels.c_str(), isa_name(isa));
        return 0;
    });
}
