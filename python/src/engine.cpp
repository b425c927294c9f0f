// The engine's process-wide settings, as loom's samples set them: threads, OpenBLAS's threads and the
// precision of float products (core/parallel.hpp, core/gemm.hpp).
#include "bindings.hpp"

namespace loom_python {

void bind_engine(py::module_& m) {
    m.def(
        "set_inter_op_threads",
        [](int n) {
            if (n < 1) throw loom::UserError("set_inter_op_threads: takes 1 or more threads; got " + std::to_string(n));
            loom::set_inter_op_threads(n);
        },
        py::arg("n"),
        "How many independent steps of a graph run at once (1, the default: one after another); with n > 1 "
        "OpenBLAS runs one thread per product, so n threads use n cores. loom's; PyTorch's "
        "torch.set_num_threads.");
    m.def("inter_op_threads", &loom::inter_op_threads, "The number set_inter_op_threads set (1 unless set).");
    m.def(
        "set_blas_threads",
        [](int n) {
            if (n < 1) throw loom::UserError("set_blas_threads: takes 1 or more threads; got " + std::to_string(n));
            loom::set_blas_threads(n);
        },
        py::arg("n"), "OpenBLAS's threads per product (the products loom hands to OpenBLAS).");
    m.def(
        "set_matmul_precision",
        [](const std::string& name) { loom::set_matmul_precision(loom::parse_matmul_precision(name)); },
        py::arg("precision"),
        "\"highest\" (the default): float products as they are; \"medium\": their operands rounded to bfloat16, "
        "the products summed in float, where the CPU has AVX-512 BF16 and loom measures them faster than float "
        "once per process (elsewhere as \"highest\"; the environment variable LOOM_BF16_PRODUCTS=on or off "
        "forces the choice; gemm_kernels() says what runs). For the whole process, as "
        "torch.set_float32_matmul_precision; loom.matmul_precision(name) sets it for a "
        "`with` block.");
    m.def(
        "get_matmul_precision", [] { return std::string(loom::matmul_precision_name(loom::matmul_precision())); },
        "The precision set_matmul_precision set: \"highest\" or \"medium\".");
    m.def(
        "set_bf16_products", [](const std::string& name) { loom::set_bf16_products(loom::parse_bf16_products(name)); },
        py::arg("choice"),
        "Whether the bfloat16 kernels run on CPUs with AVX-512 BF16: \"auto\" (the default: where measured "
        "faster than float's), \"on\" or \"off\"; overrides LOOM_BF16_PRODUCTS from now on. They serve "
        "\"medium\" products and generation's weights in bfloat16 and int8 (whose rows they round to bfloat16).");
    m.def(
        "get_bf16_products", [] { return std::string(loom::bf16_products_name(loom::bf16_products_setting())); },
        "The choice set_bf16_products (or LOOM_BF16_PRODUCTS) made: \"auto\", \"on\" or \"off\".");
    m.def("bf16_kernels_chosen", &loom::bf16_kernels_chosen,
          "Whether the bfloat16 kernels run on this CPU now (AVX-512 BF16, and the choice on, or auto and "
          "measured faster), whatever the matmul precision.");
    m.def("gemm_kernels", &loom::gemm_kernels,
          "Which kernels large float products run on now: \"loom-avx512-bf16\" (at \"medium\" where bfloat16 is "
          "chosen), \"loom-avx512\", or \"openblas-\" and OpenBLAS's core name.");
}

}  // namespace loom_python
