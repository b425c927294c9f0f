// Fuzz target: reading a vocabulary file. What is read must look up consistently: every word's
// id gives the word back.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/errors.hpp"
#include "text/vocabulary.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    try {
        const loom::Vocabulary vocab = loom::Vocabulary::parse(in, "fuzz.vocab");
        for (std::size_t id = 0; id < vocab.size(); ++id)
            if (vocab.id(vocab.word(id)) != id) __builtin_trap();
    } catch (const loom::Error&) {
    }
    return 0;
}
