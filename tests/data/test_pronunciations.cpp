// Pronunciation dictionaries (CMUdict format) and G2P scores: the reader on small texts, its
// errors with their file:line, edit distances and a WER/PER worked out by hand.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include "core/errors.hpp"
#include "data/pronunciations.hpp"

#include "test_support.hpp"

using namespace loom;
using loom::testing::TempDir;
using loom::testing::TempFile;

namespace {

PronunciationDictionary parse(const std::string& text) {
    std::istringstream in(text);
    return parse_pronunciations(in, "test.dict");
}

// Reading `text` from a file must throw a DataError that starts "file:line: " and says `reason`.
void expect_read_error(const std::string& text, std::size_t line, const std::string& reason) {
    TempFile file("bad.dict", text);
    const std::string where = file.path.string() + ":" + std::to_string(line) + ": ";
    try {
        read_pronunciations(file.path.string());
        FAIL("no DataError for: " << text);
    } catch (const DataError& e) {
        const std::string message = e.what();
        CHECK_MESSAGE(message.starts_with(where), message, " should start with ", where);
        CHECK_MESSAGE(message.find(reason) != std::string::npos, message, " should say ", reason);
    }
}

std::size_t phoneme_distance(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return edit_distance(a, b);
}

// One phoneme per character, for the textbook examples.
std::vector<std::string> letters(const std::string& word) {
    std::vector<std::string> out;
    for (char c : word) out.emplace_back(1, c);
    return out;
}

}  // namespace

TEST_CASE("pronunciations: the 39 ARPAbet phonemes in order") {
    const std::vector<std::string>& phonemes = arpabet_phonemes();
    std::string joined;
    for (const std::string& p : phonemes) (joined += p) += ' ';
    CHECK(joined ==
          "AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH UW V W Y Z ZH ");
    CHECK(phonemes.size() == 39);
}

TEST_CASE("pronunciations: variants, comments and stress digits") {
    const PronunciationDictionary d = parse(
        "abbey AE1 B IY0\n"
        "abbey(2) AE1 B IY2\n"  // the same as the first once stress is dropped
        "a AH0\n"
        "a(2) EY1\n"
        "aalborg AO1 L B AO0 R G # place, danish\n"
        "a(3) AH1\n");
    REQUIRE(d.words() == std::vector<std::string>{"abbey", "a", "aalborg"});
    REQUIRE(d.pronunciations().size() == 3);
    CHECK(d.pronunciations()[0] == std::vector<Pronunciation>{{"AE", "B", "IY"}});
    CHECK(d.pronunciations()[1] == std::vector<Pronunciation>{{"AH"}, {"EY"}});
    CHECK(d.pronunciations()[2] == std::vector<Pronunciation>{{"AO", "L", "B", "AO", "R", "G"}});
    CHECK(d.size() == 3);
    CHECK(d.num_pronunciations() == 4);
    CHECK(d.merged_repeats() == 2);
    CHECK(d.source() == "test.dict");
    REQUIRE(d.find("a") != nullptr);
    CHECK(*d.find("a") == std::vector<Pronunciation>{{"AH"}, {"EY"}});
    CHECK(d.find("a(2)") == nullptr);
    CHECK(d.find("abbot") == nullptr);
}

TEST_CASE("pronunciations: a variant may come first, any number marks one, words keep their case") {
    const PronunciationDictionary d = parse("b(2) B IY1\nB B IY0\nb B IY0 Z\nb(10) B AY1\nb(1) B IY2\n");
    REQUIRE(d.words() == std::vector<std::string>{"b", "B"});
    CHECK(d.pronunciations()[0] == std::vector<Pronunciation>{{"B", "IY"}, {"B", "IY", "Z"}, {"B", "AY"}});
    CHECK(d.pronunciations()[1] == std::vector<Pronunciation>{{"B", "IY"}});
    CHECK(d.merged_repeats() == 1);
}

TEST_CASE("pronunciations: each word keeps the line it was first read from, for messages") {
    const PronunciationDictionary d = parse("# header\nb(2) B IY1\n\ncat K AE1 T\nb B IY0 Z\n");
    REQUIRE(d.words() == std::vector<std::string>{"b", "cat"});
    CHECK(d.line(0) == 2);
    CHECK(d.line(1) == 4);
    PronunciationDictionary built("built");
    built.add("x", {"EH", "K", "S"});
    built.add("y", {"W", "AY"}, 7);
    CHECK(built.line(0) == 0);
    CHECK(built.line(1) == 7);
}

