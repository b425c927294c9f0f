#pragma once
// The words a g2p model reads: every word of every input (training and --eval dictionaries,
// --predict words and lists) is checked before any work, named with its file and line, and folded
// to the model's lower-case letters.
#include <cstddef>
#include <string>

#include <loom.hpp>

namespace g2p {

// The most letters a word may have. CMUdict's longest word has 28; a word's cost (its encoder
// states, the attention over them in every decoder step of every hypothesis, a batch padded to its
// longest word) grows with its length, so one pasted paragraph cannot take gigabytes.
inline constexpr std::size_t max_letters = 64;

// Why the model cannot read `word` ("" when it can): a character outside its letters and the ASCII
// upper case that model_word folds, named whole (the two bytes of 'é', not half of it), or more
// than max_letters letters. The word is shown cut short.
std::string word_problem(const std::string& word);

// `word` as the model reads it: ASCII upper case folded to lower case (CMUdict 0.7b, the form most
// copies of CMUdict take, is upper case). Throws UserError "where: ..." with word_problem's reason.
std::string model_word(const std::string& word, const std::string& where);

// A dictionary's words as the model reads them (model_word; errors name "file:line"): words that
// differ only in case become one, their pronunciations merged. *folded counts the words whose case
// changed.
loom::PronunciationDictionary model_dictionary(const loom::PronunciationDictionary& dictionary,
                                               std::size_t* folded = nullptr);

}  // namespace g2p
