// BufferPool hands back free buffers best fit, never one many times too large for the request,
// and replaces the largest free buffer when none is large enough.
#include <doctest/doctest.h>

#include "core/buffer.hpp"

using loom::Buffer;
using loom::BufferPool;

TEST_CASE("buffer pool: best fit, no giant block for a small request, largest given up when none fits") {
    BufferPool<float> pool;
    Buffer<float> big = pool.take(1 << 20), mid = pool.take(1 << 16);
    const float *big_data = big.data(), *mid_data = mid.data();
    const std::size_t big_capacity = big.capacity();  // new buffers get some headroom
    pool.give(std::move(big));
    pool.give(std::move(mid));
    // 60,000 elements: the 65,536 one fits best.
    Buffer<float> a = pool.take(60000);
    CHECK(a.data() == mid_data);
    CHECK(a.size() == 60000);
    // 1,000 elements: the only free buffer holds 1 Mi elements, far more than twice as many: new memory.
    Buffer<float> small = pool.take(1000);
    CHECK(small.data() != big_data);
    CHECK(small.capacity() < 2000);
    CHECK(pool.free_bytes() == big_capacity * sizeof(float));
    // 600,000 elements: the big one (less than twice as large) serves it.
    Buffer<float> b = pool.take(600000);
    CHECK(b.data() == big_data);
    CHECK(pool.free_bytes() == 0);
    // Larger than every free buffer: the largest free one is dropped, not kept beside the new one.
    pool.give(std::move(a));
    pool.give(std::move(small));
    Buffer<float> huge = pool.take(1 << 21);
    CHECK(huge.size() == std::size_t{1} << 21);
    CHECK(pool.free_bytes() < 2000 * sizeof(float));
}