TEST_CASE("pronunciations: every phoneme with every stress, runs of spaces and tabs") {
    std::string line = "all\t";
    Pronunciation expected;
    for (const std::string& p : arpabet_phonemes())
        for (const std::string stress : {"", "0", "1", "2"}) {
            line += "  " + p + stress + "\t";
            expected.push_back(p);
        }
    const PronunciationDictionary d = parse(line + "\n");
    REQUIRE(d.size() == 1);
    CHECK(d.pronunciations()[0] == std::vector<Pronunciation>{expected});
    CHECK(expected.size() == 39 * 4);
}

TEST_CASE("pronunciations: byte-order mark, CRLF, blank and comment lines, no final newline") {
    const PronunciationDictionary d = parse(
        "\xEF\xBB\xBF"
        "cat K AE1 T\r\n\r\n# a comment line\r\n  \t\r\ndog D AO1 G # a pet\r\ncow K AW1#no space");
    REQUIRE(d.words() == std::vector<std::string>{"cat", "dog", "cow"});
    CHECK(d.pronunciations()[0] == std::vector<Pronunciation>{{"K", "AE", "T"}});
    CHECK(d.pronunciations()[1] == std::vector<Pronunciation>{{"D", "AO", "G"}});
    CHECK(d.pronunciations()[2] == std::vector<Pronunciation>{{"K", "AW"}});
}

TEST_CASE("pronunciations: a word without phonemes names file and line") {
    expect_read_error("abbey AE1 B IY0\nlonely\n", 2, "word 'lonely' has no phonemes");
    expect_read_error("lonely(2)   # its phonemes are in the comment: AH0\n", 1, "word 'lonely(2)' has no phonemes");
}

TEST_CASE("pronunciations: a phoneme outside ARPAbet names file and line") {
    expect_read_error("abbey AE1 B IY0\n\ncat K AE1 Q\n", 3, "phoneme 'Q' of 'cat' is not an ARPAbet phoneme;");
    expect_read_error("cat k ae1 t\n", 1,
                      "phoneme 'k' of 'cat' is not an ARPAbet phoneme (phonemes are upper case: 'K')");
    expect_read_error("cat K AE3 T\n", 1,
                      "phoneme 'AE3' of 'cat' is not an ARPAbet phoneme (stress digits are 0, 1 and 2)");
    expect_read_error("cat K AE11 T\n", 1, "phoneme 'AE11' of 'cat'");
    expect_read_error("cat(2) K AX0 T\n", 1, "phoneme 'AX0' of 'cat(2)'");  // AX is not one of the 39
    expect_read_error("cat K AE T 0\n", 1, "phoneme '0' of 'cat'");
    expect_read_error("cat K,AE,T\n", 1, "expected one of the 39 symbols AA AE AH");
}

TEST_CASE("pronunciations: more than 256 phonemes in a pronunciation name file and line") {
    std::string longest = "long", too_long = "paste";
    for (int i = 0; i < 256; ++i) longest += " AH0";
    for (int i = 0; i < 1000000; ++i) too_long += (i % 2 ? "\tK" : " AE1");
    // 256 phonemes are read; with a comment after them, still 256.
    CHECK(parse("cat K AE1 T\n" + longest + " # " + longest + "\n").pronunciations()[1][0].size() == 256);
    expect_read_error("cat K AE1 T\n" + longest + " T\n", 2,
                      "the pronunciation of 'long' has 257 phonemes; a pronunciation may have at most 256");
    expect_read_error("cat K AE1 T\ndog D AO1 G\n" + too_long + "\n", 3,
                      "the pronunciation of 'paste' has 1000000 phonemes; a pronunciation may have at most 256");
    // The word is named whole, after a run of white space as long as the start of the line looked at.
    const std::string word(300, 'w');
    expect_read_error(std::string(1000, ' ') + word + longest.substr(4) + " T\n", 1,
                      "the pronunciation of '" + word.substr(0, 10));
    expect_read_error(std::string(1000, ' ') + word + longest.substr(4) + " T\n", 1, "has 257 phonemes");
}

TEST_CASE("pronunciations: a malformed variant suffix names file and line") {
    for (const std::string word :
         {"word(x)", "word(", "word()", "word(2", "word(2)s", "word(-1)", "wo)rd", "wo(2)rd(3)"})
        expect_read_error("ok OW1 K EY1\n" + word + " W ER1 D\n", 2,
                          "word '" + word + "' has a malformed variant suffix;");
    expect_read_error("(2) W ER1 D\n", 1, "word '(2)' has a malformed variant suffix and no word before it");
}

TEST_CASE("pronunciations: a file without pronunciations is an error") {
    expect_read_error("", 1, "empty file: no pronunciations");
    expect_read_error("\n# only a comment\n\t\n", 3, "only blank lines and comments: no pronunciations");
    expect_read_error("\xEF\xBB\xBF", 1, "only blank lines and comments");
}

