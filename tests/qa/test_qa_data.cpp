// Question / answer / label TSV reader (SelQA layout), and QA pairs as token-id sequences with labels.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.hpp"
#include "qa/metrics.hpp"
#include "qa/qa_data.hpp"

#include "test_support.hpp"

using namespace loom;
using loom::testing::TempFile;

namespace {

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

// {{1}, {2}} is ambiguous to xtensor's initializer-list constructors; build columns explicitly.
xt::xarray<float> column(const std::vector<float>& values) {
    xt::xarray<float> out = xt::zeros<float>({values.size(), std::size_t{1}});
    for (std::size_t i = 0; i < values.size(); ++i) out(i, 0) = values[i];
    return out;
}

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
    // Ranked by scores in pair order: the Hamlet group has its true answer second of three (AP and
    // RR 1/2), Paris its only one first (1).
    const RankingMetrics r = data.rank({0.5, 0.9, 0.1, 0.2});
    CHECK(r.questions == 2);
    CHECK(r.map == doctest::Approx(0.75));
    CHECK(r.mrr == doctest::Approx(0.75));

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
    expect_error("q ?\ta .\t\n", 1, "the label (third column) is empty; it must be 0 or 1");
    expect_error("q ?\ta .\t1\n \ta .\t0\n", 2, "empty question");
    expect_error("q ?\t  \t0\n", 1, "empty answer");
    CHECK_THROWS_WITH_AS(read_qa_tsv("/nonexistent/qa.tsv"), doctest::Contains("/nonexistent/qa.tsv"), DataError);
}

TEST_CASE("qa tsv: a byte-order mark is dropped and spacing does not split a question group") {
    // The mark would otherwise be glued to the first token, so row 1's question would differ from
    // row 2's; the trailing and doubled spaces must not make new groups either.
    std::istringstream in(
        "\xEF\xBB\xBFWho wrote it ?\ta .\t1\n"
        "Who wrote it ?\tb .\t0\n"
        "Who wrote it ? \tc .\t0\n"
        "Who  wrote it ?\td .\t0\n"
        "Where ?\te .\t1\n");
    const QaData data = parse_qa_tsv(in, "mem.tsv");
    REQUIRE(data.pairs.size() == 5);
    CHECK(data.pairs[0].question == Tokens{"who", "wrote", "it", "?"});
    CHECK(data.num_groups == 2);
    CHECK(data.groups() == std::vector<std::size_t>{0, 0, 0, 0, 1});
    // Without lowercasing, case still tells two questions apart.
    std::istringstream cased_in("Who ?\ta .\t1\nwho ?\tb .\t0\n");
    CHECK(parse_qa_tsv(cased_in, "mem.tsv", QaReadOptions{.lowercase = false}).num_groups == 2);
}

TEST_CASE("qa tsv: NUL bytes and invalid UTF-8 are errors at their line and column") {
    expect_error(std::string("q ?\ta .\t1\nq ?\ta") + '\0' + "b .\t0\n", 2, "NUL byte at column 6");
    expect_error("q ?\ta .\t1\nq ?\tcaf\xE9 .\t0\n", 2, "byte 0xe9 at column 8 is not valid UTF-8");
    // UTF-16 text (here with its byte-order mark): NUL bytes from the first character on.
    expect_error(std::string("\xFF\xFEq") + '\0', 1, "NUL byte at column 4");
    // Valid multi-byte UTF-8 passes and is kept as is.
    std::istringstream in("caf\xC3\xA9 ?\t\xE2\x82\xAC 5 .\t1\n");
    const QaData data = parse_qa_tsv(in, "mem.tsv");
    CHECK(data.pairs[0].question == Tokens{"caf\xC3\xA9", "?"});
    CHECK(data.pairs[0].answer == Tokens{"\xE2\x82\xAC", "5", "."});
}

TEST_CASE("qa tsv: an empty label is named as empty / an ANSI escape in a label is escaped") {
    expect_error("q ?\ta .\t1\nq ?\tb .\t\n", 2, "the label (third column) is empty; it must be 0 or 1");
    expect_error("q ?\ta .\t\x1b[31m1\n", 1, "label must be 0 or 1, found '\\x1b[31m1'");
}

TEST_CASE("qa tsv: a file without pairs is an error / blank lines of spaces are skipped") {
    TempFile empty("empty.tsv", "");
    CHECK_THROWS_WITH_AS(read_qa_tsv(empty.path.string()), doctest::Contains("holds no question/answer pairs"),
                         DataError);
    CHECK_THROWS_WITH_AS(read_qa_tsv(empty.path.string()), doctest::Contains("the file is empty"), DataError);
    TempFile blank("blank.tsv", "\n  \n\t\n");
    CHECK_THROWS_WITH_AS(read_qa_tsv(blank.path.string()), doctest::Contains("only blank lines"), DataError);

    std::istringstream in("q ?\ta .\t1\n   \nq ?\tb .\t0\n");
    const QaData data = parse_qa_tsv(in, "mem.tsv");
    CHECK(data.pairs.size() == 2);
    CHECK(data.pairs[1].line == 3);
}

