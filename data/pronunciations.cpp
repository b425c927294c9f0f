#include "data/pronunciations.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <numeric>
#include <string_view>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "data/text.hpp"

namespace loom {

const std::vector<std::string>& arpabet_phonemes() {
    // Sorted, so a lookup is a binary search.
    static const std::vector<std::string> phonemes = {"AA", "AE", "AH", "AO", "AW", "AY", "B",  "CH", "D",  "DH",
                                                      "EH", "ER", "EY", "F",  "G",  "HH", "IH", "IY", "JH", "K",
                                                      "L",  "M",  "N",  "NG", "OW", "OY", "P",  "R",  "S",  "SH",
                                                      "T",  "TH", "UH", "UW", "V",  "W",  "Y",  "Z",  "ZH"};
    return phonemes;
}

PronunciationDictionary::PronunciationDictionary(std::string source) : source_(std::move(source)) {}

const std::vector<Pronunciation>* PronunciationDictionary::find(const std::string& word) const {
    const auto it = index_.find(word);
    return it == index_.end() ? nullptr : &pronunciations_[it->second];
}

bool PronunciationDictionary::add(const std::string& word, Pronunciation pronunciation, std::size_t line) {
    if (word.empty()) throw UserError("'" + source_ + "': cannot add a pronunciation of an empty word");
    if (pronunciation.empty())
        throw UserError("'" + source_ + "': cannot add an empty pronunciation of " + quoted_field(word));
    const auto [it, inserted] = index_.try_emplace(word, words_.size());
    if (inserted) {
        words_.push_back(word);
        pronunciations_.emplace_back();
        lines_.push_back(line);
    }
    std::vector<Pronunciation>& known = pronunciations_[it->second];
    if (std::find(known.begin(), known.end(), pronunciation) != known.end()) {
        ++merged_repeats_;
        return false;
    }
    known.push_back(std::move(pronunciation));
    ++num_pronunciations_;
    return true;
}

namespace {

// The phoneme `token` is without its stress digit (one of arpabet_phonemes()), or "" when it is not
// an ARPAbet phoneme.
std::string_view unstressed(std::string_view token) {
    if (token.size() >= 2 && token.back() >= '0' && token.back() <= '2') token.remove_suffix(1);
    const std::vector<std::string>& inventory = arpabet_phonemes();
    const auto it = std::lower_bound(inventory.begin(), inventory.end(), token);
    return it != inventory.end() && *it == token ? std::string_view(*it) : std::string_view();
}

std::string ascii_upper(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return out;
}

// Why a token is not a phoneme, with the likely slip when there is one.
std::string phoneme_problem(std::string_view token, const std::string& word) {
    std::string hint;
    if (const std::string upper = ascii_upper(token); upper != token && !unstressed(upper).empty())
        hint = " (phonemes are upper case: " + quoted_field(upper) + ")";
    else if (token.size() >= 2 && token.back() >= '3' && token.back() <= '9' &&
             !unstressed(token.substr(0, token.size() - 1)).empty())
        hint = " (stress digits are 0, 1 and 2)";
    std::string all;
    for (const std::string& p : arpabet_phonemes()) (all += ' ') += p;
    return "phoneme " + quoted_field(token) + " of " + quoted_field(word) + " is not an ARPAbet phoneme" + hint +
           "; expected one of the 39 symbols" + all + ", optionally followed by a stress digit 0, 1 or 2";
}

// The word a line's first column names: "abbey(2)", another pronunciation of "abbey", is "abbey".
std::string word_of(const std::string& column, const data_text::LineReader& lines) {
    const std::size_t open = column.find('('), close = column.find(')');
    if (open == std::string::npos && close == std::string::npos) return column;
    const bool numbered =
        open != std::string::npos && open > 0 && close == column.size() - 1 && close > open + 1 &&
        std::all_of(column.begin() + static_cast<std::ptrdiff_t>(open) + 1,
                    column.begin() + static_cast<std::ptrdiff_t>(close), [](char c) { return c >= '0' && c <= '9'; });
    if (!numbered)
        lines.fail("word " + quoted_field(column) + " has a malformed variant suffix" +
                   (open == 0 ? " and no word before it" : "") +
                   "; another pronunciation of a word is written 'word(2)', a number in parentheses right after "
                   "the word, and a word itself holds no parentheses");
    return column.substr(0, open);
}

// The first word of `text` (which has one), split from as little of it as holds that word whole.
std::string first_word(std::string_view text) {
    for (std::size_t n = 256;; n *= 2) {
        const std::vector<std::string> words = data_text::split_whitespace(text.substr(0, n));
        if (words.size() >= 2 || (!words.empty() && n >= text.size())) return words[0];
    }
}

}  // namespace

PronunciationDictionary read_pronunciations(const std::string& path) {
    if (const std::string kind = data_text::irregular_kind(path); !kind.empty())
        throw DataError("'" + path + "' is " + kind +
                        ", not a regular file; give the path of a pronunciation dictionary file (to read from a "
                        "pipe, copy it to a file first)");
    std::ifstream in = data_text::open_for_reading(path);
    return parse_pronunciations(in, path);
}

PronunciationDictionary parse_pronunciations(std::istream& in, const std::string& source) {
    PronunciationDictionary dictionary(source);
    data_text::LineReader lines(in, source, data_text::TextCheck::utf8);
    std::string line;
    while (lines.next(line)) {
        const std::string_view text = std::string_view(line).substr(0, line.find('#'));
        // Counted before they are split: a line of millions of phonemes is refused without holding them.
        if (const std::size_t count = data_text::count_words(text); count > max_pronunciation_phonemes + 1) {
            lines.fail("the pronunciation of " + quoted_field(first_word(text)) + " has " + std::to_string(count - 1) +
                       " phonemes; a pronunciation may have at most " + std::to_string(max_pronunciation_phonemes));
        }
        const std::vector<std::string> columns = data_text::split_whitespace(text);
        if (columns.empty()) continue;
        const std::string word = word_of(columns[0], lines);
        if (columns.size() == 1)
            lines.fail("word " + quoted_field(columns[0]) +
                       " has no phonemes; a line is the word and then its phonemes, separated by spaces: "
                       "'abbey AE1 B IY0'");
        Pronunciation phonemes;
        phonemes.reserve(columns.size() - 1);
        for (std::size_t i = 1; i < columns.size(); ++i) {
            const std::string_view phoneme = unstressed(columns[i]);
            if (phoneme.empty()) lines.fail(phoneme_problem(columns[i], columns[0]));
            phonemes.emplace_back(phoneme);
        }
        dictionary.add(word, std::move(phonemes), lines.line_number());
    }
    // No caller wants an empty dictionary: a model trained or scored on it learns and says nothing.
    if (dictionary.size() == 0)
        data_text::fail(source, std::max<std::size_t>(lines.line_number(), 1),
                        std::string(lines.line_number() == 0 ? "empty file" : "only blank lines and comments") +
                            ": no pronunciations (a dictionary has lines 'word PH1 PH2 ...', such as "
                            "'abbey AE1 B IY0')");
    return dictionary;
}

std::size_t edit_distance(std::span<const std::string> a, std::span<const std::string> b) {
    if (a.size() < b.size()) std::swap(a, b);  // one row as long as the shorter sequence
    // row[j] is the distance between the first i phonemes of a and the first j of b.
    std::vector<std::size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), std::size_t{0});
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];  // the distance for (i - 1, j - 1)
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

