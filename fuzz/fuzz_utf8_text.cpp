// Fuzz target: a character-level model's text (text/characters.hpp). What decodes must encode back
// to the same bytes; its alphabet must give every character an id that names it again; an alphabet
// stored in a model file must be refused or read back as it is stored.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/errors.hpp"
#include "text/characters.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        const std::u32string text = loom::decode_utf8(bytes, "fuzz.txt");
        std::string back;
        for (char32_t c : text) back += loom::utf8_of(c);
        if (back != bytes) __builtin_trap();
        const loom::Alphabet alphabet = loom::Alphabet::of(text);
        const std::vector<std::uint32_t> ids = alphabet.ids(text, "fuzz.txt");
        for (std::size_t i = 0; i < text.size(); ++i)
            if (alphabet.character(ids[i]) != loom::utf8_of(text[i])) __builtin_trap();
    } catch (const loom::Error&) {
    }
    try {
        if (loom::Alphabet::stored(bytes, "fuzz.loom").utf8() != bytes) __builtin_trap();
    } catch (const loom::Error&) {
    }
    return 0;
}
