#pragma once
/// \file
/// loom: symbolic graphs over batches of sequences, recurrence loops, reverse-mode gradients.
/// The one header a user includes.
#include "core/allocator.hpp"
#include "core/errors.hpp"
#include "core/gemm.hpp"
#include "core/packed_gemm.hpp"
#include "core/quantized_gemm.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "core/sequence_layout.hpp"
#include "core/serialization.hpp"
#include "core/shape.hpp"
#include "core/value.hpp"
#include "core/version.hpp"
#include "core/weight_precision.hpp"
#include "data/batching.hpp"
#include "data/ctf.hpp"
#include "data/output_files.hpp"
#include "data/pronunciations.hpp"
#include "data/word_lists.hpp"
#include "graph/check_invariance.hpp"
#include "graph/compile.hpp"
#include "graph/dot.hpp"
#include "graph/evaluate.hpp"
#include "graph/interrupt.hpp"
#include "graph/ops.hpp"
#include "graph/session.hpp"
#include "graph/variable.hpp"
#include "graph/weighted_gradients.hpp"
#include "layers/layers.hpp"
#include "plot/svg_plot.hpp"
#include "qa/metrics.hpp"
#include "qa/overlap.hpp"
#include "qa/qa_data.hpp"
#include "qa/synthetic_qa.hpp"
#include "text/characters.hpp"
#include "text/tokenize.hpp"
#include "text/vocabulary.hpp"
#include "text/words.hpp"
#include "training/model_file.hpp"
#include "training/training.hpp"

/// \mainpage loom API reference
/// loom builds symbolic graphs over batches of sequences, runs recurrence loops and computes
/// reverse-mode gradients. `#include "loom.hpp"` brings in every public header; programs that train
/// over MPI also include distributed/distributed.hpp and link loom::distributed.
///
/// Where to start:
/// - graph/variable.hpp: inputs, parameters, constants and placeholders (loom::Variable);
/// - graph/ops.hpp: the ops, loom::sequence and loom::batch included;
/// - graph/evaluate.hpp and graph/session.hpp: running a graph (loom::evaluate, loom::gradients,
///   loom::Session);
/// - layers/layers.hpp: Dense, Embedding, the recurrent cells, attention, the decoder (loom::layers);
/// - training/training.hpp: learners, loom::Trainer and loom::fit, checkpoints, safetensors files
///   (training/safetensors.hpp: weights exchanged with PyTorch); training/model_file.hpp;
/// - core/value.hpp: loom::Value, the data a graph is given and gives back;
/// - data/: readers of CTF and pronunciation files, batching, minibatches, the checks and atomic
///   writes of a program's output files (data/output_files.hpp);
/// - text/: the English tokenizer, vocabularies, word statistics (stopwords, IDF, a stemmer), the
///   characters of UTF-8 text for character-level models (text/characters.hpp);
/// - qa/: answer selection: QA pair files and their minibatches, word-overlap features, synthetic QA
///   data, ranking metrics (MAP, MRR, paired bootstrap);
/// - plot/: SVG charts of training curves and attention weights (loom::svg).
///
/// docs/architecture.md in the repository tells how the engine is built.

/// \namespace loom
/// Everything of loom: values and shapes (core/), data readers (data/), text (text/), question
/// answering (qa/), the graph, its ops and the engine that runs it (graph/), layers (loom::layers),
/// training (training/) and charts (plot/, loom::svg).
/// \namespace loom::sequence
/// Ops over a sequence axis, as CNTK's C.sequence: first and last steps, reductions over time,
/// gather, unpack, where, scatter.
/// \namespace loom::batch
/// Ops across the items of a batch value: reductions, softmax and broadcast_as.
/// \namespace loom::layers
/// Layer factories composed from the public ops, each holding its own parameters.
/// \namespace loom::svg
/// SVG charts of training curves and attention weights.
/// \namespace loom::data_text
/// The text-file plumbing every reader shares (line reading, number parsing); internal to the readers.
/// \namespace loom::distributed
/// Data-parallel training over MPI, in the loom::distributed library (distributed/distributed.hpp).
