// Text as a character-level model reads it (text/characters.hpp): code points decoded from UTF-8
// bytes written out by hand, ids in code-point order, and every error naming the file, line and
// column: a character outside the alphabet, a NUL byte, invalid UTF-8, a file that is not there,
// one that is no regular file (a FIFO, a device), one whose read fails.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <loom.hpp>

#include "test_support.hpp"

using namespace loom;

TEST_CASE("characters: UTF-8 decodes to code points and back, one to four bytes") {
    // h, e acute (C3 A9), the euro sign (E2 82 AC), a grinning face past the BMP (F0 9F 98 80).
    CHECK(decode_utf8("h\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80!", "s") == U"h\u00e9\u20ac\U0001F600!");
    CHECK(utf8_of(U'\u00e9') == "\xc3\xa9");
    CHECK(utf8_of(U'\u20ac') == "\xe2\x82\xac");
    CHECK(utf8_of(U'\U0001F600') == "\xf0\x9f\x98\x80");
    CHECK(decode_utf8("", "s").empty());
    CHECK(line_column(U"ab\ncd\n\ne", 4) == "2:2");
    CHECK(line_column(U"ab\ncd\n\ne", 7) == "4:1");
}

TEST_CASE("characters: what is not UTF-8 text is refused with its file, line and column") {
    CHECK_THROWS_WITH_AS(decode_utf8(std::string("ab\ncd\0e", 7), "g.txt"), doctest::Contains("g.txt:2:3: a NUL byte"),
                         DataError);
    CHECK_THROWS_WITH_AS(decode_utf8("ab\xff", "g.txt"), doctest::Contains("g.txt:1:3: the bytes 0xFF"), DataError);
    // Latin-1's e acute alone, an overlong '/', a UTF-16 surrogate, a sequence cut short.
    CHECK_THROWS_WITH_AS(decode_utf8("caf\xe9", "l.txt"), doctest::Contains("l.txt:1:4: the bytes 0xE9"), DataError);
    CHECK_THROWS_AS(decode_utf8("\xc0\xaf", "o.txt"), DataError);
    CHECK_THROWS_AS(decode_utf8("\xed\xa0\x80", "s.txt"), DataError);
    CHECK_THROWS_WITH_AS(decode_utf8("x\n\xe2\x82", "c.txt"), doctest::Contains("c.txt:2:1: the bytes 0xE2 0x82"),
                         DataError);
}

TEST_CASE("characters: a file's text, its byte-order mark dropped, and a file that cannot be read named") {
    testing::TempDir dir("characters");
    std::ofstream(dir.file("bom.txt"), std::ios::binary) << "\xef\xbb\xbfROMEO:\n";
    CHECK(read_utf8_text(dir.file("bom.txt")) == U"ROMEO:\n");
    std::ofstream(dir.file("bad.txt"), std::ios::binary) << "ok\nno\xff";
    CHECK_THROWS_WITH_AS(read_utf8_text(dir.file("bad.txt")), doctest::Contains("bad.txt:2:3: the bytes 0xFF"),
                         DataError);
    CHECK_THROWS_WITH_AS(read_utf8_text(dir.file("absent.txt")), doctest::Contains("absent.txt"), DataError);
    CHECK_THROWS_WITH_AS(read_utf8_text(dir.path.string()), doctest::Contains("is a directory"), DataError);
}

