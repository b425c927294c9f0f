#pragma once
// The sample's model (samples/qa_similarity/model.hpp) plus what the study trains it with besides
// the sample's listwise loss: the hinge ranking loss on (question, true answer, wrong answer).
#include "model.hpp"

namespace qa {

struct TripletModel : Model {
    explicit TripletModel(const ModelOptions& o);
    // The wrong answer and, with overlap inputs, the flags of the question against it and of it
    // against the question (a question's flags differ per candidate, so it is encoded twice).
    loom::Variable negative, question_negative_flags, negative_flags;
    // max(0, margin - cos(q, a+) + cos(q, a-)), and whether cos(q, a+) > cos(q, a-).
    loom::Variable negative_cosine, hinge_loss, pair_correct;
};

}  // namespace qa
