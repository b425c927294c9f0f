// call_bench: what one call of a tiny graph costs from C++, the yardstick of the Python package's
// added cost per call (bench/python_call_bench.py runs this program and the same calls from Python
// side by side). Each call does what Python's f.eval({x: data}) and f.grad({x: data}) do in C++:
// the data becomes a Value, then evaluate() or gradients() runs the graph, y = x * x + x over one
// sample (or one sequence) of --width numbers.
//
//   call_bench [--calls 20000] [--width 4] [--length 0]     prints microseconds per call
#include <xtensor/xrandom.hpp>

#include "bench_common.hpp"

using namespace loom;

int main(int argc, char** argv) {
    int calls = 20000, warmup = 1000, threads = 1;
    std::size_t width = 4, length = 0;
    CLI::App app{"Microseconds per eval and grad call of a one-op graph, from C++"};
    bench::add_run_options(app, threads, "--calls", calls, "timed calls of each kind", warmup);
    bench::add_size(app, "--width", width, "numbers in the sample", 1);
    bench::add_size(app, "--length", length, "steps of one sequence (0: one sample, no sequence axis)");
    CLI11_PARSE(app, argc, argv);
    return bench::report_errors([&] {
        set_blas_threads(threads);
        const Variable x = length ? sequence::input_variable({width}, "x") : input_variable({width}, "x");
        const Variable y = x * x + x;
        const xt::xarray<float> data = xt::random::randn<float>(length ? std::vector<std::size_t>{length, width}
                                                                       : std::vector<std::size_t>{1, width});
        const auto bind = [&] { return Bindings{{x, length ? Value::sequences({data}) : Value::batch(data)}}; };
        double sink = 0;
        const auto per_call_us = [&](const std::function<double()>& call) {
            for (int i = 0; i < warmup; ++i) sink += call();
            const double t0 = bench::wall_seconds();
            for (int i = 0; i < calls; ++i) sink += call();
            return 1e6 * (bench::wall_seconds() - t0) / calls;
        };
        const double eval_us = per_call_us([&] { return double(evaluate({y}, bind())[y].data<float>()[0]); });
        const double grad_us = per_call_us([&] { return double(gradients(y, bind(), {x})[x].data<float>()[0]); });
        std::printf("eval: %.2f us per call\ngrad: %.2f us per call\n(checksum %g)\n", eval_us, grad_us, sink);
        return 0;
    });
}
