#pragma once
// The seed 000 question/answer similarity model: per side Embedding -> BiRecurrence(LSTM, LSTM) ->
// Dense, attention written as a cumulative log-sum-exp recurrence, and the cosine similarity of
// the attended vectors. With overlap_inputs, each token also carries a flag "this word occurs on the
// other side" spliced next to its embedding before the BiLSTM (Severyn & Moschitti 2015), so the
// network can learn from word overlap itself.
#include <cstddef>
#include <vector>

#include <loom.hpp>

namespace qa {

struct ModelOptions {
    std::size_t vocab = 10000;
    std::size_t embed = 500;
    std::size_t hidden = 300;
    std::size_t dense = 200;
    double margin = 0.2;          // hinge loss margin
    bool shared = false;          // one tower (embedding included) for questions and answers
    bool overlap_inputs = false;  // a per-token overlap flag next to each embedded token
    double dropout = 0.0;         // dropout rate on the embedded tokens (training only)
};

// One tower: ids (a sequence of [1]) and, with overlap_inputs, their flags (a sequence of [1] on
// the same axis) -> the attended vector [dense] (a batch value).
class Tower {
public:
    Tower(const ModelOptions& o, const std::string& name);
    loom::Variable operator()(const loom::Variable& ids, const loom::Variable& flags) const;
    std::vector<loom::Parameter> parameters() const;

private:
    bool overlap_inputs_;
    double dropout_;
    loom::layers::Layer embedding_, encoder_;
    loom::Parameter attention_w_;
};

// The seed's attention: weights exp(z_t - log sum_s exp(z_s)) with the normalizer computed by a
// log_add_exp recurrence closed through a placeholder.
loom::Variable log_sum_exp_attention(const loom::Variable& embedded, const loom::Parameter& w);

struct Model {
    explicit Model(const ModelOptions& o);

    ModelOptions options;
    Tower question_tower, answer_tower;                // answer_tower is unused when options.shared
    loom::Variable question, answer, negative, label;  // inputs
    // Overlap flags (used with options.overlap_inputs), each on the axis of the ids it describes:
    // the question's tokens against the answer, and against the wrong answer (the flags of one
    // question differ per candidate, so the hinge loss encodes the question twice).
    loom::Variable question_flags, question_negative_flags, answer_flags, negative_flags;
    // Scoring and the pointwise loss: cos(q, a); (cos - label)^2.
    loom::Variable cosine, squared_loss, pointwise_correct;
    // Ranking (the default training loss): max(0, margin - cos(q, a+) + cos(q, a-)) on triplets
    // (question, true answer, wrong answer of the same question).
    loom::Variable negative_cosine, hinge_loss, pair_correct;

    std::vector<loom::Parameter> parameters() const;
};

}  // namespace qa
