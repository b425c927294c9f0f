#include "data/text.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/errors.hpp"
#include "core/serialization.hpp"

namespace loom::data_text {

namespace {

constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";

// For a token from_chars matched but found out of range: whether it is too large (else it is too
// close to zero). The decimal exponent of its first significant digit decides.
bool beyond_largest(std::string_view token) {
    if (!token.empty() && (token.front() == '-' || token.front() == '+')) token.remove_prefix(1);
    const std::size_t e = token.find_first_of("eE");
    const std::string_view mantissa = token.substr(0, e);
    long long exponent = 0;
    if (e != std::string_view::npos) {
        std::string_view digits = token.substr(e + 1);
        const bool negative = !digits.empty() && digits.front() == '-';
        if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
        const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), exponent);
        if (ec == std::errc::result_out_of_range) exponent = std::numeric_limits<long long>::max() / 2;
        if (negative) exponent = -exponent;
    }
    const std::size_t point = mantissa.find('.');
    const auto integer_digits = static_cast<long long>(point == std::string_view::npos ? mantissa.size() : point);
    const std::size_t first = mantissa.find_first_not_of("0.");
    if (first == std::string_view::npos) return false;
    const auto at = static_cast<long long>(first);
    return integer_digits - at - (at < integer_digits ? 1 : 0) + exponent > 0;
}

}  // namespace

void fail(const std::string& path, std::size_t line, const std::string& reason) {
    throw DataError(path + ":" + std::to_string(line) + ": " + reason);
}

std::ifstream open_for_reading(const std::string& path) {
    // A directory opens as a stream on Linux and reads as empty, which would give a misleading
    // "empty" or "not a ... file" further on; a FIFO without a writer blocks the open forever, a
    // device may never end (/dev/zero).
    const PathKind kind = path_kind(path);
    if (kind == PathKind::directory) throw DataError("'" + path + "' is a directory; give the path of a data file");
    if (kind != PathKind::missing && kind != PathKind::regular)
        throw DataError("'" + path + "' is " + path_kind_name(kind) +
                        ", not a regular file; give the path of a data file (to read from a pipe, copy it to a "
                        "file first)");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DataError("cannot open data file '" + path + "': " + std::strerror(errno));
    return in;
}

std::string irregular_kind(const std::string& path) {
    const PathKind kind = path_kind(path);
    return kind == PathKind::directory ? "" : path_kind_name(kind);
}

bool read_line(std::istream& in, std::string& line) {
    if (!std::getline(in, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
}

LineReader::LineReader(std::istream& in, std::string source, TextCheck check, std::size_t max_line_bytes)
    : in_(in), source_(std::move(source)), check_(check), max_line_bytes_(max_line_bytes) {}

// read_line, a byte at a time from the stream's buffer, refusing a line past max_line_bytes_.
bool LineReader::read_bounded(std::string& line) {
    line.clear();
    std::streambuf* buffer = in_.rdbuf();
    bool any = false;
    for (int c = buffer->sbumpc(); c != std::char_traits<char>::eof(); c = buffer->sbumpc()) {
        any = true;
        if (c == '\n') break;
        if (line.size() == max_line_bytes_) {
            ++line_no_;
            fail("a line longer than " + std::to_string(max_line_bytes_) + " bytes; it is not read further");
        }
        line.push_back(static_cast<char>(c));
    }
    if (!any) in_.setstate(std::ios::eofbit);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return any;
}

bool LineReader::next(std::string& line) {
    if (!(max_line_bytes_ ? read_bounded(line) : read_line(in_, line))) {
        if (in_.bad()) throw DataError("error while reading '" + source_ + "' after line " + std::to_string(line_no_));
        return false;
    }
    ++line_no_;
    if (line_no_ == 1 && line.starts_with(utf8_bom)) line.erase(0, utf8_bom.size());
    if (check_ == TextCheck::none) return true;
    // UTF-16 text read as bytes: its byte-order mark starts the first line, and ASCII characters
    // come with a NUL byte each, every other byte of a line. Anything else (one NUL in a short
    // line, say) is only a NUL: no guess is made about where it came from.
    const bool utf16_mark = line_no_ == 1 && (line.starts_with("\xFF\xFE") || line.starts_with("\xFE\xFF"));
    const std::string utf16_hint = "; the file looks like UTF-16; convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)";
    if (const std::size_t nul = line.find('\0'); nul != std::string::npos) {
        bool every_other = line.find('\0', nul + 1) != std::string::npos;
        for (std::size_t i = nul % 2; every_other && i < line.size(); i += 2) every_other = line[i] == '\0';
        fail("a NUL byte at column " + std::to_string(nul + 1) +
             (utf16_mark || every_other ? utf16_hint : "; text holds none (loom reads UTF-8 text)"));
    }
    if (check_ == TextCheck::utf8 || check_ == TextCheck::printable)
        if (const std::size_t bad = invalid_utf8_at(line); bad != std::string::npos) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(line[bad]));
            fail(std::string("byte ") + hex + " at column " + std::to_string(bad + 1) + " is not valid UTF-8" +
                 (utf16_mark ? utf16_hint
                             : "; loom reads UTF-8 text (convert e.g. with iconv -f latin1 -t utf-8, or -f cp1252)"));
        }
    if (check_ == TextCheck::printable)
        for (std::size_t i = 0; i < line.size(); ++i) {
            const auto c = static_cast<unsigned char>(line[i]);
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                char code[8];
                std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
                fail("the control character " + std::string(code) + " at column " + std::to_string(i + 1) +
                     "; this text holds printable characters and tabs only");
            }
        }
    return true;
}

