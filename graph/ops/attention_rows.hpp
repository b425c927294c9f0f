#pragma once
// What attention's two forms share (graph/ops/attention.cpp over sequences, graph/ops/attention_memory.cpp
// over a memory) beyond the math (core/attention_product.hpp): where a gradient's rows lie, and the
// checks of the heads. Internal to graph/ops/.
#include <span>
#include <string>

#include "core/attention_product.hpp"
#include "core/errors.hpp"
#include "graph/op.hpp"
#include "graph/ops.hpp"

namespace loom::attention_detail {

// The rows of input i's gradient where `r` lies in input i (none when it needs no gradient).
template <class T>
Rows<T> gradient_rows(const OpCall<T>& c, std::size_t i, const Rows<const T>& r) {
    if (!c.in_grad[i]) return {nullptr, 0};
    return {c.in_grad[i].data + (r.data - c.in[i].data), r.stride};
}

inline std::size_t dim_of(const TypeInfo& t, std::size_t i) { return t.shape.rank() > i ? t.shape[i] : 0; }

inline void check_heads(const std::string& op, std::span<const TypeInfo> in, std::size_t key_dim, std::size_t query_dim,
                        std::size_t value_dim, std::size_t heads) {
    if (heads == 0) shape_error(op, in, "heads must be at least 1");
    if (query_dim != key_dim)
        shape_error(op, in,
                    "the queries (" + std::to_string(query_dim) + ") and keys (" + std::to_string(key_dim) +
                        ") must have one size");
    if (key_dim % heads != 0 || value_dim % heads != 0)
        shape_error(op, in,
                    "the key size " + std::to_string(key_dim) + " and value size " + std::to_string(value_dim) +
                        " must be multiples of the " + std::to_string(heads) + " heads");
}

// attention_memory.cpp: attention() whose queries and keys are not sequences (one query per item
// over a memory): its checks, and the form of MemoryAttention its inputs call for.
Variable memory_attention(const Variable& queries, const Variable& keys, const Variable& values,
                          const AttentionOptions& options, const std::string& name);

}  // namespace loom::attention_detail
