#pragma once
// The seed 000 question/answer similarity model: per side Embedding -> BiRecurrence(LSTM, LSTM) ->
// Dense, attention written as a cumulative log-sum-exp recurrence, and the cosine of the attended
// vectors. With overlap_inputs each token also carries numbers next to its embedding saying whether
// it occurs on the other side (Severyn & Moschitti 2015), so the network sees word overlap itself.
// Also the built-in synthetic data of the sample's no-argument run.
#include <loom.hpp>

namespace qa {

struct ModelOptions {
    std::size_t vocab = 10000, embed = 500, hidden = 300, dense = 200;
    double margin = 0.2;          // of the hinge loss experiments/qa_study trains with
    bool shared = false;          // one tower (embedding included) for questions and answers
    bool overlap_inputs = false;  // per-token overlap numbers next to each embedded token
    double dropout = 0.0;         // on the embedded tokens, while training only
    std::size_t features = 1;     // numbers per token next to its embedding, with overlap_inputs
    double listwise_scale = 10;   // the listwise loss is a softmax of scale * cosine
};

// The seed's attention: weights exp(z_t - log sum_s exp(z_s)), the normalizer computed by a
// log_add_exp recurrence closed through a placeholder. Returns sum_t weight_t * embedded_t; the
// weights themselves (a sequence of [1]) go to *weights when asked for.
loom::Variable log_sum_exp_attention(const loom::Variable& embedded, const loom::Parameter& w,
                                     loom::Variable* weights = nullptr);

// One tower: ids (a sequence of [1]) and their overlap numbers (a sequence of [features] on the same
// axis) -> the attended vector [dense].
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
    std::vector<loom::Parameter> parameters() const;

    ModelOptions options;
    Tower question_tower, answer_tower;  // answer_tower is unused when options.shared
    loom::SequenceAxis question_axis;
    // Inputs: ids and overlap numbers of each side (on the axis of the ids they describe), the label.
    loom::Variable question, question_flags, answer, answer_flags, label;
    // cos(q, a) of the attended vectors (q: question_vector), the attention weights over each side's tokens.
    loom::Variable question_vector, cosine, question_attention, answer_attention;
    // (cos - label)^2 and whether cos > 0.5 agrees with the label.
    loom::Variable squared_loss, pointwise_correct;
    // Listwise: one question's candidates are the batch; -sum over true ones of log softmax(scale cos).
    loom::Variable listwise_loss;
};

// Synthetic pairs (the PyTorch peer's generator, shared/peer/torch_qa.py): each question has a hidden
// topic and draws half its tokens ("w<id>") from the topic's words; its true answer draws half from
// the same topic and repeats `copy` of the question's tokens; wrong answers come from other topics.
struct SyntheticOptions {
    std::size_t questions = 400, candidates = 4, vocab = 10000, topics = 20, topic_words = 50, copy = 3;
    std::size_t q_min = 5, q_max = 20, a_min = 10, a_max = 40;
    std::uint64_t seed = 1;        // draws questions and answers
    std::uint64_t topic_seed = 1;  // draws the topics' word lists: equal for train and eval data
};
loom::QaData make_synthetic(const SyntheticOptions& options);

}  // namespace qa
