#include "core/utf8.hpp"

#include <string>

namespace loom {

std::size_t utf8_sequence_length(std::string_view s) {
    if (s.empty()) return 0;
    const auto b = static_cast<unsigned char>(s[0]);
    if (b < 0x80) return 1;
    std::size_t length = 0;
    char32_t code = 0, least = 0;
    if (b >= 0xC2 && b <= 0xDF) {
        length = 2, code = b & 0x1F, least = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
        length = 3, code = b & 0x0F, least = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
        length = 4, code = b & 0x07, least = 0x10000;
    } else {
        return 0;  // a continuation byte out of place, 0xC0/0xC1 (always overlong), or > 0xF4
    }
    if (s.size() < length) return 0;
    for (std::size_t k = 1; k < length; ++k) {
        const auto c = static_cast<unsigned char>(s[k]);
        if ((c & 0xC0) != 0x80) return 0;
        code = (code << 6) | (c & 0x3F);
    }
    if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
    return length;
}

std::size_t unicode_space_length(std::string_view s) {
    const std::size_t length = utf8_sequence_length(s);
    if (length < 2) return 0;
    char32_t code = static_cast<unsigned char>(s[0]) & (0x7F >> length);
    for (std::size_t k = 1; k < length; ++k) code = (code << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
    const bool space = code == 0x85 || code == 0xA0 || code == 0x1680 || (code >= 0x2000 && code <= 0x200B) ||
                       code == 0x2028 || code == 0x2029 || code == 0x202F || code == 0x205F || code == 0x3000 ||
                       code == 0xFEFF;
    return space ? length : 0;
}

std::size_t invalid_utf8_at(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t length = utf8_sequence_length(s.substr(i));
        if (length == 0) return i;
        i += length;
    }
    return std::string_view::npos;
}

}  // namespace loom
