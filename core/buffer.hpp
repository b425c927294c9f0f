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

namespace loom {

template <class T>
class Buffer {
public:
    Buffer() = default;
    Buffer(Buffer&& o) noexcept : data_(std::move(o.data_)), size_(o.size_), capacity_(o.capacity_) {
        o.size_ = o.capacity_ = 0;
    }
    Buffer& operator=(Buffer&& o) noexcept {
        if (this != &o) {
            data_ = std::move(o.data_);
            size_ = o.size_;
            capacity_ = o.capacity_;
            o.size_ = o.capacity_ = 0;
        }
        return *this;
    }
    std::size_t size() const { return size_; }
    std::size_t capacity() const { return capacity_; }
    bool empty() const { return size_ == 0; }
    T* data() { return data_.get(); }
    const T* data() const { return data_.get(); }
    T* begin() { return data(); }
    T* end() { return data() + size_; }
    const T* begin() const { return data(); }
    const T* end() const { return data() + size_; }
    T& operator[](std::size_t i) { return data_[i]; }
    const T& operator[](std::size_t i) const { return data_[i]; }
    operator std::span<T>() { return {data(), size_}; }
    operator std::span<const T>() const { return {data(), size_}; }

    // New elements are uninitialized; existing ones are kept only while the capacity suffices.
    void resize(std::size_t n) {
        if (n > capacity_) {
            data_.reset();
            capacity_ = n;
            data_.reset(new T[n]);  // default-initialized: no pass over the memory
        }
        size_ = n;
    }
    void assign(std::size_t n, T v) {
        resize(n);
        std::fill_n(data(), n, v);
    }

private:
    std::unique_ptr<T[]> data_;
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
        // Sizes vary a little from minibatch to minibatch (sequence lengths): some headroom lets a
        // buffer serve the next one too.
        if (b.capacity() < n) {
            b = Buffer<T>();  // frees the old memory first
            b.resize(n + n / 8);
        }
        b.resize(n);
        return b;
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
    mutable std::mutex mutex_;
    std::vector<Buffer<T>> free_;
};

}  // namespace loom
