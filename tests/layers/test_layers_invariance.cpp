// check_batch_invariance over every layer of layers/ and over the seed 000 QA model: each item
// alone gives the same values and gradients as inside a batch in three orders with NaN padding.
#include <doctest/doctest.h>

#include <functional>

#include <loom.hpp>

#include "gradcheck.hpp"

using namespace loom;
using loom::testing::random_rows;
using loom::testing::random_sequences;

namespace {

void randomize(const std::vector<Parameter>& ps, std::uint64_t seed) {
    for (const auto& p : ps) p.set_value(loom::testing::random_tensor(p.shape(), seed++, -0.8, 0.8));
}

// Lengths 1 to 7 in no order, so every order moves items between short and long neighbours.
const std::vector<std::size_t> lengths{3, 1, 7, 5, 2};

struct Inputs {
    Variable s = sequence::input_variable({3}, "s");
    Variable other = sequence::input_variable({2}, "other");  // another sequence axis
    Variable ids = sequence::input_variable({1}, "ids");
    Variable q = input_variable({3}, "q");  // one row per item
    Variable h0 = input_variable({2}, "h0"), c0 = input_variable({2}, "c0");
    Bindings in{{s, Value::sequences(random_sequences({3}, lengths, 60))},
                {other, Value::sequences(random_sequences({2}, {4, 2, 1, 6, 3}, 61))},
                {ids, Value::index_sequences({{4, 0, 9}, {7}, {1, 2, 3, 4, 5, 6, 8}, {9, 9, 2, 0, 5}, {3, 1}})},
                {q, Value::batch(random_rows({3}, 5, 62))},
                {h0, Value::batch(random_rows({2}, 5, 63))},
                {c0, Value::batch(random_rows({2}, 5, 64))}};
};

struct Built {
    std::vector<Variable> outputs;
    std::vector<Parameter> parameters;
};

struct Case {
    const char* name;
    std::function<Built(const Inputs&)> build;
};

Built layer_on(const layers::Layer& layer, const Variable& x) {
    Variable y = layer(x);
    return {{y}, layer.parameters()};
}

template <class A>
Built attention_on(const A& a, std::vector<Parameter> ps = {}) {
    return {{a.context, a.weights}, std::move(ps)};
}

const std::vector<Case> cases = {
    {"Dense", [](const Inputs& i) { return layer_on(layers::Dense(4, layers::activations::tanh), i.s); }},
    {"Dense on a batch input",
     [](const Inputs& i) {
         return layer_on(layers::Dense({2, 2}), i.q);
     }},
    {"Embedding of ids", [](const Inputs& i) { return layer_on(layers::Embedding(3, 10), i.ids); }},
    {"Embedding of dense rows", [](const Inputs& i) { return layer_on(layers::Embedding(2), i.s); }},
    {"Recurrence(LSTM)", [](const Inputs& i) { return layer_on(layers::Recurrence(layers::LSTM(3)), i.s); }},
    {"Recurrence(LSTM with peepholes), backwards",
     [](const Inputs& i) { return layer_on(layers::Recurrence(layers::LSTM(2, true), true), i.s); }},
    {"Recurrence(GRU)", [](const Inputs& i) { return layer_on(layers::Recurrence(layers::GRU(3)), i.s); }},
    {"Recurrence(RNNStep) from 0.3",
     [](const Inputs& i) { return layer_on(layers::Recurrence(layers::RNNStep(2), false, Variable(0.3)), i.s); }},
    {"RecurrenceFrom(LSTM) with per-item initial states",
     [](const Inputs& i) {
         layers::RecurrenceFrom from(layers::LSTM(2));
         Variable y = from({i.h0, i.c0}, i.s);
         return Built{{y}, from.parameters()};
     }},
    {"Fold(LSTM)", [](const Inputs& i) { return layer_on(layers::Fold(layers::LSTM(2)), i.s); }},
    {"Fold(GRU), backwards", [](const Inputs& i) { return layer_on(layers::Fold(layers::GRU(2), true), i.s); }},
    {"BiRecurrence(LSTM, LSTM)",
     [](const Inputs& i) { return layer_on(layers::BiRecurrence(layers::LSTM(2), layers::LSTM(2)), i.s); }},
    {"Sequential(Dense, BiRecurrence(GRU, RNNStep), Dense)",
     [](const Inputs& i) {
         return layer_on(
             layers::Sequential({layers::Dense(3, layers::activations::relu),
                                 layers::BiRecurrence(layers::GRU(2), layers::RNNStep(2)), layers::Dense(2)}),
             i.s);
     }},
    {"Dropout (inference)", [](const Inputs& i) { return layer_on(layers::Dropout(0.5, 3), i.s); }},
    {"LayerNormalization", [](const Inputs& i) { return layer_on(layers::LayerNormalization(), i.s); }},
    {"sequence_softmax_attention (the seed's recurrence)",
     [](const Inputs& i) {
         layers::Layer score = layers::Dense(1);
         return attention_on(layers::sequence_softmax_attention(score(i.s), i.s), score.parameters());
     }},
    {"dot-product attention, one query per item",
     [](const Inputs& i) { return attention_on(layers::dot_product_attention(i.q, i.s, i.s)); }},
    {"scaled dot-product attention",
     [](const Inputs& i) { return attention_on(layers::scaled_dot_product_attention(i.q, i.s, i.s)); }},
    {"self-attention", [](const Inputs& i) { return attention_on(layers::self_attention(i.s)); }},
    {"causal self-attention", [](const Inputs& i) { return attention_on(layers::self_attention(i.s, true, true)); }},
    {"ParametricSelfAttention", [](const Inputs& i) { return layer_on(layers::ParametricSelfAttention(), i.s); }},
    {"ParametricSelfAttention, causal",
     [](const Inputs& i) { return layer_on(layers::ParametricSelfAttention(true), i.s); }},
    {"MultiHeadAttention",
     [](const Inputs& i) { return layer_on(layers::MultiHeadAttention(2, 4), layers::Dense(4)(i.s)); }},
    {"AdditiveAttention",
     [](const Inputs& i) {
         layers::AdditiveAttention additive(4);
         return attention_on(additive(i.q, i.s, i.s), additive.parameters());
     }},
    {"AdditiveAttention, a query sequence on another axis",
     [](const Inputs& i) {
         layers::AdditiveAttention additive(3);
         return attention_on(additive(i.other, i.s, i.s), additive.parameters());
     }},
    {"GeneralAttention",
     [](const Inputs& i) {
         layers::GeneralAttention general;
         return attention_on(general(i.other, i.s, i.s), general.parameters());
     }},
    {"LocalAttention",
     [](const Inputs& i) {
         layers::LocalAttention local(2.0);
         layers::Attention a = local(i.q, i.s);
         return Built{{a.context, a.weights, local.aligned_position()}, local.parameters()};
     }},
};

}  // namespace

