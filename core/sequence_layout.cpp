#include "core/sequence_layout.hpp"

#include <algorithm>
#include <cstring>

namespace loom {

SequenceLayout::SequenceLayout(std::vector<std::size_t> lengths) : lengths_(std::move(lengths)) {
    for (auto l : lengths_) {
        max_length_ = std::max(max_length_, l);
        total_ += l;
    }
    real_rows_.reserve(total_);
    running_.reserve(total_);
    step_start_.reserve(max_length_ + 1);
    for (std::size_t t = 0; t < max_length_; ++t) {
        step_start_.push_back(running_.size());
        for (std::size_t n = 0; n < lengths_.size(); ++n)
            if (t < lengths_[n]) {
                running_.push_back(n);
                real_rows_.push_back(t * lengths_.size() + n);
            }
    }
    step_start_.push_back(running_.size());
}

std::string SequenceLayout::str() const {
    std::string s = std::to_string(lengths_.size()) + " sequences of lengths [";
    for (std::size_t i = 0; i < lengths_.size(); ++i) {
        if (i) s += ", ";
        if (i == 8 && lengths_.size() > 10) {
            s += "...";
            break;
        }
        s += std::to_string(lengths_[i]);
    }
    return s + "]";
}

template <class T>
void zero_padding_step(T* step_data, const SequenceLayout& layout, std::size_t t, std::size_t row_size) {
    for (std::size_t n = 0; n < layout.num_sequences(); ++n)
        if (!layout.valid(t, n)) std::memset(step_data + n * row_size, 0, row_size * sizeof(T));
}

template <class T>
void zero_padding(T* data, const SequenceLayout& layout, std::size_t row_size) {
    if (!layout.has_padding()) return;
    const std::size_t n_seq = layout.num_sequences();
    for (std::size_t t = 0; t < layout.max_length(); ++t)
        zero_padding_step(data + t * n_seq * row_size, layout, t, row_size);
}

template void zero_padding<float>(float*, const SequenceLayout&, std::size_t);
template void zero_padding<double>(double*, const SequenceLayout&, std::size_t);
template void zero_padding_step<float>(float*, const SequenceLayout&, std::size_t, std::size_t);
template void zero_padding_step<double>(double*, const SequenceLayout&, std::size_t, std::size_t);

}  // namespace loom