TEST_CASE("qa tsv: columns separated by spaces get a hint / a directory is named as one") {
    expect_error("q ?\ta .\t1\nq ? a . 1\n", 2, "separated by spaces instead of tabs");
    const std::string dir = std::filesystem::temp_directory_path().string();
    CHECK_THROWS_WITH_AS(read_qa_tsv(dir), doctest::Contains("is a directory"), DataError);
}

TEST_CASE("qa data: pairs by question and held-out questions") {
    // Questions a (true, wrong), b (wrong only), c (true only), d (wrong, true) in groups 0..3,
    // written interleaved: grouping must follow the group ids, not the file order.
    std::istringstream in("a ?\tx\t1\nb ?\tx\t0\na ?\ty\t0\nc ?\tx\t1\nd ?\tx\t0\nb ?\ty\t0\nd ?\ty\t1\n");
    QaData data = parse_qa_tsv(in, "mem");
    REQUIRE(data.num_groups == 4);
    CHECK(data.by_question() == std::vector<std::vector<std::size_t>>{{0, 2}, {1, 5}, {3}, {4, 6}});
    CHECK(data.by_question(true) == std::vector<std::vector<std::size_t>>{{0, 2}, {4, 6}});

    // Every 2nd question (groups 1 and 3: b and d) leaves with all its pairs, in order.
    const QaData held = data.hold_out(2);
    CHECK(held.source == "held-out questions");
    CHECK(held.num_groups == 4);
    CHECK(held.groups() == std::vector<std::size_t>{1, 3, 1, 3});
    CHECK(held.labels() == std::vector<int>{0, 0, 0, 1});
    CHECK(data.groups() == std::vector<std::size_t>{0, 0, 2});
    CHECK(data.pairs[1].answer == Tokens{"y"});
    CHECK_THROWS_AS(data.hold_out(1), UserError);
}

namespace {

// The DataError read_qa_text throws on a file holding `text`, or "accepted".
std::string raw_text_error(const std::string& text, bool labels_optional = false) {
    TempFile file("raw.tsv", text);
    try {
        read_qa_text(file.path.string(), labels_optional);
    } catch (const DataError& e) {
        const std::string msg = e.what();
        const std::string path = file.path.string() + ":";
        return msg.starts_with(path) ? msg.substr(path.size()) : msg;
    }
    return "accepted";
}

// read_qa_text on `text` throws a DataError naming the file, then `where_and_why` ("line: reason").
void expect_raw_error(const std::string& text, const std::string& where_and_why, bool labels_optional = false) {
    TempFile f("raw_bad.tsv", text);
    CAPTURE(text);
    const std::string want = f.path.string() + ":" + where_and_why;
    CHECK_THROWS_WITH_AS(read_qa_text(f.path.string(), labels_optional), doctest::Contains(want.c_str()), DataError);
}

QaData read_raw_text(const std::string& text, bool labels_optional = false) {
    TempFile file("raw.tsv", text);
    return read_qa_text(file.path.string(), labels_optional);
}

const std::string six_rows =
    "Who wrote Hamlet?\tShakespeare wrote it.\t1\n"
    "Who wrote Hamlet?\tIt is a play.\t0\n"
    "Where is Paris?\tIn France.\t1\n"
    "Where is Paris?\tOn the Seine.\t0\n"
    "What is 2+2?\tFour.\t1\n"
    "What is 2+2?\tFive.\t0\n";

}  // namespace

TEST_CASE("read_qa_text: raw pairs are tokenised and grouped by question -- a header line is skipped") {
    TempFile f("raw_header.tsv",
               "question\tsentence\tlabel\n"
               "Who wrote Hamlet?\tHamlet was written by Shakespeare.\t1\n"
               "Where is Paris?\tParis is in France.\t1\r\n"
               "\n"
               "who wrote hamlet?\tIt's a play.\t0\n");
    const QaData d = read_qa_text(f.path.string());
    REQUIRE(d.pairs.size() == 3);
    CHECK(d.num_groups == 2);
    CHECK(d.pairs[0].question == std::vector<std::string>{"who", "wrote", "hamlet", "?"});
    CHECK(d.pairs[1].answer == std::vector<std::string>{"paris", "is", "in", "france", "."});  // no '\r'
    CHECK(d.pairs[2].answer == std::vector<std::string>{"it", "'s", "a", "play", "."});
    CHECK(d.pairs[2].group == d.pairs[0].group);  // same question, other case
    CHECK(d.pairs[2].line == 5);
    CHECK(d.labels() == std::vector<int>{1, 1, 0});
}

