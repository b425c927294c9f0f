// The text readers' shared helpers: UTF-8 validation by the standard's rules, numbers with the
// reason they are refused, and lines with the byte-order mark dropped and bad bytes located.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.hpp"
#include "data/ctf.hpp"
#include "data/text.hpp"
#include "qa/qa_data.hpp"
#include "test_support.hpp"
#include "text/vocabulary.hpp"

using namespace loom;
using namespace loom::data_text;

TEST_CASE("data text: UTF-8 validation follows the standard") {
    constexpr auto ok = std::string_view::npos;
    CHECK(invalid_utf8_at("plain ascii") == ok);
    CHECK(invalid_utf8_at("\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == ok);  // 2, 3 and 4 bytes
    CHECK(invalid_utf8_at("\xF4\x8F\xBF\xBF") == ok);                        // U+10FFFF, the last
    CHECK(invalid_utf8_at("ab\x80") == 2);                                   // continuation alone
    CHECK(invalid_utf8_at("a\xC0\xAF") == 1);                                // overlong '/'
    CHECK(invalid_utf8_at("\xE0\x80\xAF") == 0);                             // overlong, 3 bytes
    CHECK(invalid_utf8_at("x\xED\xA0\x80") == 1);                            // surrogate U+D800
    CHECK(invalid_utf8_at("\xF4\x90\x80\x80") == 0);                         // past U+10FFFF
    CHECK(invalid_utf8_at("abc\xE2\x82") == 3);                              // cut short
    CHECK(invalid_utf8_at("caf\xE9 au lait") == 3);                          // Latin-1
    CHECK(utf8_sequence_length("\xE2\x82\xAC!") == 3);
    CHECK(utf8_sequence_length("\xFF") == 0);
}

TEST_CASE("data text: floats say why they are refused / underflow is zero") {
    float v = -1.0f;
    CHECK(parse_float("1e-50", v) == NumberStatus::ok);
    CHECK(v == 0.0f);
    CHECK(parse_float("-1e-400", v) == NumberStatus::ok);
    CHECK((v == 0.0f && std::signbit(v)));
    CHECK(parse_float("0.000000001e-45", v) == NumberStatus::ok);
    CHECK(v == 0.0f);
    CHECK(parse_float("+2.5", v) == NumberStatus::ok);
    CHECK(v == 2.5f);
    CHECK(parse_float("3.4e38", v) == NumberStatus::ok);
    CHECK(parse_float("3.5e38", v) == NumberStatus::too_large);  // float's largest is 3.4028e38
    CHECK(parse_float("-1e400", v) == NumberStatus::too_large);
    CHECK(parse_float("123456789012345678901234567890123456789012345", v) == NumberStatus::too_large);
    CHECK(parse_float("0.0000000001e99999999999999999999", v) == NumberStatus::too_large);
    CHECK(parse_float("inf", v) == NumberStatus::not_finite);
    CHECK(parse_float("nan", v) == NumberStatus::not_finite);
    for (const char* bad : {"", "+", "-", "+-1", "1.5x", "0x10", "1e", "one"})
        CHECK_MESSAGE(parse_float(bad, v) == NumberStatus::not_a_number, bad);
    CHECK(float_problem(NumberStatus::too_large).find("too large") != std::string::npos);
}

TEST_CASE("data text: indices up to SIZE_MAX / beyond are too large") {
    std::size_t i = 0;
    CHECK(parse_index("18446744073709551615", i) == NumberStatus::ok);
    CHECK(i == std::numeric_limits<std::size_t>::max());
    CHECK(parse_index("18446744073709551616", i) == NumberStatus::too_large);
    CHECK(parse_index("-1", i) == NumberStatus::not_a_number);
    CHECK(parse_index("1.0", i) == NumberStatus::not_a_number);
    CHECK(parse_index("", i) == NumberStatus::not_a_number);
}

TEST_CASE("data text: lines drop a leading byte-order mark and CR / checks by kind") {
    std::istringstream in(
        "\xEF\xBB\xBF"
        "first\r\n\xEF\xBB\xBF"
        "second\nthird");
    LineReader lines(in, "mem.txt", TextCheck::utf8);
    std::string line;
    REQUIRE(lines.next(line));
    CHECK(line == "first");
    REQUIRE(lines.next(line));
    CHECK(line ==
          "\xEF\xBB\xBF"
          "second");  // only at the start of the file
    REQUIRE(lines.next(line));
    CHECK(line == "third");
    CHECK(lines.line_number() == 3);
    CHECK_FALSE(lines.next(line));

    const std::string latin1 = "ok\ncaf\xE9\n";
    std::istringstream strict(latin1), lenient(latin1), none(std::string("a\0b", 3));
    LineReader utf8_lines(strict, "mem.txt", TextCheck::utf8), nul_lines(lenient, "mem.txt", TextCheck::nul_bytes),
        no_check(none, "mem.txt", TextCheck::none);
    REQUIRE(utf8_lines.next(line));
    CHECK_THROWS_WITH_AS(utf8_lines.next(line), doctest::Contains("mem.txt:2: byte 0xe9 at column 4"), DataError);
    REQUIRE(nul_lines.next(line));
    REQUIRE(nul_lines.next(line));
    CHECK(line == "caf\xE9");
    REQUIRE(no_check.next(line));
    CHECK(line.size() == 3);
}

TEST_CASE("data text: Unicode spaces split words and make a line blank") {
    CHECK(split_whitespace("a\xC2\xA0"
                           "b\xE2\x80\x8B c\xE3\x80\x80") == std::vector<std::string>{"a", "b", "c"});
    CHECK(split_whitespace("caf\xC3\xA9") == std::vector<std::string>{"caf\xC3\xA9"});
    CHECK(is_blank(" \xC2\xA0\t\xE2\x80\x8B"));
    CHECK_FALSE(is_blank("\xC3\xA0"));
}

namespace {

// The DataError a LineReader with the UTF-8 check throws on `text`, or "accepted".
std::string line_error(const std::string& text) {
    std::istringstream in(text);
    LineReader lines(in, "mem.txt", TextCheck::utf8);
    try {
        for (std::string line; lines.next(line);) {
        }
    } catch (const DataError& e) {
        return e.what();
    }
    return "accepted";
}

// `text` in UTF-16, little-endian (ASCII only).
std::string utf16le(const std::string& text) {
    std::string out;
    for (char c : text) out += std::string{c, '\0'};
    return out;
}

}  // namespace

TEST_CASE("data text: UTF-16 with or without its byte-order mark is named, with the fix") {
    const std::string hint = "the file looks like UTF-16; convert it to UTF-8";
    const std::string with_bom = line_error("\xFF\xFE" + utf16le("q\ta\t1\n"));
    CHECK(with_bom.starts_with("mem.txt:1: a NUL byte at column 4"));
    CHECK_MESSAGE(with_bom.find(hint) != std::string::npos, with_bom);
    const std::string big_endian = line_error("\xFE\xFF" + std::string("\0q", 2));
    CHECK(big_endian.starts_with("mem.txt:1: a NUL byte at column 3"));
    CHECK_MESSAGE(big_endian.find(hint) != std::string::npos, big_endian);
    // Without a byte-order mark: half the bytes are NUL.
    const std::string without_bom = line_error(utf16le("question\tsentence\tlabel\n"));
    CHECK(without_bom.starts_with("mem.txt:1: a NUL byte at column 2"));
    CHECK_MESSAGE(without_bom.find(hint) != std::string::npos, without_bom);
    // The mark alone before text that has no NUL (CJK characters, say) is named too.
    const std::string mark_only = line_error("\xFF\xFE\x2d\x4e\x87\x65\n");
    CHECK(mark_only.starts_with("mem.txt:1: byte 0xff at column 1"));
    CHECK_MESSAGE(mark_only.find(hint) != std::string::npos, mark_only);
    // A lone NUL in UTF-8 text is not called UTF-16.
    const std::string lone = line_error(std::string("question one\tsent\0ence\t1\n", 25));
    CHECK(lone.starts_with("mem.txt:1: a NUL byte at column 18"));
    CHECK_MESSAGE(lone.find("UTF-16") == std::string::npos, lone);
    // Nor a NUL in a short line (a word, say), where NULs would be half the bytes of UTF-16, nor two
    // NULs side by side: only a NUL in every other byte is.
    for (const std::string& line : {std::string("cat\0\n", 5), std::string("a\0\0b\n", 5), std::string("\0\n", 2)}) {
        const std::string message = line_error(line);
        CHECK_MESSAGE(message.starts_with("mem.txt:1: a NUL byte at column "), message);
        CHECK_MESSAGE(message.find("UTF-16") == std::string::npos, message);
    }
    CHECK(line_error(std::string("cat\0\n", 5)).starts_with("mem.txt:1: a NUL byte at column 4; text holds none"));
    // A line of UTF-16 after the first starts with the NUL of the line end before it: NULs at the
    // even bytes.
    const std::string shifted = line_error(std::string("\0c\0a\0t\n", 7));
    CHECK_MESSAGE(shifted.starts_with("mem.txt:1: a NUL byte at column 1"), shifted);
    CHECK_MESSAGE(shifted.find(hint) != std::string::npos, shifted);
    // Overlong forms and CP1252's curly quote are invalid UTF-8, with their column.
    CHECK(line_error("ok\n\xC0\xAF\n").starts_with("mem.txt:2: byte 0xc0 at column 1 is not valid UTF-8"));
    CHECK(line_error("x \xE0\x80\xAF\n").starts_with("mem.txt:1: byte 0xe0 at column 3 is not valid UTF-8"));
    CHECK(line_error("say \x93hi\x94\n").starts_with("mem.txt:1: byte 0x93 at column 5 is not valid UTF-8"));
}

// Every reader that opens its file through open_for_reading (CTF, vocabularies, QA files; the
// pronunciation and text readers ask first with their own words) refuses a FIFO, a device or a
// socket by name before opening it: a FIFO without a writer blocked the open forever, /dev/zero
// was read forever.
TEST_CASE("data text: the readers refuse a FIFO or a device by name before opening") {
    testing::TempDir dir("open_irregular");
    const std::string fifo = dir.file("pipe.txt");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> readers{
        {"read_ctf",
         [](const std::string& p) {
             read_ctf(p, {{"x", 1, false}});
         }},
        {"Vocabulary::load", [](const std::string& p) { Vocabulary::load(p); }},
        {"read_qa_tsv", [](const std::string& p) { read_qa_tsv(p); }},
        {"read_qa_text", [](const std::string& p) { read_qa_text(p, true); }},
    };
    for (const auto& reader : readers) {  // no structured bindings: clang 14 cannot capture them (CAPTURE)
        CAPTURE(reader.first);
        const auto& read = reader.second;
        CHECK_THROWS_WITH_AS(read("/dev/zero"),
                             doctest::Contains("'/dev/zero' is a character device, not a regular file"), DataError);
        // A writer that waits for a reader: were the FIFO opened, the read would go on, so the
        // check fails instead of the test hanging.
        std::thread writer([&] { std::ofstream(fifo) << "|x 1\n"; });
        CHECK_THROWS_WITH_AS(read(fifo), doctest::Contains(("'" + fifo + "' is a FIFO (named pipe)").c_str()),
                             DataError);
        const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // lets the writer go
        writer.join();
        if (fd >= 0) ::close(fd);
    }
}
