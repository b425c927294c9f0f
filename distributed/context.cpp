#include "distributed/context.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <list>
#include <thread>
#include <vector>

#include "core/errors.hpp"

namespace loom::distributed {

namespace {
Context* current_context = nullptr;
using Clock = std::chrono::steady_clock;
// Tags of the notices, on a communicator of their own (never matched with the caller's messages).
constexpr int arrival_tag = 1, stop_tag = 2;
constexpr std::size_t remembered = 64;  // names of the last agreements, to say where a late process was

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string seconds_text(double s) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g s", s);
    return text;
}
}  // namespace

// Where every process said it was. An agreement is numbered by how many this process came to: every
// process comes to the same ones in the same order, so a number means the same agreement everywhere.
struct Context::Watch {
    MPI_Comm comm = MPI_COMM_NULL;
    double timeout = 300;
    std::int64_t point = 0;  ///< the agreements this process came to
    std::array<std::string, remembered> names;
    std::vector<std::int64_t> reached;     ///< per process, the last agreement it said it came to
    std::vector<Clock::time_point> heard;  ///< per process, when it last said so
    struct Sent {
        std::vector<char> bytes;
        MPI_Request request = MPI_REQUEST_NULL;
    };
    std::list<Sent> sent;  ///< notices on their way (their bytes live until they are sent)
    bool stopped = false;
    std::string message;         ///< why every process stops
    std::vector<char> late;      ///< the processes waited for in vain
    std::vector<char> reported;  ///< the processes that said they stop
    Clock::time_point stopped_at;

    // How often a waiting process repeats where it is, so that one that came to the agreement and
    // then fell silent can be told from one still waiting.
    double beat() const { return timeout > 0 ? std::clamp(timeout / 8, 0.02, 1.0) : 1.0; }
    std::string name(std::int64_t p) const {
        if (p <= 0) return "none yet";
        if (point - p >= static_cast<std::int64_t>(remembered)) return "agreement " + std::to_string(p);
        return names[static_cast<std::size_t>(p) % remembered];
    }
    void send_all(int rank, int size, int tag, std::vector<char> bytes) {
        for (int r = 0; r < size; ++r) {
            if (r == rank) continue;
            Sent& s = sent.emplace_back(Sent{bytes, MPI_REQUEST_NULL});
            MPI_Isend(s.bytes.data(), static_cast<int>(s.bytes.size()), MPI_CHAR, r, tag, comm, &s.request);
        }
        for (auto it = sent.begin(); it != sent.end();) {  // the ones sent are forgotten
            int done = 0;
            MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
            it = done ? sent.erase(it) : std::next(it);
        }
    }
};

Context::Context(int& argc, char**& argv) { init(&argc, &argv); }

Context::Context() { init(nullptr, nullptr); }

bool Context::launched_by_mpirun() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
        if (std::getenv(name)) return true;
    return false;
}

void Context::init(int* argc, char*** argv) {
    if (current_context) throw UserError("loom::distributed::Context: another Context is alive in this process");
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) throw UserError("loom::distributed::Context: MPI was initialized already (by someone else)");
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw UserError("loom::distributed::Context: MPI_Init_thread failed; run under mpirun (OpenMPI)");
    any_thread_ = provided >= MPI_THREAD_SERIALIZED;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    watch_ = std::make_unique<Watch>();
    MPI_Comm_dup(MPI_COMM_WORLD, &watch_->comm);
    watch_->reached.assign(static_cast<std::size_t>(size_), 0);
    watch_->heard.assign(static_cast<std::size_t>(size_), Clock::now());
    watch_->late.assign(static_cast<std::size_t>(size_), 0);
    watch_->reported.assign(static_cast<std::size_t>(size_), 0);
    current_context = this;
}

Context::~Context() {
    current_context = nullptr;
    if (watch_->stopped) end_stopped();
    if (in_flight_) abort("this process ended while its gradients were being summed with the other processes");
    // The others are at a synchronization (or reach this one, when every process ends): meet them
    // there, so none waits for this process forever. An ending process's exchange throws only when
    // the wait timed out.
    if (!gone_) try {
            exchange(Words{}, ended, std::uncaught_exceptions() > 0 ? "ended by an exception" : "ended its program",
                     "the end of the program");
        } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: error: %s\n", rank_, e.what());
            end_stopped();
        }
    // Notices nobody reads any more (a waiting process's repeats) are taken, the ones sent completed.
    for (int pending = 1; pending;) {
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, watch_->comm, &pending, MPI_STATUS_IGNORE);
        if (pending) hear();
    }
    for (auto& s : watch_->sent) MPI_Wait(&s.request, MPI_STATUS_IGNORE);
    MPI_Finalize();
}

