#pragma once
// A loop run in segments under a memory budget (square-root checkpointing), for StepRunner: each
// segment's steps are computed in windows of `history` + `length` rows (the rows before the
// segment are what its delays read), only the loop-carried states at each segment's start are
// saved, and backward recomputes a segment from them before running its steps' backward. Members
// whose whole value or gradient a step outside the loop (or the loop's bulk gradients) reads are
// kept whole as well: the roles the pass schedule gave the loop (LoopRoles).
#include <functional>
#include <vector>

#include "graph/buffers.hpp"
#include "graph/compile.hpp"
#include "graph/op_calls.hpp"
#include "graph/pass_plan.hpp"

namespace loom {

// Each loop member's cache of one run of the loop (a weight packed once), from `pool`.
template <class T>
std::vector<LoopCache<T>> loop_caches(std::size_t members, BufferPool<T>& pool) {
    std::vector<LoopCache<T>> caches(members);
    for (auto& c : caches) c.pool = &pool;
    return caches;
}

template <class T>
class LoopSegments {
public:
    LoopSegments(const Plan& plan, Buffers<T>& buffers, OpCalls<T>& calls)
        : plan_(plan), buffers_(buffers), calls_(calls), segments_(plan.steps.size()) {}

    // Before loop step s's forward, its members' sizes set: whether it runs in segments, from
    // `budget` bytes and the schedule's roles of a training pass; throws UserError when even
    // segments exceed the budget or the loop reads sequence positions. Gives back what its last
    // run saved.
    bool plan(std::size_t s, const SequenceLayout& layout, const PassSchedule* pass, std::size_t budget);
    bool active(std::size_t s) const { return segments_[s].active; }
    // Whether member mi's value is kept whole (else only its windows exist).
    bool whole_value(std::size_t s, std::size_t mi) const {
        return !segments_[s].active || segments_[s].roles->full_value[mi];
    }
    // Runs the loop forward segment by segment; returns the bytes of its windows.
    std::size_t forward(std::size_t s, Workspace<T>& work);
    // Runs its steps backward segment by segment, recomputing each first; `peak(bytes)` is told
    // the windows' and the saved states' bytes once they are taken. The loop's bulk gradients
    // (StepRunner::back_from_outside) are the caller's, after.
    void backward(std::size_t s, Workspace<T>& work, const std::function<void(std::size_t)>& peak);
    // The states loop step s saved for its backward, and those of every loop.
    std::size_t saved_bytes(std::size_t s) const;
    std::size_t bytes_held() const;

private:
    struct Segments {
        bool active = false;
        std::size_t length = 0, count = 0;
        const LoopRoles* roles = nullptr;
        std::vector<Buffer<T>> saved;  // per carried member: its history rows at segment i's start
    };
    struct Window;
    Window window(const PlanStep& step, const Segments& seg, const SequenceLayout& layout, std::size_t i) const;
    // Backward's recomputation of segment i into the value windows: its saved states as history,
    // then its steps (members kept whole copied, a dropout mask not drawn again).
    // `row`: each member's elements per time step.
    void recompute(std::size_t s, std::size_t i, const Window& w, const std::vector<std::size_t>& row,
                   std::vector<Buffer<T>>& values, std::vector<LoopCache<T>>& caches, Workspace<T>& work);
    const SequenceLayout& layout(const PlanStep& step) const { return *buffers_[step.members.front()].layout; }

    const Plan& plan_;
    Buffers<T>& buffers_;
    OpCalls<T>& calls_;
    std::vector<Segments> segments_;  // per plan step
};

extern template class LoopSegments<float>;
extern template class LoopSegments<double>;

}  // namespace loom
