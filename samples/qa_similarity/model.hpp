#pragma once
// The seed 000 question/answer similarity model: per side Embedding -> BiRecurrence(LSTM, LSTM) ->
// Dense, attention as a cumulative log-sum-exp recurrence, and the cosine of the attended vectors.
// With overlap_inputs each token carries numbers beside its embedding saying whether it occurs on
// the other side (Severyn & Moschitti 2015).
#include <loom.hpp>

namespace qa {

struct ModelOptions {
    std::size_t vocab = 10000, embed = 500, hidden = 300, dense = 200;
    double margin = 0.2;          // of the hinge loss experiments/qa_study trains with
    bool shared = false;          // one tower (embedding included) for questions and answers
    bool overlap_inputs = false;  // `features` overlap numbers per token beside its embedding
    double dropout = 0.0;         // on the embedded tokens, while training only
    std::size_t features = 1;
    double listwise_scale = 10;  // the listwise loss is a softmax of scale * cosine
};

// Weights exp(z_t - log sum_s exp(z_s)) of z = embedded w, the normalizer by a log_add_exp recurrence
// (layers::sequence_softmax_attention); returns sum_t weight_t * embedded_t, the weights (a sequence
// of [1]) to *weights.
loom::Variable log_sum_exp_attention(const loom::Variable& embedded, const loom::Parameter& w,
                                     loom::Variable* weights = nullptr);

// ids (a sequence of [1]) and their overlap numbers (a sequence of [features]) -> attended [dense].
class Tower {
public:
    Tower(const ModelOptions& o, const std::string& name);
    loom::Variable operator()(const loom::Variable& ids, const loom::Variable& flags,
                              loom::Variable* weights = nullptr) const;

private:
    ModelOptions o_;
    loom::layers::Layer embedding_, encoder_;
    loom::Parameter attention_w_;
};

struct Model {
    explicit Model(const ModelOptions& o);
    std::vector<loom::Parameter> parameters() const;

    ModelOptions options;
    Tower question_tower, answer_tower;  // answer_tower is unused when options.shared
    loom::SequenceAxis question_axis;
    // Inputs: each side's ids and overlap numbers (on the axis of the ids), and the label.
    loom::Variable question, question_flags, answer, answer_flags, label;
    // cos(q, a) of the attended vectors (q: question_vector) and the attention weights of each side.
    loom::Variable question_vector, cosine, question_attention, answer_attention;
    loom::Variable squared_loss, pointwise_correct;  // (cos - label)^2; (cos > 0.5) == label
    // Listwise: one question's candidates are the batch; -sum over true ones of log softmax(scale cos).
    loom::Variable listwise_loss;
};

}  // namespace qa
