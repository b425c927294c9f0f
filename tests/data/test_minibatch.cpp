// From read data to graph Values: QA pairs as token-id sequences with labels, CTF streams.
#include <doctest/doctest.h>

#include <sstream>

#include "core/errors.hpp"
#include "data/minibatch.hpp"

using namespace loom;

namespace {

// {{1}, {2}} is ambiguous to xtensor's initializer-list constructors; build columns explicitly.
xt::xarray<float> column(const std::vector<float>& values) {
    xt::xarray<float> out = xt::zeros<float>({values.size(), std::size_t{1}});
    for (std::size_t i = 0; i < values.size(); ++i) out(i, 0) = values[i];
    return out;
}

}  // namespace

TEST_CASE("minibatch: QA pairs become id sequences of their own lengths / labels a N x 1 batch") {
    std::istringstream in(
        "who wrote hamlet ?\tshakespeare wrote hamlet .\t1\n"
        "who wrote hamlet ?\tit is long .\t0\n"
        "where is paris ?\tin france .\t1\n");
    const QaData data = parse_qa_tsv(in, "mem.tsv");
    const Vocabulary vocab = Vocabulary::build({{"hamlet", "hamlet", "wrote"}, {"paris"}});
    // ids: <pad> 0, <unk> 1, hamlet 2, paris 3, wrote 4
    const QaMinibatch batch = make_qa_minibatch(data, vocab, {2, 0});
    CHECK(batch.items == std::vector<std::size_t>{2, 0});
    REQUIRE(batch.questions.num_items() == 2);
    CHECK(batch.questions.layout().lengths() == std::vector<std::size_t>{4, 4});
    CHECK(batch.answers.layout().lengths() == std::vector<std::size_t>{3, 4});
    const xt::xarray<float> q0 = batch.questions.sequence(0);
    const xt::xarray<float> q0_expected = column({1, 1, 3, 1});  // where is paris ?
    CHECK(q0 == q0_expected);
    const xt::xarray<float> a1 = batch.answers.sequence(1);
    const xt::xarray<float> a1_expected = column({1, 4, 2, 1});  // shakespeare wrote hamlet .
    CHECK(a1 == a1_expected);
    const xt::xarray<float> labels = batch.labels.batch();
    const xt::xarray<float> labels_expected = column({1, 1});
    CHECK(labels == labels_expected);

    CHECK_THROWS_AS(make_qa_minibatch(data, vocab, {}), UserError);
    CHECK_THROWS_AS(make_qa_minibatch(data, vocab, {3}), UserError);
}

TEST_CASE("minibatch: CTF streams as dense sequences or token ids") {
    std::istringstream in(
        "0 |x 1 2 |w 3:1\n"
        "0 |x 3 4 |w 0:1\n"
        "1 |x 5 6\n"
        "2 |w 1:1\n");
    const CtfData data = parse_ctf(in, "mem.ctf", {{"x", 2, false}, {"w", 4, true}});
    const Value x = make_ctf_minibatch(data, "x", {1, 0});
    CHECK(x.layout().lengths() == std::vector<std::size_t>{1, 2});
    const xt::xarray<float> x1 = x.sequence(1);
    const xt::xarray<float> x1_expected = {{1, 2}, {3, 4}};
    CHECK(x1 == x1_expected);

    const Value w = make_ctf_minibatch(data, "w", {0, 2}, true);
    const xt::xarray<float> w0 = w.sequence(0);
    const xt::xarray<float> w0_expected = column({3, 0});
    CHECK(w0 == w0_expected);
    const Value w_dense = make_ctf_minibatch(data, "w", {2});
    const xt::xarray<float> w2_expected = {{0, 1, 0, 0}};
    CHECK(w_dense.sequence(0) == w2_expected);

    // sequence 1 (line 3) has no "w" sample: an empty graph sequence is refused, naming the line
    CHECK_THROWS_WITH_AS(make_ctf_minibatch(data, "w", {1}), doctest::Contains("mem.ctf:3:"), DataError);
    CHECK_THROWS_AS(make_ctf_minibatch(data, "w", {}), UserError);
    CHECK_THROWS_AS(make_ctf_minibatch(data, "w", {5}), UserError);
}
