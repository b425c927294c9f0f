#pragma once
/// \file
/// Training: learners, the trainer, progress printing, checkpoints and safetensors files.
#include "training/averaging.hpp"
#include "training/checkpoint.hpp"
#include "training/fit.hpp"
#include "training/learners.hpp"
#include "training/progress.hpp"
#include "training/safetensors.hpp"
#include "training/schedules.hpp"
#include "training/trainer.hpp"
