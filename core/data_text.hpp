#pragma once
// Small helpers shared by the text data readers (CTF, QA TSV, vocabulary files): reading lines
// with their numbers, strict number parsing, and errors of the form "file:line: reason" so a user
// can jump straight to the offending line.
#include <cstddef>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace loom::data_text {

// Throws DataError("path:line: reason").
[[noreturn]] void fail(const std::string& path, std::size_t line, const std::string& reason);

// Opens a file for reading or throws DataError naming it.
std::ifstream open_for_reading(const std::string& path);

// std::getline that also drops a trailing '\r', so files written on Windows read the same.
bool read_line(std::istream& in, std::string& line);

// The whole token must be a finite number (no trailing garbage, no "nan"/"inf").
bool parse_float(std::string_view token, float& out);
// The whole token must be a non-negative decimal integer.
bool parse_index(std::string_view token, std::size_t& out);

bool is_blank(std::string_view s);
// Splits on spaces and tabs, dropping empty pieces.
std::vector<std::string> split_whitespace(std::string_view s);
// ASCII lowercase; bytes >= 0x80 (UTF-8 sequences) are left untouched.
std::string ascii_lower(std::string_view s);

// Writes text to `path` through a temporary file renamed into place, so an interrupted save never
// leaves a truncated file under the real name. Throws UserError on failure.
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace loom::data_text
