// The roofline of a GPT's generating step on this machine: what bounds the characters per second of
// samples/lm --generate for a model of these sizes, S streams and a cache of C rows per stream, at
// each weight precision (float, bfloat16, int8: GenerateOptions::weights).
//
// Measured here:
//   - read bandwidth from memory (a 1 GiB buffer) and from the last-level cache (a buffer of a
//     quarter of it), summed with 1 and 2 threads;
//   - the step's products alone through the kernels generation runs (gemm_rows over float panels,
//     gemm_rows_quantized over bfloat16 or int8 ones) for m = S rows: every weight matrix of the
//     model (per layer [d, 3d], [d, d], [d, 4d], [4d, d]; the tied output [d, V]), one thread;
//   - the step's attention alone through the kernel generation runs (attend_one_query), each
//     stream's query over its own C rows of keys and values kept in float and in bfloat16, laid out
//     as a generator's pages lay them, one thread.
// Computed from the sizes:
//   - bytes a character reads: the weights once per step shared by S streams, plus each stream's
//     keys and values (2 L C d floats), plus the embedding rows (negligible);
//   - the bandwidth bound: memory bandwidth / bytes per character (and the last-level cache's, for
//     weights that fit in it);
//   - the products' own bound: S / (their time per step) on one thread, twice that on two (each
//     thread its half of every product's columns);
//   - the roofline: the lower of the memory bound and the products' bound, on 1 and on 2 threads.
// Prints one JSON line per precision.
//
//   decode_roofline [--layers 6 --width 384 --heads 6 --vocabulary 65 --cache 128 --streams 8] [--seconds 0.3]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <loom.hpp>

#include "bench_common.hpp"
#include "core/attention_product.hpp"
#include "core/packed_gemm.hpp"
#include "core/quantized_gemm.hpp"

using namespace loom;

namespace {

// Sums `bytes` of floats, 16 lanes at a time (the compiler vectorizes it), over and over for
// `seconds`; returns GB/s read by `threads` threads each over its own part.
double read_bandwidth(std::size_t bytes, int threads, double seconds) {
    std::vector<float> buffer(bytes / sizeof(float), 1.0f);
    const std::size_t per = buffer.size() / std::size_t(threads);
    std::vector<double> sums(std::size_t(threads), 0.0);
    auto pass = [&](int t) {
        const float* p = buffer.data() + std::size_t(t) * per;
        float acc[16] = {};
        for (std::size_t i = 0; i + 16 <= per; i += 16)
            for (std::size_t j = 0; j < 16; ++j) acc[j] += p[i + j];
        double s = 0;
        for (float a : acc) s += a;
        sums[std::size_t(t)] += s;
    };
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
        const double t0 = bench::wall_seconds();
        std::size_t passes = 0;
        while (bench::wall_seconds() - t0 < seconds / 3) {
            std::vector<std::thread> pool;
            for (int t = 1; t < threads; ++t) pool.emplace_back(pass, t);
            pass(0);
            for (auto& th : pool) th.join();
            ++passes;
        }
        const double dt = bench::wall_seconds() - t0;
        best = std::max(best, double(passes) * double(per * std::size_t(threads) * sizeof(float)) / dt * 1e-9);
    }
    if (sums[0] == -1) std::printf("%f", sums[0]);  // keeps the sums alive
    return best;
}

struct Matrix {
    std::size_t k, n;
};

// The fewest seconds a call of step() took: 5 measurements of seconds / 5 each, after a call untimed.
template <class Step>
double best_seconds(Step step, double seconds) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
        step();
        const double t0 = bench::wall_seconds();
        std::size_t runs = 0;
        while (bench::wall_seconds() - t0 < seconds / 5) step(), ++runs;
        best = std::min(best, (bench::wall_seconds() - t0) / double(runs));
    }
    return best;
}

