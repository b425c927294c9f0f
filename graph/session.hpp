#pragma once
/// \file
/// Session: a compiled graph kept ready for repeated minibatches (training, scoring). It reuses its
/// plan and its buffers' memory across calls, and exposes parameter gradients without copies.
#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/value.hpp"
#include "core/weight_precision.hpp"
#include "graph/executor.hpp"
#include "graph/row_gradient.hpp"
#include "graph/variable.hpp"

namespace loom {

/// A parameter's gradient as a Session keeps it, in its one of two forms: dense, or by rows (an
/// embedding table's: only the rows a minibatch used, RowGradient; the dense [vocabulary, dim]
/// table is never made). As with std::span, T is `const float` / `const double` to read it
/// (Session::gradient) and `float` / `double` to change it in place (Session::mutable_gradient).
template <class T>
struct GradientRef {
    /// The element type (T without const).
    using value_type = std::remove_const_t<T>;
    /// A RowGradient, const when T is.
    using Rows = std::conditional_t<std::is_const_v<T>, const RowGradient<value_type>, RowGradient<value_type>>;
    /// The dense gradient, flat in the layout of the parameter's data; empty when kept by rows.
    std::span<T> dense;
    /// The gradient by rows, or nullptr when it is dense.
    Rows* by_rows = nullptr;
    /// \return a dense copy, flat in the layout of the parameter's data (rows not listed are zero).
    std::vector<value_type> to_dense() const {
        if (!by_rows) return {dense.begin(), dense.end()};
        std::vector<value_type> out(by_rows->index.size() * by_rows->width, value_type(0));
        for (std::size_t k = 0; k < by_rows->rows.size(); ++k)
            std::copy_n(by_rows->data.data() + k * by_rows->width, by_rows->width,
                        out.data() + by_rows->rows[k] * by_rows->width);
        return out;
    }
};

/// A compiled graph kept ready for repeated minibatches: forward, backward, then read values and
/// parameter gradients in place. Parameters are numbered as in parameters().
class Session {
public:
    /// A session that computes `outputs` and differentiates for `parameters`, compiled now.
    /// \param outputs  what forward computes; outputs[0] is the loss when gradients are wanted
    /// \param parameters  what backward() differentiates for, numbered in this order (may be empty:
    ///        a session that only scores)
    ///
    /// The session runs in its parameters' element type (those of the graph and those given; run_dtype,
    /// docs/semantics.md "Precision"): double when they are double, float otherwise; bound data of
    /// the other type is converted. Parameters of both types are a UserError naming one of each.
    explicit Session(std::vector<Variable> outputs, std::vector<Parameter> parameters = {});

    /// \return the element type the session runs in: f32 or f64.
    DType dtype() const { return dtype_held(ex_); }
    /// \deprecated The name earlier releases gave dtype(): use dtype() (the same value).
    DType precision() const { return dtype(); }
    /// \return the element type the next forward runs in: the parameters' now (to_precision may have
    /// converted them since the last pass); a UserError starting with `caller` when they mix float
    /// and double.
    DType next_dtype(std::string_view caller = "Session") const;
    /// Binds `inputs` (a Value for every input the outputs need) and runs the forward pass, in
    /// next_dtype(): parameters converted by to_precision since the last pass make its buffers again
    /// in their new type; converted to a mix, a UserError.
    void forward(const Bindings& inputs);
    /// The same, for a call that runs a session for its user (Trainer::train_minibatch,
    /// Generator::generate): a binding error's message starts with `caller`, the call the user made,
    /// instead of "Session::forward".
    void forward(const Bindings& inputs, std::string_view caller);
    /// Gradient of the sum of outputs[0] (over every item and step) for each parameter. Each backward
    /// needs a forward of its own (it frees that forward's values as it goes): a second backward, or
    /// one before any forward, is a UserError.
    void backward();
    /// The same, calling on_ready(i) for parameter i as soon as its gradient is final, possibly on a
    /// worker thread while backward goes on (see Execution::backward).
    void backward(const std::function<void(std::size_t)>& on_ready);

