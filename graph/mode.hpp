#pragma once
/// \file
/// Training or inference: read by the ops whose forward differs between the two (dropout) when they
/// run, not when the graph is built, so one graph serves both. The default is inference.
namespace loom {

/// \return whether the ops run in training mode (dropout drops); false by default.
bool is_training();
/// Sets training mode (true) or inference mode (false) for what runs next, on every thread.
void set_training(bool training);

/// Sets the mode for a scope and restores the previous one on exit (also when an exception leaves it).
class TrainingScope {
public:
    /// Sets the mode to `training` until the scope ends.
    explicit TrainingScope(bool training = true);
    ~TrainingScope();
    TrainingScope(const TrainingScope&) = delete;
    TrainingScope& operator=(const TrainingScope&) = delete;

private:
    bool previous_;
};

/// While one lives on this thread, dropout() builds no mask and returns its operand: for a graph
/// that only ever runs in inference (a Generator's step), whatever the mode when it runs, and whose
/// passes then skip the mask and its product (two ops a dropout, of a small GPT's hundred a step).
/// A dropout given seed 0 still draws its seed, so that what is drawn after is the same.
class InferenceGraphScope {
public:
    InferenceGraphScope();
    ~InferenceGraphScope();
    InferenceGraphScope(const InferenceGraphScope&) = delete;
    InferenceGraphScope& operator=(const InferenceGraphScope&) = delete;
    /// \return whether an InferenceGraphScope lives on this thread.
    static bool active();

private:
    bool previous_;
};

}  // namespace loom
