#include "distributed/sharding.hpp"

#include <cmath>

#include "core/errors.hpp"

namespace loom::distributed {

std::vector<std::size_t> share_of(const std::vector<std::size_t>& global, int rank, int size) {
    if (size <= 0 || rank < 0 || rank >= size)
        throw UserError("loom::distributed::share_of: rank " + std::to_string(rank) + " is not one of " +
                        std::to_string(size) + " processes");
    const std::size_t n = global.size(), r = static_cast<std::size_t>(rank), p = static_cast<std::size_t>(size);
    const auto begin = global.begin() + static_cast<std::ptrdiff_t>(n * r / p);
    const auto end = global.begin() + static_cast<std::ptrdiff_t>(n * (r + 1) / p);
    return {begin, end};
}

std::vector<std::size_t> share_by_cost(const std::vector<std::size_t>& global, const std::vector<double>& costs,
                                       int rank, int size) {
    if (size <= 0 || rank < 0 || rank >= size)
        throw UserError("loom::distributed::share_by_cost: rank " + std::to_string(rank) + " is not one of " +
                        std::to_string(size) + " processes");
    if (costs.size() != global.size())
        throw UserError("loom::distributed::share_by_cost: " + std::to_string(costs.size()) + " costs for " +
                        std::to_string(global.size()) + " items");
    const std::size_t n = global.size(), p = static_cast<std::size_t>(size);
    std::vector<double> before(n + 1, 0.0);  // before[i]: the cost of items [0, i)
    for (std::size_t i = 0; i < n; ++i) {
        if (!(costs[i] >= 0.0) || !std::isfinite(costs[i]))
            throw UserError("loom::distributed::share_by_cost: item " + std::to_string(i) + " costs " +
                            std::to_string(costs[i]) + "; costs must be finite and at least 0");
        before[i + 1] = before[i] + costs[i];
    }
    // Cut c (1 <= c < p) at the boundary nearest c / p of the total, after cut c - 1 and leaving an
    // item for each later part; with fewer items than parts, as share_of cuts.
    auto cut = [&](std::size_t c) {
        if (n < p) return n * c / p;
        std::size_t at = 0;
        for (std::size_t k = 1; k <= c; ++k) {
            const double target = before[n] * static_cast<double>(k) / static_cast<double>(p);
            const std::size_t lo = at + 1, hi = n - (p - k);
            std::size_t best = lo;
            for (std::size_t i = lo + 1; i <= hi; ++i)
                if (std::abs(before[i] - target) < std::abs(before[best] - target)) best = i;
            at = best;
        }
        return at;
    };
    const std::size_t r = static_cast<std::size_t>(rank);
    const std::size_t begin = r == 0 ? 0 : cut(r), end = r + 1 == p ? n : cut(r + 1);
    return {global.begin() + static_cast<std::ptrdiff_t>(begin), global.begin() + static_cast<std::ptrdiff_t>(end)};
}

ShardedBatcher::ShardedBatcher(Batcher global, std::shared_ptr<DataParallel> parallel, bool by_tokens)
    : batcher_(std::move(global)), parallel_(std::move(parallel)), by_tokens_(by_tokens) {
    if (!parallel_) throw UserError("loom::distributed::ShardedBatcher: no DataParallel given");
}

std::vector<std::size_t> ShardedBatcher::next() {
    global_batch_ = batcher_.next();
    const Context& context = parallel_->context();
    std::vector<double> tokens;
    if (by_tokens_)
        for (std::size_t i : global_batch_) {
            const ItemLengths& l = batcher_.lengths(i);
            tokens.push_back(static_cast<double>(l.question + l.answer));
        }
    std::vector<std::size_t> share = by_tokens_ ? share_by_cost(global_batch_, tokens, context.rank(), context.size())
                                                : share_of(global_batch_, context.rank(), context.size());
    parallel_->set_stand_in(share.empty());
    if (share.empty()) share.push_back(global_batch_.front());
    return share;
}

}  // namespace loom::distributed
