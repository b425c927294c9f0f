#pragma once
/// \file
/// The random generators a graph draws from (dropout's), for whoever saves and restores their
/// states with a model (the Trainer's checkpoints), without reaching into the ops.
#include <vector>

#include "core/random.hpp"
#include "graph/variable.hpp"

namespace loom {

/// \return the generators of the random ops that `outputs` depend on (through bound placeholders
/// and loops), each once, in node creation order: the same order in every build of the same model.
std::vector<Rng*> random_generators(const std::vector<Variable>& outputs);

}  // namespace loom
