// Fuzz target: reading a pronunciation dictionary, then scoring it against itself. What is read
// must hold together: words and their pronunciations in parallel, each word found again, phonemes
// from the 39 without stress, at most max_pronunciation_phonemes a pronunciation, no pronunciation
// twice; each word's first pronunciation scores no error against its own references, and the next
// word's one at most its own length in errors.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/pronunciations.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    try {
        const loom::PronunciationDictionary dictionary = loom::parse_pronunciations(in, "fuzz.dict");
        const auto& words = dictionary.words();
        const auto& references = dictionary.pronunciations();
        const std::vector<std::string>& inventory = loom::arpabet_phonemes();
        std::size_t count = 0;
        if (words.empty() || words.size() != references.size()) __builtin_trap();
        for (std::size_t i = 0; i < words.size(); ++i) {
            if (dictionary.find(words[i]) != &references[i] || references[i].empty()) __builtin_trap();
            for (std::size_t r = 0; r < references[i].size(); ++r) {
                const loom::Pronunciation& p = references[i][r];
                if (p.empty() || p.size() > loom::max_pronunciation_phonemes ||
                    std::find(references[i].begin(), references[i].begin() + r, p) != references[i].begin() + r)
                    __builtin_trap();
                for (const std::string& phoneme : p)
                    if (!std::binary_search(inventory.begin(), inventory.end(), phoneme)) __builtin_trap();
            }
            count += references[i].size();
        }
        if (count != dictionary.num_pronunciations()) __builtin_trap();

        std::vector<loom::Pronunciation> first, next;
        for (std::size_t i = 0; i < words.size(); ++i) {
            first.push_back(references[i].front());
            next.push_back(references[(i + 1) % words.size()].front());
        }
        const loom::G2PScore own = loom::score_pronunciations(first, references);
        if (own.words != words.size() || own.word_errors != 0 || own.phoneme_errors != 0 || own.per() != 0.0)
            __builtin_trap();
        const loom::G2PScore shifted = loom::score_pronunciations(next, references);
        std::size_t longest = 0;  // an edit distance is at most the longer sequence's length
        for (std::size_t i = 0; i < words.size(); ++i) {
            const std::size_t d = loom::edit_distance(next[i], first[i]);
            if (d != loom::edit_distance(first[i], next[i]) || d > std::max(next[i].size(), first[i].size()))
                __builtin_trap();
            longest += std::max(next[i].size(), first[i].size());
        }
        if (shifted.word_errors > shifted.words || shifted.phoneme_errors > longest) __builtin_trap();
    } catch (const loom::Error&) {
    }
    return 0;
}