void LineReader::fail(const std::string& reason) const { data_text::fail(source_, line_no_, reason); }

NumberStatus parse_float(std::string_view token, float& out) {
    // from_chars rejects a leading '+', which numeric text files do contain.
    if (token.size() > 1 && token.front() == '+' && token[1] != '-') token.remove_prefix(1);
    if (token.empty()) return NumberStatus::not_a_number;
    const char* end = token.data() + token.size();
    const auto [ptr, ec] = std::from_chars(token.data(), end, out);
    if (ptr != end || ec == std::errc::invalid_argument) return NumberStatus::not_a_number;
    if (ec == std::errc::result_out_of_range) {
        if (beyond_largest(token)) return NumberStatus::too_large;
        out = token.front() == '-' ? -0.0f : 0.0f;
        return NumberStatus::ok;
    }
    return std::isfinite(out) ? NumberStatus::ok : NumberStatus::not_finite;
}

NumberStatus parse_index(std::string_view token, std::size_t& out) {
    if (token.empty()) return NumberStatus::not_a_number;
    const char* end = token.data() + token.size();
    const auto [ptr, ec] = std::from_chars(token.data(), end, out);
    if (ptr != end || ec == std::errc::invalid_argument) return NumberStatus::not_a_number;
    return ec == std::errc::result_out_of_range ? NumberStatus::too_large : NumberStatus::ok;
}

std::string float_problem(NumberStatus status) {
    switch (status) {
        case NumberStatus::ok:
            return "is a number";
        case NumberStatus::not_a_number:
            return "is not a number";
        case NumberStatus::too_large:
            return "is too large for a 32-bit float (largest magnitude about 3.4e38)";
        case NumberStatus::not_finite:
            return "is not finite (inf and nan are not accepted as data)";
    }
    return "is not a number";
}

namespace {

// The length of the white space `s` starts with: a space or tab (1), a Unicode space
// (unicode_space_length), or 0.
std::size_t space_length(std::string_view s) {
    if (s.empty()) return 0;
    return s.front() == ' ' || s.front() == '\t' ? 1 : unicode_space_length(s);
}

}  // namespace

bool is_blank(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = space_length(s.substr(i));
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::size_t count_words(std::string_view s) {
    std::size_t count = 0;
    bool in_word = false;
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = space_length(s.substr(i));
        count += n == 0 && !in_word;
        in_word = n == 0;
        i += std::max<std::size_t>(n, 1);
    }
    return count;
}

std::vector<std::string> split_whitespace(std::string_view s) {
    std::vector<std::string> pieces;
    std::size_t begin = 0, i = 0;
    while (i < s.size()) {
        if (const std::size_t n = space_length(s.substr(i))) {
            if (i > begin) pieces.emplace_back(s.substr(begin, i - begin));
            i += n;
            begin = i;
        } else {
            ++i;
        }
    }
    if (i > begin) pieces.emplace_back(s.substr(begin, i - begin));
    return pieces;
}

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

}  // namespace loom::data_text
