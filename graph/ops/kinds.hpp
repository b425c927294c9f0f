#pragma once
// What compile and pass planning ask of particular ops, each answered in that op's own family file
// (rather than as virtuals on Op that one op each overrides). Internal to graph/.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom {

struct Plan;

// A differentiable element-wise binary op z = f(a, b) as plain functions, for code that runs it
// outside the op (the fused scan).
template <class T>
struct BinaryKernel {
    T (*f)(T a, T b) = nullptr;
    T (*da)(T a, T b, T z) = nullptr;  // dz/da
    T (*db)(T a, T b, T z) = nullptr;  // dz/db
};
struct BinaryKernels {
    std::string name;
    BinaryKernel<float> f32;
    BinaryKernel<double> f64;
};
// elementwise.cpp: the kernels of a differentiable element-wise binary op, else nullptr.
const BinaryKernels* binary_kernels(const Op& op);

// scan.cpp: the op that runs r = f(z, element_select(cond, c, delay(r, init))) (delay of one step
// in `direction`, +1 past, -1 future) as one scan over time; inputs (z, cond, c, init). compile
// rewrites such a loop into one node of it (`scan_fits` says whether the operands allow it).
std::shared_ptr<const Op> select_delay_scan(const BinaryKernels& f, int direction);
bool scan_fits(const TypeInfo& z, const TypeInfo& cond, const TypeInfo& c, const TypeInfo& init);

// embedding.cpp and linear.cpp: the fold of an embedding read only by a product
// (graph/fold_products.hpp). `embedding_product(bias)` runs times(embedding(ids, table), W), plus a
// bias of the output's shape when `bias`, on inputs (ids, table, W[, b]).
bool is_embedding(const Op& op);
std::shared_ptr<const Op> embedding_product(bool bias);
// times(x, W) (0) or affine(x, W, b) (1) with W not transposed, else -1.
int plain_product_addends(const Op& op);

// embedding.cpp: whether `op` is index_select's (one row picked per row by an index), which
// attention over a memory reads in place.
bool is_index_select(const Op& op);

// paged_rows.cpp: the page lists of a paged_rows node (a key/value cache kept as pages), which
// attention() reads with the node's table in place of the node; null for any other node.
std::shared_ptr<const PageLists> paged_rows_pages(const Node& node);

// attention_memory.cpp: for plan node `at`, attention over a memory whose keys, values and mask are
// index_select's picks by one index: the op that reads those rows where they lie, its inputs (plan
// indices: the items and the index), and the picking nodes it reads around. A null op where there
// is none (graph/fold_products.hpp: fold_attention_rows).
struct AttentionInPlace {
    std::shared_ptr<const Op> op;
    std::vector<int> inputs, folded;
};
AttentionInPlace attention_rows_in_place(const Plan& plan, int at);

// random.cpp: a seed for the dropout an op does inside itself (attention's weights): a value
// [dropout_seed_size] on `like`'s axis, every row alike: in training mode one fresh draw of the
// node's own generator per evaluation (seeded by `seed`; 0: from global_rng()) in four 16-bit
// parts (exact in float), then 1; all 0 in inference mode. An op that drops from it decides the
// same drops in forward and backward without keeping a mask.
inline constexpr std::size_t dropout_seed_size = 5;
Variable dropout_seed(const Variable& like, std::uint64_t seed);
// attention.cpp: attention over sequences with dropout on its weights drawn from `seed` (a value in
// dropout_seed's form), which a test may hold fixed from one evaluation to the next.
Variable attention_dropping(const Variable& queries, const Variable& keys, const Variable& values,
                            const AttentionOptions& options, const Variable& seed, const std::string& name = {});

}  // namespace loom