    /// \return a copy of an output's value from the last forward, in the session's precision
    /// (Value::dtype).
    Value value(const Variable& output) const;
    /// The same values in place, without a copy: flat in the layout of value(output)'s data, valid
    /// until the next forward. T must be the session's precision, else a UserError.
    template <class T = float>
    std::span<const T> value_data(const Variable& output) const;
    /// @{
    /// Sum of an output over all real (unpadded) positions, and how many positions it has (the real
    /// steps of a sequence output, the items of a batch one).
    double sum(const Variable& output) const;
    std::size_t count(const Variable& output) const;
    /// @}
    /// @{
    /// Parameter i's (or p's) gradient from the last backward, as the session keeps it
    /// (GradientRef): dense, zeros for a parameter the loss does not use, or by rows for an
    /// embedding table; `.to_dense()` gives a dense copy either way. T is the session's precision
    /// (float by default; gradient<double> for a double session), else a UserError; so is a
    /// gradient not computed since the session was made or released since.
    template <class T = float>
    GradientRef<const T> gradient(std::size_t i) const;
    template <class T = float>
    GradientRef<const T> gradient(const Parameter& p) const {
        return gradient<T>(parameter_index(p));
    }
    /// @}
    /// For a GradientReduction (distributed/: the sum over processes), between backward and the
    /// learner's update: parameter i's gradient to change in place, the memory gradient(i) reads. A
    /// UserError for a parameter the loss does not use (its gradient is zero) or one released. A
    /// reduction replaces a gradient's rows with RowGradient::replace.
    template <class T = float>
    GradientRef<T> mutable_gradient(std::size_t i);
    /// Whether parameter i's gradient is kept by rows (GradientRef::by_rows), known from the start
    /// of the first backward on, also while it runs (a reduction plans its messages by it).
    bool kept_by_rows(std::size_t i) const;
    /// \return p's index in parameters() (a table made with the session: no search); a UserError
    /// when p is not one of them.
    std::size_t parameter_index(const Parameter& p) const;
    /// @{
    /// Gives parameter i's gradient memory back for reuse once it has been read (a Trainer does
    /// this after each update): the next pass's values then reuse it instead of new memory. Until
    /// the next backward, gradient(i) then throws.
    void release_gradient(std::size_t i);
    void release_gradients();
    /// @}
    /// \return the parameters backward() differentiates for, in index order.
    const std::vector<Parameter>& parameters() const { return parameters_; }
    /// Bytes of evaluation buffers the session holds (values, gradients, free buffers kept for reuse).
    std::size_t bytes_held() const;
    /// \return the outputs given at construction.
    const std::vector<Variable>& outputs() const { return outputs_; }
    /// Bounds the memory a loop (a past_value/future_value recurrence) keeps for backward: its
    /// members' values and gradients over all steps. A loop that would hold more keeps its states
    /// only every k steps and recomputes each segment in backward (square-root checkpointing), with
    /// the same gradients. 0: no budget. Throws UserError at forward when a loop cannot fit even so
    /// (the message gives the least budget that works). See docs/semantics.md, "Memory budget".
    /// The budget stays when the session changes precision (to_precision).
    void set_memory_budget(std::size_t bytes);
    /// The most bytes one loop held for backward since the session was made or changed precision
    /// (see set_memory_budget).
    std::size_t loop_bytes_peak() const;
    /// Promises that the parameters stay as they are until set_parameters_fixed(false): each
    /// product outside a loop whose weight derives from parameters and constants only (times,
    /// times_transpose, affine over a parameter) then packs that weight for the kernels at its
    /// first forward and keeps it for the next ones, instead of packing it at every forward (a
    /// Generator fixes its step's parameters for each generate). A parameter changed meanwhile is
    /// not seen by those products; calling it again with true starts afresh, false gives the
    /// packed copies back. It stays when the session changes precision (to_precision).
    ///
    /// `weights`: the precision those products read their weight in while fixed, in a float session
    /// (a double one computes in double): float (as it is), bfloat16 or int8 (core/weight_precision.hpp,
    /// core/quantized_gemm.hpp), each weight rounded once, at its first forward. Generation's
    /// per-step products read half or a quarter of the bytes; their values are those of the rounded
    /// weights (GenerateOptions::weights). Products inside loops and attention's own read float.
    /// A small model's int8 weights are also kept widened into bfloat16 pairs (widen_int8_pays,
    /// core/quantized_gemm.hpp): the same values, read without widening at every product.
    void set_parameters_fixed(bool fixed, WeightPrecision weights = WeightPrecision::float32);
    /// The precision set_parameters_fixed set (float32 while the parameters are not fixed).
    WeightPrecision fixed_weights() const { return parameters_fixed_ ? fixed_weights_ : WeightPrecision::float32; }
    /// Whether set_parameters_fixed keeps the int8 weights widened into bfloat16 pairs too
    /// (widen_int8_pays over every parameter the graph reads, given to the session or not).
    bool int8_weights_widened() const { return parameters_fixed_ && int8_widened_; }

private:
    template <class T>
    using ExecutionPtr = std::unique_ptr<Execution<T>>;
    int output_index(const Variable& v) const;
    /// param_nodes_[i] (-1: the loss does not use parameter i); a UserError naming `what` when i is
    /// out of range.
    int param_node(std::size_t i, const char* what) const;
    /// A UserError naming `what`: parameter i has no gradient until the next backward.
    [[noreturn]] void no_gradient(std::size_t i, const char* what) const;
    /// The execution, when T is the session's precision; else a UserError naming `what`.
    template <class T>
    const Execution<T>& execution(const char* what) const;
    template <class T>
    Execution<T>& execution(const char* what) {
        return const_cast<Execution<T>&>(std::as_const(*this).execution<T>(what));  // the session's own
    }
    /// @{
    /// f(execution) for the session's one execution, float or double.
    template <class F>
    decltype(auto) visit(F&& f) const {
        return std::visit([&](const auto& ex) -> decltype(auto) { return f(std::as_const(*ex)); }, ex_);
    }
    template <class F>
    decltype(auto) visit(F&& f) {
        return std::visit([&](auto& ex) -> decltype(auto) { return f(*ex); }, ex_);
    }
    /// @}
    void make_execution(DType wanted);

