#include "graph/session.hpp"

#include <algorithm>

#include "core/errors.hpp"
#include "core/quantized_gemm.hpp"
#include "graph/run_dtype.hpp"

namespace loom {

Session::Session(std::vector<Variable> outputs, std::vector<Parameter> parameters)
    : outputs_(std::move(outputs)), parameters_(std::move(parameters)) {
    if (outputs_.empty()) throw UserError("Session: at least one output is needed");
    plan_ = compile(outputs_);
    // One execution in float or in double, reading every parameter in place: the parameters decide
    // (run_dtype), since mixing them would need a converted copy of some on every pass.
    graph_parameters_ = plan_parameters(*plan_, parameters_);
    params_of_node_.resize(plan_->nodes.size());
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
        const Parameter& p = parameters_[i];
        index_of_node_.emplace(p.node().get(), i);  // the first, when one is listed twice
        param_nodes_.push_back(plan_->find(p.node().get()));
        if (param_nodes_.back() >= 0) wrt_.push_back(param_nodes_.back());
        if (param_nodes_.back() >= 0) params_of_node_[static_cast<std::size_t>(param_nodes_.back())].push_back(i);
        zero_sizes_.push_back(param_nodes_.back() < 0 ? p.shape().size() : 0);
    }
    make_execution(next_dtype("Session"));
}

void Session::make_execution(DType wanted) {
    std::size_t widest_unused = 0;
    for (std::size_t size : zero_sizes_) widest_unused = std::max(widest_unused, size);
    visit_dtype(wanted, [&]<class T>(T) {
        ex_ = std::make_unique<Execution<T>>(plan_);
        zeros_ = std::vector<T>(widest_unused, T(0));
    });
    if (memory_budget_) set_memory_budget(memory_budget_);
    if (parameters_fixed_) set_parameters_fixed(true, fixed_weights_);
    // A session with parameters trains: values its backward does not read are freed during forward.
    // Without, it only scores: each value is freed once its last reader ran.
    visit([&](auto& ex) {
        if (!wrt_.empty())
            ex.plan_backward(wrt_);
        else
            ex.plan_forward_only();
    });
}

DType Session::next_dtype(std::string_view caller) const {
    return run_dtype(graph_parameters_, {}, DTypeRequest{}, caller);
}

void Session::forward(const Bindings& inputs) { forward(inputs, "Session::forward"); }

void Session::forward(const Bindings& inputs, std::string_view caller) {
    if (const DType wanted = next_dtype(caller); wanted != dtype()) make_execution(wanted);
    visit([&](auto& ex) {
        ex.bind(inputs, caller);
        ex.forward();
    });
}

void Session::backward() { backward(std::function<void(std::size_t)>{}); }

void Session::backward(const std::function<void(std::size_t)>& on_ready) {
    if (wrt_.empty()) return;  // nothing to differentiate (and a scoring session kept no values for it)
    if (!visit([](const auto& ex) { return ex.has_forward_values(); }))
        throw UserError(
            "Session::backward: no forward since the last backward (or none yet): backward frees the values of "
            "its forward as it goes, so each backward needs a forward of its own; run forward again first");
    std::function<void(int)> ready;
    if (on_ready)
        ready = [&](int node) {
            for (std::size_t i : params_of_node_[static_cast<std::size_t>(node)]) on_ready(i);
        };
    visit([&]<class T>(Execution<T>& ex) {
        // Only outputs[0] is seeded: the others get zero weights.
        std::unordered_map<int, const std::vector<T>*> seeds;
        std::vector<std::vector<T>> zero(outputs_.size());
        for (std::size_t o = 1; o < outputs_.size(); ++o) {
            const int idx = plan_->outputs[o];
            if (idx == plan_->outputs[0]) continue;
            zero[o].assign(ex.value_buffer(idx).size(), T(0));
            seeds[idx] = &zero[o];
        }
        ex.backward(wrt_, seeds, ready);
    });
}

int Session::output_index(const Variable& v) const {
    for (std::size_t o = 0; o < outputs_.size(); ++o)
        if (outputs_[o] == v) return plan_->outputs[o];
    throw UserError("Session: " + v.label() + " is not one of the session's outputs");
}

Value Session::value(const Variable& output) const {
    const int i = output_index(output);
    return visit([&](auto& ex) { return ex.value(i); });
}

template <class T>
std::span<const T> Session::value_data(const Variable& output) const {
    return execution<T>("value_data").value_buffer(output_index(output));
}
template std::span<const float> Session::value_data<float>(const Variable&) const;
template std::span<const double> Session::value_data<double>(const Variable&) const;

