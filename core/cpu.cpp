#include "core/cpu.hpp"

#include <atomic>
#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "core/errors.hpp"

namespace loom {

namespace {

bool detect(Isa isa) {
    if (isa == Isa::portable) return true;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    // __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0).
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == Isa::avx2) return avx2;
    return avx2 && __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

Isa best_supported() {
    if (detect(Isa::avx512)) return Isa::avx512;
    if (detect(Isa::avx2)) return Isa::avx2;
    return Isa::portable;
}

// -1 until the first call decides; then the Isa's value.
std::atomic<int> active{-1};

}  // namespace

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::portable:
            return "portable";
        case Isa::avx2:
            return "avx2";
        case Isa::avx512:
            return "avx512";
    }
    return "unknown";
}

Isa parse_isa(const std::string& name) {
    for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512})
        if (name == isa_name(isa)) return isa;
    throw UserError("unknown instruction set '" + name + "': expected portable, avx2 or avx512");
}

bool cpu_supports(Isa isa) {
    static const bool avx2 = detect(Isa::avx2), avx512 = detect(Isa::avx512);
    return isa == Isa::portable || (isa == Isa::avx2 ? avx2 : avx512);
}

bool cpu_supports_bf16() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const bool has = [] {
        if (!cpu_supports(Isa::avx512) || !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl"))
            return false;
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // leaf 7, sub-leaf 1: EAX bit 5 is AVX512_BF16
        return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5)) != 0;
    }();
    return has;
#else
    return false;
#endif
}

std::vector<Isa> supported_isas() {
    std::vector<Isa> out;
    for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512})
        if (cpu_supports(isa)) out.push_back(isa);
    return out;
}

Isa active_isa() {
    int v = active.load(std::memory_order_relaxed);
    if (v >= 0) return static_cast<Isa>(v);
    Isa isa = best_supported();
    if (const char* env = std::getenv("LOOM_ISA"); env && *env) {
        isa = parse_isa(env);
        if (!cpu_supports(isa))
            throw UserError(std::string("LOOM_ISA=") + env +
                            ": this CPU cannot run it (best here: " + isa_name(best_supported()) + ")");
    }
    int expected = -1;
    active.compare_exchange_strong(expected, static_cast<int>(isa));
    return static_cast<Isa>(active.load());
}

void set_active_isa(Isa isa) {
    if (!cpu_supports(isa))
        throw UserError(std::string("set_active_isa: this CPU cannot run ") + isa_name(isa) +
                        " kernels (best here: " + isa_name(best_supported()) + ")");
    active.store(static_cast<int>(isa));
}

}  // namespace loom
