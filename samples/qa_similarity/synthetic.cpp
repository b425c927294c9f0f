#include "synthetic.hpp"

#include <random>

namespace qa {

namespace {
class Generator {
public:
    explicit Generator(const SyntheticOptions& o) : o_(o), rng_(o.seed) {
        // Topic word lists come from their own generator so that train and eval data share them.
        std::mt19937_64 topic_rng(o.topic_seed * 7919 + 17);
        std::uniform_int_distribution<std::size_t> word(1, o.vocab - 1);
        topic_words_.resize(o.topics);
        for (auto& list : topic_words_)
            for (std::size_t i = 0; i < o.topic_words; ++i) list.push_back(word(topic_rng));
    }

    std::vector<std::string> sequence(std::size_t topic, std::size_t min_len, std::size_t max_len) {
        const std::size_t len = uniform(min_len, max_len);
        std::vector<std::string> out;
        for (std::size_t i = 0; i < len; ++i) {
            const bool from_topic = std::bernoulli_distribution(0.5)(rng_);
            const std::size_t id =
                from_topic ? topic_words_[topic][uniform(0, o_.topic_words - 1)] : uniform(1, o_.vocab - 1);
            out.push_back("w" + std::to_string(id));
        }
        return out;
    }

    std::size_t uniform(std::size_t lo, std::size_t hi) {
        return std::uniform_int_distribution<std::size_t>(lo, hi)(rng_);
    }

private:
    SyntheticOptions o_;
    std::mt19937_64 rng_;
    std::vector<std::vector<std::size_t>> topic_words_;
};
}  // namespace

loom::QaData make_synthetic(const SyntheticOptions& o) {
    Generator gen(o);
    loom::QaData data;
    data.source = "synthetic data (seed " + std::to_string(o.seed) + ")";
    for (std::size_t q = 0; q < o.questions; ++q) {
        const std::size_t topic = gen.uniform(0, o.topics - 1);
        auto question = gen.sequence(topic, o.q_min, o.q_max);
        // The true answer sits at a random position among the candidates.
        const std::size_t true_slot = gen.uniform(0, o.candidates - 1);
        for (std::size_t c = 0; c < o.candidates; ++c) {
            loom::QaPair pair;
            pair.question = question;
            pair.group = q;
            pair.line = data.pairs.size() + 1;
            if (c == true_slot) {
                pair.answer = gen.sequence(topic, o.a_min, o.a_max);
                for (std::size_t k = 0; k < o.copy && k < question.size(); ++k)
                    pair.answer[gen.uniform(0, pair.answer.size() - 1)] = question[gen.uniform(0, question.size() - 1)];
                pair.label = 1;
            } else {
                const std::size_t other = (topic + 1 + gen.uniform(0, o.topics - 2)) % o.topics;
                pair.answer = gen.sequence(other, o.a_min, o.a_max);
                pair.label = 0;
            }
            data.pairs.push_back(std::move(pair));
        }
    }
    data.num_groups = o.questions;
    return data;
}

}  // namespace qa