double G2PScore::wer() const {
    return words == 0 ? 0.0 : static_cast<double>(word_errors) / static_cast<double>(words);
}

double G2PScore::per() const {
    return reference_phonemes == 0 ? 0.0
                                   : static_cast<double>(phoneme_errors) / static_cast<double>(reference_phonemes);
}

G2PScore score_pronunciations(std::span<const Pronunciation> predictions,
                              std::span<const std::vector<Pronunciation>> references) {
    if (predictions.size() != references.size())
        throw UserError("score_pronunciations: " + std::to_string(predictions.size()) + " predictions for " +
                        std::to_string(references.size()) +
                        " words with references; give one predicted pronunciation per word, in the same order");
    G2PScore score;
    score.words = predictions.size();
    for (std::size_t i = 0; i < predictions.size(); ++i) {
        if (references[i].empty())
            throw UserError("score_pronunciations: word " + std::to_string(i) +
                            " has no reference pronunciation; every scored word needs at least one");
        std::size_t closest_distance = std::numeric_limits<std::size_t>::max(), closest_length = 0;
        for (std::size_t r = 0; r < references[i].size(); ++r) {
            const Pronunciation& reference = references[i][r];
            if (reference.empty())
                throw UserError("score_pronunciations: reference " + std::to_string(r) + " of word " +
                                std::to_string(i) + " is empty; a reference pronunciation has at least one phoneme");
            const std::size_t distance = edit_distance(predictions[i], reference);
            if (distance < closest_distance || (distance == closest_distance && reference.size() < closest_length)) {
                closest_distance = distance;
                closest_length = reference.size();
            }
        }
        score.word_errors += closest_distance != 0 ? 1 : 0;
        score.phoneme_errors += closest_distance;
        score.reference_phonemes += closest_length;
    }
    return score;
}

}  // namespace loom
