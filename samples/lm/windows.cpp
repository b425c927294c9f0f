#include "windows.hpp"

#include <string>

namespace lm {

WindowStarts::WindowStarts(Architecture architecture, std::size_t length, std::size_t block, std::size_t batch,
                           std::uint64_t seed, std::size_t rank, std::size_t ranks)
    : architecture_(architecture), block_(block), batch_(batch), rank_(rank), ranks_(ranks), random_(seed * 1000003) {
    const std::string processes = ranks > 1 ? " x " + std::to_string(ranks) + " processes" : "";
    if (architecture == Architecture::lstm) {
        stream_length_ = length / (batch * ranks);
        if (stream_length_ < block + 1)
            throw loom::UserError(std::to_string(length) + " characters to train on cut into --batch " +
                                  std::to_string(batch) + processes + " streams make streams of " +
                                  std::to_string(stream_length_) + " characters; a window of --block " +
                                  std::to_string(block) + " needs " + std::to_string(block + 1));
        return;
    }
    if (length < block + 1)
        throw loom::UserError(std::to_string(length) + " characters to train on; a window of --block " +
                              std::to_string(block) + " needs " + std::to_string(block + 1));
    pick_ = std::uniform_int_distribution<std::size_t>(0, length - block - 1);
}

std::vector<std::size_t> WindowStarts::next(bool& restarted) {
    std::vector<std::size_t> starts;
    restarted = false;
    if (architecture_ == Architecture::lstm) {
        if (at_ + block_ + 1 > stream_length_) at_ = 0, restarted = true;
        for (std::size_t b = 0; b < batch_; ++b) starts.push_back((rank_ * batch_ + b) * stream_length_ + at_);
        at_ += block_;
        return starts;
    }
    // Every process draws the whole batch, so that the stream stays the same everywhere.
    for (std::size_t i = 0; i < batch_ * ranks_; ++i) {
        const std::size_t at = pick_(random_);
        if (i / batch_ == rank_) starts.push_back(at);
    }
    return starts;
}

}  // namespace lm
