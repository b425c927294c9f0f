#include "distributed/data_parallel.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>

#include "core/errors.hpp"
#include "graph/row_gradient.hpp"

namespace loom::distributed {

struct DataParallel::Requests {
    std::vector<MPI_Request> pending;
};

namespace {

// Point-to-point messages of a step: gradient i to its owner, then parameter i from it. MPI allows
// tags up to 32767 at least; messages between two processes match in the order both start them.
int gradient_tag(std::size_t i) { return static_cast<int>(i % 16384); }
int parameter_tag(std::size_t i) { return 16384 + static_cast<int>(i % 16384); }

int checked_count(std::size_t n, const std::string& what) {
    if (n > static_cast<std::size_t>(INT_MAX))
        throw UserError("loom::distributed: " + what + " has " + std::to_string(n) +
                        " elements, more than one MPI message holds (2^31 - 1)");
    return static_cast<int>(n);
}

template <class T>
MPI_Datatype mpi_type() {
    return std::is_same_v<T, double> ? MPI_DOUBLE : MPI_FLOAT;
}

// Every process's list of `local`, one after another in rank order; counts[r] = rank r's length.
// `agreement` names the exchange for a timeout's message.
template <class T>
std::vector<T> gather_all(Context& context, const std::vector<T>& local, MPI_Datatype type, std::vector<int>& counts,
                          const std::string& what, const std::string& agreement) {
    const int mine = checked_count(local.size(), what);
    counts.assign(static_cast<std::size_t>(context.size()), 0);
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD, &request);
    context.wait(&request, 1, agreement);
    std::vector<int> offsets(counts.size(), 0);
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
        offsets[r] = checked_count(total, what);
        total += static_cast<std::size_t>(counts[r]);
    }
    checked_count(total, what);
    std::vector<T> all(total);
    MPI_Iallgatherv(local.data(), mine, type, all.data(), counts.data(), offsets.data(), type, MPI_COMM_WORLD,
                    &request);
    context.wait(&request, 1, agreement);
    return all;
}

}  // namespace

DataParallel::DataParallel(Context& context, DataParallelOptions options)
    : context_(context), options_(options), requests_(std::make_unique<Requests>()) {}

DataParallel::~DataParallel() = default;

std::shared_ptr<DataParallel> data_parallel(Context& context, DataParallelOptions options) {
    return std::make_shared<DataParallel>(context, options);
}

int DataParallel::owner(std::size_t i) const {
    if (i >= owner_.size())
        throw UserError("loom::distributed::DataParallel::owner: parameter " + std::to_string(i) + " of " +
                        std::to_string(owner_.size()) + " (owners are known after the first step)");
    return owner_[i];
}

void DataParallel::assign_owners(const Session& session) {
    // The largest first, each to the process with the least so far (the lowest rank on a tie): the
    // same on every process, and near equal shares of the learner's work. Tables kept by rows are
    // stepped on every process unless shard_tables (then their new values travel whole).
    const auto& params = session.parameters();
    by_rows_table_.assign(params.size(), 0);
    std::vector<std::size_t> by_size;
    for (std::size_t i = 0; i < params.size(); ++i) {
        by_rows_table_[i] = session.kept_by_rows(i);
        if (!by_rows_table_[i] || options_.shard_tables) by_size.push_back(i);
    }
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](std::size_t a, std::size_t b) { return params[a].shape().size() > params[b].shape().size(); });
    std::vector<std::size_t> load(static_cast<std::size_t>(context_.size()), 0);
    owner_.assign(params.size(), 0);  // a table stepped everywhere: rank 0 stands for it
    for (std::size_t i : by_size) {
        const auto least = std::min_element(load.begin(), load.end()) - load.begin();
        owner_[i] = static_cast<int>(least);
        load[static_cast<std::size_t>(least)] += params[i].shape().size();
    }
    incoming_.assign(params.size(), {});
}

