#pragma once
/// \file
/// Synthetic question/answer data with a known signal, for examples, tests and benchmarks: the
/// QA sample's no-argument run, qa_train_bench and micro_bench use it, and a PyTorch peer generates
/// the same distribution. Tokens are words "w<id>", so the data goes through the same vocabulary and
/// batching as real text.
#include <cstddef>
#include <cstdint>

#include "qa/qa_data.hpp"

namespace loom {

/// The options of make_synthetic_qa, the generator the PyTorch peer of the benchmarks uses: a question has a hidden
/// topic and draws half its tokens ("w<id>") from the topic's words; its true answer draws half from the same topic and
/// repeats `copy` of the question's tokens; wrong answers come from other topics and repeat `distractor_copy` of them.
struct SyntheticQaOptions {
    /// The number of questions.
    std::size_t questions = 400, candidates = 4, vocab = 10000, topics = 20, topic_words = 50, copy = 3,
                distractor_copy = 0;
    /// The shortest question, in tokens.
    std::size_t q_min = 5, q_max = 20, a_min = 10, a_max = 40;
    /// Draws the questions and answers.
    std::uint64_t seed = 1, topic_seed = 1;
};
/// \var SyntheticQaOptions::candidates
/// Candidate answers per question, one of them true.
/// \var SyntheticQaOptions::vocab
/// The number of distinct tokens.
/// \var SyntheticQaOptions::topics
/// The number of hidden topics.
/// \var SyntheticQaOptions::topic_words
/// The words of each topic.
/// \var SyntheticQaOptions::copy
/// The question's tokens a true answer repeats.
/// \var SyntheticQaOptions::distractor_copy
/// The question's tokens each wrong answer repeats: with as many as `copy`, shared words no longer tell the true
/// answer apart, only the topic does.
/// \var SyntheticQaOptions::q_max
/// The longest question, in tokens.
/// \var SyntheticQaOptions::a_min
/// The shortest answer, in tokens.
/// \var SyntheticQaOptions::a_max
/// The longest answer, in tokens.
/// \var SyntheticQaOptions::topic_seed
/// Draws the topics' words: keep it equal for the training and evaluation data.

/// Question/answer pairs with a known signal (above), grouped by question. Throws UserError for sizes the generator
/// cannot honour (no vocabulary, fewer than 2 topics or candidates, a minimum length above its maximum, or of 0).
QaData make_synthetic_qa(const SyntheticQaOptions& options);

}  // namespace loom
