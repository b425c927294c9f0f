#pragma once
/// \file
/// SequenceLayout: a batch of N sequences stored time-major and padded, [T_max, N, sample...].
/// All knowledge of sequence boundaries lives here and in the delay and sequence ops.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom {

/// The lengths of the N sequences of a batch stored time-major and padded, [T_max, N, sample...]:
/// which rows are real and which are padding. Shared between values through LayoutPtr.
class SequenceLayout {
public:
    /// \param lengths  each sequence's length, in batch order
    explicit SequenceLayout(std::vector<std::size_t> lengths);

    /// \return N, the number of sequences.
    std::size_t num_sequences() const { return lengths_.size(); }
    /// \return T_max, the longest length (0 for no sequences).
    std::size_t max_length() const { return max_length_; }
    /// \return the length of sequence n.
    std::size_t length(std::size_t n) const { return lengths_[n]; }
    /// \return every sequence's length, in batch order.
    const std::vector<std::size_t>& lengths() const { return lengths_; }
    std::size_t total_steps() const { return total_; }  ///< sum of lengths: real (unpadded) steps

    /// \return whether step t of sequence n is real (not padding).
    bool valid(std::size_t t, std::size_t n) const { return t < lengths_[n]; }
    /// \return whether any row is padding (the lengths differ).
    bool has_padding() const { return total_ != max_length_ * lengths_.size(); }
    /// Equal when the lengths are.
    bool operator==(const SequenceLayout& o) const { return lengths_ == o.lengths_; }

    std::string str() const;  ///< "3 sequences of lengths [1, 3, 7]"

    /// @{
    /// The real (unpadded) rows, in increasing order: of the whole [T, N] block (positions t * N + n),
    /// and of one time step t (the sequences n still running). What an op computes; the rest is
    /// padding.
    std::span<const std::size_t> real_rows() const { return real_rows_; }
    std::span<const std::size_t> real_rows_at(std::size_t t) const {
        return std::span<const std::size_t>(running_).subspan(step_start_[t], step_start_[t + 1] - step_start_[t]);
    }
    /// @}

private:
    std::vector<std::size_t> lengths_;
    std::size_t max_length_ = 0;
    std::size_t total_ = 0;
    std::vector<std::size_t> real_rows_, running_, step_start_;  // step t's running_: [step_start_[t], [t + 1])
};

/// A layout shared by the values that use it.
using LayoutPtr = std::shared_ptr<const SequenceLayout>;

/// @{
/// Zero every padded row of a time-major tensor [T, N, row] (or of one time step [N, row] at t).
template <class T>
void zero_padding(T* data, const SequenceLayout& layout, std::size_t row_size);
template <class T>
void zero_padding_step(T* step_data, const SequenceLayout& layout, std::size_t t, std::size_t row_size);
/// @}

}  // namespace loom
