#include "graph/evaluate.hpp"

#include <cmath>
#include <random>
#include <sstream>

#include "core/errors.hpp"
#include "graph/run_dtype.hpp"

namespace loom {

const Value& ValueMap::operator[](const Variable& v) const {
    auto it = map_.find(v);
    if (it == map_.end())
        throw UserError("no result for " + (v ? v.label() : std::string("an empty Variable")) +
                        ": it was not requested");
    return it->second;
}

namespace {
template <class T>
ValueMap run_evaluate(std::shared_ptr<const Plan> plan, const std::vector<Variable>& outputs, const Bindings& inputs) {
    Execution<T> ex(std::move(plan));
    ex.bind(inputs, "evaluate");
    ex.forward();
    ValueMap out;
    for (std::size_t i = 0; i < outputs.size(); ++i) out.insert(outputs[i], ex.value(ex.plan().outputs[i]));
    return out;
}

std::vector<int> wrt_indices(const Plan& plan, const std::vector<Variable>& wrt, const std::string& who) {
    std::vector<int> idx;
    for (const auto& w : wrt) {
        if (!w) throw UserError(who + ": an empty Variable in wrt");
        const Node* n = resolve(w.node().get());
        const int i = n ? plan.find(n) : -1;
        if (i < 0)
            throw UserError(who + ": the loss does not depend on " + w.label() +
                            "; remove it from wrt or check the graph");
        idx.push_back(i);
    }
    return idx;
}

// The loss's value (taken before backward frees what it no longer needs) and the gradients.
template <class T>
std::pair<Value, ValueMap> run_gradients(std::shared_ptr<const Plan> plan, const Bindings& inputs,
                                         const std::vector<Variable>& wrt, const std::string& who) {
    Execution<T> ex(std::move(plan));
    const auto idx = wrt_indices(ex.plan(), wrt, who);
    ex.bind(inputs, who);
    ex.forward();
    std::pair<Value, ValueMap> out{ex.value(ex.plan().outputs[0]), {}};
    ex.backward(idx);
    for (std::size_t i = 0; i < wrt.size(); ++i) out.second.insert(wrt[i], ex.gradient(idx[i]));
    return out;
}
}  // namespace

ValueMap evaluate(const std::vector<Variable>& outputs, const Bindings& inputs, std::optional<DType> dtype) {
    auto plan = compile(outputs);
    const DTypeRequest asked = DTypeRequest::given_or_exact(dtype);
    return run_dtype(plan_parameters(*plan), inputs, asked, "evaluate") == DType::f64
               ? run_evaluate<double>(std::move(plan), outputs, inputs)
               : run_evaluate<float>(std::move(plan), outputs, inputs);
}

ValueMap gradients(const Variable& loss, const Bindings& inputs, const std::vector<Variable>& wrt,
                   std::optional<DType> dtype) {
    auto plan = compile({loss});
    const DTypeRequest asked = DTypeRequest::given_or_exact(dtype);
    return (run_dtype(plan_parameters(*plan), inputs, asked, "gradients") == DType::f64
                ? run_gradients<double>(std::move(plan), inputs, wrt, "gradients")
                : run_gradients<float>(std::move(plan), inputs, wrt, "gradients"))
        .second;
}

std::pair<Value, ValueMap> value_and_gradients(const Variable& loss, const Bindings& inputs,
                                               const std::vector<Variable>& wrt, std::optional<DType> dtype) {
    auto plan = compile({loss});
    const DTypeRequest asked = DTypeRequest::given_or_exact(dtype);
    return run_dtype(plan_parameters(*plan), inputs, asked, "value_and_gradients") == DType::f64
               ? run_gradients<double>(std::move(plan), inputs, wrt, "value_and_gradients")
               : run_gradients<float>(std::move(plan), inputs, wrt, "value_and_gradients");
}

std::string GradientReport::str() const {
    std::ostringstream s;
    s << (ok ? "gradients match" : "GRADIENT MISMATCH") << " (" << checked << " elements checked)";
    if (checked)
        s << "; worst: " << worst_variable << " element " << worst_index << ": analytic " << worst_analytic
          << ", numeric " << worst_numeric << " (" << worst_error << " of the tolerance)";
    return s.str();
}

namespace {

// The nodes of `wrt`, each an input or a parameter: the leaves a check can perturb.
std::vector<int> checked_leaves(const Plan& plan, const std::vector<Variable>& wrt) {
    const auto idx = wrt_indices(plan, wrt, "check_gradients");
    for (std::size_t i = 0; i < wrt.size(); ++i) {
        const NodeKind k = plan.nodes[idx[i]].node->kind;
        if (k != NodeKind::Input && k != NodeKind::Parameter)
            throw UserError("check_gradients: " + wrt[i].label() + " is neither an input nor a parameter");
    }
    return idx;
}

// The weights that reduce the output to the checked scalar: pseudo-random, none on padding.
std::vector<double> output_weights(const Execution<double>& ex, int out, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> weight_dist(0.5, 1.5);
    std::vector<double> weights(ex.value_buffer(out).size());
    for (auto& w : weights) w = weight_dist(rng);
    const SequenceLayout* out_layout = ex.layout(out);
    if (out_layout) zero_padding(weights.data(), *out_layout, ex.row_size(out));
    return weights;
}

// The elements of a node's `size` to compare: its real (unpadded) positions only, a random
// subset of them beyond max_elements.
std::vector<std::size_t> elements_to_check(const Execution<double>& ex, int node, std::size_t size,
                                           std::size_t max_elements, std::mt19937_64& rng) {
    std::vector<std::size_t> candidates;
    const SequenceLayout* layout = ex.layout(node);
    const std::size_t row = ex.row_size(node);
    for (std::size_t e = 0; e < size; ++e) {
        if (layout && row) {
            const std::size_t r = e / row, n_seq = layout->num_sequences();
            if (!layout->valid(r / n_seq, r % n_seq)) continue;
        }
        candidates.push_back(e);
    }
    if (candidates.size() > max_elements) {
        std::shuffle(candidates.begin(), candidates.end(), rng);
        candidates.resize(max_elements);
    }
    return candidates;
}

// Compares a variable's analytic gradient with central differences of `objective` at its
// elements to check, keeping the worst in `report`.
template <class Objective>
void compare_gradient(Execution<double>& ex, int node, const Variable& variable, const Objective& objective,
                      const GradientCheckOptions& options, std::mt19937_64& rng, GradientReport& report) {
    std::span<double> x = ex.mutable_value_buffer(node);
    const std::vector<double> analytic(ex.gradient_buffer(node).begin(), ex.gradient_buffer(node).end());
    for (std::size_t e : elements_to_check(ex, node, x.size(), options.max_elements, rng)) {
        const double saved = x[e];
        const double h = options.epsilon * std::max(1.0, std::abs(saved));
        x[e] = saved + h;
        const double up = objective();
        x[e] = saved - h;
        const double down = objective();
        x[e] = saved;
        const double numeric = (up - down) / (2 * h);
        const double a = analytic[e];
        const double tol =
            options.absolute_tolerance + options.relative_tolerance * std::max(std::abs(a), std::abs(numeric));
        const double err = std::isfinite(a) && std::isfinite(numeric) ? std::abs(a - numeric) / tol : INFINITY;
        ++report.checked;
        if (report.checked == 1 || err > report.worst_error) {
            report.worst_error = err;
            report.worst_variable = variable.label();
            report.worst_index = e;
            report.worst_analytic = a;
            report.worst_numeric = numeric;
        }
    }
}

}  // namespace

GradientReport check_gradients(const Variable& loss, const Bindings& inputs, const std::vector<Variable>& wrt,
                               const GradientCheckOptions& options) {
    Execution<double> ex(compile({loss}));
    ex.copy_leaves();  // perturbed below, never the parameters or the inputs themselves
    const auto idx = checked_leaves(ex.plan(), wrt);
    // Planned as training plans it: values no backward reads are freed during forward, so every
    // op's declaration of what its backward reads is checked here too (a wrong one reads null).
    ex.plan_backward(idx);
    ex.set_memory_budget(options.memory_budget);
    ex.bind(inputs, "check_gradients");
    ex.forward();

    const int out = ex.plan().outputs.front();
    std::mt19937_64 rng(options.seed);
    const std::vector<double> weights = output_weights(ex, out, rng);
    auto objective = [&] {
        ex.forward();
        const std::span<const double> y = ex.value_buffer(out);
        double s = 0;
        for (std::size_t e = 0; e < y.size(); ++e) s += weights[e] * y[e];
        return s;
    };
    ex.backward(idx, {{out, &weights}});

    GradientReport report;
    for (std::size_t i = 0; i < wrt.size(); ++i) compare_gradient(ex, idx[i], wrt[i], objective, options, rng, report);
    report.ok = report.worst_error <= 1.0;
    report.loop_bytes_peak = ex.loop_bytes_peak();
    ex.forward();  // leave the buffers as they were
    return report;
}

}  // namespace loom