TEST_CASE("pronunciations: NUL bytes, UTF-16 and invalid UTF-8 name file, line and column") {
    expect_read_error(std::string("cat K AE1 T\nd\0g D AO1 G\n", 24), 2, "NUL byte at column 2");
    // "cat K\n" in UTF-16 little-endian with its byte-order mark.
    expect_read_error(std::string("\xFF\xFE"
                                  "c\0a\0t\0 \0K\0\n\0",
                                  14),
                      1, "NUL byte at column 4");
    expect_read_error("cat K AE1 T\ncaf\xE9 K AE0 F EY1\n", 2, "byte 0xe9 at column 4 is not valid UTF-8");
    // UTF-8 words read as they are.
    CHECK(parse("caf\xC3\xA9 K AE0 F EY1\n").words() == std::vector<std::string>{"caf\xC3\xA9"});
}

TEST_CASE("pronunciations: a stream's errors carry its source name") {
    std::istringstream in("cat K AE1 T\ndog D OG1\n");
    CHECK_THROWS_WITH_AS(parse_pronunciations(in, "inline.dict"),
                         doctest::Contains("inline.dict:2: phoneme 'OG1' of 'dog'"), DataError);
}

TEST_CASE("pronunciations: only a regular file is read") {
    CHECK_THROWS_WITH_AS(read_pronunciations("/nonexistent/cmudict.dict"),
                         doctest::Contains("cannot open data file '/nonexistent/cmudict.dict'"), DataError);
    const TempDir dir("pronunciations_kinds");
    CHECK_THROWS_WITH_AS(read_pronunciations(dir.path.string()), doctest::Contains("is a directory"), DataError);
    CHECK_THROWS_WITH_AS(read_pronunciations("/dev/null"),
                         doctest::Contains("'/dev/null' is a character device, not a regular file"), DataError);

    const std::string fifo = dir.file("pipe.dict");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // A writer that waits for a reader: were the FIFO opened, it would be read as a good
    // dictionary, so the check fails instead of the test hanging.
    std::thread writer([&] { std::ofstream(fifo) << "cat K AE1 T\n"; });
    CHECK_THROWS_WITH_AS(read_pronunciations(fifo),
                         doctest::Contains(("'" + fifo + "' is a FIFO (named pipe), not a regular file").c_str()),
                         DataError);
    // Lets the writer go when the reader rightly left the FIFO alone.
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    writer.join();
    if (fd >= 0) ::close(fd);

    // A symbolic link to a regular file is read.
    TempFile file("linked.dict", "cat K AE1 T\n");
    const std::string link = dir.file("link.dict");
    REQUIRE(::symlink(file.path.c_str(), link.c_str()) == 0);
    CHECK(read_pronunciations(link).words() == std::vector<std::string>{"cat"});
}

TEST_CASE("pronunciations: add merges repeats and refuses empty words and pronunciations") {
    PronunciationDictionary d("built");
    CHECK(d.add("cat", {"K", "AE", "T"}));
    CHECK_FALSE(d.add("cat", {"K", "AE", "T"}));
    CHECK(d.add("cat", {"K", "AA", "T"}));
    CHECK(d.num_pronunciations() == 2);
    CHECK(d.merged_repeats() == 1);
    CHECK_THROWS_WITH_AS(d.add("", {"K"}), doctest::Contains("empty word"), UserError);
    CHECK_THROWS_WITH_AS(d.add("dog", {}), doctest::Contains("empty pronunciation of 'dog'"), UserError);
    CHECK(d.size() == 1);
}

TEST_CASE("pronunciations: edit distances worked out by hand") {
    CHECK(phoneme_distance({}, {}) == 0);
    CHECK(phoneme_distance({}, {"AE", "B", "IY"}) == 3);
    CHECK(phoneme_distance({"AE", "B", "IY"}, {}) == 3);
    CHECK(phoneme_distance({"AE", "B", "IY"}, {"AE", "B", "IY"}) == 0);
    CHECK(phoneme_distance({"AE", "B", "IY"}, {"AE", "B", "AY"}) == 1);   // one substitution
    CHECK(phoneme_distance({"AE", "B", "IY"}, {"AE", "IY"}) == 1);        // one deletion
    CHECK(phoneme_distance({"AE", "IY"}, {"AE", "B", "IY"}) == 1);        // one insertion
    CHECK(phoneme_distance({"AH", "B"}, {"B", "AH"}) == 2);               // no transpositions
    CHECK(phoneme_distance({"F", "L", "AW"}, {"L", "AW", "F"}) == 2);     // delete F, insert F
    CHECK(phoneme_distance({"AA", "B", "CH", "D"}, {"EH", "F"}) == 4);    // 2 substitutions, 2 deletions
    CHECK(phoneme_distance(letters("kitten"), letters("sitting")) == 3);  // k->s, e->i, insert g
    CHECK(phoneme_distance(letters("sitting"), letters("kitten")) == 3);
    CHECK(phoneme_distance(letters("intention"), letters("execution")) == 5);  // Jurafsky and Martin, unit costs
    CHECK(phoneme_distance(letters("abc"), letters("xyz")) == 3);
}

