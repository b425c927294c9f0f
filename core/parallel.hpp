#pragma once
/// \file
/// Running a graph of tasks on a few threads: each task starts once every task it depends on has
/// finished. The executor uses it to run independent plan steps at once (the two directions of a
/// bidirectional recurrence, the two towers of a siamese model), each with single-threaded BLAS:
/// small per-step GEMMs scale far better across independent recurrences than inside one GEMM.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace loom {

/// How many independent plan steps an evaluation may run at once (1: one after another, the
/// default). With n > 1 OpenBLAS is set to one thread, so n threads use n cores in total.
void set_inter_op_threads(int n);
/// \return the number set by set_inter_op_threads (1 unless set).
int inter_op_threads();

/// A task graph: `after[t]` lists the tasks that must finish before task t starts. Tasks are
/// numbered in a valid serial order (every dependency has a smaller number); ready tasks are
/// started lowest number first.
struct TaskGraph {
    std::vector<std::vector<int>> after;  ///< per task: the tasks it waits for (each with a smaller number)
    /// Optional, one per task: among ready tasks the highest starts first (then the lowest number).
    /// E.g. the length of the longest chain of work from the task to the end (critical path).
    std::vector<double> priority;
};

/// Critical-path priorities: each task's cost plus the most expensive chain of tasks waiting on it.
std::vector<double> critical_path_priority(const TaskGraph& g, const std::vector<double>& cost);

/// Runs every task of `g` as run(task, worker) with worker in [0, threads), on `threads` threads:
/// the calling one and threads loom starts once and keeps. A graph run from inside a task, or
/// while another graph runs on another thread, runs on its calling thread alone. The first
/// exception a task throws stops new tasks from starting and is rethrown here once running ones
/// finish. A thread with no task ready takes parts of the work that running tasks share
/// (share_parts) until one is.
void run_task_graph(const TaskGraph& g, int threads, const std::function<void(int task, int worker)>& run);

/// The inter-op threads that have nothing to do and would take a part of shared work now: those
/// of a running task graph with no task ready, and between graphs the first inter_op_threads() - 1
/// of loom's threads. 0 while every thread is busy, and before any task graph ran.
int idle_threads();

/// Runs part(context, i) once for every i in [0, parts): on the calling thread, and at once on any
/// inter-op thread that is idle or becomes idle before the parts are all taken, each taking the
/// next part not taken yet. Returns when every part has run. With inter_op_threads() 1, or while
/// another share is open, every part runs here in order. Parts must
/// not throw (one that does ends the program), and must write disjoint memory: a product split by
/// columns, say, whose every element is computed by exactly the same operations as unsplit, so
/// results do not depend on the threads.
void share_parts(std::size_t parts, void (*part)(void* context, std::size_t i), void* context);

/// share_parts with a callable f(i).
template <class F>
void share_parts(std::size_t parts, F& f) {
    share_parts(
        parts, [](void* context, std::size_t i) { (*static_cast<F*>(context))(i); }, &f);
}

/// Splits [0, extent) among the calling thread and the idle ones (share_parts) into ranges whose
/// bounds are multiples of `align` (the last ends at `extent`) and calls run(begin, end) once per
/// range, when a unit of the range costs `unit_work`: one range per idle thread and this one, each
/// of at least `min_work`; with no thread idle now, up to 4 ranges of at least 4 x `min_work`,
/// which a thread that becomes idle meanwhile (its own step done) can still take. \return false,
/// having run nothing, with one inter-op thread or work too small to split.
template <class Run>
bool share_range(std::size_t extent, std::size_t align, std::size_t unit_work, std::size_t min_work, Run run) {
    if (inter_op_threads() < 2 || extent == 0 || align == 0) return false;
    const auto idle = static_cast<std::size_t>(idle_threads());
    const std::size_t units = (extent + align - 1) / align, work = extent * unit_work;
    min_work = std::max<std::size_t>(min_work, 1);
    std::size_t parts =
        idle > 0 ? std::min(idle + 1, work / min_work) : std::min<std::size_t>(4, work / (4 * min_work));
    parts = std::min(parts, units);
    if (parts < 2) return false;
    auto part = [&](std::size_t i) {
        const std::size_t begin = i * units / parts * align, end = std::min(extent, (i + 1) * units / parts * align);
        run(begin, end);
    };
    share_parts(parts, part);
    return true;
}

/// Element operations below which a loop of simple element- or row-wise work (an element-wise op,
/// a copy of rows) is not worth splitting among threads (about 10 microseconds).
inline constexpr std::size_t kShareElementWork = std::size_t{1} << 15;

/// share_range, or run(0, extent) here when it does not split: run covers [0, extent) either way.
template <class Run>
void share_or_run(std::size_t extent, std::size_t align, std::size_t unit_work, std::size_t min_work, Run run) {
    if (!share_range(extent, align, unit_work, min_work, run)) run(0, extent);
}

}  // namespace loom