// Seconds a step spends in attention alone: each of `streams` queries (every layer, `heads` heads)
// over its own `cache` rows of keys and values kept as S (float, or bfloat16's bits), through the
// kernel generation runs; the rows laid as a generator's pages lay them (runs of 64 rows of one
// stream, the streams' runs side by side in one table per layer).
template <class S>
double attention_seconds(std::size_t layers, std::size_t heads, std::size_t d, std::size_t cache, std::size_t streams,
                         double seconds) {
    constexpr std::size_t run = 64;
    const std::size_t runs = (cache + run - 1) / run;
    std::vector<std::vector<S>> keys(layers), values(layers);
    std::vector<std::size_t> pages(streams * cache);
    for (std::size_t s = 0; s < streams; ++s)
        for (std::size_t j = 0; j < cache; ++j) pages[s * cache + j] = (j / run * streams + s) * run + j % run;
    S one{1};
    if constexpr (std::is_same_v<S, std::uint16_t>) one = bfloat16_bits(1.0f);
    for (std::size_t l = 0; l < layers; ++l) {
        keys[l].assign(runs * run * streams * d, one);
        values[l].assign(runs * run * streams * d, one);
    }
    std::vector<float> q(d, 0.01f), scores(heads * cache), out(streams * d);
    auto step = [&] {
        for (std::size_t l = 0; l < layers; ++l)
            for (std::size_t s = 0; s < streams; ++s) {
                const RowView<const S> k{keys[l].data(), d, cache, pages.data() + s * cache, nullptr};
                const RowView<const S> v{values[l].data(), d, cache, pages.data() + s * cache, nullptr};
                attention_detail::attend_one_query<float, S>(heads, d / heads, d / heads, 0.125f, q.data(), k, v,
                                                             scores.data(), out.data() + s * d);
            }
    };
    return best_seconds(step, seconds);
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t layers = 6, width = 384, heads = 6, vocabulary = 65, cache = 128, streams = 8;
    double seconds = 0.3;
    CLI::App app{
        "The roofline of a GPT's generating step: bandwidth, the step's products at each weight precision, "
        "bytes and FLOPs a character; one JSON line per precision"};
    bench::add_size(app, "--layers", layers, "Transformer blocks", 1);
    bench::add_size(app, "--width", width, "the model's width d", 1);
    bench::add_size(app, "--heads", heads, "attention heads (width a multiple of them)", 1);
    bench::add_size(app, "--vocabulary", vocabulary, "symbols (the output projection's width)", 1);
    bench::add_size(app, "--cache", cache, "rows of keys and values each stream reads a step", 1);
    bench::add_size(app, "--streams", streams, "texts drawn at once (rows of each product)", 1);
    app.add_option("--seconds", seconds, "time per measurement")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    return bench::report_errors([&] {
        set_blas_threads(1);
        set_inter_op_threads(1);
        const std::size_t d = width;
        std::vector<Matrix> matrices;
        for (std::size_t l = 0; l < layers; ++l)
            for (Matrix m : {Matrix{d, 3 * d}, Matrix{d, d}, Matrix{d, 4 * d}, Matrix{4 * d, d}}) matrices.push_back(m);
        matrices.push_back({d, vocabulary});
        double weights = 0;
        for (const Matrix& m : matrices) weights += double(m.k * m.n);
        const double memory1 = read_bandwidth(std::size_t{1} << 30, 1, seconds);
        const double memory2 = read_bandwidth(std::size_t{1} << 30, 2, seconds);
        const double cache1 = read_bandwidth(std::size_t{8} << 20, 1, seconds);
        const double cache2 = read_bandwidth(std::size_t{8} << 20, 2, seconds);
        // The caches' keys and values each stream reads a step, in float.
        const double cache_bytes = 2.0 * double(layers * cache * d) * sizeof(float);
        const double flops = 2.0 * weights + 4.0 * double(layers * cache * d);  // a character's
        if (d % heads) throw UserError("--width " + std::to_string(d) + " is not a multiple of --heads");
        const double attention_float = attention_seconds<float>(layers, heads, d, cache, streams, seconds);
        const double attention_bf16 = attention_seconds<std::uint16_t>(layers, heads, d, cache, streams, seconds);
        std::vector<float> a(streams * 4 * d, 0.5f), c(streams * 4 * d);
        std::vector<const float*> a_rows(streams);
        std::vector<float*> c_rows(streams);
        for (std::size_t i = 0; i < streams; ++i) a_rows[i] = a.data() + i * 4 * d, c_rows[i] = c.data() + i * 4 * d;
        for (WeightPrecision precision : {WeightPrecision::float32, WeightPrecision::bfloat16, WeightPrecision::int8}) {
            std::vector<std::vector<float>> packed;
            std::vector<QuantizedWeight> kept(matrices.size());
            double bytes = 0;
            for (std::size_t i = 0; i < matrices.size(); ++i) {
                const Matrix& m = matrices[i];
                std::vector<float> w(m.k * m.n);
                for (std::size_t j = 0; j < w.size(); ++j) w[j] = float(j % 17) * 0.01f - 0.08f;
                if (precision == WeightPrecision::float32) {
                    packed.emplace_back(packed_size<float>(m.k, m.n));
                    pack_right<float>(false, m.k, m.n, w.data(), m.n, packed.back().data());
                    bytes += double(packed.back().size() * sizeof(float));
                } else {
                    quantize_right(precision, false, m.k, m.n, w.data(), m.n, kept[i]);
                    bytes += double(kept[i].bytes());
                }
            }
            auto step = [&] {
                for (std::size_t i = 0; i < matrices.size(); ++i) {
                    const Matrix& m = matrices[i];
                    if (precision == WeightPrecision::float32)
                        gemm_rows<float>(streams, m.n, m.k, a_rows.data(), packed[i].data(), c_rows.data(), false);
                    else
                        gemm_rows_quantized(streams, m.n, m.k, a_rows.data(), kept[i], c_rows.data(), 1.0f, 0.0f);
                }
            };
            const double best = best_seconds(step, seconds);
            const double per_char = bytes / double(streams) + cache_bytes;
            std::printf(
                "{\"bench\": \"decode_roofline\", \"weights\": \"%s\", \"layers\": %zu, \"width\": %zu, "
                "\"streams\": %zu, \"cache_rows\": %zu, \"weight_mb\": %.2f, \"bytes_per_char\": %.0f, "
                "\"flops_per_char\": %.0f, \"memory_gbs_1t\": %.1f, \"memory_gbs_2t\": %.1f, "
                "\"llc_gbs_1t\": %.1f, \"llc_gbs_2t\": %.1f, \"roofline_memory_chars_1t\": %.0f, "
                "\"roofline_memory_chars_2t\": %.0f, \"roofline_llc_chars_1t\": %.0f, \"products_us_per_step\": %.1f, "
                "\"products_chars_1t\": %.0f, \"products_gbs\": %.1f, \"products_gflops\": %.1f, "
                "\"attention_us_per_step\": %.1f, \"attention_bf16_us_per_step\": %.1f, "
                "\"attention_gbs\": %.1f, \"attention_bf16_gbs\": %.1f, \"roofline_chars_1t\": %.0f, "
                "\"roofline_chars_2t\": %.0f, \"isa\": \"%s\"}\n",
                weight_precision_name(precision), layers, d, streams, cache, bytes * 1e-6, per_char, flops, memory1,
                memory2, cache1, cache2, memory1 * 1e9 / per_char, memory2 * 1e9 / per_char, cache1 * 1e9 / per_char,
                best * 1e6, double(streams) / best, bytes / best * 1e-9, 2.0 * weights * double(streams) / best * 1e-9,
                attention_float * 1e6, attention_bf16 * 1e6, cache_bytes * double(streams) / attention_float * 1e-9,
                cache_bytes / 2 * double(streams) / attention_bf16 * 1e-9,
                std::min(memory1 * 1e9 / per_char, double(streams) / best),
                std::min(memory2 * 1e9 / per_char, 2 * double(streams) / best), isa_name(active_isa()));
        }
        return 0;
    });
}
