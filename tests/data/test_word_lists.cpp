// Word lists, one word a line (data/word_lists.hpp): batches of bounded size with each word's line,
// blank lines and surrounding space skipped, and the errors (two words, a control character, bad
// UTF-8, a missing file) named by file and line.
#include <doctest/doctest.h>

#include <sstream>

#include "core/errors.hpp"
#include "data/word_lists.hpp"

#include "test_support.hpp"

using namespace loom;

namespace {

std::vector<ListedWord> all_words(const std::string& text, std::size_t batch_size = 3) {
    std::istringstream in(text);
    WordListReader reader(in, "list.txt");
    std::vector<ListedWord> all, batch;
    while (reader.next_batch(batch, batch_size)) all.insert(all.end(), batch.begin(), batch.end());
    return all;
}

}  // namespace

TEST_CASE("word lists: one word a line, each with its line -- blank lines and surrounding space skipped") {
    const auto words = all_words(
        "\xEF\xBB\xBF"
        "cat\r\n\n  dog \t\n\t\nx-ray\ncafé\n   \no'neil");
    REQUIRE(words.size() == 5);
    CHECK(words[0].word == "cat");
    CHECK(words[0].line == 1);
    CHECK(words[1].word == "dog");
    CHECK(words[1].line == 3);
    CHECK(words[2].word == "x-ray");
    CHECK(words[3].word == "café");
    CHECK(words[4].word == "o'neil");
    CHECK(words[4].line == 8);
    CHECK(all_words("").empty());
    CHECK(all_words("\n \n").empty());
}

TEST_CASE("word lists: 50,000 words come in batches of at most the size asked, in order, nothing kept") {
    std::ostringstream text;
    for (std::size_t i = 0; i < 50000; ++i) text << "w" << i << "\n";
    std::istringstream in(text.str());
    WordListReader reader(in, "generated");
    std::vector<ListedWord> batch;
    std::size_t seen = 0, batches = 0, largest = 0;
    while (reader.next_batch(batch, 128)) {
        largest = std::max(largest, batch.size());
        for (const ListedWord& w : batch) {
            REQUIRE(w.word == "w" + std::to_string(seen));
            REQUIRE(w.line == seen + 1);
            ++seen;
        }
        ++batches;
        CHECK(batch.capacity() <= 1024);  // the batch is reused, never grown with the list
    }
    CHECK(seen == 50000);
    CHECK(largest == 128);
    CHECK(batches == (50000 + 127) / 128);
}

TEST_CASE("word lists: two words on a line, invalid UTF-8 and a missing file are named with file and line") {
    CHECK_THROWS_WITH_AS(all_words("cat\nnew york\n"),
                         doctest::Contains("list.txt:2: 2 words ('new', 'york'); a word list has one word a line"),
                         DataError);
    CHECK_THROWS_WITH_AS(all_words("a\nb\nc\nd\ncaf\xe9\n"), doctest::Contains("list.txt:5: byte 0xe9 at column 4"),
                         DataError);
    CHECK_THROWS_WITH_AS(WordListReader("/no/such/list.txt"), doctest::Contains("/no/such/list.txt"), DataError);
    testing::TempDir dir("word_lists");
    CHECK_THROWS_WITH_AS(WordListReader(dir.path.string()), doctest::Contains("is a directory"), DataError);
    std::istringstream in("cat\n");
    WordListReader reader(in, "x");
    std::vector<ListedWord> batch;
    CHECK_THROWS_AS(reader.next_batch(batch, 0), UserError);
}

TEST_CASE("word lists: an endless line stops at a megabyte and a device is refused by name") {
    // 100,000 letters are read (the program names such a word); 2 MB without a line end are not.
    CHECK(all_words("cat\n" + std::string(100000, 'a') + "\n").at(1).word.size() == 100000);
    CHECK_THROWS_WITH_AS(all_words("cat\n" + std::string(2 << 20, 'b')),
                         doctest::Contains("list.txt:2: a line longer than 1048576 bytes"), DataError);
    CHECK_THROWS_WITH_AS(WordListReader("/dev/zero"),
                         doctest::Contains("'/dev/zero' is a character device, not a word list"), DataError);
    CHECK(all_words("a\r\nb").size() == 2);  // the last line needs no line end
}

TEST_CASE("word lists: a control character in a line (a carriage return not ending it) is named with file and line") {
    // What the fuzz target found: "\rat\x02" was read as one word holding a carriage return.
    CHECK_THROWS_WITH_AS(all_words("cat\n\rat\x02\n"),
                         doctest::Contains("list.txt:2: the control character U+000D at column 1"), DataError);
    CHECK_THROWS_WITH_AS(all_words("dog\x7f\n"),
                         doctest::Contains("list.txt:1: the control character U+007F at column 4"), DataError);
    CHECK(all_words("cat\r\n\tdog\t\r\n").size() == 2);  // tabs around a word and CR LF line ends are fine
}
