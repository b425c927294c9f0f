#include "model.hpp"

namespace qa {

using namespace loom;

Variable log_sum_exp_attention(const Variable& embedded, const Parameter& w, Variable* weights) {
    const layers::Attention attention = layers::sequence_softmax_attention(times(embedded, w), embedded);
    if (weights) *weights = attention.weights;
    return attention.context;
}

namespace {

// Names make the parameters findable in a model file: two unnamed LSTMs would both be "LSTM.W". The
// backward LSTM draws its weights first, the order GCC gave the two as arguments of one call; made
// explicit so that every compiler, and samples/python/qa_similarity.py, start from the same weights.
layers::Layer bidirectional_lstm(const ModelOptions& o, const std::string& name) {
    const layers::Cell backward = layers::LSTM(o.hidden, false, glorot_uniform(), name + ".backward");
    const layers::Cell forward = layers::LSTM(o.hidden, false, glorot_uniform(), name + ".forward");
    return layers::BiRecurrence(forward, backward);
}

}  // namespace

Tower::Tower(const ModelOptions& o, const std::string& name)
    : o_(o),
      embedding_(layers::Embedding(o.embed, o.vocab, glorot_uniform(), name + ".embedding")),
      encoder_(layers::Sequential(
          {bidirectional_lstm(o, name), layers::Dense(o.dense, {}, true, glorot_uniform(), name + ".dense")}, name)),
      attention_w_(parameter({o.dense, 1}, glorot_normal(), name + ".attention_w")) {}

Variable Tower::operator()(const Variable& ids, const Variable& flags, Variable* weights) const {
    Variable x = embedding_(ids);
    if (o_.dropout > 0) x = dropout(x, o_.dropout);  // before the splice: the flag is always seen
    if (o_.overlap_inputs) x = splice({x, flags});   // [embed + features] per token
    return log_sum_exp_attention(encoder_(x), attention_w_, weights);
}

Model::Model(const ModelOptions& o)
    : options(o), question_tower(o, "question"), answer_tower(o, "answer"), label(input_variable({1}, "label")) {
    const SequenceAxis answer_axis;
    question = sequence::input_variable({1}, "question", question_axis);
    question_flags = sequence::input_variable({o.features}, "question_flags", question_axis);
    answer = sequence::input_variable({1}, "answer", answer_axis);
    answer_flags = sequence::input_variable({o.features}, "answer_flags", answer_axis);
    question_vector = question_tower(question, question_flags, &question_attention);
    const Tower& answer_side = o.shared ? question_tower : answer_tower;
    cosine = cosine_distance(question_vector, answer_side(answer, answer_flags, &answer_attention), "cosine");
    squared_loss = square(cosine - label);
    pointwise_correct = equal(greater(cosine, constant(0.5)), label);
    listwise_loss = negate(batch::reduce_sum(label * log(batch::softmax(cosine * constant(o.listwise_scale)))));
}

// In creation order: question tower, then answer tower (unless shared).
std::vector<Parameter> Model::parameters() const { return parameters_of({cosine}); }

}  // namespace qa
