// Fuzz target: the QA TSV reader, then what the sample does next with the pairs (groups,
// lengths, a vocabulary built from them, ids). A loom::Error is the expected answer to bad input.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/errors.hpp"
#include "qa/qa_data.hpp"
#include "text/vocabulary.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    loom::QaReadOptions options;
    options.lowercase = size % 2 == 0;  // both settings, chosen by the input itself
    try {
        const loom::QaData qa = loom::parse_qa_tsv(in, "fuzz.tsv", options);
        for (const auto& p : qa.pairs)
            if (p.group >= qa.num_groups || p.question.empty() || p.answer.empty()) __builtin_trap();
        (void)qa.lengths();
        const loom::Vocabulary vocab = loom::Vocabulary::build(qa.token_lists());
        for (const auto& p : qa.pairs)
            for (std::size_t id : vocab.ids(p.question))
                if (id >= vocab.size()) __builtin_trap();
    } catch (const loom::Error&) {
    }
    return 0;
}
