// Question / answer / label TSV reader (SelQA layout), and the real SelQA dev split when present.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/data_metrics.hpp"
#include "core/data_qa.hpp"
#include "core/errors.hpp"

using namespace loom;

namespace {

struct TempFile {
    std::filesystem::path path;
    TempFile(const std::string& name, const std::string& text)
        : path(std::filesystem::temp_directory_path() / ("loom_test_data_qa_" + name)) {
        std::ofstream(path, std::ios::binary) << text;
    }
    ~TempFile() { std::filesystem::remove(path); }
};

void expect_error(const std::string& text, std::size_t line, const std::string& reason) {
    TempFile file("bad.tsv", text);
    const std::string where = file.path.string() + ":" + std::to_string(line) + ":";
    try {
        read_qa_tsv(file.path.string());
        FAIL("no DataError for: " << text);
    } catch (const DataError& e) {
        const std::string msg = e.what();
        CHECK_MESSAGE(msg.find(where) != std::string::npos, msg);
        CHECK_MESSAGE(msg.find(reason) != std::string::npos, msg);
    }
}

using Tokens = std::vector<std::string>;

}  // namespace

TEST_CASE("qa tsv: pairs and labels and groups and lowercasing") {
    TempFile file("small.tsv",
                  "Who wrote Hamlet ?\tHamlet was written by Shakespeare .\t1\n"
                  "Who wrote Hamlet ?\tIt is set in Denmark .\t0\n"
                  "Where is Paris ?\tParis  is in France .\t1\r\n"
                  "\n"
                  "Who wrote Hamlet ?\tThe play is long .\t0\n");
    const QaData data = read_qa_tsv(file.path.string());
    REQUIRE(data.pairs.size() == 4);
    CHECK(data.num_groups == 2);
    CHECK(data.num_positives() == 2);
    CHECK(data.pairs[0].question == Tokens{"who", "wrote", "hamlet", "?"});
    CHECK(data.pairs[0].answer == Tokens{"hamlet", "was", "written", "by", "shakespeare", "."});
    CHECK(data.pairs[2].answer == Tokens{"paris", "is", "in", "france", "."});  // double space, CRLF
    CHECK(data.groups() == std::vector<std::size_t>{0, 0, 1, 0});               // a repeated question keeps its group
    CHECK(data.labels() == std::vector<int>{1, 0, 1, 0});
    CHECK(data.pairs[3].line == 5);
    const std::vector<ItemLengths> lengths = data.lengths();
    CHECK(lengths[1].question == 4);
    CHECK(lengths[1].answer == 6);
    // Each question once, then every answer: 2 questions + 4 answers.
    CHECK(data.token_lists().size() == 6);

    std::istringstream in("Who Wrote ?\tIt WAS me\t1\n");
    const QaData cased = parse_qa_tsv(in, "mem", QaReadOptions{.lowercase = false});
    CHECK(cased.pairs[0].question == Tokens{"Who", "Wrote", "?"});
    CHECK(cased.pairs[0].answer == Tokens{"It", "WAS", "me"});
}

TEST_CASE("qa tsv: malformed rows name file / line and reason") {
    expect_error("q ?\ta .\t1\nq ?\ta .\n", 2, "expected 3 tab-separated columns");
    expect_error("q ?\ta .\t1\t0\n", 1, "found 4");
    expect_error("q ?\ta .\t1\nq ?\tb .\t2\n", 2, "label must be 0 or 1, found '2'");
    expect_error("q ?\ta .\tyes\n", 1, "label must be 0 or 1");
    expect_error("q ?\ta .\t\n", 1, "label must be 0 or 1");
    expect_error("q ?\ta .\t1\n \ta .\t0\n", 2, "empty question");
    expect_error("q ?\t  \t0\n", 1, "empty answer");
    CHECK_THROWS_WITH_AS(read_qa_tsv("/nonexistent/qa.tsv"), doctest::Contains("/nonexistent/qa.tsv"), DataError);
}