TEST_CASE("pronunciations: WER and PER of five words worked out by hand") {
    // word      references               prediction    closest        distance  its length
    // read      R IY D | R EH D          R EH D        R EH D         0         3
    // either    IY DH ER | AY DH ER      EY DH ER      (tie) either   1         3
    // cats      K AE T S | K AE T        K AE T AH     (tie) K AE T   1         3  (shorter wins)
    // data      D EY T AH                (nothing)     D EY T AH      4         4
    // abbey     AA B | AE B IY           AE B IY Z     AE B IY        1         3  (AA B is at 3)
    // WER = 4 wrong / 5 = 0.8; PER = (0+1+1+4+1) / (3+3+3+4+3) = 7/16 = 0.4375. Taking the longer
    // reference on the tie would give 7/17; a mean of per-word ratios (0+1/3+1/3+1+1/3)/5 = 0.4.
    const std::vector<Pronunciation> predictions = {
        {"R", "EH", "D"}, {"EY", "DH", "ER"}, {"K", "AE", "T", "AH"}, {}, {"AE", "B", "IY", "Z"}};
    const std::vector<std::vector<Pronunciation>> references = {{{"R", "IY", "D"}, {"R", "EH", "D"}},
                                                                {{"IY", "DH", "ER"}, {"AY", "DH", "ER"}},
                                                                {{"K", "AE", "T", "S"}, {"K", "AE", "T"}},
                                                                {{"D", "EY", "T", "AH"}},
                                                                {{"AA", "B"}, {"AE", "B", "IY"}}};
    const G2PScore score = score_pronunciations(predictions, references);
    CHECK(score.words == 5);
    CHECK(score.word_errors == 4);
    CHECK(score.phoneme_errors == 7);
    CHECK(score.reference_phonemes == 16);
    CHECK(score.wer() == doctest::Approx(0.8));
    CHECK(score.per() == doctest::Approx(0.4375));

    // Every prediction right: no errors; the references' lengths are still counted.
    const std::vector<Pronunciation> right = {
        {"R", "IY", "D"}, {"AY", "DH", "ER"}, {"K", "AE", "T", "S"}, {"D", "EY", "T", "AH"}, {"AA", "B"}};
    const G2PScore perfect = score_pronunciations(right, references);
    CHECK(perfect.word_errors == 0);
    CHECK(perfect.phoneme_errors == 0);
    CHECK(perfect.reference_phonemes == 3 + 3 + 4 + 4 + 2);
    CHECK(perfect.wer() == 0.0);
    CHECK(perfect.per() == 0.0);
}

TEST_CASE("pronunciations: scoring a dictionary against itself, and nothing") {
    const PronunciationDictionary d = parse("a AH0\na(2) EY1\nabbey AE1 B IY0\n");
    const std::vector<Pronunciation> last = {{"EY"}, {"AE", "B", "IY"}};
    const G2PScore score = score_pronunciations(last, d.pronunciations());
    CHECK(score.word_errors == 0);
    CHECK(score.reference_phonemes == 1 + 3);
    const G2PScore none = score_pronunciations({}, {});
    CHECK(none.words == 0);
    CHECK(none.wer() == 0.0);
    CHECK(none.per() == 0.0);
}

TEST_CASE("pronunciations: scoring refuses mismatched lists and missing references") {
    const std::vector<Pronunciation> two = {{"AH"}, {"B"}};
    const std::vector<std::vector<Pronunciation>> one = {{{"AH"}}};
    CHECK_THROWS_WITH_AS(score_pronunciations(two, one), doctest::Contains("2 predictions for 1 words"), UserError);
    const std::vector<std::vector<Pronunciation>> second_has_none = {{{"AH"}}, {}};
    CHECK_THROWS_WITH_AS(score_pronunciations(two, second_has_none),
                         doctest::Contains("word 1 has no reference pronunciation"), UserError);
    const std::vector<std::vector<Pronunciation>> second_is_empty = {{{"AH"}}, {{"B"}, {}}};
    CHECK_THROWS_WITH_AS(score_pronunciations(two, second_is_empty),
                         doctest::Contains("reference 1 of word 1 is empty"), UserError);
}
