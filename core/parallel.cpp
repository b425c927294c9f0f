#include "core/parallel.hpp"

#include <atomic>
#include <cstdint>
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

// The one open share of share_parts. `state` holds a generation in its high 32 bits (odd while a
// share is open) and the next part to take in its low 32: a thread takes part i by moving the
// state from (generation, i) to (generation, i + 1), so a part of a share that has since closed
// can never be taken. `parts`, `part` and `context` are written before the state opens and read
// after it is seen open; a share closes only once all its parts are done, so whoever took a part
// reads them as that share wrote them.
struct OpenShare {
    std::atomic<std::uint64_t> state{0};
    std::atomic<std::size_t> parts{0}, done{0};
    std::atomic<void (*)(void*, std::size_t)> part{nullptr};
    std::atomic<void*> context{nullptr};
    std::atomic<bool> owned{false};  // a share is open or opening: the next one runs alone
};
OpenShare open_share;

// Idle threads spin a while, then sleep on the bell; opening a share or readying a task rings it
// when someone sleeps. Both sides write their news, then read the other's (sequentially
// consistent), so either the sleeper sees the news or the news-bringer sees the sleeper.
std::atomic<int> idle_count{0}, sleepers{0};
std::atomic<std::uint32_t> bell{0};

void ring() {
    if (sleepers.load() == 0) return;
    bell.fetch_add(1);
    bell.notify_all();
}

// Takes and runs one part of the open share, if one is left: true when it ran one. A part that
// throws ends the program (noexcept): the share could never close, and its owner would wait forever.
bool take_part() noexcept {
    std::uint64_t s = open_share.state.load(std::memory_order_acquire);
    for (;;) {
        if (((s >> 32) & 1) == 0 || (s & 0xffffffffu) >= open_share.parts.load(std::memory_order_relaxed)) return false;
        if (open_share.state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire))
            break;
    }
    open_share.part.load(std::memory_order_relaxed)(open_share.context.load(std::memory_order_relaxed),
                                                    static_cast<std::size_t>(s & 0xffffffffu));
    open_share.done.fetch_add(1, std::memory_order_release);
    return true;
}

void pause() {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

// An idle thread of a task graph: takes shared parts until `woken()` (a task is ready, or the graph
// is over). Spins while work came recently (a recurrence shares its products every few
// microseconds), then sleeps until rung.
template <class Woken>
void idle_until(Woken woken) {
    constexpr int spins_before_sleep = 1 << 16;
    idle_count.fetch_add(1);
    for (int spins = 0; !woken();) {
        if (take_part()) {
            spins = 0;
            continue;
        }
        if (++spins < spins_before_sleep) {
            pause();
            continue;
        }
        sleepers.fetch_add(1);
        const std::uint32_t rung = bell.load();
        const std::uint64_t s = open_share.state.load();
        if (!woken() && ((s >> 32) & 1) == 0) bell.wait(rung);
        sleepers.fetch_sub(1);
        spins = 0;
    }
    idle_count.fetch_sub(1);
}
}  // namespace

void set_inter_op_threads(int n) {
    if (n < 1) throw UserError("set_inter_op_threads: need at least 1 thread, got " + std::to_string(n));
    inter_op = n;
    if (n > 1) set_blas_threads(1);
}

int inter_op_threads() { return inter_op.load(); }

int idle_threads() { return idle_count.load(std::memory_order_relaxed); }

void share_parts(std::size_t parts, void (*part)(void*, std::size_t), void* context) {
    if (parts > 1 && idle_threads() > 0 && !open_share.owned.exchange(true, std::memory_order_acquire)) {
        open_share.parts.store(parts, std::memory_order_relaxed);
        open_share.part.store(part, std::memory_order_relaxed);
        open_share.context.store(context, std::memory_order_relaxed);
        open_share.done.store(0, std::memory_order_relaxed);
        const std::uint64_t generation = (open_share.state.load(std::memory_order_relaxed) >> 32) + 1;  // odd
        open_share.state.store(generation << 32);
        ring();
        while (take_part()) {
        }
        while (open_share.done.load(std::memory_order_acquire) < parts) pause();
        open_share.state.store((generation + 1) << 32, std::memory_order_release);
        open_share.owned.store(false, std::memory_order_release);
        return;
    }
    for (std::size_t i = 0; i < parts; ++i) part(context, i);
}

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
    int finished = 0;
    std::exception_ptr error;
    // What an idle thread watches without the lock: tasks ready, and whether the graph is over.
    std::atomic<int> ready_count{static_cast<int>(ready.size())};
    std::atomic<bool> over{false};
    auto news = [&] {  // under the lock, after ready, finished or error changed
        ready_count.store(static_cast<int>(ready.size()));
        if (finished == n || error) over.store(true);
        ring();
    };
    auto work = [&](int worker) {
        std::unique_lock lock(m);
        for (;;) {
            if (ready.empty() && finished != n && !error) {
                lock.unlock();
                idle_until([&] { return ready_count.load() > 0 || over.load(); });
                lock.lock();
                continue;
            }
            if (finished == n || error) return;
            const int t = ready.top();
            ready.pop();
            ready_count.store(static_cast<int>(ready.size()));
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
                news();
                return;
            }
            ++finished;
            for (int u : next[static_cast<std::size_t>(t)])
                if (--waiting[static_cast<std::size_t>(u)] == 0) ready.push(u);
            news();
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