void Context::set_timeout(double seconds) {
    if (!(seconds >= 0) || seconds > 1e9)
        throw UserError("loom::distributed::Context::set_timeout: " + std::to_string(seconds) +
                        " seconds; the timeout is from 0 (none) to 1e9");
    watch_->timeout = seconds;
}

double Context::timeout() const { return watch_->timeout; }

void Context::announce() {
    Watch& w = *watch_;
    std::vector<char> bytes(sizeof w.point);
    std::memcpy(bytes.data(), &w.point, sizeof w.point);
    w.send_all(rank_, size_, arrival_tag, std::move(bytes));
}

// Takes one notice waiting on the watch's communicator; true when it was a new "every process stops".
bool Context::hear() {
    Watch& w = *watch_;
    MPI_Status status;
    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, w.comm, &status);
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::vector<char> bytes(static_cast<std::size_t>(length));
    MPI_Recv(bytes.data(), length, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, w.comm, MPI_STATUS_IGNORE);
    const auto from = static_cast<std::size_t>(status.MPI_SOURCE);
    w.heard[from] = Clock::now();
    if (status.MPI_TAG == arrival_tag && bytes.size() == sizeof(std::int64_t)) {
        std::int64_t p = 0;
        std::memcpy(&p, bytes.data(), sizeof p);
        w.reached[from] = std::max(w.reached[from], p);
        return false;
    }
    // A stop: one byte per process (1: waited for in vain), then the message.
    w.reported[from] = 1;
    if (w.stopped || bytes.size() < static_cast<std::size_t>(size_)) return false;
    w.stopped = true;
    w.stopped_at = Clock::now();
    std::copy(bytes.begin(), bytes.begin() + size_, w.late.begin());
    w.message.assign(bytes.begin() + size_, bytes.end());
    return true;
}

void Context::stop(const std::string& message, const std::vector<int>& late) {
    Watch& w = *watch_;
    if (!w.stopped) {
        w.stopped = true;
        w.stopped_at = Clock::now();
        w.message = message;
        for (int r : late) w.late[static_cast<std::size_t>(r)] = 1;
    }
    std::vector<char> bytes(w.late.begin(), w.late.end());
    bytes.insert(bytes.end(), w.message.begin(), w.message.end());
    w.send_all(rank_, size_, stop_tag, std::move(bytes));  // this process stops too: the others count it
    throw UserError(w.message);
}

void Context::give_up(const std::string& what) {
    Watch& w = *watch_;
    // Who has not come to this agreement; when every process has, who then fell silent in it (a
    // waiting process repeats where it is every beat).
    std::vector<int> late;
    for (int r = 0; r < size_; ++r)
        if (r != rank_ && w.reached[static_cast<std::size_t>(r)] < w.point) late.push_back(r);
    const bool behind = !late.empty();
    if (!behind)
        for (int r = 0; r < size_; ++r)
            if (r != rank_ && seconds_since(w.heard[static_cast<std::size_t>(r)]) > 3 * w.beat()) late.push_back(r);
    std::string whom;
    for (std::size_t k = 0; k < late.size(); ++k) {
        const auto r = static_cast<std::size_t>(late[k]);
        whom += (k == 0 ? "" : k + 1 == late.size() ? " and " : ", ") + ("rank " + std::to_string(r));
        if (behind) whom += " (its last agreement: " + w.name(w.reached[r]) + ")";
    }
    std::string message = "loom::distributed: rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                          " waited " + seconds_text(w.timeout) + " (the timeout) at " + what + " for ";
    if (behind)
        message += whom + ", which did not come to it";
    else if (!late.empty())
        message += whom + ", which came to it and then stopped answering";
    else
        message += "every other process, which came to it, but it did not complete";
    message += "; every process stops";
    stop(message, late);
}

void Context::end_stopped() {
    // The processes that still answer hear the stop at their next wait, and say so: give them a
    // moment to print their own error before the job ends, but never wait for the late ones.
    Watch& w = *watch_;
    const double grace = std::min(2.0, std::max(w.timeout, 0.5));
    for (;;) {
        bool all = true;
        for (int r = 0; r < size_; ++r)
            all &= r == rank_ || w.late[static_cast<std::size_t>(r)] || w.reported[static_cast<std::size_t>(r)];
        if (all || seconds_since(w.stopped_at) > grace) break;
        int pending = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, w.comm, &pending, MPI_STATUS_IGNORE);
        if (pending)
            hear();
        else
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::terminate();  // not reached
}

