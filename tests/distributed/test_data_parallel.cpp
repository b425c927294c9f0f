// Data-parallel training over MPI gives what one process gives on the same global minibatches, and
// the same parameters on every process after every step (tests/distributed/CMakeLists.txt runs this
// file with 2 and 3 processes).
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "mpi_support.hpp"

using namespace loom;
using namespace mpi_test;
namespace dist = loom::distributed;

namespace {

// The global minibatches of the tests: 4 of 32 pairs (a different cut of the 64 each time), then
// 2 pairs and 1 pair, fewer than 3 processes.
std::vector<std::vector<std::size_t>> global_batches() { return cut_batches(17, 5, {{5, 40}, {23}}); }

// This process's share of a global batch, as ShardedBatcher cuts it (a stand-in when empty).
std::vector<std::size_t> share(dist::DataParallel& parallel, const std::vector<std::size_t>& global) {
    const dist::Context& c = parallel.context();
    std::vector<std::size_t> mine = dist::share_of(global, c.rank(), c.size());
    parallel.set_stand_in(mine.empty());
    if (mine.empty()) mine.push_back(global.front());
    return mine;
}

struct Run {
    std::vector<double> losses;
    std::uint64_t fingerprint = 0;
};

// Trains the toy model data-parallel on the global batches; checks after every step that every
// process holds the same parameters.
Run train_distributed(dist::Context& mpi, const Pairs& pairs, int threads = 1) {
    set_inter_op_threads(threads);
    qa::Model model = make_model();
    auto parallel = dist::data_parallel(mpi);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(model.squared_loss, Variable(), adam(model.parameters(), 0.01), options);
    Run run;
    for (const auto& global : global_batches()) {
        const MinibatchResult r = trainer.train_minibatch(bindings(model, pairs, share(*parallel, global)));
        CHECK(r.loss_count == global.size());
        run.losses.push_back(r.average_loss());
        const std::vector<std::uint64_t> all = gather(fingerprint(model.parameters()));
        for (std::uint64_t f : all) CHECK(f == all[0]);
    }
    CHECK(trainer.total_samples_seen() == 4 * 32 + 2 + 1);
    run.fingerprint = fingerprint(model.parameters());
    set_inter_op_threads(1);
    return run;
}

}  // namespace

TEST_CASE("mpi: share_of cuts contiguous parts whose sizes differ by at most one") {
    for (std::size_t n = 0; n <= 9; ++n) {
        std::vector<std::size_t> global(n);
        for (std::size_t k = 0; k < n; ++k) global[k] = 100 + k;
        for (int p = 1; p <= 4; ++p) {
            std::vector<std::size_t> joined;
            for (int r = 0; r < p; ++r) {
                const auto part = dist::share_of(global, r, p);
                CHECK(part.size() >= n / std::size_t(p));
                CHECK(part.size() <= (n + std::size_t(p) - 1) / std::size_t(p));
                joined.insert(joined.end(), part.begin(), part.end());
            }
            CHECK(joined == global);
        }
    }
    CHECK_THROWS_AS(dist::share_of({1, 2}, 2, 2), UserError);
}

TEST_CASE("mpi: synchronize sums in rank order and a failing process stops the others with its message") {
    dist::Context& mpi = dist::Context::current();
    const double p = mpi.size(), r = mpi.rank();
    const auto sum = mpi.synchronize({r + 1, 1, 0.5 * r, -r});
    CHECK(sum[0] == p * (p + 1) / 2);
    CHECK(sum[1] == p);
    CHECK(sum[2] == 0.25 * p * (p - 1));
    CHECK(sum[3] == -p * (p - 1) / 2);

    const int last = mpi.size() - 1;
    if (mpi.rank() == last) {
        mpi.fail("bad data on purpose");
    } else {
        const std::string expected =
            "rank " + std::to_string(last) + " of " + std::to_string(mpi.size()) + " failed: bad data on purpose";
        CHECK_THROWS_WITH_AS(mpi.synchronize({}), doctest::Contains(expected.c_str()), UserError);
    }
    // Everyone is in step again.
    CHECK(mpi.synchronize({1, 0, 0, 0})[0] == p);
}

