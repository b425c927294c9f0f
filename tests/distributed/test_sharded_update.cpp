// The sharded update (ZeRO stage 1, DataParallelOptions::shard_update): each process steps its share
// of the parameters on gradients summed in rank order, and every process ends with the parameters
// one process gets from the shares' gradients added in that order, bit for bit, with 2 and with 3
// processes (tests/distributed/CMakeLists.txt runs this file with both).
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <map>

#include "mpi_support.hpp"

using namespace loom;
using namespace mpi_test;
namespace dist = loom::distributed;

namespace {

// 4 global batches of 32 pairs (each a different cut of the 64), then one of 5.
std::vector<std::vector<std::size_t>> batches() { return cut_batches(11, 3, {{7, 9, 30, 41, 63}}); }

// One process's gradients of a share: dense, or the rows of a table kept by rows.
struct Gradients {
    std::vector<std::vector<float>> dense;
    std::vector<std::map<std::size_t, std::vector<float>>> rows;
};

Gradients gradients_of(const Session& s, std::size_t count) {
    Gradients g;
    g.dense.resize(count);
    g.rows.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
        if (const RowGradient<float>* r = s.gradient(i).by_rows) {
            for (std::size_t k = 0; k < r->rows.size(); ++k)
                g.rows[i][r->rows[k]].assign(r->data.begin() + std::ptrdiff_t(k * r->width),
                                             r->data.begin() + std::ptrdiff_t((k + 1) * r->width));
        } else {
            g.dense[i] = s.gradient(i).to_dense();
        }
    }
    return g;
}

// The reference step in one process: every share's gradients ((g_0 + g_1) + g_2 ..., each row
// too, rows sorted) written into `session`'s gradient buffers, then the learner's plain update.
// Returns the global loss sum.
double reference_step(Session& session, Learner& learner, const qa::Model& m, const Pairs& pairs,
                      const std::vector<std::size_t>& global, int processes) {
    const std::size_t n = m.parameters().size();
    std::vector<Gradients> shares;
    double loss = 0;
    std::size_t count = 0;
    for (int r = 0; r < processes; ++r) {
        session.forward(bindings(m, pairs, dist::share_of(global, r, processes)));
        loss += session.sum(m.squared_loss);
        count += session.count(m.squared_loss);
        session.backward();
        shares.push_back(gradients_of(session, n));
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (RowGradient<float>* held = session.mutable_gradient(i).by_rows) {
            RowGradient<float>& g = *held;
            std::map<std::size_t, std::vector<float>> sum;
            for (const Gradients& share : shares)
                for (const auto& [row, values] : share.rows[i]) {
                    auto& to = sum.try_emplace(row, g.width, 0.0f).first->second;
                    for (std::size_t e = 0; e < g.width; ++e) to[e] += values[e];
                }
            std::vector<std::size_t> rows;
            std::vector<float> data;
            for (const auto& [row, values] : sum) {
                rows.push_back(row);
                data.insert(data.end(), values.begin(), values.end());
            }
            g.replace(std::move(rows), std::move(data));
        } else {
            const std::span<float> to = session.mutable_gradient(i).dense;
            for (std::size_t k = 0; k < to.size(); ++k) {
                float s = shares[0].dense[i][k];
                for (std::size_t r = 1; r < shares.size(); ++r) s += shares[r].dense[i][k];
                to[k] = s;
            }
        }
    }
    REQUIRE(learner.update(session, {1.0 / static_cast<double>(count), true}));
    session.release_gradients();
    return loss;
}

