#pragma once
// Data-parallel training through the Trainer: every process holds the whole model, trains on its
// share of each global minibatch, and the gradients are summed over processes before the update,
// which every process then applies alike, so parameters stay identical everywhere.
//
//   loom::distributed::Context mpi(argc, argv);
//   auto parallel = loom::distributed::data_parallel(mpi);
//   TrainerOptions options;
//   options.reduction = parallel;                        // the only change to the Trainer
//   loom::distributed::ShardedBatcher batches(Batcher(lengths, batching), parallel);
//   ... trainer.train_minibatch(bindings for batches.next()) ...   // returns the global sums
//
// The sums: a dense gradient is summed in place (MPI_Iallreduce) as soon as backward reports it
// final (Session::backward's on_ready), so it travels while the rest of backward runs; one kept by
// rows (an embedding table's) is gathered as its rows (MPI_Allgatherv of row ids and values) after
// backward and merged into the sorted union of every process's rows, each row summed in rank order:
// the [vocabulary, dim] table is never densified, and every process gets the same rows in the same
// order. The losses and counts the Trainer averages by are summed in rank order (Context::synchronize).
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "distributed/context.hpp"
#include "training/trainer.hpp"

namespace loom::distributed {

class DataParallel final : public GradientReduction {
public:
    explicit DataParallel(Context& context);
    ~DataParallel() override;

    // This process's share of the next step is empty (a global minibatch smaller than the number of
    // processes): it trains on a stand-in item (ShardedBatcher gives the global batch's first) and
    // contributes nothing, neither loss nor gradient.
    void set_stand_in(bool stand_in) { stand_in_ = stand_in; }
    bool stand_in() const { return stand_in_; }
    Context& context() const { return context_; }
    // Bytes this process gave to MPI in the last step: dense gradients, and rows with their ids.
    std::size_t dense_bytes() const { return dense_bytes_; }
    std::size_t row_bytes() const { return row_bytes_; }
    // Seconds the last step spent in finish: waiting for sums still in flight when backward ended
    // (communication not hidden behind it, plus any wait for slower processes) and gathering rows.
    double finish_seconds() const { return finish_seconds_; }

    MinibatchResult combine(const MinibatchResult& local) override;
    void ready(const Session& session, std::size_t parameter) override;
    void finish(const Session& session) override;
    void failed(const std::string& what) override;

private:
    // Starts the sums of the parameters whose turn has come, in one fixed order on every process
    // (MPI needs collectives in the same order everywhere; workers report gradients in any order).
    void start_ready(const Session& session);
    void start(const Session& session, std::size_t i);
    template <class T>  // the session's precision
    void start_as(const Session& session, std::size_t i);
    void progress();
    template <class T>
    void gather_rows(const Session& session, std::size_t i);

    Context& context_;
    bool stand_in_ = false;
    std::mutex mutex_;
    std::vector<char> ready_, started_;
    std::vector<std::size_t> order_;                 // the order sums start in
    std::size_t next_ = 0;                           // position in order_
    std::vector<std::size_t> by_rows_, dense_rows_;  // gathered after backward
    struct Requests;                                 // MPI_Requests: the header needs no mpi.h
    std::unique_ptr<Requests> requests_;
    std::size_t dense_bytes_ = 0, row_bytes_ = 0;
    double finish_seconds_ = 0;
};

std::shared_ptr<DataParallel> data_parallel(Context& context);

}  // namespace loom::distributed