TEST_CASE("mpi: data-parallel training equals one process on the same global minibatches") {
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model one = make_model();
    Trainer reference(one.squared_loss, Variable(), adam(one.parameters(), 0.01));
    qa::Model many = make_model();
    auto parallel = dist::data_parallel(mpi);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(many.squared_loss, Variable(), adam(many.parameters(), 0.01), options);
    std::size_t dense_bytes = 0, row_bytes = 0;
    for (const auto& global : global_batches()) {
        const double expected = reference.train_minibatch(bindings(one, pairs, global)).average_loss();
        const MinibatchResult r = trainer.train_minibatch(bindings(many, pairs, share(*parallel, global)));
        CHECK(r.loss_count == global.size());
        CHECK(r.average_loss() == doctest::Approx(expected).epsilon(1e-6));
        CHECK(relative_difference(many.parameters(), one.parameters()) <= 1e-6);
        if (dense_bytes == 0) {  // the first step's, 32 pairs
            dense_bytes = parallel->dense_bytes();
            row_bytes = parallel->row_bytes();
        }
    }
    const double worst = relative_difference(many.parameters(), one.parameters());
    if (mpi.is_root()) MESSAGE("largest relative parameter difference after 6 steps: " << worst);
    CHECK(worst > 0);  // the sums are grouped differently: equal within rounding, not bit for bit
    // Bytes sent per step: the dense gradients of the parameters other processes step (the sharded
    // update's default), and only the rows of the embedding tables.
    std::size_t others = 0, table = 0;
    const std::vector<Parameter> params = many.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
        const Parameter& p = params[i];
        if (p.shape().rank() == 2 && p.shape()[0] == 30)
            table += p.shape().size();
        else if (parallel->owner(i) != mpi.rank())
            others += p.shape().size();
    }
    CHECK(others > 0);
    CHECK(dense_bytes == 4 * others);
    // Each table sends the rows this process's pairs used (its distinct ids), 8 bytes of id and
    // embed floats each: question ids go to the question tower's table, answer ids to the other's.
    std::set<std::size_t> question_ids, answer_ids;
    for (std::size_t i : dist::share_of(global_batches()[0], mpi.rank(), mpi.size())) {
        question_ids.insert(pairs.questions[i].begin(), pairs.questions[i].end());
        answer_ids.insert(pairs.answers[i].begin(), pairs.answers[i].end());
    }
    CHECK(table == 2 * 30 * 6);
    CHECK(row_bytes == (question_ids.size() + answer_ids.size()) * (8 + 4 * 6));
}

TEST_CASE("mpi: after the sums a table's gradient lists the rows of the whole global minibatch") {
    // The reduction replaces each table's row gradient by the union of every process's rows;
    // Session::gradient_rows and the dense spread must then say the same as one process given the
    // whole global minibatch, not only this process's own rows.
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model one = make_model();
    Session whole({one.squared_loss}, one.parameters());
    qa::Model many = make_model();
    auto parallel = dist::data_parallel(mpi);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(many.squared_loss, Variable(), adam(many.parameters(), 0.01), options);
    const std::vector<std::size_t> global = global_batches().front();
    whole.forward(bindings(one, pairs, global));
    whole.backward();
    trainer.train_minibatch(bindings(many, pairs, share(*parallel, global)));
    const Session& mine = trainer.session();
    std::size_t tables = 0;
    for (std::size_t i = 0; i < one.parameters().size(); ++i) {
        if (!whole.gradient(i).by_rows) continue;
        ++tables;
        REQUIRE(mine.gradient(i).by_rows);
        CHECK(mine.gradient(i).by_rows->sorted == whole.gradient(i).by_rows->sorted);
        std::vector<std::size_t> listed = mine.gradient(i).by_rows->rows;
        std::sort(listed.begin(), listed.end());
        CHECK(listed == whole.gradient(i).by_rows->sorted);
    }
    CHECK(tables == 2);
}

TEST_CASE("mpi: every process holds the same parameters after every step also with 2 inter-op threads") {
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    const Run serial = train_distributed(mpi, pairs, 1);
    const Run threaded = train_distributed(mpi, pairs, 2);
    CHECK(threaded.fingerprint == serial.fingerprint);
    CHECK(threaded.losses == serial.losses);
}

namespace {

// One parameter's gradient as a session holds it: dense, or the rows of a table kept by rows.
struct Held {
    std::vector<float> dense;
    std::vector<std::size_t> rows;
    std::vector<float> row_values;
    bool by_rows = false;
};

Held hold(const Session& s, std::size_t i) {
    Held h;
    if (const RowGradient<float>* g = s.gradient(i).by_rows) {
        h.by_rows = true;
        h.rows = g->rows;
        h.row_values = g->data;
    } else {
        h.dense = s.gradient(i).to_dense();
    }
    return h;
}

}  // namespace