TEST_CASE("read_qa_text: spacing around or inside a question does not split its group") {
    TempFile f("raw_spacing.tsv",
               "Who wrote Hamlet?\tShakespeare did.\t1\n"
               "Who wrote Hamlet? \tMarlowe did.\t0\n"
               " Who  wrote Hamlet?\tBacon did.\t0\n");
    const QaData d = read_qa_text(f.path.string());
    CHECK(d.num_groups == 1);
    CHECK(d.groups() == std::vector<std::size_t>{0, 0, 0});
}

TEST_CASE("read_qa_text: pairs to score may have no label -- bad lines name the file and line") {
    TempFile f("raw_to_score.tsv", "q one\ta b\nq two\tc d\n");
    const QaData d = read_qa_text(f.path.string(), true);
    CHECK(d.pairs.size() == 2);
    CHECK(d.num_positives() == 0);
    expect_raw_error("q\ta\n", "1: expected question<TAB>sentence<TAB>label, found 2");
    expect_raw_error("q\ta\t1\nq\ta\t1\textra\n", "2: expected question<TAB>sentence<TAB>label, found 4");
    expect_raw_error("q\ta\t1\nq\ta\tyes\n", "2: label 'yes' is not 0 or 1");
    expect_raw_error("q\t \t1\n", "1: sentence is empty");
    expect_raw_error(" \t a\t1\n", "1: question is empty", true);
    TempFile empty("raw_empty.tsv", "\n\n");
    CHECK_THROWS_WITH_AS(read_qa_text(empty.path.string()), doctest::Contains("no question/sentence pairs"), DataError);
}

TEST_CASE("read_qa_text: a byte-order mark is dropped, before data or a header") {
    const QaData data = read_raw_text("\xEF\xBB\xBF" + six_rows);
    REQUIRE(data.pairs.size() == 6);
    CHECK(data.pairs[0].question == Tokens{"who", "wrote", "hamlet", "?"});
    // With a header line after the mark: the header is no pair, so 6 rows give 6 pairs.
    const QaData headed = read_raw_text("\xEF\xBB\xBFquestion\tsentence\tlabel\n" + six_rows);
    REQUIRE(headed.pairs.size() == 6);
    CHECK(headed.pairs[0].question == Tokens{"who", "wrote", "hamlet", "?"});
    CHECK(headed.pairs[0].line == 2);
    CHECK(headed.labels() == std::vector<int>{1, 0, 1, 0, 1, 0});
}

TEST_CASE("read_qa_text: a header is known by its column names, never by a data value") {
    // Pairs to score, with the two-column header and spacing and case of a hand-written file.
    const QaData scored = read_raw_text(" Question \tSentence\r\nq one\ta b\nq two\tc d\n", true);
    CHECK(scored.pairs.size() == 2);
    const QaData answer = read_raw_text("QUESTION\tANSWER\tLABEL\nq\ta\t1\n");
    CHECK(answer.pairs.size() == 1);
    // Rows whose question is the word "Question" are data, however many lead the file.
    const std::string questions = "Question\tIt is a word.\t1\nQuestion\tA query.\t0\n";
    const QaData data = read_raw_text(questions + six_rows);
    REQUIRE(data.pairs.size() == 8);
    CHECK(data.pairs[0].question == Tokens{"question"});
    CHECK(data.pairs[1].answer == Tokens{"a", "query", "."});
    // A header anywhere but the first line is a bad row.
    CHECK(raw_text_error(six_rows + "question\tsentence\tlabel\n") == "7: label 'label' is not 0 or 1");
}

TEST_CASE("read_qa_text: invalid UTF-8, UTF-16 and NUL are refused at their line and column, with a hint") {
    CHECK(raw_text_error("q\ta\t1\nq\tcaf\xE9\t0\n").starts_with("2: byte 0xe9 at column 6 is not valid UTF-8"));
    CHECK(raw_text_error("q\t\x93quoted\x94\t0\n").starts_with("1: byte 0x93 at column 3 is not valid UTF-8"));
    CHECK(raw_text_error("q\t\xC1\xBF\t0\n").starts_with("1: byte 0xc1 at column 3 is not valid UTF-8"));
    CHECK(raw_text_error(std::string("q\ta\t1\nq\ta\0b\t1\n", 14)).starts_with("2: a NUL byte at column 4"));
    std::string utf16 = "\xFF\xFE";
    for (char c : std::string("question\tsentence\tlabel\n")) utf16 += std::string{c, '\0'};
    const std::string msg = raw_text_error(utf16);
    CHECK_MESSAGE(msg.starts_with("1: a NUL byte at column 4"), msg);
    CHECK_MESSAGE(msg.find("looks like UTF-16; convert it to UTF-8") != std::string::npos, msg);
    const std::string no_mark = raw_text_error(utf16.substr(2));
    CHECK_MESSAGE(no_mark.find("looks like UTF-16; convert it to UTF-8") != std::string::npos, no_mark);
}

