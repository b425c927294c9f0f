#pragma once
/// \file
/// UTF-8 validity: what the text readers and the checkpoint's name quoting both need.
#include <cstddef>
#include <string_view>

namespace loom {

/// Where a string stops being valid UTF-8 (an offset into it), or npos when it is valid. Overlong
/// forms, surrogates and code points past U+10FFFF are invalid, as the standard says.
std::size_t invalid_utf8_at(std::string_view s);
/// The length of the valid UTF-8 sequence `s` starts with (1 to 4), or 0 when it starts with none.
std::size_t utf8_sequence_length(std::string_view s);
/// The length of the Unicode space `s` starts with, or 0: the space separators (Zs: U+00A0
/// no-break space, U+1680, U+2000 to U+200A, U+202F, U+205F, U+3000), the line and paragraph
/// separators U+0085, U+2028 and U+2029, and the invisible U+200B zero-width space and U+FEFF
/// zero-width no-break space (a byte-order mark inside text). ASCII white space is not counted here.
std::size_t unicode_space_length(std::string_view s);

}  // namespace loom
