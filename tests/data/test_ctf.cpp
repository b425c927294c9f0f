// CNTK Text Format reader: sequences by id, per-stream lengths, dense and sparse samples,
// comments, errors that name file:line, and streams as minibatch Values.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <xtensor/xmath.hpp>

#include "core/errors.hpp"
#include "data/ctf.hpp"

#include "test_support.hpp"

using namespace loom;
using loom::testing::TempFile;

namespace {

const std::vector<CtfStreamConfig> qa_streams = {{"q", 3, false}, {"a", 10, true}};

// Parses `text`, expects a DataError whose message holds "name:line:" and `reason`.
void expect_error(const std::string& text, std::size_t line, const std::string& reason,
                  const std::vector<CtfStreamConfig>& streams = qa_streams) {
    TempFile file("bad.ctf", text);
    const std::string where = file.path.string() + ":" + std::to_string(line) + ":";
    try {
        read_ctf(file.path.string(), streams);
        FAIL("no DataError for: " << text);
    } catch (const DataError& e) {
        const std::string msg = e.what();
        CHECK_MESSAGE(msg.find(where) != std::string::npos, msg);
        CHECK_MESSAGE(msg.find(reason) != std::string::npos, msg);
    }
}

// {{1}, {2}} is ambiguous to xtensor's initializer-list constructors; build columns explicitly.
xt::xarray<float> column(const std::vector<float>& values) {
    xt::xarray<float> out = xt::zeros<float>({values.size(), std::size_t{1}});
    for (std::size_t i = 0; i < values.size(); ++i) out(i, 0) = values[i];
    return out;
}

}  // namespace

TEST_CASE("ctf: consecutive lines with one id form a sequence / each stream has its own length") {
    TempFile file("seq.ctf",
                  "0 |q 1 2 3 |a 4:1\n"
                  "0 |q 4 5 6\n"
                  "0 |a 7:0.5 2:2\n"
                  "0 |a 9:1\n"
                  "\n"
                  "5\t|a 0:1\t|q -1 +2.5 3e-1\n");
    const CtfData data = read_ctf(file.path.string(), qa_streams);
    REQUIRE(data.size() == 2);
    CHECK(data.sequences[0].id == 0);
    CHECK(data.sequences[0].first_line == 1);
    CHECK(data.sequences[1].id == 5);
    CHECK(data.sequences[1].first_line == 6);
    CHECK(data.sequences[0].streams[0].length == 2);
    CHECK(data.sequences[0].streams[1].length == 3);

    const xt::xarray<float> q0 = data.dense(0, "q");
    const xt::xarray<float> q0_expected = {{1, 2, 3}, {4, 5, 6}};
    CHECK(q0 == q0_expected);

    const xt::xarray<float> a0 = data.dense(0, "a");
    REQUIRE(a0.shape() == std::vector<std::size_t>{3, 10});
    CHECK(a0(0, 4) == 1.0f);
    CHECK(a0(1, 7) == 0.5f);
    CHECK(a0(1, 2) == 2.0f);
    CHECK(a0(2, 9) == 1.0f);
    CHECK(xt::sum(a0)() == doctest::Approx(4.5));

    const xt::xarray<float> q1 = data.dense(1, "q");
    const xt::xarray<float> q1_expected = {{-1.0f, 2.5f, 0.3f}};
    CHECK(q1 == q1_expected);
    CHECK(data.indices(1, "a") == std::vector<std::size_t>{0});
}

TEST_CASE("ctf: lines without an id are sequences of their own") {
    std::istringstream in("|q 1 1 1\n|q 2 2 2\n7 |q 3 3 3\n7 |q 4 4 4\n|q 5 5 5\n");
    const CtfData data = parse_ctf(in, "inline", qa_streams);
    REQUIRE(data.size() == 4);
    CHECK(data.sequences[0].streams[0].length == 1);
    CHECK(data.sequences[0].id == 1);  // the line number stands in for the id, as in CNTK
    CHECK(data.sequences[1].id == 2);
    CHECK(data.sequences[2].streams[0].length == 2);
    CHECK(data.sequences[3].streams[0].length == 1);
    CHECK(data.sequences[3].first_line == 5);
    // a stream absent from a sequence has length 0
    CHECK(data.dense(0, "a").shape() == std::vector<std::size_t>{0, 10});
}

