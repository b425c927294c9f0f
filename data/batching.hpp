#pragma once
/// \file
/// Minibatches of (question, answer) items grouped by length to limit padding.
///
/// One epoch: shuffle all items (seeded), cut the order into windows of `sort_window` batches,
/// sort each window by length (answer, then question), cut it into batches of `batch_size`, then
/// shuffle the order of the batches. Sorting only inside a window keeps batches random from epoch
/// to epoch while neighbours in a batch have similar lengths.
///
/// Every epoch's order is a pure function of (seed, epoch), so a run resumed from a saved
/// DataPosition {epoch, batch} sees exactly the batches it would have seen without stopping.
/// Shuffling uses our own Fisher-Yates over std::mt19937_64 rather than std::shuffle, whose
/// output differs between standard libraries.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// The lengths the Batcher sorts an item by (tokens of its question and of its answer).
struct ItemLengths {
    std::size_t question = 0;  ///< tokens in the question (or the item's only sequence)
    std::size_t answer = 0;    ///< tokens in the answer (0 when there is none)
};

/// How the Batcher cuts an epoch into minibatches (the procedure is above).
struct BatchingOptions {
    std::size_t batch_size = 32;   ///< items per batch (the last may be smaller unless drop_last)
    std::size_t sort_window = 20;  ///< batches per sorting window; 0 = keep the (shuffled) order
    /// Shuffle the items and the batches each epoch; false: the items' order, sorted within windows.
    bool shuffle = true;
    std::uint64_t seed = 1;  ///< the seed every epoch's order derives from, with the epoch's number
    bool drop_last = false;  ///< drop a final batch smaller than batch_size
};

/// A place in the stream of batches: the next batch to serve, to save and resume from.
struct DataPosition {
    std::size_t epoch = 0;  ///< the epoch, from 0
    std::size_t batch = 0;  ///< index of the next batch within the epoch

    /// Equal when the epoch and the batch are.
    bool operator==(const DataPosition&) const = default;
    /// "epoch batch", for a checkpoint's text metadata.
    std::string to_string() const;
    /// Throws DataError if the text is not two non-negative integers.
    static DataPosition parse(const std::string& text);
};

/// Serves the batches of every epoch in the order above, and can resume from any DataPosition.
class Batcher {
public:
    /// Throws UserError for batch_size 0 or no items.
    Batcher(std::vector<ItemLengths> lengths, BatchingOptions options);

    /// \return the number of items batched.
    std::size_t num_items() const { return lengths_.size(); }
    /// \return the batches in an epoch: items / batch_size, rounded up (down with drop_last).
    std::size_t batches_per_epoch() const;
    /// \return the options given at construction.
    const BatchingOptions& options() const { return options_; }

    /// All batches of an epoch (item indices), in the order they are served.
    std::vector<std::vector<std::size_t>> epoch_batches(std::size_t epoch) const;

    /// The batch at position(), then advances (rolling over to the next epoch).
    std::vector<std::size_t> next();
    /// \return where next() will serve from.
    const DataPosition& position() const { return position_; }
    /// Throws UserError if batch >= batches_per_epoch().
    void set_position(const DataPosition& position);

    /// Padded cells the batch would occupy: (longest question + longest answer) * batch size.
    std::size_t padded_size(const std::vector<std::size_t>& batch) const;

private:
    std::vector<ItemLengths> lengths_;
    BatchingOptions options_;
    DataPosition position_;
    std::size_t cached_epoch_ = 0;
    std::vector<std::vector<std::size_t>> cached_batches_;
};

}  // namespace loom
