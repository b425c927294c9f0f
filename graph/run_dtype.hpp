#pragma once
/// \file
/// run_dtype: the rule that says which element type a graph runs in, for the calls that run one
/// (evaluate, gradients, check_batch_invariance, Session, and so Trainer and Generator): what the
/// caller asks for decides. check_gradients does not ask it: it makes its own double execution.
/// docs/semantics.md, "Precision", states the rule for users.
#include <optional>
#include <string_view>
#include <vector>

#include "core/value.hpp"
#include "graph/compile.hpp"
#include "graph/executor.hpp"
#include "graph/variable.hpp"

namespace loom {

/// What a call that runs a graph asks run_dtype for.
struct DTypeRequest {
    /// How the element type is chosen.
    enum class Rule {
        /// The parameters' one type: f32 when all are float (or there are none), f64 when all are
        /// double, a UserError for a mix. Bound data is converted on binding. A Session's (so a
        /// Trainer's and a Generator's): it reads its parameters in place.
        by_parameters,
        /// As exact as the inputs: f64 when any parameter or any bound Value is double, else f32; a
        /// parameter of the other type is read as a converted copy. What evaluate, gradients and
        /// check_batch_invariance do when no type is asked.
        as_exact_as_inputs,
        /// `dtype`, whatever the parameters and the data (a parameter of the other type is read as a
        /// converted copy): evaluate's and gradients' argument, check_batch_invariance's option.
        given,
    };
    Rule rule = Rule::by_parameters;  ///< how the type is chosen
    DType dtype = DType::f32;         ///< the type asked for, under Rule::given
    /// \return `dtype` given when there is one, else as exact as the inputs (what evaluate,
    /// gradients and check_batch_invariance ask).
    static DTypeRequest given_or_exact(std::optional<DType> dtype) {
        return dtype ? DTypeRequest{Rule::given, *dtype} : DTypeRequest{Rule::as_exact_as_inputs, DType::f32};
    }
};

/// \return every parameter `plan` reads, in plan order, after those of `also` (each once).
std::vector<Parameter> plan_parameters(const Plan& plan, const std::vector<Parameter>& also = {});

/// The element type a graph with `parameters` (plan_parameters) runs in when bound to `inputs`, as
/// `asked` (DTypeRequest::Rule). A mix of float and double parameters under Rule::by_parameters is a
/// UserError starting with `caller` and naming one parameter of each type.
DType run_dtype(const std::vector<Parameter>& parameters, const Bindings& inputs, const DTypeRequest& asked,
                std::string_view caller);

}  // namespace loom
