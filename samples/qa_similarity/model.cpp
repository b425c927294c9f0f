#include "model.hpp"

namespace qa {

using namespace loom;

Variable log_sum_exp_attention(const Variable& embedded, const Parameter& w) {
    Variable z = times(embedded, w);
    Variable p = placeholder({1}, "log_cumsum_exp_prev");
    Variable prev_z_or_tiny = element_select(sequence::is_first(z), constant(-1e30), past_value(p));
    Variable log_cumsum_exp = log_add_exp(z, prev_z_or_tiny);
    log_cumsum_exp.replace_placeholders({{p, log_cumsum_exp}});
    Variable log_sum_exp = sequence::last(log_cumsum_exp);
    Variable attention = exp(z - sequence::broadcast_as(log_sum_exp, z));
    return sequence::reduce_sum(attention * embedded);
}

Tower::Tower(const ModelOptions& o, const std::string& name)
    : encoder_(layers::Sequential(
          {layers::Embedding(o.embed, o.vocab, glorot_uniform(), name + ".embedding"),
           layers::BiRecurrence(layers::LSTM(o.hidden), layers::LSTM(o.hidden)), layers::Dense(o.dense)},
          name)),
      attention_w_(parameter({o.dense, 1}, glorot_normal(), name + ".attention_w")) {}

Variable Tower::operator()(const Variable& ids) const { return log_sum_exp_attention(encoder_(ids), attention_w_); }

std::vector<Parameter> Tower::parameters() const {
    auto ps = encoder_.parameters();
    ps.push_back(attention_w_);
    return ps;
}

Model::Model(const ModelOptions& o)
    : options(o),
      question_tower(o, "question"),
      answer_tower(o, "answer"),
      question(sequence::input_variable({1}, "question")),
      answer(sequence::input_variable({1}, "answer")),
      negative(sequence::input_variable({1}, "wrong_answer")),
      label(input_variable({1}, "label")) {
    const Tower& answer_side = o.shared ? question_tower : answer_tower;
    Variable q = question_tower(question);
    cosine = cosine_distance(q, answer_side(answer), "cosine");
    squared_loss = square(cosine - label);
    pointwise_correct = equal(greater(cosine, constant(0.5)), label);
    negative_cosine = cosine_distance(q, answer_side(negative), "negative_cosine");
    hinge_loss = relu(constant(o.margin) - cosine + negative_cosine);
    pair_correct = greater(cosine, negative_cosine);
}

std::vector<Parameter> Model::parameters() const {
    auto ps = question_tower.parameters();
    if (!options.shared) layers::append_unique(ps, answer_tower.parameters());
    return ps;
}

}  // namespace qa
