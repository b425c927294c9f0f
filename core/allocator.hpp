#pragma once
/// \file
/// How the C library's allocator hands memory back to the kernel, for programs whose arrays change
/// size at every step (generation: a key/value cache one row longer per step, copied by rows).
#include <cstddef>

namespace loom {

/// Keeps up to `bytes` of memory that the program frees for its next allocations, instead of
/// giving it back to the kernel and taking it again, zeroed page by page, an array later.
///
/// glibc maps a large array on its own and unmaps it when freed, and returns the free top of its
/// heap to the kernel once it passes a threshold; both follow the largest block freed so far, so
/// arrays that grow at every step (a Transformer's key/value caches while it generates) keep
/// crossing them. Each such array then costs a page fault per 4 KiB: a quarter of a g2p
/// Transformer's beam search (bench/RESULTS.md). This call fixes both thresholds for the whole
/// process (glibc's mallopt M_MMAP_THRESHOLD and M_TRIM_THRESHOLD): call it once at the start of
/// a program that generates, if the memory it keeps is acceptable; loom's samples and benches do.
/// loom's own large buffers (the executor's) are mapped and pooled apart from malloc and are not
/// affected. Elsewhere than glibc it does nothing.
/// \param bytes  the most freed memory kept at the heap's top; arrays up to 32 MiB (or `bytes`, if
///   less) come from the heap
/// \return whether the allocator took the settings
bool keep_freed_memory(std::size_t bytes = std::size_t{256} << 20);

}  // namespace loom