template <class Request>
void Context::wait(Request* requests, int count, const std::string& what) {
    Watch& w = *watch_;
    if (w.stopped) throw UserError(w.message);
    if (size_ == 1) {
        MPI_Waitall(count, requests, MPI_STATUSES_IGNORE);
        return;
    }
    ++w.point;
    w.names[static_cast<std::size_t>(w.point) % remembered] = what;
    announce();
    const auto start = Clock::now();
    auto next_beat = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(w.beat()));
    for (;;) {
        int done = 0;
        MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
        if (done) return;
        for (int pending = 1; pending;) {
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, w.comm, &pending, MPI_STATUS_IGNORE);
            if (pending && hear()) stop(w.message, {});
        }
        const double waited = seconds_since(start);
        if (w.timeout > 0 && waited >= w.timeout) give_up(what);
        if (Clock::now() >= next_beat) {
            announce();
            next_beat =
                Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(w.beat()));
        }
        // Sums in flight progress only inside MPI calls: poll without pause while they may be
        // travelling, then let the core go (a wait for a slow process can be long).
        if (waited < 0.02)
            std::this_thread::yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

template void Context::wait<MPI_Request>(MPI_Request* requests, int count, const std::string& what);

Context& Context::current() {
    if (!current_context)
        throw UserError("loom::distributed: no Context is alive; create loom::distributed::Context first in main");
    return *current_context;
}

Context::Words Context::synchronize(const Words& values, const std::string& what) {
    return exchange(values, ok, "", what);
}

void Context::fail(const std::string& what) { exchange(Words{}, failed, what, "a failure's report"); }

void Context::abort(const std::string& what, int code) const {
    std::fprintf(stderr, "loom::distributed: rank %d of %d stops every process: %s\n", rank_, size_, what.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::terminate();  // not reached: MPI_Abort does not return
}

Context::Words Context::exchange(const Words& values, Control control, const std::string& message,
                                 const std::string& what) {
    if (gone_) throw UserError(gone_message_);
    // Every process's words, control first: the sum is taken here in rank order, so it is the same
    // on every process, and who failed is known without a second round.
    constexpr std::size_t stride = sync_words + 1;
    std::array<double, stride> mine{};
    mine[0] = control;
    for (std::size_t k = 0; k < sync_words; ++k) mine[k + 1] = values[k];
    std::vector<double> all(stride * static_cast<std::size_t>(size_));
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallgather(mine.data(), static_cast<int>(stride), MPI_DOUBLE, all.data(), static_cast<int>(stride), MPI_DOUBLE,
                   MPI_COMM_WORLD, &request);
    wait(&request, 1, what);
    int culprit = -1;
    bool any_ended = false;
    for (int r = 0; r < size_; ++r) {
        const auto c = static_cast<Control>(all[static_cast<std::size_t>(r) * stride]);
        any_ended |= c == ended;
        if (c != ok && culprit < 0) culprit = r;
    }
    if (culprit < 0) {
        Words sum{};
        for (int r = 0; r < size_; ++r)
            for (std::size_t k = 0; k < sync_words; ++k) sum[k] += all[static_cast<std::size_t>(r) * stride + k + 1];
        return sum;
    }
    // The first failing process's message, to every process.
    std::string text = rank_ == culprit ? message : std::string();
    int length = static_cast<int>(text.size());
    MPI_Ibcast(&length, 1, MPI_INT, culprit, MPI_COMM_WORLD, &request);
    wait(&request, 1, what + " (rank " + std::to_string(culprit) + "'s message)");
    text.resize(static_cast<std::size_t>(length));
    MPI_Ibcast(text.data(), length, MPI_CHAR, culprit, MPI_COMM_WORLD, &request);
    wait(&request, 1, what + " (rank " + std::to_string(culprit) + "'s message)");
    const bool culprit_ended = static_cast<Control>(all[static_cast<std::size_t>(culprit) * stride]) == ended;
    const std::string said = "loom::distributed: rank " + std::to_string(culprit) + " of " + std::to_string(size_) +
                             (culprit_ended ? " " : " failed: ") + text +
                             (culprit_ended ? " while rank " + std::to_string(rank_) + " was still training" : "") +
                             "; every process stops";
    if (any_ended) {
        gone_ = true;
        gone_message_ = said;
    }
    if (control != ok) return {};  // this process failed or ended itself: its caller knows why
    throw UserError(said);
}

}  // namespace loom::distributed
