#pragma once
// Built-in question/answer data for the QA sample when no files are given: the same generator as
// the PyTorch peer (shared/peer/torch_qa.py). Each question has a hidden topic and draws half its
// tokens from that topic's word list; its true answer draws half from the same topic and repeats
// `copy` of the question's tokens; wrong answers come from other topics. Tokens are words "w<id>",
// so the data goes through the same vocabulary and batching as real text.
#include <cstddef>
#include <cstdint>

#include "data/qa.hpp"

namespace qa {

struct SyntheticOptions {
    std::size_t questions = 400;
    std::size_t candidates = 4;  // per question: 1 true answer and candidates-1 wrong ones
    std::size_t vocab = 10000;
    std::size_t topics = 20;
    std::size_t topic_words = 50;
    std::size_t copy = 3;
    std::size_t q_min = 5, q_max = 20, a_min = 10, a_max = 40;
    std::uint64_t seed = 1;        // draws questions and answers
    std::uint64_t topic_seed = 1;  // draws the topics' word lists: keep it equal for train and eval data
};

loom::QaData make_synthetic(const SyntheticOptions& options);

}  // namespace qa
