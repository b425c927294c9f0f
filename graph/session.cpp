#include "graph/session.hpp"

#include "core/errors.hpp"

namespace loom {

Session::Session(std::vector<Variable> outputs, std::vector<Parameter> parameters)
    : outputs_(std::move(outputs)), parameters_(std::move(parameters)) {
    if (outputs_.empty()) throw UserError("Session: at least one output is needed");
    ex_ = std::make_unique<Execution<float>>(compile(outputs_));
    for (const auto& p : parameters_) {
        param_nodes_.push_back(ex_->plan().find(p.node().get()));
        zero_grads_.emplace_back(param_nodes_.back() < 0 ? p.shape().size() : 0, 0.0f);
    }
    // A session with parameters trains: values its backward does not read are freed during forward.
    std::vector<int> wrt;
    for (int i : param_nodes_)
        if (i >= 0) wrt.push_back(i);
    // Without, it only scores: each value is freed once its last reader ran.
    if (!wrt.empty())
        ex_->plan_backward(wrt);
    else
        ex_->plan_forward_only();
}

void Session::forward(const Bindings& inputs) {
    ex_->bind(inputs);
    ex_->forward();
}

void Session::backward() { backward(std::function<void(std::size_t)>{}); }

void Session::backward(const std::function<void(std::size_t)>& on_ready) {
    std::vector<int> wrt;
    for (int i : param_nodes_)
        if (i >= 0) wrt.push_back(i);
    if (wrt.empty()) return;  // nothing to differentiate (and a scoring session kept no values for it)
    // Only outputs[0] is seeded: the others get zero weights.
    std::unordered_map<int, const std::vector<float>*> seeds;
    std::vector<std::vector<float>> zero(outputs_.size());
    for (std::size_t o = 1; o < outputs_.size(); ++o) {
        const int idx = ex_->plan().outputs[o];
        if (idx == ex_->plan().outputs[0]) continue;
        zero[o].assign(ex_->value_buffer(idx).size(), 0.0f);
        seeds[idx] = &zero[o];
    }
    std::function<void(int)> ready;
    if (on_ready)
        ready = [&](int node) {
            for (std::size_t i = 0; i < param_nodes_.size(); ++i)
                if (param_nodes_[i] == node) on_ready(i);
        };
    ex_->backward(wrt, seeds, ready);
}

int Session::output_index(const Variable& v) const {
    for (std::size_t o = 0; o < outputs_.size(); ++o)
        if (outputs_[o] == v) return ex_->plan().outputs[o];
    throw UserError("Session: " + v.label() + " is not one of the session's outputs");
}

Value Session::value(const Variable& output) const { return ex_->value(output_index(output)); }

double Session::sum(const Variable& output) const {
    const int i = output_index(output);
    double s = 0;
    for (float v : ex_->value_buffer(i)) s += v;  // padding is zero
    return s;
}

std::size_t Session::count(const Variable& output) const {
    const int i = output_index(output);
    if (const SequenceLayout* l = ex_->layout(i)) return l->total_steps();
    const std::size_t row = ex_->row_size(i);
    return row ? ex_->value_buffer(i).size() / row : 0;
}

std::span<const float> Session::gradient(std::size_t i) const {
    if (i >= parameters_.size()) throw UserError("Session::gradient: parameter index out of range");
    if (param_nodes_[i] < 0) return zero_grads_[i];
    std::span<const float> g = ex_->gradient_buffer(param_nodes_[i]);
    if (g.size() != parameters_[i].data().size())
        throw UserError("Session::gradient: no gradient for " + parameters_[i].label() +
                        " (backward has not run since the session was created or the gradient released)");
    return g;
}

void Session::release_gradient(std::size_t i) {
    if (i >= parameters_.size()) throw UserError("Session::release_gradient: parameter index out of range");
    if (param_nodes_[i] >= 0) ex_->release_gradient(param_nodes_[i]);
}

void Session::release_gradients() {
    for (std::size_t i = 0; i < parameters_.size(); ++i) release_gradient(i);
}

const std::vector<std::size_t>* Session::gradient_rows(std::size_t i) const {
    const RowGradient<float>* rows = gradient_by_rows(i);
    if (param_nodes_[i] < 0) return &no_rows_;
    return rows ? &rows->sorted : nullptr;
}

Session::GradientView Session::gradient_view(std::size_t i) const {
    if (const RowGradient<float>* rows = gradient_by_rows(i)) return {{}, rows};
    return {gradient(i), nullptr};
}

std::size_t Session::index_of(const Parameter& p, const char* what) const {
    for (std::size_t i = 0; i < parameters_.size(); ++i)
        if (parameters_[i] == p) return i;
    throw UserError(std::string("Session::") + what + ": " + p.label() + " is not one of the session's parameters");
}

std::size_t Session::bytes_held() const { return ex_ ? ex_->bytes_held() : 0; }

const RowGradient<float>* Session::gradient_by_rows(std::size_t i) const {
    if (i >= parameters_.size()) throw UserError("Session::gradient_by_rows: parameter index out of range");
    return param_nodes_[i] < 0 ? nullptr : ex_->gradient_by_rows(param_nodes_[i]);
}

std::span<const float> Session::gradient(const Parameter& p) const { return gradient(index_of(p, "gradient")); }

}  // namespace loom
