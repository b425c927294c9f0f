// SVG pictures: a line chart puts each point where the y range says, a heat row shades its smallest
// value white and its largest darkest, labels are escaped, and mismatched inputs are errors.
#include <doctest/doctest.h>

#include <regex>

#include <loom.hpp>

#include "test_support.hpp"

using namespace loom;

namespace {
using loom::testing::occurrences;

}  // namespace

TEST_CASE("svg line_charts: points placed on the padded y range, one polyline per series") {
    // y from 1 to 3, padded by a tenth of the range (0.2): 0.8 .. 3.2 maps to 260 .. 40 (top 40,
    // height 220), so y = 1 is at 260 - 220 * 0.2 / 2.4 and y = 3 at 40 + 220 * 0.2 / 2.4.
    const std::string svg =
        svg::line_charts({{"loss", "epoch", {{"train", {1.0, 2.0, 3.0}}, {"dev", {3.0, 2.0, 1.0}}}}});
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
    CHECK(occurrences(svg, "<polyline") == 2);
    CHECK(occurrences(svg, "<circle") == 6);
    std::smatch m;
    REQUIRE(
        std::regex_search(svg, m, std::regex("points='([0-9.]+),([0-9.]+) ([0-9.]+),([0-9.]+) ([0-9.]+),([0-9.]+)")));
    CHECK(std::stod(m[1]) == doctest::Approx(70));   // x = 1 at the left edge
    CHECK(std::stod(m[5]) == doctest::Approx(350));  // x = 3 at the right edge (70 + 280)
    CHECK(std::stod(m[2]) == doctest::Approx(260 - 220 * 0.2 / 2.4));
    CHECK(std::stod(m[4]) == doctest::Approx(150));  // the middle value in the middle
    CHECK(std::stod(m[6]) == doctest::Approx(40 + 220 * 0.2 / 2.4));
    CHECK_THROWS_AS(svg::line_charts({{"t", "x", {{"a", {1.0}}, {"b", {1.0, 2.0}}}}}), UserError);
    CHECK_THROWS_AS(svg::line_charts({{"t", "x", {}}}), UserError);
}

TEST_CASE("svg line_charts: values that are never negative get no negative axis, ticks in 4 significant digits") {
    // 100 and 2000, padded by a tenth of 1900: 100 - 190 would be below 0, so the axis starts at 0
    // and ends at 2190; its five ticks are 0, 547.5, 1095, 1642.5 and 2190.
    const std::string svg = svg::line_charts({{"memory", "size", {{"MiB", {100.0, 2000.0}}}}});
    CHECK(svg.find("text-anchor='end'>0<") != std::string::npos);
    CHECK(svg.find("text-anchor='end'>547.5<") != std::string::npos);
    CHECK(svg.find("text-anchor='end'>2190<") != std::string::npos);
    CHECK(svg.find("text-anchor='end'>-") == std::string::npos);
    // Values that go below 0 keep their padding below.
    const std::string signed_svg = svg::line_charts({{"change", "step", {{"d", {-1.0, 1.0}}}}});
    CHECK(signed_svg.find("text-anchor='end'>-1.2<") != std::string::npos);
}

TEST_CASE("svg heat_rows: one cell per label shaded from the row's min to max -- labels escaped") {
    const std::string svg = svg::heat_rows({{"question", {"who", "<b>", "it's"}, {0.1, 0.5, 0.3}}});
    CHECK(occurrences(svg, "width='28'") == 3);
    CHECK(svg.find("rgb(255,255,255)") != std::string::npos);  // 0.1, the smallest: white
    CHECK(svg.find("rgb(35,105,255)") != std::string::npos);   // 0.5, the largest: 255 - 220, 255 - 150
    CHECK(svg.find("rgb(145,180,255)") != std::string::npos);  // 0.3, half way
    CHECK(svg.find("&lt;b&gt;") != std::string::npos);
    CHECK(svg.find("it&apos;s") != std::string::npos);
    CHECK(svg.find("<b>") == std::string::npos);
    CHECK(svg.find(">0.50<") != std::string::npos);
    CHECK_THROWS_WITH_AS(svg::heat_rows({{"row", {"a", "b"}, {1.0}}}), doctest::Contains("2 labels and 1 values"),
                         UserError);
}

TEST_CASE(
    "svg heat_map: a cell per row and column shaded from 0 to the largest value -- labels escaped, bad input refused") {
    const std::string svg = svg::heat_map("'cat' <alignment>", {"K", "AE", "T"}, {"c", "a", "t"},
                                          {{0.8, 0.2, 0.0}, {0.1, 0.8, 0.1}, {0.0, 0.4, 0.6}});
    CHECK(occurrences(svg, "width='28'") == 9);
    CHECK(occurrences(svg, "rgb(35,105,255)") == 2);   // 0.8, the largest: 255 - 220, 255 - 150
    CHECK(occurrences(svg, "rgb(255,255,255)") == 2);  // the two zeros: white
    CHECK(occurrences(svg, "rgb(145,180,255)") == 1);  // 0.4, half of 0.8
    CHECK(svg.find("&apos;cat&apos; &lt;alignment&gt;") != std::string::npos);
    CHECK(svg.find(">AE<") != std::string::npos);
    CHECK_THROWS_WITH_AS(svg::heat_map("m", {"a"}, {"x", "y"}, {{1.0}}), doctest::Contains("1 values for 2 columns"),
                         UserError);
    CHECK_THROWS_WITH_AS(svg::heat_map("m", {"a", "b"}, {"x"}, {{1.0}}), doctest::Contains("2 row labels for 1 rows"),
                         UserError);
    CHECK_THROWS_WITH_AS(svg::heat_map("m", {"a"}, {"x"}, {{-1.0}}), doctest::Contains("at least 0"), UserError);
}
