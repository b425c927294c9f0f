#include "qa/metrics.hpp"

#include <algorithm>
#include <random>
#include <unordered_map>

#include "core/errors.hpp"

namespace loom {

namespace {

struct GroupResult {
    double average_precision = 0.0;
    double reciprocal_rank = 0.0;
};

GroupResult rank_group(std::vector<std::size_t>& members, const std::vector<double>& scores,
                       const std::vector<int>& labels, TieBreak ties, std::size_t positives) {
    std::stable_sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
        if (scores[a] != scores[b]) return scores[a] > scores[b];
        if (ties == TieBreak::pessimistic) return labels[a] < labels[b];
        if (ties == TieBreak::optimistic) return labels[a] > labels[b];
        return false;
    });
    GroupResult r;
    std::size_t hits = 0;
    for (std::size_t rank = 1; rank <= members.size(); ++rank) {
        if (labels[members[rank - 1]] != 1) continue;
        ++hits;
        if (hits == 1) r.reciprocal_rank = 1.0 / static_cast<double>(rank);
        r.average_precision += static_cast<double>(hits) / static_cast<double>(rank);
    }
    r.average_precision /= static_cast<double>(positives);
    return r;
}

}  // namespace

RankingMetrics ranking_metrics(const std::vector<std::size_t>& groups, const std::vector<double>& scores,
                               const std::vector<int>& labels, TieBreak ties) {
    if (groups.size() != scores.size() || groups.size() != labels.size())
        throw UserError("ranking_metrics: groups (" + std::to_string(groups.size()) + "), scores (" +
                        std::to_string(scores.size()) + ") and labels (" + std::to_string(labels.size()) +
                        ") must have one entry per candidate");
    // Members of each group in input order; groups in order of first appearance.
    std::unordered_map<std::size_t, std::size_t> slot_of_group;
    std::vector<std::vector<std::size_t>> members;
    for (std::size_t i = 0; i < groups.size(); ++i) {
        if (labels[i] != 0 && labels[i] != 1)
            throw UserError("ranking_metrics: label of candidate " + std::to_string(i) + " is " +
                            std::to_string(labels[i]) + "; labels must be 0 or 1");
        const auto [it, inserted] = slot_of_group.try_emplace(groups[i], members.size());
        if (inserted) members.emplace_back();
        members[it->second].push_back(i);
    }
    RankingMetrics m;
    for (auto& group : members) {
        const auto positives = static_cast<std::size_t>(
            std::count_if(group.begin(), group.end(), [&](std::size_t i) { return labels[i] == 1; }));
        if (positives == 0) {
            ++m.skipped_no_positive;
            continue;
        }
        const GroupResult r = rank_group(group, scores, labels, ties, positives);
        m.map += r.average_precision;
        m.mrr += r.reciprocal_rank;
        m.average_precision.push_back(r.average_precision);
        ++m.questions;
    }
    if (m.questions > 0) {
        m.map /= static_cast<double>(m.questions);
        m.mrr /= static_cast<double>(m.questions);
    }
    return m;
}

PairedInterval paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t seed) {
    if (a.size() != b.size() || a.empty()) throw UserError("paired_bootstrap: two series of one non-zero length");
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> pick(0, a.size() - 1);
    std::vector<double> means(2000);
    for (auto& m : means) {
        for (std::size_t i = 0; i < a.size(); ++i) {
            const std::size_t k = pick(rng);
            m += a[k] - b[k];
        }
        m /= static_cast<double>(a.size());
    }
    std::sort(means.begin(), means.end());
    double mean = 0;
    for (std::size_t i = 0; i < a.size(); ++i) mean += (a[i] - b[i]) / static_cast<double>(a.size());
    return {mean, means[50], means[1949]};
}

double significant_weight(const std::vector<std::size_t>& groups, const std::vector<int>& labels,
                          const std::vector<double>& a, const std::vector<double>& b,
                          const std::vector<double>& candidates) {
    if (b.size() != a.size())
        throw UserError("significant_weight: " + std::to_string(a.size()) + " first scores but " +
                        std::to_string(b.size()) + " second scores");
    const std::vector<double> alone = ranking_metrics(groups, a, labels).average_precision;
    if (alone.empty()) return 0;  // no group with a true candidate: nothing to judge by
    double best_gain = 0, weight = 0;
    for (double w : candidates) {
        std::vector<double> s = a;
        for (std::size_t i = 0; i < s.size(); ++i) s[i] += w * b[i];
        const PairedInterval d = paired_bootstrap(ranking_metrics(groups, s, labels).average_precision, alone);
        if (d.low > 0 && d.mean > best_gain) best_gain = d.mean, weight = w;
    }
    return weight;
}

}  // namespace loom
