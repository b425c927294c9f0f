#pragma once
/// \file
/// Shape: the static shape of one sample. Dims: a small fixed-capacity shape used on hot paths
/// (time-step slices) so that describing a tensor never allocates.
#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace loom {

/// The sample shape of a value: its static dimensions, without the batch and sequence axes.
class Shape {
public:
    Shape() = default;
    /// A shape from its dimensions, outermost first: `Shape{3, 4}`.
    Shape(std::initializer_list<std::size_t> dims) : dims_(dims) {}
    /// A shape from its dimensions, outermost first.
    explicit Shape(std::vector<std::size_t> dims) : dims_(std::move(dims)) {}

    /// \return the number of dimensions (0 for a scalar).
    std::size_t rank() const { return dims_.size(); }
    /// \return dimension i (i < rank()).
    std::size_t operator[](std::size_t i) const { return dims_[i]; }
    /// \return dimension i, to change.
    std::size_t& operator[](std::size_t i) { return dims_[i]; }
    std::size_t size() const;  ///< number of elements
    /// \return the dimensions, outermost first.
    const std::vector<std::size_t>& dims() const { return dims_; }
    /// \return an iterator to the first dimension.
    auto begin() const { return dims_.begin(); }
    /// \return an iterator past the last dimension.
    auto end() const { return dims_.end(); }
    /// Equal when the ranks and every dimension are equal.
    bool operator==(const Shape&) const = default;

    std::string str() const;  ///< "[3, 4]"

private:
    std::vector<std::size_t> dims_;
};

/// Throws a UserError starting with `where` unless the element count fits in memory's address range
/// (2^48 elements at most: a count that would overflow size_t otherwise wraps to a small number and
/// is silently accepted) and, unless `zero_allowed`, every dim is at least 1. Graph nodes are checked
/// with it: inputs, parameters, constants and placeholders allow no zero; an op's result may hold a
/// 0 that stands for a size known only at run time (sequence::unpack's T_max).
void check_shape(const Shape& shape, const std::string& where, bool zero_allowed = false);
inline constexpr std::size_t max_elements = std::size_t{1} << 48;  ///< the most elements a value may hold (2^48)

inline constexpr std::size_t max_rank = 8;  ///< the highest rank of a tensor, its dynamic axes included

/// A tensor's full dimensions, dynamic axes first; fixed capacity, no heap.
struct Dims {
    std::array<std::size_t, max_rank> d{};  ///< the dimensions; only the first `rank` are used
    std::size_t rank = 0;                   ///< how many dimensions are used

    Dims() = default;
    /// Dims from a list; a UserError beyond max_rank dimensions.
    Dims(std::initializer_list<std::size_t> list);
    /// \return dimension i.
    std::size_t operator[](std::size_t i) const { return d[i]; }
    /// \return dimension i, to change.
    std::size_t& operator[](std::size_t i) { return d[i]; }
    /// \return the number of elements (the product of the dimensions).
    std::size_t size() const;
    /// Appends a dimension; a UserError beyond max_rank.
    void push_back(std::size_t v);
    /// \return a pointer to the first dimension.
    const std::size_t* begin() const { return d.data(); }
    /// \return a pointer past the last used dimension.
    const std::size_t* end() const { return d.data() + rank; }
    /// Equal when the ranks and the used dimensions are equal.
    bool operator==(const Dims& o) const { return rank == o.rank && std::equal(begin(), end(), o.begin()); }
    /// \return the dimensions as text, "[3, 4]".
    std::string str() const;
};

/// Dynamic dims followed by a sample shape.
Dims make_dims(std::initializer_list<std::size_t> dynamic, const Shape& sample);

}  // namespace loom
