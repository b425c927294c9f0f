#pragma once
/// \file
/// Lists of words, one a line (the words a g2p model is to pronounce, say), read a batch at a time
/// so that what a program holds never grows with the list:
///
///   WordListReader words("names.txt");          // "-": standard input
///   std::vector<ListedWord> batch;
///   while (words.next_batch(batch, 128)) ...    // each word with its line, for "file:line" messages
///
/// White space before and after a word is dropped and blank lines are skipped; a line with white
/// space inside ("new york") is a DataError "file:line: ..." (one word a line), as are NUL bytes,
/// invalid UTF-8 and a line of more than a megabyte (read no further, so an endless line holds no
/// memory). What a word may hold beyond that is the program's to check, with the line given.
#include <cstddef>
#include <fstream>
#include <istream>
#include <memory>
#include <string>
#include <vector>

namespace loom {

namespace data_text {
class LineReader;
}

/// One word of a list and the line it is on (from 1).
struct ListedWord {
    std::string word;      ///< the word as the list spells it
    std::size_t line = 0;  ///< its line in the list, from 1
};

/// Reads a word list in batches (above).
class WordListReader {
public:
    /// Opens the file `path`, or standard input for "-"; a DataError names a file that cannot be read
    /// (a directory, a missing file, a device or a socket), and standard input when it is closed (make
    /// the reader before opening other files) or a read of it fails. A FIFO is read as it comes, once.
    explicit WordListReader(const std::string& path);
    /// Reads `in` from its current position; `source` names it in messages.
    WordListReader(std::istream& in, std::string source);
    ~WordListReader();
    WordListReader(const WordListReader&) = delete;
    WordListReader& operator=(const WordListReader&) = delete;

    /// Replaces `batch` with the next words, at most `count` (at least 1); false when none was left.
    bool next_batch(std::vector<ListedWord>& batch, std::size_t count);
    /// The file's name ("standard input" for "-").
    const std::string& source() const { return source_; }

private:
    std::string source_;
    bool standard_input_ = false;
    std::ifstream file_;
    std::unique_ptr<data_text::LineReader> lines_;
};

}  // namespace loom
