#include "core/parallel.hpp"

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <queue>
#include <system_error>
#include <thread>

#include "core/errors.hpp"
#include "core/gemm.hpp"

namespace loom {

namespace {
std::atomic<int> inter_op{1};

// Rounds of work handed out from one word: a generation in the high 32 bits (odd while a round is
// open) and how much of the round was taken in the low 32. Taking moves (generation, i) to
// (generation, i + 1), so nothing of a round that has since closed can be taken. One thread opens
// and closes; whatever it wrote before opening, a taker that took reads as written.
class Rounds {
public:
    bool open() const { return ((state_.load() >> 32) & 1) != 0; }
    /// Opens the next round; \return its generation.
    std::uint64_t start() {
        const std::uint64_t generation = (state_.load(std::memory_order_relaxed) >> 32) + 1;  // odd
        state_.store(generation << 32);
        return generation;
    }
    /// Closes the round `generation`; \return how much of it was taken.
    std::uint32_t close(std::uint64_t generation) {
        return static_cast<std::uint32_t>(state_.exchange((generation + 1) << 32) & 0xffffffffu);
    }
    /// Whether the open round has some of limit() left.
    template <class Limit>
    bool left(Limit limit) const {
        const std::uint64_t s = state_.load();
        return ((s >> 32) & 1) != 0 && (s & 0xffffffffu) < limit();
    }
    /// Takes the next of limit() of the open round: \return its index, or -1 when none is left.
    template <class Limit>
    std::int64_t take(Limit limit) {
        std::uint64_t s = state_.load(std::memory_order_acquire);
        for (;;) {
            if (((s >> 32) & 1) == 0 || (s & 0xffffffffu) >= limit()) return -1;
            if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire))
                return static_cast<std::int64_t>(s & 0xffffffffu);
        }
    }

private:
    std::atomic<std::uint64_t> state_{0};
};

// The one open share of share_parts: its parts are a round of `rounds`. `parts`, `part` and
// `context` are written before the round opens; a share closes only once all its parts are done,
// so whoever took a part reads them as that share wrote them.
struct OpenShare {
    Rounds rounds;
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
    const std::int64_t i = open_share.rounds.take([] { return open_share.parts.load(std::memory_order_relaxed); });
    if (i < 0) return false;
    open_share.part.load(std::memory_order_relaxed)(open_share.context.load(std::memory_order_relaxed),
                                                    static_cast<std::size_t>(i));
    open_share.done.fetch_add(1, std::memory_order_release);
    return true;
}

void pause() {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

// Sleeps until rung with woken() true (checked before sleeping, so no ringing is missed).
template <class Woken>
void sleep_until(Woken woken) {
    sleepers.fetch_add(1);
    for (;;) {
        const std::uint32_t rung = bell.load();
        if (woken()) break;
        bell.wait(rung);
    }
    sleepers.fetch_sub(1);
}

// An idle thread: takes shared parts until `woken()` (a task is ready, a task graph has a seat for
// it, or it is to stop). Spins while work came recently (a recurrence shares its products every
// few microseconds), then sleeps until rung.
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
        sleep_until([&] { return woken() || open_share.rounds.open(); });
        spins = 0;
    }
    idle_count.fetch_sub(1);
}

// The inter-op threads, started when a task graph first needs them and kept for the process, so
// that a pass (a decoder's step, say) does not wait for a new thread before its products can be
// split. A task graph's run offers its work to `seats` of them (worker 1, 2, ...) while the
// caller is worker 0. Between runs, the first inter_op_threads() - 1 of them take shared parts
// (a product of a graph run on one thread, a plan of a single step); the others sleep.
class Pool {
public:
    static Pool& get() {
        static Pool pool;
        return pool;
    }
    Pool() = default;
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;
    ~Pool() {
        stop_ = true;
        bell.fetch_add(1);
        bell.notify_all();
        for (auto& t : threads_) t.join();
    }

