#pragma once
// What check_batch_invariance works with: an item's piece of a value, how pieces correspond, the
// batch orders tried, and inputs split into items so that any subset can be bound again.
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/value.hpp"
#include "graph/check_invariance.hpp"
#include "graph/compile.hpp"
#include "graph/executor.hpp"

namespace loom::invariance {

// One item's part of a value: [L, sample...] of a sequence, [sample...] of a batch row, or the
// whole of a value without dynamic axes; in double.
struct Piece {
    std::vector<std::size_t> shape;
    std::vector<double> data;
};

Piece piece_of(const Value& v, std::size_t position);

xt::xarray<double> row_of(const Value& v, std::size_t position);

std::string shape_str(const std::vector<std::size_t>& s);

// Calls f(alone_index, batched_index) for every element of an item's piece alone and the same
// element of its piece in the batch. Axes marked in `may_grow` (sample axes whose static size is 0:
// unpack's T_max) may be longer in the batch; every other axis must match. False when they do not.
template <class F>
bool correspond(const std::vector<std::size_t>& alone, const std::vector<std::size_t>& batched,
                const std::vector<char>& may_grow, F&& f) {
    if (alone.size() != batched.size()) return false;
    for (std::size_t d = 0; d < alone.size(); ++d)
        if (alone[d] != batched[d] && !(may_grow[d] && alone[d] < batched[d])) return false;
    const std::size_t count = std::accumulate(alone.begin(), alone.end(), std::size_t{1}, std::multiplies<>());
    std::vector<std::size_t> stride(batched.size(), 1);
    for (std::size_t d = batched.size(); d-- > 1;) stride[d - 1] = stride[d] * batched[d];
    for (std::size_t e = 0; e < count; ++e) {
        std::size_t rest = e, b = 0;
        for (std::size_t d = alone.size(); d-- > 0;) {
            b += (rest % alone[d]) * stride[d];
            rest /= alone[d];
        }
        f(e, b);
    }
    return true;
}

// Which axes of a node's item pieces may be longer in a batch: the static 0s of its sample shape
// (a sequence piece starts with its length, which must match).
std::vector<char> growable_axes(const PlanNode& n);

// How far apart two numbers are relative to the tolerance (<= 1 passes). Equal infinities and two
// NaNs agree: they are the graph's own, not the batch's.
double relative_error(double alone, double batched, const InvarianceOptions& o);

struct Order {
    std::string name;
    std::vector<std::size_t> items;  // items[p]: the item at position p
};

std::vector<Order> batch_orders(std::size_t n, const InvarianceOptions& o);

// A bound input split into items, so that any subset in any order can be bound again.
struct SplitInput {
    Variable var;
    Value shared;                           // a value without dynamic axes: bound as is
    std::vector<xt::xarray<double>> items;  // sequences [L, sample...] or rows [sample...]
    bool is_sequence = false;
    Shape sample;
};

Bindings bind_items(const std::vector<SplitInput>& inputs, const std::vector<std::size_t>& items, bool nan_padding);

}  // namespace loom::invariance
