#pragma once
/// \file
/// Layer: a callable Variable -> Variable that owns its parameters, and the basic layers built on it.
/// Parameters whose shape depends on the input (the input dimension of Dense, of an LSTM's input
/// projection, ...) are created at the first call, as CNTK infers them; calling a layer again reuses
/// them (weight sharing). parameters() lists what exists so far.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/random.hpp"
#include "graph/ops.hpp"
#include "graph/variable.hpp"

namespace loom::layers {

/// An element-wise function applied to a layer's output (empty: the identity).
using Activation = std::function<Variable(const Variable&)>;

/// Element-wise activations to pass to Dense, RNNStep, ... (an empty Activation is the identity).
namespace activations {
inline const Activation identity{};  ///< the empty Activation: no function applied
inline const Activation tanh = [](const Variable& v) { return loom::tanh(v); };          ///< loom::tanh
inline const Activation sigmoid = [](const Variable& v) { return loom::sigmoid(v); };    ///< loom::sigmoid
inline const Activation relu = [](const Variable& v) { return loom::relu(v); };          ///< loom::relu
inline const Activation softplus = [](const Variable& v) { return loom::softplus(v); };  ///< loom::softplus
}  // namespace activations

/// A function from a Variable to a Variable that holds its own parameters (made at its first call
/// or before): what Dense, Embedding, Sequential, ... return.
class Layer {
public:
    /// What the layer computes.
    using Function = std::function<Variable(const Variable&)>;
    /// Lists the layer's parameters.
    using ParameterList = std::function<std::vector<Parameter>()>;

    /// An empty layer (operator bool is false); calling it is a UserError.
    Layer() = default;
    /// A layer named `name` computing `function`, whose parameters `parameters` lists.
    Layer(std::string name, Function function, ParameterList parameters = {});

    /// \return the layer applied to x.
    Variable operator()(const Variable& x) const;
    /// The parameters created so far (all of them once the layer has been called), without repeats.
    std::vector<Parameter> parameters() const;
    /// \return the name given at construction.
    const std::string& name() const { return name_; }
    /// \return whether the layer computes something (is not empty).
    explicit operator bool() const { return static_cast<bool>(function_); }

private:
    std::string name_;
    Function function_;
    ParameterList parameters_;
};

/// Appends the parameters of `more` that are not yet in `list` (keeps the order of first appearance).
void append_unique(std::vector<Parameter>& list, const std::vector<Parameter>& more);

/// @{
/// y = activation(x W + b): W [x's last axis, shape...]; only the last axis of x is mapped. The
/// second form's shape is [dim].
Layer Dense(const Shape& shape, const Activation& activation = {}, bool bias = true,
            const Initializer& init = glorot_uniform(), const std::string& name = "Dense");
Layer Dense(std::size_t dim, const Activation& activation = {}, bool bias = true,
            const Initializer& init = glorot_uniform(), const std::string& name = "Dense");
/// @}

/// The vocabulary size Embedding uses when none is given: 0 (unset) unless a DefaultVocabulary scope
/// is active. Read when the Embedding is constructed and, if still unset, at its first call.
std::size_t default_vocabulary_size();
/// Sets default_vocabulary_size() for a scope and restores the previous one on exit.
class DefaultVocabulary {
public:
    /// Embeddings made in this scope without a vocabulary size take `size`.
    explicit DefaultVocabulary(std::size_t size);
    ~DefaultVocabulary();
    DefaultVocabulary(const DefaultVocabulary&) = delete;
    DefaultVocabulary& operator=(const DefaultVocabulary&) = delete;

private:
    std::size_t previous_;
};

/// Embedding(dim, vocabulary): a table E [vocabulary, dim].
/// - Input of sample shape [1] holds token ids: the output is row E[id] (the `embedding` op, whose
///   gradient touches only the used rows). The vocabulary size comes from the argument, else from
///   an enclosing DefaultVocabulary scope; without either the first call throws a UserError.
/// - Any other input [..., V] (one-hot or dense rows) is multiplied: x E, with E [V, dim] (as CNTK);
///   the vocabulary is then V.
Layer Embedding(std::size_t dim, std::size_t vocabulary = 0, const Initializer& init = glorot_uniform(),
                const std::string& name = "Embedding");

/// Applies the layers in order; its parameters are theirs.
Layer Sequential(const std::vector<Layer>& layers, const std::string& name = "Sequential");

/// dropout(x, rate): active only in training mode (graph/mode.hpp).
Layer Dropout(double rate, std::uint64_t seed = 0, const std::string& name = "Dropout");

/// (x - mean) / sqrt(variance + epsilon) * scale + bias over the last axis; scale [d] starts at 1, bias [d] at 0.
Layer LayerNormalization(double epsilon = 1e-5, const std::string& name = "LayerNormalization");

}  // namespace loom::layers
