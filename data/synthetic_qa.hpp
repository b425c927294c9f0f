#pragma once
// Synthetic question/answer data with a known signal, for examples, tests and benchmarks: the
// QA sample's no-argument run, qa_train_bench and micro_bench use it, and a PyTorch peer generates
// the same distribution. Tokens are words "w<id>", so the data goes through the same vocabulary and
// batching as real text.
#include <cstddef>
#include <cstdint>

#include "data/qa.hpp"

namespace loom {

// The PyTorch peer's generator (shared/peer/torch_qa.py): a question has a hidden topic and draws
// half its tokens ("w<id>") from the topic's words; its true answer draws half from the same topic
// and repeats `copy` of the question's tokens; wrong answers come from other topics.
struct SyntheticQaOptions {
    std::size_t questions = 400, candidates = 4, vocab = 10000, topics = 20, topic_words = 50, copy = 3;
    std::size_t q_min = 5, q_max = 20, a_min = 10, a_max = 40;
    std::uint64_t seed = 1, topic_seed = 1;  // topic_seed draws the topics' words: equal for train and eval
};
// Throws UserError for sizes the generator cannot honour (no vocabulary, fewer than 2 topics or
// candidates, a minimum length above its maximum, or of 0).
QaData make_synthetic_qa(const SyntheticQaOptions& options);

}  // namespace loom
