#pragma once
// Training or inference: read by the ops whose forward differs between the two (dropout) when they
// run, not when the graph is built, so one graph serves both. The default is inference.
namespace loom {

bool is_training();
void set_training(bool training);

// Sets the mode for a scope and restores the previous one on exit (also when an exception leaves it).
class TrainingScope {
public:
    explicit TrainingScope(bool training = true);
    ~TrainingScope();
    TrainingScope(const TrainingScope&) = delete;
    TrainingScope& operator=(const TrainingScope&) = delete;

private:
    bool previous_;
};

}  // namespace loom
