#pragma once
/// \file
/// Data-parallel training through the Trainer: every process holds the whole model, trains on its
/// share of each global minibatch, and the gradients are summed over processes before the update;
/// with the replicated update every process then applies it alike, with the sharded one (the
/// default, below) each steps its share and sends the new values. Either way the parameters stay
/// identical everywhere.
///
///   loom::distributed::Context mpi(argc, argv);
///   auto parallel = loom::distributed::data_parallel(mpi);
///   TrainerOptions options;
///   options.reduction = parallel;                        // the only change to the Trainer
///   loom::distributed::ShardedBatcher batches(Batcher(lengths, batching), parallel);
///   ... trainer.train_minibatch(bindings for batches.next()) ...   // returns the global sums
///
/// The sums: a dense gradient is summed in place (MPI_Iallreduce) as soon as backward reports it
/// final (Session::backward's on_ready), so it travels while the rest of backward runs; one kept by
/// rows (an embedding table's) is gathered as its rows (MPI_Iallgatherv of row ids and values) after
/// backward and merged into the sorted union of every process's rows, each row summed in rank order:
/// the [vocabulary, dim] table is never densified, and every process gets the same rows in the same
/// order. The losses and counts the Trainer averages by are summed in rank order (Context::synchronize).
///
/// With a sharded update (the default; ZeRO stage 1) each parameter belongs to one process (whole
/// parameters, balanced by size): a dense gradient goes to its owner alone, which adds every
/// process's in rank order, the owner alone takes the learner's step for it and then sends the new
/// values to the others (MPI_Ibcast). The bytes each process sends are those of the allreduce
/// (its gradients of the others' parameters, its parameters' new values), the learner's work per
/// process is its share, and the update is bit for bit the one every process would take on those
/// sums. An embedding table's rows are gathered as without sharding and every process steps the
/// table (or, with shard_tables and a learner that moves every row, its owner steps it and sends it
/// whole). The learner's state of a parameter is then current on its owner only:
/// distributed::save_checkpoint brings it whole to rank 0 before writing.
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "distributed/context.hpp"
#include "training/trainer.hpp"

namespace loom::distributed {

/// How DataParallel sums and steps.
struct DataParallelOptions {
    /// Each process takes the learner's step for its share of the parameters only (above); false:
    /// every process steps every parameter on gradients summed by MPI_Iallreduce.
    bool shard_update = true;
    /// Sharded update: an embedding table (a gradient kept by rows) is stepped by its owner too,
    /// which then sends it whole. Off: every process steps every table on the gathered rows, so the
    /// bytes each process sends stay those of the replicated update (the table's [vocabulary, dim]
    /// values would travel every step otherwise; dense Adam moves every row).
    bool shard_tables = false;
};

/// The Trainer's GradientReduction over MPI (above): set it as TrainerOptions::reduction.
class DataParallel final : public GradientReduction, private UpdateShare {
public:
    /// A reduction over the processes of `context`, which must outlive it.
    explicit DataParallel(Context& context, DataParallelOptions options = {});
    ~DataParallel() override;

    /// This process's share of the next step is empty (a global minibatch smaller than the number of
    /// processes): it trains on a stand-in item (ShardedBatcher gives the global batch's first) and
    /// contributes nothing, neither loss nor gradient.
    void set_stand_in(bool stand_in) { stand_in_ = stand_in; }
    /// \return whether this process's share of the next step is a stand-in (set_stand_in).
    bool stand_in() const { return stand_in_; }
    /// \return the Context given at construction.
    Context& context() const { return context_; }
    /// @{
    /// Bytes this process gave to MPI in the last step: dense gradients, rows with their ids, and
    /// (sharded update) the new values of the parameters it owns.
    std::size_t dense_bytes() const { return dense_bytes_; }
    std::size_t row_bytes() const { return row_bytes_; }
    std::size_t parameter_bytes() const { return parameter_bytes_; }
    /// @}
    /// \return the options given at construction.
    const DataParallelOptions& options() const { return options_; }
    /// Sharded update: the process that steps parameter i (known from the first step on).
    int owner(std::size_t i) const;
    /// Sharded update: brings the state of every parameter of `learner` (one this reduction steps)
    /// from its owner to rank 0, which then holds it whole. Every process calls it;
    /// distributed::save_checkpoint does before writing.
    void gather_state(const Learner& learner);
    /// Seconds the last step spent in finish: waiting for sums still in flight when backward ended
    /// (communication not hidden behind it, plus any wait for slower processes) and gathering rows.
    double finish_seconds() const { return finish_seconds_; }
    /// When the last step reached the reduction's calls: combine began (forward ended) and returned
    /// (every process's forward ended), finish began (backward ended) and returned (the sums are
    /// done), and with a sharded update, this process's share was stepped (the new values then
    /// travel). With the caller's own times around train_minibatch they split a step into forward,
    /// waiting for the others, backward, the rest of the communication and the update.
    struct Moments {
        std::chrono::steady_clock::time_point combine_began, combined, finish_began, finished, stepped;
    };
    /// \return the moments of the last step.
    const Moments& moments() const { return moments_; }

