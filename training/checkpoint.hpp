#pragma once
/// \file
/// Checkpoints: parameters (with names, shapes and precisions), the learner's state, where the data
/// reader was and the caller's extras, in one checked file (core/serialization.hpp: temporary name,
/// flush, rename, checksum). A failed save leaves the previous checkpoint untouched; a damaged file is
/// reported as a DataError and nothing in the model or the learner is changed.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/variable.hpp"

namespace loom {

class Learner;

/// Where training was in its data, so a resumed run goes on with the next minibatch.
struct TrainingPosition {
    std::uint64_t epoch = 0;      ///< the epoch under way, from 0
    std::uint64_t minibatch = 0;  ///< minibatches done in this epoch
    std::uint64_t samples = 0;    ///< samples done in total
    std::string reader_state;     ///< opaque bytes a reader can restore itself from
    /// Equal when every field is.
    bool operator==(const TrainingPosition&) const = default;
};

/// The caller's own named records (bytes), e.g. the best validation score so far.
using CheckpointExtras = std::map<std::string, std::string>;

/// What load_checkpoint gives back besides the parameters and the learner's state.
struct Checkpoint {
    TrainingPosition position;  ///< where the saved run was in its data
    CheckpointExtras extras;    ///< the records the caller saved
};

/// `learner` may be null (parameters only). A parameter (or learner state) holding a NaN or an
/// infinity is refused with a UserError naming it, before anything is written: a checkpoint is what
/// a run goes back to, and a non-finite value in it would poison every run resumed from it.
/// \param path  the file, replaced atomically (a directory, a device, a FIFO or a socket there is
///   refused with a UserError, before anything is written)
/// \param parameters  saved with their names, shapes and precisions, in this order
/// \param learner  its state is saved too unless null
/// \param position  where training was in its data
/// \param extras  the caller's own records
void save_checkpoint(const std::string& path, const std::vector<Parameter>& parameters, const Learner* learner,
                     const TrainingPosition& position = {}, const CheckpointExtras& extras = {});

/// Restores the parameters' values and, when `learner` is not null, its state. Parameters are
/// matched by position and must have the same names, shapes and precisions (float or double) as
/// when saved; otherwise a UserError names the first mismatching parameter. Everything is checked before anything is
/// changed. A truncated or corrupted file throws DataError. `check_extras`, when given, sees the
/// extras once the rest of the file has been checked and before anything is changed; it throws to
/// refuse the file (a Trainer checks its own records so).
/// \param path  a file save_checkpoint wrote
/// \param parameters  the same parameters, in the same order, as when saved
/// \param learner  gets its state back unless null
/// \param check_extras  may refuse the file from its extras (may be empty)
/// \return the saved position and extras.
Checkpoint load_checkpoint(const std::string& path, const std::vector<Parameter>& parameters, Learner* learner,
                           const std::function<void(const CheckpointExtras&)>& check_extras = {});

}  // namespace loom
