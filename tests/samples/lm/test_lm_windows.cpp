// The language-model sample's training windows (samples/lm/windows.hpp) and its memory estimate
// (lm::training_memory): under mpirun each process trains on windows of its own, and together the
// processes train on the windows one process with their whole batch trains on; the estimate is a
// lower bound of the parameters the model has, and not a vacuous one.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "core/errors.hpp"
#include "lm/model.hpp"
#include "lm/windows.hpp"

using namespace loom;

namespace {

// The starts of `iterations` iterations of every process of `ranks`, iteration by iteration: each
// iteration's starts of rank 0, then rank 1's, ...
std::vector<std::vector<std::size_t>> starts_of(lm::Architecture a, std::size_t length, std::size_t block,
                                                std::size_t batch, std::size_t ranks, std::size_t iterations,
                                                std::vector<bool>* restarts = nullptr) {
    std::vector<lm::WindowStarts> processes;
    for (std::size_t r = 0; r < ranks; ++r) processes.emplace_back(a, length, block, batch, 7, r, ranks);
    std::vector<std::vector<std::size_t>> all(iterations);
    for (std::size_t i = 0; i < iterations; ++i)
        for (lm::WindowStarts& p : processes) {
            bool restarted = false;
            const std::vector<std::size_t> s = p.next(restarted);
            CHECK(s.size() == batch);
            all[i].insert(all[i].end(), s.begin(), s.end());
            if (restarts && &p == &processes.front()) restarts->push_back(restarted);
        }
    return all;
}

}  // namespace

TEST_CASE("lm: under mpirun each process trains on its own windows, together one process's whole batch") {
    for (const lm::Architecture a : {lm::Architecture::transformer, lm::Architecture::lstm}) {
        INFO((a == lm::Architecture::lstm ? "lstm" : "transformer"));
        const std::size_t length = 1000, block = 10, batch = 3;
        // Two processes of 3 windows give the windows of one process of 6, in rank order.
        const auto two = starts_of(a, length, block, batch, 2, 40);
        const auto one = starts_of(a, length, block, 2 * batch, 1, 40);
        CHECK(two == one);
        for (const auto& iteration : two) {
            const std::vector<std::size_t> rank0(iteration.begin(), iteration.begin() + batch);
            const std::vector<std::size_t> rank1(iteration.begin() + batch, iteration.end());
            CHECK(rank0 != rank1);  // the processes' windows are their own
            for (const std::size_t at : iteration) CHECK(at + block + 1 <= length);
        }
        if (a == lm::Architecture::lstm) {
            // The LSTM's streams, 1000 / 6 = 166 characters each: process 1 takes streams 3 to 5,
            // every window inside its own stream, one block further each iteration until the next
            // would pass the stream's end (16 windows of 10 + 1 fit in 166), then from the start.
            std::vector<bool> restarts;
            const auto again = starts_of(a, length, block, batch, 2, 17, &restarts);
            for (std::size_t i = 0; i < 17; ++i)
                for (std::size_t s = 0; s < 2 * batch; ++s) {
                    INFO("iteration " << i << ", stream " << s);
                    CHECK(again[i][s] == s * 166 + (i % 16) * block);
                }
            CHECK(restarts == std::vector<bool>{false, false, false, false, false, false, false, false, false, false,
                                                false, false, false, false, false, false, true});
        } else {
            // Drawn at random over the whole text: not the LSTM's fixed layout.
            std::set<std::size_t> distinct;
            for (const auto& iteration : two) distinct.insert(iteration.begin(), iteration.end());
            CHECK(distinct.size() > 150);
        }
    }
    // A single process draws what it drew before processes were counted: one stream of seed * 1000003.
    std::mt19937_64 random(7 * 1000003);
    std::uniform_int_distribution<std::size_t> pick(0, 1000 - 10 - 1);
    lm::WindowStarts alone(lm::Architecture::transformer, 1000, 10, 3, 7);
    bool restarted = false;
    for (std::size_t i = 0; i < 5; ++i) {
        const std::vector<std::size_t> s = alone.next(restarted);
        for (std::size_t b = 0; b < 3; ++b) CHECK(s[b] == pick(random));
    }
}

TEST_CASE("lm: a text too short for the streams of every process is refused naming --batch and --block") {
    // 200 characters in 2 x 3 streams of 33: a window of 40 + 1 does not fit.
    CHECK_THROWS_WITH_AS(lm::WindowStarts(lm::Architecture::lstm, 200, 40, 3, 1, 0, 2),
                         doctest::Contains("--batch 3 x 2 processes streams make streams of 33 characters; a window "
                                           "of --block 40 needs 41"),
                         UserError);
    CHECK_NOTHROW(lm::WindowStarts(lm::Architecture::lstm, 200, 40, 3, 1, 0, 1));  // 66 characters a stream
    CHECK_THROWS_WITH_AS(lm::WindowStarts(lm::Architecture::transformer, 40, 40, 3, 1),
                         doctest::Contains("a window of --block 40 needs 41"), UserError);
}

TEST_CASE("lm: the training memory estimate is a lower bound of the model's parameters, and close to it") {
    for (const lm::Architecture a : {lm::Architecture::transformer, lm::Architecture::lstm})
        for (const std::size_t width : {std::size_t{32}, std::size_t{192}}) {
            const lm::Settings s{.architecture = a, .layers = 3, .heads = 4, .width = width, .block = 48};
            const lm::Model m(s, 65);
            const double have = double(parameter_count(m.parameters()));
            const lm::TrainingMemory need = lm::training_memory(s, 12, 65);
            INFO("width " << width << ": estimated " << need.parameters << ", the model has " << have);
            CHECK(need.parameters <= have);
            CHECK(need.parameters >= 0.9 * have);
            CHECK(need.parameter_bytes == 16 * need.parameters);
            CHECK(need.activation_bytes >= 4.0 * 12 * 48 * 65);  // at least the logits
        }
    // The sizes a hostile command line gives are terabytes, refused before anything is built.
    const lm::Settings wide{.layers = 64, .heads = 4, .width = 16384, .block = 64};
    CHECK(lm::training_memory(wide, 12, 65).parameter_bytes > 3e12);
    const lm::Settings long_block{.layers = 4, .heads = 4, .width = 128, .block = std::size_t{1} << 20};
    CHECK(lm::training_memory(long_block, 12, 65).activation_bytes > 8e12);
}
