// The g2p sample's input checks (samples/g2p/words.hpp): the model's letters, upper case folded,
// a bound on a word's letters, every error naming where the word came from and the whole character.
#include <doctest/doctest.h>

#include <sstream>

#include "core/errors.hpp"
#include "g2p/words.hpp"

using namespace loom;

TEST_CASE("g2p words: upper case is read as lower case, as CMUdict 0.7b writes its words") {
    CHECK(g2p::model_word("ABBEY", "x") == "abbey");
    CHECK(g2p::model_word("O'Neil", "x") == "o'neil");
    CHECK(g2p::model_word("x-ray.", "x") == "x-ray.");
    std::istringstream in("ABBEY AE1 B IY0\nabbey(2) AE1 B IY2 Z\nCAT K AE1 T\ndog D AO1 G\n");
    const PronunciationDictionary upper = parse_pronunciations(in, "upper.dict");
    std::size_t folded = 0;
    const PronunciationDictionary d = g2p::model_dictionary(upper, &folded);
    CHECK(folded == 2);
    REQUIRE(d.words() == std::vector<std::string>{"abbey", "cat", "dog"});
    CHECK(d.pronunciations()[0] == std::vector<Pronunciation>{{"AE", "B", "IY"}, {"AE", "B", "IY", "Z"}});
    CHECK(d.line(1) == 3);
    CHECK(d.source() == "upper.dict");
}

TEST_CASE("g2p words: a character outside the letters is named whole, with the file and line") {
    std::istringstream in("abbey AE1 B IY0\n\ncafé K AE0 F EY1\n");
    const PronunciationDictionary d = parse_pronunciations(in, "d.dict");
    CHECK_THROWS_WITH_AS(g2p::model_dictionary(d), doctest::Contains("d.dict:3: the word 'café' holds 'é'"), UserError);
    CHECK_THROWS_WITH_AS(g2p::model_word("3d", "--predict word 2"),
                         doctest::Contains("--predict word 2: the word '3d' holds '3'"), UserError);
    CHECK_THROWS_WITH_AS(g2p::model_word("日本", "w:1"), doctest::Contains("holds '日'"), UserError);
    CHECK_THROWS_WITH_AS(g2p::model_word("new york", "w:1"), doctest::Contains("holds ' '"), UserError);
    CHECK(g2p::word_problem("abc").empty());
}

TEST_CASE("g2p words: a word of more than 64 letters is refused, shown cut short, with the limit") {
    CHECK(g2p::word_problem(std::string(64, 'a')).empty());
    const std::string long_word(100000, 'a');
    try {
        g2p::model_word(long_word, "list.txt:7");
        FAIL("a word of 100,000 letters was accepted");
    } catch (const UserError& e) {
        const std::string message = e.what();
        CHECK(message.starts_with("list.txt:7: the word 'aaaa"));
        CHECK(message.find("100000 letters") != std::string::npos);
        CHECK(message.find("at most 64") != std::string::npos);
        CHECK(message.size() < 300);
    }
}
