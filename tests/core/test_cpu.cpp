// Run-time choice of the kernels' instruction set (core/cpu.hpp).
#include <doctest/doctest.h>

#include <cblas.h>

#include "core/cpu.hpp"
#include "core/gemm.hpp"
#include "core/packed_gemm.hpp"
#include "test_support.hpp"

TEST_CASE("instruction set names parse back and unknown ones are a UserError") {
    for (loom::Isa isa : {loom::Isa::portable, loom::Isa::avx2, loom::Isa::avx512})
        CHECK(loom::parse_isa(loom::isa_name(isa)) == isa);
    loom::testing::expect_user_error([] { loom::parse_isa("sse9"); }, {"sse9", "portable, avx2 or avx512"});
}

TEST_CASE("the active instruction set is one the CPU supports and can be lowered and restored") {
    const std::vector<loom::Isa> isas = loom::supported_isas();
    REQUIRE(!isas.empty());
    CHECK(isas.front() == loom::Isa::portable);
    CHECK(loom::cpu_supports(loom::Isa::portable));
    // AVX-512 here implies AVX2 (the kernels use both).
    if (loom::cpu_supports(loom::Isa::avx512)) CHECK(loom::cpu_supports(loom::Isa::avx2));
    const loom::Isa before = loom::active_isa();
    CHECK(loom::cpu_supports(before));
    for (loom::Isa isa : isas) {
        loom::set_active_isa(isa);
        CHECK(loom::active_isa() == isa);
        CHECK(loom::packed_gemm_vectorized() == (isa != loom::Isa::portable));
        // gemm() uses loom's own kernels exactly when AVX-512 is active and OpenBLAS has no AVX-512
        // kernels for this CPU (no LOOM_GEMM in tests).
        CHECK((loom::gemm_kernels() == "loom-avx512") ==
              (isa == loom::Isa::avx512 && !loom::openblas_core_has_avx512(openblas_get_corename())));
    }
    for (loom::Isa isa : {loom::Isa::avx2, loom::Isa::avx512})
        if (!loom::cpu_supports(isa))
            loom::testing::expect_user_error([isa] { loom::set_active_isa(isa); }, {"cannot run"});
    loom::set_active_isa(before);
}

TEST_CASE("OpenBLAS core types with AVX-512 GEMM kernels are recognised by name, in any case") {
    for (const char* name : {"SkylakeX", "Cooperlake", "SapphireRapids", "SKYLAKEX", "cooperlake"})
        CHECK(loom::openblas_core_has_avx512(name));
    for (const char* name : {"Haswell", "Prescott", "Zen", "SandyBridge", "", "Cooperlake2", "Skylake"})
        CHECK_FALSE(loom::openblas_core_has_avx512(name));
}