    // Runs work(0) here and work(1..seats) on pool threads that take a seat before work(0) returns;
    // returns once every seat taken has finished. Seats not taken by then are withdrawn: work(0)
    // alone must be able to do everything (a task graph's worker runs tasks until none is left).
    void run(int seats, const std::function<void(int)>& work) {
        if (seats > 0) seats = std::min(seats, start(seats));
        if (seats <= 0 || owned_.exchange(true, std::memory_order_acquire)) {  // another graph runs: this one alone
            work(0);
            return;
        }
        work_.store(&work, std::memory_order_relaxed);
        seats_.store(seats, std::memory_order_relaxed);
        finished_.store(0, std::memory_order_relaxed);
        const std::uint64_t generation = rounds_.start();
        ring();
        work(0);
        const auto taken = static_cast<int>(rounds_.close(generation));
        while (finished_.load(std::memory_order_acquire) < taken) pause();
        owned_.store(false, std::memory_order_release);
    }

private:
    // Starts threads until there are `wanted` (fewer if the system has none to give). \return how many there are.
    int start(int wanted) {
        std::lock_guard lock(m_);
        try {
            while (static_cast<int>(threads_.size()) < wanted) {
                const int index = static_cast<int>(threads_.size());
                threads_.emplace_back([this, index] { loop(index); });
            }
        } catch (const std::system_error&) {
            // No more threads to be had: the ones running (and the caller) do all the work.
        }
        return static_cast<int>(threads_.size());
    }

    bool seat_free() const {
        return rounds_.left([this] { return seats(); });
    }

    // Takes a seat of the open run and works in it: true when it did.
    bool take_seat() {
        const std::int64_t seat = rounds_.take([this] { return seats(); });
        if (seat < 0) return false;
        (*work_.load(std::memory_order_relaxed))(static_cast<int>(seat) + 1);
        finished_.fetch_add(1, std::memory_order_release);
        return true;
    }

    std::uint64_t seats() const { return static_cast<std::uint64_t>(seats_.load(std::memory_order_relaxed)); }

    void loop(int index) {
        auto helps = [&] { return index + 1 < inter_op_threads(); };
        while (!stop_) {
            if (take_seat()) continue;
            if (helps())
                idle_until([&] { return seat_free() || stop_ || !helps(); });
            else
                sleep_until([&] { return seat_free() || stop_ || helps(); });
        }
    }

    std::mutex m_;
    std::vector<std::thread> threads_;
    Rounds rounds_;  // a run's seats
    std::atomic<int> seats_{0}, finished_{0};
    std::atomic<const std::function<void(int)>*> work_{nullptr};
    std::atomic<bool> owned_{false}, stop_{false};
};
}  // namespace

void set_inter_op_threads(int n) {
    if (n < 1) throw UserError("set_inter_op_threads: need at least 1 thread, got " + std::to_string(n));
    inter_op = n;
    if (n > 1) set_blas_threads(1);
    bell.fetch_add(1);  // the pool's threads look again whether they are to take shared parts
    bell.notify_all();
}

int inter_op_threads() { return inter_op.load(); }

int idle_threads() { return idle_count.load(std::memory_order_relaxed); }

void share_parts(std::size_t parts, void (*part)(void*, std::size_t), void* context) {
    if (parts > 1 && inter_op_threads() > 1 && !open_share.owned.exchange(true, std::memory_order_acquire)) {
        open_share.parts.store(parts, std::memory_order_relaxed);
        open_share.part.store(part, std::memory_order_relaxed);
        open_share.context.store(context, std::memory_order_relaxed);
        open_share.done.store(0, std::memory_order_relaxed);
        const std::uint64_t generation = open_share.rounds.start();
        ring();
        while (take_part()) {
        }
        while (open_share.done.load(std::memory_order_acquire) < parts) pause();
        open_share.rounds.close(generation);
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
    Pool::get().run(threads - 1, work);
    if (error) std::rethrow_exception(error);
}

}  // namespace loom
