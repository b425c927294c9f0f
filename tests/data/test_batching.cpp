// Batcher: coverage, length sorting within windows, seeded determinism, resumable positions.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "core/errors.hpp"
#include "data/batching.hpp"

using namespace loom;

namespace {

using Batches = std::vector<std::vector<std::size_t>>;

std::vector<ItemLengths> random_lengths(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<ItemLengths> lengths(n);
    for (auto& l : lengths) l = {1 + rng() % 20, 1 + rng() % 60};
    return lengths;
}

std::size_t total_padded(const Batcher& b, const Batches& batches) {
    std::size_t total = 0;
    for (const auto& batch : batches) total += b.padded_size(batch);
    return total;
}

}  // namespace

TEST_CASE("batching: without shuffling / windows are sorted by answer then question length") {
    // answer lengths 5 1 4 2 3 6 -> sorted item order 1 3 4 2 0 5
    const std::vector<ItemLengths> lengths = {{1, 5}, {1, 1}, {1, 4}, {1, 2}, {1, 3}, {1, 6}};
    Batcher sorted(lengths, {.batch_size = 2, .sort_window = 10, .shuffle = false});
    CHECK(sorted.epoch_batches(0) == Batches{{1, 3}, {4, 2}, {0, 5}});
    CHECK(sorted.padded_size({1, 3}) == (1 + 2) * 2);

    Batcher plain(lengths, {.batch_size = 2, .sort_window = 0, .shuffle = false});
    CHECK(plain.epoch_batches(0) == Batches{{0, 1}, {2, 3}, {4, 5}});

    // Windows of one batch (2 items) sort only inside each batch.
    Batcher per_batch(lengths, {.batch_size = 2, .sort_window = 1, .shuffle = false});
    CHECK(per_batch.epoch_batches(0) == Batches{{1, 0}, {3, 2}, {4, 5}});

    // Equal answer lengths fall back to the question length.
    Batcher tie({{9, 2}, {3, 2}, {5, 1}}, {.batch_size = 3, .sort_window = 1, .shuffle = false});
    CHECK(tie.epoch_batches(0) == Batches{{2, 1, 0}});
}

TEST_CASE("batching: every item once per epoch / last batch smaller or dropped") {
    const auto lengths = random_lengths(103, 7);
    for (bool drop_last : {false, true}) {
        Batcher b(lengths, {.batch_size = 10, .sort_window = 3, .shuffle = true, .seed = 42, .drop_last = drop_last});
        const Batches batches = b.epoch_batches(3);
        CHECK(batches.size() == (drop_last ? 10u : 11u));
        CHECK(b.batches_per_epoch() == batches.size());
        std::vector<std::size_t> seen;
        std::size_t small = 0;
        for (const auto& batch : batches) {
            CHECK(batch.size() <= 10);
            small += batch.size() < 10 ? 1 : 0;
            seen.insert(seen.end(), batch.begin(), batch.end());
        }
        std::sort(seen.begin(), seen.end());
        CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
        CHECK(seen.size() == (drop_last ? 100u : 103u));
        CHECK(small == (drop_last ? 0u : 1u));
    }
}

TEST_CASE("batching: sorting within windows reduces padding") {
    const auto lengths = random_lengths(2000, 3);
    Batcher unsorted(lengths, {.batch_size = 16, .sort_window = 0, .shuffle = true, .seed = 5});
    Batcher sorted(lengths, {.batch_size = 16, .sort_window = 20, .shuffle = true, .seed = 5});
    const std::size_t real = [&] {
        std::size_t n = 0;
        for (const auto& l : lengths) n += l.question + l.answer;
        return n;
    }();
    const std::size_t pad_unsorted = total_padded(unsorted, unsorted.epoch_batches(0)) - real;
    const std::size_t pad_sorted = total_padded(sorted, sorted.epoch_batches(0)) - real;
    MESSAGE("padding cells: unsorted " << pad_unsorted << ", sorted in windows of 20 batches " << pad_sorted);
    CHECK(pad_sorted * 2 < pad_unsorted);
}

TEST_CASE("batching: deterministic for a seed / different across epochs and seeds") {
    const auto lengths = random_lengths(200, 11);
    const BatchingOptions options{.batch_size = 8, .sort_window = 4, .shuffle = true, .seed = 123};
    Batcher a(lengths, options), b(lengths, options);
    CHECK(a.epoch_batches(0) == b.epoch_batches(0));
    CHECK(a.epoch_batches(5) == b.epoch_batches(5));
    CHECK(a.epoch_batches(0) != a.epoch_batches(1));
    BatchingOptions other = options;
    other.seed = 124;
    CHECK(Batcher(lengths, other).epoch_batches(0) != a.epoch_batches(0));
}

TEST_CASE("batching: a saved position resumes the same batch stream") {
    const auto lengths = random_lengths(50, 13);
    const BatchingOptions options{.batch_size = 8, .sort_window = 2, .shuffle = true, .seed = 9};
    Batcher original(lengths, options);
    REQUIRE(original.batches_per_epoch() == 7);
    for (int i = 0; i < 10; ++i) original.next();  // crosses into epoch 1
    CHECK(original.position() == DataPosition{1, 3});
    const std::string saved = original.position().to_string();
    CHECK(saved == "1 3");

    Batcher resumed(lengths, options);
    resumed.set_position(DataPosition::parse(saved));
    for (int i = 0; i < 12; ++i) CHECK(resumed.next() == original.next());
    CHECK(resumed.position() == original.position());

    // Position k of epoch e is the k-th batch of epoch_batches(e).
    Batcher fresh(lengths, options);
    fresh.set_position({2, 6});
    CHECK(fresh.next() == fresh.epoch_batches(2)[6]);
    CHECK(fresh.position() == DataPosition{3, 0});
}

TEST_CASE("batching: bad arguments") {
    const auto lengths = random_lengths(5, 1);
    CHECK_THROWS_AS(Batcher(lengths, {.batch_size = 0}), UserError);
    CHECK_THROWS_AS(Batcher({}, {.batch_size = 2}), UserError);
    CHECK_THROWS_AS(Batcher(lengths, {.batch_size = 8, .drop_last = true}), UserError);
    Batcher b(lengths, {.batch_size = 2});
    CHECK_THROWS_AS(b.set_position({0, 3}), UserError);
    CHECK_THROWS_AS(b.padded_size({7}), UserError);
    CHECK_THROWS_AS(DataPosition::parse("1"), DataError);
    CHECK_THROWS_AS(DataPosition::parse("1 -2"), DataError);
    CHECK_THROWS_AS(DataPosition::parse("1 2 3"), DataError);
    CHECK(DataPosition::parse(" 4 5 ") == DataPosition{4, 5});
}
