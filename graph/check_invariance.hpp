#pragma once
/// \file
/// check_batch_invariance: does each item of a batch get the same values and gradients alone as
/// inside the batch? "Padding never leaks" and "no value crosses from one sequence into another"
/// (docs/semantics.md) tested on a user's own graph and data.
///
/// Item i of a batch is the i-th sequence of every sequence input and the i-th row of every batch
/// input; parameters, constants and static bindings are shared. Each item is evaluated alone (a
/// batch of one, no padding), then the whole batch in the given order, reversed and in seeded
/// shuffles, each time with NaN written into the padding of every sequence input. Compared per item:
/// - the outputs' values. An output without dynamic axes is compared whole. A sample axis whose
///   static size is 0 (sequence::unpack's T_max, known only at run time) may be longer in the batch:
///   the item's values alone are compared with the leading block of its batch values; the rest is
///   the batch's padding (unpack's padding value), whose effect on other items is what the check
///   catches downstream;
/// - the gradients of sum_outputs sum_items (w . y), with fixed pseudo-random weights per item and
///   element (the same alone and in the batch, so errors cannot cancel): an input's gradient item by
///   item; a parameter's against the sum of the items' gradients alone. Outputs without a batch axis
///   are left out of this sum (in a batch they count once, alone once per item).
/// When something differs, the checker evaluates every node in plan order alone and in that batch
/// and names the first whose value differs; when only gradients differ, it walks backward from the
/// outputs and names the op whose backward first gives an item a different gradient.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/evaluate.hpp"

namespace loom {

/// What check_batch_invariance compares, and how closely.
struct InvarianceOptions {
    /// |batch - alone| <= absolute + relative * max(|batch|, |alone|) passes. In double the
    /// differences are rounding only (a GEMM over more rows sums in another order).
    double relative_tolerance = 1e-9;
    double absolute_tolerance = 1e-11;  ///< see relative_tolerance
    bool gradients = true;              ///< compare the gradients too, not only the values
    /// Empty: every parameter and every bound input the outputs depend on.
    std::vector<Variable> wrt;
    std::size_t shuffles = 1;  ///< seeded random orders besides the given and the reversed one
    std::uint64_t seed = 7;    ///< for the shuffles and the output weights
    /// The element type both evaluations run in; nullopt: as evaluate's, as exact as the inputs.
    std::optional<DType> precision = DType::f64;
};

/// The worst difference of one kind (values or gradients) over every item and order: the largest
/// |batch - alone|, and the element with the largest error relative to the tolerance (the one that
/// decides; it need not be where the difference is largest).
struct InvarianceDifference {
    double difference = 0;  ///< the largest |batch - alone| (infinite for NaN or a shape mismatch)
    double error = 0;       ///< the largest |batch - alone| / tolerance (<= 1 passes)
    std::string variable;   ///< the output or wrt variable
    std::size_t item = 0;   ///< the item (for a parameter's gradient: the whole batch)
    std::string order;      ///< "given", "reversed", "shuffled 1", ...
    /// Where the largest error is: the flat index into the item's value alone, and the two values.
    std::size_t index = 0;
    double alone = 0, batched = 0;
};
/// \var InvarianceDifference::alone
/// The value (or gradient) of the item evaluated alone, where the largest error is.
/// \var InvarianceDifference::batched
/// The same element evaluated in the batch.

/// What check_batch_invariance found.
struct InvarianceReport {
    bool ok = true;            ///< every item agreed within the tolerances
    std::size_t items = 0;     ///< batch size
    std::size_t orders = 0;    ///< batch orders evaluated
    std::size_t compared = 0;  ///< elements compared
    InvarianceDifference values, gradients;
    /// Set when something differs: the first op (its name, e.g. "reduce_sum") and node (its label)
    /// that differs, and in which pass ("forward" or "backward").
    std::string first_differing_op, first_differing_node, pass;
    std::string message;  ///< why it failed, in words (empty when ok)
    /// \return the report in a few lines of text, for a test's failure message.
    std::string str() const;
};
/// \var InvarianceReport::first_differing_node
/// Set when something differs: the label of the first node that differs (see first_differing_op).
/// \var InvarianceReport::pass
/// Set when something differs: "forward" or "backward", where the first difference arose.
/// \var InvarianceReport::values
/// The worst difference of the output values.
/// \var InvarianceReport::gradients
/// The worst difference of the gradients.

/// Checks that every item of `bindings`' batch gets the same values (and gradients) alone as in the
/// batch, as described above.
/// \param outputs  what to compare (the gradients are those of the weighted sum of all outputs)
/// \param bindings  a batch of inputs for every input the outputs need
/// \param options  tolerances, what to differentiate for, orders and precision
/// \return the worst differences and, on failure, the first op and node that differ.
InvarianceReport check_batch_invariance(const std::vector<Variable>& outputs, const Bindings& bindings,
                                        const InvarianceOptions& options = {});

}  // namespace loom