TEST_CASE("read_qa_text: an empty label is named, and control bytes in a quoted label are escaped") {
    CHECK(raw_text_error("q\ta\t1\nq\tb\t\n") == "2: the label (third column) is empty; it must be 0 or 1");
    CHECK(raw_text_error("q\ta\t \n") == "1: the label (third column) is empty; it must be 0 or 1");
    CHECK(raw_text_error("q\ta\t\n", true) == "1: the label (third column) is empty; it must be 0 or 1");
    const std::string ansi = raw_text_error("q\ta\t\x1b[2J\x1b[31mred\n");
    CHECK(ansi == "1: label '\\x1b[2J\\x1b[31mred' is not 0 or 1");
    CHECK(ansi.find('\x1b') == std::string::npos);
    // Columns are still counted with empty ones: a fourth, empty column is a fourth column.
    CHECK(raw_text_error("q\ta\t1\t\n") ==
          "1: expected question<TAB>sentence<TAB>label, found 4 tab-separated columns");
    // No-break and zero-width spaces separate words in both columns.
    const QaData data = read_raw_text("Who\xC2\xA0wrote?\tShakespeare\xE2\x80\x8Bwrote.\t1\n");
    CHECK(data.pairs[0].question == Tokens{"who", "wrote", "?"});
    CHECK(data.pairs[0].answer == Tokens{"shakespeare", "wrote", "."});
}

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
    const xt::xarray<float> labels = batch.labels.rows();
    const xt::xarray<float> labels_expected = column({1, 1});
    CHECK(labels == labels_expected);

    CHECK_THROWS_AS(make_qa_minibatch(data, vocab, {}), UserError);
    CHECK_THROWS_AS(make_qa_minibatch(data, vocab, {3}), UserError);
}

TEST_CASE("minibatch with an IdfTable: each side's match features, a row of 6 per token, beside the ids") {
    std::istringstream in(
        "who wrote hamlet ?\tshakespeare wrote hamlet in 1600 .\t1\n"
        "where is paris ?\tin france .\t0\n");
    const QaData data = parse_qa_tsv(in, "mem.tsv");
    const Vocabulary vocab = Vocabulary::build(data.token_lists());
    const IdfTable idf = IdfTable::fit(data.token_lists());
    const QaMinibatch batch = make_qa_minibatch(data, vocab, {1, 0}, idf);
    REQUIRE(batch.question_features.num_items() == 2);
    CHECK(batch.question_features.layout().lengths() == std::vector<std::size_t>{4, 4});
    CHECK(batch.answer_features.layout().lengths() == std::vector<std::size_t>{3, 6});
    CHECK(batch.questions.layout().lengths() == batch.question_features.layout().lengths());
    // Item 1 is "who wrote hamlet ?" against "shakespeare wrote hamlet in 1600 .": by hand, the shared
    // content words are wrote and hamlet (columns 0 and 3: exact and stem match), side by side in the
    // answer (column 2); "who" and "?" are stopwords; no digit in the question.
    const xt::xarray<float> q = batch.question_features.sequence(1);
    REQUIRE(q.shape() == std::vector<std::size_t>{4, 6});
    for (std::size_t t = 0; t < 4; ++t) {
        const float shared = (t == 1 || t == 2) ? 1.0f : 0.0f;
        CHECK(q(t, 0) == shared);
        CHECK(q(t, 2) == shared);
        CHECK(q(t, 3) == shared);
        CHECK(q(t, 5) == 0.0f);
    }
    const xt::xarray<float> a = batch.answer_features.sequence(1);
    CHECK(a(4, 5) == 1.0f);  // "1600" holds a digit
    CHECK(a(0, 0) == 0.0f);  // "shakespeare" is not in the question
    // Nothing shared between "where is paris ?" and "in france .".
    const xt::xarray<float> none = batch.question_features.sequence(0);
    for (std::size_t t = 0; t < 4; ++t)
        for (std::size_t k = 0; k < 5; ++k) CHECK(none(t, k) == 0.0f);
    CHECK_THROWS_AS(make_qa_minibatch(data, vocab, {2}, idf), UserError);
}
