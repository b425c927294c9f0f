#pragma once
/// \file
/// Recurrent cells and the combinators that run them over a sequence.
///
/// A Cell is a step function split in two, so that the input's contribution is computed OUTSIDE the
/// recurrence loop: project(x) is x W + b for all gates at once (a node that depends on x only, so
/// the executor runs it once over every time step as one GEMM), and step(states, projected) is the
/// recurrent part (h U and the gate non-linearities), which the loop runs per step.
/// cell(states, x) = cell.step(states, cell.project(x)) is the plain (h, c, x) -> (h, c) form.
/// The first state is the cell's output (h).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace loom::layers {

/// A recurrent cell: a projection of the input, done once over the whole sequence outside the loop,
/// and a step from the previous states and the projected input to the next states, inside it.
class Cell {
public:
    /// The part of the step that reads only the input, x -> projected (x W + b, say).
    using Project = std::function<Variable(const Variable& x)>;
    /// The recurrent part: (states, projected) -> next states, one per state.
    using Step = std::function<std::vector<Variable>(const std::vector<Variable>& states, const Variable& projected)>;

    /// An empty cell; using it is a UserError.
    Cell() = default;
    /// A cell named `name` with states of `state_shapes`, made of `project` and `step`, whose
    /// parameters `parameters` lists.
    Cell(std::string name, std::vector<Shape> state_shapes, Project project, Step step,
         Layer::ParameterList parameters = {});

    /// \return the number of states (2 for an LSTM: h and c).
    std::size_t num_states() const { return state_shapes_.size(); }
    /// \return the shape of each state, the output (first) state first.
    const std::vector<Shape>& state_shapes() const { return state_shapes_; }
    /// \return the name given at construction.
    const std::string& name() const { return name_; }

    /// \return the input projected (the Project function applied).
    Variable project(const Variable& x) const;
    /// \return the next states from `states` and a projected input; a UserError for a wrong number of states.
    std::vector<Variable> step(const std::vector<Variable>& states, const Variable& projected) const;
    /// \return step(states, project(x)).
    std::vector<Variable> operator()(const std::vector<Variable>& states, const Variable& x) const;
    /// The LSTM form: (h, c, x) -> {h, c}.
    std::vector<Variable> operator()(const Variable& h, const Variable& c, const Variable& x) const;
    /// \return the cell's parameters, without repeats.
    std::vector<Parameter> parameters() const;

private:
    std::string name_;
    std::vector<Shape> state_shapes_;
    Project project_;
    Step step_;
    Layer::ParameterList parameters_;
};

/// LSTM(n): states {h, c} of shape [n]. One affine map for the four gates, as DyNet's
/// VanillaLSTMBuilder: z = x W + b + h U with W [in, 4n], U [n, 4n], gates in the order
/// [input, forget, output, candidate]:
///   i = sigmoid(z_i), f = sigmoid(z_f), g = tanh(z_g), c' = f*c + i*g, o = sigmoid(z_o), h' = o*tanh(c').
/// With peepholes (as CNTK): z_i += c * p_i, z_f += c * p_f, z_o += c' * p_o (diagonal, [n] each).
Cell LSTM(std::size_t n, bool peepholes = false, const Initializer& init = glorot_uniform(),
          const std::string& name = "LSTM");
/// GRU(n), as CNTK: x W [in, 3n] + b gives the [reset, update, candidate] inputs;
///   r = sigmoid(x_r + h U_r), z = sigmoid(x_z + h U_z), g = tanh(x_g + (r*h) U_g), h' = (1-z)*g + z*h.
Cell GRU(std::size_t n, const Initializer& init = glorot_uniform(), const std::string& name = "GRU");
/// RNNStep(n, activation): h' = activation(x W + b + h U); CNTK's default activation is sigmoid.
Cell RNNStep(std::size_t n, const Activation& activation = activations::sigmoid,
             const Initializer& init = glorot_uniform(), const std::string& name = "RNNStep");

/// Runs `cell` over the sequence x: a placeholder per state, past_value (future_value when
/// go_backwards) of it with `initial_states` (one per state, or a single one for all), the step, and
/// the loop closed with replace_placeholders. Returns every state's sequence.
/// \param cell  the step to run
/// \param x  the input sequence
/// \param go_backwards  run from each sequence's end (future_value) instead of its start
/// \param initial_states  one per state, or a single one for all
std::vector<Variable> recurrence_states(const Cell& cell, const Variable& x, bool go_backwards,
                                        const std::vector<Variable>& initial_states);

/// The output (first state) sequence of the cell run over x; initial_state applies to every state.
Layer Recurrence(const Cell& cell, bool go_backwards = false, const Variable& initial_state = Variable(0.0),
                 const std::string& name = "Recurrence");

/// Like Recurrence, with the initial states given as inputs at the call (e.g. an encoder's final
/// state, a batch value), as CNTK's RecurrenceFrom: rf({h0, c0}, x).
class RecurrenceFrom {
public:
    /// Runs `cell` forward, or backward in time when `go_backwards`.
    explicit RecurrenceFrom(Cell cell, bool go_backwards = false) : cell_(std::move(cell)), backwards_(go_backwards) {}
    /// \return the output (first state) sequence of the cell run over x from `initial_states`.
    Variable operator()(const std::vector<Variable>& initial_states, const Variable& x) const;
    /// \return the cell's parameters.
    std::vector<Parameter> parameters() const { return cell_.parameters(); }

private:
    Cell cell_;
    bool backwards_;
};

/// The final state: the last step of a forward recurrence, the first step of a backward one (a batch value).
Layer Fold(const Cell& cell, bool go_backwards = false, const Variable& initial_state = Variable(0.0),
           const std::string& name = "Fold");

/// A forward and a backward recurrence over the same input, spliced along the last axis: [n_fwd + n_bwd].
Layer BiRecurrence(const Cell& forward, const Cell& backward, const std::string& name = "BiRecurrence");

}  // namespace loom::layers