MinibatchResult DataParallel::combine(const MinibatchResult& local) {
    // The last step ended inside its reduction (backward threw and the error was caught): the other
    // processes are waiting for sums this one will never send.
    if (!requests_->pending.empty() || next_ != 0)
        context_.abort("a training step was abandoned while its gradients were being summed");
    Context::Words words{};
    if (!stand_in_)
        words = {local.loss_sum, static_cast<double>(local.loss_count), local.metric_sum,
                 static_cast<double>(local.metric_count)};
    moments_.combine_began = std::chrono::steady_clock::now();
    ++steps_;
    const Context::Words sum = context_.synchronize(words, at_step("losses"));
    moments_.combined = std::chrono::steady_clock::now();
    context_.set_in_flight(true);
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(started_.begin(), started_.end(), 0);
    by_rows_.clear();
    owned_.clear();
    dense_bytes_ = row_bytes_ = parameter_bytes_ = 0;
    MinibatchResult r;
    r.loss_sum = sum[0];
    r.loss_count = static_cast<std::size_t>(sum[1]);
    r.metric_sum = sum[2];
    r.metric_count = static_cast<std::size_t>(sum[3]);
    return r;
}

void DataParallel::failed(const std::string& what) { context_.fail(what); }

void DataParallel::ready(Session& session, std::size_t parameter) {
    const std::lock_guard lock(mutex_);
    const std::size_t n = session.parameters().size();
    if (ready_.size() != n) {
        ready_.assign(n, 0);
        started_.assign(n, 0);
        order_.clear();
        // Backward finishes the last-created parameters (the output layers) first.
        for (std::size_t i = n; i-- > 0;) order_.push_back(i);
        if (sharded()) assign_owners(session);
    }
    ready_[parameter] = 1;
    if (!context_.any_thread()) return;  // MPI only from the main thread: all sums start in finish
    start_ready(session);
    progress();
}

void DataParallel::start_ready(Session& session) {
    while (next_ < order_.size() && ready_[order_[next_]]) start(session, order_[next_++]);
}

void DataParallel::start(Session& session, std::size_t i) {
    visit_dtype(session.dtype(), [&]<class T>(T) { start_as<T>(session, i); });
}

template <class T>
void DataParallel::start_as(Session& session, std::size_t i) {
    started_[i] = 1;
    const GradientRef<T> gradient = session.mutable_gradient<T>(i);
    if (gradient.by_rows) {
        by_rows_.push_back(i);
        return;
    }
    // Summed in place in the session's buffer, before any learner reads it.
    const std::span<T> g = gradient.dense;
    T* data = g.data();
    if (stand_in_) std::fill(data, data + g.size(), T(0));
    const int count = checked_count(g.size(), session.parameters()[i].label());
    if (!sharded()) {
        MPI_Request request = MPI_REQUEST_NULL;
        MPI_Iallreduce(MPI_IN_PLACE, data, count, mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD, &request);
        requests_->pending.push_back(request);
        dense_bytes_ += g.size() * sizeof(T);
        return;
    }
    // To the owner alone, which keeps every other process's part to add them in rank order. Both
    // sides start these in the same order (order_), so messages match in order whatever the tag.
    const int tag = gradient_tag(i);
    if (owner_[i] != context_.rank()) {
        MPI_Request request = MPI_REQUEST_NULL;
        MPI_Isend(data, count, mpi_type<T>(), owner_[i], tag, MPI_COMM_WORLD, &request);
        requests_->pending.push_back(request);
        dense_bytes_ += g.size() * sizeof(T);
        return;
    }
    if (!std::holds_alternative<std::vector<T>>(incoming_[i])) incoming_[i] = std::vector<T>();
    auto& parts = std::get<std::vector<T>>(incoming_[i]);
    parts.resize(static_cast<std::size_t>(context_.size() - 1) * g.size());
    T* part = parts.data();
    for (int r = 0; r < context_.size(); ++r) {
        if (r == context_.rank()) continue;
        MPI_Request request = MPI_REQUEST_NULL;
        MPI_Irecv(part, count, mpi_type<T>(), r, tag, MPI_COMM_WORLD, &request);
        requests_->pending.push_back(request);
        part += g.size();
    }
    owned_.push_back(i);
}

template <class T>
void DataParallel::add_incoming(Session& session, std::size_t i) {
    // g_0 + g_1 + ... in rank order, this process's own part at its rank: for two processes the
    // allreduce's a + b, for more one fixed grouping (MPI's own sum groups as it likes).
    const std::span<T> mine = session.mutable_gradient<T>(i).dense;
    T* own = mine.data();
    const std::size_t n = mine.size();
    T* parts = std::get<std::vector<T>>(incoming_[i]).data();
    auto part = [&](int r) { return r == context_.rank() ? own : parts + std::size_t(r - (r > context_.rank())) * n; };
    T* sum = part(0);
    for (int r = 1; r < context_.size(); ++r) {
        const T* add = part(r);
        for (std::size_t k = 0; k < n; ++k) sum[k] += add[k];
    }
    if (sum != own) std::copy(sum, sum + n, own);
}

