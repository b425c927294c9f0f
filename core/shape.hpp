#pragma once
// Shape: the static shape of one sample. Dims: a small fixed-capacity shape used on hot paths
// (time-step slices) so that describing a tensor never allocates.
#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace loom {

class Shape {
public:
    Shape() = default;
    Shape(std::initializer_list<std::size_t> dims) : dims_(dims) {}
    explicit Shape(std::vector<std::size_t> dims) : dims_(std::move(dims)) {}

    std::size_t rank() const { return dims_.size(); }
    std::size_t operator[](std::size_t i) const { return dims_[i]; }
    std::size_t& operator[](std::size_t i) { return dims_[i]; }
    std::size_t size() const;  // number of elements
    const std::vector<std::size_t>& dims() const { return dims_; }
    auto begin() const { return dims_.begin(); }
    auto end() const { return dims_.end(); }
    bool operator==(const Shape&) const = default;

    std::string str() const;  // "[3, 4]"

private:
    std::vector<std::size_t> dims_;
};

// Throws a UserError starting with `where` unless the element count fits in memory's address range
// (2^48 elements at most: a count that would overflow size_t otherwise wraps to a small number and
// is silently accepted) and, unless `zero_allowed`, every dim is at least 1. Graph nodes are checked
// with it: inputs, parameters, constants and placeholders allow no zero; an op's result may hold a
// 0 that stands for a size known only at run time (sequence::unpack's T_max).
void check_shape(const Shape& shape, const std::string& where, bool zero_allowed = false);
inline constexpr std::size_t max_elements = std::size_t{1} << 48;

inline constexpr std::size_t max_rank = 8;

// A tensor's full dimensions, dynamic axes first; fixed capacity, no heap.
struct Dims {
    std::array<std::size_t, max_rank> d{};
    std::size_t rank = 0;

    Dims() = default;
    Dims(std::initializer_list<std::size_t> list);
    std::size_t operator[](std::size_t i) const { return d[i]; }
    std::size_t& operator[](std::size_t i) { return d[i]; }
    std::size_t size() const;
    void push_back(std::size_t v);
    const std::size_t* begin() const { return d.data(); }
    const std::size_t* end() const { return d.data() + rank; }
    bool operator==(const Dims& o) const { return rank == o.rank && std::equal(begin(), end(), o.begin()); }
    std::string str() const;
};

// Dynamic dims followed by a sample shape.
Dims make_dims(std::initializer_list<std::size_t> dynamic, const Shape& sample);

}  // namespace loom