    std::vector<Variable> outputs_;
    std::vector<Parameter> parameters_;
    std::vector<int> param_nodes_;  ///< plan index, or -1 when the loss does not use it
    std::vector<int> wrt_;  ///< the plan indices of param_nodes_ that are used: what backward differentiates for
    /// per plan node: the parameters (indices) it is, so backward's report of a node costs no search
    std::vector<std::vector<std::size_t>> params_of_node_;
    std::unordered_map<const Node*, std::size_t> index_of_node_;  ///< a parameter's node -> its index
    std::vector<Parameter> graph_parameters_;                     ///< every parameter the plan binds, and parameters_
    std::vector<std::size_t> zero_sizes_;  ///< per parameter: its size when the loss does not use it
    ByDType<VectorOf> zeros_;              ///< the gradient of a parameter the loss does not use
    std::size_t memory_budget_ = 0;        ///< 0: none
    bool parameters_fixed_ = false;        ///< set_parameters_fixed
    WeightPrecision fixed_weights_ = WeightPrecision::float32;  ///< set_parameters_fixed's weights
    bool int8_widened_ = false;                                 ///< set_parameters_fixed's widening
    std::shared_ptr<const Plan> plan_;
    ByDType<ExecutionPtr> ex_;  ///< in the session's precision
};

/// @cond
extern template GradientRef<const float> Session::gradient<float>(std::size_t) const;
extern template GradientRef<const double> Session::gradient<double>(std::size_t) const;
extern template GradientRef<float> Session::mutable_gradient<float>(std::size_t);
extern template GradientRef<double> Session::mutable_gradient<double>(std::size_t);
/// @endcond
}  // namespace loom
