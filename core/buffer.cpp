#include "core/buffer.hpp"

#include <sys/mman.h>

#include <new>

namespace loom {

void* map_block(std::size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
}

void unmap_block(void* p, std::size_t bytes) { munmap(p, bytes); }

}  // namespace loom
