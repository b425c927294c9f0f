#include "graph/mode.hpp"

#include <atomic>

namespace loom {

namespace {
// Atomic so that a data-loading thread may read it while the trainer's thread flips it.
std::atomic<bool>& training_flag() {
    static std::atomic<bool> flag{false};
    return flag;
}
}  // namespace

bool is_training() { return training_flag().load(std::memory_order_relaxed); }
void set_training(bool training) { training_flag().store(training, std::memory_order_relaxed); }

TrainingScope::TrainingScope(bool training) : previous_(is_training()) { set_training(training); }
TrainingScope::~TrainingScope() { set_training(previous_); }

namespace {
thread_local bool inference_graph = false;
}

InferenceGraphScope::InferenceGraphScope() : previous_(inference_graph) { inference_graph = true; }
InferenceGraphScope::~InferenceGraphScope() { inference_graph = previous_; }
bool InferenceGraphScope::active() { return inference_graph; }

}  // namespace loom
