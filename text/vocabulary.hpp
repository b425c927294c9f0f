#pragma once
/// \file
/// A word <-> id table built from training token lists. Id 0 is padding and id 1 the unknown
/// word; real words follow in order of decreasing count (ties broken alphabetically, so the same
/// data always gives the same ids). Saved as UTF-8 text: a header line, then one word per line in
/// id order, so a saved vocabulary can be read and diffed by hand.
#include <cstddef>
#include <istream>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom {

/// What Vocabulary::build keeps.
struct VocabularyOptions {
    std::size_t min_count = 1;  ///< words seen fewer times map to the unknown id
    std::size_t max_size = 0;   ///< total entries including the two reserved ones; 0 = no limit
};

/// Words and their ids: 0 and 1 are reserved for padding and unknown words, the rest are words.
class Vocabulary {
public:
    static constexpr std::size_t padding_id = 0;             ///< the id of padding (never a word's)
    static constexpr std::size_t unknown_id = 1;             ///< the id of every word not in the vocabulary
    static inline const std::string padding_word = "<pad>";  ///< the word of padding_id in files
    static inline const std::string unknown_word = "<unk>";  ///< the word of unknown_id in files

    Vocabulary();  ///< only the two reserved entries

    /// The words of `token_lists`, most frequent first (ties in byte order), after the two reserved
    /// entries, as far as the options allow.
    static Vocabulary build(const std::vector<std::vector<std::string>>& token_lists,
                            const VocabularyOptions& options = {});

    /// \return the number of ids, the two reserved ones included.
    std::size_t size() const { return words_.size(); }
    /// \return whether `word` has an id of its own.
    bool contains(const std::string& word) const { return index_.count(word) != 0; }
    /// Unseen words give unknown_id.
    std::size_t id(const std::string& word) const;
    /// \return the id of each token, unknown_id for unseen ones.
    std::vector<std::size_t> ids(const std::vector<std::string>& tokens) const;
    /// Throws UserError for an id >= size().
    const std::string& word(std::size_t id) const;

    /// Written to a temporary file and renamed into place.
    void save(const std::string& path) const;
    /// The text save() writes, e.g. to keep inside another file; `destination` names it in errors.
    std::string to_text(const std::string& destination = "text") const;
    /// Throws DataError "file:line: reason" for a malformed file: not UTF-8, an empty, duplicate or
    /// space-padded word, reserved entries missing.
    static Vocabulary load(const std::string& path);
    /// Same, from any stream; `source` names it in error messages.
    static Vocabulary parse(std::istream& in, const std::string& source);
    /// Same, from the text to_text() gives (e.g. a record of a model file).
    static Vocabulary parse(const std::string& text, const std::string& source);

private:
    void add(const std::string& word);

    std::vector<std::string> words_;
    std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace loom
