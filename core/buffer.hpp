#pragma once
// Buffer: a heap array that is not zeroed when allocated (std::vector value-initializes, a wasted
// pass over memory every op output is about to overwrite), and BufferPool, where the executor
// returns buffers it no longer needs so later ones reuse their memory: a training step's peak is
// then the most memory live at once, not the sum of every value and gradient.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "core/weight_precision.hpp"

namespace loom {

struct QuantizedWeight;  // core/quantized_gemm.hpp

// Large blocks are mapped from the kernel directly and unmapped when freed: malloc would serve
// them from per-thread arenas after its adaptive mmap threshold rises, where freed blocks keep
// their pages, so with several threads the process held memory no buffer used any more.
void* map_block(std::size_t bytes);
void unmap_block(void* p, std::size_t bytes);
// A mapped block made larger in place or moved by the kernel (mremap): its pages go along, only
// the added part is new memory.
void* remap_block(void* p, std::size_t old_bytes, std::size_t new_bytes);
inline constexpr std::size_t map_threshold = std::size_t{256} << 10;

template <class T>
class Buffer {
public:
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& o) noexcept : data_(o.data_), size_(o.size_), capacity_(o.capacity_) {
        o.data_ = nullptr;
        o.size_ = o.capacity_ = 0;
    }
    Buffer& operator=(Buffer&& o) noexcept {
        if (this != &o) {
            release();
            data_ = o.data_;
            size_ = o.size_;
            capacity_ = o.capacity_;
            o.data_ = nullptr;
            o.size_ = o.capacity_ = 0;
        }
        return *this;
    }
    ~Buffer() { release(); }

    std::size_t size() const { return size_; }
    std::size_t capacity() const { return capacity_; }
    bool empty() const { return size_ == 0; }
    T* data() { return data_; }
    const T* data() const { return data_; }
    T* begin() { return data_; }
    T* end() { return data_ + size_; }
    const T* begin() const { return data_; }
    const T* end() const { return data_ + size_; }
    T& operator[](std::size_t i) { return data_[i]; }
    const T& operator[](std::size_t i) const { return data_[i]; }
    operator std::span<T>() { return {data_, size_}; }
    operator std::span<const T>() const { return {data_, size_}; }

    // New elements are uninitialized; existing ones are kept only while the capacity suffices.
    void resize(std::size_t n) {
        if (n > capacity_) {
            release();
            data_ = n * sizeof(T) >= map_threshold ? static_cast<T*>(map_block(n * sizeof(T)))
                                                   : new T[n];  // default-initialized: no pass over memory
            capacity_ = n;
        }
        size_ = n;
    }
    // Room for n elements: the first size() elements are kept. A mapped block grows by remapping, so
    // that the memory it held is not returned to the kernel only to be taken and zeroed again.
    void grow(std::size_t n) {
        if (n <= capacity_) return;
        if (data_ && capacity_ * sizeof(T) >= map_threshold) {
            data_ = static_cast<T*>(remap_block(data_, capacity_ * sizeof(T), n * sizeof(T)));
            capacity_ = n;
            return;
        }
        Buffer bigger;
        bigger.resize(n);
        std::copy_n(data_, size_, bigger.data_);
        bigger.size_ = size_;
        *this = std::move(bigger);
    }
    void assign(std::size_t n, T v) {
        resize(n);
        std::fill_n(data_, n, v);
    }

private:
    void release() {
        if (data_) {
            if (capacity_ * sizeof(T) >= map_threshold)
                unmap_block(data_, capacity_ * sizeof(T));
            else
                delete[] data_;
        }
        data_ = nullptr;
        size_ = capacity_ = 0;
    }
    T* data_ = nullptr;
    std::size_t size_ = 0, capacity_ = 0;
};

