// One table drives the finite-difference check of every non-sequence op in graph/ops.hpp, in
// double. A case builds its graph from inputs the harness makes (sequence inputs on one shared axis,
// bound to 3 sequences of lengths 1, 3 and 7; batch inputs of 3 rows; parameters), each with the
// value range the op needs (positive for log / sqrt, away from kinks); everything created as
// differentiable is checked. Each family runs as its own TEST_CASE over its rows of the table.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::default_lengths;

namespace {

class Env {
public:
    // A sequence input on the shared axis; `differentiate` = false for labels and conditions.
    Variable seq(const Shape& shape, double lo = -1, double hi = 1, bool differentiate = true) {
        Variable v = sequence::input_variable(shape, "s" + std::to_string(++count_), axis_);
        bindings_[v] = Value::sequences(testing::random_sequences(shape, default_lengths, ++seed_, lo, hi));
        if (!differentiate) return v;
        wrt_.push_back(v);
        return identity(v);  // an intermediate value, not a leaf: see run_family
    }
    Variable labels(const Shape& shape, double lo = 0, double hi = 1) { return seq(shape, lo, hi, false); }
    // Whole-number ids in [0, n), shape [1], on the shared axis.
    Variable ids(std::size_t n) {
        Variable v = sequence::input_variable({1}, "ids", axis_);
        auto data = testing::random_sequences({1}, default_lengths, ++seed_, 0, static_cast<double>(n) - 1e-9);
        for (auto& s : data) s = xt::floor(s);
        bindings_[v] = Value::sequences(data);
        return v;
    }
    // A batch input: one row per sequence.
    Variable batch(const Shape& shape, double lo = -1, double hi = 1) {
        Variable v = input_variable(shape, "b" + std::to_string(++count_));
        bindings_[v] = Value::batch(testing::random_rows(shape, default_lengths.size(), ++seed_, lo, hi));
        wrt_.push_back(v);
        return identity(v);
    }
    // A static input [N, ...] (every item's memory), bound to one tensor.
    Variable items(const Shape& shape, double lo = -1, double hi = 1) {
        Variable v = static_input_variable(shape, "i" + std::to_string(++count_));
        bindings_[v] = Value::tensor(testing::random_tensor(shape, ++seed_, lo, hi));
        wrt_.push_back(v);
        return identity(v);
    }
    // A static input bound to `value`, not differentiated (a mask).
    Variable fixed(const xt::xarray<double>& value) {
        Variable v = static_input_variable(Shape(std::vector<std::size_t>(value.shape().begin(), value.shape().end())),
                                           "f" + std::to_string(++count_));
        bindings_[v] = Value::tensor(value);
        return v;
    }
    // A batch index [1], one row per sequence: the item number each row reads.
    Variable row_items(const std::vector<double>& items) {
        Variable v = input_variable({1}, "index");
        xt::xarray<double> a = xt::zeros<double>({items.size(), std::size_t{1}});
        for (std::size_t r = 0; r < items.size(); ++r) a(r, 0) = items[r];
        bindings_[v] = Value::batch(a);
        return v;
    }
    // Batch indices [k], one row of them per sequence: the table rows each row reads.
    Variable row_indices(const std::vector<std::vector<double>>& rows) {
        Variable v = input_variable({rows[0].size()}, "indices");
        xt::xarray<double> a = xt::zeros<double>({rows.size(), rows.empty() ? 0 : rows[0].size()});
        for (std::size_t r = 0; r < rows.size(); ++r)
            for (std::size_t j = 0; j < rows[r].size(); ++j) a(r, j) = rows[r][j];
        bindings_[v] = Value::batch(a);
        return v;
    }
    Parameter param(const Shape& shape, double lo = -1, double hi = 1) {
        Parameter p = parameter(testing::random_tensor(shape, ++seed_, lo, hi), "p" + std::to_string(++count_));
        wrt_.push_back(p);
        return p;
    }
    const Bindings& bindings() const { return bindings_; }
    const std::vector<Variable>& wrt() const { return wrt_; }

private:
    SequenceAxis axis_;
    Bindings bindings_;
    std::vector<Variable> wrt_;
    std::uint64_t seed_ = 100;
    int count_ = 0;
};

struct Case {
    std::string family;
    std::string name;
    std::function<Variable(Env&)> build;
    GradientCheckOptions options = {};
};

// Looser options for ops whose second derivative is large (log, reciprocal, divide near small
// values) so that the central difference's O(h^2) error stays within tolerance.
GradientCheckOptions loose() {
    GradientCheckOptions o;
    o.epsilon = 1e-5;
    o.relative_tolerance = 1e-3;
    o.absolute_tolerance = 1e-5;
    return o;
}

const std::vector<Case>& table() {
    static const std::vector<Case> cases = {
        // ---- element-wise, binary (with broadcasting) ----
        {"elementwise", "plus seq+seq", [](Env& e) { return plus(e.seq({3}), e.seq({3})); }},
        {"elementwise", "plus seq+param", [](Env& e) { return plus(e.seq({3}), e.param({3})); }},
        {"elementwise", "plus seq+batch", [](Env& e) { return plus(e.seq({3}), e.batch({3})); }},
        {"elementwise", "plus [3,1]+[1,4] seq x static",
         [](Env& e) {
             return plus(e.seq({3, 1}), e.param({1, 4}));
         }},
        {"elementwise", "plus [3,1] batch + [1,4] seq",
         [](Env& e) {
             return plus(e.batch({3, 1}), e.seq({1, 4}));
         }},
        {"elementwise", "minus", [](Env& e) { return minus(e.seq({3}), e.param({3})); }},
        {"elementwise", "element_times", [](Env& e) { return element_times(e.seq({3}), e.seq({3})); }},
        {"elementwise", "element_times [3,1]x[1,4]",
         [](Env& e) {
             return element_times(e.seq({3, 1}), e.param({1, 4}));
         }},
        {"elementwise", "element_times seq x batch",
         [](Env& e) {
             return element_times(e.seq({2, 3}), e.batch({3}));
         }},
        {"elementwise", "element_divide", [](Env& e) { return element_divide(e.seq({3}), e.seq({3}, 0.5, 2)); },
         loose()},
        {"elementwise", "element_divide by batch",
         [](Env& e) { return element_divide(e.seq({3}), e.batch({1}, 0.5, 2)); }, loose()},
        {"elementwise", "log_add_exp", [](Env& e) { return log_add_exp(e.seq({3}, -3, 3), e.seq({3}, -3, 3)); }},
        {"elementwise", "log_add_exp seq x param",
         [](Env& e) {
             return log_add_exp(e.seq({3, 1}), e.param({1, 2}));
         }},
        // Random points: a tie between the operands (the kink) has probability zero.
        {"elementwise", "element_max", [](Env& e) { return element_max(e.seq({4}), e.seq({4})); }},
        {"elementwise", "element_min", [](Env& e) { return element_min(e.seq({4}), e.param({4})); }},
        {"elementwise", "element_select",
         [](Env& e) { return element_select(greater(e.labels({4}, -1, 1), 0.0), e.seq({4}), e.seq({4})); }},
        {"elementwise", "element_select broadcast",
         [](Env& e) {
             return element_select(greater(e.labels({3, 1}, -1, 1), 0.0), e.seq({3, 1}), e.param({1, 2}));
         }},
        {"elementwise", "clip",
         [](Env& e) { return clip(e.seq({5}, -1, 1), e.param({5}, -0.6, -0.4), e.param({1}, 0.3, 0.5)); }},
        // Comparisons are flat: the analytic and numeric gradients are both zero away from ties.
        {"elementwise", "greater less equal",
         [](Env& e) {
             Variable a = e.seq({3}), b = e.seq({3});
             return greater(a, b) + less(a, b) + equal(a, b) + greater_equal(a, b) + less_equal(a, b) + not_equal(a, b);
         }},
        // ---- element-wise, unary ----
        {"elementwise", "negate", [](Env& e) { return negate(e.seq({3})); }},
        {"elementwise", "exp", [](Env& e) { return exp(e.seq({3}, -2, 2)); }},
        {"elementwise", "log", [](Env& e) { return log(e.seq({3}, 0.5, 3)); }, loose()},
        {"elementwise", "sqrt", [](Env& e) { return sqrt(e.seq({3}, 0.5, 3)); }},
        {"elementwise", "square", [](Env& e) { return square(e.seq({3})); }},
        {"elementwise", "abs", [](Env& e) { return abs(e.seq({3}, 0.1, 1) * e.param({3}, -1, 1)); }},
        {"elementwise", "tanh", [](Env& e) { return tanh(e.seq({3}, -2, 2)); }},
        {"normalization", "layer_norm", [](Env& e) { return layer_norm(e.seq({4}), e.param({4}), e.param({4})); }},
        {"normalization", "layer_norm in a batch value, over the last of two axes",
         [](Env& e) {
             return layer_norm(e.batch({2, 3}), e.param({3}), e.param({3}), 1e-3);
         }},
        {"attention", "attention, 2 heads, causal",
         [](Env& e) {
             Variable q = e.seq({4}), k = e.seq({4}), v = e.seq({6});
             return attention(q, k, v, {.heads = 2, .causal = true});
         }},
        {"attention", "attention_weights, 2 heads",
         [](Env& e) { return square(attention_weights(e.seq({4}), e.seq({4}), {.heads = 2})); }},
        // Every item's memory read through the index: rows 0 and 2 share item 1, whose gradients
        // they add into; the mask leaves 3 and 5 keys.
        {"attention", "attention over memory picked by one index, masked",
         [](Env& e) {
             Variable index = e.row_items({1, 0, 1});
             Variable keys = index_select(e.items({2, 5, 4}), index), values = index_select(e.items({2, 5, 6}), index);
             Variable mask = index_select(e.fixed({{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}}), index);
             return attention(e.batch({4}), keys, values, {.heads = 2, .key_mask = mask});
         }},
        {"attention", "attention over a cache and the step's own key and value",
         [](Env& e) {
             return attention(e.batch({4}), e.batch({3, 4}), e.batch({3, 6}),
                              {.heads = 2, .step_key = e.batch({4}), .step_value = e.batch({6})});
         }},
        {"attention", "attention over pages: rows of tables read through one page list per row, rows shared",
         [](Env& e) {
             auto pages = std::make_shared<const PageLists>(std::vector<std::size_t>{4, 0, 4, 1, 1, 2, 3, 0, 2}, 3, 5);
             Variable query = e.batch({4});
             return attention(query, paged_rows(e.items({5, 4}), pages, query),
                              paged_rows(e.items({5, 6}), pages, query), {.heads = 2});
         }},
        {"attention", "attention over pages of their own for keys and values and the step's own key and value",
         [](Env& e) {
             Variable query = e.batch({4});
             Variable keys =
                 paged_rows(e.items({3, 4}),
                            std::make_shared<const PageLists>(std::vector<std::size_t>{2, 0, 1, 1, 0, 2}, 3, 3), query);
             Variable values =
                 paged_rows(e.items({4, 6}),
                            std::make_shared<const PageLists>(std::vector<std::size_t>{3, 0, 1, 2, 0, 0}, 3, 4), query);
             return attention(query, keys, values, {.heads = 2, .step_key = e.batch({4}), .step_value = e.batch({6})});
         }},
        {"elementwise", "sin", [](Env& e) { return sin(e.seq({3}, -4, 4)); }},
        {"elementwise", "cos", [](Env& e) { return cos(e.seq({3}, -4, 4)); }},
        {"elementwise", "sigmoid", [](Env& e) { return sigmoid(e.seq({3}, -4, 4)); }},
        {"elementwise", "relu", [](Env& e) { return relu(e.seq({6}, -1, 1)); }},
        {"elementwise", "gelu", [](Env& e) { return gelu(e.seq({5}, -4, 4)); }},
        {"elementwise", "softplus", [](Env& e) { return softplus(e.seq({3}, -4, 4)); }},
        {"elementwise", "reciprocal", [](Env& e) { return reciprocal(e.seq({3}, 0.5, 2)); }, loose()},
        // Steps, away from their jumps: a gradient of 0 that the differences must see too.
        {"elementwise", "floor", [](Env& e) { return floor(e.seq({3}, 0.2, 0.8)) * e.seq({3}); }},
        {"elementwise", "ceil", [](Env& e) { return ceil(e.seq({3}, -0.8, -0.2)) * e.seq({3}); }},
        {"elementwise", "round", [](Env& e) { return round(e.seq({3}, 0.6, 1.4)) * e.seq({3}); }},
        {"elementwise", "identity", [](Env& e) { return identity(e.param({3}) * e.seq({3})); }},
        {"elementwise", "operators + - * / unary -",
         [](Env& e) {
             Variable a = e.seq({3}), b = e.seq({3}, 0.5, 2);
             Parameter w = e.param({3});
             return (a + w) * b - a / b + (-w);
         },
         loose()},
        // ---- linear ----
        {"linear", "times seq x W",
         [](Env& e) {
             return times(e.seq({3}), e.param({3, 4}));
         }},
        {"linear", "times seq[2,3] x W[3,4,2]",
         [](Env& e) {
             return times(e.seq({2, 3}), e.param({3, 4, 2}));
         }},
        {"linear", "times batch x W",
         [](Env& e) {
             return times(e.batch({3}), e.param({3, 2}));
         }},
        {"linear", "times static x dynamic right",
         [](Env& e) {
             return times(e.param({2, 3}), e.seq({3, 4}));
         }},
        {"linear", "times seq x seq",
         [](Env& e) {
             return times(e.seq({2, 3}), e.seq({3, 4}));
         }},
        {"linear", "times batch x seq",
         [](Env& e) {
             return times(e.batch({3}), e.seq({3, 2}));
         }},
        {"linear", "times_transpose seq x W",
         [](Env& e) {
             return times_transpose(e.seq({3}), e.param({4, 3}));
         }},
        {"linear", "times_transpose seq x seq",
         [](Env& e) {
             return times_transpose(e.seq({2, 3}), e.seq({4, 3}));
         }},
        // One row per item times the item's own matrix (attention's q K^T and a V): the products
        // run as dot products and row updates over the real items.
        {"linear", "times_transpose vector x seq",
         [](Env& e) {
             return times_transpose(e.seq({3}), e.seq({4, 3}));
         }},
        {"linear", "times vector x seq",
         [](Env& e) {
             return times(e.seq({3}), e.seq({3, 4}));
         }},
        {"linear", "affine vector x seq",
         [](Env& e) {
             return affine(e.seq({3}), e.seq({3, 4}), e.param({4}));
         }},
        {"linear", "affine seq[2,3] x W plus a bias row, two rows a step",  // the bias summed over both
         [](Env& e) {
             return affine(e.seq({2, 3}), e.param({3, 4}), e.param({4}));
         }},
        {"linear", "times_transpose vector x batch",  // one matrix per sequence, every step
         [](Env& e) {
             return times_transpose(e.seq({3}), e.batch({4, 3}));
         }},
        {"linear", "times vector x batch",
         [](Env& e) {
             return times(e.seq({3}), e.batch({3, 4}));
         }},
        // An embedding read only by its product: compile folds the two into embedding_affine /
        // embedding_times (graph/fold_products.hpp); the ids (7 sequences' worth, repeats) are
        // fewer distinct than rows.
        {"linear", "affine of an embedding (folded)",
         [](Env& e) {
             return affine(embedding(e.ids(4), e.param({4, 3})), e.param({3, 5}), e.param({5}));
         }},
        {"linear", "times of an embedding (folded)",
         [](Env& e) {
             return times(embedding(e.ids(4), e.param({4, 3})), e.param({3, 2, 2}));
         }},
        {"linear", "position_embedding: an embedding of a table of learned positions",
         [](Env& e) {
             return position_embedding(e.ids(4), e.param({4, 3}), "the model") * e.seq({3});
         }},
        // ---- reductions and softmax ----
        {"reduce", "reduce_sum axis 0",
         [](Env& e) {
             return reduce_sum(e.seq({3, 4}), 0);
         }},
        {"reduce", "reduce_sum axis -1",
         [](Env& e) {
             return reduce_sum(e.seq({3, 4}), -1);
         }},
        {"reduce", "reduce_sum all",
         [](Env& e) {
             return reduce_sum(e.seq({3, 4}));
         }},
        {"reduce", "reduce_sum param",
         [](Env& e) {
             return reduce_sum(e.param({2, 3}), 1) * e.seq({2, 1});
         }},
        {"reduce", "reduce_mean axis 1 of 3",
         [](Env& e) {
             return reduce_mean(e.seq({2, 3, 2}), 1);
         }},
        {"reduce", "reduce_mean all",
         [](Env& e) {
             return reduce_mean(e.batch({3, 4}));
         }},
        {"reduce", "reduce_max axis 0",
         [](Env& e) {
             return reduce_max(e.seq({3, 4}), 0);
         }},
        {"reduce", "reduce_max all",
         [](Env& e) {
             return reduce_max(e.seq({3, 4}));
         }},
        {"reduce", "reduce_min axis -1",
         [](Env& e) {
             return reduce_min(e.seq({3, 4}), -1);
         }},
        {"reduce", "reduce_log_sum_exp axis 1",
         [](Env& e) {
             return reduce_log_sum_exp(e.seq({3, 4}, -3, 3), 1);
         }},
        {"reduce", "reduce_log_sum_exp all",
         [](Env& e) {
             return reduce_log_sum_exp(e.seq({3, 4}, -3, 3));
         }},
        {"reduce", "softmax last axis", [](Env& e) { return softmax(e.seq({5}, -3, 3)); }},
        {"reduce", "softmax axis 0 of [3,4]",
         [](Env& e) {
             return softmax(e.seq({3, 4}, -3, 3), 0);
         }},
        {"reduce", "softmax all axes",
         [](Env& e) {
             return softmax(e.seq({2, 3}, -3, 3), all_static_axes);
         }},
        {"reduce", "log_softmax last axis", [](Env& e) { return log_softmax(e.seq({5}, -3, 3)); }},
        {"reduce", "log_softmax axis 1 of [2,3,2]",
         [](Env& e) {
             return log_softmax(e.seq({2, 3, 2}, -3, 3), 1);
         }},
        // ---- across the batch axis (3 items) ----
        {"reduce", "batch::reduce_sum [2,2]",
         [](Env& e) {
             return batch::reduce_sum(e.batch({2, 2}));
         }},
        {"reduce", "batch::reduce_mean times param",
         [](Env& e) { return batch::reduce_mean(e.batch({3})) * e.param({3}); }},
        {"reduce", "batch::reduce_max", [](Env& e) { return batch::reduce_max(e.batch({4}, -3, 3)); }},
        {"reduce", "batch::softmax [2,3]",
         [](Env& e) {
             return batch::softmax(e.batch({2, 3}, -3, 3));
         }},
        {"reduce", "batch::broadcast_as of a mean onto the batch",
         [](Env& e) {
             Variable b = e.batch({3});
             return b - batch::broadcast_as(batch::reduce_mean(b), b);
         }},
        // ---- shape ----
        {"shape", "splice last axis",
         [](Env& e) {
             return splice({e.seq({2}), e.seq({3}), e.seq({1})});
         }},
        {"shape", "splice axis 0 with param",
         [](Env& e) {
             return splice({e.seq({2, 3}), e.param({1, 3})}, 0);
         }},
        {"shape", "splice axis 1 seq and batch",
         [](Env& e) {
             return splice({e.seq({2, 1}), e.batch({2, 2})}, 1);
         }},
        {"shape", "slice axis 1",
         [](Env& e) {
             return slice(e.seq({3, 4}), 1, 1, 3);
         }},
        {"shape", "slice negative to end",
         [](Env& e) {
             return slice(e.seq({3, 4}), 0, -2, 0);
         }},
        {"shape", "reshape",
         [](Env& e) {
             return reshape(e.seq({3, 4}), {2, 6}) * e.param({2, 6});
         }},
        {"shape", "transpose 2d",
         [](Env& e) {
             return transpose(e.seq({3, 4}), {1, 0}) * e.param({4, 3});
         }},
        {"shape", "transpose 3d",
         [](Env& e) {
             return transpose(e.seq({2, 3, 4}), {2, 0, 1}) * e.param({4, 2, 3});
         }},
        {"shape", "top_k values", [](Env& e) { return top_k(e.seq({6}), 3).values; }},
        {"shape", "top_k of [2,5]",
         [](Env& e) {
             return top_k(e.seq({2, 5}), 2).values * e.param({2, 2});
         }},
        {"shape", "index_select by a batch index, two rows sharing an item",
         [](Env& e) {
             return index_select(e.items({2, 3, 2}), e.row_items({1, 0, 1})) * e.batch({3, 2});
         }},
        {"shape", "index_select by a sequence index of lengths 1, 3 and 7",
         [](Env& e) {
             return index_select(e.items({3, 4}), e.ids(3)) * e.seq({4});
         }},
        {"shape", "paged_rows by page lists of 3 rows, rows shared and repeated",
         [](Env& e) {
             auto pages = std::make_shared<const PageLists>(std::vector<std::size_t>{4, 0, 4, 1, 1, 2, 3, 0, 2}, 3, 5);
             return tanh(paged_rows(e.items({5, 2}), pages, e.batch({1})));
         }},
        {"shape", "gather_rows by batch indices [3], rows shared and repeated",
         [](Env& e) {
             return gather_rows(e.items({5, 2}), e.row_indices({{4, 0, 4}, {1, 1, 2}, {3, 0, 2}})) * e.batch({3, 2});
         }},
        // one_hot passes no gradient to its ids; its value reaches the other operand's gradient.
        {"shape", "one_hot", [](Env& e) { return one_hot(e.ids(4), 4) * e.seq({4}); }},
        // ---- losses ----
        {"loss", "cosine_distance", [](Env& e) { return cosine_distance(e.seq({4}), e.seq({4})); }},
        {"loss", "cosine_distance seq x batch", [](Env& e) { return cosine_distance(e.seq({4}), e.batch({4})); }},
        {"loss", "squared_error", [](Env& e) { return squared_error(e.seq({4}), e.seq({4})); }},
        {"loss", "squared_error seq x param",
         [](Env& e) {
             return squared_error(e.seq({2, 2}), e.param({2, 2}));
         }},
        {"loss", "squared_error seq x batch", [](Env& e) { return squared_error(e.seq({3}), e.batch({3})); }},
        {"loss", "binary_cross_entropy",
         [](Env& e) { return binary_cross_entropy(e.seq({3}, 0.1, 0.9), e.seq({3}, 0, 1)); }, loose()},
        {"loss", "binary_cross_entropy of sigmoid",
         [](Env& e) { return binary_cross_entropy(sigmoid(e.seq({3}, -3, 3)), e.labels({3})); }},
        {"loss", "cross_entropy_with_softmax",
         [](Env& e) { return cross_entropy_with_softmax(e.seq({5}, -3, 3), e.seq({5}, 0, 1)); }},
        {"loss", "cross_entropy_with_softmax one-hot labels",
         [](Env& e) {
             return cross_entropy_with_softmax(times(e.seq({3}), e.param({3, 4})), one_hot(e.ids(4), 4));
         }},
        {"loss", "cross_entropy_with_softmax seq x batch",
         [](Env& e) { return cross_entropy_with_softmax(e.seq({4}), e.batch({4}, 0, 1)); }},
        // A count: zero gradient everywhere away from ties, which the check confirms.
        {"loss", "classification_error", [](Env& e) { return classification_error(e.seq({4}), e.labels({4})); }},
        // ---- the same ops one time step at a time, inside a recurrence loop ----
        {"loop", "splice slice reduce softmax inside a loop",
         [](Env& e) {
             Variable x = e.seq({2});
             Parameter w = e.param({6, 4}, -0.8, 0.8);
             Variable p = placeholder({4});
             Variable prev = past_value(p);
             Variable in = splice({x, slice(prev, 0, 1, 3), reduce_max(prev), reduce_log_sum_exp(prev)});
             Variable h = tanh(times(in, w));
             h.replace_placeholders({{p, h}});
             return softmax(h) + top_k(transpose(reshape(h, {2, 2}), {1, 0}), 1).values * log_softmax(h, 0);
         }},
        {"loop", "losses inside a loop",
         [](Env& e) {
             Variable x = e.seq({3}), y = e.labels({3});
             Variable p = placeholder({3});
             Variable h = tanh(x + 0.5 * past_value(p));
             h.replace_placeholders({{p, h}});
             return cross_entropy_with_softmax(h, y) + squared_error(h, x) + reduce_mean(h);
         }},
    };
    return cases;
}

void run_family(const std::string& family) {
    std::size_t ran = 0;
    for (const Case& c : table()) {
        if (c.family != family) continue;
        Env env;
        // The op's operands (identity of the inputs) and its result (under an identity) are
        // intermediate values: check_gradients frees those the op says its backward does not read,
        // so a wrong declaration fails here.
        Variable out = identity(c.build(env));
        testing::require_gradients(c.name, out, env.bindings(), env.wrt(), c.options);
        ++ran;
    }
    CHECK(ran > 0);
}

}  // namespace

TEST_CASE("gradcheck ops: element-wise") { run_family("elementwise"); }
TEST_CASE("gradcheck ops: times and times_transpose") { run_family("linear"); }
TEST_CASE("gradcheck ops: reductions, softmax, log_softmax") { run_family("reduce"); }
TEST_CASE("gradcheck ops: splice, slice, reshape, transpose, top_k, one_hot, index_select") { run_family("shape"); }
TEST_CASE("gradcheck ops: losses") { run_family("loss"); }
TEST_CASE("gradcheck ops: attention, over sequences and over memory picked by an index") { run_family("attention"); }
TEST_CASE("gradcheck ops: layer_norm") { run_family("normalization"); }
TEST_CASE("gradcheck ops: one time step at a time inside recurrence loops") { run_family("loop"); }
