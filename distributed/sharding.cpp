#include "distributed/sharding.hpp"

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

ShardedBatcher::ShardedBatcher(Batcher global, std::shared_ptr<DataParallel> parallel)
    : batcher_(std::move(global)), parallel_(std::move(parallel)) {
    if (!parallel_) throw UserError("loom::distributed::ShardedBatcher: no DataParallel given");
}

std::vector<std::size_t> ShardedBatcher::next() {
    global_batch_ = batcher_.next();
    const Context& context = parallel_->context();
    std::vector<std::size_t> share = share_of(global_batch_, context.rank(), context.size());
    parallel_->set_stand_in(share.empty());
    if (share.empty()) share.push_back(global_batch_.front());
    return share;
}

}  // namespace loom::distributed
