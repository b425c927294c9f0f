// The sharded minibatch source, rank 0's checkpoints and resuming, a process whose step throws, and
// the exact sum with two processes (tests/distributed/CMakeLists.txt: 2 and 3 processes).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "mpi_support.hpp"

using namespace loom;
using namespace mpi_test;
namespace dist = loom::distributed;

namespace {

// Every process's items, in rank order.
std::vector<std::size_t> gather_items(const std::vector<std::size_t>& mine) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int n = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
    MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
        offsets[r] = total;
        total += counts[r];
    }
    std::vector<std::uint64_t> in(mine.begin(), mine.end()), out(static_cast<std::size_t>(total));
    MPI_Allgatherv(in.data(), n, MPI_UINT64_T, out.data(), counts.data(), offsets.data(), MPI_UINT64_T, MPI_COMM_WORLD);
    return {out.begin(), out.end()};
}

std::vector<ItemLengths> lengths_of(const Pairs& p) {
    std::vector<ItemLengths> l;
    for (std::size_t i = 0; i < p.labels.size(); ++i) l.push_back({p.questions[i].size(), p.answers[i].size()});
    return l;
}

// A directory every process agrees on (rank 0 makes it), removed by rank 0 at the end.
struct SharedDir {
    std::string path;
    SharedDir() {
        char name[] = "/tmp/loom_mpi_XXXXXX";
        int length = 0;
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0) {
            path = ::mkdtemp(name) ? name : "";
            length = static_cast<int>(path.size());
        }
        MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
        path.resize(static_cast<std::size_t>(length));
        MPI_Bcast(path.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
    }
    ~SharedDir() {
        MPI_Barrier(MPI_COMM_WORLD);
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        std::error_code ec;
        if (rank == 0) std::filesystem::remove_all(path, ec);
    }
};

}  // namespace

TEST_CASE("mpi: ShardedBatcher gives each process its share of the same global batches and resumes") {
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    BatchingOptions bo;
    bo.batch_size = 10;  // 64 items: 6 batches of 10 and one of 4
    bo.seed = 3;
    const Batcher global(lengths_of(pairs), bo);
    auto parallel = dist::data_parallel(mpi);
    dist::ShardedBatcher sharded(global, parallel);
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
        const auto expected = global.epoch_batches(epoch);
        for (const auto& batch : expected) {
            const std::vector<std::size_t> mine = sharded.next();
            CHECK(!parallel->stand_in());
            CHECK(sharded.global_batch() == batch);
            CHECK(gather_items(mine) == batch);  // the shares, in rank order, are the global batch
        }
    }
    sharded.set_position({1, 3});
    const std::vector<std::size_t> resumed = sharded.next();
    CHECK(gather_items(resumed) == global.epoch_batches(1)[3]);
    CHECK(sharded.position() == DataPosition{1, 4});

    // A global batch of one item: it is the last process's share, every other process trains on a
    // stand-in (the same item, left out of the sums).
    bo.batch_size = 1;
    dist::ShardedBatcher single(Batcher(lengths_of(pairs), bo), parallel);
    const std::vector<std::size_t> mine = single.next();
    CHECK(mine.size() == 1);
    CHECK(mine[0] == single.global_batch()[0]);
    CHECK(parallel->stand_in() == (mpi.rank() != mpi.size() - 1));
}

TEST_CASE("mpi: a process whose forward throws stops every process at that step with its message") {
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model model = make_model();
    auto parallel = dist::data_parallel(mpi);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(model.squared_loss, Variable(), adam(model.parameters(), 0.01), options);
    const std::vector<std::size_t> global{0, 1, 2, 3, 4, 5};
    const std::vector<std::size_t> mine = dist::share_of(global, mpi.rank(), mpi.size());
    trainer.train_minibatch(bindings(model, pairs, mine));
    const std::uint64_t before = fingerprint(model.parameters());

    const int last = mpi.size() - 1;
    Bindings bad = bindings(model, pairs, mine);
    if (mpi.rank() == last) bad[model.label] = Value::batch(xt::xarray<float>(xt::zeros<float>({mine.size(), 2ul})));
    const std::string expected = "rank " + std::to_string(last) + " of " + std::to_string(mpi.size()) + " failed: ";
    if (mpi.rank() == last) {
        CHECK_THROWS_AS(trainer.train_minibatch(bad), UserError);  // its own error, naming the shapes
    } else {
        CHECK_THROWS_WITH_AS(trainer.train_minibatch(bad), doctest::Contains(expected.c_str()), UserError);
    }
    CHECK(fingerprint(model.parameters()) == before);  // nobody applied anything
    CHECK(trainer.learner().step_count() == 1);
    // The run can go on: the next step works everywhere.
    trainer.train_minibatch(bindings(model, pairs, mine));
    const std::vector<std::uint64_t> all = gather(fingerprint(model.parameters()));
    for (std::uint64_t f : all) CHECK(f == all[0]);
}

TEST_CASE("mpi: rank 0 writes the checkpoint and a run resumed from it continues bit for bit") {
    dist::Context& mpi = dist::Context::current();
    const Pairs pairs = make_pairs(toy_options().vocab);
    const SharedDir dir;
    REQUIRE(!dir.path.empty());
    const std::string path = dir.path + "/run.ckpt";
    BatchingOptions bo;
    bo.batch_size = 8;
    auto step_all = [&](Trainer& t, const qa::Model& m, dist::ShardedBatcher& source, int steps) {
        for (int s = 0; s < steps; ++s) t.train_minibatch(bindings(m, pairs, source.next()));
    };
    auto make_trainer = [&](qa::Model& m, const std::shared_ptr<dist::DataParallel>& parallel) {
        TrainerOptions options;
        options.reduction = parallel;
        return Trainer(m.squared_loss, Variable(), adam(m.parameters(), 0.01), options);
    };

    qa::Model first = make_model();
    auto parallel = dist::data_parallel(mpi);
    Trainer trainer = make_trainer(first, parallel);
    dist::ShardedBatcher source(Batcher(lengths_of(pairs), bo), parallel);
    step_all(trainer, first, source, 3);
    TrainingPosition at;
    at.epoch = source.position().epoch;
    at.minibatch = source.position().batch;
    dist::save_checkpoint(mpi, trainer, path, at);
    CHECK(std::filesystem::exists(path));
    step_all(trainer, first, source, 9);  // past the end of the epoch (8 batches)
    const std::uint64_t uninterrupted = fingerprint(first.parameters());

    qa::Model second = make_model();
    Trainer resumed = make_trainer(second, parallel);
    const Checkpoint c = dist::load_checkpoint(mpi, resumed, path);
    dist::ShardedBatcher again(Batcher(lengths_of(pairs), bo), parallel);
    again.set_position({c.position.epoch, c.position.minibatch});
    CHECK(resumed.total_samples_seen() == 3 * 8);  // global samples, not this process's
    step_all(resumed, second, again, 9);
    CHECK(fingerprint(second.parameters()) == uninterrupted);

    // Rank 0 cannot write: every process gets the error.
    const std::string expected = "rank 0 of " + std::to_string(mpi.size()) + " failed: could not write the checkpoint";
    if (mpi.is_root()) {
        CHECK_THROWS_AS(dist::save_checkpoint(mpi, trainer, dir.path + "/no/such/dir/x.ckpt"), UserError);
    } else {
        CHECK_THROWS_WITH_AS(dist::save_checkpoint(mpi, trainer, dir.path + "/no/such/dir/x.ckpt"),
                             doctest::Contains(expected.c_str()), UserError);
    }
}
