#include "triplet_model.hpp"

namespace qa {

using namespace loom;

TripletModel::TripletModel(const ModelOptions& o) : Model(o) {
    const SequenceAxis negative_axis;
    question_negative_flags = sequence::input_variable({o.features}, "question_negative_flags", question_axis);
    negative = sequence::input_variable({1}, "wrong_answer", negative_axis);
    negative_flags = sequence::input_variable({o.features}, "wrong_answer_flags", negative_axis);
    const Tower& answer_side = o.shared ? question_tower : answer_tower;
    // Without flags the question's encoding is the same for both candidates: reuse it.
    Variable q = o.overlap_inputs ? question_tower(question, question_negative_flags) : question_vector;
    negative_cosine = cosine_distance(q, answer_side(negative, negative_flags), "negative_cosine");
    hinge_loss = relu(constant(o.margin) - cosine + negative_cosine);
    pair_correct = greater(cosine, negative_cosine);
}

}  // namespace qa