// Trains data-parallel with `options` next to the one-process reference; every step, parameters
// equal the reference's bit for bit and every process's.
void check_against_reference(const LearnerOptions& learner_options, bool shard_tables = false) {
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model one = make_model(), many = make_model();
    Session session({one.squared_loss}, one.parameters());
    auto reference = adam(one.parameters(), 0.01, 0.9, 0.999, 1e-8, learner_options);
    dist::DataParallelOptions parallel_options;
    parallel_options.shard_tables = shard_tables;
    auto parallel = dist::data_parallel(mpi, parallel_options);
    REQUIRE(parallel->options().shard_update);  // the default
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(many.squared_loss, Variable(), adam(many.parameters(), 0.01, 0.9, 0.999, 1e-8, learner_options),
                    options);
    for (const auto& global : batches()) {
        const double loss = reference_step(session, *reference, one, pairs, global, mpi.size());
        const MinibatchResult r =
            trainer.train_minibatch(bindings(many, pairs, dist::share_of(global, mpi.rank(), mpi.size())));
        CHECK(r.loss_sum == doctest::Approx(loss).epsilon(1e-12));
        CHECK(fingerprint(many.parameters()) == fingerprint(one.parameters()));
        const std::vector<std::uint64_t> all = gather(fingerprint(many.parameters()));
        for (std::uint64_t f : all) CHECK(f == all[0]);
        CHECK(trainer.learner().last_gradient_norm() == reference->last_gradient_norm());
    }
    CHECK(trainer.learner().step_count() == batches().size());
}

}  // namespace

TEST_CASE("mpi: a sharded update equals one process adding the shares' gradients in rank order") {
    check_against_reference({});
}

TEST_CASE("mpi: a sharded update of the tables too equals one process adding the shares' gradients") {
    check_against_reference({}, true);
}

TEST_CASE("mpi: a sharded update with clipping takes the global norm as one process does") {
    LearnerOptions o;
    o.gradient_clipping_norm = 0.05;  // below the toy model's gradient norms: every step clips
    o.l2_weight_decay = 1e-3;
    check_against_reference(o);
}

TEST_CASE("mpi: a sharded update with lazy Adam steps the tables' rows on every process") {
    LearnerOptions o;
    o.lazy_sparse_rows = true;
    check_against_reference(o);
    check_against_reference(o, true);
}

namespace {

// One step with `options`; checks the owners and the bytes sent.
void check_shares(const dist::DataParallelOptions& parallel_options) {
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model model = make_model();
    auto parallel = dist::data_parallel(mpi, parallel_options);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(model.squared_loss, Variable(), adam(model.parameters(), 0.01), options);
    trainer.train_minibatch(bindings(model, pairs, dist::share_of(batches()[0], mpi.rank(), mpi.size())));
    const auto& params = model.parameters();
    std::vector<std::size_t> load(static_cast<std::size_t>(mpi.size()), 0);
    std::size_t largest = 0, others_dense = 0, mine_sent = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
        const int owner = parallel->owner(i);
        REQUIRE(owner >= 0);
        REQUIRE(owner < mpi.size());
        const std::size_t size = params[i].shape().size();
        const bool table = params[i].shape().rank() == 2 && params[i].shape()[0] == toy_options().vocab;
        if (table && !parallel_options.shard_tables) continue;  // stepped everywhere, sent never
        load[static_cast<std::size_t>(owner)] += size;
        largest = std::max(largest, size);
        if (owner != mpi.rank() && !table) others_dense += size;
        if (owner == mpi.rank()) mine_sent += size * std::size_t(mpi.size() - 1);
    }
    // Greedy by size: no process steps more than another plus the largest parameter.
    for (std::size_t a : load)
        for (std::size_t b : load) CHECK(a <= b + largest);
    // Every process agrees on the owners.
    std::uint64_t owners = 0;
    for (std::size_t i = 0; i < params.size(); ++i) owners = owners * 7 + std::uint64_t(parallel->owner(i));
    const std::vector<std::uint64_t> all = gather(owners);
    for (std::uint64_t o : all) CHECK(o == all[0]);
    // Gradients of the others' dense parameters go out once, to their owner; the new values of this
    // process's parameters go out to every other process.
    CHECK(others_dense > 0);
    CHECK(parallel->dense_bytes() == 4 * others_dense);
    CHECK(parallel->parameter_bytes() == 4 * mine_sent);
}

}  // namespace

TEST_CASE("mpi: dense parameters are shared out whole and balanced and only the others' gradients travel") {
    check_shares({});
}

TEST_CASE("mpi: with shard_tables the embedding tables are shared out too and sent whole") {
    dist::DataParallelOptions o;
    o.shard_tables = true;
    check_shares(o);
}

