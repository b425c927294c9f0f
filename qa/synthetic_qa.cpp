#include "qa/synthetic_qa.hpp"

#include <random>

#include "core/errors.hpp"

namespace loom {

QaData make_synthetic_qa(const SyntheticQaOptions& o) {
    if (o.vocab < 2 || o.topics < 2 || o.topic_words == 0 || o.candidates == 0 || o.q_min == 0 || o.a_min == 0 ||
        o.q_min > o.q_max || o.a_min > o.a_max)
        throw UserError(
            "make_synthetic_qa: needs vocab >= 2, topics >= 2, topic_words, candidates, q_min and a_min "
            ">= 1, q_min <= q_max and a_min <= a_max");
    // Topic word lists come from their own generator so that train and eval data share them.
    std::mt19937_64 topic_rng(o.topic_seed * 7919 + 17), rng(o.seed);
    std::uniform_int_distribution<std::size_t> word(1, o.vocab - 1);
    std::vector<std::vector<std::size_t>> topics(o.topics);
    for (auto& list : topics)
        for (std::size_t i = 0; i < o.topic_words; ++i) list.push_back(word(topic_rng));
    auto uniform = [&](std::size_t lo, std::size_t hi) {
        return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
    };
    auto sequence = [&](std::size_t topic, std::size_t min_len, std::size_t max_len) {
        std::vector<std::string> out(uniform(min_len, max_len));
        for (auto& w : out) {
            const bool from_topic = std::bernoulli_distribution(0.5)(rng);
            w = "w" +
                std::to_string(from_topic ? topics[topic][uniform(0, o.topic_words - 1)] : uniform(1, o.vocab - 1));
        }
        return out;
    };
    QaData data;
    data.source = "synthetic data (seed " + std::to_string(o.seed) + ")", data.num_groups = o.questions;
    for (std::size_t q = 0; q < o.questions; ++q) {
        const std::size_t topic = uniform(0, o.topics - 1);
        const auto question = sequence(topic, o.q_min, o.q_max);
        const std::size_t true_slot = uniform(0, o.candidates - 1);  // where the true answer sits
        for (std::size_t c = 0; c < o.candidates; ++c) {
            QaPair p{question, {}, c == true_slot, q, data.pairs.size() + 1};
            const bool is_true = c == true_slot;
            p.answer = sequence(is_true ? topic : (topic + 1 + uniform(0, o.topics - 2)) % o.topics, o.a_min, o.a_max);
            for (std::size_t k = 0; k < (is_true ? o.copy : o.distractor_copy) && k < question.size(); ++k)
                p.answer[uniform(0, p.answer.size() - 1)] = question[uniform(0, question.size() - 1)];
            data.pairs.push_back(std::move(p));
        }
    }
    return data;
}

}  // namespace loom
