// Fuzz target: reading a word list (one word a line) in small batches. Every word read must be a
// non-empty run without white space (a space, a tab or a line end), the batches no larger than
// asked, and the lines strictly increasing.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/word_lists.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    try {
        loom::WordListReader reader(in, "fuzz.txt");
        std::vector<loom::ListedWord> batch;
        std::size_t last_line = 0;
        while (reader.next_batch(batch, 3)) {
            if (batch.empty() || batch.size() > 3) __builtin_trap();
            for (const loom::ListedWord& w : batch) {
                if (w.word.empty() || w.line <= last_line) __builtin_trap();
                if (w.word.find_first_of(" \t\r\n") != std::string::npos) __builtin_trap();
                last_line = w.line;
            }
        }
    } catch (const loom::Error&) {
    }
    return 0;
}
