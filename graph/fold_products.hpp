// A rewrite pass over a compiled plan: an embedding read only by products folds into them.
#pragma once

#include "graph/compile.hpp"

namespace loom {

/// Rewrites every times(embedding(ids, table), W) and affine(embedding(ids, table), W, b) of
/// `plan` into one node of the embedding product op, with inputs (ids, table, W[, b]), when every
/// reader of the embedding is such a product (a bidirectional encoder's two input projections) and
/// it is no output, each product runs in the embedding's step (or loop), W is static and b, if any,
/// is a static bias of the product's shape. The op multiplies
/// only the distinct ids' rows of the table: a batch of R ids over a vocabulary of V then costs at
/// most V rows of the product, forward and backward, instead of R, with the same sums per row.
/// The embedding's node and, when it ran alone, its step leave the plan; `plan.index` maps each
/// product's node to its new node. compile runs it before fuse_scans; a plan it leaves alone is
/// unchanged.
void fold_embedding_products(Plan& plan);

}  // namespace loom
