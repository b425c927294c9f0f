#include "text/vocabulary.hpp"

#include <algorithm>
#include <sstream>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "data/output_files.hpp"
#include "data/text.hpp"

namespace loom {

namespace {

const std::string header = "loom-vocabulary 1";

}  // namespace

Vocabulary::Vocabulary() {
    add(padding_word);
    add(unknown_word);
}

void Vocabulary::add(const std::string& word) {
    index_.emplace(word, words_.size());
    words_.push_back(word);
}

Vocabulary Vocabulary::build(const std::vector<std::vector<std::string>>& token_lists,
                             const VocabularyOptions& options) {
    if (options.max_size != 0 && options.max_size < 2)
        throw UserError("Vocabulary: max_size " + std::to_string(options.max_size) +
                        " leaves no room for the padding and unknown entries; use 0 (no limit) or >= 2");
    std::unordered_map<std::string, std::size_t> counts;
    for (const auto& tokens : token_lists)
        for (const auto& token : tokens) ++counts[token];

    std::vector<std::pair<std::string, std::size_t>> ranked;
    ranked.reserve(counts.size());
    for (auto& [word, count] : counts) {
        // A literal "<pad>" or "<unk>" in the data already has its reserved id.
        if (word == padding_word || word == unknown_word) continue;
        if (count >= std::max<std::size_t>(options.min_count, 1)) ranked.emplace_back(word, count);
    }
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });

    Vocabulary vocab;
    const std::size_t room = options.max_size == 0 ? ranked.size() : options.max_size - 2;
    for (std::size_t i = 0; i < std::min(room, ranked.size()); ++i) vocab.add(ranked[i].first);
    return vocab;
}

std::size_t Vocabulary::id(const std::string& word) const {
    const auto it = index_.find(word);
    return it == index_.end() ? unknown_id : it->second;
}

std::vector<std::size_t> Vocabulary::ids(const std::vector<std::string>& tokens) const {
    std::vector<std::size_t> out;
    out.reserve(tokens.size());
    for (const auto& t : tokens) out.push_back(id(t));
    return out;
}

const std::string& Vocabulary::word(std::size_t word_id) const {
    if (word_id >= words_.size())
        throw UserError("Vocabulary: id " + std::to_string(word_id) + " is out of range (size " +
                        std::to_string(words_.size()) + ")");
    return words_[word_id];
}

namespace {

// What keeps a word from being saved and read back as itself, or "" when nothing does. Tokens
// never hold spaces at their ends (the readers split on them), so such a word in a file is an
// editing slip that would silently map its token to the unknown id.
std::string unsavable(const std::string& word) {
    if (word.empty()) return "it is empty";
    if (word.find_first_of("\n\r") != std::string::npos) return "it spans lines";
    if (word.find('\0') != std::string::npos) return "it holds a NUL byte";
    if (data_text::invalid_utf8_at(word) != std::string::npos) return "it is not valid UTF-8";
    if (std::string_view(" \t").find(word.front()) != std::string_view::npos ||
        std::string_view(" \t").find(word.back()) != std::string_view::npos)
        return "it starts or ends with a space or tab";
    return {};
}

}  // namespace

std::string Vocabulary::to_text(const std::string& destination) const {
    std::string text = header + "\n";
    for (std::size_t i = 0; i < words_.size(); ++i) {
        if (const std::string why = unsavable(words_[i]); !why.empty())
            throw UserError("Vocabulary: cannot save word " + quoted_field(words_[i]) + " (id " + std::to_string(i) +
                            ") to '" + destination + "': " + why);
        text += words_[i];
        text += '\n';
    }
    return text;
}

void Vocabulary::save(const std::string& path) const { write_text_atomically(path, to_text(path)); }

Vocabulary Vocabulary::load(const std::string& path) {
    std::ifstream in = data_text::open_for_reading(path);
    return parse(in, path);
}

Vocabulary Vocabulary::parse(const std::string& text, const std::string& source) {
    std::istringstream in(text);
    return parse(in, source);
}

Vocabulary Vocabulary::parse(std::istream& in, const std::string& source) {
    // Words are checked one by one (unsavable), so that a binary file is "not a vocabulary file"
    // rather than a file with a bad byte.
    data_text::LineReader lines(in, source, data_text::TextCheck::none);
    std::string line;
    if (!lines.next(line))
        data_text::fail(source, 1, "empty file, not a loom vocabulary file (the first line must be '" + header + "')");
    if (line != header)
        lines.fail("not a loom vocabulary file (the first line must be '" + header + "', found " + quoted_field(line) +
                   ")");
    Vocabulary vocab;
    vocab.words_.clear();
    vocab.index_.clear();
    while (lines.next(line)) {
        const std::size_t expected_id = vocab.words_.size();
        if (line.empty()) lines.fail("empty word (id " + std::to_string(expected_id) + ")");
        if (const std::string why = unsavable(line); !why.empty())
            lines.fail("word " + quoted_field(line) + " (id " + std::to_string(expected_id) +
                       ") is not usable: " + why);
        if (expected_id == padding_id && line != padding_word)
            lines.fail("id 0 must be the padding word '" + padding_word + "', found " + quoted_field(line));
        if (expected_id == unknown_id && line != unknown_word)
            lines.fail("id 1 must be the unknown word '" + unknown_word + "', found " + quoted_field(line));
        if (const auto it = vocab.index_.find(line); it != vocab.index_.end())
            lines.fail("word " + quoted_field(line) + " appears twice (first as id " + std::to_string(it->second) +
                       ")");
        vocab.add(line);
    }
    if (vocab.words_.size() < 2) lines.fail("truncated vocabulary: the padding and unknown entries are missing");
    return vocab;
}

}  // namespace loom
