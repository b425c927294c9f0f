// Synthetic QA data (qa/synthetic_qa.hpp): its counts, labels, lengths and groups, the topic
// words shared by a question and its true answer, wrong answers that repeat the question's words,
// determinism per seed, and its refusals.
#include <doctest/doctest.h>

#include <set>

#include "core/errors.hpp"
#include "qa/synthetic_qa.hpp"

using namespace loom;

TEST_CASE("synthetic QA data: one true answer per question among its candidates and lengths in range") {
    const SyntheticQaOptions o{.questions = 30, .candidates = 5, .vocab = 500, .topics = 4, .copy = 2, .seed = 3};
    const QaData d = make_synthetic_qa(o);
    REQUIRE(d.pairs.size() == 150);
    CHECK(d.num_groups == 30);
    CHECK(d.num_positives() == 30);
    for (std::size_t q = 0; q < 30; ++q) {
        int positives = 0;
        for (std::size_t c = 0; c < 5; ++c) {
            const QaPair& p = d.pairs[q * 5 + c];
            CHECK(p.group == q);
            CHECK(p.question == d.pairs[q * 5].question);
            positives += p.label;
            CHECK(p.question.size() >= o.q_min);
            CHECK(p.question.size() <= o.q_max);
            CHECK(p.answer.size() >= o.a_min);
            CHECK(p.answer.size() <= o.a_max);
            for (const auto& w : p.answer) CHECK(std::stoul(w.substr(1)) < o.vocab);
        }
        CHECK(positives == 1);
    }
}

TEST_CASE("synthetic QA data: true answers share more words with their question than wrong ones") {
    // Half of each side's words come from the question's topic (50 words), so a true answer shares
    // several words with its question and a wrong answer (another topic) almost none.
    const QaData d = make_synthetic_qa({.questions = 200, .vocab = 10000, .copy = 0});
    double shared_true = 0, shared_wrong = 0;
    for (const auto& p : d.pairs) {
        const std::set<std::string> q(p.question.begin(), p.question.end());
        std::size_t shared = 0;
        for (const auto& w : std::set<std::string>(p.answer.begin(), p.answer.end())) shared += q.count(w);
        (p.label ? shared_true : shared_wrong) += static_cast<double>(shared);
    }
    CHECK(shared_true / 200 > 1.0);
    CHECK(shared_wrong / 600 < 0.2);
}

TEST_CASE("synthetic QA data: the same seed gives the same data and bad sizes are refused") {
    const QaData a = make_synthetic_qa({.questions = 10, .seed = 5}),
                 b = make_synthetic_qa({.questions = 10, .seed = 5});
    const QaData c = make_synthetic_qa({.questions = 10, .seed = 6});
    CHECK(a.pairs[7].answer == b.pairs[7].answer);
    CHECK_FALSE(a.pairs[7].answer == c.pairs[7].answer);
    CHECK_THROWS_AS(make_synthetic_qa({.topics = 1}), UserError);
    CHECK_THROWS_AS(make_synthetic_qa({.q_min = 9, .q_max = 3}), UserError);
    CHECK_THROWS_AS(make_synthetic_qa({.candidates = 0}), UserError);
}

TEST_CASE("synthetic QA data: wrong answers that repeat the question's words mislead word overlap") {
    // With the topic's 50 words a true answer shares about 1.3 words with its question by chance; each
    // wrong answer repeats 2 of the question's tokens (once if both draws hit the same one).
    const QaData d = make_synthetic_qa({.questions = 200, .vocab = 10000, .copy = 0, .distractor_copy = 2});
    double shared_true = 0, shared_wrong = 0;
    std::size_t wrong_sharing_none = 0;
    for (const auto& p : d.pairs) {
        const std::set<std::string> q(p.question.begin(), p.question.end());
        std::size_t shared = 0;
        for (const auto& w : std::set<std::string>(p.answer.begin(), p.answer.end())) shared += q.count(w);
        (p.label ? shared_true : shared_wrong) += static_cast<double>(shared);
        if (!p.label && shared == 0) ++wrong_sharing_none;
    }
    CHECK(wrong_sharing_none == 0);
    CHECK(shared_wrong / 600 > shared_true / 200);
}
