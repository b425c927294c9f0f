// The raw-English tokenizer: each rule of text/tokenize.hpp on a sentence written for it, with
// the expected tokens spelled out by hand, and pre-tokenised text (SelQA's style) left as it is.
#include <doctest/doctest.h>

#include <loom.hpp>

using loom::tokenize_english;
using Tokens = std::vector<std::string>;

TEST_CASE("tokenize_english: lowercases and splits punctuation off words") {
    CHECK(tokenize_english("Who wrote Hamlet?") == Tokens{"who", "wrote", "hamlet", "?"});
    CHECK(tokenize_english("  Paris,France.  ") == Tokens{"paris", ",", "france", "."});
    CHECK(tokenize_english("(the end)") == Tokens{"(", "the", "end", ")"});
    CHECK(tokenize_english("").empty());
    CHECK(tokenize_english(" \t ").empty());
}

TEST_CASE("tokenize_english: numbers stay whole") {
    CHECK(tokenize_english("In 1990 it cost $3.50 for 10,900 units.") ==
          Tokens{"in", "1990", "it", "cost", "$", "3.50", "for", "10,900", "units", "."});
    CHECK(tokenize_english("rose 5%.") == Tokens{"rose", "5", "%", "."});
    CHECK(tokenize_english("1, 2") == Tokens{"1", ",", "2"});
}

TEST_CASE("tokenize_english: clitics hyphens and abbreviations") {
    CHECK(tokenize_english("Israel's") == Tokens{"israel", "'s"});
    CHECK(tokenize_english("don't") == Tokens{"do", "n't"});
    CHECK(tokenize_english("they're we've I'll he'd I'm") ==
          Tokens{"they", "'re", "we", "'ve", "i", "'ll", "he", "'d", "i", "'m"});
    CHECK(tokenize_english("O'Neill") == Tokens{"o'neill"});
    CHECK(tokenize_english("sci-fi - K-12") == Tokens{"sci-fi", "-", "k-12"});
    CHECK(tokenize_english("the U.S. and e.g. this.") == Tokens{"the", "u.s.", "and", "e.g.", "this", "."});
    CHECK(tokenize_english("'quoted'") == Tokens{"'", "quoted", "'"});
}

TEST_CASE("tokenize_english: runs of one punctuation mark and curly quotes") {
    CHECK(tokenize_english("wait... what?!") == Tokens{"wait", "...", "what", "?", "!"});
    CHECK(tokenize_english("\u201cHi\u201d \u2014 it\u2019s") == Tokens{"\"", "hi", "\"", "-", "it", "'s"});
}

TEST_CASE("tokenize_english: a carriage return or tab only separates") {
    CHECK(tokenize_english("end\r") == Tokens{"end"});
    CHECK(tokenize_english("a\rb\tc") == Tokens{"a", "b", "c"});
}

TEST_CASE("tokenize_english: pre-tokenised text comes out as it went in") {
    const std::string selqa = "Israel 's national Holocaust museum , Yad Vashem , is n't the U.S. ( 10,900 ) .";
    CHECK(tokenize_english(selqa) == Tokens{"israel", "'s", "national", "holocaust", "museum", ",", "yad", "vashem",
                                            ",", "is", "n't", "the", "u.s.", "(", "10,900", ")", "."});
    // Tokenizing twice changes nothing.
    const Tokens once = tokenize_english("He said: \"Don't go,\" at 3.5 p.m. in the U.K.'s capital!");
    std::string joined;
    for (const auto& t : once) joined += t + " ";
    CHECK(tokenize_english(joined) == once);
}

TEST_CASE("tokenize_english: UTF-8 letters stay inside words") {
    CHECK(tokenize_english("Musée Dalí") == Tokens{"musée", "dalí"});
}

TEST_CASE("tokenize_english: Unicode spaces separate words as a space does") {
    // U+00A0 no-break space, U+200B zero-width space, U+2009 thin space, U+202F narrow no-break
    // space, U+3000 ideographic space, U+FEFF zero-width no-break space, U+0085 next line.
    CHECK(tokenize_english("Who\xC2\xA0wrote\xE2\x80\x8BHamlet?") == Tokens{"who", "wrote", "hamlet", "?"});
    CHECK(tokenize_english("a\xE2\x80\x89"
                           "b\xE2\x80\xAF"
                           "c\xE3\x80\x80"
                           "d\xEF\xBB\xBF"
                           "e\xC2\x85"
                           "f") == Tokens{"a", "b", "c", "d", "e", "f"});
    CHECK(tokenize_english("\xC2\xA0\xE2\x80\x8B").empty());
    // Letters whose UTF-8 bytes look like a space's stay inside words: U+00E0 (C3 A0), U+2080 (E2 82 80).
    CHECK(tokenize_english("\xC3\xA0la x\xE2\x82\x80") == Tokens{"\xC3\xA0la", "x\xE2\x82\x80"});
}
