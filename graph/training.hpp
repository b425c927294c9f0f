#pragma once
// Training: learners, the trainer, progress printing and checkpoints.
#include "graph/checkpoint.hpp"
#include "graph/learners.hpp"
#include "graph/progress.hpp"
#include "graph/trainer.hpp"
