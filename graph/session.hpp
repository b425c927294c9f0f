#pragma once
// Session: a compiled graph kept ready for repeated minibatches (training, scoring). It reuses its
// plan and its buffers' memory across calls, and exposes parameter gradients without copies.
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/value.hpp"
#include "graph/executor.hpp"
#include "graph/variable.hpp"

namespace loom {

class Session {
public:
    // outputs[0] is the loss when gradients are wanted; `parameters` are what backward() differentiates for.
    explicit Session(std::vector<Variable> outputs, std::vector<Parameter> parameters = {});

    void forward(const Bindings& inputs);
    // Gradient of the sum of outputs[0] (over every item and step) for each parameter.
    void backward();
    // The same, calling on_ready(i) for parameter i as soon as its gradient is final, possibly on a
    // worker thread while backward goes on (see Execution::backward).
    void backward(const std::function<void(std::size_t)>& on_ready);

    Value value(const Variable& output) const;
    // Sum of an output over all real (unpadded) positions, and how many items it has.
    double sum(const Variable& output) const;
    std::size_t count(const Variable& output) const;
    // Flat, in the layout of p.data(); zeros for a parameter the loss does not depend on. A gradient
    // kept by rows (below) is spread into a dense copy for this.
    std::span<const float> gradient(const Parameter& p) const;
    std::span<const float> gradient(std::size_t i) const;
    // The rows (first axis) of a parameter matrix's gradient that can be non-zero, when the last
    // backward knows them (an embedding table); nullptr: any row may be non-zero.
    const std::vector<std::size_t>* gradient_rows(std::size_t i) const;
    const std::vector<std::size_t>* gradient_rows(const Parameter& p) const {
        return gradient_rows(index_of(p, "gradient_rows"));
    }
    // The gradient as only its non-zero rows, when the session keeps it so (an embedding table
    // whose every use is an `embedding` lookup), else nullptr. Learners read it this way: the
    // dense [vocabulary, dim] gradient is never materialized.
    const RowGradient<float>* gradient_by_rows(std::size_t i) const;
    const RowGradient<float>* gradient_by_rows(const Parameter& p) const {
        return gradient_by_rows(index_of(p, "gradient_by_rows"));
    }
    // A parameter's gradient as the session keeps it, in its one of two forms: by rows (an
    // embedding table's; `dense` is then empty) or dense. What a learner reads.
    struct GradientView {
        std::span<const float> dense;
        const RowGradient<float>* by_rows = nullptr;
    };
    GradientView gradient_view(std::size_t i) const;
    GradientView gradient_view(const Parameter& p) const { return gradient_view(index_of(p, "gradient_view")); }
    // Gives parameter i's gradient memory back for reuse once it has been read (a Trainer does
    // this after each update): the next pass's values then reuse it instead of new memory. Until
    // the next backward, gradient(i) then throws.
    void release_gradient(std::size_t i);
    void release_gradients();
    const std::vector<Parameter>& parameters() const { return parameters_; }
    // Bytes of evaluation buffers the session holds (values, gradients, free buffers kept for reuse).
    std::size_t bytes_held() const;
    const std::vector<Variable>& outputs() const { return outputs_; }
    // Bounds the memory a loop (a past_value/future_value recurrence) keeps for backward: its
    // members' values and gradients over all steps. A loop that would hold more keeps its states
    // only every k steps and recomputes each segment in backward (square-root checkpointing), with
    // the same gradients. 0: no budget. Throws UserError at forward when a loop cannot fit even so
    // (the message gives the least budget that works). See docs/semantics.md, "Memory budget".
    void set_memory_budget(std::size_t bytes) { ex_->set_memory_budget(bytes); }
    // The most bytes one loop held for backward since the session was made (see set_memory_budget).
    std::size_t loop_bytes_peak() const { return ex_->loop_bytes_peak(); }

private:
    int output_index(const Variable& v) const;
    std::size_t index_of(const Parameter& p, const char* what) const;  // throws naming `what`

    std::vector<Variable> outputs_;
    std::vector<Parameter> parameters_;
    std::vector<int> param_nodes_;  // plan index, or -1 when the loss does not use it
    std::vector<std::vector<float>> zero_grads_;
    std::vector<std::size_t> no_rows_;  // the rows of a gradient that is all zero
    std::unique_ptr<Execution<float>> ex_;
};

}  // namespace loom
