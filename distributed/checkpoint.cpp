#include "distributed/checkpoint.hpp"

#include <mpi.h>

#include "core/errors.hpp"
#include "core/random.hpp"
#include "core/serialization.hpp"
#include "distributed/data_parallel.hpp"

namespace loom::distributed {

namespace {

constexpr const char* generators_key = "loom.distributed.generators";

// This process's generator states, as bytes.
std::string own_states(const Trainer& trainer) {
    ByteWriter out;
    const std::vector<Rng*>& generators = trainer.generators();
    out.u64(generators.size());
    for (const Rng* g : generators) out.str(rng_state(*g));
    return out.bytes();
}

}  // namespace

void save_checkpoint(Context& context, const Trainer& trainer, const std::string& path,
                     const TrainingPosition& position, const CheckpointExtras& extras) {
    // A sharded update left each parameter's learner state current on its owner alone.
    if (auto parallel = std::dynamic_pointer_cast<DataParallel>(trainer.reduction()))
        parallel->gather_state(trainer.learner());
    // Every process's generator states, to rank 0.
    const std::string mine = own_states(trainer);
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<std::size_t>(context.size())), offsets(lengths.size());
    const std::string agreement = "a checkpoint's random generator states";
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &request);
    context.wait(&request, 1, agreement);
    std::string all;
    if (context.is_root()) {
        int total = 0;
        for (std::size_t r = 0; r < lengths.size(); ++r) {
            offsets[r] = total;
            total += lengths[r];
        }
        all.resize(static_cast<std::size_t>(total));
    }
    MPI_Igatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD,
                 &request);
    context.wait(&request, 1, agreement);
    if (context.is_root()) {
        try {
            ByteWriter states;
            states.u64(lengths.size());
            for (std::size_t r = 0; r < lengths.size(); ++r)
                states.str(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
            CheckpointExtras with_states = extras;
            with_states[generators_key] = states.bytes();
            trainer.save_checkpoint(path, position, with_states);
        } catch (const std::exception& e) {
            context.fail(std::string("could not write the checkpoint: ") + e.what());
            throw;
        }
    }
    context.synchronize({}, "the end of a checkpoint's write");
}

Checkpoint load_checkpoint(Context& context, Trainer& trainer, const std::string& path) {
    Checkpoint c = trainer.load_checkpoint(path);
    const auto it = c.extras.find(generators_key);
    if (it == c.extras.end()) return c;  // written by one process: its generators are everyone's
    const std::string where = "checkpoint '" + path + "'";
    ByteReader in(it->second, where);
    const std::uint64_t ranks = in.u64();
    if (ranks != static_cast<std::uint64_t>(context.size()))
        throw UserError(where + " was written by a run of " + std::to_string(ranks) + " processes; resume it with " +
                        "mpirun -np " + std::to_string(ranks) + " (this run has " + std::to_string(context.size()) +
                        ")");
    std::string mine;
    for (std::uint64_t r = 0; r < ranks; ++r) {
        std::string states = in.str();
        if (r == static_cast<std::uint64_t>(context.rank())) mine = std::move(states);
    }
    ByteReader own(mine, where + " (rank " + std::to_string(context.rank()) + "'s generators)");
    const std::vector<Rng*>& generators = trainer.generators();
    if (own.u64() != generators.size())
        throw UserError(where + " holds another number of random generators than this model draws from");
    for (Rng* g : generators) *g = rng_from_state(own.str(), where);
    c.extras.erase(it);
    return c;
}

}  // namespace loom::distributed