TEST_CASE("ctf: an id that changes and comes back starts a new sequence") {
    std::istringstream in("1 |q 1 1 1\n2 |q 2 2 2\n1 |q 3 3 3\n");
    const CtfData data = parse_ctf(in, "inline", qa_streams);
    REQUIRE(data.size() == 3);
    CHECK(data.sequences[2].id == 1);
}

TEST_CASE("ctf: comments run to the end of the line or the next unescaped pipe") {
    std::istringstream in(
        "|# a whole-line comment | with a pipe? no: this pipe ends it |q 1 2 3\n"
        "3 |q 1 2 3 |# the answer follows |a 1:1\n"
        "3 |# escaped |# pipe stays in the comment |a 2:1 |# trailing\n"
        "|# only a comment\n");
    // The pipe before " with" is unescaped: it ends the comment and is followed by no input name.
    CHECK_THROWS_AS(parse_ctf(in, "inline", qa_streams), DataError);

    std::istringstream good(
        "|# a whole-line comment |q 1 2 3\n"
        "3 |q 1 2 3 |# the answer follows |a 1:1\n"
        "3 |# escaped |# pipe stays in the comment |a 2:1 |# trailing\n"
        "|# only a comment\n");
    const CtfData data = parse_ctf(good, "inline", qa_streams);
    REQUIRE(data.size() == 2);
    CHECK(data.sequences[0].streams[0].length == 1);
    CHECK(data.sequences[0].streams[1].length == 0);
    CHECK(data.sequences[1].streams[0].length == 1);
    CHECK(data.indices(1, "a") == std::vector<std::size_t>{1, 2});
}

TEST_CASE("ctf: windows line endings read the same") {
    std::istringstream in("0 |q 1 2 3\r\n0 |a 3:1\r\n");
    const CtfData data = parse_ctf(in, "inline", qa_streams);
    REQUIRE(data.size() == 1);
    CHECK(data.indices(0, "a") == std::vector<std::size_t>{3});
}

TEST_CASE("ctf: malformed input names file and line and the reason") {
    expect_error("0 |q 1 2 3\n0 |x 1 2 3\n", 2, "unknown input stream 'x'");
    expect_error("0 |q 1 2 3\n1 |q 1 2\n", 2, "dense with dim 3 but this sample has 2 values");
    expect_error("0 |q 1 2 3 4\n", 1, "has 4 values");
    expect_error("0 |q 1 2 3\n\n0 |a 10:1\n", 3, "index 10 of input 'a' is out of range: its dim is 10");
    expect_error("0 |q 1 two 3\n", 1, "value 'two' of input 'q' is not a number");
    expect_error("0 |q 1 nan 3\n", 1, "value 'nan' of input 'q' is not finite");
    expect_error("0 |a 3:x\n", 1, "value 'x' of input 'a' is not a number");
    expect_error("0 |a -3:1\n", 1, "index '-3' of input 'a' is not a non-negative integer");
    expect_error("0 |a 3\n", 1, "expects index:value entries");
    expect_error("0 |a 3:1 3:2\n", 1, "index 3 appears twice");
    expect_error("0 |q 1 2 3\n0 |a\n", 2, "input 'a' has an empty sample");
    expect_error("0 |q   |a 1:1\n", 1, "input 'q' has an empty sample");
    expect_error("0 |q 1 2 3 |q 4 5 6\n", 1, "appears twice on one line");
    expect_error("x1 |q 1 2 3\n", 1, "sequence id 'x1' is not a non-negative integer");
    expect_error("4\n", 1, "not followed by any |input sample");
    expect_error("0 | 1 2 3\n", 1, "'|' is not followed by an input name");
}

