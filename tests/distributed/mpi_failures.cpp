// Processes that stop in the middle of data-parallel training, for run_failure.cmake (which runs
// this under mpirun -np 2 and checks the job ends, and how):
//   ends_early DIR            rank 1 leaves main after one step (its error caught there); rank 0's
//                             next step throws a UserError naming rank 1 and both end, status 1.
//   throws_in_backward DIR    rank 1 fails after its step's gradient sums began; it cannot tell
//                             rank 0 (waiting for sums), so it aborts the job: mpirun ends both.
//   killed_in_checkpoint DIR  rank 0 writes checkpoints one after another; rank 1 kills it with
//                             SIGKILL while a write is under way.
//   verify DIR                (one process) the checkpoint left in DIR loads, and is one whole save.
//   sleeps DIR                with a timeout of 2 s, rank 0 writes a checkpoint after step 1, then
//                             rank 1 sleeps 120 s before step 2: rank 0 gives up waiting at step 2,
//                             names rank 1, and the job ends long before rank 1 would wake.
//   stopped DIR               the same, rank 1 stopped by SIGSTOP instead (it never wakes).
//   verify_late DIR           (one process) the checkpoint of sleeps or stopped loads, as written.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <mpi.h>

#include "mpi_support.hpp"

using namespace loom;
using namespace mpi_test;
namespace dist = loom::distributed;

namespace {

int ends_early(dist::Context& mpi) {
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model model = make_model();
    auto parallel = dist::data_parallel(mpi);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(model.squared_loss, Variable(), adam(model.parameters(), 0.01), options);
    const std::vector<std::size_t> global{0, 1, 2, 3};
    for (int step = 0; step < 3; ++step) {
        if (step == 1 && mpi.rank() == 1) throw UserError("rank 1 could not read its next minibatch (on purpose)");
        trainer.train_minibatch(bindings(model, pairs, dist::share_of(global, mpi.rank(), mpi.size())));
    }
    return 0;
}

int throws_in_backward(dist::Context& mpi) {
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model model = make_model();
    auto parallel = dist::data_parallel(mpi);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(model.squared_loss, Variable(), adam(model.parameters(), 0.01), options);
    const std::vector<std::size_t> mine = dist::share_of({0, 1, 2, 3}, mpi.rank(), mpi.size());
    if (mpi.rank() == 1) {
        // As the Trainer would: forward, combine; then backward throws (say, out of memory).
        MinibatchResult local;
        local.loss_sum = 1;
        local.loss_count = mine.size();
        parallel->combine(local);
        throw std::runtime_error("out of memory in backward (on purpose)");
    }
    trainer.train_minibatch(bindings(model, pairs, mine));
    return 0;
}

int late_rank(dist::Context& mpi, const std::string& dir, bool stopped) {
    ::alarm(100);  // should the job hang after all, no process of it outlives the test by long
    mpi.set_timeout(2);
    const Pairs pairs = make_pairs(toy_options().vocab);
    qa::Model model = make_model();
    auto parallel = dist::data_parallel(mpi);
    TrainerOptions options;
    options.reduction = parallel;
    Trainer trainer(model.squared_loss, Variable(), adam(model.parameters(), 0.01), options);
    const std::vector<std::size_t> mine = dist::share_of({0, 1, 2, 3}, mpi.rank(), mpi.size());
    trainer.train_minibatch(bindings(model, pairs, mine));
    dist::save_checkpoint(mpi, trainer, dir + "/late.ckpt", TrainingPosition{0, 1, 4, ""});
    if (mpi.rank() == 1) {
        std::fprintf(stderr, "rank 1 %s before step 2\n", stopped ? "stops itself" : "sleeps for 120 s");
        if (stopped)
            ::raise(SIGSTOP);
        else
            std::this_thread::sleep_for(std::chrono::seconds(120));
    }
    trainer.train_minibatch(bindings(model, pairs, mine));
    std::fprintf(stderr, "rank %d trained step 2\n", mpi.rank());
    return 0;
}

int verify_late(const std::string& dir) {
    qa::Model model = make_model();
    Trainer trainer(model.squared_loss, Variable(), adam(model.parameters(), 0.01));
    const Checkpoint c = trainer.load_checkpoint(dir + "/late.ckpt");
    if (c.position.samples != 4) {
        std::fprintf(stderr, "the checkpoint says %llu samples, not the 4 of step 1\n",
                     static_cast<unsigned long long>(c.position.samples));
        return 1;
    }
    std::printf("verified: the checkpoint of step 1 loads\n");
    return 0;
}

// A parameter of 4 Mi floats (16 MiB): a write takes long enough to be caught in the middle.
struct Big {
    Variable x = input_variable({2048}, "x");
    Parameter w = parameter({2048, 2048}, zeros(), "w");
    Variable loss = reduce_sum(times(x, w), 0);
};

int killed_in_checkpoint(dist::Context& mpi, const std::string& dir) {
    Big big;
    Trainer trainer(big.loss, Variable(), sgd({big.w}, 0.1));
    const std::string path = dir + "/big.ckpt";
    int root_pid = static_cast<int>(::getpid());
    MPI_Bcast(&root_pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    big.w.data().fill(1.0f);
    dist::save_checkpoint(mpi, trainer, path, TrainingPosition{0, 0, 1, ""});
    if (mpi.is_root()) {
        for (std::uint64_t k = 2; k <= 400; ++k) {
            big.w.data().fill(static_cast<float>(k));
            trainer.save_checkpoint(path, TrainingPosition{0, 0, k, ""});
        }
        std::fprintf(stderr, "rank 0 wrote 400 checkpoints without being killed\n");
        return 0;
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < give_up) {
        for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            if (entry.path().filename().string().find(".loom-tmp.") == std::string::npos) continue;
            std::fprintf(stderr, "rank 1 kills rank 0 (pid %d) while it writes %s\n", root_pid,
                         entry.path().filename().c_str());
            ::kill(root_pid, SIGKILL);
            std::this_thread::sleep_for(std::chrono::seconds(30));  // mpirun ends this process
            return 0;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::fprintf(stderr, "rank 1 never saw a checkpoint being written\n");
    return 0;
}

int verify(const std::string& dir) {
    Big big;
    Trainer trainer(big.loss, Variable(), sgd({big.w}, 0.1));
    const Checkpoint c = trainer.load_checkpoint(dir + "/big.ckpt");
    const float k = static_cast<float>(c.position.samples);
    for (float v : big.w.data())
        if (v != k) {
            std::fprintf(stderr, "torn checkpoint: save %g holds %g\n", double(k), double(v));
            return 1;
        }
    std::printf("verified: the checkpoint is save %g, whole\n", double(k));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    dist::Context mpi(argc, argv);
    if (argc != 3) {
        std::fprintf(stderr,
                     "usage: mpi_failures ends_early|throws_in_backward|killed_in_checkpoint|verify|sleeps|stopped|"
                     "verify_late DIR\n");
        return 2;
    }
    const std::string mode = argv[1], dir = argv[2];
    try {
        if (mode == "ends_early") return ends_early(mpi);
        if (mode == "throws_in_backward") return throws_in_backward(mpi);
        if (mode == "killed_in_checkpoint") return killed_in_checkpoint(mpi, dir);
        if (mode == "verify") return verify(dir);
        if (mode == "sleeps" || mode == "stopped") return late_rank(mpi, dir, mode == "stopped");
        if (mode == "verify_late") return verify_late(dir);
        std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: error: %s\n", mpi.rank(), e.what());
        return 1;
    }
}
