#include "text/characters.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "core/errors.hpp"
#include "core/utf8.hpp"
#include "data/text.hpp"

namespace loom {

namespace {

std::string hex_bytes(std::string_view bytes) {
    std::string out;
    char part[8];
    for (unsigned char b : bytes) {
        std::snprintf(part, sizeof part, "%s0x%02X", out.empty() ? "" : " ", b);
        out += part;
    }
    return out;
}

std::string described(char32_t c) {
    char code[16];
    std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
    if (c < 0x20 || c == 0x7f) return code;  // a control character printed would not show
    return "'" + utf8_of(c) + "' (" + code + ")";
}

}  // namespace

std::string line_column(const std::u32string& text, std::size_t at) {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < at && i < text.size(); ++i) {
        if (text[i] == U'\n')
            ++line, column = 1;
        else
            ++column;
    }
    return std::to_string(line) + ":" + std::to_string(column);
}

std::string utf8_of(char32_t c) {
    std::string s;
    if (c < 0x80) {
        s += static_cast<char>(c);
    } else if (c < 0x800) {
        s += static_cast<char>(0xC0 | (c >> 6));
        s += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        s += static_cast<char>(0xE0 | (c >> 12));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (c >> 18));
        s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (c & 0x3F));
    }
    return s;
}

std::u32string decode_utf8(std::string_view bytes, const std::string& source) {
    std::u32string text;
    text.reserve(bytes.size());
    std::string_view rest = bytes;
    while (!rest.empty()) {
        const std::size_t n = utf8_sequence_length(rest);
        if (n == 0 || rest[0] == '\0') {
            const std::string where = source + ":" + line_column(text, text.size());
            if (rest[0] == '\0') throw DataError(where + ": a NUL byte; the text must be UTF-8 without NUL");
            throw DataError(where + ": the bytes " + hex_bytes(rest.substr(0, 4)) +
                            " are not UTF-8; the text must be UTF-8");
        }
        const auto b = [&](std::size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(rest[i])); };
        char32_t c = n == 1 ? b(0) : n == 2 ? b(0) & 0x1F : n == 3 ? b(0) & 0x0F : b(0) & 0x07;
        for (std::size_t i = 1; i < n; ++i) c = (c << 6) | (b(i) & 0x3F);
        text += c;
        rest.remove_prefix(n);
    }
    return text;
}

std::u32string read_utf8_text(const std::string& path) {
    std::string bytes;
    if (path == "-") {
        bytes.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        if (std::cin.bad() || std::ferror(stdin)) throw DataError("standard input: could not be read");
    } else {
        if (const std::string kind = data_text::irregular_kind(path); !kind.empty())
            throw DataError("'" + path + "' is " + kind +
                            ", not a regular file; give the path of a text file (to read from a pipe, give - and "
                            "pipe it to standard input)");
        std::ifstream in = data_text::open_for_reading(path);
        // Read by the stream itself, so that a failed read (EIO from /proc/self/mem) sets its badbit
        // instead of reading as the end of an empty text.
        char chunk[1 << 16];
        errno = 0;
        while (in.read(chunk, sizeof chunk) || in.gcount() > 0)
            bytes.append(chunk, static_cast<std::size_t>(in.gcount()));
        if (in.bad())
            throw DataError("'" + path + "' could not be read" +
                            (errno ? std::string(": ") + std::strerror(errno) : ""));
    }
    // A byte-order mark some editors write first is not a character of the text.
    const std::string_view text = std::string_view(bytes).starts_with("\xEF\xBB\xBF")
                                      ? std::string_view(bytes).substr(3)
                                      : std::string_view(bytes);
    return decode_utf8(text, path == "-" ? "standard input" : path);
}

Alphabet Alphabet::of(const std::u32string& text) { return of(text, "the text"); }

Alphabet Alphabet::of(const std::u32string& text, const std::string& source) {
    Alphabet a;
    std::vector<bool> seen(0x110000, false);
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] > 0x10FFFF)  // a text made by a program, not decoded: no such character
            throw UserError("Alphabet::of: character " + std::to_string(i) + " of the text is " +
                            std::to_string(static_cast<unsigned long>(text[i])) +
                            ", past U+10FFFF, the last code point");
        seen[text[i]] = true;
    }
    for (char32_t c = 0; c < seen.size(); ++c)
        if (seen[c]) a.characters_ += c;
    if (a.characters_.size() > max_size)
        throw UserError(source + " holds " + std::to_string(a.characters_.size()) +
                        " distinct characters; a model reads at most " + std::to_string(max_size) +
                        " (its ids fit 16 bits)");
    a.ids_.assign(0x10000, 0);
    for (std::size_t i = 0; i < a.characters_.size(); ++i)
        if (a.characters_[i] < 0x10000) a.ids_[a.characters_[i]] = static_cast<std::uint32_t>(i + 1);
    return a;
}

Alphabet Alphabet::stored(std::string_view characters, const std::string& source) {
    const std::u32string text = decode_utf8(characters, source + ": its alphabet");
    Alphabet a = of(text, source + ": its alphabet");
    if (a.characters_ != text || text.empty())
        throw DataError(source +
                        ": its alphabet is not distinct characters in order; it is not a model "
                        "file this program wrote");
    return a;
}

std::string Alphabet::utf8() const {
    std::string s;
    for (char32_t c : characters_) s += utf8_of(c);
    return s;
}

std::vector<std::uint32_t> Alphabet::ids(const std::u32string& text, const std::string& source) const {
    std::vector<std::uint32_t> out(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char32_t c = text[i];
        std::uint32_t id = 0;
        if (c < 0x10000) {
            id = ids_.empty() ? 0 : ids_[c];
        } else if (const auto at = std::lower_bound(characters_.begin(), characters_.end(), c);
                   at != characters_.end() && *at == c) {
            id = static_cast<std::uint32_t>(at - characters_.begin()) + 1;
        }
        if (id == 0)
            throw UserError(source + ":" + line_column(text, i) + ": the character " + described(c) +
                            " is not in the model's alphabet of " + std::to_string(size()) + " characters");
        out[i] = id - 1;
    }
    return out;
}

}  // namespace loom