TEST_CASE("mpi: with two processes the update is exactly the one of the shares' gradients added in rank order") {
    // The order is: each process sums its own share's items (as one process would on that share
    // alone), then the shares are added in rank order; embedding rows come out sorted. With two
    // processes MPI's sum is then exact whatever its algorithm, since a + b == b + a in IEEE
    // arithmetic. (With three, the grouping of MPI_Iallreduce's additions is OpenMPI's choice: the
    // other tests hold those to 1e-6 of one process and to identical parameters on every process.)
    dist::Context& mpi = dist::Context::current();
    if (mpi.size() != 2) return;
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model one = make_model();
    Session session({one.squared_loss}, one.parameters());
    auto learner = adam(one.parameters(), 0.01);
    qa::Model many = make_model();
    auto parallel = dist::data_parallel(mpi);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(many.squared_loss, Variable(), adam(many.parameters(), 0.01), options);
    auto batches = global_batches();
    batches.pop_back();  // every share non-empty: 4 x 32 pairs, then 2
    for (const auto& global : batches) {
        // The reference, in this one process: share 0's gradients, then share 1's, added.
        const auto first = dist::share_of(global, 0, 2), second = dist::share_of(global, 1, 2);
        session.forward(bindings(one, pairs, first));
        const double loss0 = session.sum(one.squared_loss);
        const std::size_t count0 = session.count(one.squared_loss);
        session.backward();
        std::vector<Held> held;
        for (std::size_t i = 0; i < one.parameters().size(); ++i) held.push_back(hold(session, i));
        session.forward(bindings(one, pairs, second));
        const double loss1 = session.sum(one.squared_loss);
        const std::size_t count1 = session.count(one.squared_loss);
        session.backward();
        for (std::size_t i = 0; i < held.size(); ++i) {
            if (held[i].by_rows) {
                RowGradient<float>& g = *session.mutable_gradient(i).by_rows;
                std::map<std::size_t, std::vector<float>> sum;  // sorted rows
                for (std::size_t k = 0; k < held[i].rows.size(); ++k) {
                    auto& row = sum.try_emplace(held[i].rows[k], g.width, 0.0f).first->second;
                    for (std::size_t e = 0; e < g.width; ++e) row[e] += held[i].row_values[k * g.width + e];
                }
                for (std::size_t k = 0; k < g.rows.size(); ++k) {
                    auto& row = sum.try_emplace(g.rows[k], g.width, 0.0f).first->second;
                    for (std::size_t e = 0; e < g.width; ++e) row[e] += g.data[k * g.width + e];
                }
                std::vector<std::size_t> rows;
                std::vector<float> data;
                for (const auto& [r, values] : sum) {
                    rows.push_back(r);
                    data.insert(data.end(), values.begin(), values.end());
                }
                g.replace(std::move(rows), std::move(data));
            } else {
                const std::span<float> to = session.mutable_gradient(i).dense;
                for (std::size_t k = 0; k < to.size(); ++k) to[k] = held[i].dense[k] + to[k];
            }
        }
        REQUIRE(learner->update(session, {1.0 / static_cast<double>(count0 + count1), true}));
        session.release_gradients();

        const MinibatchResult r = trainer.train_minibatch(bindings(many, pairs, share(*parallel, global)));
        CHECK(r.loss_sum == loss0 + loss1);
        CHECK(r.loss_count == count0 + count1);
        CHECK(fingerprint(many.parameters()) == fingerprint(one.parameters()));
    }
}

TEST_CASE("mpi: a double model is summed in double and equals one process to double rounding") {
    // The same as the float test above after to_precision: dense gradients travel as MPI_DOUBLE (8
    // bytes each), embedding rows as doubles, and the processes agree with one process far below
    // float's rounding.
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model one = make_model(), many = make_model();
    to_precision(one.parameters(), DType::f64);
    to_precision(many.parameters(), DType::f64);
    Trainer reference(one.squared_loss, Variable(), adam(one.parameters(), 0.01));
    auto parallel = dist::data_parallel(mpi);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(many.squared_loss, Variable(), adam(many.parameters(), 0.01), options);
    auto worst_difference = [&] {
        double worst = 0;
        for (std::size_t i = 0; i < one.parameters().size(); ++i)
            worst = std::max(
                worst, xt::amax(xt::abs(many.parameters()[i].data<double>() - one.parameters()[i].data<double>()))());
        return worst;
    };
    std::size_t dense_bytes = 0;
    for (const auto& global : global_batches()) {
        const double expected = reference.train_minibatch(bindings(one, pairs, global)).average_loss();
        const MinibatchResult r = trainer.train_minibatch(bindings(many, pairs, share(*parallel, global)));
        CHECK(r.average_loss() == doctest::Approx(expected).epsilon(1e-12));
        CHECK(worst_difference() <= 1e-12);
        if (dense_bytes == 0) dense_bytes = parallel->dense_bytes();
    }
    CHECK(trainer.session().dtype() == DType::f64);
    std::size_t others = 0;
    const std::vector<Parameter> params = many.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
        const Parameter& p = params[i];
        if (!(p.shape().rank() == 2 && p.shape()[0] == 30) && parallel->owner(i) != mpi.rank())
            others += p.shape().size();
    }
    CHECK(dense_bytes == 8 * others);
}
