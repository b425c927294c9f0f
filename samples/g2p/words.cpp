#include "words.hpp"

#include <algorithm>

#include "core/utf8.hpp"
#include "model.hpp"

using namespace loom;

namespace g2p {

std::string word_problem(const std::string& word) {
    if (word.empty()) return "an empty word";
    const std::string shown = quoted_field(word);
    if (word.size() > max_letters)
        return "the word " + shown + " has " + std::to_string(word.size()) + " letters; a word may have at most " +
               std::to_string(max_letters);
    for (std::size_t i = 0; i < word.size();) {
        if (letter_index(word[i]) < letter_count() || (word[i] >= 'A' && word[i] <= 'Z')) {
            ++i;
            continue;
        }
        const std::size_t length = std::max<std::size_t>(utf8_sequence_length(std::string_view(word).substr(i)), 1);
        return "the word " + shown + " holds " + quoted_field(word.substr(i, length)) +
               "; the model's letters are a to z, ' . and - (upper case is read as lower case)";
    }
    return "";
}

std::string model_word(const std::string& word, const std::string& where) {
    if (const std::string why = word_problem(word); !why.empty()) throw UserError(where + ": " + why);
    std::string folded = word;
    for (char& c : folded)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return folded;
}

PronunciationDictionary model_dictionary(const PronunciationDictionary& dictionary, std::size_t* folded) {
    PronunciationDictionary out(dictionary.source());
    std::size_t changed = 0;
    for (std::size_t i = 0; i < dictionary.size(); ++i) {
        const std::string& word = dictionary.words()[i];
        const std::string where = dictionary.source() + ":" + std::to_string(dictionary.line(i));
        const std::string lower = model_word(word, where);
        changed += lower != word;
        for (const Pronunciation& p : dictionary.pronunciations()[i]) out.add(lower, p, dictionary.line(i));
    }
    if (folded) *folded = changed;
    return out;
}

}  // namespace g2p
