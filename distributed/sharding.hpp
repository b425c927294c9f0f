#pragma once
/// \file
/// Each process's share of every global minibatch, so that together they train on exactly the
/// minibatches one process would: the global batches come from a Batcher, whose order is a pure
/// function of (seed, epoch), the same on every process; process r takes the r-th of `size`
/// contiguous, nearly equal parts (sizes differ by at most one). Resuming from a DataPosition
/// continues exactly, as with the Batcher alone.
#include <cstddef>
#include <memory>
#include <vector>

#include "data/batching.hpp"
#include "distributed/data_parallel.hpp"

namespace loom::distributed {

/// Items [n * rank / size, n * (rank + 1) / size) of `global`: empty when n < size for some ranks.
std::vector<std::size_t> share_of(const std::vector<std::size_t>& global, int rank, int size);

/// A Batcher's global minibatches, of which this process serves its share (above).
class ShardedBatcher {
public:
    /// `parallel` is told when this process's share is empty (a global batch smaller than the number
    /// of processes): next() then returns the global batch's first item as a stand-in, whose loss and
    /// gradient the reduction leaves out.
    ShardedBatcher(Batcher global, std::shared_ptr<DataParallel> parallel);

    /// This process's share of the next global minibatch; every process calls it once per step.
    std::vector<std::size_t> next();
    /// The global minibatch the last next() cut.
    const std::vector<std::size_t>& global_batch() const { return global_batch_; }
    /// \return where the global Batcher will serve from (the same on every process).
    const DataPosition& position() const { return batcher_.position(); }
    /// Resumes the global Batcher at `position` (Batcher::set_position).
    void set_position(const DataPosition& position) { batcher_.set_position(position); }
    /// \return the global minibatches per epoch.
    std::size_t batches_per_epoch() const { return batcher_.batches_per_epoch(); }
    /// \return the global Batcher.
    const Batcher& batcher() const { return batcher_; }

private:
    Batcher batcher_;
    std::shared_ptr<DataParallel> parallel_;
    std::vector<std::size_t> global_batch_;
};

}  // namespace loom::distributed