double Session::sum(const Variable& output) const {
    const int i = output_index(output);
    return visit([&](auto& ex) {
        double s = 0;
        for (auto v : ex.value_buffer(i)) s += v;  // padding is zero
        return s;
    });
}

std::size_t Session::count(const Variable& output) const {
    const int i = output_index(output);
    return visit([&](auto& ex) -> std::size_t {
        if (const SequenceLayout* l = ex.layout(i)) return l->total_steps();
        const std::size_t row = ex.row_size(i);
        return row ? ex.value_buffer(i).size() / row : 0;
    });
}

template <class T>
const Execution<T>& Session::execution(const char* what) const {
    if (const auto* ex = std::get_if<ExecutionPtr<T>>(&ex_)) return **ex;
    throw UserError(std::string("Session::") + what + "<" + precision_name(dtype_of<T>()) + ">: the session runs in " +
                    precision_name(dtype()) + " (its parameters' precision); use " + what + "<" +
                    precision_name(dtype()) + ">");
}

template <class T>
GradientRef<const T> Session::gradient(std::size_t i) const {
    const Execution<T>& ex = execution<T>("gradient");
    const int node = param_node(i, "gradient");
    if (node < 0) return {{std::get<std::vector<T>>(zeros_).data(), zero_sizes_[i]}};
    if (const RowGradient<T>* rows = ex.gradient_by_rows(node)) return {{}, rows};
    std::span<const T> g = ex.gradient_buffer(node);
    if (g.size() != parameters_[i].shape().size()) no_gradient(i, "gradient");
    return {g};
}

void Session::release_gradient(std::size_t i) {
    const int node = param_node(i, "release_gradient");
    if (node < 0) return;
    visit([&](auto& ex) { ex.release_gradient(node); });
}

void Session::release_gradients() {
    for (std::size_t i = 0; i < parameters_.size(); ++i) release_gradient(i);
}

int Session::param_node(std::size_t i, const char* what) const {
    if (i >= parameters_.size()) throw UserError(std::string("Session::") + what + ": parameter index out of range");
    return param_nodes_[i];
}

void Session::no_gradient(std::size_t i, const char* what) const {
    throw UserError(std::string("Session::") + what + ": no gradient for " + parameters_[i].label() +
                    " (backward has not run since the session was created or the gradient released)");
}

bool Session::kept_by_rows(std::size_t i) const {
    const int node = param_node(i, "kept_by_rows");
    return node >= 0 && visit([&](auto& ex) { return ex.gradient_by_rows(node) != nullptr; });
}

std::size_t Session::parameter_index(const Parameter& p) const {
    const auto at = index_of_node_.find(p.node().get());
    if (at == index_of_node_.end())
        throw UserError("Session: " + p.label() + " is not one of the session's parameters");
    return at->second;
}

void Session::set_memory_budget(std::size_t bytes) {
    memory_budget_ = bytes;
    visit([&](auto& ex) { ex.set_memory_budget(bytes); });
}

void Session::set_parameters_fixed(bool fixed, WeightPrecision weights) {
    parameters_fixed_ = fixed;
    fixed_weights_ = weights;
    std::size_t elements = 0;
    for (const Parameter& p : graph_parameters_) elements += p.shape().size();  // not only those given
    int8_widened_ = weights == WeightPrecision::int8 && widen_int8_pays(elements);
    visit([&](auto& ex) { ex.keep_across_passes(fixed, weights, int8_widened_); });
}

std::size_t Session::loop_bytes_peak() const {
    return visit([](auto& ex) { return ex.loop_bytes_peak(); });
}

std::size_t Session::bytes_held() const {
    return visit([](auto& ex) { return ex.bytes_held(); });
}

template <class T>
GradientRef<T> Session::mutable_gradient(std::size_t i) {
    Execution<T>& ex = execution<T>("mutable_gradient");
    const int node = param_node(i, "mutable_gradient");
    if (node < 0)
        throw UserError("Session::mutable_gradient: the loss does not use " + parameters_[i].label() +
                        ": its gradient is zero");
    if (RowGradient<T>* rows = ex.mutable_gradient_by_rows(node)) return {{}, rows};
    std::span<T> g = ex.mutable_gradient_buffer(node);
    if (g.size() != parameters_[i].shape().size()) no_gradient(i, "mutable_gradient");
    return {g};
}

template GradientRef<const float> Session::gradient<float>(std::size_t) const;
template GradientRef<const double> Session::gradient<double>(std::size_t) const;
template GradientRef<float> Session::mutable_gradient<float>(std::size_t);
template GradientRef<double> Session::mutable_gradient<double>(std::size_t);

}  // namespace loom