TEST_CASE("mpi: sharded and replicated updates agree: bit for bit with two processes") {
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model a = make_model(), b = make_model();
    dist::DataParallelOptions replicated;
    replicated.shard_update = false;
    auto sharded_parallel = dist::data_parallel(mpi), replicated_parallel = dist::data_parallel(mpi, replicated);
    TrainerOptions sharded_options, replicated_options;
    sharded_options.reduction = sharded_parallel;
    replicated_options.reduction = replicated_parallel;
    Trainer sharded(a.squared_loss, Variable(), adam(a.parameters(), 0.01), sharded_options);
    Trainer plain(b.squared_loss, Variable(), adam(b.parameters(), 0.01), replicated_options);
    for (const auto& global : batches()) {
        const auto mine = dist::share_of(global, mpi.rank(), mpi.size());
        sharded.train_minibatch(bindings(a, pairs, mine));
        plain.train_minibatch(bindings(b, pairs, mine));
        // With three processes MPI_Iallreduce groups its additions its own way: equal to rounding.
        if (mpi.size() == 2)
            CHECK(fingerprint(a.parameters()) == fingerprint(b.parameters()));
        else
            CHECK(relative_difference(a.parameters(), b.parameters()) <= 1e-6);
    }
    CHECK(replicated_parallel->parameter_bytes() == 0);
}

TEST_CASE("mpi: a sharded run's checkpoint holds every owner's learner state and resumes bit for bit") {
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    std::string path = "/tmp/loom_mpi_sharded_" + std::to_string(gather(std::uint64_t(::getpid()))[0]) + ".ckpt";
    auto make_trainer = [&](qa::Model& m) {
        TrainerOptions options;
        dist::DataParallelOptions parallel_options;
        parallel_options.shard_tables = true;  // every parameter's state lives on one process
        options.reduction = dist::data_parallel(mpi, parallel_options);
        return Trainer(m.squared_loss, Variable(), adam(m.parameters(), 0.01), options);
    };
    const auto all = batches();
    auto step = [&](Trainer& t, const qa::Model& m, std::size_t s) {
        t.train_minibatch(bindings(m, pairs, dist::share_of(all[s], mpi.rank(), mpi.size())));
    };
    qa::Model first = make_model();
    Trainer trainer = make_trainer(first);
    for (std::size_t s = 0; s < 3; ++s) step(trainer, first, s);
    // Trainer::save_checkpoint alone would write rank 0's share of the state only: refused.
    CHECK_THROWS_WITH_AS(trainer.save_checkpoint(path), doctest::Contains("loom::distributed::save_checkpoint"),
                         UserError);
    dist::save_checkpoint(mpi, trainer, path);
    if (mpi.is_root()) CHECK(trainer.reduction()->holds_whole_state());

    // Each process's state of the parameters it owns is what the file holds for them.
    qa::Model loaded = make_model();
    auto from_file = adam(loaded.parameters(), 0.01);
    load_checkpoint(path, loaded.parameters(), from_file.get());
    auto parallel = std::dynamic_pointer_cast<dist::DataParallel>(trainer.reduction());
    REQUIRE(parallel);
    std::size_t compared = 0;
    for (std::size_t i = 0; i < first.parameters().size(); ++i) {
        if (parallel->owner(i) != mpi.rank()) continue;
        for (std::size_t k = 0; k < 2; ++k) {
            const auto own = trainer.learner().state_bytes(i, k), saved = from_file->state_bytes(i, k);
            REQUIRE(own.size() == saved.size());
            CHECK(std::equal(own.begin(), own.end(), saved.begin()));
            ++compared;
        }
    }
    CHECK(compared > 0);  // every process owns something

    for (std::size_t s = 3; s < all.size(); ++s) step(trainer, first, s);
    qa::Model second = make_model();
    Trainer resumed = make_trainer(second);
    dist::load_checkpoint(mpi, resumed, path);
    for (std::size_t s = 3; s < all.size(); ++s) step(resumed, second, s);
    CHECK(fingerprint(second.parameters()) == fingerprint(first.parameters()));
    MPI_Barrier(MPI_COMM_WORLD);
    if (mpi.is_root()) std::filesystem::remove(path);
}
