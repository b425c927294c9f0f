#include "data/word_lists.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "core/utf8.hpp"
#include "data/text.hpp"

namespace loom {

namespace {

// A line of a word list holds one word: a megabyte is far past any, and an endless line (a device,
// a pipe that never sends a line end) stops here instead of taking all memory.
constexpr std::size_t longest_line = 1 << 20;

// A device or a socket is no list (/dev/zero would be read forever); a FIFO is, read as it comes.
const std::string& readable_list(const std::string& path) {
    const PathKind kind = path_kind(path);
    if (kind == PathKind::character_device || kind == PathKind::block_device || kind == PathKind::socket)
        throw DataError("'" + path + "' is " + path_kind_name(kind) +
                        ", not a word list; give a file of words, one a line, or '-' for standard input");
    return path;
}

// Standard input closed (`<&-`) reads as an empty list: a program would do nothing and succeed.
// Checked when the reader is made, before the program opens other files (the first of which would
// otherwise be given descriptor 0, and be read as the list).
const std::string& readable_input(const std::string& source) {
    if (::fcntl(STDIN_FILENO, F_GETFD) == -1)
        throw DataError(source + ": cannot be read: " + std::strerror(errno) +
                        " (it is closed); give the words on standard input, or a file of words instead of '-'");
    return source;
}

}  // namespace

// A control character is no part of a word nor a separator of words (a carriage return left
// inside a line, the line end of an old Mac file): LineReader refuses it (TextCheck::printable).
WordListReader::WordListReader(const std::string& path)
    : source_(path == "-" ? readable_input("standard input") : path),
      standard_input_(path == "-"),
      file_(path == "-" ? std::ifstream() : data_text::open_for_reading(readable_list(path))),
      lines_(std::make_unique<data_text::LineReader>(path == "-" ? std::cin : static_cast<std::istream&>(file_),
                                                     source_, data_text::TextCheck::printable, longest_line)) {}

WordListReader::WordListReader(std::istream& in, std::string source)
    : source_(std::move(source)),
      lines_(std::make_unique<data_text::LineReader>(in, source_, data_text::TextCheck::printable, longest_line)) {}

WordListReader::~WordListReader() = default;

bool WordListReader::next_batch(std::vector<ListedWord>& batch, std::size_t count) {
    if (count == 0) throw UserError("WordListReader::next_batch: a batch of 0 words");
    batch.clear();
    std::string line;
    while (batch.size() < count && lines_->next(line)) {
        const std::vector<std::string> words = data_text::split_whitespace(line);
        if (words.empty()) continue;
        if (words.size() > 1)
            lines_->fail(std::to_string(words.size()) + " words (" + quoted_field(words[0]) + ", " +
                         quoted_field(words[1]) + (words.size() > 2 ? ", ..." : "") +
                         "); a word list has one word a line");
        batch.push_back({words[0], lines_->line_number()});
    }
    // std::cin ends at a read error as at the end of its input (it reads through stdio, which keeps
    // the error): an unreadable standard input (a directory given with <) is no empty list.
    if (batch.size() < count && standard_input_ && std::ferror(stdin)) {
        const int error = errno;
        throw DataError(source_ + ": cannot be read after line " + std::to_string(lines_->line_number()) + ": " +
                        std::strerror(error));
    }
    return !batch.empty();
}

}  // namespace loom