void DataParallel::progress() {
    // Nonblocking collectives advance only inside MPI calls: each report of a final gradient gives
    // the ones in flight a push.
    auto& pending = requests_->pending;
    if (pending.empty()) return;
    int done = 0;
    MPI_Testall(static_cast<int>(pending.size()), pending.data(), &done, MPI_STATUSES_IGNORE);
    if (done) pending.clear();
}

void DataParallel::finish(Session& session) {
    const std::lock_guard lock(mutex_);
    const auto began = std::chrono::steady_clock::now();
    moments_.finish_began = began;
    session_ = &session;
    // Parameters never reported have no gradient on any process (the loss does not use them).
    for (; next_ < order_.size(); ++next_)
        if (ready_[order_[next_]] && !started_[order_[next_]]) start(session, order_[next_]);
    auto& pending = requests_->pending;
    context_.wait(pending.data(), static_cast<int>(pending.size()), at_step("gradient sums"));
    pending.clear();
    for (std::size_t i : owned_) {
        visit_dtype(session.dtype(), [&]<class T>(T) { add_incoming<T>(session, i); });
    }
    std::sort(by_rows_.begin(), by_rows_.end());
    for (std::size_t i : by_rows_) {
        visit_dtype(session.dtype(), [&]<class T>(T) { gather_rows<T>(session, i); });
    }
    next_ = 0;
    context_.set_in_flight(false);
    moments_.finished = std::chrono::steady_clock::now();
    finish_seconds_ = std::chrono::duration<double>(moments_.finished - began).count();
}

template <class T>
void DataParallel::gather_rows(Session& session, std::size_t i) {
    RowGradient<T>& g = *session.mutable_gradient<T>(i).by_rows;
    const std::string label = session.parameters()[i].label();
    const std::size_t width = g.width;
    std::vector<std::uint64_t> ids;
    std::vector<T> values;
    if (!stand_in_) {
        ids.assign(g.rows.begin(), g.rows.end());
        values = g.data;
    }
    std::vector<int> id_counts, value_counts;
    const std::string agreement = at_step("embedding rows of " + label);
    const std::vector<std::uint64_t> all_ids = gather_all(context_, ids, MPI_UINT64_T, id_counts, label, agreement);
    const std::vector<T> all_values = gather_all(context_, values, mpi_type<T>(), value_counts, label, agreement);
    row_bytes_ += ids.size() * sizeof(std::uint64_t) + values.size() * sizeof(T);

    // The sorted union, each row summed in rank order: the same rows, order and sums everywhere.
    std::vector<std::uint64_t> rows = all_ids;
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    for (std::uint64_t r : rows)
        if (r >= g.index.size())
            throw InternalError("loom::distributed: row " + std::to_string(r) + " of " + label +
                                "'s gradient is outside its " + std::to_string(g.index.size()) + " rows");
    g.replace(std::vector<std::size_t>(rows.begin(), rows.end()), std::vector<T>(rows.size() * width, T(0)));
    for (std::size_t j = 0; j < all_ids.size(); ++j) {
        T* to = g.row(all_ids[j]);
        const T* from = all_values.data() + j * width;
        for (std::size_t e = 0; e < width; ++e) to[e] += from[e];
    }
}

std::vector<char> DataParallel::stepped_here(const Learner& learner) {
    const Session& session = *session_;
    const std::size_t n = session.parameters().size();
    if (learner.parameters().size() != n)
        throw InternalError("loom::distributed: the learner has " + std::to_string(learner.parameters().size()) +
                            " parameters, the session " + std::to_string(n));
    if (owner_.size() != n) assign_owners(session);
    std::vector<char> mine(n);
    replicated_.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        // Every process has a table's summed rows. A lazy step changes only those rows: cheaper to
        // take on every process than to send the table.
        replicated_[i] = by_rows_table_[i] && (!options_.shard_tables || learner.updates_rows_lazily());
        mine[i] = replicated_[i] || owner_[i] == context_.rank();
    }
    // Blocking exchanges follow: a process that ends now must take the job down, not leave a hang.
    context_.set_in_flight(true);
    whole_state_ = false;
    return mine;
}

