// The g2p sample's choice of the epoch kept and of the rate's halvings (samples/g2p/epoch_choice.hpp).
#include <doctest/doctest.h>

#include "g2p/epoch_choice.hpp"

TEST_CASE("g2p epoch choice: the best epoch is kept, the rate halved after 2 worse epochs in a row") {
    g2p::EpochChoice choice(20, true);
    // PER of each epoch, and what must follow: kept, halved.
    const struct {
        double per;
        bool keep, halve;
    } epochs[] = {{0.5, true, false},   {0.6, false, false},  {0.7, false, true},
                  {0.55, false, false}, {0.4, true, false},   {0.45, false, false},
                  {0.3, true, false},   {0.31, false, false}, {0.32, false, true}};
    for (const auto& e : epochs) {
        CAPTURE(e.per);
        const auto v = choice.after_epoch(e.per);
        CHECK(v.keep == e.keep);
        CHECK(v.halve == e.halve);
    }
    CHECK(choice.prefers(0.3));  // a mean as good as the best: the later one
    CHECK_FALSE(choice.prefers(0.31));
}

TEST_CASE("g2p epoch choice: a tie keeps the later epoch and never halves the rate") {
    g2p::EpochChoice choice(200, true);
    CHECK(choice.after_epoch(1.0).keep);
    for (int epoch = 2; epoch <= 5; ++epoch) {
        const auto v = choice.after_epoch(1.0);
        CHECK(v.keep);
        CHECK_FALSE(v.halve);
        CHECK(v.note == ", as good: this later epoch kept");
    }
    // A worse epoch after the ties is the first worse one: no halving yet.
    CHECK_FALSE(choice.after_epoch(1.1).halve);
}

TEST_CASE("g2p epoch choice: fewer than 20 held-out words keep every epoch in turn, the rate as scheduled") {
    for (std::size_t words : {1, 2, 19}) {
        CAPTURE(words);
        g2p::EpochChoice choice(words, true);
        CHECK_FALSE(choice.decides());
        for (double per : {1.0, 1.0, 2.0, 3.0, 0.5, 4.0}) {
            const auto v = choice.after_epoch(per);
            CHECK(v.keep);
            CHECK_FALSE(v.halve);
            CHECK(v.note.empty());
        }
        CHECK(choice.prefers(100.0));  // the mean, the schedule's end
    }
    CHECK(g2p::EpochChoice(20, true).decides());
}

TEST_CASE("g2p epoch choice: the budget schedule never halves") {
    g2p::EpochChoice choice(50, false);
    for (double per : {0.5, 0.6, 0.7, 0.8}) CHECK_FALSE(choice.after_epoch(per).halve);
}
