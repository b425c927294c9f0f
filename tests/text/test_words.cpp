// Word statistics (text/words.hpp): IDF tables kept as text inside a model file, beside a
// vocabulary's text, and the crude stemmer.
#include <doctest/doctest.h>

#include <sstream>

#include "core/errors.hpp"
#include "text/vocabulary.hpp"
#include "text/words.hpp"

using namespace loom;

TEST_CASE("idf table as text: round trip and malformed text named by source and line") {
    const IdfTable idf = IdfTable::fit({{"a", "b"}, {"a"}, {"c d"}});
    const IdfTable back = IdfTable::parse(idf.to_text(), "m.loom (idf)");
    CHECK(back.documents == 3);
    CHECK(back.document_frequency == idf.document_frequency);
    CHECK(back("b") == idf("b"));
    auto bad = [](const std::string& text, const std::string& where) {
        CAPTURE(text);
        CHECK_THROWS_WITH_AS(IdfTable::parse(text, "m"), doctest::Contains(where.c_str()), DataError);
    };
    bad("", "m:1: expected 'documents N'");
    bad("documents 0\n", "m:1:");
    bad("documents 2\na\t1\na\t1\n", "m:3: expected word<TAB>document frequency");
    bad("documents 2\na\t3\n", "m:2:");
    bad("documents 2\na 1\n", "m:2:");
    // The count of documents is a whole number a corpus can have: inf and nan would score every pair
    // nan, 1e308 would shift every score; each is refused at its line.
    for (const char* n : {"inf", "nan", "-inf", "1e308", "2.5", "3x", "1e16"})
        bad(std::string("documents ") + n + "\n", "m:1:");
    bad("documents 2\na\tnan\n", "m:2:");
    bad("documents 2\na\t1.5\n", "m:2:");
    bad("documents 2\na\t1 \n", "m:2:");

    const Vocabulary v = Vocabulary::build({{"b", "a", "b"}});
    std::istringstream text(v.to_text());
    const Vocabulary w = Vocabulary::parse(text, "mem");
    REQUIRE(w.size() == 4);
    CHECK(w.id("b") == v.id("b"));
    CHECK(w.id("a") == v.id("a"));
    // From the text itself, as a model file's record holds it.
    const Vocabulary x = Vocabulary::parse(v.to_text(), "record");
    REQUIRE(x.size() == 4);
    CHECK(x.id("b") == v.id("b"));
    CHECK_THROWS_WITH_AS(Vocabulary::parse(std::string("not a vocabulary\n"), "record"), doctest::Contains("record:1"),
                         DataError);
}

TEST_CASE("crude stem: inflections of one word meet and other words stay apart") {
    CHECK(crude_stem("games") == "gam");
    CHECK(crude_stem("game") == "gam");  // a final e goes, so "game" meets "games"
    CHECK(crude_stem("studies") == "study");
    CHECK(crude_stem("founded") == "found");
    CHECK(crude_stem("founding") == "found");
    CHECK(crude_stem("stopped") == "stop");  // doubled consonant undone
    CHECK(crude_stem("filled") == "fill");   // but not a double l
    CHECK(crude_stem("boxes") == "box");
    CHECK(crude_stem("quickly") == "quick");
    CHECK(crude_stem("glass") == "glass");  // -ss is not a plural
    CHECK(crude_stem("was") == "was");      // shorter than 4 letters
    CHECK(crude_stem("1990s") == "1990s");  // not all letters
    CHECK(crude_stem("wrote") != crude_stem("written"));
}
