#include "data/batching.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <sstream>

#include "core/errors.hpp"

namespace loom {

namespace {

// SplitMix64 finalizer: spreads (seed, epoch) so neighbouring epochs get unrelated streams.
std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Modulo bias is at most n / 2^64: irrelevant for data sets that fit in memory.
template <class T>
void fisher_yates(std::vector<T>& v, std::mt19937_64& rng) {
    for (std::size_t i = v.size(); i > 1; --i) {
        const std::size_t j = static_cast<std::size_t>(rng() % i);
        std::swap(v[i - 1], v[j]);
    }
}

}  // namespace

std::string DataPosition::to_string() const { return std::to_string(epoch) + " " + std::to_string(batch); }

DataPosition DataPosition::parse(const std::string& text) {
    std::istringstream in(text);
    DataPosition p;
    long long epoch = -1, batch = -1;
    std::string extra;
    if (!(in >> epoch >> batch) || epoch < 0 || batch < 0 || (in >> extra))
        throw DataError("data position '" + text + "' is not 'epoch batch' (two non-negative integers)");
    p.epoch = static_cast<std::size_t>(epoch);
    p.batch = static_cast<std::size_t>(batch);
    return p;
}

Batcher::Batcher(std::vector<ItemLengths> lengths, BatchingOptions options)
    : lengths_(std::move(lengths)), options_(options) {
    if (options_.batch_size == 0) throw UserError("Batcher: batch_size must be at least 1");
    if (lengths_.empty()) throw UserError("Batcher: no items to batch");
    if (batches_per_epoch() == 0)
        throw UserError("Batcher: " + std::to_string(lengths_.size()) + " items and drop_last with batch_size " +
                        std::to_string(options_.batch_size) + " leave no batch; lower batch_size");
    cached_batches_ = epoch_batches(0);
}

std::size_t Batcher::batches_per_epoch() const {
    const std::size_t n = lengths_.size(), b = options_.batch_size;
    return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<std::vector<std::size_t>> Batcher::epoch_batches(std::size_t epoch) const {
    std::mt19937_64 rng(mix(options_.seed ^ mix(epoch)));
    std::vector<std::size_t> order(lengths_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (options_.shuffle) fisher_yates(order, rng);

    const std::size_t b = options_.batch_size;
    if (options_.sort_window > 0) {
        const std::size_t window = options_.sort_window * b;
        for (std::size_t begin = 0; begin < order.size(); begin += window) {
            const auto first = order.begin() + static_cast<std::ptrdiff_t>(begin);
            const auto last = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), begin + window));
            std::stable_sort(first, last, [this](std::size_t x, std::size_t y) {
                const ItemLengths& a = lengths_[x];
                const ItemLengths& c = lengths_[y];
                return a.answer != c.answer ? a.answer < c.answer : a.question < c.question;
            });
        }
    }

    std::vector<std::vector<std::size_t>> batches;
    for (std::size_t begin = 0; begin < order.size(); begin += b) {
        const std::size_t end = std::min(order.size(), begin + b);
        if (options_.drop_last && end - begin < b) break;
        batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(begin),
                             order.begin() + static_cast<std::ptrdiff_t>(end));
    }
    if (options_.shuffle) fisher_yates(batches, rng);
    return batches;
}

std::vector<std::size_t> Batcher::next() {
    if (cached_epoch_ != position_.epoch) {
        cached_batches_ = epoch_batches(position_.epoch);
        cached_epoch_ = position_.epoch;
    }
    std::vector<std::size_t> batch = cached_batches_[position_.batch];
    if (++position_.batch == cached_batches_.size()) {
        position_.batch = 0;
        ++position_.epoch;
    }
    return batch;
}

void Batcher::set_position(const DataPosition& position) {
    if (position.batch >= batches_per_epoch())
        throw UserError("Batcher: data position batch " + std::to_string(position.batch) + " is past the " +
                        std::to_string(batches_per_epoch()) +
                        " batches of an epoch (was it saved with another batch size or data set?)");
    position_ = position;
}

std::size_t Batcher::padded_size(const std::vector<std::size_t>& batch) const {
    std::size_t longest_q = 0, longest_a = 0;
    for (std::size_t i : batch) {
        if (i >= lengths_.size())
            throw UserError("Batcher: item " + std::to_string(i) + " out of range (" + std::to_string(lengths_.size()) +
                            " items)");
        longest_q = std::max(longest_q, lengths_[i].question);
        longest_a = std::max(longest_a, lengths_[i].answer);
    }
    return (longest_q + longest_a) * batch.size();
}

}  // namespace loom
