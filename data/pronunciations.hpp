#pragma once
/// \file
/// Pronunciation dictionaries in the CMU Pronouncing Dictionary's format, and the scores of a
/// grapheme-to-phoneme (G2P) model against one.
///
/// A file holds one pronunciation per line, the word and then its ARPAbet phonemes:
///
///   abbey AE1 B IY0
///   abbey(2) AE1 B IY2      <- a second pronunciation of "abbey"
///   aalborg AO1 L B AO0 R G # place, danish
///
/// separated by spaces or tabs. A suffix `(N)` (N a number) marks another pronunciation of the word
/// before it; from a '#' to the end of the line is a comment; blank lines are skipped. Stress digits
/// are dropped (AH0, AH1 and AH2 all read as AH), so a word holds its distinct pronunciations over the
/// 39 phonemes of arpabet_phonemes(): two lines that differ only in stress are one pronunciation.
/// Words are kept as written (no case folding). The file must be UTF-8 (a leading byte-order mark is
/// dropped, CRLF line ends read as LF). A malformed line, a pronunciation of more than
/// max_pronunciation_phonemes phonemes, NUL bytes, invalid UTF-8 and a file without a single
/// pronunciation throw DataError "file:line: reason".
#include <cstddef>
#include <istream>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom {

/// One pronunciation: phonemes such as {"AE", "B", "IY"}.
using Pronunciation = std::vector<std::string>;

/// The most phonemes a pronunciation read from a file may have (CMUdict's longest has 28); a model's
/// cost grows with the length of what it is trained on, so one pasted paragraph of phonemes is
/// refused at its line instead of taking gigabytes.
inline constexpr std::size_t max_pronunciation_phonemes = 256;

/// The 39 ARPAbet phonemes without stress, in alphabetical order: AA AE AH AO AW AY B CH D DH EH ER
/// EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH UW V W Y Z ZH.
const std::vector<std::string>& arpabet_phonemes();

/// Words and their distinct pronunciations, in the order first seen (a CMUdict-format file, read by
/// read_pronunciations, or built by add()).
class PronunciationDictionary {
public:
    /// `source` names the dictionary in messages (the file it was read from).
    explicit PronunciationDictionary(std::string source = "pronunciations");

    /// \return the name given at construction.
    const std::string& source() const { return source_; }
    /// The number of words.
    std::size_t size() const { return words_.size(); }
    /// @{
    /// The words in the order first seen, and parallel to them each word's distinct pronunciations in
    /// the order first seen: the references score_pronunciations takes.
    const std::vector<std::string>& words() const { return words_; }
    const std::vector<std::vector<Pronunciation>>& pronunciations() const { return pronunciations_; }
    /// @}
    /// Over all words.
    std::size_t num_pronunciations() const { return num_pronunciations_; }
    /// How many add() calls (lines of a file) repeated a pronunciation their word already had, once
    /// stress was dropped: "a AH0" and "a(2) AH1" give one pronunciation and one merged repeat.
    std::size_t merged_repeats() const { return merged_repeats_; }

    /// The line of the file word `i` was first read from (for messages: "file:line"); 0 for a word
    /// given to add() without one.
    std::size_t line(std::size_t i) const { return lines_.at(i); }

    /// The word's pronunciations, or nullptr when the dictionary does not hold the word.
    const std::vector<Pronunciation>* find(const std::string& word) const;

    /// Adds a pronunciation of `word` (a new word goes last); false, and only counted in
    /// merged_repeats(), when the word already has it. Phonemes are taken as given (parsing is what
    /// checks them against ARPAbet). `line`: where a new word was read (line()). Throws UserError for
    /// an empty word or pronunciation.
    bool add(const std::string& word, Pronunciation pronunciation, std::size_t line = 0);

private:
    std::string source_;
    std::vector<std::string> words_;
    std::vector<std::vector<Pronunciation>> pronunciations_;
    std::vector<std::size_t> lines_;
    std::unordered_map<std::string, std::size_t> index_;
    std::size_t num_pronunciations_ = 0;
    std::size_t merged_repeats_ = 0;
};

/// Reads a dictionary file. Only a regular file is read: a FIFO, a device or a socket is refused by
/// name before it is opened (it could block, or never end), a directory too.
PronunciationDictionary read_pronunciations(const std::string& path);
/// Same, from any stream; `source` names it in error messages.
PronunciationDictionary parse_pronunciations(std::istream& in, const std::string& source);

/// Levenshtein distance: the fewest phoneme insertions, deletions and substitutions (each costing 1)
/// that turn `a` into `b`. Phonemes are compared as strings, exactly as given.
std::size_t edit_distance(std::span<const std::string> a, std::span<const std::string> b);

/// A G2P model's errors over a list of words: the counts, and the two rates made of them.
struct G2PScore {
    std::size_t words = 0;               ///< words scored
    std::size_t word_errors = 0;         ///< words whose prediction equals none of their references
    std::size_t phoneme_errors = 0;      ///< sum over words of the edit distance to the closest reference
    std::size_t reference_phonemes = 0;  ///< sum over words of the closest reference's length

    /// Word error rate: word_errors / words (0 for no words).
    double wer() const;
    /// Phoneme error rate: phoneme_errors / reference_phonemes (0 for no words).
    double per() const;
};

/// Scores predictions[i], one pronunciation per word, against references[i], the word's reference
/// pronunciations (e.g. PronunciationDictionary::pronunciations()). For each word the closest
/// reference is the one at the smallest edit distance from the prediction; among references at the
/// same distance, the shortest (so a tie never lowers the PER), then the first. Then
///
///   WER = (number of words i with no reference equal to p_i) / (number of words)
///   PER = sum_i d(p_i, c_i) / sum_i |c_i|      (d = edit_distance, c_i = word i's closest reference)
///
/// the corpus-level PER of the G2P literature: a ratio of sums, not a mean of per-word ratios. A word
/// is an error exactly when d(p_i, c_i) > 0, so the two rates agree on which words are wrong. Phonemes
/// are compared as given, so predictions must be written in the references' symbols (for a dictionary
/// read from a file, arpabet_phonemes(): no stress digits). An empty prediction is allowed (every
/// reference phoneme is then an error). Throws UserError when the two
/// lists differ in length, or a word has no references or an empty one.
G2PScore score_pronunciations(std::span<const Pronunciation> predictions,
                              std::span<const std::vector<Pronunciation>> references);

}  // namespace loom
