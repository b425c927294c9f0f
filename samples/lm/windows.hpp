#pragma once
// Where the language model's training windows start in its text, iteration after iteration, for
// each process of a data-parallel run (mpirun): the GPT's at random places, the LSTM's in streams
// whose states carry over. Together the processes train on what one process with their whole batch
// would train on, each on its own share.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "model.hpp"

namespace lm {

/// The starts of `batch` windows of `block` characters (each with the character after it) an
/// iteration, in a text of `length` characters, for process `rank` of `ranks`:
/// - the GPT: every process draws the same batch x ranks random starts from one stream of `seed`
///   and takes its own `batch` of them (rank 0 the first), so the processes' windows are those of
///   one process with a batch of batch x ranks;
/// - the LSTM: the text cut into batch x ranks streams of equal length, process `rank` taking the
///   streams rank x batch to rank x batch + batch - 1, each iteration the next window of each.
class WindowStarts {
public:
    /// A UserError naming --block and --batch when the text is too short for them: the GPT needs
    /// length > block, the LSTM a stream of at least block + 1 characters.
    WindowStarts(Architecture architecture, std::size_t length, std::size_t block, std::size_t batch,
                 std::uint64_t seed, std::size_t rank = 0, std::size_t ranks = 1);
    /// The next iteration's starts, `batch` of them. For the LSTM, `restarted` is set when the
    /// streams went back to their beginnings (a window carries no state from the stream's end).
    std::vector<std::size_t> next(bool& restarted);
    /// The LSTM's characters per stream (0 for the GPT).
    std::size_t stream_length() const { return stream_length_; }

private:
    Architecture architecture_;
    std::size_t block_, batch_, rank_, ranks_, stream_length_ = 0, at_ = 0;
    std::mt19937_64 random_;
    std::uniform_int_distribution<std::size_t> pick_;
};

}  // namespace lm
