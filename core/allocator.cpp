#include "core/allocator.hpp"

#include <algorithm>
#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace loom {

bool keep_freed_memory(std::size_t bytes) {
#if defined(__GLIBC__)
    // glibc refuses a mapping threshold above 32 MiB on 64-bit machines (HEAP_MAX_SIZE / 2).
    const std::size_t largest_kept = std::min(bytes, std::size_t{32} << 20);
    const int trim = static_cast<int>(std::min<std::size_t>(bytes, INT_MAX));
    return mallopt(M_MMAP_THRESHOLD, static_cast<int>(largest_kept)) == 1 && mallopt(M_TRIM_THRESHOLD, trim) == 1;
#else
    (void)bytes;
    return false;
#endif
}

}  // namespace loom
