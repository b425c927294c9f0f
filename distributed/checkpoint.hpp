#pragma once
/// \file
/// Checkpoints of a data-parallel run: one file, written by rank 0 (the parameters are the same on
/// every process; under the sharded update each owner's learner state is first gathered to rank 0,
/// DataParallel::gather_state), holding besides the Trainer's usual records the state of
/// every process's random generators (dropout draws a different number of values on each, for its
/// share's shape), so that a run resumed with the same number of processes continues bit for bit.
#include <string>

#include "distributed/context.hpp"
#include "training/trainer.hpp"

namespace loom::distributed {

/// Every process calls it at the same step; returns once the file is written, or every process
/// throws the same UserError when rank 0 could not write it.
/// \param context  the run's processes
/// \param trainer  whose parameters, learner state and generators are saved
/// \param path  the file rank 0 writes
/// \param position  where training was in its data
/// \param extras  the caller's own records
void save_checkpoint(Context& context, const Trainer& trainer, const std::string& path,
                     const TrainingPosition& position = {}, const CheckpointExtras& extras = {});

/// Every process loads the same file (Trainer::load_checkpoint) and takes back its own generators'
/// states. A file written by another number of processes is a UserError on every process.
Checkpoint load_checkpoint(Context& context, Trainer& trainer, const std::string& path);

}  // namespace loom::distributed
