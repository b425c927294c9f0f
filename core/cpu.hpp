#pragma once
// Which instruction sets the kernels may use, chosen at run time: one binary serves every x86-64
// CPU (and builds with LOOM_NATIVE off), and the fastest kernels this CPU runs are taken.
// Kernels for AVX2 and AVX-512 live in their own files compiled with those instruction sets
// (core/kernels_avx2.cpp, core/kernels_avx512.cpp); nothing calls them unless the CPU and the
// operating system support them.
#include <string>
#include <vector>

namespace loom {

enum class Isa { portable, avx2, avx512 };  // avx2 means AVX2 + FMA; avx512 means AVX-512F + AVX2 + FMA

const char* isa_name(Isa isa);
// "portable", "avx2" or "avx512"; UserError naming the choices for anything else.
Isa parse_isa(const std::string& name);

// True when this CPU and OS can run kernels of `isa` and this build has them (x86-64 only).
bool cpu_supports(Isa isa);
// True when this CPU and OS run AVX-512 BF16 (vdpbf16ps, with AVX-512 BW and VL) and this build
// has its kernels (core/kernels_avx512_bf16.cpp): float products at MatmulPrecision::medium
// (core/gemm.hpp) then round their operands to bfloat16.
bool cpu_supports_bf16();
// Every variant this CPU runs, portable first: what the tests compare against each other.
std::vector<Isa> supported_isas();

// The variant the kernels use: the best one supported, unless the environment variable LOOM_ISA
// names a lower one (portable, avx2, avx512) at the first call. Naming one the CPU cannot run is a
// UserError.
Isa active_isa();
// Chooses the variant from now on (tests, benches); UserError when the CPU cannot run it.
void set_active_isa(Isa isa);

}  // namespace loom
