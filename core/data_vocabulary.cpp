#include "core/data_vocabulary.hpp"

#include <algorithm>

#include "core/data_text.hpp"
#include "core/errors.hpp"

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

void Vocabulary::save(const std::string& path) const {
    std::string text = header + "\n";
    for (const auto& w : words_) {
        if (w.empty() || w.find_first_of("\n\r") != std::string::npos)
            throw UserError("Vocabulary: cannot save word '" + w + "' to '" + path +
                            "': words must be non-empty and single-line");
        text += w;
        text += '\n';
    }
    data_text::write_text_atomically(path, text);
}

Vocabulary Vocabulary::load(const std::string& path) {
    std::ifstream in = data_text::open_for_reading(path);
    std::string line;
    if (!data_text::read_line(in, line) || line != header)
        data_text::fail(path, 1, "not a loom vocabulary file (the first line must be '" + header + "')");
    Vocabulary vocab;
    vocab.words_.clear();
    vocab.index_.clear();
    std::size_t line_no = 1;
    while (data_text::read_line(in, line)) {
        ++line_no;
        const std::size_t expected_id = vocab.words_.size();
        if (line.empty()) data_text::fail(path, line_no, "empty word (id " + std::to_string(expected_id) + ")");
        if (expected_id == padding_id && line != padding_word)
            data_text::fail(path, line_no,
                            "id 0 must be the padding word '" + padding_word + "', found '" + line + "'");
        if (expected_id == unknown_id && line != unknown_word)
            data_text::fail(path, line_no,
                            "id 1 must be the unknown word '" + unknown_word + "', found '" + line + "'");
        if (vocab.index_.count(line) != 0)
            data_text::fail(
                path, line_no,
                "word '" + line + "' appears twice (first as id " + std::to_string(vocab.index_.at(line)) + ")");
        vocab.add(line);
    }
    if (in.bad()) throw DataError("error while reading '" + path + "'");
    if (vocab.words_.size() < 2)
        data_text::fail(path, line_no, "truncated vocabulary: the padding and unknown entries are missing");
    return vocab;
}

}  // namespace loom
