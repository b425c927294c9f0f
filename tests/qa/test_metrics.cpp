// MAP / MRR over question groups and tie handling; the paired bootstrap.
#include <doctest/doctest.h>

#include <cmath>

#include "core/errors.hpp"
#include "qa/metrics.hpp"

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

namespace {
// n groups of two candidates, the wrong one first; a = {a_wrong, a_true} and b = {b_wrong, b_true}
// per group.
struct Pairs {
    std::vector<std::size_t> groups;
    std::vector<int> labels;
    std::vector<double> a, b;
    void add(std::size_t n, double a_wrong, double a_true, double b_wrong, double b_true) {
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t g = groups.size() / 2;
            groups.insert(groups.end(), {g, g}), labels.insert(labels.end(), {0, 1});
            a.insert(a.end(), {a_wrong, a_true}), b.insert(b.end(), {b_wrong, b_true});
        }
    }
};
}  // namespace

TEST_CASE("significant_weight: the smallest weight that fixes every group, and 0 when b hurts") {
    // a ranks the wrong candidate 0.2 higher; b says which is true. w = 0.1 cannot overturn 0.2
    // (gain 0 everywhere, interval not above zero); w = 1 and w = 3 lift every group's average
    // precision from 1/2 to 1 (gain 0.5 on each of 40 groups): equal gains, so the first, 1.
    Pairs p;
    p.add(40, 0.2, 0.0, 0.0, 1.0);
    CHECK(significant_weight(p.groups, p.labels, p.a, p.b, {0.1, 1.0, 3.0}) == 1.0);
    CHECK(significant_weight(p.groups, p.labels, p.a, p.b, {0.1}) == 0.0);
    // b pointing the wrong way only hurts where a was right: never chosen.
    Pairs wrong;
    wrong.add(40, 0.0, 0.2, 1.0, 0.0);
    CHECK(significant_weight(wrong.groups, wrong.labels, wrong.a, wrong.b, {0.1, 1.0, 3.0}) == 0.0);
}

TEST_CASE("significant_weight: a gain on a few groups among many is noise") {
    // 2 of 60 groups gain 0.5 with w = 1 and 1 loses 0.5: mean +0.0083, but a resample can easily
    // draw the loss without the gains, so the interval reaches below zero.
    Pairs p;
    p.add(2, 0.2, 0.0, 0.0, 1.0);   // fixed by b
    p.add(1, 0.0, 0.2, 1.0, 0.0);   // broken by b
    p.add(57, 0.0, 0.2, 0.0, 0.0);  // right either way
    CHECK(significant_weight(p.groups, p.labels, p.a, p.b, {1.0}) == 0.0);
    // The same gain on every group is significant.
    Pairs all;
    all.add(60, 0.2, 0.0, 0.0, 1.0);
    CHECK(significant_weight(all.groups, all.labels, all.a, all.b, {1.0}) == 1.0);
}

TEST_CASE("significant_weight: bad sizes and no true candidate") {
    CHECK_THROWS_AS(significant_weight({0, 0}, {0, 1}, {1, 2}, {1}, {1.0}), UserError);
    CHECK(significant_weight({0, 0}, {0, 0}, {1, 2}, {2, 1}, {1.0}) == 0.0);
}

TEST_CASE("paired bootstrap of a constant and of a symmetric difference") {
    const std::vector<double> b{0.1, 0.5, 0.9, 0.3};
    std::vector<double> a = b;
    for (auto& v : a) v += 0.25;
    auto r = paired_bootstrap(a, b, 3);
    CHECK(r.mean == doctest::Approx(0.25));
    CHECK(r.low == doctest::Approx(0.25));
    CHECK(r.high == doctest::Approx(0.25));
    // +1 and -1 on alternate questions: mean 0, standard error 1 / sqrt(200), so about +-0.139.
    std::vector<double> x(200), y(200, 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? 1.0 : -1.0;
    r = paired_bootstrap(x, y, 5);
    CHECK(r.mean == doctest::Approx(0.0));
    CHECK(r.low == doctest::Approx(-0.139).epsilon(0.15));
    CHECK(r.high == doctest::Approx(0.139).epsilon(0.15));
    CHECK_THROWS_AS(paired_bootstrap({1.0}, {1.0, 2.0}), UserError);
}