void DataParallel::share_norms(std::vector<double>& square_sums) {
    const std::size_t n = owner_.size();
    std::vector<double> all(n * static_cast<std::size_t>(context_.size()));
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallgather(square_sums.data(), checked_count(n, "parameter norms"), MPI_DOUBLE, all.data(), static_cast<int>(n),
                   MPI_DOUBLE, MPI_COMM_WORLD, &request);
    context_.wait(&request, 1, at_step("gradient norms"));
    for (std::size_t i = 0; i < n; ++i) square_sums[i] = all[static_cast<std::size_t>(owner_[i]) * n + i];
}

void DataParallel::updated(const Learner& learner, bool applied) {
    if (!sharded()) return;
    moments_.stepped = std::chrono::steady_clock::now();
    if (applied) {
        visit_dtype(session_->dtype(), [&]<class T>(T) { send_parameters<T>(learner); });
    }
    context_.set_in_flight(false);
}

template <class T>
void DataParallel::send_parameters(const Learner& learner) {
    // The owner sends each of its parameters whole to every other process: one message each, which
    // OpenMPI's shared-memory transport copies once (CMA); its broadcasts cut large messages into
    // segments, each a round trip, and cost several times more here.
    auto& pending = requests_->pending;
    const auto& params = learner.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (replicated_[i]) continue;
        auto& w = params[i].data<T>();
        const int count = checked_count(w.size(), params[i].label()), tag = parameter_tag(i);
        if (owner_[i] != context_.rank()) {
            MPI_Request request = MPI_REQUEST_NULL;
            MPI_Irecv(w.data(), count, mpi_type<T>(), owner_[i], tag, MPI_COMM_WORLD, &request);
            pending.push_back(request);
            continue;
        }
        for (int r = 0; r < context_.size(); ++r) {
            if (r == context_.rank()) continue;
            MPI_Request request = MPI_REQUEST_NULL;
            MPI_Isend(w.data(), count, mpi_type<T>(), r, tag, MPI_COMM_WORLD, &request);
            pending.push_back(request);
            parameter_bytes_ += w.size() * sizeof(T);
        }
    }
    context_.wait(pending.data(), static_cast<int>(pending.size()), at_step("new parameter values"));
    pending.clear();
}

std::string DataParallel::at_step(const std::string& what) const {
    return "step " + std::to_string(steps_) + "'s " + what;
}

void DataParallel::gather_state(const Learner& learner) {
    if (!sharded() || owner_.empty()) return;  // never stepped a share: the state is whole everywhere
    if (learner.parameters().size() != owner_.size())
        throw UserError("loom::distributed: the checkpoint's learner has " +
                        std::to_string(learner.parameters().size()) +
                        " parameters, the model its DataParallel trained " + std::to_string(owner_.size()));
    // Rank 0 overwrites its copy of the others' state, which nothing on rank 0 reads: the learner
    // goes on as before (its writer has it const). Messages between two processes match in the order
    // both start them; every process then waits, as at any agreement (those with no part at once).
    auto& state = const_cast<Learner&>(learner);
    auto& pending = requests_->pending;
    for (std::size_t i = 0; i < owner_.size(); ++i) {
        if (owner_[i] == 0 || (context_.rank() != 0 && context_.rank() != owner_[i])) continue;
        for (std::size_t k = 0; k < state.state_slots(); ++k) {
            const std::span<std::byte> bytes = state.state_bytes(i, k);
            const int count = checked_count(bytes.size(), "learner state");
            MPI_Request request = MPI_REQUEST_NULL;
            if (context_.rank() == 0)
                MPI_Irecv(bytes.data(), count, MPI_BYTE, owner_[i], 0, MPI_COMM_WORLD, &request);
            else
                MPI_Isend(bytes.data(), count, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &request);
            pending.push_back(request);
        }
    }
    context_.wait(pending.data(), static_cast<int>(pending.size()),
                  "a checkpoint's learner state (after step " + std::to_string(steps_) + ")");
    pending.clear();
    if (context_.rank() == 0) whole_state_ = true;
}

}  // namespace loom::distributed
