// Rewrite passes over a compiled plan: an embedding read only by products folds into them; rows
// gathered or picked for attention over a memory are read by it where they lie.
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

/// Rewrites every attention over a memory whose keys and values are index_select(items, index) by
/// one index (the key mask picked by it too; no step's own key and value), into the form of the op
/// that reads the items through the index (graph/ops/attention_memory.cpp): each hypothesis's
/// encoder memory is then never copied per row. (A key/value cache kept as pages needs no pass:
/// attention() over paged_rows reads the tables itself.) The op's type must come out the same, and
/// the picks run in the attention's step. A pick no other node reads, and that is no output, leaves
/// the plan; one read elsewhere still runs for its other readers. `plan.index` maps each
/// attention's node to its new node. compile runs it after fold_embedding_products; a plan it
/// leaves alone is unchanged.
void fold_attention_rows(Plan& plan);

}  // namespace loom
