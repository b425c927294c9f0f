// Built against an installed loom: evaluates a small graph over two sequences and checks the values
// (and one gradient) against numbers worked out by hand, a parameter through a safetensors file, and
// that the library linked has the version find_package found. Exits non-zero on any mismatch.
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <loom.hpp>

using namespace loom;

namespace {

bool near(double got, double want, const char* what) {
    if (std::abs(got - want) <= 1e-5 * (1 + std::abs(want))) return true;
    std::fprintf(stderr, "install_check: %s is %.8g, expected %.8g\n", what, got, want);
    return false;
}

}  // namespace

int main() {
    try {
        // y_t = tanh(s_t . w) with w = (0.5, -1); total = sum over each sequence's steps.
        Variable s = sequence::input_variable({2}, "s");
        xt::xarray<float> w0 = xt::zeros<float>({2, 1});
        w0(0, 0) = 0.5f;
        w0(1, 0) = -1.0f;
        Parameter w = parameter(w0, "w");
        Variable y = tanh(times(s, w));
        Variable total = sequence::reduce_sum(y);
        const xt::xarray<float> s0 = {{2, 0}, {0, 1}, {1, 1}}, s1 = {{4, 1}};
        Value in = Value::sequences(std::vector<xt::xarray<float>>{s0, s1});
        auto out = evaluate({y, total}, {{s, in}});
        // sequence 0: z = 1, -1, -0.5; sequence 1: z = 1.
        const xt::xarray<float> t0 = out[total].rows();
        bool ok = near(t0(0, 0), std::tanh(1.0) + std::tanh(-1.0) + std::tanh(-0.5), "sum of sequence 0");
        ok &= near(t0(1, 0), std::tanh(1.0), "sum of sequence 1");
        ok &= near(out[y].sequence(0)(2, 0), std::tanh(-0.5), "y at step 2 of sequence 0");
        // d(sum of total)/dw_0 = sum over all steps of (1 - tanh(z)^2) * s_t0.
        auto g = gradients(total, {{s, in}}, {w});
        const xt::xarray<float> dw = g[w].tensor();
        auto d = [](double z) { return 1 - std::tanh(z) * std::tanh(z); };
        ok &= near(dw(0, 0), d(1) * 2 + d(-1) * 0 + d(-0.5) * 1 + d(1) * 4, "dw_0");
        // A safetensors round trip: loom::loom alone brings it (the package names no JSON library).
        const std::string st = (std::filesystem::temp_directory_path() /
                                ("loom_install_check_" + std::to_string(::getpid()) + ".safetensors"))
                                   .string();
        save_safetensors(st, {w}, {{"format", "pt"}});
        Parameter w_read = parameter(xt::xarray<float>(xt::zeros<float>({2, 1})), "w");
        assign_safetensors(read_safetensors(st), {w_read});
        std::filesystem::remove(st);
        ok &= near(w_read.value()(1, 0), -1.0, "w read back from a safetensors file");
        if (loom::version() != LOOM_PACKAGE_VERSION) {
            std::fprintf(stderr, "install_check: loom::version() is %s, the package says %s\n",
                         std::string(loom::version()).c_str(), LOOM_PACKAGE_VERSION);
            ok = false;
        }
        if (!ok) return 1;
        std::printf("install_check: loom::loom %s found, graph values and gradient correct\n", LOOM_PACKAGE_VERSION);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "install_check: %s\n", e.what());
        return 1;
    }
}
