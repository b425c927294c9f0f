// keep_freed_memory: an array freed and taken again at a slightly larger size reuses the memory it
// had, instead of new pages from the kernel (each a page fault), as generation's growing caches do.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include "core/allocator.hpp"

// GCC says a sanitizer is on by these macros, clang by __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LOOM_SANITIZED_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LOOM_SANITIZED_MALLOC 1
#endif
#endif
#if defined(__GLIBC__) && !defined(LOOM_SANITIZED_MALLOC)
#define LOOM_GLIBC_MALLOC 1  // a sanitizer replaces malloc: nothing of glibc's to check
#endif

namespace {

#ifdef LOOM_GLIBC_MALLOC
long minor_faults() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

// Page faults of taking, filling and freeing `rounds` arrays of 8 MiB, each 64 KiB longer than the last.
long faults_of_growing_arrays(int rounds) {
    const long before = minor_faults();
    for (int i = 0; i < rounds; ++i) {
        const std::size_t bytes = (std::size_t{8} << 20) + static_cast<std::size_t>(i) * (64 << 10);
        auto* p = static_cast<char*>(std::malloc(bytes));
        REQUIRE(p != nullptr);
        std::memset(p, i, bytes);
        volatile char sink = p[bytes - 1];
        (void)sink;
        std::free(p);
    }
    return minor_faults() - before;
}
#endif

}  // namespace

TEST_CASE("keep_freed_memory: arrays growing step by step reuse freed memory, not new pages") {
#ifdef LOOM_GLIBC_MALLOC
    REQUIRE(loom::keep_freed_memory());
    faults_of_growing_arrays(1);  // the first array's pages are new in any case
    // 16 arrays of 8 MiB would be 32,768 faults of 4 KiB pages if each came new from the kernel; kept,
    // only each array's growth is new (16 pages a round) beside the test framework's own.
    const long faults = faults_of_growing_arrays(16);
    CHECK(faults < 32768 / 4);
#else
    MESSAGE("not glibc's allocator (or a sanitizer's replaces it): nothing to check");
#endif
}
