#include "core/parallel.hpp"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <queue>
#include <system_error>
#include <thread>

#include "core/errors.hpp"
#include "core/gemm.hpp"

namespace loom {

namespace {
std::atomic<int> inter_op{1};
}

void set_inter_op_threads(int n) {
    if (n < 1) throw UserError("set_inter_op_threads: need at least 1 thread, got " + std::to_string(n));
    inter_op = n;
    if (n > 1) set_blas_threads(1);
}

int inter_op_threads() { return inter_op.load(); }

std::vector<double> critical_path_priority(const TaskGraph& g, const std::vector<double>& cost) {
    const std::size_t n = g.after.size();
    if (cost.size() != n) throw InternalError("critical_path_priority: one cost per task needed");
    std::vector<double> level(cost);
    // Tasks wait only for earlier ones: walking from the last task back, every task waiting on t
    // has its level final when t is reached.
    for (std::size_t t = n; t-- > 0;)
        for (int d : g.after[t])
            level[static_cast<std::size_t>(d)] =
                std::max(level[static_cast<std::size_t>(d)], cost[static_cast<std::size_t>(d)] + level[t]);
    return level;
}

void run_task_graph(const TaskGraph& g, int threads, const std::function<void(int, int)>& run) {
    const auto n = static_cast<int>(g.after.size());
    std::vector<int> waiting(static_cast<std::size_t>(n));
    std::vector<std::vector<int>> next(static_cast<std::size_t>(n));
    const bool prioritized = g.priority.size() == g.after.size();
    auto later = [&](int a, int b) {  // true: b starts before a
        if (prioritized && g.priority[static_cast<std::size_t>(a)] != g.priority[static_cast<std::size_t>(b)])
            return g.priority[static_cast<std::size_t>(a)] < g.priority[static_cast<std::size_t>(b)];
        return a > b;
    };
    std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
    for (int t = 0; t < n; ++t) {
        for (int d : g.after[static_cast<std::size_t>(t)]) {
            if (d < 0 || d >= t)
                throw InternalError("run_task_graph: task " + std::to_string(t) + " waits for task " +
                                    std::to_string(d) + ", not an earlier one");
            next[static_cast<std::size_t>(d)].push_back(t);
        }
        waiting[static_cast<std::size_t>(t)] = static_cast<int>(g.after[static_cast<std::size_t>(t)].size());
        if (waiting[static_cast<std::size_t>(t)] == 0) ready.push(t);
    }
    if (threads <= 1 || n <= 1) {
        for (int t = 0; t < n; ++t) run(t, 0);
        return;
    }
    std::mutex m;
    std::condition_variable cv;
    int finished = 0;
    std::exception_ptr error;
    auto work = [&](int worker) {
        std::unique_lock lock(m);
        for (;;) {
            cv.wait(lock, [&] { return !ready.empty() || finished == n || error; });
            if (finished == n || error) return;
            const int t = ready.top();
            ready.pop();
            lock.unlock();
            std::exception_ptr failed;
            try {
                run(t, worker);
            } catch (...) {
                failed = std::current_exception();
            }
            lock.lock();
            if (failed) {
                if (!error) error = failed;
                cv.notify_all();
                return;
            }
            ++finished;
            for (int u : next[static_cast<std::size_t>(t)])
                if (--waiting[static_cast<std::size_t>(u)] == 0) ready.push(u);
            cv.notify_all();
        }
    };
    std::vector<std::thread> pool;
    try {
        for (int w = 1; w < threads; ++w) pool.emplace_back(work, w);
    } catch (const std::system_error&) {
        // No more threads to be had: the ones running (and this one) do all the work.
    }
    work(0);
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace loom
