// Run-time choice of the kernels' instruction set (core/cpu.hpp).
#include <doctest/doctest.h>

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
        // gemm() uses loom's own kernels exactly when AVX-512 is active (no LOOM_GEMM in tests).
        CHECK((loom::gemm_kernels() == "loom-avx512") == (isa == loom::Isa::avx512));
    }
    for (loom::Isa isa : {loom::Isa::avx2, loom::Isa::avx512})
        if (!loom::cpu_supports(isa))
            loom::testing::expect_user_error([isa] { loom::set_active_isa(isa); }, {"cannot run"});
    loom::set_active_isa(before);
}
