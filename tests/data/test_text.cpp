// The text readers' shared helpers: UTF-8 validation by the standard's rules, numbers with the
// reason they are refused, and lines with the byte-order mark dropped and bad bytes located.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>

#include "core/errors.hpp"
#include "data/text.hpp"
#include "test_support.hpp"

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

TEST_CASE("data text: check_writable passes where a file can be made and leaves nothing behind") {
    testing::TempDir dir("check_writable");
    const std::string model = (dir.path / "m.loom").string();
    CHECK_NOTHROW(check_writable(model, "--save"));
    CHECK(std::filesystem::is_empty(dir.path));  // the probe is removed again
    const std::string missing = (dir.path / "no_such_folder" / "m.loom").string();
    try {
        check_writable(missing, "--save");
        FAIL("a path in a missing folder was accepted");
    } catch (const UserError& e) {
        CHECK(std::string(e.what()) == "--save " + missing + ": cannot write there");
    }
}
