#pragma once
/// \file
/// loom::layers: callables that own their parameters, composed from the public ops.
#include "graph/mode.hpp"
#include "layers/attention.hpp"
#include "layers/decoder.hpp"
#include "layers/layer.hpp"
#include "layers/lstm_lm.hpp"
#include "layers/recurrent.hpp"
#include "layers/transformer.hpp"
