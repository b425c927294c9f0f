#include "layers/decoder.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/errors.hpp"
#include "graph/ops.hpp"

namespace loom::layers {

namespace {

// How many dimensions of a state's shape are any_size: those along which it grows.
std::size_t growing_dims(const Shape& shape) {
    return static_cast<std::size_t>(std::count(shape.begin(), shape.end(), any_size));
}

}  // namespace

Decoder::Decoder(DecoderStep step, std::vector<Shape> state_shapes, std::vector<StateUpdate> updates)
    : step_(std::move(step)), state_shapes_(std::move(state_shapes)), updates_(std::move(updates)) {
    if (!step_) throw UserError("Decoder: the step function is empty");
    if (updates_.empty()) updates_.assign(state_shapes_.size(), StateUpdate::replace);
    if (updates_.size() != state_shapes_.size())
        throw UserError("Decoder: " + std::to_string(updates_.size()) + " state updates for " +
                        std::to_string(state_shapes_.size()) + " states");
    for (std::size_t i = 0; i < updates_.size(); ++i) {
        const Shape& shape = state_shapes_[i];
        if (updates_[i] == StateUpdate::append && growing_dims(shape) != 1)
            throw UserError("Decoder: state " + std::to_string(i) + " of shape " + shape.str() +
                            " is appended to, so it needs one any_size dimension to grow along");
    }
}

DecoderOutput Decoder::unfold(const Variable& previous_symbols, const std::vector<Variable>& memory,
                              const std::vector<Variable>& initial_states) const {
    if (!initial_states.empty() && initial_states.size() != state_shapes_.size())
        throw UserError("Decoder::unfold: " + std::to_string(initial_states.size()) + " initial states for " +
                        std::to_string(state_shapes_.size()) + " states");
    for (std::size_t i = 0; i < state_shapes_.size(); ++i)
        if (growing_dims(state_shapes_[i]) != 0)
            throw UserError("Decoder::unfold: state " + std::to_string(i) + " of shape " + state_shapes_[i].str() +
                            " grows step by step (a key/value cache), which a loop's state cannot; train such a "
                            "decoder by its parallel graph (a TransformerDecoder called on the whole sequence)");
    std::vector<Variable> holders, delayed;
    for (std::size_t i = 0; i < state_shapes_.size(); ++i) {
        holders.push_back(placeholder(state_shapes_[i], "decoder_state_" + std::to_string(i)));
        delayed.push_back(past_value(holders.back(), initial_states.empty() ? Variable(0.0) : initial_states[i]));
    }
    DecoderOutput out = step_(previous_symbols, delayed, memory);
    if (out.states.size() != state_shapes_.size())
        throw UserError("Decoder::unfold: the step returned " + std::to_string(out.states.size()) +
                        " states, the decoder has " + std::to_string(state_shapes_.size()));
    std::vector<std::pair<Variable, Variable>> closing;
    for (std::size_t i = 0; i < holders.size(); ++i) closing.emplace_back(holders[i], out.states[i]);
    out.logits.replace_placeholders(closing);
    return out;
}

}  // namespace loom::layers