// Free buffers, handed out best fit. Thread-safe: steps running at once take and give buffers.
template <class T>
class BufferPool {
public:
    // A buffer of size n, contents undefined.
    Buffer<T> take(std::size_t n) {
        Buffer<T> b;
        {
            std::lock_guard lock(mutex_);
            auto best = free_.end();
            for (auto it = free_.begin(); it != free_.end(); ++it)
                if (it->capacity() >= n && (best == free_.end() || it->capacity() < best->capacity())) best = it;
            // Best fit, but not a block many times too large: a [T, N, 1] value holding a gate
            // buffer's 6 MiB for the rest of the pass kept that memory from the value it was
            // sized for (a new small block is cheap; the big one stays free for a big request).
            // Up to max_oversize times the request is served: at 2x, a request for a third of a
            // free block mapped new memory while that block sat idle; 4x lowered the QA step's
            // peak RSS by 3-9 MiB.
            if (best != free_.end() && best->capacity() > max_oversize * n + small_block) return fresh(n);
            if (best == free_.end() && !free_.empty()) {
                // None is large enough: the largest free one is given up for a new one, so the pool
                // never holds more buffers than were ever live at once.
                best = std::max_element(free_.begin(), free_.end(), [](const Buffer<T>& a, const Buffer<T>& b2) {
                    return a.capacity() < b2.capacity();
                });
            }
            if (best != free_.end()) {
                std::iter_swap(best, free_.end() - 1);
                b = std::move(free_.back());
                free_.pop_back();
            }
        }
        if (b.capacity() < n) {  // the largest free one grows, keeping the pages it has
            b.resize(0);
            b.grow(n + n / 8);
        }
        b.resize(n);
        return b;
    }
    // b holding n elements: kept when its capacity suffices, else exchanged through the pool.
    void resize(Buffer<T>& b, std::size_t n) {
        if (b.capacity() >= n) {
            b.resize(n);
            return;
        }
        give(std::move(b));
        b = take(n);
    }
    void give(Buffer<T>&& b) {
        if (!b.capacity()) return;
        std::lock_guard lock(mutex_);
        free_.push_back(std::move(b));
    }
    std::size_t free_bytes() const {
        std::lock_guard lock(mutex_);
        std::size_t total = 0;
        for (const auto& b : free_) total += b.capacity() * sizeof(T);
        return total;
    }

private:
    static constexpr std::size_t small_block = 4096 / sizeof(T);
    static constexpr std::size_t max_oversize = 4;
    // Sizes vary a little from minibatch to minibatch (sequence lengths): some headroom lets a
    // buffer serve the next one too.
    static Buffer<T> fresh(std::size_t n) {
        Buffer<T> b;
        b.resize(n + n / 8);
        b.resize(n);
        return b;
    }
    mutable std::mutex mutex_;
    std::vector<Buffer<T>> free_;
};

// Scratch memory reused across calls (an op's, each thread's own), so that no per-time-step call
// allocates once warm.
template <class T>
struct Workspace {
    std::vector<T> buffer;
    T* get(std::size_t n) {
        if (buffer.size() < n) buffer.resize(n);
        return buffer.data();
    }
};

// Memory kept across the calls of one run of a recurrence loop (the executor gives each op in a
// loop one), for what is derived from inputs without a dynamic axis, which do not change during
// the run: a weight packed once for every step (pack_right_once). Not ready at the first call; the
// buffer goes back to the pool when the run ends. The executor also gives one, kept across passes,
// to each product outside loops whose weight is fixed (Session::set_parameters_fixed): `weights`
// then says the precision its weight is read in, and a float weight kept narrower is packed once
// into `quantized` (core/quantized_gemm.hpp), an int8 one also widened into bfloat16 pairs where
// `widen_int8` (widen_int8_pays: a model small enough that the copies stay in cache).
template <class T>
struct LoopCache {
    BufferPool<T>* pool = nullptr;
    Buffer<T> data;
    bool ready = false;
    WeightPrecision weights = WeightPrecision::float32;
    bool widen_int8 = false;
    std::shared_ptr<const QuantizedWeight> quantized;

    LoopCache() = default;
    LoopCache(const LoopCache&) = delete;
    LoopCache& operator=(const LoopCache&) = delete;
    ~LoopCache() {
        if (pool) pool->give(std::move(data));
    }
    T* get(std::size_t n) {
        if (pool)
            pool->resize(data, n);
        else if (data.size() < n)
            data.resize(n);
        return data.data();
    }
};

}  // namespace loom
