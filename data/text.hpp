#pragma once
/// \file
/// Small helpers shared by the text data readers (CTF, QA TSV, vocabulary files): reading lines
/// with their numbers, strict number parsing, and errors of the form "file:line: reason" so a user
/// can jump straight to the offending line. Internal to the readers (loom::data_text); what a
/// program writes goes through data/output_files.hpp.
#include <cstddef>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.hpp"

namespace loom::data_text {

/// Throws DataError("path:line: reason").
[[noreturn]] void fail(const std::string& path, std::size_t line, const std::string& reason);

/// Opens a file for reading or throws DataError naming it (and saying so when it is a directory, or
/// a FIFO, a device or a socket: irregular_kind, asked before opening).
std::ifstream open_for_reading(const std::string& path);

/// What a reader of whole files must not open: "a FIFO (named pipe)", "a character device", "a
/// block device" or "a socket" (a FIFO without a writer blocks the open, a device may never end:
/// /dev/zero); "" for anything else (a missing file or a directory is then named by
/// open_for_reading). Asked by name, before opening, of core/serialization.hpp's path_kind, the
/// classifier the writers' not_replaceable asks too.
std::string irregular_kind(const std::string& path);

/// std::getline that also drops a trailing carriage return, so files written on Windows read the same.
bool read_line(std::istream& in, std::string& line);

/// What LineReader rejects, beyond what a reader checks itself.
enum class TextCheck {
    none,       ///< nothing beyond the reader's own checks
    nul_bytes,  ///< a binary file, or UTF-16 text
    utf8,       ///< NUL bytes and invalid UTF-8 (a Latin-1 file, say)
    printable,  ///< as utf8, and control characters but the tab (a carriage return inside a line, DEL)
};

/// A text file line by line, as every reader wants it: numbered lines without a trailing carriage return,
/// the UTF-8 byte-order mark some editors put at the start of a file dropped (it is not part of
/// the first word), and a DataError "file:line: ..." naming the column for what `check` rejects,
/// with a hint: how to convert UTF-16 (a byte-order mark FF FE or FE FF, or NUL in every other
/// byte) or Latin-1 / CP1252 text to UTF-8.
class LineReader {
public:
    /// \param in  the text, read from its current position
    /// \param source  names it in messages (the file's name)
    /// \param check  what else to reject
    /// \param max_line_bytes  a longer line is a DataError, read no further (an endless line from a
    ///        pipe or a device holds no memory); 0: no bound
    LineReader(std::istream& in, std::string source, TextCheck check, std::size_t max_line_bytes = 0);
    /// False at the end of the input; throws DataError when reading fails.
    bool next(std::string& line);
    /// \return the 1-based number of the line last read (0 before the first).
    std::size_t line_number() const { return line_no_; }
    /// \return the name given at construction.
    const std::string& source() const { return source_; }
    /// Throws DataError("source:line: reason") for the line last read.
    [[noreturn]] void fail(const std::string& reason) const;

private:
    std::istream& in_;
    std::string source_;
    TextCheck check_;
    std::size_t max_line_bytes_;
    std::size_t line_no_ = 0;

    bool read_bounded(std::string& line);
};

/// The UTF-8 checks live in core/utf8.hpp (checkpoints quote names with them too).
using loom::invalid_utf8_at;
using loom::utf8_sequence_length;

/// What parse_float and parse_index found.
enum class NumberStatus { ok, not_a_number, too_large, not_finite };
/// The whole token must be a decimal number (a leading '+' is allowed). A magnitude too small for
/// a float rounds to zero, as it would in any float arithmetic; one too large is too_large;
/// "inf" and "nan" are not_finite.
NumberStatus parse_float(std::string_view token, float& out);
/// The whole token must be a non-negative decimal integer; too_large past SIZE_MAX.
NumberStatus parse_index(std::string_view token, std::size_t& out);
/// What is wrong with a float token, for messages: "is not a number", "is too large for ...".
std::string float_problem(NumberStatus status);

/// \return whether `s` holds only white space (or nothing): spaces, tabs and Unicode spaces
/// (core/utf8.hpp: unicode_space_length).
bool is_blank(std::string_view s);
/// The number of pieces split_whitespace would give, counted without making them.
std::size_t count_words(std::string_view s);
/// Splits on white space, dropping empty pieces.
std::vector<std::string> split_whitespace(std::string_view s);
/// ASCII lowercase; bytes >= 0x80 (UTF-8 sequences) are left untouched.
std::string ascii_lower(std::string_view s);

}  // namespace loom::data_text
