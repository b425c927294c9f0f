#pragma once
/// \file
/// Text as a character-level model reads it: the characters (Unicode code points) of UTF-8 text,
/// ids into an Alphabet, and every error naming the file, line and column.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

/// A text decoded: one code point per character. A NUL byte or invalid UTF-8 is a DataError naming
/// `source`, the line and column (in characters) and the bytes found.
std::u32string decode_utf8(std::string_view bytes, const std::string& source);
/// decode_utf8 of a whole file ("-": standard input), a byte-order mark at its start dropped; a
/// file that cannot be opened or read (a read error is never taken for the end of the text) is a
/// DataError naming it, and so is a path that is not a regular file (a FIFO, a device such as
/// /dev/zero or /dev/null, a socket: refused by name before opening, where a FIFO would block).
std::u32string read_utf8_text(const std::string& path);
/// The UTF-8 bytes of one character.
std::string utf8_of(char32_t c);
/// "L:C", the line and column of character `at` of `text` (1-based; lines end at '\n').
std::string line_column(const std::u32string& text, std::size_t at);

/// The characters a model reads and writes, id i the i-th in code-point order.
class Alphabet {
public:
    Alphabet() = default;
    /// The distinct characters of `text`; a UserError when there are more than max_size.
    static Alphabet of(const std::u32string& text);
    /// The same, the UserError for more than max_size characters naming `source` (the file or the
    /// option the text came from) first.
    static Alphabet of(const std::u32string& text, const std::string& source);
    /// The alphabet stored as its characters in id order (utf8()), as a model file holds it; a
    /// DataError naming `source` when they are not distinct characters in order.
    static Alphabet stored(std::string_view characters, const std::string& source);
    /// The most characters an alphabet holds (ids fit 16 bits).
    static constexpr std::size_t max_size = 65536;

    /// How many characters.
    std::size_t size() const { return characters_.size(); }
    /// The characters in id order, as UTF-8: what a model file stores.
    std::string utf8() const;
    /// Character `id` as UTF-8.
    std::string character(std::size_t id) const { return utf8_of(characters_.at(id)); }
    /// The ids of `text`; a character outside the alphabet is a UserError naming `source`, its
    /// line and column, and the character.
    std::vector<std::uint32_t> ids(const std::u32string& text, const std::string& source) const;

private:
    std::u32string characters_;
    std::vector<std::uint32_t> ids_;  // by code point below 65536 (ASCII and the BMP): id + 1, 0 for none
};

}  // namespace loom
