#pragma once
/// \file
/// Ranking metrics for answer selection (MAP, MRR).
///
/// MAP and MRR are computed per question group: candidates are ranked by decreasing score; the
/// average precision of a group is the mean over its positives of (positives up to that rank) /
/// rank, and its reciprocal rank is 1 / rank of the first positive. Groups without any positive
/// have neither, so they are skipped and counted. Equal scores are ordered by `TieBreak`: a
/// baseline with integer scores has many ties, and the choice moves MAP by several points.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom {

/// How ranking_metrics orders candidates with equal scores.
enum class TieBreak {
    input_order,  ///< candidates keep their order in the data (a stable sort)
    pessimistic,  ///< negatives before positives: a lower bound
    optimistic,   ///< positives before negatives: an upper bound
};

/// What ranking_metrics measured over the groups (questions) of candidates.
struct RankingMetrics {
    double map = 0.0;                       ///< mean average precision over the scored groups
    double mrr = 0.0;                       ///< mean reciprocal rank of each group's first positive
    std::size_t questions = 0;              ///< groups that were scored
    std::size_t skipped_no_positive = 0;    ///< groups without any positive label
    std::vector<double> average_precision;  ///< per scored group, groups in order of first appearance
};

/// groups[i], scores[i], labels[i] describe candidate i; labels are 0 or 1. Group ids need not be
/// contiguous or sorted. Throws UserError for vectors of different sizes or labels not in {0, 1}.
RankingMetrics ranking_metrics(const std::vector<std::size_t>& groups, const std::vector<double>& scores,
                               const std::vector<int>& labels, TieBreak ties = TieBreak::input_order);

/// A mean difference and its 95 % interval (paired_bootstrap).
struct PairedInterval {
    double mean, low, high;
};
/// \var PairedInterval::mean
/// mean(a - b) over the items.
/// \var PairedInterval::low
/// The interval's lower end.
/// \var PairedInterval::high
/// The interval's upper end.

/// The 95 % interval of mean(a - b) over items (questions) resampled with replacement, 2000 times:
/// whether one ranker's per-question average precision beats another's beyond the data's noise.
/// Throws UserError for series of different or zero length.
/// \param a, b  one number per item, paired by position
/// \param seed  seeds the resampling
PairedInterval paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t seed = 1);

/// Adding a second score to a first without fitting noise: the weight w among `candidates` for which
/// `a + w * b` has the largest mean gain in average precision over `a` alone, counting only weights
/// whose gain has a paired-bootstrap interval above zero; 0 when none has (ties: the first in the
/// list; 0 too when no group has a true candidate). `groups` and `labels` as in ranking_metrics.
/// Throws UserError for vectors of different sizes.
double significant_weight(const std::vector<std::size_t>& groups, const std::vector<int>& labels,
                          const std::vector<double>& a, const std::vector<double>& b,
                          const std::vector<double>& candidates);

}  // namespace loom