TEST_CASE("ctf: indices need one entry per sample / configuration errors are UserErrors") {
    std::istringstream in("0 |a 1:1 2:1\n");
    const CtfData data = parse_ctf(in, "mem.ctf", qa_streams);
    CHECK_THROWS_WITH_AS(data.indices(0, "a"), doctest::Contains("mem.ctf:1:"), DataError);
    CHECK_THROWS_AS(data.indices(0, "q"), UserError);
    CHECK_THROWS_AS(data.dense(0, "nope"), UserError);
    CHECK_THROWS_AS(data.dense(3, "q"), UserError);

    std::istringstream empty("");
    CHECK_THROWS_AS(parse_ctf(empty, "x", {}), UserError);
    CHECK_THROWS_AS(parse_ctf(empty, "x", {{"q", 0, false}}), UserError);
    CHECK_THROWS_AS(parse_ctf(empty, "x", {{"q", 2, false}, {"q", 3, true}}), UserError);
    CHECK_THROWS_AS(parse_ctf(empty, "x", {{"a b", 2, false}}), UserError);
    CHECK_THROWS_WITH_AS(read_ctf("/nonexistent/loom.ctf", qa_streams), doctest::Contains("/nonexistent/loom.ctf"),
                         DataError);
}

TEST_CASE("ctf: values below the float range read as zero / above it are named too large") {
    std::istringstream in("0 |q 1e-50 -1e-50 1.5e-45\n");
    const CtfData data = parse_ctf(in, "mem.ctf", qa_streams);
    const xt::xarray<float> q = data.dense(0, "q");
    CHECK(q(0, 0) == 0.0f);
    CHECK(q(0, 1) == 0.0f);
    CHECK(std::signbit(q(0, 1)));
    // 1.5e-45 is nearest to the smallest subnormal float, 2^-149.
    CHECK(q(0, 2) == std::ldexp(1.0f, -149));
    expect_error("0 |q 1 1e50 3\n", 1, "value '1e50' of input 'q' is too large for a 32-bit float");
    expect_error("0 |a 2:-4e38\n", 1, "value '-4e38' of input 'a' is too large");
    expect_error("0 |q 1 inf 3\n", 1, "value 'inf' of input 'q' is not finite");
    expect_error("0 |q 1 +-2 3\n", 1, "value '+-2' of input 'q' is not a number");
}

TEST_CASE("ctf: huge indices and ids are out of range rather than not numbers") {
    expect_error("0 |a 99999999999999999999999:1\n", 1, "index '99999999999999999999999' of input 'a' is out of range");
    expect_error("0 |a 18446744073709551615:1\n", 1, "index 18446744073709551615 of input 'a' is out of range");
    expect_error("99999999999999999999999 |q 1 2 3\n", 1, "sequence id '99999999999999999999999' is too large");
    std::istringstream in("18446744073709551615 |q 1 2 3\n");
    CHECK(parse_ctf(in, "mem.ctf", qa_streams).sequences.at(0).id == 18446744073709551615ull);
}

TEST_CASE("ctf: a byte-order mark is dropped / NUL bytes and directories are named") {
    std::istringstream in(
        "\xEF\xBB\xBF"
        "7 |q 1 2 3\n7 |a 4:1\n");
    const CtfData data = parse_ctf(in, "mem.ctf", qa_streams);
    REQUIRE(data.size() == 1);
    CHECK(data.sequences[0].id == 7);
    // Only at the start of the file: elsewhere the mark is text that is not a number.
    expect_error(
        "7 |q 1 2 3\n\xEF\xBB\xBF"
        "8 |q 1 2 3\n",
        2, "is not a non-negative integer");
    expect_error(std::string("0 |q 1 2 3 |# note") + '\0' + "\n", 1, "NUL byte at column 19");
    CHECK_THROWS_WITH_AS(read_ctf(std::filesystem::temp_directory_path().string(), qa_streams),
                         doctest::Contains("is a directory"), DataError);
}

TEST_CASE("ctf: control bytes of a bad token are escaped in the message") {
    // An ANSI escape sequence (clear the screen) inside a value: shown as \x1b, never sent raw.
    expect_error("0 |q 1 \x1b[2J 3\n", 1, "value '\\x1b[2J' of input 'q' is not a number");
    expect_error("\x1b[31m |q 1\n", 1, "sequence id '\\x1b[31m' is not a non-negative integer");
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
