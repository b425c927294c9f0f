#pragma once
/// \file
/// A tokenizer for raw English text, so that a model trained on one file sees the same tokens when
/// it later scores text typed by someone else: "Who wrote Hamlet?" and "who wrote hamlet ?" give
/// the same tokens. Rules, in the spirit of the Penn Treebank tokenization most QA data sets use:
///   - ASCII letters are lowercased; bytes of UTF-8 characters are kept as they are, inside words,
///     except curly quotes and en/em dashes, which become ' " and - first;
///   - a word is a run of letters and digits; a hyphen, or an apostrophe, between two of them stays
///     inside ("sci-fi", "o'neill"), and so do ',' and '.' between two digits ("10,900", "3.5");
///     dotted abbreviations of single letters stay whole ("u.s.", "e.g.");
///   - the clitics 's 're 've 'll 'd 'm and n't are split off as tokens of their own ("don't" ->
///     "do" "n't", "Israel's" -> "israel" "'s");
///   - every other character is a token of its own, a run of the same one is one token ("...", "--");
///   - whitespace and control characters (a stray carriage return too) only separate tokens, and
///     so do Unicode spaces (no-break, zero-width and the other space separators: core/utf8.hpp).
/// Already tokenised text comes out as it went in, lowercased (SelQA's files: "israel 's ."), so
/// one function serves pre-tokenised and raw files alike.
#include <string>
#include <string_view>
#include <vector>

namespace loom {

/// \return the tokens of `text` by the rules above.
std::vector<std::string> tokenize_english(std::string_view text);

}  // namespace loom