    MinibatchResult combine(const MinibatchResult& local) override;
    void ready(Session& session, std::size_t parameter) override;
    void finish(Session& session) override;
    void failed(const std::string& what) override;
    /// Sharded update: this process's share (itself), else nullptr.
    UpdateShare* share() override { return sharded() ? this : nullptr; }
    /// Sharded update: sends the new values of this process's parameters and receives the others'.
    void updated(const Learner& learner, bool applied) override;
    /// False after a sharded step until gather_state brought the state to this process (rank 0).
    bool holds_whole_state() const override { return whole_state_; }

private:
    std::vector<char> stepped_here(const Learner& learner) override;
    void share_norms(std::vector<double>& square_sums) override;
    /// Starts the sums of the parameters whose turn has come, in one fixed order on every process
    /// (MPI needs collectives in the same order everywhere; workers report gradients in any order).
    void start_ready(Session& session);
    void start(Session& session, std::size_t i);
    template <class T>  // the session's precision
    void start_as(Session& session, std::size_t i);
    void progress();
    template <class T>
    void gather_rows(Session& session, std::size_t i);
    void assign_owners(const Session& session);
    bool sharded() const { return options_.shard_update && context_.size() > 1; }
    template <class T>
    void add_incoming(Session& session, std::size_t i);
    template <class T>
    void send_parameters(const Learner& learner);
    /// "step 3's `what`", naming an agreement in a timeout's message.
    std::string at_step(const std::string& what) const;

    Context& context_;
    DataParallelOptions options_;
    bool stand_in_ = false;
    std::size_t steps_ = 0;  ///< steps begun (combine calls), from 1 in messages
    std::mutex mutex_;
    std::vector<char> ready_, started_;
    std::vector<std::size_t> order_;    ///< the order sums start in
    std::size_t next_ = 0;              ///< position in order_
    std::vector<std::size_t> by_rows_;  ///< gathered after backward
    struct Requests;                    ///< MPI_Requests: the header needs no mpi.h
    std::unique_ptr<Requests> requests_;
    std::size_t dense_bytes_ = 0, row_bytes_ = 0, parameter_bytes_ = 0;
    /// Sharded update: owner of each parameter; the others' gradients of this process's parameters
    /// (one part per other process, in rank order) and the parameters waiting for them.
    std::vector<int> owner_;
    std::vector<ByDType<VectorOf>> incoming_;
    std::vector<std::size_t> owned_;
    std::vector<char> by_rows_table_;  ///< gradient kept by rows (an embedding table)
    std::vector<char> replicated_;     ///< stepped by every process (tables, unless shard_tables)
    bool whole_state_ = true;
    Session* session_ = nullptr;  ///< the session of the step being finished, for its update
    double finish_seconds_ = 0;
    Moments moments_;
};

/// \var DataParallel::Moments::combine_began
/// combine was called (this process's forward ended).
/// \var DataParallel::Moments::combined
/// combine returned (every process's forward ended).
/// \var DataParallel::Moments::finish_began
/// finish was called (backward ended).
/// \var DataParallel::Moments::finished
/// finish returned (the sums are done).
/// \var DataParallel::Moments::stepped
/// Sharded update: this process's share of the parameters was stepped.

/// \return a DataParallel over `context`, shared as TrainerOptions::reduction and ShardedBatcher take it.
std::shared_ptr<DataParallel> data_parallel(Context& context, DataParallelOptions options = {});

}  // namespace loom::distributed
