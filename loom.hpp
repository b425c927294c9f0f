#pragma once
// loom: symbolic graphs over batches of sequences, recurrence loops, reverse-mode gradients.
// The one header a user includes.
#include "core/errors.hpp"
#include "core/gemm.hpp"
#include "core/random.hpp"
#include "core/sequence_layout.hpp"
#include "core/serialization.hpp"
#include "core/shape.hpp"
#include "core/value.hpp"
#include "graph/compile.hpp"
#include "graph/evaluate.hpp"
#include "graph/ops.hpp"
#include "graph/session.hpp"
#include "graph/training.hpp"
#include "graph/variable.hpp"
#include "layers/layers.hpp"
