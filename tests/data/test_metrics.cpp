// MAP / MRR over question groups and tie handling.
#include <doctest/doctest.h>

#include <cmath>

#include "core/errors.hpp"
#include "data/metrics.hpp"

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
