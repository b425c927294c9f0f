#pragma once
// The seed 000 question/answer similarity model: per side Embedding -> BiRecurrence(LSTM, LSTM) ->
// Dense, attention written as a cumulative log-sum-exp recurrence, and the cosine of the attended
// vectors. With overlap_inputs each token also carries a number next to its embedding, "this word
// occurs on the other side" (Severyn & Moschitti 2015), so the network sees word overlap itself.
#include <cstddef>
#include <string>
#include <vector>

#include <loom.hpp>

namespace qa {

struct ModelOptions {
    std::size_t vocab = 10000, embed = 500, hidden = 300, dense = 200;
    double margin = 0.2;          // hinge loss margin
    bool shared = false;          // one tower (embedding included) for questions and answers
    bool overlap_inputs = false;  // a per-token overlap flag next to each embedded token
    double dropout = 0.0;         // on the embedded tokens, while training only
    std::size_t features = 1;     // numbers per token next to its embedding, with overlap_inputs
};

// The seed's attention: weights exp(z_t - log sum_s exp(z_s)), the normalizer computed by a
// log_add_exp recurrence closed through a placeholder. Returns sum_t weight_t * embedded_t; the
// weights themselves (a sequence of [1]) go to *weights when asked for.
loom::Variable log_sum_exp_attention(const loom::Variable& embedded, const loom::Parameter& w,
                                     loom::Variable* weights = nullptr);

// One tower: ids (a sequence of [1]) and their flags (a sequence of [features] on the same axis) ->
// the attended vector [dense].
class Tower {
public:
    Tower(const ModelOptions& o, const std::string& name);
    loom::Variable operator()(const loom::Variable& ids, const loom::Variable& flags,
                              loom::Variable* weights = nullptr) const;
    std::vector<loom::Parameter> parameters() const;

private:
    ModelOptions o_;
    loom::layers::Layer embedding_, encoder_;
    loom::Parameter attention_w_;
};

struct Model {
    explicit Model(const ModelOptions& o);

    ModelOptions options;
    Tower question_tower, answer_tower;                // answer_tower is unused when options.shared
    loom::Variable question, answer, negative, label;  // inputs
    // Overlap flags, each on the axis of the ids it describes: a question's flags differ per
    // candidate, so the hinge loss encodes the question twice.
    loom::Variable question_flags, question_negative_flags, answer_flags, negative_flags;
    // Scoring: cos(q, a), and the attention weights over each side's tokens; (cos - label)^2.
    loom::Variable cosine, question_attention, answer_attention, squared_loss, pointwise_correct;
    // Ranking loss: max(0, margin - cos(q, a+) + cos(q, a-)) on (question, true, wrong answer).
    loom::Variable negative_cosine, hinge_loss, pair_correct;

    std::vector<loom::Parameter> parameters() const;
};

}  // namespace qa
