// MAP / MRR over question groups, tie handling, and the word-overlap baseline scorer.
#include <doctest/doctest.h>

#include <cmath>

#include "core/data_metrics.hpp"
#include "core/errors.hpp"

using namespace loom;

TEST_CASE("metrics: MAP and MRR by hand / groups interleaved / a group without positives skipped") {
    // group 7: scores .9 .8 .7 .6, labels 1 0 0 1 -> positives at ranks 1 and 4: AP (1 + 2/4)/2, RR 1
    // group 3: scores .1 .5 .3,    labels 1 0 0   -> positive at rank 3: AP 1/3, RR 1/3
    // group 9: no positive -> skipped
    // group 1: scores 2 1,         labels 1 1     -> AP 1, RR 1
    const std::vector<std::size_t> groups = {7, 3, 7, 9, 3, 7, 1, 3, 9, 7, 1};
    const std::vector<double> scores = {.9, .1, .8, .4, .5, .7, 2, .3, .2, .6, 1};
    const std::vector<int> labels = {1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1};
    const RankingMetrics m = ranking_metrics(groups, scores, labels);
    CHECK(m.questions == 3);
    CHECK(m.skipped_no_positive == 1);
    CHECK(m.map == doctest::Approx((0.75 + 1.0 / 3 + 1.0) / 3));
    CHECK(m.mrr == doctest::Approx((1.0 + 1.0 / 3 + 1.0) / 3));
}

TEST_CASE("metrics: two positives behind a negative") {
    // ranks of positives 2 and 3: AP (1/2 + 2/3) / 2 = 7/12, RR 1/2
    const RankingMetrics m = ranking_metrics({0, 0, 0, 0}, {4, 3, 2, 1}, {0, 1, 1, 0});
    CHECK(m.map == doctest::Approx(7.0 / 12));
    CHECK(m.mrr == doctest::Approx(0.5));
}

TEST_CASE("metrics: ties by input order / pessimistic and optimistic") {
    const std::vector<std::size_t> groups = {0, 0, 0};
    const std::vector<double> scores = {1, 1, 1};
    const std::vector<int> labels = {0, 1, 0};
    CHECK(ranking_metrics(groups, scores, labels).map == doctest::Approx(0.5));
    CHECK(ranking_metrics(groups, scores, labels, TieBreak::pessimistic).map == doctest::Approx(1.0 / 3));
    CHECK(ranking_metrics(groups, scores, labels, TieBreak::optimistic).map == doctest::Approx(1.0));
    CHECK(ranking_metrics(groups, scores, labels, TieBreak::optimistic).mrr == doctest::Approx(1.0));
}

TEST_CASE("metrics: no scorable group and bad arguments") {
    const RankingMetrics m = ranking_metrics({0, 1}, {1, 2}, {0, 0});
    CHECK(m.questions == 0);
    CHECK(m.skipped_no_positive == 2);
    CHECK(m.map == 0.0);
    CHECK_THROWS_AS(ranking_metrics({0, 1}, {1}, {0, 1}), UserError);
    CHECK_THROWS_AS(ranking_metrics({0}, {1}, {2}), UserError);
}

TEST_CASE("overlap: shared non-stopword types / case-insensitive / optionally idf-weighted") {
    CHECK(is_stopword("The"));
    CHECK(is_stopword("?"));
    CHECK(is_stopword("'s"));
    CHECK_FALSE(is_stopword("Paris"));
    CHECK_FALSE(is_stopword("1990"));

    const std::vector<std::string> q = {"Who", "wrote", "Hamlet", "?"};
    const std::vector<std::string> a = {"hamlet", "was", "written", "by", "Shakespeare", "who", "wrote", ".", "hamlet"};
    CHECK(word_overlap_score(q, a) == 2.0);  // wrote, hamlet (once each); who and ? are stopwords
    CHECK(word_overlap_score(q, {"the", "play", "?"}) == 0.0);

    const IdfTable idf = IdfTable::fit({{"hamlet", "wrote"}, {"Hamlet"}, {"paris"}, {"x"}});
    CHECK(idf.num_documents() == 4);
    CHECK(idf.idf("hamlet") == doctest::Approx(std::log(2.0)));
    CHECK(idf.idf("wrote") == doctest::Approx(std::log(4.0)));
    CHECK(idf.idf("unseen") == doctest::Approx(std::log(5.0)));
    CHECK(word_overlap_score(q, a, &idf) == doctest::Approx(std::log(2.0) + std::log(4.0)));
}

TEST_CASE("ranking_metrics lists each question's average precision") {
    // Group 7: positive at rank 2 -> AP 1/2; group 3: positives at ranks 1 and 3 -> (1 + 2/3) / 2.
    const std::vector<std::size_t> groups{7, 7, 3, 3, 3};
    const std::vector<double> scores{0.9, 0.5, 0.8, 0.6, 0.7};
    const std::vector<int> labels{0, 1, 1, 1, 0};
    const auto m = loom::ranking_metrics(groups, scores, labels);
    REQUIRE(m.average_precision.size() == 2);
    CHECK(m.average_precision[0] == doctest::Approx(0.5));
    CHECK(m.average_precision[1] == doctest::Approx((1.0 + 2.0 / 3.0) / 2.0));
    CHECK(m.map == doctest::Approx((m.average_precision[0] + m.average_precision[1]) / 2));
}

TEST_CASE("paired_bootstrap: a constant difference has no spread -- a symmetric one straddles zero") {
    const std::vector<double> b{0.1, 0.5, 0.9, 0.3};
    std::vector<double> a = b;
    for (auto& v : a) v += 0.25;
    auto r = loom::paired_bootstrap(a, b, 500, 3);
    CHECK(r.mean == doctest::Approx(0.25));
    CHECK(r.low == doctest::Approx(0.25));
    CHECK(r.high == doctest::Approx(0.25));
    CHECK(r.at_most_zero == 0.0);
    // Differences +1 and -1 on alternate questions: mean 0, the interval covers both signs.
    std::vector<double> x(200), y(200, 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? 1.0 : -1.0;
    r = loom::paired_bootstrap(x, y, 2000, 5);
    CHECK(r.mean == doctest::Approx(0.0));
    CHECK(r.low < 0.0);
    CHECK(r.high > 0.0);
    // The standard error of the mean is 1 / sqrt(200) = 0.0707: the 95 % interval is about +-0.139.
    CHECK(r.high == doctest::Approx(0.139).epsilon(0.15));
    CHECK(r.at_most_zero == doctest::Approx(0.5).epsilon(0.1));
    CHECK_THROWS_AS(loom::paired_bootstrap({1.0}, {1.0, 2.0}), loom::UserError);
}
