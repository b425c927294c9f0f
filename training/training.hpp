#pragma once
/// \file
/// Training: learners, the trainer, progress printing and checkpoints.
#include "training/averaging.hpp"
#include "training/checkpoint.hpp"
#include "training/fit.hpp"
#include "training/learners.hpp"
#include "training/progress.hpp"
#include "training/trainer.hpp"
