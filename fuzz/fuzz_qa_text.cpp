// Fuzz target: the raw question/sentence reader the QA sample trains on and scores (read_qa_text),
// then what the sample does next with the pairs: held-out questions, a vocabulary and idf table
// built from them (saved and read back), each pair's ids, overlap features and word overlap, and a
// minibatch of them. A loom::Error from the reader is the expected answer to bad input; anything
// else (an error after the reader accepted the file, a crash, a sanitizer report, a broken
// invariant trapped here) is a finding.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.hpp"
#include "core/utf8.hpp"
#include "qa/overlap.hpp"
#include "qa/qa_data.hpp"
#include "text/vocabulary.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    loom::QaData train;
    try {
        train = loom::parse_qa_text(in, "fuzz.tsv", size % 2 == 0);  // scoring or training files
    } catch (const loom::Error&) {
        return 0;
    }
    // Past the reader nothing may fail: an exception escaping from here on is a finding too (the
    // vocabulary of a Latin-1 file once failed only when the trained model was saved).
    for (const auto& p : train.pairs) {
        if (p.group >= train.num_groups || p.question.empty() || p.answer.empty()) __builtin_trap();
        // What the reader accepted is UTF-8 text without NUL, split into words without spaces.
        for (const auto* side : {&p.question, &p.answer})
            for (const std::string& token : *side) {
                if (token.empty() || token.find_first_of(std::string(" \t\n\r\0", 5)) != std::string::npos ||
                    loom::invalid_utf8_at(token) != std::string::npos)
                    __builtin_trap();
                for (std::size_t i = 0; i < token.size(); ++i)
                    if (loom::unicode_space_length(std::string_view(token).substr(i)) != 0) __builtin_trap();
            }
    }
    const loom::QaData held = train.hold_out(10);
    if (train.pairs.empty()) return 0;
    const loom::Vocabulary vocab = loom::Vocabulary::build(train.token_lists());
    const loom::IdfTable idf = loom::IdfTable::fit(train.token_lists());
    // The sample saves both into its model file: every word read must be savable and read back.
    if (loom::Vocabulary::parse(vocab.to_text(), "fuzz vocabulary").size() != vocab.size()) __builtin_trap();
    (void)loom::IdfTable::parse(idf.to_text(), "fuzz idf");
    for (const loom::QaData* d : {static_cast<const loom::QaData*>(&train), &held})
        for (const auto& p : d->pairs) {
            for (std::size_t id : vocab.ids(p.answer))
                if (id >= vocab.size()) __builtin_trap();
            const auto features = loom::match_features(p.question, p.answer, idf);
            if (features.size() != p.question.size() * loom::match_feature_count) __builtin_trap();
            for (float f : features)
                if (!std::isfinite(f)) __builtin_trap();
            if (!std::isfinite(loom::word_overlap(p.question, p.answer, &idf))) __builtin_trap();
        }
    std::vector<std::size_t> items(std::min<std::size_t>(train.pairs.size(), 64));
    std::iota(items.begin(), items.end(), std::size_t{0});
    const loom::QaMinibatch batch = loom::make_qa_minibatch(train, vocab, items);
    if (batch.items.size() != items.size()) __builtin_trap();
    return 0;
}