TEST_CASE("characters: a FIFO or a device is refused by name before opening, and a failed read is an error") {
    testing::TempDir dir("characters_irregular");
    // /dev/zero would be read forever, /dev/null read as an empty text.
    CHECK_THROWS_WITH_AS(read_utf8_text("/dev/zero"),
                         doctest::Contains("'/dev/zero' is a character device, not a regular file"), DataError);
    CHECK_THROWS_WITH_AS(read_utf8_text("/dev/null"),
                         doctest::Contains("'/dev/null' is a character device, not a regular file"), DataError);
    const std::string fifo = dir.file("pipe.txt");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // A writer that waits for a reader: were the FIFO opened, it would be read as a good text, so
    // the check fails instead of the test hanging.
    std::thread writer([&] { std::ofstream(fifo) << "ROMEO:\n"; });
    CHECK_THROWS_WITH_AS(read_utf8_text(fifo),
                         doctest::Contains(("'" + fifo + "' is a FIFO (named pipe), not a regular file").c_str()),
                         DataError);
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // lets the writer go
    writer.join();
    if (fd >= 0) ::close(fd);
    // A regular file whose first read fails (EIO: no page is mapped at address 0): an error naming
    // it, not an empty text.
    CHECK_THROWS_WITH_AS(read_utf8_text("/proc/self/mem"), doctest::Contains("'/proc/self/mem' could not be read"),
                         DataError);
}

TEST_CASE("characters: more characters than an alphabet holds are refused naming where the text came from") {
    std::u32string text;
    for (char32_t c = 0x20; text.size() <= Alphabet::max_size; ++c)
        if (c < 0xD800 || c > 0xDFFF) text += c;
    CHECK_THROWS_WITH_AS(
        Alphabet::of(text, "--train big.txt"),
        doctest::Contains("--train big.txt holds 65537 distinct characters; a model reads at most 65536"), UserError);
    text.pop_back();
    CHECK(Alphabet::of(text, "--train big.txt").size() == Alphabet::max_size);
}

TEST_CASE("characters: an alphabet gives ids in code-point order and names a character outside it") {
    const Alphabet alphabet = Alphabet::of(U"ab\ncd");
    CHECK(alphabet.size() == 5);  // '\n' (U+000A) < 'a' < 'b' < 'c' < 'd'
    CHECK(alphabet.ids(U"dc\nba", "x") == std::vector<std::uint32_t>{4, 3, 0, 2, 1});
    CHECK(alphabet.character(1) == "a");
    CHECK_THROWS_WITH_AS(alphabet.ids(U"ab\ncXd", "f.txt"),
                         doctest::Contains("f.txt:2:2: the character 'X' (U+0058) is not in the model's alphabet"),
                         UserError);
    CHECK_THROWS_WITH_AS(alphabet.ids(U"a\u00e9", "f.txt"), doctest::Contains("f.txt:1:2: the character '\xc3\xa9'"),
                         UserError);
    CHECK_THROWS_WITH_AS(alphabet.ids(U"a\t", "f.txt"), doctest::Contains("the character U+0009"), UserError);
    // Past the BMP, found by search rather than the table: ids still in code-point order, 'z'
    // (U+007A) 0, the cat face (U+1F431) 1, the grinning face (U+1F600) 2.
    const Alphabet wide = Alphabet::of(U"\U0001F600z\U0001F431");
    CHECK(wide.ids(U"\U0001F431z\U0001F600", "w") == std::vector<std::uint32_t>{1, 0, 2});
    CHECK_THROWS_AS(wide.ids(U"\U0001F601", "w"), UserError);
    // Code points a program made, past the last one Unicode has: refused, not a write past the table.
    CHECK_THROWS_WITH_AS(Alphabet::of(std::u32string{U'a', char32_t{0x110000}}), doctest::Contains("past U+10FFFF"),
                         UserError);
}

TEST_CASE("characters: an alphabet stored in a model file is its characters in order, else refused") {
    const Alphabet alphabet = Alphabet::of(U"to be, or not\n");
    CHECK(Alphabet::stored(alphabet.utf8(), "m.loom").utf8() == alphabet.utf8());
    CHECK(alphabet.utf8() == "\n ,benort");
    for (const std::string stored : {"ba", "aa", "", "a\xff"})
        CHECK_THROWS_WITH_AS(Alphabet::stored(stored, "m.loom"), doctest::Contains("m.loom: its alphabet"), DataError);
}
