#pragma once
/// \file
/// Running a graph of tasks on a few threads: each task starts once every task it depends on has
/// finished. The executor uses it to run independent plan steps at once (the two directions of a
/// bidirectional recurrence, the two towers of a siamese model), each with single-threaded BLAS:
/// small per-step GEMMs scale far better across independent recurrences than inside one GEMM.
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

/// Runs every task of `g` as run(task, worker) with worker in [0, threads), on `threads` threads
/// (the calling one included). The first exception a task throws stops new tasks from starting
/// and is rethrown here once running ones finish.
void run_task_graph(const TaskGraph& g, int threads, const std::function<void(int task, int worker)>& run);

}  // namespace loom
