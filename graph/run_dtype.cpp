#include "graph/run_dtype.hpp"

#include <algorithm>
#include <string>

#include "core/errors.hpp"

namespace loom {

std::vector<Parameter> plan_parameters(const Plan& plan, const std::vector<Parameter>& also) {
    std::vector<Parameter> out = also;
    for (const auto& n : plan.nodes)
        if (n.node->kind == NodeKind::Parameter) {
            Parameter p(n.node->shared_from_this());
            if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
        }
    return out;
}

namespace {
// "'w'" or "'w' and 3 more": one name is enough to find the mix, the count says how big it is.
std::string one_of(const Parameter& first, std::size_t count) {
    return first.label() + (count > 1 ? " and " + std::to_string(count - 1) + " more" : std::string());
}
}  // namespace

DType run_dtype(const std::vector<Parameter>& parameters, const Bindings& inputs, const DTypeRequest& asked,
                std::string_view caller) {
    using Rule = DTypeRequest::Rule;
    if (asked.rule == Rule::given) return asked.dtype;
    const Parameter *first_float = nullptr, *first_double = nullptr;
    std::size_t floats = 0, doubles = 0;
    for (const auto& p : parameters) {
        const bool f64 = p.dtype() == DType::f64;
        (f64 ? doubles : floats)++;
        const Parameter*& first = f64 ? first_double : first_float;
        if (!first) first = &p;
    }
    if (asked.rule == Rule::as_exact_as_inputs) {
        // Float converts to double exactly: nothing given is rounded.
        bool f64 = doubles > 0;
        for (const auto& [var, value] : inputs) f64 = f64 || value.dtype() == DType::f64;
        return f64 ? DType::f64 : DType::f32;
    }
    // By the parameters, read in place: one execution cannot read both types without copies.
    if (floats && doubles)
        throw UserError(std::string(caller) + ": the graph mixes float parameters (" + one_of(*first_float, floats) +
                        ") and double parameters (" + one_of(*first_double, doubles) +
                        "); a Session runs in one precision: convert them with to_precision(parameters, "
                        "DType::f64) or DType::f32");
    return doubles ? DType::f64 : DType::f32;
}

}  // namespace loom