TEST_CASE("every layer is batch invariant: values and gradients alone equal those in a batch") {
    for (const Case& c : cases) {
        Inputs inputs;
        Built b = c.build(inputs);
        randomize(b.parameters, 70);
        const InvarianceReport r = check_batch_invariance(b.outputs, inputs.in);
        INFO(c.name << ": " << r.str());
        CHECK(r.ok);
        CHECK(r.compared > 0);
        CHECK(r.orders == 3);
        CHECK_FALSE(r.gradients.variable.empty());  // gradients were compared too
    }
}

namespace {

// The seed 000 model as samples/qa_similarity/model.cpp builds it (small sizes): per side
// Embedding -> BiRecurrence(LSTM, LSTM) -> Dense, attention by the cumulative log-sum-exp
// recurrence, then the cosine of the two towers and the pairwise hinge loss.
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

struct Tower {
    layers::Layer embedding, encoder;
    Parameter attention_w;
    Tower(std::size_t vocab, std::size_t embed, std::size_t hidden, std::size_t dense, const std::string& name)
        : embedding(layers::Embedding(embed, vocab, glorot_uniform(), name + ".embedding")),
          encoder(layers::Sequential(
              {layers::BiRecurrence(layers::LSTM(hidden), layers::LSTM(hidden)), layers::Dense(dense)}, name)),
          attention_w(parameter({dense, 1}, glorot_normal(), name + ".attention_w")) {}
    Variable operator()(const Variable& ids) const {
        return log_sum_exp_attention(encoder(embedding(ids)), attention_w);
    }
    std::vector<Parameter> parameters() const {
        auto ps = embedding.parameters();
        layers::append_unique(ps, encoder.parameters());
        ps.push_back(attention_w);
        return ps;
    }
};

}  // namespace

TEST_CASE("the QA similarity model is batch invariant: cosine and hinge loss") {
    const std::size_t vocab = 30;
    Tower question_tower(vocab, 6, 4, 5, "question"), answer_tower(vocab, 6, 4, 5, "answer");
    Variable question = sequence::input_variable({1}, "question");
    Variable answer = sequence::input_variable({1}, "answer");
    Variable negative = sequence::input_variable({1}, "wrong_answer");
    Variable q = question_tower(question);
    Variable cosine = cosine_distance(q, answer_tower(answer), "cosine");
    Variable negative_cosine = cosine_distance(q, answer_tower(negative), "negative_cosine");
    Variable hinge = relu(constant(0.2) - cosine + negative_cosine);
    randomize(question_tower.parameters(), 80);
    randomize(answer_tower.parameters(), 90);
    // Questions 1-6 tokens, answers 2-9 (the sample's 5-20 and 10-40, scaled down).
    Bindings in{
        {question, Value::index_sequences({{3, 17, 5}, {8}, {1, 2, 3, 4, 5, 6}, {29, 0}, {11, 12, 13, 14}, {7, 7}})},
        {answer, Value::index_sequences({{4, 5, 6, 7, 8},
                                         {9, 10},
                                         {11, 12, 13, 14, 15, 16, 17, 18, 19},
                                         {20, 21, 22},
                                         {23, 24, 25, 26, 27, 28, 29},
                                         {1, 3}})},
        {negative,
         Value::index_sequences(
             {{2, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12}, {13, 14}, {15, 16, 17, 18, 19, 20}, {21, 22}, {0, 28, 27, 26}})}};
    InvarianceOptions options;
    options.shuffles = 2;
    const InvarianceReport r = check_batch_invariance({cosine, hinge}, in, options);
    MESSAGE("QA model: " << r.str());
    CHECK(r.ok);
    CHECK(r.items == 6);
    CHECK(r.orders == 4);
    CHECK(r.values.difference < 1e-12);
    CHECK(r.gradients.difference < 1e-10);

    // In float the items' products run through other kernels alone and in a batch: rounding only.
    options.precision = DType::f32;
    options.relative_tolerance = 1e-4;
    options.absolute_tolerance = 1e-6;
    const InvarianceReport f = check_batch_invariance({cosine, hinge}, in, options);
    MESSAGE("QA model in float: " << f.str());
    CHECK(f.ok);
    CHECK(f.compared == r.compared);
}
