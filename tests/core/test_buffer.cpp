// BufferPool hands back free buffers best fit, never one many times too large for the request,
// and grows the largest free buffer when none is large enough.
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
    // 1,000 elements: the only free buffer holds 1 Mi elements, far more than four times as many: new memory.
    Buffer<float> small = pool.take(1000);
    CHECK(small.data() != big_data);
    CHECK(small.capacity() < 2000);
    CHECK(pool.free_bytes() == big_capacity * sizeof(float));
    // 600,000 elements: the big one (less than twice as large) serves it.
    Buffer<float> b = pool.take(600000);
    CHECK(b.data() == big_data);
    CHECK(pool.free_bytes() == 0);
    // Larger than every free buffer: the largest free one grows to serve it, none is kept beside it.
    pool.give(std::move(a));
    pool.give(std::move(small));
    Buffer<float> huge = pool.take(1 << 21);
    CHECK(huge.size() == std::size_t{1} << 21);
    CHECK(pool.free_bytes() < 2000 * sizeof(float));
}

TEST_CASE("buffer pool: a free buffer up to four times the request serves it, a larger one does not") {
    BufferPool<float> pool;
    Buffer<float> block = pool.take(300000);
    const float* block_data = block.data();
    const std::size_t capacity = block.capacity();  // 300,000 and some headroom
    pool.give(std::move(block));
    // A third of the block: served by it, no new memory.
    Buffer<float> third = pool.take(capacity / 3);
    CHECK(third.data() == block_data);
    CHECK(third.size() == capacity / 3);
    CHECK(pool.free_bytes() == 0);
    pool.give(std::move(third));
    // Just over a quarter: still served by it.
    Buffer<float> quarter = pool.take(capacity / 4 + 1);
    CHECK(quarter.data() == block_data);
    pool.give(std::move(quarter));
    // A fifth: the block is more than four times too large; it stays free and new memory serves.
    Buffer<float> fifth = pool.take(capacity / 5);
    CHECK(fifth.data() != block_data);
    CHECK(fifth.capacity() < capacity / 4);
    CHECK(pool.free_bytes() == capacity * sizeof(float));
}

TEST_CASE("buffer grow keeps the first elements, for a heap block and for a mapped one") {
    for (std::size_t start : {std::size_t{1000}, std::size_t{1} << 20}) {  // 4 KB from the heap, 4 MiB mapped
        CAPTURE(start);
        Buffer<float> b;
        b.resize(start);
        for (std::size_t i = 0; i < start; ++i) b[i] = static_cast<float>(i);
        b.grow(3 * start + 5);
        CHECK(b.size() == start);
        CHECK(b.capacity() == 3 * start + 5);
        bool kept = true;
        for (std::size_t i = 0; i < start; ++i) kept = kept && b[i] == static_cast<float>(i);
        CHECK(kept);
        b.resize(3 * start + 5);  // the new part is usable memory
        b[3 * start + 4] = 1.5f;
        CHECK(b[3 * start + 4] == 1.5f);
        b.grow(10);  // never shrinks
        CHECK(b.capacity() == 3 * start + 5);
    }
}
